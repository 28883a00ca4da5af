"""Statistics of a benchmark: per algorithm, cost over tasks, ratio to the best heuristic, wins, bound gaps.

Each task's reference is its cheapest heuristic plan (an oracle pick among the papers' heuristics), so a ratio
below 1 means the algorithm beat every heuristic on that task.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from autoshard.pipeline.results import AlgoResult, TaskResult
from autoshard.planners.base import PLANNERS

HEURISTICS_MODULE = "autoshard.planners.heuristics"
"""Planners whose factory lives here are the papers' heuristic baselines (the 'best heuristic' reference)."""


def is_heuristic(name: str) -> bool:
    """True for the papers' heuristic baselines, the reference every other algorithm is compared with."""
    return name in PLANNERS and PLANNERS[name][0].split(":")[0] == HEURISTICS_MODULE


def geomean(values: Sequence[float]) -> float | None:
    vals = [v for v in values if v is not None and v > 0 and math.isfinite(v)]
    if not vals:
        return None
    return float(math.exp(sum(math.log(v) for v in vals) / len(vals)))


@dataclass(frozen=True)
class AlgoSummary:
    """One algorithm over all tasks of a suite."""

    algorithm: str
    heuristic: bool
    tasks_ok: int
    tasks_total: int
    geomean_ms: float | None
    """Geometric mean of the measured plan cost over the tasks it planned."""
    geomean_ratio_to_best_heuristic: float | None
    """Geometric mean over tasks of cost / (that task's cheapest heuristic plan); < 1 beats all heuristics."""
    wins: int
    """Tasks where its plan measured cheapest of all algorithms (ties count for each)."""
    geomean_gap_to_lower_bound: float | None
    """Geometric mean of cost / lower bound, minus 1 (0 = provably optimal under the bound's model)."""
    mean_planning_s: float | None
    max_planning_s: float | None
    prediction_error: float | None
    """Mean |predicted - measured| / measured plan cost (how well the planning model knew the costs)."""
    noise: float | None
    """Median over its plans of (max - min) / median of the per-round measured cost."""
    clear_wins: int = 0
    """Tasks where every round of its plan measured below every round of the best heuristic's plan."""
    clear_losses: int = 0
    """Tasks where every round measured above every round of the best heuristic's plan."""
    errors: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}


def _clear(a: AlgoResult, b: AlgoResult | None) -> int:
    """+1 if every round of ``a`` is below every round of ``b``, -1 if above, 0 if the rounds overlap."""
    if b is None or a is b or not a.rounds_ms or not b.rounds_ms:
        return 0
    if max(a.rounds_ms) < min(b.rounds_ms):
        return 1
    if min(a.rounds_ms) > max(b.rounds_ms):
        return -1
    return 0


def summarize(results: Sequence[TaskResult], algorithms: Sequence[str]) -> list[AlgoSummary]:
    """Per algorithm: cost, ratios to the best heuristic of each task, wins, bound gaps, times, noise."""
    best_heuristic: dict[str, float] = {}
    best_heuristic_result: dict[str, AlgoResult] = {}
    best_any: dict[str, float] = {}
    for tr in results:
        costs = {r.algorithm: r.measured.plan_ms for r in tr.results if r.measured is not None}
        heur = [r for r in tr.results if r.measured is not None and is_heuristic(r.algorithm)]
        if heur:
            best = min(heur, key=lambda r: r.measured.plan_ms)
            best_heuristic[tr.task.name] = best.measured.plan_ms
            best_heuristic_result[tr.task.name] = best
        if costs:
            best_any[tr.task.name] = min(costs.values())
    out = []
    for algo in algorithms:
        rows = [(tr, tr.by_algorithm().get(algo)) for tr in results]
        ok = [(tr, r) for tr, r in rows if r is not None and r.measured is not None]
        ms = [r.measured.plan_ms for _, r in ok]
        ratios = [r.measured.plan_ms / best_heuristic[tr.task.name] for tr, r in ok
                  if tr.task.name in best_heuristic]
        gaps = [r.measured.plan_ms / tr.lower_bound_ms for tr, r in ok if tr.lower_bound_ms]
        times = [r.planning_time_s for _, r in ok if r.planning_time_s is not None]
        pred = [abs(r.predicted.plan_ms - r.measured.plan_ms) / r.measured.plan_ms for _, r in ok
                if r.predicted is not None and r.measured.plan_ms > 0]
        noise = [(max(r.rounds_ms) - min(r.rounds_ms)) / statistics.median(r.rounds_ms) for _, r in ok
                 if r.rounds_ms and statistics.median(r.rounds_ms) > 0]
        gap = geomean(gaps)
        clear = [_clear(r, best_heuristic_result.get(tr.task.name)) for tr, r in ok]
        out.append(AlgoSummary(
            algorithm=algo, heuristic=is_heuristic(algo), tasks_ok=len(ok), tasks_total=len(results),
            geomean_ms=geomean(ms), geomean_ratio_to_best_heuristic=geomean(ratios),
            wins=sum(1 for tr, r in ok if r.measured.plan_ms <= best_any[tr.task.name] * (1 + 1e-9)),
            geomean_gap_to_lower_bound=None if gap is None else gap - 1.0,
            mean_planning_s=statistics.fmean(times) if times else None,
            max_planning_s=max(times) if times else None,
            prediction_error=statistics.fmean(pred) if pred else None,
            noise=statistics.median(noise) if noise else None,
            clear_wins=clear.count(1), clear_losses=clear.count(-1),
            errors=tuple(dict.fromkeys(r.error for _, r in rows if r is not None and not r.ok)),
        ))
    return out
