"""Run sequence-table placements for real: D local processes (``run_on_ranks``, gloo on CPU), each holding its
rows, exchanging ids, vectors and gradients with uneven all-to-alls; and time the replicas' all-reduce.

SEMANTICS of one training step of a sequence table under a :class:`SequencePlacement` (FlexShard, and
row_wise, table_row_wise, table_wise as special cases), ids in frequency-rank space:

- every rank holds the rows of each tier copy it belongs to (``SequencePlacement.held_rows``): its replicas
  (tiers A and B) and its shard rows (tier C), as one fp32 (rows, dim) block;
- forward: for its ids (a flat array: a KeyedJaggedTensor's values, the lengths are not needed to look
  vectors up) each rank finds the serving rank (``SequencePlacement.servers``: its own replica if it holds
  the row, else the owner in the copy it routes to). Ids it serves itself are read locally; the others are
  grouped by server (stable order) and sent with an uneven ``all_to_all_single`` (after an all-to-all of
  the counts); each server gathers the vectors and returns them with the reverse all-to-all; the output is
  the (ids, dim) matrix in the original order;
- backward: given the output's gradient, each rank adds the gradients of the ids it served itself to a
  (local rows, dim) gradient buffer and sends the others back to their servers (the reverse all-to-all),
  which add them to theirs. Then every block of replicated rows all-reduces (SUM) its gradient buffer over
  its replica group (the ranks holding the same rows: all D for tier A, the H ranks of one local position
  for tier B), so every copy sees the gradient of the whole step;
- update: plain SGD on every held row, ``w -= lr * grad`` with the SUMMED gradient (the gradient of
  ``sum over all ranks and ids of <output, upstream gradient>``), identically on every copy, so replicas
  stay equal. This is what ``torch.nn.Embedding`` + ``torch.optim.SGD`` compute on the concatenated batch.

Everything is deterministic: fixed routing, stable sorts, rank-ordered all-to-alls, and one thread per rank.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from autoshard.costs.sequence_traffic import SequencePlacement
from autoshard.errors import AutoshardError
from autoshard.hardware.multiprocess import DEFAULT_TIMEOUT_S, RankContext, run_on_ranks


@dataclass(frozen=True)
class SequenceRunResult:
    """What a run of one placement produced, gathered from every rank."""

    outputs: tuple[tuple[np.ndarray, ...], ...]
    """outputs[step][rank]: the (ids, dim) vectors rank ``rank`` looked up in step ``step``."""
    weight: np.ndarray
    """(rows, dim) the trained table, each row from the first rank holding it."""
    replica_spread: float
    """Largest absolute difference between two copies of any row (0.0: replicas stayed identical)."""


class _Shard:
    """One rank's rows of one placement: global ranks, an fp32 block, and its replica blocks."""

    def __init__(self, placement: SequencePlacement, rank: int, weight: Any) -> None:
        import torch

        held = placement.held_rows(rank)
        self.rows = np.concatenate([r for _, _, r in held]) if held else np.zeros(0, np.int64)
        self.order = np.argsort(self.rows, kind="stable")
        self.sorted = self.rows[self.order]
        self.weight = weight[torch.from_numpy(self.rows)].clone() if len(self.rows) else \
            torch.zeros((0, weight.shape[1]), dtype=weight.dtype)
        self.blocks: list[tuple[int, int, tuple[int, ...]]] = []  # (first local row, end, replica group)
        at = 0
        for tier, j, r in held:
            if len(tier.copies) > 1:
                self.blocks.append((at, at + len(r), tuple(sorted(c[j] for c in tier.copies))))
            at += len(r)

    def local(self, ids: np.ndarray) -> Any:
        """Local row index of each global frequency rank (which this rank must hold)."""
        import torch

        pos = np.searchsorted(self.sorted, ids)
        if len(ids) and (pos.max(initial=0) >= len(self.sorted) or np.any(self.sorted[pos] != ids)):
            raise AutoshardError("sequence runtime: a rank was asked for a row it does not hold")
        return torch.from_numpy(self.order[pos])


def _replica_groups(placements: Sequence[SequencePlacement], world: int) -> dict[tuple[int, ...], Any]:
    """A process group for every replica group of the placements (created by every rank, same order)."""
    import torch.distributed as dist

    wanted: set[tuple[int, ...]] = set()
    for p in placements:
        for t in p.tiers:
            if len(t.copies) > 1:
                wanted.update(tuple(sorted(g)) for g in t.groups())
    out: dict[tuple[int, ...], Any] = {}
    for g in sorted(wanted):
        if len(g) == world:
            out[g] = None  # the default group
        elif len(g) > 1:
            out[g] = dist.new_group(list(g))
    return out


def _exchange(send: Any, send_counts: list[int], recv_counts: list[int]) -> Any:
    """Uneven all-to-all along dim 0: ``send`` rows grouped by destination -> rows grouped by source."""
    import torch
    import torch.distributed as dist

    out = torch.empty((sum(recv_counts), *send.shape[1:]), dtype=send.dtype)
    dist.all_to_all_single(out, send.contiguous(), recv_counts, send_counts)
    return out


def _step(ctx: RankContext, placement: SequencePlacement, shard: _Shard, groups: dict[tuple[int, ...], Any],
          ids_np: np.ndarray, grad_np: np.ndarray, lr: float) -> np.ndarray:
    """One forward + backward + SGD step of this rank (module docstring); its output."""
    import torch
    import torch.distributed as dist

    d, r = ctx.world_size, ctx.rank
    dim = shard.weight.shape[1]
    ids_np = np.asarray(ids_np, dtype=np.int64)
    server = placement.servers(r, ids_np)
    mine = server == r
    remote = np.flatnonzero(~mine)
    remote = remote[np.argsort(server[remote], kind="stable")]  # grouped by server, original order within
    send_counts = np.bincount(server[remote], minlength=d).astype(np.int64)
    recv_t = torch.empty(d, dtype=torch.int64)
    dist.all_to_all_single(recv_t, torch.from_numpy(send_counts))
    sc, rc = [int(x) for x in send_counts], [int(x) for x in recv_t.tolist()]
    asked = _exchange(torch.from_numpy(ids_np[remote]), sc, rc).numpy()  # ids others want from me
    asked_local = shard.local(asked)
    own = np.flatnonzero(mine)
    own_local = shard.local(ids_np[own])
    out = torch.empty((len(ids_np), dim), dtype=torch.float32)
    out[torch.from_numpy(own)] = shard.weight[own_local]
    out[torch.from_numpy(remote)] = _exchange(shard.weight[asked_local], rc, sc)
    result = out.numpy().copy()

    grad = torch.from_numpy(np.asarray(grad_np, dtype=np.float32))
    buf = torch.zeros_like(shard.weight)
    buf.index_add_(0, own_local, grad[torch.from_numpy(own)])
    back = _exchange(grad[torch.from_numpy(remote)], sc, rc)
    buf.index_add_(0, asked_local, back)
    for start, end, group in shard.blocks:
        if len(group) > 1:
            dist.all_reduce(buf[start:end], group=groups[group])
    shard.weight -= lr * buf
    return result


def _train_rank(ctx: RankContext, weight: np.ndarray, placements: list[SequencePlacement],
                batches: list[list[np.ndarray]], grads: list[list[np.ndarray]], lr: float) -> list[Any]:
    import torch

    torch.set_num_threads(1)
    groups = _replica_groups(placements, ctx.world_size)
    w = torch.from_numpy(np.ascontiguousarray(weight, dtype=np.float32))
    results = []
    for p in placements:
        shard = _Shard(p, ctx.rank, w)
        outs = [_step(ctx, p, shard, groups, batches[s][ctx.rank], grads[s][ctx.rank], lr)
                for s in range(len(batches))]
        results.append((outs, shard.rows, shard.weight.numpy().copy()))
    return results


def train_sequence_plans(weight: np.ndarray, placements: Sequence[SequencePlacement],
                         batches: Sequence[Sequence[np.ndarray]], grads: Sequence[Sequence[np.ndarray]],
                         lr: float, timeout_s: float = DEFAULT_TIMEOUT_S) -> list[SequenceRunResult]:
    """Train each placement from ``weight`` (rows, dim) for ``len(batches)`` SGD steps on D processes (one
    start for all placements): ``batches[step][rank]`` the ids rank ``rank`` looks up, ``grads[step][rank]``
    the (ids, dim) upstream gradient of its output. One result per placement."""
    if not placements:
        return []
    world = placements[0].num_devices
    rows = weight.shape[0]
    if any(p.num_devices != world or p.rows != rows for p in placements):
        raise AutoshardError(f"sequence runtime: every placement needs {world} devices and {rows} rows")
    if any(len(b) != world for b in batches) or len(grads) != len(batches):
        raise AutoshardError(f"sequence runtime: give ids and gradients for each of the {world} ranks "
                             "per step")
    args = (np.asarray(weight, dtype=np.float32), list(placements), [list(b) for b in batches],
            [list(g) for g in grads], float(lr))
    per_rank = run_on_ranks(_train_rank, world, args, timeout_s=timeout_s,
                            what=f"sequence-table training on {world} ranks")
    out = []
    for k in range(len(placements)):
        full = np.full(weight.shape, np.nan, dtype=np.float32)
        spread = 0.0
        for r in range(world):
            _, held, w = per_rank[r][k]
            seen = ~np.isnan(full[held, 0])
            if seen.any():
                spread = max(spread, float(np.abs(full[held[seen]] - w[seen]).max()))
            full[held[~seen]] = w[~seen]
        if np.isnan(full).any():
            raise AutoshardError("sequence runtime: some rows are held by no rank")
        outputs = tuple(tuple(per_rank[r][k][0][s] for r in range(world)) for s in range(len(batches)))
        out.append(SequenceRunResult(outputs, full, spread))
    return out


# ------------------------------------------------------------------------------------------ sync timing
@dataclass(frozen=True)
class SyncTiming:
    """Measured time of the replicas' gradient all-reduce of one step (every table's replicated rows)."""

    bytes_per_rank: tuple[int, ...]
    """fp32 gradient bytes each rank all-reduces (summed over its replica groups)."""
    ms: float
    """Median over runs of the slowest rank's time."""
    runs_ms: tuple[float, ...]


def _sync_worker(ctx: RankContext, buffers: dict[tuple[int, ...], int], warmup: int,
                 repeats: int) -> list[float]:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    handles: dict[tuple[int, ...], Any] = {}
    for g in sorted(buffers):
        if len(g) == ctx.world_size:
            handles[g] = None
        elif len(g) > 1:
            handles[g] = dist.new_group(list(g))
    mine = [(g, torch.ones(n, dtype=torch.float32)) for g, n in sorted(buffers.items())
            if ctx.rank in g and len(g) > 1 and n > 0]
    runs = []
    for k in range(warmup + repeats):
        dist.barrier()
        t0 = time.perf_counter()
        for g, t in mine:
            dist.all_reduce(t, group=handles[g])
        t1 = time.perf_counter()
        if k >= warmup:
            runs.append((t1 - t0) * 1e3)
    dist.barrier()
    return runs


def replica_buffers(items: Sequence[tuple[int, SequencePlacement]]) -> dict[tuple[int, ...], int]:
    """fp32 elements every replica group all-reduces per step, for (dim, placement) pairs (one bucket per
    group, like DDP's buckets)."""
    out: dict[tuple[int, ...], int] = {}
    for dim, p in items:
        for t in p.tiers:
            if len(t.copies) > 1:
                for j, g in enumerate(t.groups()):
                    key = tuple(sorted(g))
                    out[key] = out.get(key, 0) + t.rows_at(j) * int(dim)
    return out


def measure_replica_sync(items: Sequence[tuple[int, SequencePlacement]], *, warmup: int = 2,
                         repeats: int = 10, timeout_s: float = DEFAULT_TIMEOUT_S) -> SyncTiming:
    """Time the step's dense all-reduce of every replicated row's gradient with
    ``torch.distributed.all_reduce`` on D local gloo processes: one fp32 bucket per replica group, the
    groups a rank belongs to in turn; ranks meet at a barrier before each run; per run the slowest rank's
    time, median over runs."""
    if not items:
        raise AutoshardError("replica sync: no placements")
    world = items[0][1].num_devices
    buffers = replica_buffers(items)
    per_rank = np.zeros(world, dtype=np.int64)
    for g, n in buffers.items():
        if len(g) > 1:
            per_rank[list(g)] += 4 * n
    if world == 1 or not per_rank.any():
        return SyncTiming(tuple(int(x) for x in per_rank), 0.0, (0.0,) * repeats)
    runs = run_on_ranks(_sync_worker, world, (buffers, warmup, repeats), timeout_s=timeout_s,
                        what=f"replica all-reduce on {world} ranks")
    slowest = np.max(np.array(runs, dtype=np.float64), axis=0)
    return SyncTiming(tuple(int(x) for x in per_rank), float(np.median(slowest)),
                      tuple(float(x) for x in slowest))
