"""How much a task leaves to win by balancing: each measured plan's step with its work spread perfectly.

The bench's estimate (``planners.exact.lower_bound``) adds up every table's cost measured alone and spreads
it over the devices; it read 10-21% of "room" on suites where nothing beats the heuristics (docs/
benchmarks.md, "Stop 52"): the step waits at every stage for its slowest device, and a device of 25 fused
tables measured more than its tables alone (DLRM-50 (2), "Stop 53"). The *balance floor* is built like the
step (``costs.step``) from what the bench measured instead. For one measured plan:

    floor = max(mean device fwd, fwd floor) + max(mean device bwd, bwd floor) + sum of its collectives, each
            with the bytes' part of its time x (the least busiest-rank bytes any plan could have) / (its
            busiest rank's bytes), its latency kept

where the fwd and bwd floors are the least forward and backward the device holding the costliest table (or
its widest column shard) can have (``planners.exact.stage_floor``, timed alone), and the least
busiest-rank bytes are the larger of the ranks' mean and what the rank holding the largest table must move
(all its ids; the outputs of its narrowest widest column shard). A task's floor is the least over its
measured plans; its *room* is the suite's best fixed heuristic's measured cost over it.

Not a bound on every plan: each term is floored on its own (so the floor is below any plan with the work of
the measured plans, which only makes the room larger), but another grouping of the tables may fuse into
less work, and row-wise shards and replicas are not considered (they moved the hot table's cost onto the
collectives on this CPU: 1.00-1.58x, stop 52). It answers "what would perfect balancing of the work the
planners did find win?", which is the room a placement can take.

**The cut a floor assumes is priced** (stop 57, where the task recorded its floor's shards timed alone,
``StageFloor.alone``): the stage floor above may be a hot table's quarter, paired with the mean of a plan that
holds the table whole, but its four quarters do more work than the whole (on DLRM-20 (8) a dim-16 table's
4-wide quarter timed 7.0-8.9 ms backward against 9.8-11.2 ms whole: some 20 ms more across the devices), and
send its ids to four ranks. So for a measured plan and a cut of each table the floor priced (kept whole, each
even column cut, or held as the plan holds it):

    fwd, bwd  = max((sum of the plan's devices + sum over those tables of (the cut's pieces - the plan's own
                     shards of the table, each timed alone)) / D, the cut's widest piece)
    ids       = the input-id all-to-all with its mean bytes raised by each table's extra copies of its ids

and the plan's floor is the least over the tables' cuts of fwd + bwd + collectives (``cut_floor_terms``).
Pieces timed alone each carry a kernel's fixed cost that a fused device pays once, so the extra work is
counted slightly high; the pooled outputs and gradients do not change with a column cut.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from autoshard.breakdown import CollectiveCost, PlanCost, StageFloor
from autoshard.costs.step import OUTPUT_BYTES, shard_volumes
from autoshard.pipeline.results import AlgoResult, TaskResult
from autoshard.plan import Plan
from autoshard.planners.exact import piece_widths
from autoshard.shards import ShardRef
from autoshard.tasks import Task

from .summary import best_fixed_heuristic, geomean, task_costs

ROOM_THRESHOLD = 1.10
"""Issue 15's "where the bound leaves >= 10% room": a task whose room is at least this."""

LEAST_BYTES_BY_KIND = {"input_ids": "ids", "pooled_outputs": "outputs", "output_grads": "outputs"}
"""The all-to-alls whose busiest rank the largest table's holder bounds from below, by what it moves."""


def least_shard_bytes(task: Task) -> dict[str, float]:
    """What the rank holding the task's largest table must move whatever the plan (table- and column-wise
    shards): receive every id of it from the other ranks' samples, and send the outputs of its narrowest
    possible widest column shard to them (its gradients come back the same way)."""
    d = task.num_devices
    if d <= 1:
        return {"ids": 0.0, "outputs": 0.0}
    others = (d - 1) * task.batch_size / d
    ids = shard_volumes(task, [ShardRef(i, t.dim) for i, t in enumerate(task.tables)])[:, 0]
    widest = [min((w for _, w, _ in piece_widths(t.dim, d)), default=t.dim) for t in task.tables]
    return {"ids": others * float(ids.max()), "outputs": others * OUTPUT_BYTES * float(max(widest))}


def balanced_collective_ms(c: CollectiveCost, least_bytes: float = 0.0, alpha_ms: float = 0.0,
                           extra_bytes: float = 0.0) -> float:
    """``c``'s time with its busiest rank's bytes cut to the least any rank could move: the larger of the
    ranks' mean (raised by ``extra_bytes`` a rank, where another cut of a table sends more) and
    ``least_bytes``. The cut applies to the bytes' part of its alpha-beta time (``alpha_ms``, the comm
    model's latency, stays), and a measured time moves by the same ratio as the modelled one. Per-rank work
    without bytes (row bucketisation) stays as it is."""
    busiest = c.busiest_bytes
    if busiest <= 0:
        return c.ms
    even = max(float(np.mean(c.sent_bytes)) + extra_bytes, float(np.mean(c.received_bytes)) + extra_bytes,
               least_bytes)
    share = even / busiest if extra_bytes > 0 else min(even / busiest, 1.0)
    if c.modelled_ms <= 0:
        return c.ms * share
    alpha = min(alpha_ms, c.modelled_ms)
    return c.ms * (alpha + (c.modelled_ms - alpha) * share) / c.modelled_ms


def plan_floor_terms(cost: PlanCost, stages: StageFloor | None = None,
                     least_bytes: dict[str, float] | None = None, alpha_ms: float = 0.0) -> np.ndarray:
    """(3,) one measured plan's balance floor by term: fwd, bwd, collectives (the module's formula)."""
    fwd = float(np.mean([dev.fwd_ms for dev in cost.devices]))
    bwd = float(np.mean([dev.bwd_ms for dev in cost.devices]))
    if stages is not None:
        fwd, bwd = max(fwd, stages.fwd_ms), max(bwd, stages.bwd_ms)
    least = least_bytes or {}
    coll = sum(balanced_collective_ms(c, least.get(LEAST_BYTES_BY_KIND.get(c.name, ""), 0.0), alpha_ms)
               for c in cost.collectives)
    return np.array([fwd, bwd, coll])


def plan_floor_ms(cost: PlanCost, stages: StageFloor | None = None,
                  least_bytes: dict[str, float] | None = None, alpha_ms: float = 0.0) -> float:
    """One measured plan's balance floor (the module's formula): its terms summed."""
    return float(plan_floor_terms(cost, stages, least_bytes, alpha_ms).sum())


MAX_CUT_COMBINATIONS = 4096
"""``cut_floor_terms`` tries every combination of the tables' cuts up to this many (after dropping cuts that
another beats on every count), else improves one table's cut at a time from two starts."""


@dataclass(frozen=True)
class Cut:
    """One way to hold a table, by its shards timed alone: their summed and their largest (fwd, bwd) ms,
    and how many copies of the table's ids the input all-to-all sends (one per column block)."""

    work: tuple[float, float]
    widest: tuple[float, float]
    copies: int

    def dominated_by(self, other: Cut) -> bool:
        mine, theirs = (*self.work, *self.widest, self.copies), (*other.work, *other.widest, other.copies)
        return mine != theirs and all(o <= m for m, o in zip(mine, theirs))


def _held(refs: Sequence[ShardRef], alone: dict[ShardRef, tuple[float, float]], copies: int) -> Cut:
    times = np.array([alone[r] for r in refs], dtype=np.float64).reshape(-1, 2)
    return Cut(tuple(times.sum(axis=0).tolist()), tuple(times.max(axis=0).tolist()), copies)  # type: ignore


def table_cuts(task: Task, table: int, alone: dict[ShardRef, tuple[float, float]]) -> list[Cut]:
    """The ways to hold ``table`` whose shards were all timed alone: whole, and each even column cut
    (``piece_widths``)."""
    dim = task.tables[table].dim
    ways = [[dim]] + [[widest] * (count - 1) + [last] for count, widest, last in piece_widths(dim,
                                                                                              task.num_devices)]
    return [_held([ShardRef(table, w) for w in widths], alone, len(widths)) for widths in ways
            if all(ShardRef(table, w) in alone for w in widths)]


def _copies(plan: Plan, name: str) -> int:
    """Copies of table ``name``'s ids the plan's input all-to-all sends: its column blocks (row shards of one
    block share one copy; replicas look up their own samples and send none)."""
    return len({(s.col_start, s.col_end) for p in plan.placements if p.table == name
                and not p.sharding_type.replicates for s in p.shards})


def cut_floor_terms(task: Task, plan: Plan, cost: PlanCost, stages: StageFloor,
                    least_bytes: dict[str, float] | None = None, alpha_ms: float = 0.0) -> np.ndarray:
    """(3,) one measured plan's balance floor by term (fwd, bwd, collectives) with the cut it assumes
    priced (the module's second formula), the least over the floor's tables' cuts; the first formula
    (``plan_floor_terms``) where ``stages`` kept no shards timed alone or the plan holds a shard of those
    tables that was not timed."""
    alone = stages.alone_ms()
    devices = plan.device_shards(task)
    tables = sorted({ref.table for ref in alone})
    held = {t: [ref for device in devices for ref in device if ref.table == t] for t in tables}
    if not tables or any(not refs or any(r not in alone for r in refs) for refs in held.values()):
        return plan_floor_terms(cost, stages, least_bytes, alpha_ms)
    own = [_held(held[t], alone, _copies(plan, task.tables[t].name)) for t in tables]
    options = []
    for t, mine in zip(tables, own):
        cuts = [mine, *table_cuts(task, t, alone)]
        options.append([c for c in cuts if not any(c.dominated_by(o) for o in cuts)])
    d = len(cost.devices)
    totals = np.array([sum(x.fwd_ms for x in cost.devices), sum(x.bwd_ms for x in cost.devices)])
    others = (d - 1) * task.batch_size / d if d > 1 else 0.0
    ids = shard_volumes(task, [ShardRef(t, task.tables[t].dim) for t in tables])[:, 0] * others
    least = least_bytes or {}

    def terms(combo: Sequence[Cut]) -> np.ndarray:
        work = totals + sum(np.subtract(c.work, m.work) for c, m in zip(combo, own))
        widest = np.max([c.widest for c in combo], axis=0)
        fwd, bwd = np.maximum(work / d, widest)
        extra = float(sum((c.copies - m.copies) * b for c, m, b in zip(combo, own, ids))) / d
        coll = sum(balanced_collective_ms(c, least.get(LEAST_BYTES_BY_KIND.get(c.name, ""), 0.0), alpha_ms,
                                          extra if c.name == "input_ids" else 0.0) for c in cost.collectives)
        return np.array([fwd, bwd, coll])

    best = _least_terms(options, own, terms)
    # the plan itself balances its own work: a floor above it is the alone timings' noise
    step = np.array([cost.max_fwd_ms, cost.max_bwd_ms, cost.collectives_ms])
    return step if best.sum() > step.sum() else best


def _least_terms(options: Sequence[Sequence[Cut]], own: Sequence[Cut],
                 terms: Callable[[Sequence[Cut]], np.ndarray]) -> np.ndarray:
    """The least ``terms`` (summed) over one cut per table: every combination up to
    ``MAX_CUT_COMBINATIONS``, else one table's cut improved at a time from the plan's own cuts and from each
    table's narrowest."""
    if math.prod(len(o) for o in options) <= MAX_CUT_COMBINATIONS:
        return min((terms(combo) for combo in itertools.product(*options)), key=lambda x: float(x.sum()))
    best: np.ndarray | None = None
    for start in (own, [min(o, key=lambda c: sum(c.widest)) for o in options]):
        combo = list(start)
        improved = True
        while improved:
            improved = False
            for k, choices in enumerate(options):
                now = float(terms(combo).sum())
                pick = min(choices, key=lambda c: float(terms([*combo[:k], c, *combo[k + 1:]]).sum()))
                if float(terms([*combo[:k], pick, *combo[k + 1:]]).sum()) < now - 1e-12:
                    combo[k], improved = pick, True
        found = terms(combo)
        best = found if best is None or found.sum() < best.sum() else best
    return best  # type: ignore[return-value]


def result_floor_terms(task: Task, r: AlgoResult, stages: StageFloor | None,
                       least_bytes: dict[str, float] | None = None, alpha_ms: float = 0.0) -> np.ndarray:
    """(3,) a measured result's balance floor by term: with its cut priced where ``stages`` allows it."""
    if stages is not None and stages.alone and r.plan is not None:
        return cut_floor_terms(task, r.plan, r.measured, stages, least_bytes, alpha_ms)  # type: ignore
    return plan_floor_terms(r.measured, stages, least_bytes, alpha_ms)  # type: ignore[arg-type]


def task_floor_ms(tr: TaskResult, stages: StageFloor | None = None, alpha_ms: float = 0.0) -> float | None:
    """The least balance floor over ``tr``'s measured plans (``stages`` defaults to the one it recorded;
    ``alpha_ms``: the run's comm latency); None without a measured plan."""
    stages = stages if stages is not None else tr.stage_floor
    least = least_shard_bytes(tr.task)
    floors = [float(result_floor_terms(tr.task, r, stages, least, alpha_ms).sum()) for r in tr.results
              if r.ok and r.measured is not None and math.isfinite(r.measured.plan_ms)]
    return min(floors, default=None)


@dataclass(frozen=True)
class RoomSummary:
    """A suite's room by balance, and the planners' ratios on the tasks that have room."""

    reference: str
    """The suite's best fixed heuristic (``best_fixed_heuristic``), whose cost the room is measured from."""
    tasks: int
    """Tasks with a floor and a measured plan of the reference."""
    with_stage_floor: int
    """Of those, tasks whose floor includes the costliest table's stage floor (older runs have none)."""
    geomean_room: float | None
    """Geometric mean over those tasks of the reference's cost / the task's floor."""
    roomy: tuple[int, ...]
    """Indices (into the results) of the tasks whose room is at least ``ROOM_THRESHOLD``."""
    ratio_on_roomy: dict[str, float]
    """Per algorithm measured on every roomy task: its geometric-mean cost / the reference's there."""
    with_cuts: int = 0
    """Tasks whose floor prices the cut it assumes (``cut_floor_terms``; runs from stop 57)."""


def room_summary(results: Sequence[TaskResult], algorithms: Sequence[str], alpha_ms: float = 0.0,
                 stages: Sequence[StageFloor | None] | None = None) -> RoomSummary | None:
    """``results``' room by balance (``alpha_ms``: the run's comm latency, 0 = every collective's whole time
    scales with its bytes, the lowest floor; ``stages``, one per task, replaces what each recorded); None
    without a reference heuristic."""
    costs = [task_costs(tr) for tr in results]
    reference = best_fixed_heuristic(costs)
    if reference is None:
        return None
    stages = stages if stages is not None else [tr.stage_floor for tr in results]
    room: dict[int, float] = {}
    for k, (tr, c, st) in enumerate(zip(results, costs, stages, strict=True)):
        floor = task_floor_ms(tr, st, alpha_ms) if reference in c else None
        if floor:
            room[k] = c[reference][0] / floor
    roomy = tuple(k for k, r in room.items() if r >= ROOM_THRESHOLD)
    ratios = {}
    for a in algorithms:
        if roomy and all(a in costs[k] for k in roomy):
            ratios[a] = geomean([costs[k][a][0] / costs[k][reference][0] for k in roomy])
    return RoomSummary(reference, len(room), sum(1 for k in room if stages[k] is not None),
                       geomean(list(room.values())), roomy, ratios,
                       sum(1 for k in room if stages[k] is not None and stages[k].alone))
