"""Vectorised shard features and the target scaling between milliseconds and the network's output space.

``Table.raw_features`` is the reference (one table at a time); ``task_raw_features`` + ``shard_features``
compute the same numbers for many shards at once so prediction never loops over tables in Python.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from autoshard.costs.learned.network import (
    NUM_CONTEXT_FEATURES,
    NUM_DENSITY_FEATURES,
    NUM_REUSE_FEATURES,
    Target,
)
from autoshard.errors import AutoshardError
from autoshard.tables.table import (
    FEATURE_NAMES,
    FeatureNormalizer,
    Table,
    distinct_rows_per_batch,
    shard_raw_features,
)

HEADS = ("fwd", "bwd", "plan")
"""Outputs with their own target scaling: forward and backward compute per device, and the plan cost."""

CONTEXT_FEATURE_NAMES = ("log10_batch", "elem_bytes")
"""A ``context`` network's per-shard device context: the kernel batch (log10) and the weights' element
bytes (4 fp32, 2 fp16)."""
CONTEXT_LOC = (3.5, 3.0)
CONTEXT_SCALE = (0.7, 1.0)
"""Fixed normalisation of the context features (batch 512-65536 is log10 2.7-4.8): fixed, not fitted, so a
network's inputs mean the same whatever records it was trained on."""
assert len(CONTEXT_FEATURE_NAMES) == NUM_CONTEXT_FEATURES


def context_features(batch_size: float | np.ndarray, elem_bytes: float | np.ndarray) -> np.ndarray:
    """(..., 2) normalised context features of devices at ``batch_size`` with ``elem_bytes`` weights."""
    b = np.log10(np.asarray(batch_size, dtype=np.float64))
    e = np.asarray(elem_bytes, dtype=np.float64)
    b, e = np.broadcast_arrays(b, e)
    return np.stack([(b - CONTEXT_LOC[0]) / CONTEXT_SCALE[0], (e - CONTEXT_LOC[1]) / CONTEXT_SCALE[1]],
                    axis=-1)


REUSE_FEATURE_NAMES = ("log10_1p_distinct_rows", "log10_1p_distinct_bytes")
"""A ``reuse`` network's per-shard working set at its device's batch: the distinct rows the batch touches
(``tables.table.distinct_rows_per_batch``) and those rows' bytes at the shard's dim and element size."""
REUSE_LOC = (3.5, 5.5)
REUSE_SCALE = (1.5, 1.5)
"""Fixed normalisation of the working-set features (1 - 1e7 rows, 1e2 - 1e10 bytes), for the reason the
context's is fixed."""
assert len(REUSE_FEATURE_NAMES) == NUM_REUSE_FEATURES


def reuse_features(raw_shards: np.ndarray, batch_size: float | np.ndarray,
                   elem_bytes: float | np.ndarray) -> np.ndarray:
    """(N, 2) normalised working-set features of shards with these raw (shard) features on devices of
    ``batch_size`` and ``elem_bytes`` (one value for all, or one per shard)."""
    rows = distinct_rows_per_batch(raw_shards, batch_size)
    dims = np.atleast_2d(raw_shards)[:, 0]
    nbytes = rows * dims * np.broadcast_to(np.asarray(elem_bytes, dtype=np.float64), rows.shape)
    out = np.stack([np.log10(1.0 + rows), np.log10(1.0 + nbytes)], axis=-1)
    return (out - np.asarray(REUSE_LOC)) / np.asarray(REUSE_SCALE)


_LOG_ROWS = FEATURE_NAMES.index("log10_rows")

DENSITY_FEATURE_NAMES = ("touched_share", "log10_timed_bytes")
"""A ``density`` network's per-shard spread of its batch over the rows it is timed with: the share of those
rows a batch touches, and their bytes at the shard's dim and element size."""
DENSITY_LOC = (0.3, 7.0)
DENSITY_SCALE = (0.3, 1.0)
"""Fixed normalisation of the density features (a share in 0-1; 1e4 - 1e10 bytes), for the reason the
context's is fixed."""
assert len(DENSITY_FEATURE_NAMES) == NUM_DENSITY_FEATURES


def timed_rows(raw_shards: np.ndarray, rows_cap: float | np.ndarray | None) -> np.ndarray:
    """(N,) rows shards of these raw features are timed with: their rows, at most ``rows_cap`` (None: no
    cap), the per-shard part of ``hardware.kernel.effective_rows`` (a shard above the cap keeps ``rows_cap``
    rows and its lookups fold onto them); its device-wide lowering of the cap for devices above
    ``max_shard_bytes`` (2 GiB by default) is not seen by a shard's features."""
    rows = 10.0 ** np.atleast_2d(np.asarray(raw_shards, dtype=np.float64))[:, _LOG_ROWS]
    if rows_cap is None:
        return rows
    return np.minimum(rows, np.broadcast_to(np.asarray(rows_cap, dtype=np.float64), rows.shape))


def touched_share(raw_shards: np.ndarray, batch_size: float | np.ndarray,
                  rows_cap: float | np.ndarray | None) -> np.ndarray:
    """(N,) share of the rows it is timed with that one batch touches, per shard of these raw features:
    the batch touches d of the shard's R rows (``distinct_rows_per_batch``); timed with K = min(R, cap) rows
    (``timed_rows``), each kept row stands for R / K of them (lookups fold ``mod K``) and is untouched when
    all of those are, so 1 - (1 - d / R) ^ (R / K): d / R for a shard under the cap, about 1 - exp(-d / K)
    far above it. The one place of this formula."""
    x = np.atleast_2d(np.asarray(raw_shards, dtype=np.float64))
    full = np.maximum(10.0 ** x[:, _LOG_ROWS], 1.0)
    rows = np.maximum(timed_rows(x, rows_cap), 1.0)
    touched = np.clip(distinct_rows_per_batch(x, batch_size) / full, 0.0, 1.0)
    with np.errstate(divide="ignore"):
        return -np.expm1(full / rows * np.log1p(-touched))


def density_features(raw_shards: np.ndarray, batch_size: float | np.ndarray, elem_bytes: float | np.ndarray,
                     rows_cap: float | np.ndarray | None) -> np.ndarray:
    """(N, 2) normalised density features of shards with these raw (shard) features on devices of
    ``batch_size`` and ``elem_bytes``, timed with at most ``rows_cap`` rows (one value for all, or one per
    shard): ``touched_share`` and the timed rows' bytes (log10)."""
    x = np.atleast_2d(np.asarray(raw_shards, dtype=np.float64))
    rows = np.maximum(timed_rows(x, rows_cap), 1.0)
    nbytes = rows * x[:, 0] * np.broadcast_to(np.asarray(elem_bytes, dtype=np.float64), rows.shape)
    out = np.stack([touched_share(x, batch_size, rows_cap), np.log10(np.maximum(nbytes, 1.0))], axis=-1)
    return (out - np.asarray(DENSITY_LOC)) / np.asarray(DENSITY_SCALE)


def task_raw_features(tables: tuple[Table, ...] | list[Table]) -> np.ndarray:
    """(T, NUM_FEATURES) raw features of every table at its full dim."""
    return np.stack([t.raw_features() for t in tables])


def shard_features(raw: np.ndarray, table_idx: np.ndarray, dims: np.ndarray,
                   normalizer: FeatureNormalizer, row_fraction: np.ndarray | None = None,
                   lookup_share: np.ndarray | None = None, context: np.ndarray | None = None,
                   adjust: Callable[[np.ndarray], np.ndarray] | None = None,
                   reuse_at: tuple[Any, Any] | None = None,
                   density_at: tuple[Any, Any, Any] | None = None) -> np.ndarray:
    """Normalised features of shards (table index into ``raw``, shard dim, share of the table's rows), by
    ``autoshard.tables.table.shard_raw_features``, the formula ``Table.raw_features`` uses too, passed through
    ``adjust`` (raw features -> raw features, e.g. ``Support.nearest_features``) if given; then the
    normalised ``context`` (``context_features``: one row for all shards, or one per shard) if given; then
    the working-set features (``reuse_features``) at ``reuse_at`` = (batch size, element bytes), each one
    value or one per shard, if given; then the density features (``density_features``) at ``density_at`` =
    (batch size, element bytes, rows cap), if given."""
    frac = np.ones(len(table_idx)) if row_fraction is None else row_fraction
    x = shard_raw_features(raw[table_idx], dims, frac, lookup_share)
    if adjust is not None:
        x = adjust(x)
    parts = [normalizer.transform(x)]
    if context is not None:
        parts.append(np.broadcast_to(np.asarray(context, dtype=np.float64), (len(x), NUM_CONTEXT_FEATURES)))
    if reuse_at is not None:
        parts.append(reuse_features(x, *reuse_at))
    if density_at is not None:
        parts.append(density_features(x, *density_at))
    return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1)


def model_space_to_ms(target: Target, out: torch.Tensor, loc: torch.Tensor,
                      scale: torch.Tensor) -> torch.Tensor:
    """Network outputs -> milliseconds, given the heads' ``loc`` and ``scale`` (broadcasting against
    ``out``); the one place of the mapping (``TargetScaler``)."""
    if target is Target.LOG:
        return torch.exp(out * scale + loc)
    return torch.nn.functional.softplus(out) * scale


@dataclass(frozen=True)
class TargetScaler:
    """Maps milliseconds to the network's output space and back, per head (fwd, bwd, plan)."""

    target: Target
    loc: tuple[float, float, float]
    """Log target: mean of log-ms; linear target: 0."""
    scale: tuple[float, float, float]
    """Log target: std of log-ms; linear target: mean ms (outputs are ms / scale through a softplus)."""

    def __post_init__(self) -> None:
        # cached float32 tensors: built once, not on every prediction call
        object.__setattr__(self, "_loc_t", torch.tensor(self.loc, dtype=torch.float32))
        object.__setattr__(self, "_scale_t", torch.tensor(self.scale, dtype=torch.float32))

    @staticmethod
    def fit(target: Target, ms: np.ndarray) -> TargetScaler:
        """From a (N, 3) array of positive measured ms (fwd, bwd, plan)."""
        ms = np.maximum(np.asarray(ms, dtype=np.float64), 1e-6)
        if target is Target.LOG:
            lg = np.log(ms)
            std = np.maximum(lg.std(axis=0), 1e-3)
            return TargetScaler(target, tuple(map(float, lg.mean(axis=0))), tuple(map(float, std)))  # type: ignore
        return TargetScaler(target, (0.0, 0.0, 0.0), tuple(map(float, ms.mean(axis=0))))  # type: ignore

    def to_ms(self, out: torch.Tensor, heads: slice | int) -> torch.Tensor:
        """Network outputs (..., k) for ``heads`` (a slice of 0..2 or an index) -> milliseconds."""
        loc = self._loc_t[heads].to(out.dtype)  # type: ignore[attr-defined]
        scale = self._scale_t[heads].to(out.dtype)  # type: ignore[attr-defined]
        return model_space_to_ms(self.target, out, loc, scale)

    def tensors(self, heads: slice | int) -> tuple[torch.Tensor, torch.Tensor]:
        """(loc, scale) of ``heads`` as float32 tensors (``model_space_to_ms``'s arguments)."""
        return self._loc_t[heads], self._scale_t[heads]  # type: ignore[attr-defined]

    def scaled(self, fwd: float, bwd: float) -> TargetScaler:
        """The same mapping with the fwd and bwd heads' milliseconds multiplied by ``fwd`` and ``bwd`` (a
        host calibration): exact for both targets (log: the location moves by log(factor); linear: the scale
        is multiplied)."""
        factors = (float(fwd), float(bwd), 1.0)
        if min(factors) <= 0:
            raise AutoshardError(f"scale factors must be positive, got fwd {fwd}, bwd {bwd}")
        if self.target is Target.LOG:
            loc = tuple(lo + math.log(f) for lo, f in zip(self.loc, factors))
            return TargetScaler(self.target, loc, self.scale)  # type: ignore[arg-type]
        return TargetScaler(self.target, self.loc, tuple(sc * f for sc, f in zip(self.scale, factors)))  # type: ignore[arg-type]

    def to_json(self) -> dict[str, Any]:
        return {"target": self.target.value, "loc": list(self.loc), "scale": list(self.scale)}

    @staticmethod
    def from_json(d: dict[str, Any]) -> TargetScaler:
        return TargetScaler(Target(d["target"]), tuple(map(float, d["loc"])), tuple(map(float, d["scale"])))  # type: ignore
