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
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from autoshard.breakdown import CollectiveCost, PlanCost, StageFloor
from autoshard.costs.step import OUTPUT_BYTES, shard_volumes
from autoshard.pipeline.results import TaskResult
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


def balanced_collective_ms(c: CollectiveCost, least_bytes: float = 0.0, alpha_ms: float = 0.0) -> float:
    """``c``'s time with its busiest rank's bytes cut to the least any rank could move: the larger of the
    ranks' mean and ``least_bytes``. The cut applies to the bytes' part of its alpha-beta time (``alpha_ms``,
    the comm model's latency, stays), and a measured time moves by the same ratio as the modelled one. Per-
    rank work without bytes (row bucketisation) stays as it is."""
    busiest = c.busiest_bytes
    if busiest <= 0:
        return c.ms
    even = max(float(np.mean(c.sent_bytes)), float(np.mean(c.received_bytes)), least_bytes)
    share = min(even / busiest, 1.0)
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


def task_floor_ms(tr: TaskResult, stages: StageFloor | None = None, alpha_ms: float = 0.0) -> float | None:
    """The least balance floor over ``tr``'s measured plans (``stages`` defaults to the one it recorded;
    ``alpha_ms``: the run's comm latency); None without a measured plan."""
    stages = stages if stages is not None else tr.stage_floor
    least = least_shard_bytes(tr.task)
    floors = [plan_floor_ms(r.measured, stages, least, alpha_ms) for r in tr.results
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
                       geomean(list(room.values())), roomy, ratios)
