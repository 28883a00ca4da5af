"""A roofline-style estimator: bytes moved / bandwidth + launch overhead, as TorchRec's planner estimates.

It needs no profiling, so planning works on a fresh machine, and it is the yardstick the learned model is
compared against. ``fit`` calibrates its few constants to measured shard costs by least squares.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import chain
from typing import Any

import numpy as np

from autoshard.costs.comm import DEFAULT_COMM, AlphaBeta
from autoshard.costs.step import VOLUMES, device_comm_ms, device_volumes, shard_volumes
from autoshard.shards import ShardRef
from autoshard.tasks import Task

_POOLING_CACHE: dict[int, tuple[weakref.ref, np.ndarray]] = {}
"""Per-task pooling factors by id(task), checked against a weak reference (a task is immutable)."""


def _pooling_factors(task: Task) -> np.ndarray:
    hit = _POOLING_CACHE.get(id(task))
    if hit is not None and hit[0]() is task:
        return hit[1]
    pooling = np.array([t.pooling_factor for t in task.tables], dtype=np.float64)
    if len(_POOLING_CACHE) >= 64:
        _POOLING_CACHE.clear()
    _POOLING_CACHE[id(task)] = (weakref.ref(task), pooling)
    return pooling


@dataclass(frozen=True)
class AnalyticalCostModel:
    """fwd = launch + lookup bytes / fwd bandwidth; bwd = launch + lookup bytes / bwd bandwidth; comm: the
    device's own time in the step's collectives (``costs.step``), alpha-beta.

    Lookup bytes of a shard = batch x pooling factor x dim x element bytes (each looked-up row is read, and in
    backward read and written) plus the pooled output batch x dim x element bytes.
    """

    fwd_launch_ms: float = 0.05
    fwd_bytes_per_ms: float = 4.0e6
    bwd_launch_ms: float = 0.1
    bwd_bytes_per_ms: float = 1.5e6
    comm: AlphaBeta = DEFAULT_COMM
    name: str = "analytical"
    """Defaults are order-of-magnitude CPU values from shared/README.md's reference timing (one 100k x 64
    table, pooling 20, batch 2048: ~8 ms fwd+bwd at one thread); calibrate with ``fit`` for real use."""

    def with_comm(self, comm: AlphaBeta) -> AnalyticalCostModel:
        """The same model pricing the all-to-all with ``comm`` (e.g. fitted at the device count planned)."""
        return replace(self, comm=comm)

    @staticmethod
    def shard_bytes(task: Task, shard: ShardRef) -> float:
        """Bytes a shard's kernels move per step. A row shard is looked up its share of the rows x the pooling
        factor per sample (the uniform estimate) and still writes a (partial) pooled output for every
        sample; a replica looks up and pools only its rank's B / D samples."""
        t = task.tables[shard.table]
        lookups = t.pooling_factor * shard.lookup_share(t.rows, task.num_devices)
        outputs = 1.0 / task.num_devices if shard.replica else 1.0
        return task.batch_size * (lookups + outputs) * shard.dim * task.precision.bytes

    def device_costs(self, task: Task, devices: Sequence[Sequence[ShardRef]]) -> np.ndarray:
        # Vectorised (planners price thousands of candidate devices per call): the arithmetic is shard_bytes's
        # on arrays, the comm is costs.step's on the devices' volumes.
        out = np.zeros((len(devices), 3))
        counts = np.fromiter((len(shards) for shards in devices), dtype=np.int64, count=len(devices))
        total = int(counts.sum())
        if total == 0:
            return out
        flat = list(chain.from_iterable(devices))
        table = np.fromiter((s.table for s in flat), dtype=np.int64, count=total)
        dims = np.fromiter((s.dim for s in flat), dtype=np.int64, count=total)
        owner = np.repeat(np.arange(len(devices)), counts)
        pooling = _pooling_factors(task)[table]
        outputs = np.ones(total)
        if not all(s.is_whole for s in flat):
            pooling = pooling * np.array([s.lookup_share(task.tables[s.table].rows, task.num_devices)
                                          for s in flat])
            outputs = np.array([1.0 / task.num_devices if s.replica else 1.0 for s in flat])
        shard_bytes = task.batch_size * (pooling + outputs) * dims * task.precision.bytes
        nbytes = np.bincount(owner, weights=shard_bytes, minlength=len(devices))
        used = counts > 0
        out[used, 0] = self.fwd_launch_ms + nbytes[used] / self.fwd_bytes_per_ms
        out[used, 1] = self.bwd_launch_ms + nbytes[used] / self.bwd_bytes_per_ms
        out[:, 2] = device_comm_ms(task, self.comm, device_volumes(task, devices))
        return out

    def accumulator(self, task: Task, num_envs: int) -> AnalyticalAccumulator:
        return AnalyticalAccumulator(self, task, num_envs)

    def fit(self, lookup_bytes: np.ndarray, fwd_ms: np.ndarray, bwd_ms: np.ndarray) -> AnalyticalCostModel:
        """Least-squares launch and bandwidth for fwd and bwd from measured shards (their lookup bytes)."""
        a = np.stack([np.ones_like(lookup_bytes), lookup_bytes], axis=1)
        (f0, f1), *_ = np.linalg.lstsq(a, fwd_ms, rcond=None)
        (b0, b1), *_ = np.linalg.lstsq(a, bwd_ms, rcond=None)
        return replace(self, fwd_launch_ms=max(float(f0), 0.0), fwd_bytes_per_ms=1.0 / max(float(f1), 1e-12),
                       bwd_launch_ms=max(float(b0), 0.0), bwd_bytes_per_ms=1.0 / max(float(b1), 1e-12),
                       name="analytical-fitted")

    def fit_from_dataset(self, dataset: Any, records: Sequence[Any] | None = None) -> AnalyticalCostModel:
        """``fit`` on profiled records (``autoshard.hardware.profiler.CostDataset``; default: all of them),
        and take the dataset's measured alpha-beta comm model when it has one."""
        from autoshard.errors import AutoshardError
        from autoshard.tables.table import Precision

        records = list(dataset.records if records is None else records)
        if len(records) < 2:
            raise AutoshardError("fitting the analytical model needs at least 2 profiled records")
        tables = dataset.pool.by_name()
        nbytes = np.array([
            r.batch_size * Precision(r.settings.get("precision", "fp32")).bytes
            * sum((tables[n].pooling_factor + 1.0) * d for n, d in zip(r.tables, r.dims))
            for r in records])
        fitted = self.fit(nbytes, np.array([r.fwd_ms for r in records]),
                          np.array([r.bwd_ms for r in records]))
        return fitted if dataset.comm is None else replace(fitted, comm=dataset.comm)


class AnalyticalAccumulator:
    """The roofline model is additive in lookup bytes and in the traffic volumes, so a device is a few running
    sums and every candidate of every episode is priced at once. Equals ``device_costs`` of the same contents
    (tested)."""

    def __init__(self, model: AnalyticalCostModel, task: Task, num_envs: int) -> None:
        self.model, self.task = model, task
        self.nbytes = np.zeros((num_envs, task.num_devices))
        self.volumes = np.zeros((num_envs, task.num_devices, len(VOLUMES)))

    def costs_if_added(self, shard: ShardRef) -> np.ndarray:
        m, task = self.model, self.task
        nbytes = self.nbytes + m.shard_bytes(task, shard)
        out = np.empty(nbytes.shape + (3,))
        out[..., 0] = m.fwd_launch_ms + nbytes / m.fwd_bytes_per_ms
        out[..., 1] = m.bwd_launch_ms + nbytes / m.bwd_bytes_per_ms
        out[..., 2] = device_comm_ms(task, m.comm, self.volumes + shard_volumes(task, [shard])[0])
        return out

    def add(self, env: int, device: int, shard: ShardRef) -> None:
        self.nbytes[env, device] += self.model.shard_bytes(self.task, shard)
        self.volumes[env, device] += shard_volumes(self.task, [shard])[0]
