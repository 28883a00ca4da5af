"""DreamShard's loop in the bench: plan -> measure the planners' own devices -> add them to the profile ->
refit the cost model -> retrain the policy, for ``TrainingConfig.refresh_rounds`` rounds within a time budget.

A cost model fitted on random shards is least sure exactly where the learned planners go (balanced devices of
many tables), and a planner that optimises its predictions finds the devices it underestimates. So each round
(DreamShard, NeurIPS'22, Alg. 1, with every learned planner, not only the policy):

1. the guarded learned planners (``search``, ``neuroshard``, ``ilp``, ``rl``; those the bench runs) and the
   deterministic heuristics plan ``refresh_tasks`` train tasks with the current model, fresh ones each round
   (round r the next ``refresh_tasks`` of the train split, ``round_tasks``), so a round's error is on devices
   of tasks the model was not tuned on (until stop 76 every round re-planned the same tasks, and from round
   1 on the row's error was mostly on devices the model had just been tuned on: 24% -> 4% on DLRM-50 (8)'s
   loop while the held-out devices stayed at 9%, docs/benchmarks.md, "Stop 75");
2. every device of those plans is timed on the real kernels (``refresh.DeviceRecorder``: the profile's
   measure settings, each distinct device once over the whole loop) and appended to the profile
   (``costs/shards-refresh.jsonl``);
3. the round's row is written: the current model's error on the learned planners' own devices (fwd+bwd,
   before it saw them), and each learned planner's measured step over the best heuristic's on those tasks
   (kernels measured once, collectives the comm fit's: modelled); where the bench times collectives
   (``--collectives measure``, or ``auto`` with a core or GPU per rank), every plan's all-to-alls are also
   timed with its own splits, as the bench times them (``hardware.evaluator.measure_plans_collectives``),
   the steps compared are composed with those, the comm fit's error on them goes in the row, and the
   PLANNING comm is refit on every collective the loop timed (``hardware.comm.fit_points``;
   ``refresh/comm_model.json``): the sweep's even all-to-alls (16 KB-4 MB) give the fit a slope the
   planners' own collectives do not show at the quick suite's 82-254 KB (docs/benchmarks.md, "Stop 27").
   The evaluator keeps the sweep's fit;
4. the cost model is refit on the grown profile (the suite's recipe: from scratch, or its ``cost_base``
   fine-tuned on it), or, when the bench was given a pre-trained model (``--cost-model``), that model is
   fine-tuned on every device the loop measured (``costs.learned.fine_tune``; the devices are kept in
   ``refresh/devices/``); the policy is trained further against it.

The bench then plans the held-out test tasks with the refreshed model and policy (``refresh/``). An
interrupted loop resumes after its last finished round: ``rounds.json`` is written last in a round and names
the content hashes of the model and policy that round left, so a resume continues from them when they are
still those files, and otherwise starts again from round 0 (the devices recorded so far are read back either
way: nothing is timed twice).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from autoshard.breakdown import PlanCost
from autoshard.costs.comm import AlphaBeta
from autoshard.costs.learned import LearnedCostModel
from autoshard.costs.learned.fine_tune import FineTuneOptions, fine_tune
from autoshard.costs.metrics import mape
from autoshard.costs.step import ALL_TO_ALLS, compose
from autoshard.errors import AutoshardError
from autoshard.hardware.comm import COMM_MODEL_FILE, fit_points
from autoshard.hardware.evaluator import measure_plans_collectives
from autoshard.hardware.kernel import MeasureSettings
from autoshard.hardware.profile_records import TABLES_FILE
from autoshard.hardware.profiler import CostDataset, load_dataset
from autoshard.io import ARTEFACT_VERSION, read_json, write_json
from autoshard.pipeline.cache import file_key, planning_code_key
from autoshard.pipeline.context import Context
from autoshard.pipeline.models import is_measured
from autoshard.pipeline.progress import Progress, Say, log_line, no_progress
from autoshard.pipeline.refresh import DeviceRecorder, check_dataset
from autoshard.pipeline.training import fit_cost_model, policy_train_config
from autoshard.planners.base import PlannerOptions, make_planner, run_planner
from autoshard.planners.guard import GUARD_HEURISTICS, GUARDED
from autoshard.planners.rl.policy import TrainedPolicy
from autoshard.planners.rl.train import train
from autoshard.tables import TablePool
from autoshard.tasks import Task, load_tasks

log = logging.getLogger(__name__)

REFRESH_DIR = "refresh"
"""Where the loop writes its models (``cost_model.pt``, ``policy.pt``) and its table (``rounds.json``)."""
MIN_COLLECTIVES = 6
"""Fewest timed all-to-alls the loop refits the planning comm on (two sizes at least)."""
DEVICES_DIR = "devices"
"""Under ``REFRESH_DIR``: the devices the loop measured for a given (pre-trained) cost model, a profile
dataset of the train pool's tables."""


@dataclass(frozen=True)
class Refreshed:
    """What the bench plans with after the stage: the cost model and policy, with the keys they are cached
    under (the refresh stage's when it ran)."""

    k_cost: str
    cost_spec: str
    k_policy: str
    policy_path: str | None
    comm_path: str | None = None
    """The planners' comm model refit on the loop's measured collectives (None: the evaluator's)."""


def stage_refresh(ctx: Context, k_train: str, k_cost: str, cost_spec: str, k_policy: str,
                  policy_path: str | None) -> Refreshed:
    """Run the loop (module docstring) when the suite asks for rounds and the cost model was trained here;
    else pass the models through."""
    t = ctx.suite.training
    if t.refresh_rounds <= 0:
        ctx.skip("refresh", "no refresh rounds (--refresh-rounds)")
        return Refreshed(k_cost, cost_spec, k_policy, policy_path)
    pretrained = bool(ctx.config.cost_model_path)
    if pretrained and (is_measured(cost_spec) or cost_spec == "analytical"):  # every other spec: a checkpoint
        ctx.skip("refresh", f"cost model {cost_spec!r} is not a learned checkpoint: nothing to refit")
        return Refreshed(k_cost, cost_spec, k_policy, policy_path)
    out = ctx.out / REFRESH_DIR
    learned = [a for a in GUARDED if (ctx.config.algorithms is None or a in ctx.config.algorithms)
               and (a != "rl" or policy_path is not None)]
    settings = {"rounds": t.refresh_rounds, "tasks": t.refresh_tasks, "fresh_tasks": True,
                "budget_s": t.refresh_budget_s,
                "learned": learned, "heuristics": list(GUARD_HEURISTICS),
                "time_limit_s": ctx.suite.time_limit_s, "planning_code": planning_code_key(),
                "models": [file_key(cost_spec), file_key(policy_path or "")],
                "refit": "fine-tune" if pretrained else "fit"}
    if pretrained:
        settings["measure"] = ctx.measure_settings().to_json()
        if ctx.config.allow_other_hardware:
            settings["adapt_hardware"] = True
    timed = ctx.collectives()[0] == "measure"
    if timed:
        settings["collectives"] = ctx.comm_backend()[0]
    outputs = [f"{REFRESH_DIR}/cost_model.pt", f"{REFRESH_DIR}/rounds.json"]
    if policy_path is not None:
        outputs.append(f"{REFRESH_DIR}/policy.pt")
    if timed:
        outputs.append(f"{REFRESH_DIR}/{COMM_MODEL_FILE}")

    def make(resume: bool) -> None:
        run_loop(ctx, cost_spec, policy_path, learned, resume=resume, pretrained=pretrained)

    key = ctx.stage("refresh", settings, [k_train, k_cost, k_policy], outputs, make)
    return Refreshed(key, str(out / "cost_model.pt"), key,
                     str(out / "policy.pt") if policy_path is not None else None,
                     str(out / COMM_MODEL_FILE) if timed else None)


def refresh_rounds(ctx: Context) -> list[dict[str, Any]]:
    """The rows of this run's loop (``refresh/rounds.json``), or none when the stage did not run here."""
    path = ctx.out / REFRESH_DIR / "rounds.json"
    if ctx.status.get("refresh") not in ("ran", "cached") or not path.is_file():
        return []
    return list(read_json(path, kind="autoshard.refresh_rounds")["rounds"])


def finished_rounds(out: Path, with_policy: bool) -> list[dict[str, Any]]:
    """The rows of an interrupted loop's finished rounds in ``out``, when the model (and policy) files there
    are still the ones its last round left (by content hash); else none (the loop starts again)."""
    path = out / "rounds.json"
    if not path.is_file():
        return []
    try:
        rows = list(read_json(path, kind="autoshard.refresh_rounds")["rounds"])
    except (AutoshardError, KeyError, TypeError):
        return []
    if not rows:
        return []
    last = rows[-1]
    if last.get("model_key") != file_key(str(out / "cost_model.pt")):
        return []
    if with_policy and last.get("policy_key") != file_key(str(out / "policy.pt")):
        return []
    return rows


def run_loop(ctx: Context, cost_spec: str, policy_path: str | None,
             learned: list[str], resume: bool = False, pretrained: bool = False) -> list[dict[str, Any]]:
    """The rounds; returns (and writes to ``refresh/rounds.json``) one row per round. With ``resume``, the
    rounds an interrupted run finished are kept (``finished_rounds``) and the loop goes on from there.

    ``pretrained``: the cost model was given, not trained on this run's profile: the devices go to a dataset
    of their own (``refresh/devices/``, timed with the evaluator's settings) and every round fine-tunes the
    given model on all of them (``costs.learned.fine_tune``: NeuroShard's pre-trained model, refreshed on
    the workload's own devices) instead of refitting from scratch."""
    t, s = ctx.suite.training, ctx.suite
    out = ctx.out / REFRESH_DIR
    out.mkdir(parents=True, exist_ok=True)
    train_tasks = load_tasks(str(ctx.out / "train_tasks.json"))
    tasks = round_tasks(train_tasks, t.refresh_tasks)
    if pretrained:
        # a model of other hardware (--allow-other-hardware) is adapted to this one by the fine-tuning
        base = LearnedCostModel.load(cost_spec, allow_other_hardware=ctx.config.allow_other_hardware)
        recorder = device_recorder(out / DEVICES_DIR, TablePool.load(str(ctx.out / "train_pool.json")),
                                   ctx.measure_settings())

        def refit(grown: CostDataset) -> LearnedCostModel:
            return fine_tune(base, grown, FineTuneOptions(seed=s.seed),
                             adapt_hardware=ctx.config.allow_other_hardware)
    else:
        base = None
        costs = ctx.out / "costs"
        recorder = DeviceRecorder(check_dataset(costs, train_tasks), costs)

        def refit(grown: CostDataset) -> LearnedCostModel:
            return fit_cost_model(ctx, grown)

    def retrain(model: LearnedCostModel, model_path: Path, resume_from: TrainedPolicy,
                r: int) -> TrainedPolicy:
        iterations = t.policy_iterations * (r + 2)  # the first training's, then as many again a round
        return train(model, train_tasks, policy_train_config(ctx, iterations),
                     cost_model_spec=str(model_path), checkpoint_path=str(out / "policy.pt"),
                     resume=resume_from)

    loop = LoopSettings(rounds=t.refresh_rounds, budget_s=t.refresh_budget_s, seed=s.seed,
                        time_limit_s=s.time_limit_s, learned=tuple(learned))
    backend = ctx.comm_backend()[0] if ctx.collectives()[0] == "measure" else None
    return loop_rounds(tasks, out, base or LearnedCostModel.load(cost_spec), recorder, refit, loop,
                       ctx.comm_model(), policy_path=policy_path, retrain=retrain,
                       collectives_backend=backend, resume=resume, say=ctx.say, progress=ctx.progress)


def round_tasks(tasks: Sequence[Task], per_round: int) -> Callable[[int], list[Task]]:
    """Round r's tasks: the ``per_round`` after round r - 1's in ``tasks``, wrapping round (so no task is
    planned twice until every one was)."""
    n = min(per_round, len(tasks))
    if n < 1:
        raise AutoshardError("the refresh loop needs at least one task a round")
    return lambda r: [tasks[(r * n + i) % len(tasks)] for i in range(n)]


@dataclass(frozen=True)
class LoopSettings:
    """How the loop runs, apart from what it plans and how it refits."""

    rounds: int
    """Rounds of plan -> measure -> refit."""
    budget_s: float
    """No round starts after this many seconds of the loop (the first always runs)."""
    seed: int
    """The planners' seed."""
    time_limit_s: float
    """The searching planners' seconds per task."""
    learned: tuple[str, ...]
    """The learned planners that plan each round beside the guard heuristics."""


def device_recorder(costs: Path, pool: TablePool, settings: MeasureSettings) -> DeviceRecorder:
    """A recorder of the loop's devices in a dataset of their own (``costs``) of the tables ``pool``, timed
    with ``settings``."""
    costs.mkdir(parents=True, exist_ok=True)
    if not (costs / TABLES_FILE).is_file():
        pool.save(str(costs / TABLES_FILE))
    return DeviceRecorder(load_dataset(costs), costs, settings)


def loop_rounds(tasks: Callable[[int], list[Task]], out: Path, model: LearnedCostModel,
                recorder: DeviceRecorder, refit: Callable[[CostDataset], LearnedCostModel],
                loop: LoopSettings, sweep: AlphaBeta, *, policy_path: str | None = None,
                retrain: Callable[[LearnedCostModel, Path, TrainedPolicy, int], TrainedPolicy] | None = None,
                collectives_backend: str | None = None, resume: bool = False,
                say: Say = log_line, progress: Progress = no_progress) -> list[dict[str, Any]]:
    """The loop's rounds, round r over ``tasks(r)``, from ``model``, written to ``out`` (``cost_model.pt``,
    ``policy.pt`` when it trains one, ``rounds.json`` last in a round); one row per round. ``refit`` makes
    the next model from the grown dataset; ``retrain`` trains the policy further against the model just
    saved. ``sweep``: the comm the evaluator prices the rounds' steps with (the planners' too, unless the loop
    times collectives and refits it). With ``resume`` an interrupted loop's finished rounds are kept
    (``finished_rounds``)."""
    out.mkdir(parents=True, exist_ok=True)
    model_path, new_policy_path = out / "cost_model.pt", out / "policy.pt"
    trains_policy = policy_path is not None and retrain is not None  # else rl plans with policy_path as is
    rows = finished_rounds(out, trains_policy) if resume else []
    comm = refit_comm(rows, sweep) if collectives_backend is not None else sweep  # the planners'
    policy = None  # the one the loop trains further; rl plans with policy_path when the loop trains none
    if trains_policy:
        policy = TrainedPolicy.load(str(new_policy_path) if rows else str(policy_path))
    if rows:
        model = LearnedCostModel.load(str(model_path))
        say(f"[refresh] resuming after round {len(rows) - 1} (of {loop.rounds})")
    start = time.perf_counter() - (float(rows[-1].get("elapsed_s", 0.0)) if rows else 0.0)
    for r in range(len(rows), loop.rounds):
        if r and time.perf_counter() - start > loop.budget_s:
            say(f"[refresh] time budget {loop.budget_s:.0f} s spent after {r} round(s)")
            break
        current_policy = str(new_policy_path) if r and trains_policy else policy_path
        options = PlannerOptions(seed=loop.seed, cost_model=model.with_comm(comm), policy_path=current_policy,
                                 time_limit_s=loop.time_limit_s)
        planned = tasks(r)
        row = _round(r, planned, list(loop.learned), options, recorder, sweep, collectives_backend, progress)
        row["tasks"] = [t.name for t in planned]
        if collectives_backend is not None:
            comm = refit_comm([*rows, row], sweep)
            comm.save(str(out / COMM_MODEL_FILE))
            row["comm_refit"] = comm.to_json()
        grown = load_dataset(recorder.path.parent)
        model = refit(grown)
        if model.info.get("fine_tuned"):
            row["fine_tuned"] = {k: model.info["fine_tuned"].get(k) for k in
                                 ("records", "val_mape_pct_before", "val_mape_pct_after", "val_risk_k")}
            row["fine_tuned"]["risk_k"] = model.risk_k
        model = model.with_comm(comm)  # the loop's planning comm (refit on its collectives where timed)
        model.save(str(model_path))
        if policy is not None and retrain is not None:
            policy = retrain(model, model_path, policy, r)
            policy.save(str(new_policy_path))
        row["records_total"] = len(grown.records)
        row["elapsed_s"] = time.perf_counter() - start
        row["model_key"] = file_key(str(model_path))
        if trains_policy:
            row["policy_key"] = file_key(str(new_policy_path))
        rows.append(row)
        say(f"[refresh] round {r}: {describe_round(row)}")
        progress("refresh rounds", r + 1, loop.rounds)
        write_json(out / "rounds.json", {"kind": "autoshard.refresh_rounds", "version": ARTEFACT_VERSION,
                                         "rounds": rows})
    return rows


def _round(r: int, tasks: list[Task], learned: list[str], options: PlannerOptions, recorder: DeviceRecorder,
           comm: AlphaBeta, collectives_backend: str | None = None,
           progress: Progress = no_progress) -> dict[str, Any]:
    """Plan the tasks with the heuristics and the learned planners, measure every device (recorded), and
    compare: the model's device error (learned planners' devices) and each learned planner's step over the
    best heuristic's. With ``collectives_backend`` every distinct plan's all-to-alls are timed too
    (``collective_points``, beside the planning model's comm estimate) and the steps compared are composed
    with them; else with ``comm``'s (modelled)."""
    model = options.cost_model
    assert model is not None
    index = 0
    errors: list[float] = []
    under = 0
    ratios: dict[str, list[float]] = {a: [] for a in learned}
    sources: dict[str, dict[str, int]] = {a: {} for a in learned}
    added_before = recorder.added
    points: list[list[Any]] = []
    for done, task in enumerate(tasks):
        progress(f"refresh round {r}: tasks", done, len(tasks))
        steps: dict[str, tuple[str, PlanCost]] = {}  # planner -> (placement, kernels measured)
        plans: dict[str, Any] = {}  # distinct plans by their tables' placement
        for name in (*GUARD_HEURISTICS, *learned):
            plan = _plan(name, options, task)
            if plan is None:
                continue
            placement = json.dumps(plan.to_json()["tables"], sort_keys=True)
            plans.setdefault(placement, plan)
            devices = plan.device_shards(task)
            predicted = model.device_costs(task, devices) if name in learned else None
            cost, index = recorder.plan_cost(task, devices, comm, r, index)
            steps[name] = (placement, cost)
            for g, d in enumerate(cost.devices):
                if predicted is not None and devices[g] and d.fwd_ms + d.bwd_ms > 0:
                    real, guess = d.fwd_ms + d.bwd_ms, float(predicted[g, 0] + predicted[g, 1])
                    errors.append(abs(guess - real) / real)
                    under += guess < real
        if collectives_backend is not None and plans:  # each beside the comm the planners priced it with
            timed = dict(zip(plans, measure_plans_collectives(task, list(plans.values()), model.comm,
                                                              collectives_backend)))
            for placement, cols in timed.items():
                plan_id = hashlib.sha256(placement.encode()).hexdigest()[:12]
                # the all-to-alls only: the comm is refitted on them (row collectives have their factors)
                points += [[c.busiest_bytes, c.measured_ms, c.modelled_ms, f"{task.name}/{plan_id}/{c.name}"]
                           for c in cols if c.measured_ms is not None and c.busiest_bytes > 0
                           and c.name in ALL_TO_ALLS]
            steps = {name: (placement, compose(_device_array(cost), timed[placement], "measured"))
                     for name, (placement, cost) in steps.items()}
        heuristic_steps = [cost.plan_ms for name, (_, cost) in steps.items() if name in GUARD_HEURISTICS]
        if heuristic_steps:
            best = min(heuristic_steps)
            for name in learned:
                if name in steps:
                    ratios[name].append(steps[name][1].plan_ms / best)
                    source = plan_source(steps[name][0], steps)
                    sources[name][source] = sources[name].get(source, 0) + 1
    progress(f"refresh round {r}: tasks", len(tasks), len(tasks))
    row: dict[str, Any] = {
        "round": r, "records_added": recorder.added - added_before, "devices": len(errors),
        "device_mape": float(np.mean(errors)) if errors else None,
        "underestimated_share": under / len(errors) if errors else None,
        "ratio_to_best_heuristic": {a: (float(np.exp(np.mean(np.log(v)))) if v else None)
                                    for a, v in ratios.items()},
        "plan_sources": sources,
        "collectives": "measured" if collectives_backend is not None else "modelled"}
    if collectives_backend is not None:
        # [busiest rank's bytes, measured ms, the planning comm's ms, task/plan/collective]
        row["collective_points"] = points
        row["comm_mape"] = mape([p[2] for p in points], [p[1] for p in points]) / 100 if points else None
    return row


OWN_PLAN = "own"
"""``plan_sources``' name for a learned planner's plan that is none of the heuristics'."""


def plan_source(placement: str, steps: dict[str, tuple[str, Any]]) -> str:
    """Whose plan a learned planner returned: the first guard heuristic (``GUARD_HEURISTICS``' order) whose
    placement in ``steps`` (planner -> (placement, ...)) is ``placement``, else ``OWN_PLAN``. A guarded
    planner keeps a heuristic's plan unless its own is predicted cheaper by more than the model's spread,
    and then its ratio is how that heuristic's one timing compares with the cheapest heuristic's: the
    model's pick among near-equal plans, not its own placement."""
    return next((h for h in GUARD_HEURISTICS if h in steps and steps[h][0] == placement), OWN_PLAN)


def describe_sources(sources: dict[str, int] | None) -> str:
    """``{"lookup_greedy": 2, "own": 1}`` -> ``" (lookup_greedy's plan 2, its own 1)"``, to follow a ratio;
    empty for none (rows written before stop 58 kept none)."""
    if not sources:
        return ""
    named = {s: "its own" if s == OWN_PLAN else f"{s}'s plan" for s in sources}
    return " (" + ", ".join(f"{named[s]} {n}" for s, n in sorted(sources.items(),
                                                                 key=lambda kv: (-kv[1], kv[0]))) + ")"


def _device_array(cost: PlanCost) -> np.ndarray:
    """(D, 3) fwd, bwd and own comm ms of a plan cost's devices."""
    return np.array([[d.fwd_ms, d.bwd_ms, d.comm_ms] for d in cost.devices], dtype=np.float64).reshape(-1, 3)


def refit_comm(rows: list[dict[str, Any]], comm: AlphaBeta) -> AlphaBeta:
    """The planning comm fitted on every distinct collective the loop's ``rows`` timed, each at its least
    time over the rounds (the loop re-plans the same tasks, and contention only adds time: one round's
    all-to-alls timed 2-6x slower than the next round's of the same plans in a quickstart); ``comm`` (the
    sweep's fit) where they were fewer than ``MIN_COLLECTIVES`` or of one size."""
    least: dict[str, tuple[float, float]] = {}
    for row in rows:
        for bytes_moved, ms, _, key in row.get("collective_points", []):
            if key not in least or ms < least[key][1]:
                least[key] = (float(bytes_moved), float(ms))
    points = np.array(list(least.values()), dtype=np.float64).reshape(-1, 2)
    if len(points) < MIN_COLLECTIVES or len(np.unique(points[:, 0])) < 2:
        return comm
    source = f"refit on the {len(points)} distinct all-to-alls the refresh loop timed (not {comm.source})"
    refit = fit_points(points[:, 0], points[:, 1], source)
    return replace(refit, reduce_scatter_factor=comm.reduce_scatter_factor,
                   all_gather_factor=comm.all_gather_factor, bucketize_ns_per_id=comm.bucketize_ns_per_id)


def _plan(name: str, options: PlannerOptions, task: Task) -> Any:
    try:
        return run_planner(make_planner(name, options), task)
    except AutoshardError as e:
        log.info("refresh: %s did not plan %s: %s", name, task.name, e)
        return None


def describe_round(row: dict[str, Any]) -> str:
    """One line: devices measured, the model's error on the learned planners' devices, the ratios and whose
    plans they are."""
    mape = row.get("device_mape")
    sources = row.get("plan_sources", {})
    ratios = ", ".join(f"{a} {v:.3f}{describe_sources(sources.get(a))}"
                       for a, v in row["ratio_to_best_heuristic"].items() if v is not None)
    error = "-" if mape is None else f"{100 * mape:.1f}%"
    tuned = row.get("fine_tuned")
    after = "" if not tuned else (f"; fine-tuned: validation error {tuned['val_mape_pct_before']:.1f}% -> "
                                  f"{tuned['val_mape_pct_after']:.1f}%, risk_k {tuned['risk_k']:.2f}")
    if row.get("comm_mape") is not None and row.get("comm_refit"):
        refit = AlphaBeta.from_json(row["comm_refit"])
        after += (f"; comm fit's error on the round's {len(row['collective_points'])} timed all-to-alls "
                  f"{100 * row['comm_mape']:.0f}%, refit {refit.alpha_ms:.3f} ms + bytes / "
                  f"{refit.bytes_per_ms / 1e3:.0f} KB/ms")
    return (f"{row['records_added']} devices added ({row.get('records_total', '?')} in the profile); model "
            f"error on the learned planners' {row['devices']} devices {error}; measured step / best "
            f"heuristic: {ratios or '-'}{after}")
