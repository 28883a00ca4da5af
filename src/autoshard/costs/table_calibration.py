"""A cost model corrected by measured devices of your own tables: a level and a factor per table *name*, so
one fit serves every task and every plan those tables appear in (``autoshard calibrate``, ``autoshard plan
--calibration``).

Why (docs/benchmarks.md, "Stop 76"; ``benchmarks/table_error.py``): on the devices the planners build, most
of the shipped model's error that matters for a plan, the error between one task's devices, belongs to the
tables: fitted on the other tasks' devices of an archived DLRM-50 (8) run (AMD EPYC, the model's own
hardware), a factor per table took the within-task error of fwd + bwd from 0.084 to 0.056 (log sd) and the
within-task Spearman from 0.899 to 0.960, where a fit on the tables' features took it to 0.077 / 0.907.
Fine-tuning the network on the same kind of devices fixed the level, not the ranking (stop 75). Measured on
the Intel VM: calibrated on 546 devices of DLRM-50 (8)'s ten tasks, the model ranked them better (0.883 ->
0.916) but the planners' plans with it were level with the shipped model's, timed side by side.

The correction is ``costs.task_fit``'s (per stage, log measured / predicted = level + sum over the device's
tables of share x factor, the factors ridge-regularised), fitted on the devices of many tasks at once with the
tables keyed by name: a table of another task with the same name is taken to be the same table, and a table
the calibration never saw keeps the level alone. It corrects the model it was fitted against, on the
hardware it was timed on; the file records both and ``plan`` refuses another model.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from autoshard.costs.base import ContentsAccumulator, CostModel, DelegatesToBase, DeviceAccumulator
from autoshard.costs.comm import AlphaBeta
from autoshard.costs.learned.risk import offers_spread
from autoshard.costs.task_fit import DEFAULT_RIDGE, TaskFit, TaskFitModel, solve_factors, stage_shares
from autoshard.errors import AutoshardError
from autoshard.io import read_json, write_json
from autoshard.shards import ShardRef
from autoshard.tasks import Task

KIND = "autoshard.table_calibration"
VERSION = 1

MeasuredDevices = tuple[Task, Sequence[Sequence[ShardRef]], np.ndarray]
"""One task's measured devices: the task, each device's shards, and (n, >= 2) their fwd, bwd ms."""


@dataclass(frozen=True)
class TableCalibration:
    """The fitted correction (module docstring), per stage (fwd, bwd)."""

    level: tuple[float, float]
    """Log of measured over predicted common to every device."""
    factors: dict[str, tuple[float, float]]
    """Per table name, its log factor (a table absent here keeps the level alone)."""
    devices: int
    """Measured devices the fit used."""
    model_path: str = ""
    """The cost model it corrects, as given (a checkpoint path)."""
    model_key: str = ""
    """That model's content hash (``pipeline.cache.file_key``): what ``plan`` checks."""
    ridge: float = DEFAULT_RIDGE
    host: dict[str, Any] = field(default_factory=dict)
    """Where the devices were timed (the records' host)."""

    def for_task(self, task: Task) -> TaskFit:
        """The correction of ``task``: its tables' factors by index."""
        index = {t.name: i for i, t in enumerate(task.tables)}
        return TaskFit(self.level, {index[n]: f for n, f in self.factors.items() if n in index}, self.devices)

    def covered(self, task: Task) -> int:
        """How many of ``task``'s tables have a factor."""
        return sum(t.name in self.factors for t in task.tables)

    def to_json(self) -> dict[str, Any]:
        return {"kind": KIND, "version": VERSION, "level": list(self.level),
                "factors": {n: list(f) for n, f in sorted(self.factors.items())}, "devices": self.devices,
                "model_path": self.model_path, "model_key": self.model_key, "ridge": self.ridge,
                "host": self.host}

    @staticmethod
    def from_json(d: dict[str, Any]) -> TableCalibration:
        if not isinstance(d, dict) or d.get("kind") != KIND:
            raise AutoshardError("not a table calibration; make one with 'autoshard calibrate'")
        try:
            level = tuple(float(x) for x in d["level"])
            factors = {str(n): (float(f[0]), float(f[1])) for n, f in d["factors"].items()}
            if len(level) != 2 or not all(np.isfinite(level)) or not all(
                    np.isfinite(f).all() for f in factors.values()):
                raise ValueError("non-finite or malformed level or factors")
            return TableCalibration((level[0], level[1]), factors, int(d["devices"]),
                                    str(d.get("model_path", "")), str(d.get("model_key", "")),
                                    float(d.get("ridge", DEFAULT_RIDGE)), dict(d.get("host") or {}))
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as e:
            raise AutoshardError(f"a broken table calibration ({type(e).__name__}: {e}); make it again with "
                                 "'autoshard calibrate'") from None

    def save(self, path: str) -> None:
        write_json(path, self.to_json())

    @staticmethod
    def load(path: str) -> TableCalibration:
        d = read_json(path, kind=KIND, versions=(VERSION,))
        try:
            return TableCalibration.from_json(d)
        except AutoshardError as e:
            raise AutoshardError(f"{path}: {e}") from None


def fit_calibration(model: CostModel, measured: Iterable[MeasuredDevices], ridge: float = DEFAULT_RIDGE,
                    **about: Any) -> TableCalibration:
    """The correction of ``model`` from measured devices of one or more tasks (their tables keyed by name);
    ``about``: the ``model_path``, ``model_key`` and ``host`` fields to record."""
    if ridge <= 0:
        raise AutoshardError(f"calibration: ridge {ridge} must be > 0")
    names: dict[str, int] = {}
    blocks: list[tuple[np.ndarray, list[int], np.ndarray, np.ndarray]] = []
    for task, devices, timed in measured:
        timed = np.asarray(timed, dtype=np.float64)
        keep = [i for i, d in enumerate(devices) if d]
        if timed.ndim != 2 or timed.shape[0] != len(devices) or timed.shape[1] < 2:
            raise AutoshardError(f"calibration: {timed.shape} timings for {len(devices)} devices of "
                                 f"{task.name}; give one (fwd, bwd) row per device")
        if not keep:
            continue
        contents = [list(devices[i]) for i in keep]
        predicted = np.asarray(model.device_costs(task, contents), dtype=np.float64)[:, :2]
        shares, tables = stage_shares(task, model, contents, {})
        columns = [names.setdefault(task.tables[t].name, len(names)) for t in tables]
        blocks.append((shares, columns, timed[keep, :2], predicted))
    if not blocks:
        raise AutoshardError("calibration: no measured device holds a shard; time some devices first "
                             "('autoshard adapt-cost')")
    n = sum(len(b[2]) for b in blocks)
    shares = np.zeros((n, len(names), 2))
    row = 0
    for block, columns, _, _ in blocks:
        shares[row:row + len(block)][:, columns] = block
        row += len(block)
    timed = np.concatenate([b[2] for b in blocks])
    predicted = np.concatenate([b[3] for b in blocks])
    level, factors = solve_factors(shares, timed, predicted, ridge)
    by_name = {name: (float(factors[i, 0]), float(factors[i, 1])) for name, i in names.items()}
    return TableCalibration((float(level[0]), float(level[1])), by_name, n, ridge=ridge, **about)


class CalibratedCostModel(DelegatesToBase):
    """``base`` corrected by a ``TableCalibration`` on any task (``TaskFitModel`` per task, made on first
    use): fwd and bwd, and their spread, times the device's factor; the comm column, the support and its
    out-of-support lines are the base's."""

    def __init__(self, base: CostModel, calibration: TableCalibration) -> None:
        self.base, self.calibration = base, calibration
        self.name = f"{base.name} + table calibration ({len(calibration.factors)} tables)"
        self.comm: AlphaBeta = base.comm
        self.risk_k = float(getattr(base, "risk_k", 0.0))
        self._per_task: dict[tuple[Any, ...], TaskFitModel] = {}

    def _fitted(self, task: Task) -> TaskFitModel:
        # table indices and the shards' alone prices are per task: one TaskFitModel (and cache) each
        key = (task.name, tuple(t.name for t in task.tables), task.batch_size, task.precision)
        if key not in self._per_task:
            self._per_task[key] = TaskFitModel(self.base, self.calibration.for_task(task))
        return self._per_task[key]

    @property
    def has_spread(self) -> bool:
        return offers_spread(self.base)

    def device_costs(self, task: Task, devices: Sequence[Sequence[ShardRef]]) -> np.ndarray:
        return self._fitted(task).device_costs(task, devices)

    def device_costs_spread(self, task: Task, devices: Sequence[Sequence[ShardRef]]) -> np.ndarray:
        return self._fitted(task).device_costs_spread(task, devices)

    def device_costs_risk(self, task: Task, devices: Sequence[Sequence[ShardRef]], risk: float) -> np.ndarray:
        return self._fitted(task).device_costs_risk(task, devices, risk)

    def accumulator(self, task: Task, num_envs: int) -> DeviceAccumulator:
        return ContentsAccumulator(self, task, num_envs)

    def describe_hardware(self) -> str:
        """The base's hardware line and where the calibration's devices were timed."""
        describe = getattr(self.base, "describe_hardware", None)
        base = describe() if callable(describe) else self.base.name
        return f"{base}; calibrated per table on {self.calibration.host.get('cpu', 'an unnamed host')}"

    def with_comm(self, comm: AlphaBeta) -> CalibratedCostModel:
        return CalibratedCostModel(self.base.with_comm(comm), self.calibration)
