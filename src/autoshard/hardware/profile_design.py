"""What sample ``i`` of a profile is: two designs, either a deterministic function of ``(seed, i)``.

- ``pool`` (``sample_shards``): 1..K tables drawn from the pool, and with probability ``column_share`` a table
  is cut to a column shard (a random multiple of 4 columns, below its dim), so the cost model sees column
  shards.
- ``broad`` (``broad_sample``, ``BroadDesign``): the tables are GENERATED per sample to span what users run:
  dims 4-256 (multiples of 4, log-uniform; column shards of them with probability ``column_share``), rows
  1e2-1e8 (log-uniform), pooling 0-200 (uniform in log(1 + pooling)) with a bag-size CV, an access skew
  (power-law alpha) and an active vocabulary, 1-40 tables a device, per-device batch 512-65536 (log-uniform),
  fp32 and fp16. Samples are STRATIFIED by tables per device (``BroadDesign.strata``; sample ``i`` is in
  stratum ``i % S``, so any S consecutive samples cover every stratum) and, within a stratum, space-filling:
  a scrambled Sobol sequence (``scipy.stats.qmc``, seeded by ``(seed, stratum)``) over the device's
  composition (tables, batch, precision) and another over table features, the k-th sample of a stratum taking
  the next ``tables`` points of it, so the tables of one device are spread over the feature space too. The
  composition takes Sobol dimensions the table features do not (``BroadDesign.sobol_axes``), so a one-table
  sample is one point of an 11-dimensional sequence, not two coupled ones.
  With ``row_share`` > 0 (stop 30) a table is also cut, with that probability, to one of 2-64 row ranges
  (even rows or equal lookup shares), so the cost model sees row shards as planners and TorchRec make them.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from autoshard.errors import AutoshardError
from autoshard.hardware.profile_records import sample_id
from autoshard.plan import COLUMN_SHARD_MULTIPLE
from autoshard.tables.table import LookupKind, LookupSpec, Precision, Table, TablePool

DEFAULT_MAX_TABLES = 8
"""Most tables per sample; DreamShard's tasks put ~10-20 tables on a device, 8 keeps a sample at ~0.1-1 s."""

DEFAULT_COLUMN_SHARE = 0.2
"""Share of a sample's tables cut to a column shard, so column-wise placements are in the data."""

STRATUM_STARTS = (1, 2, 4, 7, 11, 17, 25, 33, 41)
"""First tables-per-device count of each stratum of the broad design: 1, 2-3, 4-6, 7-10, 11-16, 17-24,
25-32, 33-40, then one stratum every 8 tables. Finer where few tables are (each table changes the device's
cost more) and where learned planners have failed (many tables a device)."""

DEVICE_AXES = ("tables", "batch", "precision")
"""Sobol axes of a broad sample's composition (one point per sample)."""
TABLE_AXES = ("dim", "rows", "pooling", "pooling_cv", "alpha", "vocab", "column_cut", "column_dim")
"""Sobol axes of a broad sample's tables (one point per table)."""
SOBOL_AXES = ("joint", "aligned")
"""How a broad sample's composition takes its Sobol dimensions (``BroadDesign.sobol_axes``)."""


def tables_strata(lo: int, hi: int) -> tuple[tuple[int, int], ...]:
    """The strata (first, last tables per device) of ``STRATUM_STARTS`` that meet ``lo..hi``, cut to it."""
    starts = list(STRATUM_STARTS)
    while starts[-1] <= hi:
        starts.append(starts[-1] + 8)
    out = []
    for a, b in itertools.pairwise(starts):
        first, last = max(a, lo), min(b - 1, hi)
        if first <= last:
            out.append((first, last))
    return tuple(out)


def _range(value: Any, what: str) -> tuple[float, float]:
    try:
        lo, hi = (float(x) for x in value)
    except (TypeError, ValueError):
        raise AutoshardError(f"broad design {what} {value!r} must be a (low, high) pair") from None
    if not (np.isfinite(lo) and np.isfinite(hi) and lo <= hi):
        raise AutoshardError(f"broad design {what} ({lo:g}, {hi:g}) needs finite low <= high")
    return lo, hi


@dataclass(frozen=True)
class BroadDesign:
    """The ``broad`` profiling design: ranges spanning what users run (see the module docstring).

    Every range is inclusive (low, high); a range with low == high fixes the quantity."""

    dims: tuple[int, int] = (4, 256)
    """Table dims, multiples of 4, log-uniform."""
    rows: tuple[int, int] = (100, 10**8)
    """Table rows (the real ones; timing keeps min(rows, rows_cap)), log-uniform."""
    pooling: tuple[float, float] = (0.0, 200.0)
    """Mean bag size, uniform in log(1 + pooling)."""
    pooling_cv: tuple[float, float] = (0.0, 2.0)
    """Coefficient of variation of the bag sizes (gamma-Poisson), uniform."""
    alpha: tuple[float, float] = (0.0, 2.0)
    """Access skew: power-law exponent over the active vocabulary's rows (0: uniform), uniform."""
    vocab_log_fraction: tuple[float, float] = (-3.0, 0.0)
    """log10 of the active vocabulary's share of the rows (0: every row), uniform."""
    tables_per_device: tuple[int, int] = (1, 40)
    """Tables a sample (device) holds; stratified (``strata``), uniform within a stratum."""
    batch_sizes: tuple[int, int] = (512, 65536)
    """Per-device kernel batch, log-uniform."""
    precisions: tuple[str, ...] = ("fp32", "fp16")
    """Weight precisions, equally often."""
    column_share: float = DEFAULT_COLUMN_SHARE
    """Probability that a table is cut to a column shard (a multiple of 4 columns below its dim)."""
    stats_batch: int = 65536
    """Batch of the one lookup batch the access bins are counted on: that of the synthetic pools users plan
    with (``tables.synth.STATS_BATCH_SIZE``), so bins mean the same in training and in planning."""
    row_share: float = 0.0
    """Probability that a table is cut to a row shard: one of ``parts`` contiguous row ranges (``parts``
    log-uniform in ``row_parts``), cut into even rows (TorchRec's row-wise) or equal lookup shares (the
    planners' ``lookup_balanced_bounds``) equally often. 0, every profile before stop 30, keeps whole tables
    and the same samples: the cut draws from its own generator, not the Sobol points."""
    row_parts: tuple[int, int] = (2, 64)
    """Row ranges a cut table is split into (the devices a row-wise table spans), log-uniform."""
    dim_choices: tuple[int, ...] = ()
    """When set, a table's dim is one of these, each equally often (from the same Sobol coordinate), and
    ``dims`` is their (smallest, largest); empty (every profile before stop 41): log-uniform over ``dims``.
    Why: users' tables come in a few dims (32, 64, 128, 256), so their devices hold many tables of few
    dims, while 57 log-uniform values give a sample nearly one dim a table; the torch backend runs one
    kernel group per distinct dim, which a GPU model must learn (docs/benchmarks.md, "Stop 41")."""

    sobol_axes: str = "joint"
    """"joint" (since stop 95): the composition (``DEVICE_AXES``) takes the Sobol dimensions after the table
    axes' (``TABLE_AXES``), so a one-table sample's composition and table are one point of an
    11-dimensional scrambled Sobol sequence. "aligned" (every profile before stop 95, read so from a manifest
    without the key): the composition takes the first three dimensions of its own sequence. Why it changed:
    the k-th one-table sample took the k-th point of both sequences, whose same dimensions differ only by
    their scrambling, so its precision was a function of its table's pooling and its batch of its rows: every
    committed profile's one-table records lie in 2 of the 4 cells of (precision, pooling above or below the
    range's middle) and of (batch, rows) (docs/benchmarks.md, "Stop 95"; broad-seed0's 188 fp32 ones all
    pooled below 13.2, the middle of 0-200 in log(1 + pooling), where DLRM-100 (8)'s mispriced table is fp32
    and pooled 92)."""

    def __post_init__(self) -> None:
        if self.sobol_axes not in SOBOL_AXES:
            raise AutoshardError(f"broad design sobol axes {self.sobol_axes!r} unknown; use one of "
                                 f"{', '.join(SOBOL_AXES)}")
        choices = tuple(sorted(int(x) for x in self.dim_choices))
        if choices:
            if len(set(choices)) != len(choices):
                raise AutoshardError(f"broad design dim choices {choices} must be distinct")
            object.__setattr__(self, "dims", (choices[0], choices[-1]))
        object.__setattr__(self, "dim_choices", choices)
        dims = tuple(int(x) for x in _range(self.dims, "dims"))
        if dims[0] < COLUMN_SHARD_MULTIPLE or any(d % COLUMN_SHARD_MULTIPLE for d in dims + choices):
            raise AutoshardError(f"broad design dims {choices or dims} must be multiples of "
                                 f"{COLUMN_SHARD_MULTIPLE}")
        rows = tuple(int(x) for x in _range(self.rows, "rows"))
        tables = tuple(int(x) for x in _range(self.tables_per_device, "tables per device"))
        batch = tuple(int(x) for x in _range(self.batch_sizes, "batch sizes"))
        if rows[0] < 1 or tables[0] < 1 or batch[0] < 1:
            raise AutoshardError("broad design rows, tables per device and batch sizes must be >= 1")
        pooling, cv = _range(self.pooling, "pooling"), _range(self.pooling_cv, "pooling CV")
        alpha, vocab = _range(self.alpha, "alpha"), _range(self.vocab_log_fraction, "vocab log fraction")
        if pooling[0] < 0 or cv[0] < 0 or alpha[0] < 0 or vocab[1] > 0:
            raise AutoshardError("broad design pooling, pooling CV and alpha must be >= 0, "
                                 "the vocab log fraction <= 0")
        precisions = tuple(str(p) for p in self.precisions)
        if not precisions or len(set(precisions)) != len(precisions):
            raise AutoshardError("broad design precisions must be one or more distinct of fp32, fp16")
        for prec in precisions:
            _precision(prec)
        if not 0.0 <= self.column_share <= 1.0:
            raise AutoshardError(f"column share {self.column_share} must be within 0..1")
        if not 0.0 <= self.row_share <= 1.0:
            raise AutoshardError(f"row share {self.row_share} must be within 0..1")
        parts = tuple(int(x) for x in _range(self.row_parts, "row parts"))
        if parts[0] < 2:
            raise AutoshardError(f"broad design row parts {parts} must be >= 2 (a row shard of 1 part is the "
                                 "whole table)")
        object.__setattr__(self, "row_share", float(self.row_share))
        object.__setattr__(self, "row_parts", parts)
        if int(self.stats_batch) <= 0:
            raise AutoshardError(f"broad design stats batch {self.stats_batch} must be positive")
        for name, value in (("dims", dims), ("rows", rows), ("pooling", pooling), ("pooling_cv", cv),
                            ("alpha", alpha), ("vocab_log_fraction", vocab), ("tables_per_device", tables),
                            ("batch_sizes", batch), ("precisions", precisions)):
            object.__setattr__(self, name, value)
        object.__setattr__(self, "column_share", float(self.column_share))
        object.__setattr__(self, "stats_batch", int(self.stats_batch))

    @property
    def strata(self) -> tuple[tuple[int, int], ...]:
        """(first, last) tables per device of each stratum; sample ``i`` is in stratum ``i % len``."""
        return tables_strata(*self.tables_per_device)

    def to_json(self) -> dict[str, Any]:
        return {"name": "broad", "dims": list(self.dims), "rows": list(self.rows),
                "pooling": list(self.pooling), "pooling_cv": list(self.pooling_cv), "alpha": list(self.alpha),
                "vocab_log_fraction": list(self.vocab_log_fraction),
                "tables_per_device": list(self.tables_per_device), "batch_sizes": list(self.batch_sizes),
                "precisions": list(self.precisions), "column_share": self.column_share,
                "stats_batch": self.stats_batch,
                # only where used: the manifests of profiles made before row cuts stay as they were
                **({"row_share": self.row_share, "row_parts": list(self.row_parts)}
                   if self.row_share else {}),
                **({"dim_choices": list(self.dim_choices)} if self.dim_choices else {}),
                **({"sobol_axes": self.sobol_axes} if self.sobol_axes != "aligned" else {})}

    @staticmethod
    def from_json(d: dict[str, Any]) -> BroadDesign:
        known = set(BroadDesign.__dataclass_fields__)
        # a manifest without the key was written before stop 95: its samples are the aligned axes' ones
        d = {"sobol_axes": "aligned", **d}
        try:
            return BroadDesign(**{k: tuple(v) if isinstance(v, list) else v
                                  for k, v in d.items() if k in known})
        except TypeError as e:
            raise AutoshardError(f"broad design not understood ({e})") from None


def _precision(text: str) -> Precision:
    try:
        return Precision(text)
    except ValueError:
        raise AutoshardError(f"precision {text!r} unknown; use fp32 or fp16") from None


@dataclass(frozen=True)
class BroadSample:
    """One sample of the broad design: a device's tables (generated), its shard dims, batch and precision."""

    tables: tuple[Table, ...]
    dims: tuple[int, ...]
    """Columns of each table on the device (below the table's dim for a column shard)."""
    batch_size: int
    precision: Precision
    stratum: int
    row_ranges: tuple[tuple[int, int | None], ...] = ()
    """Each table's row range [start, end) (end None: to its last row) where a table was cut to a row shard
    (``BroadDesign.row_share``); empty: whole tables."""


class _SobolStream:
    """The points of one scrambled Sobol sequence, generated on demand in powers of two (a prefix of the
    sequence does not depend on how many points were asked for, so a sample never changes as the profile
    grows)."""

    def __init__(self, dim: int, seed: Sequence[int]) -> None:
        self.dim, self.seed = dim, list(seed)
        self.points = np.zeros((0, dim))

    def take(self, start: int, count: int) -> np.ndarray:
        need = start + count
        if need > len(self.points):
            from scipy.stats import qmc

            m = max(1, int(np.ceil(np.log2(max(need, 2)))))
            sobol = qmc.Sobol(self.dim, scramble=True, seed=np.random.default_rng(self.seed))
            self.points = sobol.random_base2(m)
        return self.points[start:need]


class _BroadSampler:
    """Per stratum: the Sobol stream of compositions, that of tables, and the tables used by earlier samples
    (the k-th sample of a stratum takes the table points after those of samples 0..k-1)."""

    def __init__(self, design: BroadDesign, seed: int) -> None:
        self.design, self.seed = design, seed
        n = len(design.strata)
        # "joint": the composition's coordinates are the dimensions after the table axes' (see sobol_axes)
        self.skip = len(TABLE_AXES) if design.sobol_axes == "joint" else 0
        self.devices = [_SobolStream(self.skip + len(DEVICE_AXES), [seed, s, 1]) for s in range(n)]
        self.tables = [_SobolStream(len(TABLE_AXES), [seed, s, 2]) for s in range(n)]
        self.offsets: list[list[int]] = [[0] for _ in range(n)]

    def composition(self, stratum: int, k: int) -> tuple[int, int, Precision, int]:
        """(tables, batch, precision, first table point) of the k-th sample of ``stratum``."""
        offsets = self.offsets[stratum]
        while len(offsets) <= k:
            j = len(offsets) - 1
            offsets.append(offsets[-1] + self._point(stratum, j)[0])
        return (*self._point(stratum, k), offsets[k])

    def _point(self, stratum: int, k: int) -> tuple[int, int, Precision]:
        d = self.design
        u = self.devices[stratum].take(k, 1)[0][self.skip:]
        lo, hi = d.strata[stratum]
        n = min(hi, lo + int(u[0] * (hi - lo + 1)))
        b0, b1 = d.batch_sizes
        batch = round(float(np.exp(np.log(b0) + u[1] * (np.log(b1) - np.log(b0)))))
        prec = d.precisions[min(len(d.precisions) - 1, int(u[2] * len(d.precisions)))]
        return n, min(max(batch, b0), b1), Precision(prec)


_SAMPLERS: dict[tuple[BroadDesign, int], _BroadSampler] = {}


def _sampler(design: BroadDesign, seed: int) -> _BroadSampler:
    key = (design, seed)
    if key not in _SAMPLERS:
        if len(_SAMPLERS) > 8:
            _SAMPLERS.clear()
        _SAMPLERS[key] = _BroadSampler(design, seed)
    return _SAMPLERS[key]


def _log_uniform(u: np.ndarray, lo: float, hi: float) -> np.ndarray:
    return np.exp(np.log(lo) + u * (np.log(hi) - np.log(lo)))


def broad_sample(design: BroadDesign, seed: int, index: int, bins: bool = True) -> BroadSample:
    """Sample ``index`` of the broad design: a deterministic function of (design, seed, index).

    ``bins``: count the tables' access bins on one generated batch of ``design.stats_batch`` (what a
    profile records); False leaves them at the default (to inspect the design quickly)."""
    from autoshard.tables.lookups import access_bins, sample_lookups

    if index < 0:
        raise AutoshardError(f"sample index {index} must be >= 0")
    d = design
    sampler = _sampler(design, seed)
    stratum, k = index % len(d.strata), index // len(d.strata)
    n, batch, precision, first = sampler.composition(stratum, k)
    u = sampler.tables[stratum].take(first, n)
    m = COLUMN_SHARD_MULTIPLE
    if d.dim_choices:
        choice = np.minimum((u[:, 0] * len(d.dim_choices)).astype(np.int64), len(d.dim_choices) - 1)
        dims = np.asarray(d.dim_choices, dtype=np.int64)[choice]
    else:
        dims = np.clip(m * np.rint(_log_uniform(u[:, 0], *d.dims) / m), *d.dims).astype(np.int64)
    rows = np.clip(np.rint(_log_uniform(u[:, 1], *d.rows)), *d.rows).astype(np.int64)
    lp0, lp1 = np.log1p(d.pooling[0]), np.log1p(d.pooling[1])
    pooling = np.clip(np.expm1(lp0 + u[:, 2] * (lp1 - lp0)), *d.pooling)
    cv = d.pooling_cv[0] + u[:, 3] * (d.pooling_cv[1] - d.pooling_cv[0])
    alpha = d.alpha[0] + u[:, 4] * (d.alpha[1] - d.alpha[0])
    vocab_frac = 10.0 ** (d.vocab_log_fraction[0] + u[:, 5] * (d.vocab_log_fraction[1]
                                                                 - d.vocab_log_fraction[0]))
    tables, shard_dims = [], []
    for j in range(n):
        vocab = None if vocab_frac[j] >= 1.0 else max(1, round(float(rows[j] * vocab_frac[j])))
        lookup_seed = int(np.random.default_rng([seed, index, j]).integers(2**31))
        spec = LookupSpec(LookupKind.POWER_LAW, seed=lookup_seed,
                          alpha=round(float(alpha[j]), 6), pooling_cv=round(float(cv[j]), 6), vocab=vocab)
        t = Table(f"{sample_id(seed, index)}/t{j}", int(dims[j]), int(rows[j]), round(float(pooling[j]), 6),
                  lookups=spec)
        if bins:
            from dataclasses import replace

            t = replace(t, access_bins=access_bins(sample_lookups(t, d.stats_batch).indices))
        dim = t.dim
        if u[j, 6] < d.column_share and t.dim > m:
            dim = m * (1 + min((t.dim - 1) // m - 1, int(u[j, 7] * ((t.dim - 1) // m))))
        tables.append(t)
        shard_dims.append(int(dim))
    ranges: tuple[tuple[int, int | None], ...] = ()
    if d.row_share > 0.0:
        ranges = tuple(_row_cut(d, t, np.random.default_rng([seed, index, j, 1]))
                       for j, t in enumerate(tables))
        if all(r == (0, None) for r in ranges):
            ranges = ()
    return BroadSample(tuple(tables), tuple(shard_dims), batch, precision, stratum, ranges)


def _row_cut(design: BroadDesign, table: Table, rng: np.random.Generator) -> tuple[int, int | None]:
    """The row range of ``table`` in its sample (``design.row_share`` > 0): (0, None) (whole) unless cut."""
    from autoshard.shards import even_row_bounds
    from autoshard.tables.lookups import lookup_balanced_bounds

    if table.rows < 2 or rng.random() >= design.row_share:
        return 0, None
    u_parts, u_even, u_part = rng.random(3)
    parts = int(np.clip(np.rint(_log_uniform(u_parts, *design.row_parts)), *design.row_parts))
    bounds = (even_row_bounds(table.rows, parts) if u_even < 0.5
              else lookup_balanced_bounds(table, parts))
    k = min(len(bounds) - 2, int(u_part * (len(bounds) - 1)))
    start, end = int(bounds[k]), int(bounds[k + 1])
    return start, (None if end >= table.rows else end)


def sample_shards(pool: TablePool, seed: int, index: int, max_tables: int,
                  column_share: float = DEFAULT_COLUMN_SHARE) -> list[tuple[str, int]]:
    """Sample ``index``'s (table name, dim) list: a deterministic function of (seed, index) and the pool."""
    rng = np.random.default_rng([seed, index])
    n = len(pool.tables)
    k = int(rng.integers(1, min(max_tables, n) + 1))
    picks = rng.choice(n, size=k, replace=False)
    out = []
    for j in picks:
        t = pool.tables[int(j)]
        cut = rng.random() < column_share
        dim = t.dim
        if cut and t.dim > COLUMN_SHARD_MULTIPLE:
            # a multiple of 4 strictly below the dim: 4, 8, ..., the largest multiple of 4 below dim
            choices = (t.dim - 1) // COLUMN_SHARD_MULTIPLE
            dim = COLUMN_SHARD_MULTIPLE * int(rng.integers(1, choices + 1))
        out.append((t.name, dim))
    return out
