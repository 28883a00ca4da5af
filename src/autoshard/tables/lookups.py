"""Real lookups for a table: generated from its synthetic distribution or read from its trace.

These are the index batches the real kernels are timed on, and from which the access bins are computed.
Synthetic (POWER_LAW) tables: bag sizes are gamma-Poisson with the table's mean and ``pooling_cv``; each
lookup draws a rank from a power law of exponent ``alpha`` over the first ``vocab`` ranks (all rows if unset),
and a seeded bijection scatters the ranks over all rows (real hot rows are not contiguous).
"""

from __future__ import annotations

import numpy as np

from autoshard.errors import AutoshardError
from autoshard.tables.lookup_batch import Lookups
from autoshard.tables.table import NUM_ACCESS_BINS, LookupKind, Table
from autoshard.tables.trace_file import trace_lookups

_PERMUTATION_PRIMES = (1_000_003, 1_000_033, 1_000_037)
"""Multipliers of the rank->row bijection (k * p + off) mod rows; small enough that k * p fits in int64."""


_BINCOUNT_MAX_RANGE = 1 << 25
"""``access_bins`` counts with np.bincount when the index range is below this (a 256 MiB count array at
most)."""
_BINCOUNT_RANGE_PER_INDEX = 2
"""... and below this many slots per index (else a sort via np.unique is cheaper than a sparse count
array)."""


def _power_law_ranks(rng: np.random.Generator, n: int, rows: int, alpha: float) -> np.ndarray:
    """Ranks in [0, rows) with density proportional to (rank + 1) ** -alpha (inverse-CDF sampling)."""
    u = rng.random(n)
    if abs(alpha - 1.0) < 1e-9:
        x = np.exp(u * np.log(rows + 1.0)) - 1.0
    else:
        top = (rows + 1.0) ** (1.0 - alpha)
        x = (1.0 + u * (top - 1.0)) ** (1.0 / (1.0 - alpha)) - 1.0
    return np.minimum(x.astype(np.int64), rows - 1)


def _rank_to_row(ranks: np.ndarray, rows: int, seed: int) -> np.ndarray:
    """Scatter hot ranks over the table (real hot rows are not contiguous) with a seeded bijection."""
    p = next(p for p in _PERMUTATION_PRIMES if rows % p != 0)
    off = seed % rows
    return (ranks * p + off) % rows


def _bag_lengths(rng: np.random.Generator, batch_size: int, mean: float, cv: float) -> np.ndarray:
    """Gamma-Poisson (negative binomial) bag sizes with the given mean and coefficient of variation."""
    if mean <= 0:
        return np.zeros(batch_size, dtype=np.int64)
    if cv <= 0:
        return rng.poisson(mean, batch_size).astype(np.int64)
    shape = 1.0 / (cv * cv)
    lam = rng.gamma(shape, mean / shape, batch_size)
    return rng.poisson(lam).astype(np.int64)


def sample_lookups(table: Table, batch_size: int, seed: int = 0, rows: int | None = None) -> Lookups:
    """A deterministic batch of lookups for ``table``.

    ``rows`` caps the index range (used when a table is too large to allocate for timing; indices are folded
    with ``mod rows``, which keeps the reuse pattern of the hot rows). ``seed`` picks the batch.
    """
    if batch_size <= 0:
        raise AutoshardError(f"batch size {batch_size} must be positive")
    spec = table.lookups
    n_rows = min(table.rows, rows) if rows else table.rows
    if spec is None:
        raise AutoshardError(f"table {table.name} has no lookup distribution; "
                             "regenerate it with 'autoshard tables'")
    if spec.kind is LookupKind.TRACE:
        lk = trace_lookups(table, batch_size, seed)
        return Lookups(lk.indices % n_rows, lk.offsets)
    rng = np.random.default_rng([spec.seed, seed])
    lengths = _bag_lengths(rng, batch_size, table.pooling_factor, spec.pooling_cv)
    offsets = np.zeros(batch_size + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    vocab = table.rows if spec.vocab is None else max(1, min(int(spec.vocab), table.rows))
    ranks = _power_law_ranks(rng, int(offsets[-1]), vocab, spec.alpha)
    rows = ranks if spec.sorted_ids else _rank_to_row(ranks, table.rows, spec.seed)
    indices = rows % n_rows
    return Lookups(indices.astype(np.int64), offsets)


def index_counts(indices: np.ndarray) -> np.ndarray:
    """How many times each distinct index occurs in ``indices`` (one count per distinct index, any order)."""
    idx = np.asarray(indices, dtype=np.int64).ravel()
    if len(idx) == 0:
        return np.zeros(0, dtype=np.int64)
    lo, hi = int(idx.min()), int(idx.max())
    if lo >= 0 and hi < min(_BINCOUNT_MAX_RANGE, max(_BINCOUNT_RANGE_PER_INDEX * len(idx), 1 << 20)):
        # Dense counting is O(n + range): faster than sorting when the range is small; same result.
        counts = np.bincount(idx)
        return counts[counts > 0]
    _, counts = np.unique(idx, return_counts=True)
    return counts


def count_bins(counts: np.ndarray) -> np.ndarray:
    """Bin of each access count: c in (2^(k-1), 2^k] -> k (c = 1 -> 0), capped at 16 (> 32768)."""
    bins = np.ceil(np.log2(np.asarray(counts, dtype=np.float64))).astype(np.int64)
    return np.minimum(bins, NUM_ACCESS_BINS - 1)


def reuse_histograms(indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per access bin: the number of distinct indices and the number of lookups that fall in it
    (int64 [17] each).

    Summed over tables these give a pool's reuse histograms as in the dlrm_datasets locality stats
    ("histogram of col sizes" = distinct indices per bin / all distinct; "ratio of index distribution" =
    lookups per bin / all lookups).
    """
    counts = index_counts(indices)
    bins = count_bins(counts)
    unique = np.bincount(bins, minlength=NUM_ACCESS_BINS).astype(np.int64)
    looked = np.bincount(bins, weights=counts, minlength=NUM_ACCESS_BINS).astype(np.int64)
    return unique, looked


def access_bins(indices: np.ndarray) -> tuple[float, ...]:
    """Share of unique indices accessed (0,1], (1,2], (2,4], ..., >32768 times (17 bins); all zero if
    empty."""
    counts = index_counts(indices)
    if len(counts) == 0:
        return (0.0,) * NUM_ACCESS_BINS
    hist = np.bincount(count_bins(counts), minlength=NUM_ACCESS_BINS)
    return tuple(float(x) for x in hist / len(counts))
