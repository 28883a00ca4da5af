"""Run a benchmark: plan every test task with every algorithm, measure every plan with one real evaluator.

Reads top to bottom:
1. ``select_algorithms``: every registered planner (or the requested ones); algorithms the project defines but
   that are not registered are listed as skipped with the reason, never imitated.
2. ``plan_task``: each algorithm plans the task (timed and validated by ``run_planner``); a planner that fails
   (no room, no policy, ...) is recorded with its one-line error. The planning cost model's prediction of
   each plan is kept to compare with the measurement.
3. ``measure_task``: the distinct device contents of all plans of the task are timed back-to-back by the same
   evaluator, in ``rounds`` rounds with the order rotated; the median per device and component is kept. Plans
   that put the same tables on a device share its measurement, so identical devices compare identically.
4. ``run_bench``: loops over the tasks, writing one JSON per task as it goes (a re-run resumes), then
   ``summarize`` computes per-task ratios to the best heuristic, geometric means, and gaps to the lower bound.
"""

from __future__ import annotations

import importlib
import logging
import math
import os
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from autoshard.costs.base import CostModel, plan_cost
from autoshard.costs.breakdown import PlanCost, ShardRef
from autoshard.errors import AutoshardError
from autoshard.io import ARTEFACT_VERSION, read_json, write_json
from autoshard.plan import Plan
from autoshard.planners.base import PLANNERS, PlannerOptions, make_planner, run_planner
from autoshard.tasks import Task

log = logging.getLogger(__name__)

PROJECT_ALGORITHMS = ("torchrec", "rl", "neuroshard", "search", "ilp")
"""Non-heuristic planners the project defines (issues 5-7); any of them not registered is reported skipped."""

HEURISTICS_MODULE = "autoshard.planners.heuristics"
"""Planners whose factory lives here are the papers' heuristic baselines (the 'best heuristic' reference)."""

Progress = Callable[[str, int, int], None]
"""progress(what, done, total): called as work completes; the CLI turns it into a progress bar."""


def _no_progress(what: str, done: int, total: int) -> None:
    pass


# --------------------------------------------------------------------------------------------- algorithms


def is_heuristic(name: str) -> bool:
    return name in PLANNERS and PLANNERS[name][0].split(":")[0] == HEURISTICS_MODULE


def select_algorithms(requested: Sequence[str] | None = None) -> tuple[list[str], dict[str, str]]:
    """The algorithms to run and {name: reason} for those skipped.

    ``requested`` None means every registered planner. A requested name that is not registered is an error
    (a typo must not silently shrink a benchmark); a project algorithm that is simply not built is skipped."""
    registered = list(PLANNERS)
    skipped = {a: "not registered in autoshard.planners.base.PLANNERS (not built in this checkout)"
               for a in PROJECT_ALGORITHMS if a not in PLANNERS}
    if requested is None:
        return registered, skipped
    unknown = [a for a in requested if a not in PLANNERS]
    if unknown:
        raise AutoshardError(
            f"unknown algorithm(s) {', '.join(unknown)}; registered: {', '.join(registered)}")
    chosen = list(dict.fromkeys(requested))
    skipped.update({a: "not requested (--algos)" for a in registered if a not in chosen})
    return chosen, skipped


# --------------------------------------------------------------------------------------------- results


@dataclass(frozen=True)
class AlgoResult:
    """One algorithm on one task."""

    algorithm: str
    ok: bool
    error: str = ""
    """The planner's one-line error when it produced no plan."""
    plan: Plan | None = None
    predicted: PlanCost | None = None
    """The planning cost model's view of the plan."""
    measured: PlanCost | None = None
    """Median over the rounds, per device and component, by the real evaluator."""
    rounds_ms: tuple[float, ...] = ()
    """The plan's measured cost in each round (its spread shows the measurement noise)."""
    device_rounds_ms: tuple[tuple[tuple[float, float], ...], ...] = ()
    """Per round, per device: the measured (fwd ms, bwd ms), so a device's repeatability (the floor under any
    cost model's error on it) can be computed from the results."""

    @property
    def planning_time_s(self) -> float | None:
        return self.plan.planning_time_s if self.plan else None

    def to_json(self) -> dict[str, Any]:
        return {
            "algorithm": self.algorithm, "ok": self.ok, "error": self.error,
            "plan": self.plan.to_json() if self.plan else None,
            "planning_time_s": self.planning_time_s,
            "predicted": self.predicted.to_json() if self.predicted else None,
            "measured": self.measured.to_json() if self.measured else None,
            "rounds_ms": list(self.rounds_ms),
            "device_rounds_ms": [[list(fb) for fb in rnd] for rnd in self.device_rounds_ms],
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> AlgoResult:
        return AlgoResult(
            algorithm=d["algorithm"], ok=bool(d["ok"]), error=d.get("error", ""),
            plan=Plan.from_json(d["plan"]) if d.get("plan") else None,
            predicted=PlanCost.from_json(d["predicted"]) if d.get("predicted") else None,
            measured=PlanCost.from_json(d["measured"]) if d.get("measured") else None,
            rounds_ms=tuple(float(x) for x in d.get("rounds_ms", ())),
            device_rounds_ms=tuple(tuple((float(f), float(b)) for f, b in rnd)
                                   for rnd in d.get("device_rounds_ms", ())),
        )


@dataclass(frozen=True)
class TaskResult:
    """All algorithms on one task, and the task's lower bound where one is computed."""

    task: Task
    results: tuple[AlgoResult, ...]
    lower_bound_ms: float | None = None
    """A lower bound on any plan's cost under ``lower_bound_model`` (None when unavailable)."""
    lower_bound_model: str = ""
    lower_bound_note: str = ""
    key: str = ""
    """Hash of what produced it (suite, algorithms, models), so a resumed run reuses only matching work."""
    load_average: tuple[float, ...] = ()
    """The host's 1-minute load average before and after measuring (other processes slow timings down)."""

    def by_algorithm(self) -> dict[str, AlgoResult]:
        return {r.algorithm: r for r in self.results}

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": "autoshard.bench_task", "version": ARTEFACT_VERSION, "key": self.key,
            "task": self.task.to_json(), "lower_bound_ms": self.lower_bound_ms,
            "lower_bound_model": self.lower_bound_model, "lower_bound_note": self.lower_bound_note,
            "results": [r.to_json() for r in self.results], "load_average": list(self.load_average),
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> TaskResult:
        return TaskResult(
            task=Task.from_json(d["task"]), results=tuple(AlgoResult.from_json(r) for r in d["results"]),
            lower_bound_ms=d.get("lower_bound_ms"), lower_bound_model=d.get("lower_bound_model", ""),
            lower_bound_note=d.get("lower_bound_note", ""), key=d.get("key", ""),
            load_average=tuple(float(x) for x in d.get("load_average", ())),
        )


# --------------------------------------------------------------------------------------------- planning


def plan_task(task: Task, algorithms: Sequence[str], options: PlannerOptions,
              cost_model: CostModel | None) -> list[AlgoResult]:
    """Every algorithm's plan of ``task`` (or its error), with the planning cost model's prediction."""
    out = []
    for name in algorithms:
        try:
            plan = run_planner(make_planner(name, options), task)
        except AutoshardError as e:
            log.info("%s failed on %s: %s", name, task.name, e)
            out.append(AlgoResult(name, ok=False, error=str(e)))
            continue
        except Exception as e:
            log.warning("%s crashed on %s", name, task.name, exc_info=True)
            out.append(AlgoResult(name, ok=False, error=f"crashed: {type(e).__name__}: {e}".splitlines()[0]))
            continue
        predicted = plan_cost(cost_model, task, plan) if cost_model is not None else None
        out.append(AlgoResult(name, ok=True, plan=plan, predicted=predicted))
    return out


# --------------------------------------------------------------------------------------------- measuring


def _device_key(shards: Sequence[ShardRef]) -> tuple[ShardRef, ...]:
    return tuple(sorted(shards))


EvaluatorFactory = Callable[[], CostModel]
"""Makes a fresh evaluator. The real one caches each device's measurement per instance, so every measuring
round gets a new instance: the same evaluator (class and settings), measuring again."""


def measure_task(task: Task, results: Sequence[AlgoResult], make_evaluator: EvaluatorFactory, rounds: int,
                 progress: Progress = _no_progress) -> list[AlgoResult]:
    """Measure every planned result of ``task`` in ``rounds`` interleaved rounds, a fresh evaluator each."""
    if rounds < 1:
        raise AutoshardError(f"rounds {rounds} must be >= 1")
    planned = [r for r in results if r.ok and r.plan is not None]
    layouts = {r.algorithm: [_device_key(d) for d in r.plan.device_shards(task)] for r in planned}
    unique = list(dict.fromkeys(k for devs in layouts.values() for k in devs if k))
    index = {k: i for i, k in enumerate(unique)}
    per_round = np.zeros((rounds, len(unique), 3))
    source = "measured"
    for rnd in range(rounds):
        # Rotate the order each round so no device is always measured first (after an idle gap) or last.
        shift = (rnd * max(1, len(unique) // rounds)) % max(1, len(unique))
        order = unique[shift:] + unique[:shift]
        if order:
            evaluator = make_evaluator()
            source = getattr(evaluator, "name", source)
            costs = np.asarray(evaluator.device_costs(task, [list(k) for k in order]), dtype=np.float64)
            for k, row in zip(order, costs):
                per_round[rnd, index[k]] = row
        progress("measure", rnd + 1, rounds)
    median = np.median(per_round, axis=0)
    out = []
    for r in results:
        if r.algorithm not in layouts:
            out.append(r)
            continue
        devs = layouts[r.algorithm]
        med = np.array([median[index[k]] if k else np.zeros(3) for k in devs])
        rounds_ms = tuple(
            float(max(per_round[rnd, index[k]].sum() if k else 0.0 for k in devs)) for rnd in range(rounds)
        )
        device_rounds = tuple(
            tuple((float(per_round[rnd, index[k], 0]), float(per_round[rnd, index[k], 1])) if k else (0.0, 0.0)
                  for k in devs) for rnd in range(rounds))
        measured = PlanCost.from_array(med, source)
        out.append(AlgoResult(r.algorithm, True, r.error, r.plan.with_cost(measured), r.predicted, measured,
                              rounds_ms, device_rounds))
    return out


def compute_lower_bound(task: Task, model: CostModel) -> tuple[float | None, str]:
    """``autoshard.planners.exact.lower_bound(task, model)`` if that planner is built, else (None, why)."""
    try:
        exact = importlib.import_module("autoshard.planners.exact")
    except ImportError:
        return None, "autoshard.planners.exact is not built in this checkout"
    fn = getattr(exact, "lower_bound", None)
    if fn is None:
        return None, "autoshard.planners.exact has no lower_bound"
    try:
        return float(fn(task, model)), ""
    except AutoshardError as e:
        return None, f"lower_bound failed: {e}"


# --------------------------------------------------------------------------------------------- the loop


@dataclass(frozen=True)
class BenchConfig:
    """What a benchmark run needs besides the tasks."""

    algorithms: tuple[str, ...]
    options: PlannerOptions
    """Options every planner is built from (seed, cost model, policy, time limit)."""
    rounds: int = 3
    """Interleaved measurement rounds per task."""
    lower_bound_on: str = "evaluator"
    """'evaluator': the bound is computed with the real evaluator (compared with measured costs);
    'planning': with the planning cost model (compared with predicted costs); 'none': skip."""
    key: str = ""
    """Identity of the run's settings and models, stored with each task's result for resuming."""


def run_bench(tasks: Sequence[Task], config: BenchConfig, make_evaluator: EvaluatorFactory,
              out_dir: str | os.PathLike[str], progress: Progress = _no_progress) -> list[TaskResult]:
    """Plan and measure every task; one JSON per task in ``out_dir/tasks`` (reused when its key matches)."""
    task_dir = Path(out_dir) / "tasks"
    results = []
    progress("tasks", 0, len(tasks))
    for i, task in enumerate(tasks):
        path = task_dir / f"{task.name}.json"
        if path.is_file():
            cached = TaskResult.from_json(read_json(path, kind="autoshard.bench_task"))
            if cached.key == config.key and cached.task == task:
                results.append(cached)
                progress("tasks", i + 1, len(tasks))
                continue
        planned = plan_task(task, config.algorithms, config.options, config.options.cost_model)
        load_before = _load_average()
        measured = measure_task(task, planned, make_evaluator, config.rounds,
                                lambda w, d, t, name=task.name: progress(f"measure {name}", d, t))
        lb, note, lb_model = None, "", ""
        if config.lower_bound_on == "evaluator":
            evaluator = make_evaluator()
            lb, note = compute_lower_bound(task, evaluator)
            lb_model = getattr(evaluator, "name", "evaluator")
        elif config.lower_bound_on == "planning" and config.options.cost_model is not None:
            lb, note = compute_lower_bound(task, config.options.cost_model)
            lb_model = config.options.cost_model.name
        load = tuple(x for x in (load_before, _load_average()) if x is not None)
        result = TaskResult(task, tuple(measured), lb, lb_model, note, config.key, load)
        write_json(path, result.to_json())
        results.append(result)
        progress("tasks", i + 1, len(tasks))
    return results


def _load_average() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


# --------------------------------------------------------------------------------------------- summary


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
