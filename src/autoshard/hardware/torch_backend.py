"""A torch-only stand-in for FBGEMM's fused table-batched embedding bag, for hosts without fbgemm_gpu.

``FusedEmbeddingBags`` holds the shards one device owns and takes the SAME inputs as FBGEMM's
``SplitTableBatchedEmbeddingBagsCodegen`` (TBE): ``indices`` of all tables concatenated table-major and
``offsets`` of length ``T * B + 1`` (table t's bag b is ``indices[offsets[t*B + b]:offsets[t*B + b + 1]]``).
It returns the sum-pooled ``(B, sum of dims)`` float32 output in shard order, like the TBE with
``PoolingMode.SUM`` and ``output_dtype=FP32``.

Storage: one 2-D weight per DISTINCT dim, holding the rows of every shard of that dim concatenated (a shard is
a row range of it, at a fixed row offset), and one ``torch.nn.functional.embedding_bag(mode="sum")`` per
distinct dim over that group's indices shifted by the row offsets. Per distinct dim rather than padding every
shard to the widest dim: padding would make narrow shards move (and update) the wide shards' bytes, which
distorts exactly the memory traffic being timed; a device usually holds one or a few distinct dims, so the
extra kernel launches are few.

Backward applies the optimizer in place and returns no weight gradient, as the TBE's fused backward does:

- ``exact_sgd``: ``weight[i] -= lr * (sum of the gradient rows of every lookup of row i)``: the lookups are
  sorted by row, each row's gradient rows summed (duplicates summed before the update, as FBGEMM's exact
  kernels do), and the scaled sums applied with one ``index_add_`` over the distinct rows.
- ``rowwise_adagrad`` (FBGEMM's ``EXACT_ROWWISE_ADAGRAD``): per touched row, ``g`` = the summed gradient row,
  ``state[i] += mean(g ** 2)``, ``weight[i] -= lr / (sqrt(state[i]) + eps) * g``.

On CUDA the per-row sums of the backward are made in pieces of at most ``SEGMENT_PIECE`` lookups
(``_segment_sums``): a row looked up a million times would otherwise be summed by one warp.

The forward reads the ``T + 1`` table boundaries of ``offsets`` to the host (free on CPU; on CUDA a small
synchronisation, made only when the shards have several distinct dims). fp16 weights are updated in fp16
(round to nearest; FBGEMM rounds stochastically), which changes no timing.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum
from typing import Any

import torch
import torch.nn.functional as F

from autoshard.errors import AutoshardError

EXACT_SGD = "exact_sgd"
ROWWISE_ADAGRAD = "rowwise_adagrad"
"""The optimizers, by the values of ``hardware.kernel.Optimizer`` (a str Enum, so its members compare equal
to these; not imported from there, since kernel imports this module)."""

DEFAULT_LEARNING_RATE = 0.01
"""FBGEMM TBE's default learning rate."""
DEFAULT_EPS = 1.0e-8
"""FBGEMM TBE's default eps (row-wise Adagrad's denominator term); tests check it against FBGEMM."""
SEGMENT_PIECE = 64
"""Most lookups of one row summed by one bag of the CUDA backward's segment sum (``_segment_sums``)."""
CPU_CHUNK_BYTES = 2 * 2**20
"""Summed-gradient rows handled at a time in the CPU backward (see ``FusedEmbeddingBags._update``)."""


class _Group:
    """The shards of one distinct dim: their tables (in shard order) and row offsets in the group's weight."""

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self.tables: list[int] = []
        self.row_offsets: list[int] = []
        self.rows = 0


class FusedEmbeddingBags(torch.nn.Module):
    """All of one device's shards as one fused embedding-bag op, forward plus optimizer-fused backward.

    ``rows[t]`` and ``dims[t]`` describe shard ``t``; ``optimizer`` is a ``kernel.Optimizer`` or its value;
    ``dtype`` is the weights' (float32 or float16); ``device`` is where everything lives (cpu or cuda).
    Call it as ``out = module(indices, offsets)`` then ``out.backward(grad)``, which updates the weights.
    """

    def __init__(self, rows: Sequence[int], dims: Sequence[int],
                 optimizer: str = EXACT_SGD, *,
                 learning_rate: float = DEFAULT_LEARNING_RATE, eps: float = DEFAULT_EPS,
                 dtype: torch.dtype = torch.float32, device: torch.device | str | None = None) -> None:
        super().__init__()
        rows, dims = [int(r) for r in rows], [int(d) for d in dims]
        if not rows or len(rows) != len(dims):
            raise AutoshardError(f"need one row count per dim and at least one shard; got {len(rows)} rows "
                                 f"and {len(dims)} dims")
        if min(rows) <= 0 or min(dims) <= 0:
            raise AutoshardError(f"shard rows {rows} and dims {dims} must all be positive")
        if dtype not in (torch.float32, torch.float16):
            raise AutoshardError(f"weights dtype {dtype} unsupported; use torch.float32 or torch.float16")
        self.optimizer = str(optimizer.value if isinstance(optimizer, Enum) else optimizer)
        if self.optimizer not in (EXACT_SGD, ROWWISE_ADAGRAD):
            raise AutoshardError(f"optimizer {optimizer!r} unknown; use {EXACT_SGD!r} or {ROWWISE_ADAGRAD!r}")
        self.learning_rate = float(learning_rate)
        self.eps = float(eps)
        self.rows, self.dims = tuple(rows), tuple(dims)
        self.num_tables = len(rows)
        self.col_offsets = [sum(dims[:t]) for t in range(self.num_tables)]
        self.total_dim = sum(dims)
        groups: dict[int, _Group] = {}
        self.table_group: list[int] = []  # index into self.groups of each shard
        self.table_row_offset: list[int] = []  # row offset of each shard within its group's weight
        for t, (r, d) in enumerate(zip(rows, dims)):
            g = groups.setdefault(d, _Group(d))
            g.tables.append(t)
            g.row_offsets.append(g.rows)
            self.table_group.append(list(groups).index(d))
            self.table_row_offset.append(g.rows)
            g.rows += r
        self.groups = list(groups.values())
        self.weights = torch.nn.ParameterList(
            torch.nn.Parameter(torch.zeros(g.rows, g.dim, dtype=dtype, device=device)) for g in self.groups)
        # row-wise Adagrad: one fp32 state per row (FBGEMM keeps momentum1 in fp32 too)
        self.momenta: list[torch.Tensor] = []
        if self.optimizer == ROWWISE_ADAGRAD:
            for k, g in enumerate(self.groups):
                self.register_buffer(f"momentum{k}", torch.zeros(g.rows, dtype=torch.float32, device=device))
                self.momenta.append(getattr(self, f"momentum{k}"))
        # one distinct dim: shift the indices by device kernels even on CPU (CUDA always does; tests set it)
        self.shift_on_device = False
        # the backward's segment sums in pieces of at most SEGMENT_PIECE lookups (CUDA always; tests set it)
        self.split_long_segments = False
        shift = torch.tensor(self.table_row_offset, dtype=torch.int64, device=device)
        self.register_buffer("row_shift", shift, persistent=False)

    def _apply(self, fn: Any, recurse: bool = True) -> FusedEmbeddingBags:
        super()._apply(fn, recurse)  # .to(device) replaces the buffers: refresh the list of momenta
        self.momenta = [getattr(self, f"momentum{k}") for k in range(len(self.momenta))]
        return self

    # -- weights and state, as the TBE exposes them -------------------------------------------------------
    def split_embedding_weights(self) -> list[torch.Tensor]:
        """One (rows, dim) view per shard, in shard order; writing to a view writes the weights."""
        return [self.weights[g].detach()[o:o + r]
                for g, o, r in zip(self.table_group, self.table_row_offset, self.rows)]

    def split_optimizer_states(self) -> list[torch.Tensor]:
        """Row-wise Adagrad's per-row state (a view per shard, shard order); empty for SGD."""
        if not self.momenta:
            return []
        spans = zip(self.table_group, self.table_row_offset, self.rows)
        return [self.momenta[g][o:o + r] for g, o, r in spans]

    @torch.no_grad()
    def init_embedding_weights_uniform(self, min_val: float, max_val: float) -> None:
        for w in self.weights:
            w.uniform_(min_val, max_val)

    # -- the op ------------------------------------------------------------------------------------------
    def forward(self, indices: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        return _FusedLookup.apply(self, indices, offsets, *self.weights)

    def _lookup(self, indices: torch.Tensor, offsets: torch.Tensor) -> tuple[torch.Tensor, list[Any]]:
        """Pooled output (B, total_dim) and, per group, what backward needs: (group, indices, offsets, B)."""
        n_bags = offsets.numel() - 1
        if offsets.dim() != 1 or indices.dim() != 1 or n_bags < 0 or n_bags % self.num_tables:
            raise AutoshardError(f"offsets of length {offsets.numel()} do not fit {self.num_tables} tables: "
                                 f"use 1-D indices and offsets of length T * batch + 1")
        batch = n_bags // self.num_tables
        dev = self.weights[0].device
        indices, offsets = indices.to(dev, torch.int64), offsets.to(dev, torch.int64)
        if batch == 0:
            return torch.zeros(0, self.total_dim, device=dev), []
        plan: list[Any] = []
        if len(self.groups) == 1 and (indices.is_cuda or self.shift_on_device):
            # shift each table's indices by its row offset on the device: no host sync, a few kernels
            g = self.groups[0]
            if self.num_tables > 1:
                bounds = offsets[::batch]
                table_of = torch.repeat_interleave(torch.arange(self.num_tables, device=dev), bounds.diff(),
                                                   output_size=indices.numel())
                indices = indices + self.row_shift[table_of]
            pooled = F.embedding_bag(indices, self.weights[0], offsets, mode="sum", include_last_offset=True)
            out = pooled.view(self.num_tables, batch, g.dim).transpose(0, 1).reshape(batch, self.total_dim)
            plan.append((0, indices, offsets, batch))
            return out.float(), plan
        # the T + 1 table boundaries in indices, on the host (free on CPU): each table's slice is copied
        # once into its group's index array, shifted by its row offset (on CPU the shift by device kernels
        # above took 3.5 ms per 400k lookups, a third of the forward)
        bounds = offsets[::batch].tolist()
        pieces: list[torch.Tensor] = [torch.empty(0)] * self.num_tables
        for k, g in enumerate(self.groups):
            sizes = [bounds[t + 1] - bounds[t] for t in g.tables]
            if len(g.tables) == 1:
                lo, hi = bounds[g.tables[0]], bounds[g.tables[0] + 1]
                idx_g = indices[lo:hi]  # the group's only table starts at row 0
                off_g = offsets[g.tables[0] * batch:(g.tables[0] + 1) * batch + 1] - lo
            else:
                idx_g = torch.empty(sum(sizes), dtype=torch.int64, device=dev)
                contiguous = g.tables == list(range(self.num_tables))  # every table, in order
                off_g = offsets if contiguous else torch.empty(len(g.tables) * batch + 1, dtype=torch.int64,
                                                                device=dev)
                base = 0
                for j, (t, row_off, n) in enumerate(zip(g.tables, g.row_offsets, sizes)):
                    lo = bounds[t]
                    torch.add(indices[lo:lo + n], row_off, out=idx_g[base:base + n])
                    if not contiguous:
                        torch.add(offsets[t * batch:(t + 1) * batch], base - lo,
                                  out=off_g[j * batch:(j + 1) * batch])
                    base += n
                if not contiguous:
                    off_g[-1] = base
            pooled = F.embedding_bag(idx_g, self.weights[k], off_g, mode="sum", include_last_offset=True)
            for j, t in enumerate(g.tables):
                pieces[t] = pooled[j * batch:(j + 1) * batch]
            plan.append((k, idx_g, off_g, batch))
        return torch.cat(pieces, dim=1).float(), plan

    @torch.no_grad()
    def _update(self, grad: torch.Tensor, plan: list[Any]) -> None:
        """Apply the optimizer for the lookups in ``plan`` given the output gradient (B, total_dim).

        As FBGEMM's exact backward does: sort the lookups by row, sum each row's gradient rows (a segment sum,
        done by ``embedding_bag`` over the table-major output gradient), then update each touched row once.
        On CPU the rows are processed in chunks of ``CPU_CHUNK_BYTES`` of gradient: one (rows, dim) buffer
        per device's lookups would be tens of MB, and freshly allocated memory that large is page-faulted in
        on every step, which cost more than the update itself (measured: ~30 ms per 86 MB at 1 thread). On
        CUDA (or with ``split_long_segments``) every row at once, its sum made in pieces (``_segment_sums``).
        """
        grad = grad.to(torch.float32).contiguous()
        for k, idx, off, batch in plan:
            g = self.groups[k]
            n_tables = len(g.tables)
            if n_tables == self.num_tables:  # every shard: the table-major view of the whole gradient
                grad_g = grad.view(batch, n_tables, g.dim).transpose(0, 1).reshape(n_tables * batch, g.dim)
            else:
                cols = [grad[:, self.col_offsets[t]:self.col_offsets[t] + g.dim] for t in g.tables]
                grad_g = torch.stack(cols).view(n_tables * batch, g.dim)
            if idx.numel() == 0:
                continue
            bag_of = torch.repeat_interleave(torch.arange(n_tables * batch, device=grad.device), off.diff(),
                                             output_size=idx.numel())
            # int32 keys sort about twice as fast; stable keeps each row's sum in lookup order (deterministic)
            keys = idx.int() if g.rows < 2**31 else idx
            sorted_rows, order = torch.sort(keys, stable=True)
            rows, counts = torch.unique_consecutive(sorted_rows, return_counts=True)
            segments = torch.cat([counts.new_zeros(1), counts.cumsum(0)])
            bags = bag_of.index_select(0, order)
            if grad.is_cuda or self.split_long_segments:
                self._apply_rows(k, rows.long(), _segment_sums(bags, grad_g, counts, segments))
                continue
            chunk = max(1, CPU_CHUNK_BYTES // (4 * g.dim))
            for a in range(0, rows.numel(), chunk):
                b = min(a + chunk, rows.numel())
                lo, hi = int(segments[a]), int(segments[b])
                r, seg, lookups = rows[a:b], segments[a:b + 1] - lo, bags[lo:hi]
                summed = F.embedding_bag(lookups, grad_g, seg, mode="sum", include_last_offset=True)
                self._apply_rows(k, r.long(), summed)

    def _apply_rows(self, k: int, rows: torch.Tensor, summed: torch.Tensor) -> None:
        """The optimizer step of group ``k``'s distinct ``rows``, given each one's summed gradient row."""
        # index_add_ without alpha (the step is scaled first): with alpha torch's CPU index_add_ loops row by
        # row, without it runs as one scatter_add_ (measured 28.7 vs 12.1 ms for 134k rows of 64)
        w = self.weights[k]
        if self.optimizer == EXACT_SGD:
            w.index_add_(0, rows, summed.mul_(-self.learning_rate).to(w.dtype))
            return
        state = self.momenta[k]
        new_state = state.index_select(0, rows) + summed.square().mean(dim=1)
        state.index_copy_(0, rows, new_state)
        step = summed.mul_((-self.learning_rate / (new_state.sqrt() + self.eps)).unsqueeze(1))
        w.index_add_(0, rows, step.to(w.dtype))


def _segment_sums(bags: torch.Tensor, grad_rows: torch.Tensor, counts: torch.Tensor,
                  segments: torch.Tensor) -> torch.Tensor:
    """Per distinct row, the sum of the gradient rows ``grad_rows[bags[j]]`` of its lookups (row ``i``'s are
    ``bags[segments[i]:segments[i + 1]]``, ``counts[i]`` of them), summed in pieces of at most
    ``SEGMENT_PIECE`` lookups, then the pieces added per row.

    Why pieces: ``embedding_bag`` on CUDA sums a bag sequentially, one warp per bag, so a row looked up a
    million times in a batch (a power-law table whose ids almost all hit one row) took ~150 ms where the
    forward took 1 ms (the DLRM-50 pool at batch 16384 on an H200). FBGEMM's backward and torch's own
    embedding backward split long segments the same way."""
    pieces_per_row = (counts + SEGMENT_PIECE - 1) // SEGMENT_PIECE
    n_pieces = int(pieces_per_row.sum())
    row_of_piece = torch.repeat_interleave(torch.arange(counts.numel(), device=counts.device), pieces_per_row,
                                           output_size=n_pieces)
    first_piece = pieces_per_row.cumsum(0) - pieces_per_row  # each row's first piece
    k_in_row = torch.arange(n_pieces, device=counts.device) - first_piece[row_of_piece]
    starts = segments[:-1][row_of_piece] + k_in_row * SEGMENT_PIECE
    offsets = torch.cat([starts, segments[-1:]])
    partial = F.embedding_bag(bags, grad_rows, offsets, mode="sum", include_last_offset=True)
    summed = torch.zeros(counts.numel(), grad_rows.shape[1], dtype=partial.dtype, device=partial.device)
    return summed.index_add_(0, row_of_piece, partial)


class _FusedLookup(torch.autograd.Function):
    """Forward: the pooled lookups. Backward: the optimizer update in place; no gradient flows to weights."""

    @staticmethod
    def forward(ctx: Any, module: FusedEmbeddingBags, indices: torch.Tensor, offsets: torch.Tensor,
                *weights: torch.Tensor) -> torch.Tensor:
        out, plan = module._lookup(indices, offsets)
        ctx.module, ctx.plan, ctx.num_weights = module, plan, len(weights)
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[None, ...]:
        if ctx.plan is None:
            raise AutoshardError("this lookup's optimizer step was already applied; run the forward again")
        ctx.module._update(grad, ctx.plan)
        ctx.plan = None  # free the saved indices; a second backward would apply the step twice
        return (None,) * (3 + ctx.num_weights)
