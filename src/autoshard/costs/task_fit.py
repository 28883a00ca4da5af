"""A cost model corrected by one task's own measured devices: per stage, a level and a factor per table.

Why: a planner balances the model's predictions, and on this CPU the shipped model's per-device error is
10-19% (docs/benchmarks.md, "Stop 53"), as large as the room balancing could win, so the measured slowest
device is the one the model under-predicts most. ``autoshard plan --measure-top K`` already times the K
best candidates' devices on the hardware one trains on; those timings say, for this task's own tables, how
far off the model is. Fitted on some of a task's measured plans and scored on its other plans (an ad-hoc
leave-one-plan-out over the archived DLRM runs, stop 56), the level alone cut the per-device error of the
fwd + bwd from 20-28% to 6-13%, and the per-table factors took the slowest device's error from 6-12% to
4-9%.

The correction, fitted per stage (fwd, bwd) on the logs of measured over predicted:

    log(measured_d / predicted_d) = level + sum over tables t on d of share_{d,t} x factor_t

where ``share_{d,t}`` is table t's part of device d's predicted cost (its shards each priced alone by the
base model), the factors ridge-regularised towards 0 (a table not measured keeps the level alone). A
column shard shares its table's factor. The comm column (the devices' own all-to-all share) is the
base model's, as the evaluator's comm model prices it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from autoshard.costs.base import ContentsAccumulator, CostModel, DeviceAccumulator
from autoshard.costs.comm import AlphaBeta
from autoshard.costs.learned.risk import offers_spread
from autoshard.errors import AutoshardError
from autoshard.shards import ShardRef
from autoshard.tasks import Task

DEFAULT_RIDGE = 1.0
"""Ridge penalty on the table factors, in units of a share (a table that is a device's whole predicted cost
has share 1): with a few dozen measured devices a table seen on one device moves about half way to its
own residual."""


@dataclass(frozen=True)
class TaskFit:
    """The fitted correction of one task (module docstring), per stage."""

    level: tuple[float, float]
    """Log of measured over predicted common to every device, fwd and bwd."""
    factors: dict[int, tuple[float, float]]
    """Per table index: its log factor, fwd and bwd (tables not measured are absent: 0)."""
    devices: int
    """Distinct measured device contents the fit used."""

    def log_factors(self, shares: np.ndarray, tables: Sequence[int]) -> np.ndarray:
        """(n, 2) the log correction of devices whose (n, len(tables), 2) stage shares are given."""
        a = np.array([self.factors.get(t, (0.0, 0.0)) for t in tables], dtype=np.float64).reshape(-1, 2)
        return np.asarray(self.level) + np.einsum("ntk,tk->nk", shares, a)


def _alone(task: Task, model: CostModel, shards: Sequence[ShardRef],
           cache: dict[ShardRef, np.ndarray]) -> None:
    """Price each shard not in ``cache`` alone (one batched call), fwd and bwd."""
    new = sorted({s for s in shards if s not in cache})
    if new:
        costs = np.asarray(model.device_costs(task, [[s] for s in new]), dtype=np.float64)[:, :2]
        cache.update(zip(new, np.maximum(costs, 0.0)))


def stage_shares(task: Task, model: CostModel, devices: Sequence[Sequence[ShardRef]],
                 cache: dict[ShardRef, np.ndarray]) -> tuple[np.ndarray, list[int]]:
    """(n, T, 2) each device's stage shares by table (T: the tables the devices hold) and those tables."""
    _alone(task, model, [s for dev in devices for s in dev], cache)
    tables = sorted({s.table for dev in devices for s in dev})
    column = {t: i for i, t in enumerate(tables)}
    shares = np.zeros((len(devices), len(tables), 2))
    for n, dev in enumerate(devices):
        for s in dev:
            shares[n, column[s.table]] += cache[s]
        total = shares[n].sum(axis=0)
        shares[n] /= np.where(total > 0, total, 1.0)
    return shares, tables


def fit_task(task: Task, model: CostModel, devices: Sequence[Sequence[ShardRef]], measured: np.ndarray,
             ridge: float = DEFAULT_RIDGE) -> TaskFit:
    """The correction of ``model`` on ``task`` from measured device contents (``measured``: (n, >= 2) fwd,
    bwd ms of each; the same content twice counts once, its least timing kept)."""
    if ridge <= 0:
        raise AutoshardError(f"task fit: ridge {ridge} must be > 0")
    measured = np.asarray(measured, dtype=np.float64)
    if measured.ndim != 2 or measured.shape[0] != len(devices) or measured.shape[1] < 2:
        raise AutoshardError(f"task fit: {measured.shape} timings for {len(devices)} devices; give one "
                             "(fwd, bwd) row per device")
    least: dict[tuple[ShardRef, ...], np.ndarray] = {}
    for dev, m in zip(devices, measured[:, :2]):
        key = tuple(sorted(dev))
        if key:
            least[key] = np.minimum(least[key], m) if key in least else m
    contents = [list(k) for k in least]
    if not contents:
        raise AutoshardError("task fit: no measured device holds a shard; time a plan's devices first")
    timed = np.array(list(least.values()))
    predicted = np.asarray(model.device_costs(task, contents), dtype=np.float64)[:, :2]
    shares, tables = stage_shares(task, model, contents, {})
    level, factors = solve_factors(shares, timed, predicted, ridge)
    return TaskFit((float(level[0]), float(level[1])),
                   {t: (float(f[0]), float(f[1])) for t, f in zip(tables, factors)}, len(contents))


def solve_factors(shares: np.ndarray, timed: np.ndarray, predicted: np.ndarray, ridge: float
                  ) -> tuple[np.ndarray, np.ndarray]:
    """The module's fit, per stage: ``level`` (2,) the mean log of measured over predicted, ``factors``
    (T, 2) the tables' ridge-regularised log factors, from devices' (n, T, 2) stage ``shares`` and their
    (n, 2) ``timed`` and ``predicted`` ms (a device timed or priced at 0 in a stage is left out of it)."""
    level, factors = np.zeros(2), np.zeros((shares.shape[1], 2))
    for k in (0, 1):
        ok = (timed[:, k] > 0) & (predicted[:, k] > 0)
        if not ok.any():
            continue
        y = np.log(timed[ok, k] / predicted[ok, k])
        level[k] = float(y.mean())
        x = shares[ok, :, k]
        factors[:, k] = np.linalg.solve(x.T @ x + ridge * np.eye(x.shape[1]), x.T @ (y - level[k]))
    return level, factors


class TaskFitModel:
    """``base`` corrected on one task by ``fit`` (its fwd and bwd, and their spread, times the device's
    factor); the comm column is the base's. For the task it was fitted on only: table indices are that
    task's."""

    def __init__(self, base: CostModel, fit: TaskFit) -> None:
        self.base, self.fit = base, fit
        self.name = f"{base.name} + task fit"
        self.comm: AlphaBeta = base.comm
        self.risk_k = float(getattr(base, "risk_k", 0.0))
        self._alone: dict[ShardRef, np.ndarray] = {}

    @property
    def has_spread(self) -> bool:
        return offers_spread(self.base)

    def factors(self, task: Task, devices: Sequence[Sequence[ShardRef]]) -> np.ndarray:
        """(n, 2) each device's multiplicative correction, fwd and bwd (1 for an empty device)."""
        if not devices:
            return np.ones((0, 2))
        shares, tables = stage_shares(task, self.base, devices, self._alone)
        return np.exp(self.fit.log_factors(shares, tables))

    def _scaled(self, task: Task, devices: Sequence[Sequence[ShardRef]], costs: np.ndarray) -> np.ndarray:
        out = np.array(costs, dtype=np.float64)
        out[:, :2] *= self.factors(task, devices)
        return out

    def device_costs(self, task: Task, devices: Sequence[Sequence[ShardRef]]) -> np.ndarray:
        return self._scaled(task, devices, self.base.device_costs(task, devices))

    def device_costs_spread(self, task: Task, devices: Sequence[Sequence[ShardRef]]) -> np.ndarray:
        return self._scaled(task, devices, self.base.device_costs_spread(task, devices))  # type: ignore

    def device_costs_risk(self, task: Task, devices: Sequence[Sequence[ShardRef]], risk: float) -> np.ndarray:
        """mean + ``risk`` x spread of the corrected model (both scale by the device's factor)."""
        both = getattr(self.base, "device_costs_risk", None)
        if callable(both):
            return self._scaled(task, devices, both(task, devices, risk))
        return self.device_costs(task, devices) + risk * self.device_costs_spread(task, devices)

    def accumulator(self, task: Task, num_envs: int) -> DeviceAccumulator:
        return ContentsAccumulator(self, task, num_envs)

    def with_comm(self, comm: AlphaBeta) -> TaskFitModel:
        return TaskFitModel(self.base.with_comm(comm), self.fit)
