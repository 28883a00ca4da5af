"""Summary statistics of a table pool (rows, pooling, per-table access bins, pooled reuse histograms),
recorded in each generated pool's ``source["stats"]`` so it can be compared with the published dlrm_datasets
ones (``tables.published``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from autoshard.tables.table import Table


def pool_stats(
    tables: Sequence[Table], unique_hist: np.ndarray | None = None, lookup_hist: np.ndarray | None = None
) -> dict[str, Any]:
    """Means/stds of rows, pooling and bins over ``tables``, and the pooled reuse histograms when given."""
    rows = np.array([t.rows for t in tables], dtype=np.float64)
    pooling = np.array([t.pooling_factor for t in tables], dtype=np.float64)
    bins = np.array([t.access_bins for t in tables], dtype=np.float64)
    out: dict[str, Any] = {
        "num_tables": len(tables),
        "rows_mean": float(rows.mean()), "rows_std": float(rows.std()),
        "pooling_mean": float(pooling.mean()), "pooling_std": float(pooling.std()),
        "empty_fraction": float(np.mean(pooling == 0)),
        "bins_mean": [round(float(x), 5) for x in bins.mean(axis=0)],
        "bins_std": [round(float(x), 5) for x in bins.std(axis=0)],
    }
    if unique_hist is not None and lookup_hist is not None and unique_hist.sum() > 0:
        out["pooled_unique_hist"] = [round(float(x), 5) for x in unique_hist / unique_hist.sum()]
        out["pooled_lookup_hist"] = [round(float(x), 5) for x in lookup_hist / lookup_hist.sum()]
        out["unique_per_lookup"] = float(unique_hist.sum() / lookup_hist.sum())
    return out
