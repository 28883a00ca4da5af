"""Plan on the hardware you train on: time the K best candidate plans' devices here and keep the measured
best (``autoshard plan --measure-top K``).

Candidates are the asked planner's plan and every heuristic's (so the result is never a plan the model
merely liked better than a heuristic it mispriced), ranked by the planning model's predicted step cost; the
K cheapest are measured side by side with the real evaluator (``hardware.evaluator.evaluate_plans``: their
distinct devices timed in interleaved rounds, the minimum over rounds kept, a device plans share timed once
a round; collectives from the comm model), and the cheapest measured plan is returned with the seconds the
measuring took. Where that is not the candidate the model priced cheapest, the two are timed again side by
side and the measured one is kept only if it is the cheaper again: across seven bench runs (stops 55-56)
the measured pick's row read from 0.4% below to 0.9% above search's own (against the best fixed
heuristic; none resolved), and on DLRM-10 (2) task 5 it kept a plan the bench then timed 26% dearer in
all three of its rounds ("Stop 56"): a least of three timings can still be one noisy episode of this host.

With ``--refit`` (``refit_pick``), those timings then correct the model on this task
(``costs.task_fit``: a level and a factor per table, per stage), the asked planner plans again with the
corrected model, and its plan, where it is new, is timed side by side with the pick; the cheaper is kept.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from autoshard.costs.base import CostModel, plan_cost
from autoshard.costs.comm import AlphaBeta
from autoshard.costs.learned.risk import RiskPricedModel
from autoshard.costs.task_fit import TaskFit, TaskFitModel, fit_task
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
    timed: tuple[Plan, ...] = ()
    """The measured candidates, cheapest predicted first, each with its measured cost attached."""
    confirmed_ms: tuple[float, float] | None = None
    """(the model's cheapest candidate, the measured best) timed again side by side, where they differ."""

    def describe(self) -> str:
        """One line: which candidate timed cheapest and, where it was not the model's cheapest, what the
        side-by-side re-timing decided (one of ``PICK_OUTCOMES``)."""
        timed = [c for c in self.candidates if c.measured_ms is not None]  # the model's cheapest first
        head = f"pick: {len(timed)} of {len(self.candidates)} candidates timed in {self.measuring_s:.1f} s"
        fastest = min(timed, key=lambda c: c.measured_ms)  # type: ignore[arg-type, return-value]
        if fastest is timed[0]:
            return f"{head}, {PICK_MODELS}"
        head = f"{head}, {fastest.algorithm}'s plan timed cheapest"
        if self.confirmed_ms is None:
            return f"{head}, {PICK_UNCHECKED}"
        first, again = self.confirmed_ms
        verdict = PICK_CONFIRMED if again < first else PICK_OVERRULED
        return f"{head}; side by side with {timed[0].algorithm}'s {first:.3f} -> {again:.3f} ms, {verdict}"


PICK_MODELS, PICK_CONFIRMED, PICK_OVERRULED, PICK_UNCHECKED = (
    "the model's cheapest timed cheapest", "the re-timing agreed", "the re-timing kept the model's cheapest",
    "kept without a re-timing")
PICK_OUTCOMES = (PICK_MODELS, PICK_CONFIRMED, PICK_OVERRULED, PICK_UNCHECKED)
"""How a measured pick ended, as ``MeasuredChoice.describe`` says it: the model's cheapest candidate also
timed cheapest; another timed cheapest and a second side-by-side timing agreed; it did not, and the model's
cheapest was kept; or another timed cheapest and was kept unchecked (``measure_top(confirm=False)``)."""


def plan_key(plan: Plan) -> tuple:
    """What makes two plans the same placement (the algorithm's name and costs aside)."""
    return tuple(sorted((p.table, p.sharding_type.value, p.shards) for p in plan.placements))


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
        key = plan_key(plan)
        if key not in seen:
            seen.add(key)
            out.append((name, plan))
    if not out:
        raise InfeasibleError(f"no candidate plan fits the devices' memory (tried {algorithm} and the "
                              "heuristics); give more memory or more devices")
    return out


def measure_top(task: Task, candidates: Sequence[tuple[str, Plan]], model: CostModel, k: int,
                settings: MeasureSettings | None = None, comm: AlphaBeta | None = None,
                rounds: int = MEASURE_ROUNDS, confirm: bool = True) -> MeasuredChoice:
    """Measure the ``k`` candidates ``model`` predicts cheapest (in ``rounds`` interleaved rounds) and return
    the measured best; with ``confirm``, one that is not the model's cheapest only if a second side-by-side
    timing of the two agrees (module docstring)."""
    if k < 1:
        raise AutoshardError(f"--measure-top {k}: measure at least 1 candidate")
    predicted = [plan_cost(model, task, plan).plan_ms for _, plan in candidates]
    order = list(np.argsort(predicted, kind="stable"))
    start = time.perf_counter()
    top = [int(i) for i in order[:k]]
    costs = evaluate_plans(task, [candidates[i][1] for i in top], settings, comm or model.comm, rounds)
    measured: dict[int, Plan] = {i: candidates[i][1].with_cost(c) for i, c in zip(top, costs)}
    best = min(measured, key=lambda i: measured[i].cost.plan_ms)  # type: ignore[union-attr]
    kept, confirmed = measured[best], None
    if confirm and best != top[0]:
        first, again = evaluate_plans(task, [candidates[top[0]][1], candidates[best][1]], settings,
                                      comm or model.comm, rounds)
        confirmed = (first.plan_ms, again.plan_ms)
        agreed = again.plan_ms < first.plan_ms
        kept = candidates[best][1].with_cost(again) if agreed else candidates[top[0]][1].with_cost(first)
        log.info("%s: measure-top's best, %s's plan, timed again %.3f ms against %s's %.3f: %s", task.name,
                 candidates[best][0], again.plan_ms, candidates[top[0]][0], first.plan_ms,
                 "kept" if agreed else "the model's cheapest kept")
    seconds = time.perf_counter() - start
    rows = tuple(Candidate(candidates[i][0], candidates[i][1], predicted[i],
                           measured[i].cost.plan_ms if i in measured else None)  # type: ignore[union-attr]
                 for i in order)
    return MeasuredChoice(kept, rows, seconds, tuple(measured[i] for i in top), confirmed)


KEPT_REPLANNED, KEPT_PICK, REPLANNED_TIMED = ("kept the replanned plan", "kept the pick",
                                              "replanned to a timed candidate")
REFIT_OUTCOMES = (KEPT_REPLANNED, KEPT_PICK, REPLANNED_TIMED)
"""How a refit ended, as ``Refit.describe`` says it."""


@dataclass(frozen=True)
class Refit:
    """What ``refit_pick`` did."""

    best: Plan
    """The kept plan, its cost the side-by-side timing's (the pick as it came where nothing new was timed)."""
    fit: TaskFit
    replanned: Plan | None
    """The planner's plan under the corrected model; None where it was one of the timed candidates."""
    side_by_side_ms: tuple[float, float] | None
    """(pick, replanned) as timed side by side; None where nothing new was timed."""
    measuring_s: float

    def describe(self) -> str:
        """One line: the fit, and whether the replanned plan was kept."""
        fitted = (f"fitted on {self.fit.devices} devices (level fwd x{np.exp(self.fit.level[0]):.2f}, "
                  f"bwd x{np.exp(self.fit.level[1]):.2f})")
        if self.side_by_side_ms is None:
            return f"{fitted}; {REPLANNED_TIMED} ({self.measuring_s:.1f} s)"
        pick, new = self.side_by_side_ms
        verdict = KEPT_REPLANNED if new < pick else KEPT_PICK
        return f"{fitted}; side by side {pick:.3f} -> {new:.3f} ms, {verdict} ({self.measuring_s:.1f} s)"


def refit_pick(task: Task, algorithm: str, options: PlannerOptions, choice: MeasuredChoice, model: CostModel,
               settings: MeasureSettings | None = None, comm: AlphaBeta | None = None,
               rounds: int = MEASURE_ROUNDS) -> Refit:
    """Correct ``model`` by the devices ``choice`` timed (``costs.task_fit``), plan ``task`` again with
    ``algorithm`` under the corrected model, and time that plan side by side with the pick (``rounds``
    interleaved rounds): the cheaper is returned. A plan already timed is not timed again."""
    start = time.perf_counter()
    timed = choice.timed or (choice.best,)
    if any(p.cost is None for p in timed):
        raise AutoshardError("refit: the measured candidates carry no measured cost; time them first")
    base = model.base if isinstance(model, RiskPricedModel) else model
    devices = [d for p in timed for d in p.device_shards(task)]
    measured = np.array([[d.fwd_ms, d.bwd_ms] for p in timed for d in p.cost.devices])  # type: ignore
    fit = fit_task(task, base, devices, measured)
    corrected = TaskFitModel(base, fit)
    plan = run_planner(make_planner(algorithm, replace(options, cost_model=corrected)), task)
    if plan_key(plan) in {plan_key(p) for p in timed}:
        return Refit(choice.best, fit, None, None, time.perf_counter() - start)
    before, after = evaluate_plans(task, [choice.best, plan], settings, comm or base.comm, rounds)
    best = plan.with_cost(after) if after.plan_ms < before.plan_ms else choice.best.with_cost(before)
    log.info("%s: refit %s; pick %.3f ms, replanned %.3f ms side by side", task.name, algorithm,
             before.plan_ms, after.plan_ms)
    return Refit(best, fit, plan, (before.plan_ms, after.plan_ms), time.perf_counter() - start)
