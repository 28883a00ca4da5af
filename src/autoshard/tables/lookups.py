"""Real lookups for a table: generated from its synthetic distribution or read from its trace.

These are the index batches the real kernels are timed on, and from which the access bins are computed.
Synthetic (POWER_LAW) tables: bag sizes are gamma-Poisson with the table's mean and ``pooling_cv``; each
lookup draws a rank from a power law of exponent ``alpha`` over the first ``vocab`` ranks (all rows if unset),
and a seeded bijection scatters the ranks over all rows (real hot rows are not contiguous).
"""

from __future__ import annotations

import functools
import hashlib
import logging
import math
import threading

import numpy as np

from autoshard.errors import AutoshardError
from autoshard.shards import even_row_bounds
from autoshard.tables.lookup_batch import Lookups
from autoshard.tables.published import PUBLISHED_BATCH_SIZE
from autoshard.tables.table import NUM_ACCESS_BINS, LookupKind, LookupSpec, Table
from autoshard.tables.trace_file import trace_lookups

logger = logging.getLogger(__name__)

_GOLDEN = 0.6180339887498949
"""The rank->row bijection multiplies by the integer coprime with the row count nearest above rows x this
(a Weyl sequence): consecutive hot ranks land about 0.62 of the table apart, so no row range collects them."""
_EXACT_PRODUCT = 2**62
"""Beyond this rank x multiplier, the bijection's product is taken in Python integers (no int64 overflow)."""


_BINCOUNT_MAX_RANGE = 1 << 25
"""``access_bins`` counts with np.bincount when the index range is below this (a 256 MiB count array at
most)."""
_BINCOUNT_RANGE_PER_INDEX = 2
"""... and below this many slots per index (else a sort via np.unique is cheaper than a sparse count
array)."""


def _power_law_ranks(rng: np.random.Generator, n: int, rows: int, alpha: float) -> np.ndarray:
    """Ranks in [0, rows) with density proportional to (rank + 1) ** -alpha (inverse-CDF sampling)."""
    # in place, same operations in the same order as x = (1 + u (top - 1)) ** (1 / (1 - alpha)) - 1: the
    # same ranks, without four temporaries of n floats (the profiler draws up to ~1e8 ids a sample)
    x = rng.random(n)
    if abs(alpha - 1.0) < 1e-9:
        x *= np.log(rows + 1.0)
        np.exp(x, out=x)
    else:
        x *= (rows + 1.0) ** (1.0 - alpha) - 1.0
        x += 1.0
        np.power(x, 1.0 / (1.0 - alpha), out=x)
    x -= 1.0
    ranks = x.astype(np.int64)
    np.minimum(ranks, rows - 1, out=ranks)
    return ranks


def _rank_to_row(ranks: np.ndarray, rows: int, seed: int) -> np.ndarray:
    """Scatter hot ranks over the table (real hot rows are not contiguous) with a seeded bijection:
    row = (rank x m + seed) mod rows, m coprime with rows near 0.62 x rows. (Until stop 13 m was a prime near
    1e6, which is 3 mod rows below 1e6 rows and so kept the hot rows within a few hundred rows of each other:
    a row-wise split put nearly all lookups in one range.)"""
    m = max(1, int(rows * _GOLDEN))
    while math.gcd(m, rows) != 1:
        m += 1
    off = seed % rows
    ranks = np.asarray(ranks, dtype=np.int64)
    if len(ranks) and int(ranks.max()) * m >= _EXACT_PRODUCT:
        return np.array([(int(k) * m + off) % rows for k in ranks], dtype=np.int64)
    out = ranks * m
    out += off
    np.remainder(out, rows, out=out)
    return out


def _bag_lengths(rng: np.random.Generator, batch_size: int, mean: float, cv: float) -> np.ndarray:
    """Gamma-Poisson (negative binomial) bag sizes with the given mean and coefficient of variation."""
    if mean <= 0:
        return np.zeros(batch_size, dtype=np.int64)
    if cv <= 0:
        return rng.poisson(mean, batch_size).astype(np.int64)
    shape = 1.0 / (cv * cv)
    lam = rng.gamma(shape, mean / shape, batch_size)
    return rng.poisson(lam).astype(np.int64)


DEFAULT_ALPHA = 0.7
"""Power-law exponent assumed for a table that states no lookup distribution (``default_lookup_spec``).

The median of the alpha marginal of the synthetic generator's (alpha, vocab) density (``CELL_WEIGHTS`` over
``ALPHA_EDGES`` in ``tables.published``: 20% of the mass in [0, 0.5), 75% in [0.5, 1), median 0.700, mean
0.81), which was fitted to the published dlrm_datasets statistics (feature_stats.json per-table access bins,
locality_stats_2021.txt reuse histograms). In that fit a low alpha goes with a bounded active vocabulary, so
the default also bounds it (``DEFAULT_VOCAB_LOG_RATIO``)."""
DEFAULT_VOCAB_LOG_RATIO = -0.9
"""log10(active vocabulary / lookups in one published batch of 65536) assumed with ``DEFAULT_ALPHA``: the
median of the vocab marginal of the same density (``VOCAB_EDGES``; median -0.898), capped at the table's
rows. Measured on the rows and pooling factors of ``synthesize_pool(40, 0)``'s tables at batch 65536: 0.12
distinct indices per lookup (published 0.145), mean (0,1] access bin 0.09 (published 0.22); the same alpha
over all rows gives 0.52 and 0.79."""

_warned_default: set[str] = set()
_warned_lock = threading.Lock()


def name_seed(name: str) -> int:
    """A stable seed in [0, 2**31 - 1) from a table name (blake2b; Python's ``hash`` is salted per
    process)."""
    digest = hashlib.blake2b(name.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little") % (2**31 - 1)


def default_vocab(rows: int, pooling_factor: float) -> int:
    """Active vocabulary of the default distribution: 10 ** DEFAULT_VOCAB_LOG_RATIO x the table's lookups in
    one batch of 65536, between 1 and ``rows``."""
    v = round(PUBLISHED_BATCH_SIZE * max(float(pooling_factor), 0.0) * 10.0 ** DEFAULT_VOCAB_LOG_RATIO)
    return int(min(max(v, 1), int(rows)))


def default_lookup_spec(table: Table, alpha: float = DEFAULT_ALPHA) -> LookupSpec:
    """The documented default for a table without lookup statistics: POWER_LAW of exponent ``alpha``
    (``DEFAULT_ALPHA``) over ``default_vocab`` rows scattered over the table, bag sizes with the table's own
    pooling factor and cv 1.0, seeded by ``name_seed(table.name)`` (the same batches in every process)."""
    return LookupSpec(LookupKind.POWER_LAW, seed=name_seed(table.name), alpha=float(alpha),
                      vocab=default_vocab(table.rows, table.pooling_factor))


def _warn_default(table: Table, spec: LookupSpec) -> None:
    """One warning per table name per process, naming the table and what is assumed."""
    with _warned_lock:
        if table.name in _warned_default:
            return
        _warned_default.add(table.name)
    logger.warning("table %s has no lookup distribution; assuming the default: power law alpha %g over %d "
                   "of its %d rows, %g ids per sample (its pooling factor), seed %d from its name; to state "
                   "one, make the file with 'autoshard tables from-torchrec --alpha' or 'from-trace'",
                   table.name, spec.alpha, spec.vocab, table.rows, table.pooling_factor, spec.seed)


def sample_lookups(table: Table, batch_size: int, seed: int = 0, rows: int | None = None) -> Lookups:
    """A deterministic batch of lookups for ``table``.

    ``rows`` caps the index range (used when a table is too large to allocate for timing; indices are folded
    with ``mod rows``, which keeps the reuse pattern of the hot rows). ``seed`` picks the batch. A table
    without ``lookups`` gets ``default_lookup_spec`` (logged once per table name per process).
    """
    if batch_size <= 0:
        raise AutoshardError(f"batch size {batch_size} must be positive")
    spec = table.lookups
    n_rows = min(table.rows, rows) if rows else table.rows
    if spec is None:
        spec = default_lookup_spec(table)
        _warn_default(table, spec)
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
    if n_rows < table.rows:  # else every row id is already below n_rows
        rows = rows % n_rows
    return Lookups(rows, offsets)


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


SHARE_SAMPLE_IDS = 1 << 18
"""Lookups drawn (deterministically) to estimate the share of a table's lookups in a row range: the standard
error of a share p is sqrt(p (1 - p) / 2^18) < 0.1 percentage point, while a hot range's excess is tens of
percent."""


@functools.lru_cache(maxsize=512)
def _sorted_sample(table: Table) -> np.ndarray:
    per_sample = max(table.pooling_factor, 1e-3)
    samples = max(1, min(PUBLISHED_BATCH_SIZE, int(np.ceil(SHARE_SAMPLE_IDS / per_sample))))
    return np.sort(sample_lookups(table, samples, seed=0).indices)


@functools.lru_cache(maxsize=65536)
def row_range_share(table: Table, row_start: int, row_end: int | None) -> float:
    """Share of ``table``'s lookups that fall in rows [row_start, row_end) (None: to the last row), from its
    lookup distribution: what a row shard of that range serves. Skew makes it differ from the range's share
    of the rows (a frequency-ordered table's first rows take most lookups; a scattered one's ranges are even
    up to where its few hottest rows land). A table without a lookup distribution gets the row share (the
    uniform estimate, TorchRec's)."""
    end = table.rows if row_end is None else int(row_end)
    if row_start <= 0 and end >= table.rows:
        return 1.0
    if table.lookups is None:
        return (end - row_start) / table.rows
    ids = _sorted_sample(table)
    if len(ids) == 0:
        return (end - row_start) / table.rows
    inside = np.searchsorted(ids, end, side="left") - np.searchsorted(ids, row_start, side="left")
    return float(inside) / len(ids)


def lookup_balanced_bounds(table: Table, parts: int) -> list[int]:
    """Row boundaries [0, b1, ..., rows] cutting ``table`` into ``parts`` contiguous ranges that serve about
    equal shares of its lookups (by ``row_range_share``'s sample), each at least one row: uneven ranges that
    balance a skewed table's kernel work instead of its rows (TorchRec cuts even rows). A table without a
    lookup distribution, or with fewer rows than parts, gets even blocks."""
    parts = max(1, min(int(parts), table.rows))
    if table.lookups is None or parts == 1:
        return even_row_bounds(table.rows, parts)
    ids = _sorted_sample(table)
    if len(ids) == 0:
        return even_row_bounds(table.rows, parts)
    bounds = [0]
    for r in range(1, parts):
        cut = int(ids[min(len(ids) - 1, (r * len(ids)) // parts)])
        # strictly increasing, and room left for one row per remaining range
        bounds.append(min(max(cut, bounds[-1] + 1), table.rows - (parts - r)))
    return bounds + [table.rows]
