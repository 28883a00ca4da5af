"""The DreamShard loop: alternate policy training on the estimated MDP with real measurements of its plans.

A cost model fitted on random shards is least accurate exactly where a trained policy goes (balanced devices
of many tables). So, each round (DreamShard, NeurIPS'22, Alg. 1): train the policy against the current cost
model; plan a few training tasks with it (greedy); time every device of those plans on the real fused kernels
(``hardware.kernel.measure_shard``, the measurement issue's settings of the dataset); append those records to
the profiling dataset (``shards-refresh.jsonl``, the format ``autoshard profile`` writes, so the dataset stays
one dataset); refit the learned cost model on the grown dataset. After the last round the policy is trained
once more against the final model.

Interrupting loses no measurement: records are appended (fsynced) one device at a time, and a re-run skips
devices already recorded (sample ids are deterministic: ``<REFRESH_SEED_BASE + round>-<index>``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from autoshard.breakdown import PlanCost
from autoshard.costs.base import CostModel, plan_cost
from autoshard.costs.comm import AlphaBeta
from autoshard.costs.learned.model import LearnedCostModel
from autoshard.costs.step import compose, device_comm_ms, device_volumes, plan_collectives
from autoshard.errors import AutoshardError
from autoshard.hardware.evaluator import contents_key
from autoshard.hardware.jsonl import append_jsonl, repair_tail
from autoshard.hardware.kernel import MeasureSettings, measure_shard
from autoshard.hardware.profile_records import check_same_hardware
from autoshard.hardware.profiler import CostDataset, CostRecord, load_dataset, sample_id
from autoshard.host import host_info
from autoshard.planners.rl.planner import RLPlanner
from autoshard.planners.rl.policy import TrainedPolicy
from autoshard.planners.rl.train import TrainConfig, train
from autoshard.shards import ShardRef
from autoshard.tasks import Task
from autoshard.threads import torch_threads

log = logging.getLogger(__name__)

REFRESH_FILE = "shards-refresh.jsonl"
"""Where the loop's measurements go in the dataset directory (matches the profiler's ``shards-*.jsonl``)."""

REFRESH_SEED_BASE = 900_000
"""Refresh records are ``<REFRESH_SEED_BASE + round>-<index>``, apart from profile samples
``<seed>-<index>``."""


@dataclass(frozen=True)
class RefreshConfig:
    """Settings of the DreamShard loop (policy training settings are the ``TrainConfig``)."""

    rounds: int = 3
    """Measure-and-refit rounds; the policy is trained rounds + 1 times, ``TrainConfig.iterations`` each."""
    tasks_per_round: int = 2
    """Training tasks whose greedy plans are measured each round (every device of each plan)."""
    fit_options: Any = None
    """``costs.learned.training.TrainOptions`` for refitting the cost model (None: its defaults)."""
    seed: int = 0
    """Seeds which training tasks are measured each round."""

    def __post_init__(self) -> None:
        if self.rounds <= 0 or self.tasks_per_round <= 0:
            raise AutoshardError("refresh rounds and tasks per round must be positive")


@dataclass
class RefreshResult:
    policy: TrainedPolicy
    cost_model: CostModel
    rounds: list[dict[str, Any]] = field(default_factory=list)
    """Per round: records added, and the measured vs predicted plan cost of the measured plans."""


def check_dataset(dataset_dir: str | Path, tasks: Sequence[Task]) -> CostDataset:
    """The profile dataset, if it has records and every task's tables and batch size are the profiled ones."""
    dataset = load_dataset(dataset_dir)
    if not dataset.records:
        raise AutoshardError(f"{dataset_dir} has no measured records; run 'autoshard profile' first")
    batch = dataset.records[0].batch_size
    names = set(dataset.pool.by_name())
    for task in tasks:
        missing = [t.name for t in task.tables if t.name not in names]
        if missing:
            raise AutoshardError(f"training task {task.name} has table {missing[0]!r}, which is not in the "
                                 f"profiled pool of {dataset_dir}; train on tasks sampled from that pool")
        if task.batch_size != batch:
            raise AutoshardError(f"training task {task.name} has batch size {task.batch_size} but "
                                 f"{dataset_dir} was profiled at {batch}; use tasks of the profiled batch "
                                 "size")
    return dataset


class DeviceRecorder:
    """Times devices on the real fused kernels with the dataset's measure settings and appends each as a
    record of the dataset (``shards-refresh.jsonl``, ids ``<REFRESH_SEED_BASE + round>-<index>``), so the cost
    model refits on them. A device whose contents were timed before in this recorder is not timed again; one
    an interrupted run recorded (same id, same contents) is read back. Records of other hardware are refused
    (``check_same_hardware``)."""

    def __init__(self, dataset: CostDataset, dataset_dir: str | Path,
                 settings: MeasureSettings | None = None) -> None:
        """``settings``: how to time devices (default: as the dataset's first record was; a dataset without
        records needs them)."""
        if settings is None and not dataset.records:
            raise AutoshardError(f"{dataset_dir} has no records to take measure settings from")
        self.settings = settings or MeasureSettings.from_json(dict(dataset.records[0].settings))
        self.settings_json = self.settings.to_json() if settings else dict(dataset.records[0].settings)
        self.host = {**host_info(self.settings.device.value), "rank": 0, "world_size": 1}
        check_same_hardware(dataset_dir, (r.host for r in dataset.records), self.host)
        self.path = Path(dataset_dir) / REFRESH_FILE
        repair_tail(self.path)
        self.recorded = {r.sample_id: r for r in dataset.records}
        self.timed: dict[tuple[object, ...], tuple[float, float]] = {}
        self.added = 0

    def measure(self, task: Task, shards: Sequence[ShardRef], sid: str) -> tuple[float, float]:
        """(fwd, bwd) ms of one device; recorded as ``sid`` unless these contents were timed already."""
        key = contents_key(task, shards)
        if key in self.timed:
            return self.timed[key]
        names, dims = tuple(task.tables[s.table].name for s in shards), tuple(s.dim for s in shards)
        whole = all(s.row_start == 0 and s.row_end is None for s in shards)
        ranges = () if whole else tuple((s.row_start, s.row_end) for s in shards)
        rec = self.recorded.get(sid)
        if rec is None or (rec.tables, rec.dims, rec.row_ranges) != (names, dims, ranges):
            # new, or an interrupted run's planner (a timed search) left other contents under this id: time
            # it, and record it only under a free id. A record holds tables or row shards of them (names,
            # dims, row ranges): a device with a data-parallel replica is timed but not recorded. Until
            # stop 28 row-wise devices were not recorded either, so the model never learned them (the
            # quickstart's model priced them 18% low while it priced table-wise ones right).
            t = measure_shard(task, shards, self.settings)
            free = rec is None and not any(s.replica for s in shards)
            rec = CostRecord(sid, names, dims, task.batch_size, t.fwd_ms, t.bwd_ms, t.fwd_cv, t.bwd_cv,
                             {**self.settings_json, "precision": task.precision.value}, self.host, t.rows,
                             t.tries, row_ranges=ranges)
            if free:
                append_jsonl(self.path, rec.to_json())
                self.recorded[sid] = rec
                self.added += 1
        self.timed[key] = (rec.fwd_ms, rec.bwd_ms)
        return self.timed[key]

    def plan_cost(self, task: Task, devices: Sequence[Sequence[ShardRef]], comm: AlphaBeta,
                  round_index: int, start: int) -> tuple[PlanCost, int]:
        """The measured step cost of a plan's ``devices`` (kernels timed and recorded as ids ``start``, ...;
        collectives from ``comm``, modelled), and the next free index."""
        costs = np.zeros((len(devices), 3))
        for g, shards in enumerate(devices):
            if shards:
                costs[g, :2] = self.measure(task, shards, sample_id(REFRESH_SEED_BASE + round_index, start))
                start += 1
        costs[:, 2] = device_comm_ms(task, comm, device_volumes(task, devices))
        return compose(costs, plan_collectives(task, comm, devices), "measured"), start


def measure_plans(policy: TrainedPolicy, model: CostModel, tasks: Sequence[Task], dataset_dir: str | Path,
                  round_index: int) -> dict[str, Any]:
    """Plan ``tasks`` with the policy and append every device's measured cost to the dataset; returns
    stats: per task the measured step (kernels measured, collectives from the dataset's comm fit, modelled)
    and the model's predicted step."""
    dataset = check_dataset(dataset_dir, tasks)
    recorder = DeviceRecorder(dataset, dataset_dir)
    comm = dataset.comm or model.comm  # a dataset profiled without comm: the model's
    measured, predicted, index = [], [], 0
    for task in tasks:
        with torch_threads():  # as ``run_planner`` plans (``autoshard.threads``)
            plan = RLPlanner(policy, model).plan(task)
        cost, index = recorder.plan_cost(task, plan.device_shards(task), comm, round_index, index)
        measured.append(cost.plan_ms)
        predicted.append(plan_cost(model.with_comm(comm), task, plan).plan_ms)
    err = [abs(p - m) / m for p, m in zip(predicted, measured) if m > 0]
    return {"round": round_index, "records_added": recorder.added, "measured_plan_ms": measured,
            "predicted_plan_ms": predicted, "plan_cost_mape": float(np.mean(err)) if err else float("nan")}


def refresh_with_real(
    model: CostModel,
    dataset_dir: str | Path,
    train_tasks: Sequence[Task],
    config: TrainConfig,
    refresh: RefreshConfig = RefreshConfig(),
    eval_tasks: Sequence[Task] = (),
    checkpoint_path: str | None = None,
    cost_model_path: str | None = None,
    progress: Callable[[int, dict[str, float]], None] | None = None,
) -> RefreshResult:
    """Run the loop (module docstring) from ``model``; the refitted cost model is saved to
    ``cost_model_path``."""
    check_dataset(dataset_dir, train_tasks)  # fail before training, not after the first round
    policy: TrainedPolicy | None = None
    rounds: list[dict[str, Any]] = []
    spec = None
    rng = np.random.default_rng([refresh.seed, REFRESH_SEED_BASE])
    for r in range(refresh.rounds + 1):
        policy = train(model, train_tasks, replace(config, iterations=config.iterations * (r + 1)),
                       eval_tasks, cost_model_spec=spec, checkpoint_path=checkpoint_path, resume=policy,
                       progress=progress)
        if r == refresh.rounds:
            break
        picks = rng.choice(len(train_tasks), size=min(refresh.tasks_per_round, len(train_tasks)),
                           replace=False)
        stats = measure_plans(policy, model, [train_tasks[int(i)] for i in picks], dataset_dir, r)
        model = LearnedCostModel.fit(load_dataset(dataset_dir), refresh.fit_options)
        if cost_model_path:
            model.save(cost_model_path)
            spec = str(cost_model_path)
        stats["records_total"] = len(load_dataset(dataset_dir).records)
        rounds.append(stats)
        log.info("refresh round %d: %s", r, stats)
    assert policy is not None
    policy.metrics = {**policy.metrics, "refresh": rounds}
    if checkpoint_path:
        policy.save(checkpoint_path)
    return RefreshResult(policy, model, rounds)
