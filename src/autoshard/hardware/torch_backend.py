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

- ``exact_sgd``: ``weight[i] -= lr * (sum of the gradient rows of every lookup of row i)``, with
  ``index_add_`` (duplicates summed).
- ``rowwise_adagrad`` (FBGEMM's ``EXACT_ROWWISE_ADAGRAD``): per touched row, ``g`` = the summed gradient row,
  ``state[i] += mean(g ** 2)``, ``weight[i] -= lr / (sqrt(state[i]) + eps) * g``.

On CUDA, an op with shards of several distinct dims reads the ``T + 1`` table boundaries of ``offsets`` to the
host once per forward (a small synchronisation); one distinct dim needs none. fp16 weights are updated in
fp16 (round to nearest; FBGEMM rounds stochastically), which changes no timing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F

from autoshard.errors import AutoshardError
from autoshard.hardware.kernel import Optimizer, _enum

DEFAULT_LEARNING_RATE = 0.01
"""FBGEMM TBE's default learning rate."""
DEFAULT_EPS = 1.0e-8
"""FBGEMM TBE's default eps (row-wise Adagrad's denominator term); tests check it against FBGEMM."""
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

    ``rows[t]`` and ``dims[t]`` describe shard ``t``; ``optimizer`` is an ``Optimizer`` (or its value);
    ``dtype`` is the weights' (float32 or float16); ``device`` is where everything lives (cpu or cuda).
    Call it as ``out = module(indices, offsets)`` then ``out.backward(grad)``, which updates the weights.
    """

    def __init__(self, rows: Sequence[int], dims: Sequence[int],
                 optimizer: Optimizer | str = Optimizer.EXACT_SGD, *,
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
        self.optimizer = _enum(Optimizer, optimizer, "optimizer")
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
        if self.optimizer is Optimizer.ROWWISE_ADAGRAD:
            for k, g in enumerate(self.groups):
                self.register_buffer(f"momentum{k}", torch.zeros(g.rows, dtype=torch.float32, device=device))
                self.momenta.append(getattr(self, f"momentum{k}"))
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
        if len(self.groups) == 1:
            g = self.groups[0]
            if self.num_tables > 1:  # shift each table's indices by its row offset, on device (no host sync)
                bounds = offsets[::batch]
                table_of = torch.repeat_interleave(torch.arange(self.num_tables, device=dev), bounds.diff(),
                                                   output_size=indices.numel())
                indices = indices + self.row_shift[table_of]
            pooled = F.embedding_bag(indices, self.weights[0], offsets, mode="sum", include_last_offset=True)
            out = pooled.view(self.num_tables, batch, g.dim).transpose(0, 1).reshape(batch, self.total_dim)
            plan.append((0, indices, offsets, batch))
            return out.float(), plan
        bounds = offsets[::batch].tolist()  # T + 1 table boundaries in indices
        pieces: list[torch.Tensor] = [torch.empty(0)] * self.num_tables
        for k, g in enumerate(self.groups):
            idx_parts, off_parts, base = [], [], 0
            for t, row_off in zip(g.tables, g.row_offsets):
                lo, hi = bounds[t], bounds[t + 1]
                idx_parts.append(indices[lo:hi] + row_off if row_off else indices[lo:hi])
                off_parts.append(offsets[t * batch:(t + 1) * batch] + (base - lo))
                base += hi - lo
            off_parts.append(torch.tensor([base], dtype=torch.int64, device=dev))
            idx_g = idx_parts[0] if len(idx_parts) == 1 else torch.cat(idx_parts)
            off_g = torch.cat(off_parts)
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
        on every step, which cost more than the update itself (measured: ~30 ms per 86 MB at 1 thread).
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
            chunk = rows.numel() if grad.is_cuda else max(1, CPU_CHUNK_BYTES // (4 * g.dim))
            for a in range(0, rows.numel(), chunk):
                b = min(a + chunk, rows.numel())
                if (a, b) == (0, rows.numel()):
                    r, seg, lookups = rows, segments, bags
                else:
                    lo, hi = int(segments[a]), int(segments[b])
                    r, seg, lookups = rows[a:b], segments[a:b + 1] - lo, bags[lo:hi]
                summed = F.embedding_bag(lookups, grad_g, seg, mode="sum", include_last_offset=True)
                self._apply_rows(k, r.long(), summed)

    def _apply_rows(self, k: int, rows: torch.Tensor, summed: torch.Tensor) -> None:
        """The optimizer step of group ``k``'s distinct ``rows``, given each one's summed gradient row."""
        w = self.weights[k]
        if self.optimizer is Optimizer.EXACT_SGD:
            w.index_add_(0, rows, summed.to(w.dtype), alpha=-self.learning_rate)
            return
        state = self.momenta[k]
        new_state = state.index_select(0, rows) + summed.square().mean(dim=1)
        state.index_copy_(0, rows, new_state)
        step = summed * (self.learning_rate / (new_state.sqrt() + self.eps)).unsqueeze(1)
        w.index_add_(0, rows, step.to(w.dtype), alpha=-1.0)


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
