"""Run any autoshard plan of POOLED tables for real: our own sharded EmbeddingBagCollection (sum pooling) on D
local processes (``run_on_ranks``, gloo on CPU), checked against the unsharded computation.

Why: TorchRec's DistributedModelParallel executes only its own row splits (even ``ceil(rows / ranks)``
blocks over all ranks, or one host's ranks; ``autoshard.torchrec.export.check_torchrec_row_split``), while
autoshard plans may hold uneven row ranges on a subset of ranks (``autoshard.planners.row_split``), and its
verify cannot compare data-parallel tables. This runtime executes every sharding type of
``autoshard.shards`` with the plan's exact shards.

SEMANTICS of one training step, for a global batch of B samples (rank r owns samples
``[r * B // D, (r + 1) * B // D)``) and a fixed upstream gradient G (per table (B, dim); the loss is
``sum over tables of <pooled output, G>``):

- every rank holds the weights of its shards (rows x columns slices) and its replicas (whole tables), fp32;
- forward: for each table, a requester rank sends the bags of ITS samples to every rank holding a shard of
  it: a column shard (or table-wise shard) gets every id, a row shard only the ids in its row range, re-based
  to the shard's own rows (a bag may become empty); a data-parallel table is looked up locally on the rank's
  own replica (a rank without one asks replica ``r mod replicas``). Shards on the requester itself are
  computed locally, the others travel in one uneven ``all_to_all_single`` per step (ids and bag lengths,
  after an all-to-all of the counts). Each owner computes ``embedding_bag(mode='sum')`` partial sums per
  sample over its rows and columns and sends them back (the reverse all-to-all); the requester sums the
  partial sums of row shards and places column blocks side by side: its samples' pooled (n, dim) outputs;
- backward: the requester sends the gradient of every partial sum (its samples' G, the shard's columns) to
  the owner, which adds ``G[bag]`` to every row its bags looked up (duplicates summed: exact SGD);
  replicas all-reduce (SUM) their dense gradient over their replica group, so every copy sees the gradient
  of the whole global batch;
- update: ``w -= lr * grad`` on every held row, identically on every copy.

:func:`reference_run` computes the same with the full tables on one process (``torch.nn.EmbeddingBag``
sum + ``torch.optim.SGD``), :func:`compare` checks one against the other table by table, and
:func:`verify_pooled` does all of it for a plan and task (seeded weights and batches, rows capped), as
``autoshard verify --runtime autoshard`` runs it.

Rows cap: when the weights have fewer rows than the task's tables (a capped copy), the plan's row ranges are
scaled to them (``start * rows_used // rows``), keeping their order, ranks and unevenness.

Everything is deterministic: fixed routing, rank-ordered all-to-alls, one thread per rank.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from autoshard.errors import AutoshardError
from autoshard.hardware.multiprocess import DEFAULT_TIMEOUT_S, RankContext, run_on_ranks
from autoshard.plan import Plan, validate
from autoshard.shards import Shard
from autoshard.tasks import Task

MAX_DISTINCT_BATCHES = 4
""":func:`verify_pooled` generates this many batches at most; the steps cycle through them."""


class _Table(NamedTuple):
    """What a rank needs of one table: its size and its shards (row ranges scaled to ``rows``)."""

    name: str
    rows: int
    dim: int
    sharding_type: str
    shards: tuple[Shard, ...]
    replicated: bool


class _Segment(NamedTuple):
    """One (requester, shard) lookup: the shard ``shard`` of table ``table`` on rank ``server``; ids in
    ``[row_start, row_end)`` (``row_end`` None: every id, not re-based), columns ``[col_start, col_end)``."""

    table: int
    shard: int
    server: int
    row_start: int
    row_end: int | None
    col_start: int
    col_end: int

    @property
    def cols(self) -> int:
        return self.col_end - self.col_start


@dataclass(frozen=True)
class ShardWeight:
    """One shard's (or replica's) trained weights as the rank holding it ended."""

    table: str
    shard: Shard
    """The shard, row range scaled to the rows of the run."""
    weight: np.ndarray


@dataclass(frozen=True)
class PooledRunResult:
    """What a run of one plan produced, gathered from every rank."""

    tables: tuple[str, ...]
    sharding_types: tuple[str, ...]
    rows: tuple[int, ...]
    """Rows of each table in the run (capped)."""
    dims: tuple[int, ...]
    rank_outputs: tuple[tuple[tuple[np.ndarray, ...], ...], ...]
    """rank_outputs[step][rank][table]: the (samples of rank, dim) pooled outputs rank ``rank`` assembled."""
    shard_weights: tuple[ShardWeight, ...]
    """Every shard's and replica's weights after the last step."""

    def outputs(self, step: int) -> list[np.ndarray]:
        """Per table, the (B, dim) outputs of step ``step``, every rank's samples in rank order."""
        per_rank = self.rank_outputs[step]
        return [np.concatenate([o[t] for o in per_rank]) for t in range(len(self.tables))]

    def table_weights(self) -> tuple[list[np.ndarray], list[float]]:
        """Per table, the trained (rows, dim) weights assembled from its shards (a replicated table from its
        first copy), and the largest |difference| between two copies of it (0.0 when not replicated)."""
        index = {n: i for i, n in enumerate(self.tables)}
        full = [np.full((r, d), np.nan, np.float32) for r, d in zip(self.rows, self.dims)]
        spread = [0.0] * len(self.tables)
        for sw in self.shard_weights:
            t, s = index[sw.table], sw.shard
            end = self.rows[t] if s.row_end is None else s.row_end
            block = full[t][s.row_start:end, s.col_start:s.col_end]
            if not np.isnan(block).any():  # a second copy of a replica
                spread[t] = max(spread[t], float(np.abs(block - sw.weight).max(initial=0.0)))
            else:
                block[...] = sw.weight
        for t, w in enumerate(full):
            if np.isnan(w).any():
                raise AutoshardError(f"pooled runtime: rows of table {self.tables[t]} are held by no rank")
        return full, spread


@dataclass(frozen=True)
class ReferenceResult:
    """The unsharded computation: outputs[step][table] (B, dim) and the trained (rows, dim) tables."""

    outputs: tuple[tuple[np.ndarray, ...], ...]
    weights: tuple[np.ndarray, ...]


@dataclass(frozen=True)
class TableCheck:
    """One table's sharded run against the reference."""

    table: str
    sharding_type: str
    max_output_diff: float
    """Largest |sharded - unsharded| output over every step and sample."""
    max_weight_diff: float
    """Largest |sharded - unsharded| trained weight (over every copy of a replica)."""
    ok: bool

    def to_json(self) -> dict[str, Any]:
        return {"table": self.table, "sharding_type": self.sharding_type, "ok": self.ok,
                "max_output_diff": self.max_output_diff, "max_weight_diff": self.max_weight_diff}


# --------------------------------------------------------------------------------------------- inputs
def _numpy(x: Any, dtype: Any) -> np.ndarray:
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    return np.ascontiguousarray(np.asarray(x), dtype=dtype)


def _bag(x: Any) -> tuple[np.ndarray, np.ndarray]:
    """(indices, offsets) of a bag given as a pair or as ``Lookups``."""
    if hasattr(x, "indices") and hasattr(x, "offsets"):
        x = (x.indices, x.offsets)
    indices, offsets = x
    return _numpy(indices, np.int64), _numpy(offsets, np.int64)


def _steps_batches(batches: Any) -> list[list[tuple[np.ndarray, np.ndarray]]]:
    """One batch (per table bags) or a list of batches -> a list of batches."""
    if not len(batches):
        raise AutoshardError("pooled runtime: no batches")
    first = batches[0]
    is_bag = hasattr(first, "indices") or hasattr(first[0], "shape")
    return [[_bag(b) for b in batch] for batch in ([batches] if is_bag else batches)]


def _weights(task: Task, weights: Any) -> list[np.ndarray]:
    if isinstance(weights, Mapping):
        missing = [t.name for t in task.tables if t.name not in weights]
        if missing:
            raise AutoshardError(f"pooled runtime: no weights for table {missing[0]}")
        weights = [weights[t.name] for t in task.tables]
    out = [_numpy(w, np.float32) for w in weights]
    if len(out) != task.num_tables:
        raise AutoshardError(f"pooled runtime: {len(out)} weight tables for {task.num_tables} tables")
    for t, w in zip(task.tables, out):
        if w.ndim != 2 or w.shape[1] != t.dim or not 0 < w.shape[0] <= t.rows:
            raise AutoshardError(f"pooled runtime: weights of table {t.name} are {w.shape}; need (rows, "
                                 f"{t.dim}) with 1 <= rows <= {t.rows}")
    return out


def _check_batches(steps: list[list[tuple[np.ndarray, np.ndarray]]], weights: list[np.ndarray]) -> int:
    """The global batch size B every table's bags agree on; ids checked against the tables' rows."""
    sizes = {len(offsets) - 1 for batch in steps for _, offsets in batch}
    if len(sizes) != 1 or min(sizes) < 1:
        raise AutoshardError(f"pooled runtime: every table's bags need the same batch size, got {sizes}")
    for batch in steps:
        if len(batch) != len(weights):
            raise AutoshardError(f"pooled runtime: a batch has {len(batch)} tables, need {len(weights)}")
        for (ids, offsets), w in zip(batch, weights):
            if offsets[0] != 0 or offsets[-1] != len(ids) or np.any(np.diff(offsets) < 0):
                raise AutoshardError("pooled runtime: offsets must rise from 0 to the number of ids")
            if len(ids) and (ids.min() < 0 or ids.max() >= len(w)):
                raise AutoshardError(f"pooled runtime: an id lies outside the table's {len(w)} rows")
    return sizes.pop()


def default_out_grads(dims: Sequence[int], batch_size: int, seed: int = 0) -> list[np.ndarray]:
    """A fixed upstream gradient per table: (B, dim) standard normal fp32 from ``seed``."""
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((batch_size, d)).astype(np.float32) for d in dims]


def scale_rows(shard: Shard, rows: int, rows_used: int) -> Shard:
    """``shard`` of a table of ``rows`` rows, its row range scaled onto a copy of ``rows_used`` rows."""
    if rows_used == rows or not shard.splits_rows:
        return shard
    end = None if shard.row_end is None else shard.row_end * rows_used // rows
    return Shard(shard.rank, shard.col_start, shard.col_end, shard.row_start * rows_used // rows, end)


def _tables(task: Task, plan: Plan, weights: list[np.ndarray]) -> list[_Table]:
    out = []
    for t, w in zip(task.tables, weights):
        p = plan.placement(t.name)
        shards = tuple(scale_rows(s, t.rows, len(w)) for s in p.shards)
        out.append(_Table(t.name, len(w), t.dim, p.sharding_type.value, shards,
                          p.sharding_type.replicates))
    return out


# ------------------------------------------------------------------------------------------- routing
def _row_range(s: Shard, rows: int) -> tuple[int, int]:
    return s.row_start, rows if s.row_end is None else s.row_end


def _segments(tables: Sequence[_Table], rank: int) -> list[_Segment]:
    """The lookups requester ``rank`` makes each step, in a fixed order (table, shard)."""
    out = []
    for t, tab in enumerate(tables):
        if tab.replicated:
            own = [k for k, s in enumerate(tab.shards) if s.rank == rank]
            k = own[0] if own else rank % len(tab.shards)
            out.append(_Segment(t, k, tab.shards[k].rank, 0, None, 0, tab.dim))
            continue
        for k, s in enumerate(tab.shards):
            r0, r1 = _row_range(s, tab.rows)
            whole = r0 == 0 and r1 == tab.rows
            out.append(_Segment(t, k, s.rank, r0, None if whole else r1, s.col_start, s.col_end))
    return out


def _restrict(bag: tuple[np.ndarray, np.ndarray], lo: int, hi: int,
              seg: _Segment) -> tuple[np.ndarray, np.ndarray]:
    """(ids re-based to the shard, per-sample bag lengths) of samples ``[lo, hi)`` on segment ``seg``."""
    indices, offsets = bag
    ids = indices[offsets[lo]:offsets[hi]]
    lengths = np.diff(offsets[lo:hi + 1])
    if seg.row_end is None:
        return ids.copy(), lengths
    keep = (ids >= seg.row_start) & (ids < seg.row_end)
    sample = np.repeat(np.arange(hi - lo), lengths)
    return ids[keep] - seg.row_start, np.bincount(sample[keep], minlength=hi - lo).astype(np.int64)


def _replica_groups(tables: Sequence[_Table], world: int) -> dict[tuple[int, ...], Any]:
    """A process group per replica group of more than one rank (made by every rank, in the same order)."""
    import torch.distributed as dist

    wanted = sorted({tuple(sorted(s.rank for s in t.shards)) for t in tables if t.replicated})
    out: dict[tuple[int, ...], Any] = {}
    for g in wanted:
        if len(g) == world:
            out[g] = None  # the default group
        elif len(g) > 1:
            out[g] = dist.new_group(list(g))
    return out


# ------------------------------------------------------------------------------------------ the ranks
def _exchange(send: list[list[Any]], recv_counts: list[int], dtype: Any) -> list[Any]:
    """Uneven all-to-all of flat tensors: ``send[q]`` (pieces) to rank q -> one flat tensor per source."""
    import torch
    import torch.distributed as dist

    flat = [torch.cat(parts) if parts else torch.zeros(0, dtype=dtype) for parts in send]
    out = torch.empty(sum(recv_counts), dtype=dtype)
    dist.all_to_all_single(out, torch.cat(flat), recv_counts, [len(f) for f in flat])
    return list(out.split(recv_counts))


def _pool(weight: Any, ids: np.ndarray, lengths: np.ndarray) -> Any:
    """(samples, cols) sum-pooled rows of ``weight`` per bag (an empty bag pools to zeros)."""
    import torch
    import torch.nn.functional as F

    if not len(ids):
        return torch.zeros((len(lengths), weight.shape[1]), dtype=weight.dtype)
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    return F.embedding_bag(torch.from_numpy(ids), weight, torch.from_numpy(offsets), mode="sum")


def _step(ctx: RankContext, tables: Sequence[_Table], segs: list[list[_Segment]], bounds: list[int],
          held: dict[tuple[int, int], Any], groups: dict[tuple[int, ...], Any],
          batch: list[tuple[np.ndarray, np.ndarray]], grads: list[np.ndarray], lr: float) -> list[np.ndarray]:
    """One forward + backward + SGD step of this rank (module docstring); its samples' outputs per table."""
    import torch
    import torch.distributed as dist

    d, r = ctx.world_size, ctx.rank
    n = [bounds[q + 1] - bounds[q] for q in range(d)]
    lo, hi = bounds[r], bounds[r + 1]
    mine = [_restrict(batch[s.table], lo, hi, s) for s in segs[r]]
    # forward 1: my samples' bags to every shard's owner (bag lengths first, then ids), counts first
    send: list[list[Any]] = [[] for _ in range(d)]
    for q in range(d):
        parts = [mine[j] for j, s in enumerate(segs[r]) if s.server == q and q != r]
        send[q] = [torch.from_numpy(x) for x in [lens for _, lens in parts] + [ids for ids, _ in parts]]
    counts = torch.tensor([sum(len(x) for x in parts) for parts in send], dtype=torch.int64)
    recv_counts = torch.empty(d, dtype=torch.int64)
    dist.all_to_all_single(recv_counts, counts)
    got = _exchange(send, [int(c) for c in recv_counts.tolist()], torch.int64)
    # forward 2: the lookups I serve, per requester in rank order, each in its segment order
    served: list[tuple[_Segment, int, np.ndarray, np.ndarray]] = []
    for q in range(d):
        wanted = [(j, s) for j, s in enumerate(segs[q]) if s.server == r]
        if q == r:
            served += [(s, q, *mine[j]) for j, s in wanted]
            continue
        stream = got[q].numpy()
        lengths = stream[:len(wanted) * n[q]].reshape(len(wanted), n[q])
        at = len(wanted) * n[q]
        for (_, s), lens in zip(wanted, lengths):
            served.append((s, q, stream[at:at + int(lens.sum())], lens))
            at += int(lens.sum())
    partial = [_pool(held[(s.table, s.shard)], ids, lens) for s, _, ids, lens in served]
    # forward 3: partial sums back to their requesters; assemble my outputs
    back = [[p.reshape(-1) for (_, q, _, _), p in zip(served, partial) if q == dest] if dest != r else []
            for dest in range(d)]
    from_q = [sum(n[r] * s.cols for s in segs[r] if s.server == q) if q != r else 0 for q in range(d)]
    returned = _exchange(back, from_q, torch.float32)
    local = iter(p for (_, q, _, _), p in zip(served, partial) if q == r)
    cursor = [0] * d
    out = [torch.zeros((n[r], t.dim), dtype=torch.float32) for t in tables]
    for s in segs[r]:
        if s.server == r:
            block = next(local)
        else:
            size = n[r] * s.cols
            block = returned[s.server][cursor[s.server]:cursor[s.server] + size].reshape(n[r], s.cols)
            cursor[s.server] += size
        out[s.table][:, s.col_start:s.col_end] += block
    result = [o.numpy().copy() for o in out]

    # backward: each partial sum's gradient (my samples' G, the shard's columns) to its owner
    g = [torch.from_numpy(np.ascontiguousarray(x[lo:hi], dtype=np.float32)) for x in grads]
    up = [[g[s.table][:, s.col_start:s.col_end].reshape(-1) for s in segs[r] if s.server == q]
          if q != r else [] for q in range(d)]
    to_q = [sum(n[q] * s.cols for s in segs[q] if s.server == r) if q != r else 0 for q in range(d)]
    grad_in = _exchange(up, to_q, torch.float32)
    cursor = [0] * d
    bufs = {key: torch.zeros_like(w) for key, w in held.items()}
    for s, q, ids, lens in served:
        if q == r:
            gs = g[s.table][:, s.col_start:s.col_end]
        else:
            size = n[q] * s.cols
            gs = grad_in[q][cursor[q]:cursor[q] + size].reshape(n[q], s.cols)
            cursor[q] += size
        if len(ids):
            sample = torch.from_numpy(np.repeat(np.arange(n[q]), lens))
            bufs[(s.table, s.shard)].index_add_(0, torch.from_numpy(ids), gs[sample])
    for t, k in sorted(held):  # table order: every replica group meets in the same order
        if tables[t].replicated:
            group = tuple(sorted(sh.rank for sh in tables[t].shards))
            if len(group) > 1:
                dist.all_reduce(bufs[(t, k)], group=groups[group])
    for key, w in held.items():
        w -= lr * bufs[key]
    return result


def _run_rank(ctx: RankContext, plans: list[list[_Table]], weights: list[np.ndarray],
              steps_batches: list[list[tuple[np.ndarray, np.ndarray]]], grads: list[np.ndarray], lr: float,
              steps: int) -> list[dict[str, Any]]:
    import torch

    torch.set_num_threads(1)
    d, r = ctx.world_size, ctx.rank
    batch_size = len(steps_batches[0][0][1]) - 1
    bounds = [q * batch_size // d for q in range(d + 1)]
    results = []
    for tables in plans:
        groups = _replica_groups(tables, d)
        segs = [_segments(tables, q) for q in range(d)]
        held: dict[tuple[int, int], Any] = {}
        for t, tab in enumerate(tables):
            for k, s in enumerate(tab.shards):
                if s.rank == r:
                    r0, r1 = _row_range(s, tab.rows)
                    held[(t, k)] = torch.from_numpy(weights[t][r0:r1, s.col_start:s.col_end].copy())
        outputs = [_step(ctx, tables, segs, bounds, held, groups, steps_batches[i % len(steps_batches)],
                         grads, lr) for i in range(steps)]
        results.append({"outputs": outputs, "shards": [(t, k, w.numpy()) for (t, k), w in held.items()]})
    return results


# --------------------------------------------------------------------------------------------- API
def run_plans(task: Task, plans: Sequence[Plan], weights: Any, batches: Any, lr: float, steps: int,
              out_grads: Sequence[Any] | None = None,
              timeout_s: float = DEFAULT_TIMEOUT_S) -> list[PooledRunResult]:
    """Run every plan of ``task`` (the same ``task.num_devices`` ranks; one process start for all) for
    ``steps`` SGD steps of learning rate ``lr`` from ``weights``; one result per plan.

    ``weights``: the full tables' initial weights, one (rows, dim) array or tensor per table (task order, or
    a mapping by name); rows may be fewer than the table's (a capped copy: row ranges are scaled).
    ``batches``: one batch, per table the bags of the GLOBAL batch as (indices, offsets) or ``Lookups``, or a
    list of batches (step s uses ``batches[s % len]``). ``out_grads``: per table the (B, dim) gradient of
    the outputs (default: :func:`default_out_grads` of seed 0), the same every step."""
    if steps < 1:
        raise AutoshardError(f"pooled runtime: steps={steps}; need at least 1")
    w = _weights(task, weights)
    steps_batches = _steps_batches(batches)
    batch_size = _check_batches(steps_batches, w)
    grads = _grads(task, out_grads, batch_size)
    runs = []
    for plan in plans:
        validate(plan, task)
        runs.append(_tables(task, plan, w))
    if not runs:
        return []
    world = task.num_devices
    per_rank = run_on_ranks(_run_rank, world, (runs, w, steps_batches, grads, float(lr), int(steps)),
                            timeout_s=timeout_s, what=f"pooled-table run on {world} ranks",
                            timeout_hint="use fewer steps or a lower rows cap")
    out = []
    for i, tables in enumerate(runs):
        shard_weights = tuple(ShardWeight(tables[t].name, tables[t].shards[k], wk)
                              for r in range(world) for t, k, wk in per_rank[r][i]["shards"])
        outputs = tuple(tuple(tuple(per_rank[r][i]["outputs"][s]) for r in range(world))
                        for s in range(steps))
        out.append(PooledRunResult(tuple(t.name for t in tables), tuple(t.sharding_type for t in tables),
                                   tuple(t.rows for t in tables), tuple(t.dim for t in tables), outputs,
                                   shard_weights))
    return out


def run_plan(task: Task, plan: Plan, weights: Any, batches: Any, lr: float, steps: int,
             out_grads: Sequence[Any] | None = None, timeout_s: float = DEFAULT_TIMEOUT_S) -> PooledRunResult:
    """Run ``plan`` on ``task.num_devices`` local processes; see :func:`run_plans`."""
    return run_plans(task, [plan], weights, batches, lr, steps, out_grads, timeout_s)[0]


def _grads(task: Task, out_grads: Sequence[Any] | None, batch_size: int) -> list[np.ndarray]:
    if out_grads is None:
        return default_out_grads([t.dim for t in task.tables], batch_size)
    grads = [_numpy(g, np.float32) for g in out_grads]
    if [g.shape for g in grads] != [(batch_size, t.dim) for t in task.tables]:
        raise AutoshardError(f"pooled runtime: out_grads need one (batch {batch_size}, dim) array per table")
    return grads


def reference_run(weights: Sequence[Any], batches: Any, lr: float, steps: int,
                  out_grads: Sequence[Any]) -> ReferenceResult:
    """The unsharded computation on this process: one ``torch.nn.EmbeddingBag`` (sum) per full table,
    loss ``sum over tables of <output, out_grads>``, ``torch.optim.SGD``; ``batches`` as in
    :func:`run_plans`."""
    import torch

    steps_batches = _steps_batches(batches)
    bags = []
    for w in weights:
        w = _numpy(w, np.float32)
        bag = torch.nn.EmbeddingBag(w.shape[0], w.shape[1], mode="sum")
        with torch.no_grad():
            bag.weight.copy_(torch.from_numpy(w))
        bags.append(bag)
    grads = [torch.from_numpy(_numpy(g, np.float32)) for g in out_grads]
    opt = torch.optim.SGD([p for b in bags for p in b.parameters()], lr=lr)
    outputs = []
    for i in range(steps):
        batch = steps_batches[i % len(steps_batches)]
        opt.zero_grad()
        outs = [bag(torch.from_numpy(ids), torch.from_numpy(offsets[:-1]))
                for bag, (ids, offsets) in zip(bags, batch)]
        loss = sum((o * g).sum() for o, g in zip(outs, grads))
        loss.backward()  # type: ignore[union-attr]
        opt.step()
        outputs.append(tuple(o.detach().numpy().copy() for o in outs))
    return ReferenceResult(tuple(outputs), tuple(b.weight.detach().numpy().copy() for b in bags))


def compare(result: PooledRunResult, reference: ReferenceResult, atol: float = 1e-5,
            rtol: float = 1e-5) -> list[TableCheck]:
    """Per table: every step's outputs and the trained weights (every copy) allclose to the reference."""
    weights, spread = result.table_weights()
    steps = [result.outputs(s) for s in range(len(result.rank_outputs))]
    checks = []
    for t, name in enumerate(result.tables):
        ok, out_diff = True, 0.0
        for s, outs in enumerate(steps):
            want = reference.outputs[s][t]
            out_diff = max(out_diff, float(np.abs(outs[t] - want).max(initial=0.0)))
            ok = ok and bool(np.allclose(outs[t], want, atol=atol, rtol=rtol))
        want_w = reference.weights[t]
        w_diff = float(np.abs(weights[t] - want_w).max(initial=0.0)) + spread[t]
        ok = ok and bool(np.allclose(weights[t], want_w, atol=atol, rtol=rtol)) and spread[t] <= atol
        checks.append(TableCheck(name, result.sharding_types[t], out_diff, w_diff, ok))
    return checks


# ------------------------------------------------------------------------------------------ verify
@dataclass(frozen=True)
class PooledVerifyResult:
    """The outcome of :func:`verify_pooled`."""

    plan_algorithm: str
    task_name: str
    num_devices: int
    global_batch: int
    steps: int
    rows_cap: int | None
    rows_used: dict[str, int]
    checks: tuple[TableCheck, ...]

    @property
    def matches(self) -> bool:
        return all(c.ok for c in self.checks)

    def to_json(self) -> dict[str, Any]:
        return {"kind": "autoshard.verify_pooled", "version": 1, "runtime": "autoshard",
                "plan_algorithm": self.plan_algorithm, "task": self.task_name, "devices": self.num_devices,
                "global_batch": self.global_batch, "steps": self.steps, "rows_cap": self.rows_cap,
                "rows_used": self.rows_used, "matches": self.matches,
                "tables": [c.to_json() for c in self.checks]}


def seeded_weights(task: Task, rows: Mapping[str, int], seed: int) -> list[np.ndarray]:
    """Table i uniform in [-0.1, 0.1) from torch generator (seed, i): the weights TorchRec verify uses."""
    import torch

    out = []
    for i, t in enumerate(task.tables):
        g = torch.Generator().manual_seed(seed * 1_000_003 + i)
        out.append(((torch.rand(rows[t.name], t.dim, generator=g) - 0.5) * 0.2).numpy())
    return out


def verify_pooled(plan: Plan, task: Task, *, rows_cap: int | None, steps: int = 2, lr: float = 0.01,
                  seed: int = 0, atol: float = 1e-5, rtol: float = 1e-5,
                  timeout_s: float = DEFAULT_TIMEOUT_S) -> PooledVerifyResult:
    """Run ``plan`` with this runtime and check every table against the unsharded computation: seeded
    weights (rows capped at ``rows_cap``, None: the real rows), a global batch of ``D * ceil(batch / D)``
    generated samples (ids folded mod the cap; distinct batches per step, at most
    ``MAX_DISTINCT_BATCHES``), a seeded upstream gradient, ``steps`` SGD steps."""
    from autoshard.tables.lookups import sample_lookups

    if rows_cap is not None and rows_cap <= 0:
        raise AutoshardError(f"rows cap {rows_cap} must be positive")
    validate(plan, task)
    d = task.num_devices
    rows = {t.name: min(t.rows, rows_cap) if rows_cap else t.rows for t in task.tables}
    batch = d * math.ceil(task.batch_size / d)
    weights = seeded_weights(task, rows, seed)
    batches = [[sample_lookups(t, batch, seed=seed + i, rows=rows_cap) for t in task.tables]
               for i in range(min(steps, MAX_DISTINCT_BATCHES))]
    grads = default_out_grads([t.dim for t in task.tables], batch, seed)
    result = run_plan(task, plan, weights, batches, lr, steps, grads, timeout_s)
    reference = reference_run(weights, batches, lr, steps, grads)
    checks = compare(result, reference, atol, rtol)
    return PooledVerifyResult(plan.algorithm, task.name, d, batch, steps, rows_cap, rows, tuple(checks))
