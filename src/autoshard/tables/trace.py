"""Table pools derived from the public dlrm_datasets embedding-lookup traces (read by ``tables.trace_file``).

Traces hold lookups only: no dims and no hash sizes. So a table's rows are estimated as its max index + 1 (as
in the published statistics), its pooling factor is its mean bag size, its 17 access bins are computed from
its indices over the file's whole batch (the published bins are over batch 65536, the real files' batch), and
its dim is chosen by the caller. Tables with no lookups are kept (rows 1, pooling 0, bins 0) and listed in the
pool's ``source["empty_tables"]``.

Every derived table keeps a ``LookupSpec(kind=TRACE, trace_path, trace_table)``, so the kernels can later be
timed on its real index stream (``trace_file.trace_lookups``).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from autoshard.errors import AutoshardError
from autoshard.tables.lookups import reuse_histograms
from autoshard.tables.pool_stats import pool_stats
from autoshard.tables.table import NUM_ACCESS_BINS, LookupKind, LookupSpec, Table, TablePool
from autoshard.tables.trace_file import TRACE_SUFFIXES, load_trace

logger = logging.getLogger(__name__)

DEFAULT_TRACE_DIM = 16
"""Traces have no dims; DreamShard's DLRM tasks use dim 16 for every table (feature_stats.json)."""


def trace_stem(path: str) -> str:
    """File name without the trace suffix, made safe for table names."""
    name = Path(path).name
    for suffix in TRACE_SUFFIXES:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    return re.sub(r"[^A-Za-z0-9_]", "_", name) or "trace"


def trace_pool(
    path: str,
    dims: Sequence[int] = (DEFAULT_TRACE_DIM,),
    seed: int = 0,
    progress: Callable[[int], None] | None = None,
) -> TablePool:
    """One table per trace table with features derived from its indices; dims one value or a seeded choice.

    ``progress(k)`` is called after each table with the number done.
    """
    if not dims or any(int(d) <= 0 for d in dims):
        raise AutoshardError(f"dims {list(dims)} must be one or more positive integers")
    trace = load_trace(path)
    resolved = str(Path(path).resolve())
    rng = np.random.default_rng(seed)
    dim_choices = np.asarray([int(d) for d in dims], dtype=np.int64)
    table_dims = np.full(trace.num_tables, dim_choices[0]) if len(dim_choices) == 1 else \
        rng.choice(dim_choices, size=trace.num_tables)
    stem = trace_stem(path)
    width = len(str(trace.num_tables - 1))
    unique_hist = np.zeros(NUM_ACCESS_BINS, dtype=np.int64)
    lookup_hist = np.zeros(NUM_ACCESS_BINS, dtype=np.int64)
    tables, empty = [], []
    for t in range(trace.num_tables):
        idx = trace.table_indices(t)
        name = f"{stem}_t{t:0{width}d}"
        unique, looked = reuse_histograms(idx)
        unique_hist += unique
        lookup_hist += looked
        total = int(unique.sum())
        if total == 0:
            empty.append(name)
        tables.append(Table(
            name=name,
            dim=int(table_dims[t]),
            rows=int(idx.max()) + 1 if len(idx) else 1,
            pooling_factor=float(trace.lengths[t].mean()),
            access_bins=tuple(float(x) for x in unique / total) if total else (0.0,) * NUM_ACCESS_BINS,
            lookups=LookupSpec(LookupKind.TRACE, trace_path=resolved, trace_table=t),
        ))
        if progress is not None:
            progress(t + 1)
    if empty:
        logger.info("%d of %d trace tables have no lookups (kept with pooling 0)", len(empty), len(tables))
    source = {
        "generator": "autoshard.trace",
        "trace_path": resolved,
        "num_tables": trace.num_tables,
        "batch_size": trace.batch_size,
        "dims": [int(d) for d in dim_choices],
        "seed": int(seed),
        "rows": "max index + 1",
        "empty_tables": empty,
        "stats": pool_stats(tables, unique_hist, lookup_hist),
    }
    return TablePool.from_tables(tables, source)
