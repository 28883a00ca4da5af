"""Plan every test task with every algorithm, side by side, and measure every plan with one real evaluator.

Reads top to bottom:
1. ``select_algorithms``: every registered planner, or the requested ones (a typo is an error).
2. ``plan_task``: each algorithm plans the task (timed and validated by ``run_planner``); a planner that fails
   (no room, no policy, ...) is recorded with its one-line error. The planning cost model's prediction of
   each plan is kept to compare with the measurement.
3. ``measure_task``: the distinct device contents of all plans of the task are timed back-to-back by the same
   evaluator, in ``rounds`` rounds with the order rotated; the minimum over rounds per device and component
   is kept (``hardware.evaluator.DEFAULT_ROUND_STATISTIC`` says why; ``restate`` re-derives a result with
   another statistic from its stored rounds). Plans
   that put the same tables on a device share its measurement, so identical devices compare identically.
   The step's collectives are the evaluator's comm model or, with ``collectives='measure'``, every plan's
   all-to-alls timed with its own splits on D processes (``measure_collectives``).
4. ``confirm_apart``: a plan every round set apart from the task's best heuristic's plan is timed again
   beside it, alone, so a task counts as clearly better / worse only where two timings agree.
5. ``run_bench``: loops over the tasks, writing one JSON per task as it goes (a re-run resumes); the summary
   and report are ``autoshard.bench``'s.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from autoshard.breakdown import CollectiveCost, StageFloor
from autoshard.costs.base import CostModel, plan_cost
from autoshard.costs.comm import AlphaBeta
from autoshard.costs.step import compose, plan_collectives
from autoshard.errors import AutoshardError
from autoshard.hardware.evaluator import (
    DEFAULT_ROUND_STATISTIC,
    RoundsMinimum,
    check_round_statistic,
    combine_rounds,
    measure_plans_collectives,
    rotated_rounds,
)
from autoshard.hardware.kernel import MeasureSettings
from autoshard.host import package_installed
from autoshard.io import read_json, write_json
from autoshard.pipeline.anchors import Anchors, anchored_model, hot_shards, time_anchors
from autoshard.pipeline.choose import MeasuredChoice, candidate_plans, measure_top, refit_pick
from autoshard.pipeline.measured_descent import DescentConfig, measured_descent
from autoshard.pipeline.progress import Progress, no_progress
from autoshard.pipeline.results import AlgoResult, TaskResult, rounds_apart
from autoshard.plan import Plan
from autoshard.planners.base import PLANNERS, PlannerOptions, is_heuristic, make_planner, run_planner
from autoshard.planners.exact import lower_bound, stage_floor
from autoshard.shards import ShardRef
from autoshard.tasks import Task

log = logging.getLogger(__name__)


MEASURED_PICK = "+top"
"""``<planner>+top<K>``: the planner's plan and the heuristics', the K its model prices cheapest timed at
planning time and the measured best kept (``measured_pick_name``; ``pipeline.choose``)."""
MEASURED_REFIT = "+refit"
"""``<planner>+top<K>+refit``: the measured pick, then the model corrected by its timings and the planner's
plan under it timed against the pick (``autoshard plan --measure-top K --refit``; ``pipeline.choose``)."""
MEASURED_DESCENT = "+descent"
"""``<planner>+top<K>[+refit]+descent<N>``: the measured pick, then at most N moves kept by timing the
devices (``autoshard plan --measure-top K --descend N``; ``pipeline.measured_descent``)."""


ANCHORED = "+hot"
"""``<planner>+hot<H>``: the planner with the model corrected by the H hottest tables and their column cuts
timed alone at planning time (``autoshard plan --anchor-hot H``; ``pipeline.anchors``)."""


def parse_anchored(name: str) -> tuple[str, int] | None:
    """(planner, H) of an anchored row ``<planner>+hot<H>``, None for any other name; an error for a bad H."""
    if ANCHORED not in name:
        return None
    base, _, h = name.partition(ANCHORED)
    if not h.isdigit() or int(h) < 1:
        raise AutoshardError(f"algorithm {name!r}: H in {base}{ANCHORED}H must be a positive integer")
    return base, int(h)


def anchored_name(algorithm: str, hot: int) -> str:
    """The bench's name of ``algorithm`` planning with ``autoshard plan --anchor-hot H``."""
    return f"{algorithm}{ANCHORED}{hot}"


def base_algorithm(name: str) -> str:
    """The registered planner a bench row name runs (``search+top3+refit``, ``search+hot4``: search)."""
    hot = parse_anchored(name)
    if hot is not None:
        return hot[0]
    return (parse_measured_pick(name) or MeasuredPick(name, 0)).base


@dataclass(frozen=True)
class MeasuredPick:
    """A bench algorithm that plans with measuring: ``autoshard plan --algo base --measure-top k [--refit]
    [--descend descent]``."""

    base: str
    k: int
    descent: int = 0
    refit: bool = False


def measured_pick_name(algorithm: str, k: int, descent: int = 0, refit: bool = False) -> str:
    """The bench's name of ``algorithm`` planning with ``autoshard plan --measure-top k [--refit]
    [--descend N]``."""
    return (f"{algorithm}{MEASURED_PICK}{k}" + (MEASURED_REFIT if refit else "")
            + (f"{MEASURED_DESCENT}{descent}" if descent else ""))


def parse_measured_pick(name: str) -> MeasuredPick | None:
    """The measured pick ``name`` stands for, None for a plain planner's; an error for a bad K, N or
    suffix."""
    if MEASURED_PICK not in name:
        return None
    base, _, rest = name.partition(MEASURED_PICK)
    k, *steps = rest.split("+")
    if not k.isdigit() or int(k) < 1:
        raise AutoshardError(f"algorithm {name!r}: K in {base}{MEASURED_PICK}K must be a positive integer")
    refit = bool(steps) and "+" + steps[0] == MEASURED_REFIT
    steps = steps[1:] if refit else steps
    descent = steps[0].removeprefix(MEASURED_DESCENT[1:]) if steps else "0"
    if len(steps) > 1 or (steps and (not steps[0].startswith(MEASURED_DESCENT[1:]) or not descent.isdigit()
                                     or int(descent) < 1)):
        raise AutoshardError(f"algorithm {name!r}: write {base}{MEASURED_PICK}K[{MEASURED_REFIT}]"
                             f"[{MEASURED_DESCENT}N] with K and N positive integers")
    return MeasuredPick(base, int(k), int(descent), refit)


PLANNER_PACKAGES = {"torchrec": "torchrec", "ilp": "ortools"}
"""Planners that need a package beyond autoshard's core (which runs on torch alone), by the package."""


def select_algorithms(requested: Sequence[str] | None = None) -> tuple[list[str], dict[str, str]]:
    """The algorithms to run and {name: reason} for those skipped.

    ``requested`` None means every registered planner whose package is installed (TorchRec's planner needs
    torchrec, which a GPU host with torch alone lacks); a requested name that is not registered is an error
    (a typo must not silently shrink a benchmark)."""
    registered = list(PLANNERS)
    if requested is None:
        missing = {name: f"not installed here ({package} missing; pip install {package})"
                   for name, package in PLANNER_PACKAGES.items()
                   if name in registered and not package_installed(package)}
        return [a for a in registered if a not in missing], missing
    unknown = [a for a in requested if base_algorithm(a) not in PLANNERS]
    if unknown:
        raise AutoshardError(
            f"unknown algorithm(s) {', '.join(unknown)}; registered: {', '.join(registered)}")
    chosen = list(dict.fromkeys(requested))
    return chosen, {a: "not requested (--algos)" for a in registered if a not in chosen}


Picks = dict[tuple[str, int, bool], tuple[MeasuredChoice, float, str]]
"""{(planner, K, refit): (its measured choice, seconds it took, what the refit did)} of one task, shared by
``<planner>+top<K>[+refit]`` and its descent variants."""


def _measured_pick(task: Task, name: str, options: PlannerOptions, cost_model: CostModel | None,
                   settings: MeasureSettings | None, comm: AlphaBeta | None,
                   picks: Picks) -> tuple[Plan, str]:
    """Plan as ``autoshard plan --algo A --measure-top K [--refit] [--descend N]`` does (``name`` =
    A+topK[+refit][+descentN]); the measuring counts as planning time. ``A+topK+refit`` refits from the pick
    ``A+topK`` made, and ``...+descentN`` descends from the pick (or the refit's) (each made once, into
    ``picks``), its planning time the sum: the rows then differ by their last step alone, not by two
    timings of the same candidates picking differently (stop 54: three tasks of ten started apart). The kept
    plan still names the algorithm whose plan it is; with it, what the pick, the refit and the descent did,
    "; "-joined."""
    pick = parse_measured_pick(name) or MeasuredPick(name, 0)
    if cost_model is None:
        raise AutoshardError(f"{name} needs a planning cost model to rank its candidates")
    if (pick.base, pick.k, False) not in picks:
        start = time.perf_counter()
        candidates = candidate_plans(task, pick.base, options)
        choice = measure_top(task, candidates, cost_model, pick.k, settings, comm)
        picks[pick.base, pick.k, False] = (choice, time.perf_counter() - start, choice.describe())
    if pick.refit and (pick.base, pick.k, True) not in picks:
        choice, seconds, note = picks[pick.base, pick.k, False]
        refit = refit_pick(task, pick.base, options, choice, cost_model, settings, comm)
        picks[pick.base, pick.k, True] = (replace(choice, best=refit.best), seconds + refit.measuring_s,
                                          f"{note}; {refit.describe()}")
    choice, seconds, note = picks[pick.base, pick.k, pick.refit]
    best = choice.best
    if pick.descent:
        config = DescentConfig(steps=pick.descent, seed=options.seed)
        descent = measured_descent(task, best, cost_model, config, settings, comm)
        best, note = descent.plan, f"{note}; {descent.describe()}"
        seconds += descent.measuring_s
    return replace(best, cost=None, planning_time_s=seconds), note


def _anchored_plan(task: Task, name: str, hot: tuple[str, int], options: PlannerOptions,
                   cost_model: CostModel | None, settings: MeasureSettings | None, comm: AlphaBeta | None,
                   anchors: dict[int, Anchors]) -> tuple[Plan, str, str]:
    """Plan as ``autoshard plan --algo A --anchor-hot H`` does (``name`` = A+hotH): the H hottest tables'
    shards timed alone (once per task and H, into ``anchors``, shared by every planner's row), the model
    corrected by them, the planner run with it; the timing counts as planning time (its stored prediction
    is the uncorrected planning model's, as every row's). Returns the plan, the guard's decision and what the
    anchors were. ``hot``: ``name`` as ``parse_anchored`` reads it."""
    base, h = hot
    if cost_model is None:
        raise AutoshardError(f"{name} needs a planning cost model to correct")
    if h not in anchors:
        anchors[h] = time_anchors(task, hot_shards(task, cost_model, h), settings, comm or cost_model.comm)
    timed = anchors[h]
    planner = make_planner(base, replace(options, cost_model=anchored_model(task, cost_model, timed)))
    plan = run_planner(planner, task)
    decision = getattr(planner, "last_decision", None)
    return (replace(plan, planning_time_s=(plan.planning_time_s or 0.0) + timed.seconds),
            decision.describe() if decision is not None else "", timed.describe(task))


def plan_task(task: Task, algorithms: Sequence[str], options: PlannerOptions,
              cost_model: CostModel | None, measure: MeasureSettings | None = None,
              comm: AlphaBeta | None = None) -> list[AlgoResult]:
    """Every algorithm's plan of ``task`` (or its error), with the planning cost model's prediction.
    ``measure`` and ``comm``: how a measured pick (``<planner>+top<K>``) times its candidates."""
    out = []
    picks: Picks = {}
    anchors: dict[int, Anchors] = {}
    for name in algorithms:
        guard = descent = ""
        try:
            hot = parse_anchored(name)
            if hot:
                plan, guard, descent = _anchored_plan(task, name, hot, options, cost_model, measure, comm,
                                                      anchors)
            elif parse_measured_pick(name):
                plan, descent = _measured_pick(task, name, options, cost_model, measure, comm, picks)
            else:
                planner = make_planner(name, options)
                plan = run_planner(planner, task)
                decision = getattr(planner, "last_decision", None)
                guard = decision.describe() if decision is not None else ""
        except AutoshardError as e:
            log.info("%s failed on %s: %s", name, task.name, e)
            out.append(AlgoResult(name, ok=False, error=str(e)))
            continue
        except Exception as e:
            log.warning("%s crashed on %s", name, task.name, exc_info=True)
            out.append(AlgoResult(name, ok=False, error=f"crashed: {type(e).__name__}: {e}".splitlines()[0]))
            continue
        predicted = plan_cost(cost_model, task, plan) if cost_model is not None else None
        out.append(AlgoResult(name, ok=True, plan=plan, predicted=predicted, guard=guard, descent=descent))
    return out


def _device_key(shards: Sequence[ShardRef]) -> tuple[ShardRef, ...]:
    return tuple(sorted(shards))


EvaluatorFactory = Callable[[], CostModel]
"""Makes a fresh evaluator. The real one caches each device's measurement per instance, so every measuring
round gets a new instance: the same evaluator (class and settings), measuring again."""


def measure_collectives(task: Task, results: Sequence[AlgoResult], comm: AlphaBeta,
                        backend: str = "auto") -> dict[str, tuple[CollectiveCost, ...]]:
    """Every planned result's collectives with its all-to-alls timed with the plan's own splits on D local
    processes, all plans of the task in one process group
    (``hardware.evaluator.measure_plans_collectives``). Plans with the same devices (a learned planner that
    returned a heuristic's plan) are timed once and share the timing, as their devices' kernels do: timing
    them apart would only add noise between identical plans."""
    planned = [r for r in results if r.ok and r.plan is not None]
    keys = {r.algorithm: tuple(_device_key(d) for d in r.plan.device_shards(task)) for r in planned}
    first: dict[tuple, AlgoResult] = {}
    for r in planned:
        first.setdefault(keys[r.algorithm], r)
    timed = dict(zip(first, measure_plans_collectives(task, [r.plan for r in first.values()], comm, backend)))
    return {r.algorithm: timed[keys[r.algorithm]] for r in planned}


def measure_task(task: Task, results: Sequence[AlgoResult], make_evaluator: EvaluatorFactory, rounds: int,
                 progress: Progress = no_progress, collectives: str = "model",
                 backend: str = "auto", statistic: str = DEFAULT_ROUND_STATISTIC) -> list[AlgoResult]:
    """Measure every planned result of ``task``: its devices' kernels in ``rounds`` interleaved rounds, a
    fresh evaluator each, reduced per device and component by ``statistic`` ('min' or 'median'), and the
    step's collectives from the evaluator's comm model (``collectives='model'``) or timed on D processes
    (``'measure'``)."""
    if collectives not in ("model", "measure"):
        raise AutoshardError(f"collectives {collectives!r}: use 'model' or 'measure'")
    if rounds < 1:
        raise AutoshardError(f"rounds {rounds} must be >= 1")
    check_round_statistic(statistic)
    planned = [r for r in results if r.ok and r.plan is not None]
    layouts = {r.algorithm: [_device_key(d) for d in r.plan.device_shards(task)] for r in planned}
    unique = list(dict.fromkeys(k for devs in layouts.values() for k in devs if k))
    index = {k: i for i, k in enumerate(unique)}
    source = "measured"
    comm = None

    def time_round(order: list[tuple[ShardRef, ...]]) -> np.ndarray:
        nonlocal source, comm
        evaluator = make_evaluator()
        source, comm = evaluator.name, evaluator.comm
        return np.asarray(evaluator.device_costs(task, [list(k) for k in order]), dtype=np.float64)

    per_round = rotated_rounds(unique, rounds, time_round, lambda done: progress("measure", done, rounds))
    if not unique:
        per_round = np.zeros((rounds, 0, 3))
    combined = combine_rounds(per_round, statistic)
    timed = (measure_collectives(task, results, comm, backend)
             if collectives == "measure" and comm is not None else {})
    out = []
    for r in results:
        if r.algorithm not in layouts:
            out.append(r)
            continue
        devs = layouts[r.algorithm]
        kernels = np.array([combined[index[k]] if k else np.zeros(3) for k in devs])
        steps = timed.get(r.algorithm) or (plan_collectives(task, comm, r.plan.device_shards(task))
                                            if comm is not None else ())
        rounds_ms = _plan_rounds(devs, per_round, index, steps, source)
        device_rounds = tuple(
            tuple((float(per_round[rnd, index[k], 0]), float(per_round[rnd, index[k], 1]))
                  if k else (0.0, 0.0) for k in devs) for rnd in range(rounds))
        measured = compose(kernels, steps, source)
        out.append(replace(r, plan=r.plan.with_cost(measured), measured=measured, rounds_ms=rounds_ms,
                           device_rounds_ms=device_rounds))
    return out


def _plan_rounds(devs: Sequence[tuple[ShardRef, ...]], per_round: np.ndarray, index: dict[tuple, int],
                 steps: Sequence[CollectiveCost], source: str) -> tuple[float, ...]:
    """Each round's step of the plan with devices ``devs``: that round's slowest fwd and bwd (``per_round``
    (rounds, timed devices, fwd/bwd/comm), a device's row ``index[key]``), plus the step's collectives."""
    return tuple(compose(np.array([per_round[rnd, index[k]] if k else np.zeros(3) for k in devs]), steps,
                         source).plan_ms for rnd in range(per_round.shape[0]))


def confirm_apart(task: Task, results: Sequence[AlgoResult], make_evaluator: EvaluatorFactory, rounds: int,
                  progress: Progress = no_progress) -> list[AlgoResult]:
    """``results`` (measured by ``measure_task``) with a second timing wherever the first set a
    non-heuristic plan apart from the task's best heuristic's plan (every round below, or every round
    above: ``results.rounds_apart``): those plans' devices, and only theirs, timed again in ``rounds``
    rotated rounds with fresh evaluators, each round's step composed with the plan's collectives as first
    measured, and stored as ``confirm_rounds_ms`` on each of them and on the heuristic's plan.

    Why: with 3 rounds two plans of equal cost are every round apart on about 1 task in 10 by chance alone
    (1 / C(6, 3) each way), and stop 63 re-timed four tasks the bench had called clearly worse at 0.947-1.011
    of the heuristic's plan. It is symmetric: a clear win must survive it as a clear loss must. The costs
    themselves (and every ratio and interval) stay those of the first timing."""
    measured = [r for r in results if r.ok and r.plan is not None and r.measured is not None]
    heuristics = [r for r in measured if is_heuristic(r.algorithm)]
    if not heuristics:
        return list(results)
    reference = min(heuristics, key=lambda r: r.measured.plan_ms)  # the summary's best heuristic
    layouts = {r.algorithm: [_device_key(d) for d in r.plan.device_shards(task)] for r in measured}
    apart = [r for r in measured if not is_heuristic(r.algorithm)
             and layouts[r.algorithm] != layouts[reference.algorithm]
             and rounds_apart(r.rounds_ms, reference.rounds_ms)]
    if not apart:
        return list(results)
    again = [reference, *apart]
    unique = list(dict.fromkeys(k for r in again for k in layouts[r.algorithm] if k))
    index = {k: i for i, k in enumerate(unique)}

    def time_round(order: list[tuple[ShardRef, ...]]) -> np.ndarray:
        return np.asarray(make_evaluator().device_costs(task, [list(k) for k in order]), dtype=np.float64)

    per_round = rotated_rounds(unique, rounds, time_round, lambda done: progress("confirm", done, rounds))
    confirmed = {r.algorithm: _plan_rounds(layouts[r.algorithm], per_round, index, r.measured.collectives,
                                           r.measured.source) for r in again}
    log.info("task %s: %s re-timed beside %s (every first round apart)", task.name,
             ", ".join(r.algorithm for r in apart), reference.algorithm)
    return [replace(r, confirm_rounds_ms=confirmed[r.algorithm]) if r.algorithm in confirmed else r
            for r in results]


def restate(result: AlgoResult, statistic: str, rounds: Sequence[int] | None = None) -> AlgoResult:
    """``result`` with its measured cost re-derived from its stored per-round device timings by another
    round ``statistic`` (a results file of one statistic read as the other), from the rounds of index
    ``rounds`` only where given (a reference picked on some rounds and priced on others:
    ``benchmarks/reference_rounds.py``); the step's collectives and the devices' own comm stay as measured.
    A result without stored rounds is returned as it is."""
    check_round_statistic(statistic)
    if result.measured is None or not result.device_rounds_ms:
        return result
    per_round = np.asarray(result.device_rounds_ms, dtype=np.float64)  # (rounds, devices, fwd/bwd)
    if rounds is not None:
        if not rounds or not all(0 <= i < len(per_round) for i in rounds):
            raise AutoshardError(f"restate: rounds {list(rounds)} are not a non-empty selection of the "
                                 f"result's {len(per_round)} rounds")
        per_round = per_round[list(rounds)]
    kernels = result.measured.to_array().copy()
    kernels[:, :2] = combine_rounds(per_round, statistic)
    measured = compose(kernels, result.measured.collectives, result.measured.source)
    plan = result.plan.with_cost(measured) if result.plan is not None else None
    return replace(result, plan=plan, measured=measured)


def restate_task(task_result: TaskResult, statistic: str) -> TaskResult:
    """Every result of ``task_result`` restated (``restate``)."""
    return replace(task_result, results=tuple(restate(r, statistic) for r in task_result.results))


def compute_lower_bound(task: Task, model: CostModel) -> tuple[float | None, str]:
    """``autoshard.planners.exact.lower_bound(task, model)``, or (None, why) where it fails."""
    try:
        return float(lower_bound(task, model)), ""
    except AutoshardError as e:
        return None, f"lower_bound failed: {e}"


def compute_stage_floor(task: Task, ranking: CostModel, price: CostModel,
                        results: Sequence[AlgoResult] = ()) -> StageFloor | None:
    """``planners.exact.stage_floor(task, ranking, price)`` with the shards of ``results``' plans also priced
    alone (those of the tables it prices: the room prices a cut's work by them), or None where pricing fails
    (logged)."""
    also = [ref for r in results if r.ok and r.plan is not None
            for device in r.plan.device_shards(task) for ref in device]
    try:
        return stage_floor(task, ranking, price, also)
    except AutoshardError as e:
        log.warning("%s: no stage floor (%s)", task.name, e)
        return None


@dataclass(frozen=True)
class BenchConfig:
    """What a benchmark run needs besides the tasks."""

    algorithms: tuple[str, ...]
    options: PlannerOptions
    """Options every planner is built from (seed, cost model, policy, time limit)."""
    rounds: int = 3
    """Interleaved measurement rounds per task."""
    round_statistic: str = DEFAULT_ROUND_STATISTIC
    """How a device's rounds become its cost: 'min' (default; ``hardware.evaluator``) or 'median'."""
    lower_bound_on: str = "evaluator"
    """'evaluator': the bound is computed with the real evaluator (compared with measured costs);
    'planning': with the planning cost model (compared with predicted costs); 'none': skip."""
    key: str = ""
    """Identity of the run's settings and models, stored with each task's result for resuming."""
    collectives: str = "model"
    """'measure': time every plan's all-to-alls with its own splits on D local processes; 'model': the
    evaluator's comm model (alpha-beta), labelled modelled in the results."""
    comm_backend: str = "auto"
    """Process-group backend for measured collectives (auto: NCCL with one GPU per rank, else gloo)."""
    pick_settings: MeasureSettings | None = None
    """How measured picks (``<planner>+top<K>``) time their candidates at planning time (the evaluator's)."""
    pick_comm: AlphaBeta | None = None
    """The comm model measured picks price their candidates' collectives with."""


def run_bench(tasks: Sequence[Task], config: BenchConfig, make_evaluator: EvaluatorFactory,
              out_dir: str | os.PathLike[str], progress: Progress = no_progress) -> list[TaskResult]:
    """Plan and measure every task; one JSON per task in ``out_dir/tasks`` (reused when its key matches)."""
    task_dir = Path(out_dir) / "tasks"
    results = []
    progress("tasks", 0, len(tasks))
    for i, task in enumerate(tasks):
        path = task_dir / f"{task.name}.json"
        if path.is_file():
            raw = read_json(path, kind="autoshard.bench_task")  # its own errors name the file
            try:
                cached = TaskResult.from_json(raw)
            except AutoshardError as e:  # the run stops saying which file, rather than overwrite it unasked
                raise AutoshardError(f"{path}: {e}; delete it to measure {task.name} again") from None
            if cached.key == config.key and cached.task == task:
                results.append(cached)
                progress("tasks", i + 1, len(tasks))
                continue
        planned = plan_task(task, config.algorithms, config.options, config.options.cost_model,
                            config.pick_settings, config.pick_comm)
        load_before = _load_average()
        measured = measure_task(task, planned, make_evaluator, config.rounds,
                                lambda w, d, t, name=task.name: progress(f"measure {name}", d, t),
                                config.collectives, config.comm_backend, config.round_statistic)
        measured = confirm_apart(task, measured, make_evaluator, config.rounds,
                                 lambda w, d, t, name=task.name: progress(f"confirm {name}", d, t))
        lb, note, lb_model, floor = None, "", "", None
        if config.lower_bound_on == "evaluator":
            evaluator = make_evaluator()
            lb, note = compute_lower_bound(task, evaluator)
            # ranked by the estimate's evaluator (its tables alone are cached), the few that can set the
            # floor priced as the plans' devices are: the least of the run's rounds
            floor = compute_stage_floor(task, evaluator, RoundsMinimum(make_evaluator, config.rounds),
                                        measured)
            lb_model = getattr(evaluator, "name", "evaluator")
        elif config.lower_bound_on == "planning" and config.options.cost_model is not None:
            lb, note = compute_lower_bound(task, config.options.cost_model)
            lb_model = config.options.cost_model.name
        load = tuple(x for x in (load_before, _load_average()) if x is not None)
        result = TaskResult(task, tuple(measured), lb, lb_model, note, config.key, load, floor)
        write_json(path, result.to_json())
        results.append(result)
        progress("tasks", i + 1, len(tasks))
    return results


def _load_average() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None
