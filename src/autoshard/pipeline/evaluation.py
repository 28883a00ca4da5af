"""The last stage: every algorithm plans every test task, and the real evaluator measures every plan."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autoshard.costs.base import CostModel
from autoshard.costs.comm import AlphaBeta
from autoshard.errors import AutoshardError
from autoshard.hardware.evaluator import MeasuredCostModel
from autoshard.hardware.kernel import DeviceKind, KernelBackend, MeasureSettings
from autoshard.host import host_info
from autoshard.pipeline.cache import code_version, file_key, planning_code_key, stage_key
from autoshard.pipeline.context import Context
from autoshard.pipeline.measure import (
    BenchConfig,
    anchored_name,
    measured_pick_name,
    run_bench,
    select_algorithms,
)
from autoshard.pipeline.models import is_measured, load_cost_model
from autoshard.pipeline.refresh_stage import refresh_rounds
from autoshard.pipeline.results import TaskResult
from autoshard.planners.base import PlannerOptions
from autoshard.planners.guard import GUARDED
from autoshard.tasks import load_tasks

log = logging.getLogger(__name__)

BENCH_DIR = "bench"
"""Where the measured tasks (``bench/tasks/<task>.json``) and the report built from them go."""

TORCHREC = "torchrec"
"""TorchRec's planner (``autoshard.torchrec.baseline``), the one planner told the kernels' compute device."""

KERNELS = {KernelBackend.FBGEMM: "FBGEMM", KernelBackend.TORCH: "torch-backend (plain torch, no FBGEMM)"}
"""How the report names the timed kernels."""


def load_planning_model(spec: str, settings: MeasureSettings,
                        allow_other_hardware: bool = False) -> CostModel:
    """The planning cost model of ``spec`` (``models.load_cost_model``; ``measured`` times with ``settings``),
    refused in one line when a learned model was trained on kernels timed otherwise than ``settings``
    (``SETTING_KEYS``: optimizer, threads, device, backend) or on other hardware, unless allowed."""
    if is_measured(spec):
        return MeasuredCostModel(settings)
    if allow_other_hardware and spec != "analytical":
        from autoshard.costs.learned import LearnedCostModel

        return LearnedCostModel.load(spec, allow_other_hardware=True)
    model = load_cost_model(spec)
    check = getattr(model, "check_compatible", None)
    if callable(check):
        check(settings=settings)
        trained = dict(getattr(model, "trained_on", {}).get("settings", {}))
        if "backend" not in trained and settings.backend is not KernelBackend.FBGEMM:
            # settings recorded before the backend existed are FBGEMM timings (MeasureSettings.backend)
            raise AutoshardError(f"cost model {spec} was trained on FBGEMM timings but backend="
                                 f"{settings.backend.value!r} was asked; retrain with those settings, or "
                                 "allow other hardware (--allow-other-hardware)")
    return model


def planner_extras(settings: MeasureSettings) -> dict[str, dict[str, Any]]:
    """Per-algorithm settings of the bench (``PlannerOptions.algorithm_extra``): TorchRec's planner is told
    the compute device the kernels run on (its own estimates differ for cpu and cuda). The others get none:
    keys a planner does not know are errors for it."""
    if settings.device is DeviceKind.CUDA:
        return {TORCHREC: {"compute_device": "cuda"}}
    return {}


@dataclass(frozen=True)
class Evaluation:
    """The measured test tasks and what the report says about how they were measured."""

    out_dir: Path
    """``<run>/bench``."""
    results: list[TaskResult]
    algorithms: list[str]
    meta: dict[str, Any]
    """Suite, host, evaluator, models, skipped algorithms, stage statuses, command and code version."""


def stage_evaluate(ctx: Context, k_comm: str, k_cost: str, cost_spec: str, k_policy: str,
                   policy_path: str | None, planning_comm_path: str | None = None) -> Evaluation:
    """Plan and measure every test task (``measure.run_bench``: one result per task, reused on a re-run
    when its key matches). ``planning_comm_path``: the comm model the planners price the all-to-alls with
    (the refresh loop's refit on its timed collectives), instead of the evaluator's."""
    s = ctx.suite
    requested = ctx.config.algorithms
    algorithms, skipped = select_algorithms(requested)
    if policy_path is None and requested is None and "rl" in algorithms:
        algorithms.remove("rl")
        skipped["rl"] = "no trained policy (pass --policy or let the pipeline train one)"
    k = ctx.config.measure_top
    if k:  # every learned planner also as a measured pick: autoshard plan --measure-top K
        learned = [a for a in GUARDED if a in algorithms]
        algorithms += [measured_pick_name(a, k) for a in learned]
        if ctx.config.descend:
            algorithms += [measured_pick_name(a, k, ctx.config.descend) for a in learned]
        if ctx.config.refit:
            algorithms += [measured_pick_name(a, k, refit=True) for a in learned]
            if ctx.config.descend:
                algorithms += [measured_pick_name(a, k, ctx.config.descend, refit=True) for a in learned]
    if ctx.config.anchor_hot:  # every learned planner also with anchors: autoshard plan --anchor-hot H
        algorithms += [anchored_name(a, ctx.config.anchor_hot) for a in GUARDED if a in algorithms]
    comm = ctx.comm_model()
    settings = ctx.measure_settings()
    extras = {a: x for a, x in planner_extras(settings).items() if a in algorithms}

    def make_evaluator() -> CostModel:
        return MeasuredCostModel(settings, comm)

    # 'measured' plans with the evaluator's own settings and comm model (an oracle cost model: it shows how
    # much the learned model's error costs the planners).
    # Every planner prices the all-to-all with the suite's fit at its D, as the evaluator does: a model
    # trained elsewhere carries the comm fitted there (the shipped one: 4 processes), and on this host the
    # fit for 8 processes had ~0.6x that bandwidth and ~2.3x its latency (costs/comm_model.json of runs).
    if is_measured(cost_spec):
        cost_model = make_evaluator()
    else:
        cost_model = load_planning_model(cost_spec, settings, ctx.config.allow_other_hardware).with_comm(
            AlphaBeta.load(planning_comm_path) if planning_comm_path else comm)
    options = PlannerOptions(seed=s.seed, cost_model=cost_model, policy_path=policy_path,
                             time_limit_s=s.time_limit_s, algorithm_extra=extras)
    # What a measured task depends on (not e.g. the suite's description), with the models' file contents, so
    # a retrained model is never paired with plans of the previous one; stage_key adds the code version. The
    # task itself is not in the key: run_bench reuses a result only for an equal task, so more test tasks
    # keep the ones measured. The planners' own code is in it too (``planning_code_key``): a changed default
    # re-plans.
    bench_key = stage_key({"algorithms": algorithms, "seed": s.seed, "time_limit_s": s.time_limit_s,
                           "planning_code": planning_code_key(),
                           "rounds": s.eval.rounds, "round_statistic": s.eval.round_statistic,
                           "confirm_apart": 1,  # since stop 64: results without it re-measure
                           "measure": settings.to_json(), "comm": comm.to_json(),
                           "models": [file_key(cost_spec), file_key(policy_path or "")],
                           **({"planning_comm": file_key(planning_comm_path)} if planning_comm_path else {}),
                           "collectives": ctx.collectives()[0],
                           **({"planner_extra": extras} if extras else {})},
                          [k_comm, k_cost, k_policy])
    # measured collectives (if asked) on the comm stage's processes: NCCL only with a GPU per rank
    config = BenchConfig(tuple(algorithms), options, rounds=s.eval.rounds,
                         round_statistic=s.eval.round_statistic, key=bench_key,
                         lower_bound_on=ctx.config.estimate,
                         collectives=ctx.collectives()[0], comm_backend=ctx.comm_backend()[0],
                         pick_settings=settings, pick_comm=comm)
    tasks = load_tasks(str(ctx.out / "test_tasks.json"))
    ctx.say(f"[bench] {len(tasks)} test tasks x {len(algorithms)} algorithms: {', '.join(algorithms)}")
    bench_dir = ctx.out / BENCH_DIR
    results = run_bench(tasks, config, make_evaluator, bench_dir, ctx.progress)
    comm_fit = ctx.comm_description()
    meta = {
        "suite": s.settings(), "host": host_info(settings.device.value),
        "evaluator": f"{MeasuredCostModel.name} (real {KERNELS[settings.backend]} kernels on "
                     f"{settings.device.value}, device by device, settings {json.dumps(settings.to_json())}; "
                     f"comm: alpha-beta {comm.source}; comm model {comm_fit}); step = max fwd + forward "
                     f"collectives + max bwd + backward collectives; all-to-alls "
                     + ("timed with every plan's own splits on D local processes"
                        if ctx.collectives()[0] == "measure" else "modelled (alpha-beta)")
                     + f" ({ctx.collectives()[1]})",
        "collectives": ctx.collectives()[0], "collectives_why": ctx.collectives()[1],
        "measure_settings": settings.to_json(), "comm": comm.to_json(), "comm_fit": comm_fit,
        "planner_extra": extras,
        "cost_model": f"{cost_model.name} ({cost_spec}; comm: "
                      + (f"{cost_model.comm.source}, {planning_comm_path})" if planning_comm_path
                         else "the evaluator's)"),
        "policy": policy_path or "-",
        "rounds": s.eval.rounds, "round_statistic": s.eval.round_statistic, "skipped": skipped,
        "stages": dict(ctx.status),
        "refresh": refresh_rounds(ctx),
        "command": ctx.config.command, "code": code_version(),
    }
    ctx.status["bench"] = "ran"
    log.info("suite %s measured: %d tasks", s.name, len(results))
    return Evaluation(bench_dir, results, algorithms, meta)
