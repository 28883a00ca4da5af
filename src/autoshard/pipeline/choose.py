"""Plan on the hardware you train on: time the K best candidate plans' devices here and keep the measured
best (``autoshard plan --measure-top K``).

Candidates are the asked planner's plan and every heuristic's (so the result is never a plan the model
merely liked better than a heuristic it mispriced), ranked by the planning model's predicted step cost; the
K cheapest are measured side by side with the real evaluator (``hardware.evaluator.evaluate_plans``: their
distinct devices timed in interleaved rounds, the minimum over rounds kept, a device plans share timed once
a round; collectives from the comm model), and the cheapest measured plan is returned with the seconds the
measuring took.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from autoshard.costs.base import CostModel, plan_cost
from autoshard.costs.comm import AlphaBeta
from autoshard.errors import AutoshardError, InfeasibleError
from autoshard.hardware.evaluator import evaluate_plans
from autoshard.hardware.kernel import MeasureSettings
from autoshard.plan import Plan
from autoshard.planners.base import PlannerOptions, make_planner, run_planner
from autoshard.planners.guard import GUARD_HEURISTICS
from autoshard.tasks import Task

log = logging.getLogger(__name__)

HEURISTICS = GUARD_HEURISTICS
"""The deterministic load-balancing heuristics every measured choice also considers (the guard's)."""

MEASURE_ROUNDS = 3
"""Rounds the candidates' devices are timed in (the bench's too): the minimum of 3 interleaved timings."""


@dataclass(frozen=True)
class Candidate:
    algorithm: str
    plan: Plan
    predicted_ms: float
    measured_ms: float | None = None


@dataclass(frozen=True)
class MeasuredChoice:
    best: Plan
    """The cheapest measured candidate, its measured cost attached."""
    candidates: tuple[Candidate, ...]
    """Every candidate, cheapest predicted first; the measured ones have ``measured_ms``."""
    measuring_s: float


def candidate_plans(task: Task, algorithm: str, options: PlannerOptions,
                    torchrec_rows: bool = False) -> list[tuple[str, Plan]]:
    """The asked planner's plan and every heuristic's (infeasible ones left out), identical plans once
    (``torchrec_rows``: ``run_planner``'s)."""
    out: list[tuple[str, Plan]] = []
    seen = set()
    for name in dict.fromkeys((algorithm, *HEURISTICS)):
        try:
            plan = run_planner(make_planner(name, options), task, torchrec_rows)
        except InfeasibleError as e:
            log.info("measure-top: %s found no plan (%s)", name, e)
            continue
        key = tuple(sorted((p.table, p.sharding_type.value, p.shards) for p in plan.placements))
        if key not in seen:
            seen.add(key)
            out.append((name, plan))
    if not out:
        raise InfeasibleError(f"no candidate plan fits the devices' memory (tried {algorithm} and the "
                              "heuristics); give more memory or more devices")
    return out


def measure_top(task: Task, candidates: Sequence[tuple[str, Plan]], model: CostModel, k: int,
                settings: MeasureSettings | None = None, comm: AlphaBeta | None = None,
                rounds: int = MEASURE_ROUNDS) -> MeasuredChoice:
    """Measure the ``k`` candidates ``model`` predicts cheapest (in ``rounds`` interleaved rounds) and return
    the measured best."""
    if k < 1:
        raise AutoshardError(f"--measure-top {k}: measure at least 1 candidate")
    predicted = [plan_cost(model, task, plan).plan_ms for _, plan in candidates]
    order = list(np.argsort(predicted, kind="stable"))
    start = time.perf_counter()
    top = [int(i) for i in order[:k]]
    costs = evaluate_plans(task, [candidates[i][1] for i in top], settings, comm or model.comm, rounds)
    measured: dict[int, Plan] = {i: candidates[i][1].with_cost(c) for i, c in zip(top, costs)}
    seconds = time.perf_counter() - start
    best = min(measured, key=lambda i: measured[i].cost.plan_ms)  # type: ignore[union-attr]
    rows = tuple(Candidate(candidates[i][0], candidates[i][1], predicted[i],
                           measured[i].cost.plan_ms if i in measured else None)  # type: ignore[union-attr]
                 for i in order)
    return MeasuredChoice(measured[best], rows, seconds)
