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
from autoshard.errors import AutoshardError
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
    """fwd = launch + per-shard x shards + per-lookup x lookups + lookup bytes / fwd bandwidth (likewise bwd);
    comm: the device's own time in the step's collectives (``costs.step``), alpha-beta.

    Lookup bytes of a shard = batch x pooling factor x dim x element bytes (each looked-up row is read, and in
    backward read and written) plus the pooled output batch x dim x element bytes. Lookups = batch x pooling
    factor (x the shard's lookup share). The per-lookup and per-shard terms are there because a fused kernel's
    time is not proportional to bytes: decoding an index and addressing its row costs the same at dim 4 as at
    dim 128, so a column split (every column shard sees every lookup) costs more than the bytes alone say; a
    bytes-only fit prices two dim-8 halves of a dim-16 table at the whole table's time and so makes column
    splits look free (measured in the quickstart: such devices came out ~40% dearer than that fit said).
    """

    fwd_launch_ms: float = 0.05
    fwd_bytes_per_ms: float = 4.0e6
    bwd_launch_ms: float = 0.1
    bwd_bytes_per_ms: float = 1.5e6
    comm: AlphaBeta = DEFAULT_COMM
    name: str = "analytical"
    fwd_shard_ms: float = 0.0
    """Forward time per shard on the device (its slice of the fused kernel's set-up and loop)."""
    fwd_lookup_ns: float = 0.0
    """Forward time per lookup, whatever the dim (index decode, row addressing)."""
    bwd_shard_ms: float = 0.0
    """Backward (and optimizer) time per shard."""
    bwd_lookup_ns: float = 0.0
    """Backward time per lookup, whatever the dim. (The defaults are order-of-magnitude CPU values from
    shared/README.md's reference timing, one 100k x 64 table, pooling 20, batch 2048: ~8 ms fwd+bwd at one
    thread, in bytes alone; calibrate with ``fit``.)"""

    def with_comm(self, comm: AlphaBeta) -> AnalyticalCostModel:
        """The same model pricing the all-to-all with ``comm`` (e.g. fitted at the device count planned)."""
        return replace(self, comm=comm)

    def scaled(self, fwd: float, bwd: float) -> AnalyticalCostModel:
        """The same model with every forward time multiplied by ``fwd`` and every backward time by ``bwd``
        (a host calibration: each term, and the bandwidth divided)."""
        if fwd <= 0 or bwd <= 0:
            raise AutoshardError(f"scale factors must be positive, got fwd {fwd}, bwd {bwd}")
        return replace(self, fwd_launch_ms=self.fwd_launch_ms * fwd, fwd_shard_ms=self.fwd_shard_ms * fwd,
                       fwd_lookup_ns=self.fwd_lookup_ns * fwd, fwd_bytes_per_ms=self.fwd_bytes_per_ms / fwd,
                       bwd_launch_ms=self.bwd_launch_ms * bwd, bwd_shard_ms=self.bwd_shard_ms * bwd,
                       bwd_lookup_ns=self.bwd_lookup_ns * bwd, bwd_bytes_per_ms=self.bwd_bytes_per_ms / bwd)

    @staticmethod
    def shard_terms(task: Task, shards: Sequence[ShardRef]) -> np.ndarray:
        """(len(shards), 2) lookups and lookup bytes per step of each shard. A row shard is looked up its
        range's share of the lookups (``Task.lookup_share``: skew-aware) x the pooling factor per sample and
        still writes a (partial) pooled output for every sample; a replica looks up and pools only its rank's
        B / D samples."""
        n = len(shards)
        out = np.zeros((n, 2))
        if n == 0:
            return out
        table = np.fromiter((s.table for s in shards), dtype=np.int64, count=n)
        dims = np.fromiter((s.dim for s in shards), dtype=np.float64, count=n)
        pooling = _pooling_factors(task)[table]
        outputs = np.ones(n)
        for i, s in enumerate(shards):  # a whole table keeps share 1 and one output a sample
            if not s.is_whole:
                pooling[i] *= task.lookup_share(s)  # (a copy: fancy-indexed above)
                outputs[i] = 1.0 / task.num_devices if s.replica else 1.0
        out[:, 0] = task.batch_size * pooling
        out[:, 1] = task.batch_size * (pooling + outputs) * dims * task.precision.bytes
        return out

    def compute_ms(self, shards: Any, lookups: Any, nbytes: Any) -> tuple[np.ndarray, np.ndarray]:
        """Forward and backward ms of devices holding ``shards`` shards that make ``lookups`` lookups moving
        ``nbytes`` bytes (arrays of one shape; a device with no shard costs 0). The one place of the
        formula."""
        shards, lookups, nbytes = (np.asarray(x, dtype=np.float64) for x in (shards, lookups, nbytes))
        used = shards > 0
        fwd = (self.fwd_launch_ms + self.fwd_shard_ms * shards + self.fwd_lookup_ns * 1e-6 * lookups
               + nbytes / self.fwd_bytes_per_ms)
        bwd = (self.bwd_launch_ms + self.bwd_shard_ms * shards + self.bwd_lookup_ns * 1e-6 * lookups
               + nbytes / self.bwd_bytes_per_ms)
        return np.where(used, fwd, 0.0), np.where(used, bwd, 0.0)

    def device_costs(self, task: Task, devices: Sequence[Sequence[ShardRef]]) -> np.ndarray:
        # Vectorised (planners price thousands of candidate devices per call): the arithmetic is shard_terms's
        # on arrays, the comm is costs.step's on the devices' volumes.
        out = np.zeros((len(devices), 3))
        counts = np.fromiter((len(shards) for shards in devices), dtype=np.int64, count=len(devices))
        total = int(counts.sum())
        if total == 0:
            return out
        terms = self.shard_terms(task, list(chain.from_iterable(devices)))
        owner = np.repeat(np.arange(len(devices)), counts)
        lookups = np.bincount(owner, weights=terms[:, 0], minlength=len(devices))
        nbytes = np.bincount(owner, weights=terms[:, 1], minlength=len(devices))
        out[:, 0], out[:, 1] = self.compute_ms(counts, lookups, nbytes)
        out[:, 2] = device_comm_ms(task, self.comm, device_volumes(task, devices))
        return out

    def accumulator(self, task: Task, num_envs: int) -> AnalyticalAccumulator:
        return AnalyticalAccumulator(self, task, num_envs)

    def fit(self, shards: np.ndarray, lookups: np.ndarray, lookup_bytes: np.ndarray, fwd_ms: np.ndarray,
            bwd_ms: np.ndarray) -> AnalyticalCostModel:
        """Non-negative least squares of fwd and bwd on [1, shards, lookups, bytes] of measured devices. With
        too few records, or where lookups and bytes move together (one dim only), the split between the
        per-lookup and per-byte terms is not identified; non-negativity keeps either reading physical."""
        from scipy.optimize import nnls

        cols = [np.ones_like(lookup_bytes, dtype=np.float64), shards, lookups * 1e-6, lookup_bytes]
        a = np.stack([np.asarray(c, dtype=np.float64) for c in cols], axis=1)
        scale = np.maximum(np.abs(a).max(axis=0), 1e-12)  # conditioning: columns span 1 to 1e9
        (f0, fs, fl, fb), _ = nnls(a / scale, np.asarray(fwd_ms, dtype=np.float64))
        (b0, bs, bl, bb), _ = nnls(a / scale, np.asarray(bwd_ms, dtype=np.float64))
        f0, fs, fl, fb = np.array([f0, fs, fl, fb]) / scale
        b0, bs, bl, bb = np.array([b0, bs, bl, bb]) / scale
        return replace(self, fwd_launch_ms=float(f0), fwd_shard_ms=float(fs), fwd_lookup_ns=float(fl),
                       fwd_bytes_per_ms=1.0 / max(float(fb), 1e-12), bwd_launch_ms=float(b0),
                       bwd_shard_ms=float(bs), bwd_lookup_ns=float(bl),
                       bwd_bytes_per_ms=1.0 / max(float(bb), 1e-12), name="analytical-fitted")

    @staticmethod
    def record_terms(dataset: Any, records: Sequence[Any]) -> np.ndarray:
        """(len(records), 3) shards, lookups and lookup bytes of profiled records (whole tables, column
        shards at the record's dims, row shards at its row ranges): ``shard_terms`` of the record's
        device."""
        tables = dataset.pool.by_name()
        out = np.zeros((len(records), 3))
        for i, r in enumerate(records):
            task = Task(tuple(tables[n] for n in r.tables), (2**62,), precision=r.precision,
                        batch_size=int(r.batch_size), name="record")
            terms = AnalyticalCostModel.shard_terms(task, r.shard_refs())
            out[i] = (len(r.tables), terms[:, 0].sum(), terms[:, 1].sum())
        return out

    def fit_from_dataset(self, dataset: Any, records: Sequence[Any] | None = None,
                         terms: np.ndarray | None = None) -> AnalyticalCostModel:
        """``fit`` on profiled records (``autoshard.hardware.profiler.CostDataset``; default: all of them),
        and take the dataset's measured alpha-beta comm model when it has one. ``terms``: the records'
        ``record_terms`` when the caller has them already."""

        records = list(dataset.records if records is None else records)
        if len(records) < 2:
            raise AutoshardError("fitting the analytical model needs at least 2 profiled records")
        terms = self.record_terms(dataset, records) if terms is None else terms
        fitted = self.fit(terms[:, 0], terms[:, 1], terms[:, 2], np.array([r.fwd_ms for r in records]),
                          np.array([r.bwd_ms for r in records]))
        return fitted if dataset.comm is None else replace(fitted, comm=dataset.comm)


class AnalyticalAccumulator:
    """The roofline model is additive in lookup bytes and in the traffic volumes, so a device is a few running
    sums and every candidate of every episode is priced at once. Equals ``device_costs`` of the same contents
    (tested)."""

    def __init__(self, model: AnalyticalCostModel, task: Task, num_envs: int) -> None:
        self.model, self.task = model, task
        self.terms = np.zeros((num_envs, task.num_devices, 3))  # shards, lookups, bytes
        self.volumes = np.zeros((num_envs, task.num_devices, len(VOLUMES)))

    def _shard(self, shard: ShardRef) -> np.ndarray:
        return np.concatenate([[1.0], self.model.shard_terms(self.task, [shard])[0]])

    def costs_if_added(self, shard: ShardRef) -> np.ndarray:
        m, task = self.model, self.task
        terms = self.terms + self._shard(shard)
        out = np.empty(terms.shape[:-1] + (3,))
        out[..., 0], out[..., 1] = m.compute_ms(terms[..., 0], terms[..., 1], terms[..., 2])
        out[..., 2] = device_comm_ms(task, m.comm, self.volumes + shard_volumes(task, [shard])[0])
        return out

    def add(self, env: int, device: int, shard: ShardRef) -> None:
        self.terms[env, device] += self._shard(shard)
        self.volumes[env, device] += shard_volumes(self.task, [shard])[0]
