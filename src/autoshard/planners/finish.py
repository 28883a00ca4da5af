"""The common last stage of ``ilp``, ``rl`` and ``search``: from their solves (``ilp`` and ``rl``: whole
tables, and the column shards of NeuroShard's split search; ``search``: its start planners' plans) to one
plan and the guard's alternatives.

Top to bottom: give each solve the sharding moves (``planners.sharding_moves``: the hottest tables tried as
row-wise shards or replicas); keep the solve whose *moved* plan the model prices cheapest (the first on a
tie); descend from the moved plan on the model's step (``descent.refine_plan``: its table- and
column-wise shards move, the row-wise shards and replicas stay) and try the moves again on what is still
table-wise, keeping the result only where the model prices it below the moved plan; the other solves' moved
plans are the alternatives the heuristic guard weighs (``planners.guard``; ilp and rl hand them over).

Why choose after the moves: a move can change which solve is cheaper. On DLRM-10 (4)'s held-out task 1
(stop 37, docs/benchmarks.md) ilp's whole-table plan priced 29.6 ms against its column-shard plan's 26.3,
so the column shards were kept, while the moves made the whole-table plan's hottest table row-wise and
priced it 22.1 ms; search, which applies the moves to every start, found 21.0. Why descend after the moves:
a descent from the solve balances the devices around the hot table held whole, and spreading that table
over every device afterwards no longer pays (on that task the moves then found nothing: 29.0 ms).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace

from autoshard.costs.base import CostModel, plan_cost
from autoshard.plan import Plan
from autoshard.planners.descent import KICK_SIZE, SWAP_SAMPLES, Refined, refine_plan
from autoshard.planners.sharding_moves import improve
from autoshard.tasks import Task

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Descent:
    """How long and how hard to descend from the kept moved plan (``descent.refine_plan``)."""

    deadline: float
    """``time.perf_counter()`` value the descent stops at."""
    seed: int
    """Seed of the descent's swap samples and kicks."""
    kicks: int
    """Perturb-and-descend rounds after the first descent (0 = descent only)."""
    swap_samples: int = SWAP_SAMPLES
    """Swaps priced per descent step (``descent.refine_placement``)."""
    kick_size: int = KICK_SIZE
    """Random shard moves per kick."""


@dataclass(frozen=True)
class Finished:
    """A planner's returned plan, how it got there, and the finished plans it did not return (labelled),
    for the guard."""

    plan: Plan
    alternatives: tuple[tuple[str, Plan], ...]
    kept: str
    """Label of the solve the plan comes from."""
    moved_ms: float
    """The model's step of that solve after its sharding moves (before the descent)."""
    final_ms: float
    """The model's step of ``plan`` (never above ``moved_ms``)."""
    refined: Refined | None
    """What the descent did (None: no descent)."""
    moves: tuple[str, ...]
    """The sharding moves in ``plan``: those after the descent where it was kept, else the solve's."""


def whole_and_split(whole: Plan | None, split: Plan | None) -> list[tuple[str, Plan]]:
    """``ilp``'s and ``rl``'s two solves as ``finish`` takes them, labelled as the guard reports them
    ("whole-table", "column-shard"); a None (did not fit, or split nothing) left out."""
    return [(label, p) for label, p in (("whole-table", whole), ("column-shard", split)) if p is not None]


def finish(task: Task, model: CostModel, solves: Sequence[tuple[str, Plan]], who: str, *, moves: int,
           uneven_rows: bool = False, descent: Descent | None = None,
           moves_deadline: float | None = None) -> Finished:
    """The plan ``who`` returns from its labelled ``solves`` (at least one), chosen after each gets ``moves``
    sharding moves (the first on a tie), then descended (``descent``; None = no descent) and moved again
    where that prices cheaper; never dearer by ``model`` than the cheapest moved solve. The moves stop
    between tables at ``moves_deadline`` (None: no deadline)."""
    if not solves:
        raise ValueError("finish needs at least one solve")

    def moved_of(plan: Plan) -> tuple[Plan, list[str]]:
        return improve(task, plan, model, moves, deadline=moves_deadline, uneven_rows=uneven_rows, who=who)

    moved = [moved_of(p) for _, p in solves]
    costs = [plan_cost(model, task, p).plan_ms for p, _ in moved]
    pick = min(range(len(solves)), key=costs.__getitem__)
    if len(solves) > 1:
        log.info("%s: after the sharding moves, %s (%s)", who,
                 ", ".join(f"{label} {c:.3f} ms" for (label, _), c in zip(solves, costs)), model.name)
    (plan, changes), cost = moved[pick], costs[pick]
    refined = None
    if descent is not None:
        descended, refined = refine_plan(task, model, plan, descent.deadline, descent.seed, descent.kicks,
                                         who, descent.swap_samples, descent.kick_size)
        descended, more = moved_of(descended)
        descended_ms = plan_cost(model, task, descended).plan_ms
        if descended_ms < cost:
            plan, changes, cost = descended, changes + more, descended_ms
        else:
            log.info("%s: the descent did not lower the moved plan's step (%.3f ms)", who, cost)
    alternatives = tuple((label, moved[k][0]) for k, (label, _) in enumerate(solves) if k != pick)
    return Finished(replace(plan, algorithm=who), alternatives, solves[pick][0], costs[pick], cost, refined,
                    tuple(changes))
