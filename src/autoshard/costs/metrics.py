"""Accuracy metrics for cost predictions: MAPE, RMSE and Spearman rank correlation; the bootstrap interval
of a geometric-mean ratio.

Spearman is what a planner cares about (it only compares candidates), MAPE what a user reading a predicted
step time cares about. Spearman is computed here with average ranks for ties, so no scipy dependency.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from autoshard.errors import AutoshardError


def _pair(pred: Any, true: Any) -> tuple[np.ndarray, np.ndarray]:
    p = np.asarray(pred, dtype=np.float64).ravel()
    t = np.asarray(true, dtype=np.float64).ravel()
    if p.shape != t.shape:
        raise AutoshardError(f"metric inputs differ in length ({p.size} predictions, {t.size} measurements)")
    if p.size == 0:
        raise AutoshardError("no samples to score; the held-out set is empty")
    return p, t


def mape(pred: Any, true: Any) -> float:
    """Mean absolute percentage error, in percent (measured costs are positive milliseconds)."""
    p, t = _pair(pred, true)
    return float(np.mean(np.abs(p - t) / np.maximum(np.abs(t), 1e-12)) * 100.0)


def rmse(pred: Any, true: Any) -> float:
    """Root mean squared error, in the inputs' unit (ms)."""
    p, t = _pair(pred, true)
    return float(np.sqrt(np.mean((p - t) ** 2)))


def _ranks(x: np.ndarray) -> np.ndarray:
    """Ranks 0..n-1, tied values sharing the average of their ranks."""
    order = np.argsort(x, kind="stable")
    ranks = np.empty(len(x), dtype=np.float64)
    ranks[order] = np.arange(len(x), dtype=np.float64)
    _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    sums = np.bincount(inverse, weights=ranks)
    return sums[inverse] / counts[inverse]


def spearman(pred: Any, true: Any) -> float:
    """Spearman rank correlation; NaN when either side is constant (no ranking to compare)."""
    p, t = _pair(pred, true)
    rp, rt = _ranks(p), _ranks(t)
    rp -= rp.mean()
    rt -= rt.mean()
    denom = float(np.sqrt((rp ** 2).sum() * (rt ** 2).sum()))
    return float((rp * rt).sum() / denom) if denom > 0 else float("nan")


def score(pred: Any, true: Any) -> dict[str, float]:
    """All three metrics plus the sample count, as a JSON-ready dict."""
    p, t = _pair(pred, true)
    return {"mape_pct": mape(p, t), "rmse_ms": rmse(p, t), "spearman": spearman(p, t), "n": int(p.size)}


RESAMPLES = 2000
"""Bootstrap resamples of every interval the project reports."""
LEVEL = 0.95
"""Their coverage."""
SEED = 0
"""Their seed (intervals are deterministic)."""


def geomean_interval(ratios: Sequence[float], *, resamples: int = RESAMPLES, level: float = LEVEL,
                     seed: int = SEED) -> tuple[float, float]:
    """Percentile-bootstrap interval of the geometric mean of positive ``ratios`` (resampled over them, no
    round noise: for paired re-measurements, where ``bench.summary.compare``'s task structure does not
    apply)."""
    logs = np.log(np.asarray(ratios, dtype=np.float64))
    rng = np.random.default_rng(seed)
    means = logs[rng.integers(0, len(logs), (resamples, len(logs)))].mean(axis=1)
    low, high = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return float(np.exp(low)), float(np.exp(high))
