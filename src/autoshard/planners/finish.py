"""The common last stage of ``ilp`` and ``rl``: from their two solves (whole tables, and the column shards of
NeuroShard's split search) to one plan and the guard's alternative.

Top to bottom: give each solve the sharding moves (``planners.sharding_moves``: the hottest tables tried as
row-wise shards or replicas); keep the solve whose *moved* plan the model prices cheaper (the whole-table
one on a tie); descend from the moved plan on the model's step (``local_search.refine_plan``: its table- and
column-wise shards move, the row-wise shards and replicas stay) and try the moves again on what is still
table-wise, keeping the result only where the model prices it below the moved plan; the other solve's moved
plan is the alternative the heuristic guard weighs (``planners.guard``).

Why choose after the moves: a move can change which solve is cheaper. On DLRM-10 (4)'s held-out task 1
(stop 37, docs/benchmarks.md) ilp's whole-table plan priced 29.6 ms against its column-shard plan's 26.3,
so the column shards were kept, while the moves made the whole-table plan's hottest table row-wise and
priced it 22.1 ms; search, which applies the moves to every start, found 21.0. Why descend after the moves:
a descent from the solve balances the devices around the hot table held whole, and spreading that table
over every device afterwards no longer pays (on that task the moves then found nothing: 29.0 ms).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from autoshard.costs.base import CostModel, plan_cost
from autoshard.plan import Plan
from autoshard.planners.local_search import refine_plan
from autoshard.planners.sharding_moves import improve
from autoshard.tasks import Task

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Descent:
    """How long and how hard to descend from the kept moved plan (``local_search.refine_plan``)."""

    deadline: float
    """``time.perf_counter()`` value the descent stops at."""
    seed: int
    """Seed of the descent's kicks."""
    kicks: int
    """Perturb-and-descend rounds after the first descent (0 = descent only)."""


@dataclass(frozen=True)
class Finished:
    """A planner's returned plan and the finished plans it did not return (labelled), for the guard."""

    plan: Plan
    alternatives: tuple[tuple[str, Plan], ...]


def finish(task: Task, model: CostModel, whole: Plan | None, split: Plan | None, who: str, *,
           moves: int, uneven_rows: bool = False, descent: Descent | None = None) -> Finished:
    """The plan ``who`` returns from its whole-table and column-shard solves (either may be None: it did not
    fit or split nothing; not both), chosen after each gets ``moves`` sharding moves, then descended
    (``descent``; None = no descent) and moved again where that prices cheaper; never dearer by ``model``
    than the cheaper moved solve."""
    solves = [(label, p) for label, p in (("whole-table", whole), ("column-shard", split)) if p is not None]
    if not solves:
        raise ValueError("finish needs at least one solve")
    moved = [improve(task, p, model, moves, uneven_rows=uneven_rows, who=who)[0] for _, p in solves]
    costs = [plan_cost(model, task, p).plan_ms for p in moved]
    pick = min(range(len(solves)), key=costs.__getitem__)  # first (whole tables) on a tie
    if len(solves) > 1:
        log.info("%s: after the sharding moves, whole tables %.3f ms, NeuroShard's column shards %.3f ms "
                 "(%s)", who, costs[0], costs[1], model.name)
    plan, cost = moved[pick], costs[pick]
    if descent is not None:
        descended = refine_plan(task, model, plan, descent.deadline, descent.seed, descent.kicks, who)
        descended, _ = improve(task, descended, model, moves, uneven_rows=uneven_rows, who=who)
        descended_ms = plan_cost(model, task, descended).plan_ms
        if descended_ms < cost:
            plan = descended
        else:
            log.info("%s: the descent did not lower the moved plan's step (%.3f ms)", who, cost)
    alternatives = tuple((label, moved[k]) for k, (label, _) in enumerate(solves) if k != pick)
    return Finished(plan, alternatives)
