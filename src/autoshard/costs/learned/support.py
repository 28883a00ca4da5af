"""A learned model's training support: the ranges of shard and device features its records covered, so it
can say which devices it would be extrapolating to (``LearnedCostModel.out_of_support``) and price those by
the graded hand-over: the network at the NEAREST device inside the support (every shard feature, the tables
per device, the batch and the precision moved to the nearest trained value), times the calibrated analytical
model's ratio cost(device) / cost(nearest device inside).

Per shard: dim, log10 of its real rows (a row shard's own rows) and its pooling factor (lookups per sample it
serves: the table's x its lookup share); per device: tables (shards) held, the task's kernel batch size and
precision. A device is inside when every one of its shards and its own values lie within the trained
[min, max] of each (an empty device is always inside).

Device statistics are kept as an additive/min-max state (``STATS``) so planners' incremental accumulators can
track them shard by shard: ``combine`` of two states is the state of the union.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from autoshard.costs.analytical import AnalyticalCostModel
from autoshard.errors import AutoshardError
from autoshard.shards import ShardRef
from autoshard.tables.table import FEATURE_NAMES, Precision, size_feature
from autoshard.tasks import Task

_DIM, _LOG_ROWS, _LOG_POOLING, _LOG_SIZE = (FEATURE_NAMES.index(n) for n in
                                            ("dim", "log10_rows", "log10_1p_pooling", "log10_size_bytes"))

STATS = ("count", "nbytes", "lookups", "nbytes_in", "lookups_in", "dim_lo", "dim_hi", "log10_rows_lo",
         "log10_rows_hi", "pooling_lo", "pooling_hi")
"""A device's statistics: shards held, analytical lookup bytes and lookups, the same two of its shards moved
to the nearest values inside the support (``Support.nearest``; the real ones without a support) (sums), then
the min and max of each shard feature (``SHARD_FEATURES``); an empty device has count 0, +inf minima and -inf
maxima."""
SHARD_FEATURES = ("dim", "log10_rows", "pooling")
SUM_STATS = 5
"""The first ``SUM_STATS`` statistics add up; the others are (min, max) pairs."""

TOLERANCE = 1e-6
"""Relative slack of the bounds (float round-off of log rows and pooling shares)."""

POOLING_LOG_SLACK = 0.01
"""Pooling bounds are compared on log10(1 + pooling), as the network sees it, with this slack (2.3% of
1 + pooling): a never-looked-up table (pooling 0) is inside a support whose least pooling was 0.0002, while
pooling 230 stays outside a support that ended at 200. Measured: on 120 held-out DLRM devices (dim 16, 1-12
tables a device) a broad-profile model sent 32% to its fallback for pooling-0 tables alone before this."""

BATCH_LOG_SLACK = 0.01
"""Batch bounds are compared on log10(batch), as the network sees it, with the same slack (2.3%): a broad
design over batches 512-65536 (log-uniform) drew 513 as its least, which put every batch-512 device (the
quick suite's) outside the shipped model's support, on its fallback, before this."""


def shard_values(task: Task, shards: Sequence[ShardRef], support: Support | None = None) -> np.ndarray:
    """(len(shards), 7) analytical lookup bytes and lookups (``AnalyticalCostModel.shard_terms``), the same
    two at the nearest values inside ``support`` (dim, pooling, batch and precision moved in; the real ones
    without a support), dim, log10 rows and pooling factor (lookups per sample the shard serves: the table's
    x its lookup share) of each shard."""
    n = len(shards)
    out = np.zeros((n, 7))
    if n == 0:
        return out
    terms = AnalyticalCostModel.shard_terms(task, shards)
    table = np.fromiter((s.table for s in shards), dtype=np.int64, count=n)
    rows = np.array([task.tables[i].rows for i in table], dtype=np.float64)
    for i, s in enumerate(shards):
        if not s.is_whole:
            rows[i] = s.num_rows(task.tables[s.table].rows)
    dims = np.fromiter((s.dim for s in shards), dtype=np.float64, count=n)
    batch, elem = float(task.batch_size), float(task.precision.bytes)
    pooling = terms[:, 0] / batch
    out[:, 0] = terms[:, 1]
    out[:, 1] = terms[:, 0]
    out[:, 2:4] = terms[:, [1, 0]]
    if support is not None:
        # the pooled outputs a shard writes per sample (1, or 1 / D for a replica) stay what they are
        outputs = terms[:, 1] / (batch * dims * elem) - pooling
        batch_in, elem_in = support.nearest_context(task)
        pooling_in = support.nearest("pooling", pooling)
        out[:, 2] = batch_in * (pooling_in + outputs) * support.nearest("dim", dims) * elem_in
        out[:, 3] = batch_in * pooling_in
    out[:, 4] = dims
    out[:, 5] = np.log10(np.maximum(rows, 1.0))
    out[:, 6] = pooling
    return out


def empty_stats(shape: tuple[int, ...]) -> np.ndarray:
    """(*shape, len(STATS)) statistics of empty devices."""
    out = np.zeros(shape + (len(STATS),))
    out[..., SUM_STATS::2] = np.inf
    out[..., SUM_STATS + 1::2] = -np.inf
    return out


def shard_stats(values: np.ndarray) -> np.ndarray:
    """(n, len(STATS)) the statistics of n one-shard devices from their ``shard_values``."""
    out = np.empty((len(values), len(STATS)))
    out[:, 0] = 1.0
    out[:, 1:SUM_STATS] = values[:, :SUM_STATS - 1]
    out[:, SUM_STATS::2] = values[:, SUM_STATS - 1:]
    out[:, SUM_STATS + 1::2] = values[:, SUM_STATS - 1:]
    return out


def combine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The statistics of the union of devices with statistics ``a`` and ``b`` (broadcasting)."""
    # the sums, then the (min, max) pairs written over (whole rows in one add: a planner combines every
    # candidate device with a shard each step). A column holds only minima (+inf when empty) or only maxima
    # (-inf), so the add never meets inf - inf.
    out = np.add(a, b, dtype=np.float64)
    np.minimum(a[..., SUM_STATS::2], b[..., SUM_STATS::2], out=out[..., SUM_STATS::2])
    np.maximum(a[..., SUM_STATS + 1::2], b[..., SUM_STATS + 1::2], out=out[..., SUM_STATS + 1::2])
    return out


def device_stats(task: Task, devices: Sequence[Sequence[ShardRef]],
                 support: Support | None = None) -> np.ndarray:
    """(len(devices), len(STATS)) statistics of each device's shards (``shard_values``' nearest-inside terms
    for ``support``)."""
    counts = np.fromiter((len(dev) for dev in devices), dtype=np.int64, count=len(devices))
    flat = [s for dev in devices for s in dev]
    if not flat:
        return empty_stats((len(devices),))
    owner = np.repeat(np.arange(len(devices)), counts)
    return gather_stats(shard_stats(shard_values(task, flat, support)), np.arange(len(flat)), owner,
                        len(devices))


def gather_stats(per: np.ndarray, members: np.ndarray, owner: np.ndarray, n: int) -> np.ndarray:
    """(n, len(STATS)) statistics of ``n`` devices where device ``owner[k]`` holds the shard of ``per[members
    [k]]`` (``shard_stats`` rows; a shard may sit on many devices, and is valued once)."""
    out = empty_stats((n,))
    if not len(members):
        return out
    per = per[members]
    # the sums by bincount (each device's in the order given, as np.add.at adds them; 3x faster); the
    # minima and maxima by reduceat where each device's shards come together
    for k in range(SUM_STATS):
        out[:, k] = np.bincount(owner, weights=per[:, k], minlength=n)
    if bool(np.all(owner[1:] >= owner[:-1])):
        starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
        out[owner[starts], SUM_STATS::2] = np.minimum.reduceat(per[:, SUM_STATS::2], starts, axis=0)
        out[owner[starts], SUM_STATS + 1::2] = np.maximum.reduceat(per[:, SUM_STATS + 1::2], starts, axis=0)
        return out
    lo, hi = out[:, SUM_STATS::2], out[:, SUM_STATS + 1::2]
    np.minimum.at(lo, owner, per[:, SUM_STATS::2])
    np.maximum.at(hi, owner, per[:, SUM_STATS + 1::2])
    out[:, SUM_STATS::2], out[:, SUM_STATS + 1::2] = lo, hi
    return out


def plan_stats(table_stats: np.ndarray, onehot: np.ndarray) -> np.ndarray:
    """(P, D, len(STATS)) statistics of table-wise plans: ``onehot`` (P, T, D) places the tables whose
    one-shard statistics are ``table_stats`` (T, len(STATS))."""
    p, _, d = onehot.shape
    out = np.empty((p, d, len(STATS)))
    out[..., :SUM_STATS] = np.einsum("ptd,ts->pds", onehot, table_stats[:, :SUM_STATS])
    on = onehot.astype(bool)[..., None]  # (P, T, D, 1)
    lo = table_stats[None, :, None, SUM_STATS::2]
    hi = table_stats[None, :, None, SUM_STATS + 1::2]
    out[..., SUM_STATS::2] = np.where(on, lo, np.inf).min(axis=1)
    out[..., SUM_STATS + 1::2] = np.where(on, hi, -np.inf).max(axis=1)
    return out


def _floor(bound: float) -> float:
    """The least value not below ``bound`` (``TOLERANCE``)."""
    return bound - TOLERANCE * max(1.0, abs(bound))


def _ceiling(bound: float) -> float:
    """The greatest value not above ``bound``."""
    return bound + TOLERANCE * max(1.0, abs(bound))


def _below(value: np.ndarray, bound: float) -> np.ndarray:
    return value < _floor(bound)


def _above(value: np.ndarray, bound: float) -> np.ndarray:
    return value > _ceiling(bound)


def _lowest(key: str, bound: float) -> float:
    """The least value inside a trained minimum ``bound`` of ``key`` (``POOLING_LOG_SLACK`` for pooling,
    ``BATCH_LOG_SLACK`` for the batch size)."""
    if key == "pooling":
        return (1.0 + bound) * 10.0 ** -POOLING_LOG_SLACK - 1.0
    return bound * 10.0 ** -BATCH_LOG_SLACK if key == "batch_size" else bound


def _highest(key: str, bound: float) -> float:
    """The greatest value inside a trained maximum ``bound`` of ``key``."""
    if key == "pooling":
        return (1.0 + bound) * 10.0 ** POOLING_LOG_SLACK - 1.0
    return bound * 10.0 ** BATCH_LOG_SLACK if key == "batch_size" else bound


@dataclass(frozen=True)
class Support:
    """The trained [min, max] of every shard feature, of tables per device and of the batch size, and the
    precisions trained on."""

    lo: dict[str, float]
    hi: dict[str, float]
    """Keys: ``SHARD_FEATURES`` and 'tables_per_device', 'batch_size'."""
    precisions: tuple[str, ...]

    KEYS = (*SHARD_FEATURES, "tables_per_device", "batch_size")

    @staticmethod
    def from_devices(stats: np.ndarray, batch_sizes: Iterable[int], precisions: Iterable[str]) -> Support:
        """The support of training devices with statistics ``stats`` (N, len(STATS)), their batch sizes and
        precisions."""
        used = stats[stats[:, 0] > 0]
        if not len(used):
            raise AutoshardError("no training devices to take the support of")
        lo = {k: float(used[:, SUM_STATS + 2 * i].min()) for i, k in enumerate(SHARD_FEATURES)}
        hi = {k: float(used[:, SUM_STATS + 2 * i + 1].max()) for i, k in enumerate(SHARD_FEATURES)}
        batches = np.fromiter(batch_sizes, dtype=np.float64)
        lo |= {"tables_per_device": float(used[:, 0].min()), "batch_size": float(batches.min())}
        hi |= {"tables_per_device": float(used[:, 0].max()), "batch_size": float(batches.max())}
        return Support(lo, hi, tuple(sorted(set(precisions))))

    def outside(self, task: Task, stats: np.ndarray) -> np.ndarray:
        """(...) bool: which devices of ``task``, with statistics ``stats`` (..., len(STATS)), lie outside."""
        count = stats[..., 0]
        if not self._task_inside(task):
            return count > 0
        # every shard feature's min against its lowest value inside and max against its highest: ``_below`` /
        # ``_above`` with the bounds as one vector, built once (two comparisons for all the features)
        lo, hi = self._feature_bounds
        out = ((stats[..., SUM_STATS::2] < lo).any(axis=-1) | (stats[..., SUM_STATS + 1::2] > hi).any(axis=-1)
               | _above(count, self.hi["tables_per_device"]) | _below(count, self.lo["tables_per_device"]))
        return out & (count > 0)

    @cached_property
    def _feature_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """(len(SHARD_FEATURES),) thresholds a shard feature's min must not fall below and its max must not
        rise above (what ``_below`` / ``_above`` compare with), in ``STATS`` order."""
        return (np.array([_floor(_lowest(k, self.lo[k])) for k in SHARD_FEATURES]),
                np.array([_ceiling(_highest(k, self.hi[k])) for k in SHARD_FEATURES]))

    def nearest(self, key: str, values: np.ndarray) -> np.ndarray:
        """``values`` of shard feature ``key`` moved to the nearest value inside the support (unchanged
        inside; 'pooling' within its slack)."""
        return np.clip(values, _lowest(key, self.lo[key]), _highest(key, self.hi[key]))

    def nearest_count(self, count: np.ndarray) -> np.ndarray:
        """Tables per device moved into the trained range (an empty device stays 0)."""
        return np.where(count > 0, np.clip(count, self.lo["tables_per_device"], self.hi["tables_per_device"]),
                        0.0)

    def nearest_context(self, task: Task) -> tuple[float, float]:
        """(batch size, element bytes) of the nearest kernel context inside the support: the task's batch
        clamped into the trained range (one within ``BATCH_LOG_SLACK`` of it counts as inside and is priced
        at the range's edge, at most 2.3% away), its precision's bytes or, if not trained, the nearest
        trained one's."""
        batch = float(np.clip(task.batch_size, self.lo["batch_size"], self.hi["batch_size"]))
        trained = [Precision(p).bytes for p in self.precisions]
        elem = min(trained, key=lambda b: (abs(b - task.precision.bytes), -b))
        return batch, float(elem)

    def nearest_features(self, raw: np.ndarray) -> np.ndarray:
        """Raw shard features (N, NUM_FEATURES; ``tables.table.shard_raw_features``) with dim, rows and
        pooling moved to the nearest values inside the support (the table size follows its rows and dim; the
        access bins stay)."""
        x = np.array(raw, dtype=np.float64, copy=True)
        x[:, _DIM] = self.nearest("dim", x[:, _DIM])
        x[:, _LOG_ROWS] = self.nearest("log10_rows", x[:, _LOG_ROWS])
        pooling = 10.0 ** x[:, _LOG_POOLING] - 1.0
        x[:, _LOG_POOLING] = np.log10(1.0 + self.nearest("pooling", pooling))
        x[:, _LOG_SIZE] = size_feature(x[:, _LOG_ROWS], x[:, _DIM])
        return x

    def _task_inside(self, task: Task) -> bool:
        return task.precision.value in self.precisions and not self._batch_outside(task)

    def _batch_outside(self, task: Task) -> bool:
        b = np.float64(task.batch_size)
        return bool(_below(b, _lowest("batch_size", self.lo["batch_size"]))
                    or _above(b, _highest("batch_size", self.hi["batch_size"])))

    def reasons(self, task: Task, stats: np.ndarray) -> list[str]:
        """Why each device (statistics (N, len(STATS))) is outside; '' for a device inside."""
        out = []
        for row in stats:
            if row[0] <= 0:
                out.append("")
                continue
            why = []
            if task.precision.value not in self.precisions:
                why.append(f"precision {task.precision.value} (trained {'/'.join(self.precisions)})")
            if self._batch_outside(task):
                why.append(f"batch size {task.batch_size} (trained {self._span('batch_size')})")
            for i, k in enumerate(SHARD_FEATURES):
                v_lo, v_hi = row[SUM_STATS + 2 * i], row[SUM_STATS + 2 * i + 1]
                if _below(v_lo, _lowest(k, self.lo[k])):
                    why.append(f"{_label(k)} {_show(k, v_lo)} < {_show(k, self.lo[k])}")
                if _above(v_hi, _highest(k, self.hi[k])):
                    why.append(f"{_label(k)} {_show(k, v_hi)} > {_show(k, self.hi[k])}")
            n = row[0]
            if _above(n, self.hi["tables_per_device"]) or _below(n, self.lo["tables_per_device"]):
                why.append(f"{int(n)} tables (trained {self._span('tables_per_device')})")
            out.append(", ".join(why))
        return out

    def _span(self, k: str) -> str:
        return f"{_show(k, self.lo[k])}..{_show(k, self.hi[k])}"

    def to_json(self) -> dict[str, Any]:
        return {"lo": dict(self.lo), "hi": dict(self.hi), "precisions": list(self.precisions)}

    @staticmethod
    def from_json(d: dict[str, Any]) -> Support:
        try:
            lo = {k: float(d["lo"][k]) for k in Support.KEYS}
            hi = {k: float(d["hi"][k]) for k in Support.KEYS}
            return Support(lo, hi, tuple(str(p) for p in d["precisions"]))
        except (KeyError, TypeError, ValueError) as e:
            raise AutoshardError(f"cost model support not understood ({e}); retrain it") from None

    def describe(self) -> str:
        """One line: the trained ranges."""
        parts = [f"{_label(k)} {self._span(k)}" for k in self.KEYS]
        return ", ".join(parts + [f"precision {'/'.join(self.precisions)}"])


def _label(key: str) -> str:
    return {"log10_rows": "rows", "tables_per_device": "tables/device", "batch_size": "batch"}.get(key, key)


def _show(key: str, value: float) -> str:
    if key == "log10_rows":
        return f"{10 ** value:.3g}"
    if key == "pooling":
        return f"{value:.3g}"
    return f"{value:.0f}"
