"""The ``Table`` value type, its learning features, and the table pool (a set of tables + feature normaliser).

Features follow DreamShard (NeurIPS 2022, Sec. 4.1): dimension, hash size (rows), pooling factor, table size
and the 17 access-frequency bins. Normalisation is fitted once on a table pool and stored with it, so the same
table gets the same features in every task (never re-fitted per task).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any

import numpy as np

from autoshard.errors import AutoshardError
from autoshard.io import ARTEFACT_VERSION, check_finite, check_object, read_json, write_json
from autoshard.tables.published import PUBLISHED_BATCH_SIZE

TABLES_KIND = "autoshard.tables"
"""The ``kind`` of a tables file (``TablePool.save``)."""

NUM_ACCESS_BINS = 17
"""Access-count bins (0,1], (1,2], (2,4], ..., (16384,32768], >32768 as in the dlrm_datasets locality
stats."""

ACCESS_BIN_EDGES: tuple[int, ...] = tuple(2**i for i in range(NUM_ACCESS_BINS - 1))
"""Upper edges of the first 16 bins: 1, 2, 4, ..., 32768; the 17th bin is everything above 32768."""

FEATURE_NAMES: tuple[str, ...] = (
    "dim", "log10_rows", "log10_1p_pooling", "log10_size_bytes",
    *(f"access_bin_{i}" for i in range(NUM_ACCESS_BINS)),
)
NUM_FEATURES = len(FEATURE_NAMES)

FEATURE_SIZE_ELEMENT_BYTES = 4
"""Table size in the feature vector is always counted at fp32, so features don't depend on a task's
precision."""


_DIM, _LOG_ROWS, _LOG_POOLING, _LOG_SIZE = (FEATURE_NAMES.index(n) for n in
                                            ("dim", "log10_rows", "log10_1p_pooling", "log10_size_bytes"))


def size_feature(log10_rows: np.ndarray, dims: np.ndarray) -> np.ndarray:
    """The table-size feature (log10 bytes at ``FEATURE_SIZE_ELEMENT_BYTES`` an element) of shards with these
    log10 rows and dims: the one place of its formula."""
    return log10_rows + np.log10(np.asarray(dims, dtype=np.float64) * FEATURE_SIZE_ELEMENT_BYTES)


def shard_raw_features(full: np.ndarray, dims: np.ndarray, row_fraction: np.ndarray,
                       lookup_share: np.ndarray | None = None) -> np.ndarray:
    """Raw features of shards, from their tables' full-size raw features ``full`` (N, NUM_FEATURES): the one
    formula for a shard's features. A column shard has its own dim and size; a row shard holding a fraction
    ``f`` of the rows has ``f`` x the rows and size; a shard serving a share ``s`` of its table's lookups
    (``lookup_share``, default ``f``: the uniform estimate for a row shard; 1 / D for a data-parallel
    replica) is looked up ``s`` x the pooling factor per sample. The access bins stay the table's."""
    x = np.array(full, dtype=np.float64, copy=True)
    d = np.asarray(dims, dtype=np.float64)
    f = np.asarray(row_fraction, dtype=np.float64)
    share = f if lookup_share is None else np.asarray(lookup_share, dtype=np.float64)
    x[:, _DIM] = d
    split = f < 1.0
    if split.any():
        x[split, _LOG_ROWS] += np.log10(f[split])
    fewer = share < 1.0
    if fewer.any():
        pooling = 10.0 ** x[fewer, _LOG_POOLING] - 1.0
        x[fewer, _LOG_POOLING] = np.log10(1.0 + pooling * share[fewer])
    x[:, _LOG_SIZE] = size_feature(x[:, _LOG_ROWS], d)
    return x


REUSE_STATS_BATCH = PUBLISHED_BATCH_SIZE
"""Batch the access bins are counted at (the dlrm_datasets traces', the synthetic generator's and the broad
design's ``stats_batch``): ``distinct_rows_per_batch`` rescales them to a device's batch."""

_BIN_REUSE = np.array([1.0, 2.0] + [2.0 ** (k - 0.5) for k in range(2, NUM_ACCESS_BINS - 1)]
                      + [2.0 ** (NUM_ACCESS_BINS - 2)], dtype=np.float64)
"""A representative access count per bin: 1, 2, then the geometric middle of (2^(k-1), 2^k], and the open
last bin's lower edge (32768: the fewest accesses it can mean, so the most rows; the rows cap bounds it)."""


def distinct_rows_per_batch(raw: np.ndarray, batch_size: np.ndarray | float) -> np.ndarray:
    """Expected distinct rows a batch of ``batch_size`` samples touches, per shard, from shard raw features
    (``shard_raw_features``): the one place of this formula.

    At the bins' batch ``REUSE_STATS_BATCH`` = B a table is looked up pooling x B times and its distinct
    rows are accessed ``_BIN_REUSE`` times in the bins' shares, so it touches U_B = pooling x B / (mean
    access count) rows. A row accessed c times in B is touched by a batch of b with probability about
    1 - exp(-c b / B) (Poisson); that ratio to its value at b = B scales U_B, and the result is capped by the
    shard's rows. Why a feature: the working set of a batch (these rows x dim x element bytes against the
    caches) decides the memory-bound part of forward and backward, and the networks learn it poorly from
    bins, pooling and batch alone (stop 19, ``docs/benchmarks.md``)."""
    x = np.atleast_2d(np.asarray(raw, dtype=np.float64))
    b = np.broadcast_to(np.asarray(batch_size, dtype=np.float64), (len(x),))
    bins = np.clip(x[:, len(FEATURE_NAMES) - NUM_ACCESS_BINS:len(FEATURE_NAMES)], 0.0, None)
    mass = bins.sum(axis=1)
    mean_reuse = np.where(mass > 0, (bins * _BIN_REUSE).sum(axis=1) / np.where(mass > 0, mass, 1.0), 1.0)
    pooling = np.maximum(10.0 ** x[:, _LOG_POOLING] - 1.0, 0.0)
    at_stats = pooling * REUSE_STATS_BATCH / mean_reuse
    bins = np.where(mass[:, None] > 0, bins, np.eye(1, NUM_ACCESS_BINS)[0])  # no bins: every row once
    touched = (bins * -np.expm1(-_BIN_REUSE * (b / REUSE_STATS_BATCH)[:, None])).sum(axis=1)
    at_stats_touched = (bins * -np.expm1(-_BIN_REUSE)).sum(axis=1)
    return np.minimum(at_stats * touched / at_stats_touched, 10.0 ** x[:, _LOG_ROWS])


class Precision(str, Enum):
    """Element precision of embedding weights."""

    FP32 = "fp32"
    FP16 = "fp16"

    @property
    def bytes(self) -> int:
        return 4 if self is Precision.FP32 else 2


class LookupKind(str, Enum):
    """Where a table's lookups come from when real kernels are timed."""

    POWER_LAW = "power_law"
    """Synthetic: indices drawn from a power law over a seeded permutation of rows (see
    ``tables.lookups``)."""
    TRACE = "trace"
    """Real: the table's index stream in a dlrm_datasets trace file."""


@dataclass(frozen=True)
class LookupSpec:
    """How to generate (or load) real lookups for a table, deterministically."""

    kind: LookupKind
    seed: int = 0
    alpha: float = 1.0
    """Power-law exponent over row ranks (POWER_LAW only); larger = more skewed reuse."""
    pooling_cv: float = 1.0
    """Coefficient of variation of bag sizes (POWER_LAW only)."""
    trace_path: str | None = None
    trace_table: int | None = None
    vocab: int | None = None
    """Number of distinct rows the power law is drawn over (POWER_LAW only): the table's active vocabulary,
    scattered over all rows; None = all rows."""
    sorted_ids: bool = False
    """POWER_LAW only: ids numbered by frequency (row 0 the hottest, as vocabularies built by count are),
    instead of the hot rows scattered over the table. Row shards of such a table are strongly unequal."""

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"kind": self.kind.value, "seed": self.seed}
        if self.kind is LookupKind.POWER_LAW:
            d.update(alpha=self.alpha, pooling_cv=self.pooling_cv)
            if self.vocab is not None:
                d.update(vocab=self.vocab)
            if self.sorted_ids:
                d.update(sorted_ids=True)
        else:
            d.update(trace_path=self.trace_path, trace_table=self.trace_table)
        return d

    @staticmethod
    def from_json(d: dict[str, Any]) -> LookupSpec:
        try:
            kind = LookupKind(d["kind"])
        except (KeyError, ValueError):
            raise AutoshardError(
                f"lookup spec kind {d.get('kind')!r} unknown; use one of {[k.value for k in LookupKind]}"
            ) from None
        return LookupSpec(
            kind=kind,
            seed=int(d.get("seed", 0)),
            alpha=check_finite(d.get("alpha", 1.0), "lookup alpha"),
            pooling_cv=check_finite(d.get("pooling_cv", 1.0), "lookup pooling_cv"),
            trace_path=d.get("trace_path"),
            trace_table=d.get("trace_table"),
            vocab=int(d["vocab"]) if d.get("vocab") is not None else None,
            sorted_ids=bool(d.get("sorted_ids", False)),
        )


@dataclass(frozen=True)
class Table:
    """One embedding table as the planner sees it."""

    name: str
    dim: int
    rows: int
    pooling_factor: float
    """Mean number of lookups per sample (bag size)."""
    access_bins: tuple[float, ...] = field(default=(1.0,) + (0.0,) * (NUM_ACCESS_BINS - 1))
    """Share of the table's unique indices accessed (0,1], (1,2], (2,4], ..., >32768 times in one batch."""
    lookups: LookupSpec | None = None

    def __post_init__(self) -> None:
        if not self.name:
            raise AutoshardError("a table has an empty name; give every table a unique name")
        if int(self.dim) <= 0 or int(self.rows) <= 0:
            raise AutoshardError(f"table {self.name}: dim={self.dim} rows={self.rows}; both must be positive")
        check_finite(self.pooling_factor, f"table {self.name} pooling_factor")
        if self.pooling_factor < 0:
            raise AutoshardError(f"table {self.name}: pooling_factor {self.pooling_factor} must be >= 0")
        if len(self.access_bins) != NUM_ACCESS_BINS:
            raise AutoshardError(
                f"table {self.name}: {len(self.access_bins)} access bins, expected {NUM_ACCESS_BINS}"
            )
        for b in self.access_bins:
            check_finite(b, f"table {self.name} access bin")

    def size_bytes(self, precision: Precision = Precision.FP32, dim: int | None = None) -> int:
        """Bytes of the weights (of ``dim`` columns if given, e.g. a column shard)."""
        return self.rows * (self.dim if dim is None else dim) * precision.bytes

    def memory_bytes(self, precision: Precision, optimizer_bytes_per_element: float, dim: int | None = None,
                     rows: int | None = None) -> int:
        """Bytes a device needs for this table (or a shard of ``dim`` columns and ``rows`` rows): weights +
        optimizer state."""
        d = self.dim if dim is None else dim
        r = self.rows if rows is None else rows
        return math.ceil(r * d * (precision.bytes + optimizer_bytes_per_element))

    def raw_features(self, dim: int | None = None) -> np.ndarray:
        """Un-normalised feature vector (length NUM_FEATURES); ``dim`` overrides the dim for a column
        shard."""
        full = np.array([[self.dim, math.log10(self.rows), math.log10(1.0 + self.pooling_factor),
                          math.log10(self.rows * self.dim * FEATURE_SIZE_ELEMENT_BYTES), *self.access_bins]],
                        dtype=np.float64)
        return shard_raw_features(full, np.array([self.dim if dim is None else dim]), np.ones(1))[0]

    def with_dim(self, dim: int) -> Table:
        return replace(self, dim=dim)

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "name": self.name,
            "dim": self.dim,
            "rows": self.rows,
            "pooling_factor": self.pooling_factor,
            "access_bins": list(self.access_bins),
        }
        if self.lookups is not None:
            d["lookups"] = self.lookups.to_json()
        return d

    @staticmethod
    def from_json(d: dict[str, Any]) -> Table:
        check_object(d, "a table entry", "each is an object with name, dim, rows, pooling_factor")
        try:
            return Table(
                name=str(d["name"]),
                dim=int(d["dim"]),
                rows=int(d["rows"]),
                pooling_factor=check_finite(d["pooling_factor"], f"table {d.get('name')} pooling_factor"),
                access_bins=tuple(float(x) for x in d.get("access_bins", Table.__dataclass_fields__[
                    "access_bins"].default)),
                lookups=LookupSpec.from_json(d["lookups"]) if d.get("lookups") else None,
            )
        except KeyError as e:
            raise AutoshardError(f"a table entry lacks the field {e}; "
                                 "each needs name, dim, rows, pooling_factor") from None
        except (TypeError, ValueError, AttributeError, OverflowError) as e:
            raise AutoshardError(f"table {d.get('name')!r}: bad value ({e})") from None


def check_unique_names(tables: Iterable[Table], where: str) -> None:
    """Raise AutoshardError naming the first table name that appears twice in ``tables``."""
    seen: set[str] = set()
    for t in tables:
        if t.name in seen:
            raise AutoshardError(f"{where}: table {t.name!r} appears more than once; "
                                 "table names must be unique")
        seen.add(t.name)


@dataclass(frozen=True)
class FeatureNormalizer:
    """Per-feature z-score fitted on a table pool; stored with the pool and with every model trained on it."""

    mean: tuple[float, ...]
    std: tuple[float, ...]

    @staticmethod
    def fit(tables: Iterable[Table]) -> FeatureNormalizer:
        x = np.stack([t.raw_features() for t in tables])
        std = x.std(axis=0)
        std[std < 1e-8] = 1.0  # a constant feature (e.g. one dim for all tables) stays 0 after centring
        return FeatureNormalizer(tuple(float(v) for v in x.mean(axis=0)), tuple(float(v) for v in std))

    def transform(self, raw: np.ndarray) -> np.ndarray:
        return (raw - np.asarray(self.mean)) / np.asarray(self.std)

    def features(self, table: Table, dim: int | None = None) -> np.ndarray:
        return self.transform(table.raw_features(dim))

    def to_json(self) -> dict[str, Any]:
        return {"feature_names": list(FEATURE_NAMES), "mean": list(self.mean), "std": list(self.std)}

    @staticmethod
    def from_json(d: dict[str, Any]) -> FeatureNormalizer:
        if not isinstance(d, dict) or list(d.get("feature_names", [])) != list(FEATURE_NAMES):
            raise AutoshardError("feature normaliser was made for other features; regenerate the table pool")
        try:
            mean, std = tuple(map(float, d["mean"])), tuple(map(float, d["std"]))
        except (KeyError, TypeError, ValueError):
            mean = std = ()
        if len(mean) != NUM_FEATURES or len(std) != NUM_FEATURES:
            raise AutoshardError(f"feature normaliser needs {NUM_FEATURES} numbers in 'mean' and in 'std'; "
                                 "drop 'normalizer' (it is refitted) or regenerate the table pool")
        return FeatureNormalizer(mean, std)


@dataclass(frozen=True)
class TablePool:
    """A set of tables with the feature normaliser fitted on them and the settings that made them."""

    tables: tuple[Table, ...]
    normalizer: FeatureNormalizer
    source: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.tables:
            raise AutoshardError("the table pool is empty; generate or load at least one table")
        check_unique_names(self.tables, "table pool")

    @staticmethod
    def from_tables(tables: Sequence[Table], source: dict[str, Any] | None = None) -> TablePool:
        return TablePool(tuple(tables), FeatureNormalizer.fit(tables), dict(source or {}))

    def by_name(self) -> dict[str, Table]:
        return {t.name: t for t in self.tables}

    def subset(self, names: Sequence[str]) -> TablePool:
        """The named tables, keeping this pool's normaliser (features stay comparable)."""
        lookup = self.by_name()
        missing = [n for n in names if n not in lookup]
        if missing:
            raise AutoshardError(f"tables {missing[:3]} are not in the pool")
        return TablePool(tuple(lookup[n] for n in names), self.normalizer, self.source)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": TABLES_KIND,
            "version": ARTEFACT_VERSION,
            "source": self.source,
            "normalizer": self.normalizer.to_json(),
            "tables": [t.to_json() for t in self.tables],
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> TablePool:
        if not isinstance(d.get("tables"), list):
            raise AutoshardError("tables file has no 'tables' list; regenerate it with 'autoshard tables'")
        if not d["tables"]:
            raise AutoshardError("tables file lists no tables; give at least one (or regenerate it with "
                                 "'autoshard tables')")
        tables = tuple(Table.from_json(t) for t in d["tables"])
        norm = (FeatureNormalizer.from_json(d["normalizer"]) if "normalizer" in d
                else FeatureNormalizer.fit(tables))
        source = check_object(d.get("source", {}), "tables file's 'source'",
                              "drop it or regenerate the file with 'autoshard tables'")
        return TablePool(tables, norm, dict(source))

    def save(self, path: str) -> None:
        write_json(path, self.to_json())

    @staticmethod
    def load(path: str) -> TablePool:
        try:
            d = read_json(path, kind=TABLES_KIND)
        except AutoshardError:
            hint = _not_a_pool_hint(path)
            if hint:
                raise AutoshardError(hint) from None
            raise
        try:
            return TablePool.from_json(d)
        except AutoshardError as e:  # a bad entry: say which file holds it
            raise AutoshardError(f"{path}: {e}") from None


def _not_a_pool_hint(path: str) -> str:
    """For a JSON list of table entries that is not a tables file (the first thing a user tries: their
    TorchRec configs, or tables written by hand), the one line that says how to make one; else ''."""
    try:
        d = read_json(path)
    except AutoshardError:
        return ""
    entries = d.get("tables") if isinstance(d, dict) and "kind" not in d else d
    if not isinstance(entries, list) or not entries or not all(isinstance(e, dict) for e in entries):
        return ""
    if any("num_embeddings" in e or "embedding_dim" in e for e in entries):
        return (f"{path} holds TorchRec table configs, not a tables file; convert it with 'autoshard tables "
                f"from-torchrec {path} -o tables.json' and pass tables.json")
    if all("dim" in e and "rows" in e for e in entries):
        return (f"{path} is a bare list of tables; write it as {{\"kind\": \"{TABLES_KIND}\", \"version\": "
                f"{ARTEFACT_VERSION}, \"tables\": [...]}} (each with name, dim, rows, pooling_factor), or as "
                "TorchRec configs (name, num_embeddings, embedding_dim) for 'autoshard tables from-torchrec'")
    return ""
