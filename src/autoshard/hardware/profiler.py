"""The profiling dataset: real costs of random shards, appended one record a line, resumable,
split over ranks.

Directory layout (``-o costs/``):

- ``tables.json``: the table pool profiled (``autoshard.tables``), records name its tables (the ``pool``
  design; the ``broad`` design has none: every record carries its own tables, ``CostRecord.table_specs``);
- ``profile.json``: the settings every record was measured with; a re-run with other settings is refused;
- ``shards-rank<R>.jsonl``: one :class:`CostRecord` per line, appended with flush + fsync by rank R;
- ``comm.jsonl`` and ``comm_model.json``: written by ``autoshard profile-comm`` (see ``hardware.comm``).

Two designs say what sample ``i`` is; either is a deterministic function of ``(seed, i)``:

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
  the next ``tables`` points of it, so the tables of one device are spread over the feature space too.

Rows rule (``hardware.kernel``): timing keeps ``min(rows, rows_cap)`` rows of each table (fewer when a shard
would exceed ``max_shard_bytes``), and the lookups of the REAL table are folded into the kept rows with
``index mod kept``. The lookup count, bag sizes and the reuse of the hot rows are the real table's; what is
approximated is the cache and TLB behaviour of a table larger than the cap: its cold tail shares the kept
rows, so a 1e8-row table times like a ``rows_cap``-row table with the same hot set (slightly more
cache-friendly). With the default cap (1e6 rows), every kept table of dim >= 16 is >= 64 MB in fp32, beyond
the CPU's last-level cache and a GPU's L2, so the error is in the cold tail's page/TLB misses only. Every
record stores both: ``rows`` (kept for timing) and ``real_rows`` (the table's); the cost model's features use
the real rows.

Rank R of W takes the samples with ``i % W == R``. A re-run reads every ``shards-*.jsonl`` in the directory
and measures only the samples not there yet, so Ctrl-C or a crash loses at most the sample being measured,
and none is measured twice.
"""

from __future__ import annotations

import itertools
import logging
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from autoshard.costs.comm import AlphaBeta
from autoshard.errors import AutoshardError
from autoshard.hardware.comm import COMM_MODEL_FILE
from autoshard.hardware.jsonl import append_jsonl, read_jsonl, repair_tail
from autoshard.hardware.kernel import MeasureSettings, measure_shard
from autoshard.io import ARTEFACT_VERSION, read_json, write_json
from autoshard.plan import COLUMN_SHARD_MULTIPLE
from autoshard.shards import ShardRef
from autoshard.tables.table import FeatureNormalizer, LookupKind, LookupSpec, Precision, Table, TablePool
from autoshard.tasks import DEFAULT_BATCH_SIZE, Task

log = logging.getLogger(__name__)

TABLES_FILE = "tables.json"
MANIFEST_FILE = "profile.json"
SHARDS_GLOB = "shards-*.jsonl"

DEFAULT_MAX_TABLES = 8
"""Most tables per sample; DreamShard's tasks put ~10-20 tables on a device, 8 keeps a sample at ~0.1-1 s."""

DEFAULT_COLUMN_SHARE = 0.2
"""Share of a sample's tables cut to a column shard, so column-wise placements are in the data."""

UNBOUNDED_MEMORY = 2**62
"""Device memory of the one-device task a sample is timed in: profiling measures, it does not plan."""


@dataclass(frozen=True)
class CostRecord:
    """One measured shard: a set of tables (at ``dims``) fused on one device, and what it cost."""

    sample_id: str
    """'<seed>-<index>': which sample of the profile this is (unique in a dataset)."""
    tables: tuple[str, ...]
    """Names of the tables in the pool (tables.json)."""
    dims: tuple[int, ...]
    """Columns of each table on the device (below the table's dim for a column shard)."""
    batch_size: int
    fwd_ms: float
    bwd_ms: float
    fwd_cv: float
    bwd_cv: float
    settings: dict[str, Any]
    """MeasureSettings as JSON plus 'precision': the same MeasureSettings for every record of a dataset; the
    precision too in the ``pool`` design, the sample's own in the ``broad`` one."""
    host: dict[str, Any]
    """Where it was measured (hostname, CPU/GPU, versions, rank)."""
    rows: tuple[int, ...] = ()
    """Rows each table KEPT for timing (the rows rule of hardware.kernel: min(rows, cap))."""
    tries: int = 1
    """Measurement tries (more than 1 when a try was noisier than settings.max_cv)."""
    real_rows: tuple[int, ...] = ()
    """Rows each table really has (what the cost model is given); empty in records made before it was
    recorded (the pool's tables say it)."""
    table_specs: tuple[dict[str, Any], ...] = ()
    """The sample's own tables (``Table.to_json``), in the order of ``tables``: the ``broad`` design
    generates them per sample; empty when the tables are the dataset's tables.json."""

    def to_json(self) -> dict[str, Any]:
        d = {"sample_id": self.sample_id, "tables": list(self.tables), "dims": list(self.dims),
             "batch_size": self.batch_size, "fwd_ms": self.fwd_ms, "bwd_ms": self.bwd_ms,
             "fwd_cv": self.fwd_cv, "bwd_cv": self.bwd_cv, "settings": self.settings, "host": self.host,
             "rows": list(self.rows), "tries": self.tries}
        if self.real_rows:
            d["real_rows"] = list(self.real_rows)
        if self.table_specs:
            d["table_specs"] = [dict(t) for t in self.table_specs]
        return d

    @staticmethod
    def from_json(d: dict[str, Any]) -> CostRecord:
        try:
            rec = CostRecord(str(d["sample_id"]), tuple(map(str, d["tables"])),
                             tuple(int(x) for x in d["dims"]), int(d["batch_size"]), float(d["fwd_ms"]),
                             float(d["bwd_ms"]), float(d["fwd_cv"]), float(d["bwd_cv"]),
                             dict(d["settings"]), dict(d["host"]),
                             tuple(int(x) for x in d.get("rows", ())), int(d.get("tries", 1)),
                             tuple(int(x) for x in d.get("real_rows", ())),
                             tuple(dict(t) for t in d.get("table_specs", ())))
        except (KeyError, TypeError, ValueError) as e:
            raise AutoshardError(f"cost record {d.get('sample_id')!r} lacks or has a bad field ({e})") \
                from None
        if len(rec.tables) != len(rec.dims) or not rec.tables:
            raise AutoshardError(f"cost record {rec.sample_id}: "
                                 "tables and dims must be non-empty, same length")
        if rec.table_specs and [str(t.get("name")) for t in rec.table_specs] != list(rec.tables):
            raise AutoshardError(f"cost record {rec.sample_id}: its table_specs do not name its tables")
        return rec

    def own_tables(self) -> tuple[Table, ...]:
        """The record's own tables (``table_specs``; empty when they are the dataset's tables.json)."""
        return tuple(Table.from_json(t) for t in self.table_specs)


@dataclass(frozen=True)
class CostDataset:
    """Everything a profile directory holds."""

    pool: TablePool
    records: list[CostRecord]
    comm: AlphaBeta | None
    settings: dict[str, Any] = field(default_factory=dict)
    """The profile manifest (profile.json), empty when the directory has none."""

    def task_of(self, record: CostRecord) -> tuple[Task, list[ShardRef]]:
        """The one-device task and shards a record was measured as (to re-measure or featurise it)."""
        return _sample_task(self.pool, record.tables, record.dims, record.batch_size,
                            Precision(record.settings.get("precision", "fp32")))

    @property
    def design(self) -> str:
        """'broad' (tables generated per sample) or 'pool' (tables of tables.json)."""
        return "broad" if isinstance(self.settings.get("design"), dict) else "pool"


STRATUM_STARTS = (1, 2, 4, 7, 11, 17, 25, 33, 41)
"""First tables-per-device count of each stratum of the broad design: 1, 2-3, 4-6, 7-10, 11-16, 17-24,
25-32, 33-40, then one stratum every 8 tables. Finer where few tables are (each table changes the device's
cost more) and where learned planners have failed (many tables a device)."""

DEVICE_AXES = ("tables", "batch", "precision")
"""Sobol axes of a broad sample's composition (one point per sample)."""
TABLE_AXES = ("dim", "rows", "pooling", "pooling_cv", "alpha", "vocab", "column_cut", "column_dim")
"""Sobol axes of a broad sample's tables (one point per table)."""


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

    def __post_init__(self) -> None:
        dims = tuple(int(x) for x in _range(self.dims, "dims"))
        if dims[0] < COLUMN_SHARD_MULTIPLE or any(d % COLUMN_SHARD_MULTIPLE for d in dims):
            raise AutoshardError(f"broad design dims {dims} must be multiples of {COLUMN_SHARD_MULTIPLE}")
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
                "stats_batch": self.stats_batch}

    @staticmethod
    def from_json(d: dict[str, Any]) -> BroadDesign:
        known = set(BroadDesign.__dataclass_fields__)
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
        self.devices = [_SobolStream(len(DEVICE_AXES), [seed, s, 1]) for s in range(n)]
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
        u = self.devices[stratum].take(k, 1)[0]
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
    return BroadSample(tuple(tables), tuple(shard_dims), batch, precision, stratum)


@dataclass(frozen=True)
class ProfileConfig:
    """What ``autoshard profile`` measures."""

    samples: int
    """Total samples of the profile (over all ranks); raise it and re-run to add more."""
    max_tables: int = DEFAULT_MAX_TABLES
    """A sample has 1..max_tables tables (uniform)."""
    batch_size: int = DEFAULT_BATCH_SIZE
    seed: int = 0
    precision: Precision = Precision.FP32
    column_share: float = DEFAULT_COLUMN_SHARE
    """Probability that a table of a sample is cut to a column shard."""
    settings: MeasureSettings = field(default_factory=MeasureSettings)
    design: BroadDesign | None = None
    """The broad design (tables generated per sample; max_tables, batch_size, precision and column_share
    are then the design's), or None: samples of the tables file (the pool design)."""

    def __post_init__(self) -> None:
        if self.samples <= 0 or self.max_tables <= 0 or self.batch_size <= 0:
            raise AutoshardError("--samples, --max-tables and --batch-size must be positive integers")
        if not 0.0 <= self.column_share <= 1.0:
            raise AutoshardError(f"column share {self.column_share} must be within 0..1")

    def manifest(self) -> dict[str, Any]:
        """What every record in a directory must share (samples may grow between runs)."""
        if self.design is not None:
            return {"kind": "autoshard.profile", "version": ARTEFACT_VERSION, "seed": self.seed,
                    "design": self.design.to_json(), "settings": self.settings.to_json()}
        return {"kind": "autoshard.profile", "version": ARTEFACT_VERSION, "seed": self.seed,
                "max_tables": self.max_tables, "batch_size": self.batch_size,
                "precision": self.precision.value, "column_share": self.column_share,
                "settings": self.settings.to_json()}

    def record_settings(self, precision: Precision | None = None) -> dict[str, Any]:
        return {**self.settings.to_json(), "precision": (precision or self.precision).value}


def sample_id(seed: int, index: int) -> str:
    return f"{seed}-{index}"


def _sample_index(sid: str) -> tuple[int, int]:
    m = re.fullmatch(r"(-?\d+)-(\d+)", sid)
    return (int(m.group(1)), int(m.group(2))) if m else (0, -1)


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


def _sample_task(pool: TablePool, names: Sequence[str], dims: Sequence[int], batch_size: int,
                 precision: Precision) -> tuple[Task, list[ShardRef]]:
    lookup = pool.by_name()
    missing = [n for n in names if n not in lookup]
    if missing:
        raise AutoshardError(f"tables {missing[:3]} are not in the profiled pool; "
                             "the dataset is inconsistent")
    task = Task(tuple(lookup[n] for n in names), (UNBOUNDED_MEMORY,), precision=precision,
                batch_size=batch_size, name="profile-sample")
    return task, [ShardRef(i, int(d)) for i, d in enumerate(dims)]


def shard_file(out_dir: str | Path, rank: int) -> Path:
    return Path(out_dir) / f"shards-rank{rank}.jsonl"


def done_sample_ids(out_dir: str | Path) -> set[str]:
    """Sample ids already recorded by any rank in ``out_dir``."""
    done: set[str] = set()
    for p in sorted(Path(out_dir).glob(SHARDS_GLOB)):
        done.update(str(d.get("sample_id")) for d in read_jsonl(p))
    return done


def prepare_dir(pool: TablePool | None, out_dir: str | Path, config: ProfileConfig) -> None:
    """Create ``out_dir`` with tables.json and profile.json, or check an existing one matches (to resume).
    The broad design (``config.design``) has no tables file: pass ``pool=None``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tables = out / TABLES_FILE
    if config.design is not None:
        if pool is not None:
            raise AutoshardError("the broad design generates its own tables; do not pass a tables file")
        if tables.exists():
            raise AutoshardError(f"{out} was profiled on a tables file (the pool design); "
                                 "use a new -o directory for the broad design")
    elif pool is None:
        raise AutoshardError("the pool design profiles a tables file; pass --tables")
    elif tables.exists():
        if TablePool.load(str(tables)).to_json()["tables"] != pool.to_json()["tables"]:
            raise AutoshardError(f"{out} was profiled on other tables; use a new -o directory")
    else:
        pool.save(str(tables))
    manifest = out / MANIFEST_FILE
    if manifest.exists():
        old = read_json(manifest, kind="autoshard.profile")
        if isinstance(old.get("settings"), dict):  # settings added since (backend) read as their defaults
            old["settings"] = MeasureSettings.from_json(old["settings"]).to_json()
        if old != config.manifest():
            diff = sorted(k for k in set(old) | set(config.manifest())
                          if old.get(k) != config.manifest().get(k))
            raise AutoshardError(f"{out} was profiled with other settings ({', '.join(diff)}); pass the same "
                                 "options to resume, or use a new -o directory")
    else:
        write_json(manifest, config.manifest())


def pending_samples(out_dir: str | Path, config: ProfileConfig, rank: int = 0,
                    world_size: int = 1) -> list[int]:
    """Indices rank ``rank`` of ``world_size`` still has to measure."""
    done = done_sample_ids(out_dir)
    return [i for i in range(rank, config.samples, world_size) if sample_id(config.seed, i) not in done]


def check_rank(rank: int, world_size: int) -> None:
    if world_size < 1 or not 0 <= rank < world_size:
        raise AutoshardError(f"rank {rank} of world size {world_size}: "
                             "need world size >= 1 and 0 <= rank < it")


def profile(pool: TablePool | None, out_dir: str | Path, config: ProfileConfig, rank: int = 0,
            world_size: int = 1) -> Iterator[CostRecord]:
    """Measure this rank's pending samples, appending each record (fsynced) before yielding it. The broad
    design (``config.design``) generates its tables: pass ``pool=None``."""
    from autoshard.host import host_info

    check_rank(rank, world_size)
    prepare_dir(pool, out_dir, config)
    path = shard_file(out_dir, rank)
    repair_tail(path)  # a torn line from a killed run: the next record must start on a fresh line
    host = {**host_info(config.settings.device.value), "rank": rank, "world_size": world_size}
    for i in pending_samples(out_dir, config, rank, world_size):
        if config.design is not None:
            rec = _measure_broad(config, config.design, i, host)
        else:
            assert pool is not None
            shards = sample_shards(pool, config.seed, i, config.max_tables, config.column_share)
            names, dims = [n for n, _ in shards], [d for _, d in shards]
            task, refs = _sample_task(pool, names, dims, config.batch_size, config.precision)
            timing = measure_shard(task, refs, config.settings)
            rec = CostRecord(sample_id(config.seed, i), tuple(names), tuple(dims), config.batch_size,
                             timing.fwd_ms, timing.bwd_ms, timing.fwd_cv, timing.bwd_cv,
                             config.record_settings(), host, timing.rows, timing.tries,
                             tuple(s.num_rows(task.tables[s.table].rows) for s in refs))
        append_jsonl(path, rec.to_json())
        yield rec


def _measure_broad(config: ProfileConfig, design: BroadDesign, index: int,
                   host: dict[str, Any]) -> CostRecord:
    sample = broad_sample(design, config.seed, index)
    task = Task(sample.tables, (UNBOUNDED_MEMORY,), precision=sample.precision,
                batch_size=sample.batch_size, name="profile-sample")
    refs = [ShardRef(j, d) for j, d in enumerate(sample.dims)]
    timing = measure_shard(task, refs, config.settings)
    return CostRecord(sample_id(config.seed, index), tuple(t.name for t in sample.tables), sample.dims,
                      sample.batch_size, timing.fwd_ms, timing.bwd_ms, timing.fwd_cv, timing.bwd_cv,
                      config.record_settings(sample.precision), host, timing.rows, timing.tries,
                      tuple(t.rows for t in sample.tables), tuple(t.to_json() for t in sample.tables))


def load_dataset(path: str | Path) -> CostDataset:
    """Read a profile directory: the pool, every rank's records (merged, in sample order) and the comm
    model."""
    d = Path(path)
    if not d.is_dir():
        raise AutoshardError(f"{d}: no such directory; run 'autoshard profile -o {d}' first")
    manifest = read_json(d / MANIFEST_FILE, kind="autoshard.profile") if (d / MANIFEST_FILE).is_file() else {}
    broad = isinstance(manifest.get("design"), dict)
    if not (d / TABLES_FILE).is_file() and not broad:
        raise AutoshardError(f"{d} has no {TABLES_FILE}; "
                             "it is not a profile directory (autoshard profile -o DIR)")
    pool = TablePool.load(str(d / TABLES_FILE)) if (d / TABLES_FILE).is_file() else None
    names = set(pool.by_name()) if pool is not None else set()
    seen: dict[str, CostRecord] = {}
    own: dict[str, Table] = {}
    for p in sorted(d.glob(SHARDS_GLOB)):
        for raw in read_jsonl(p):
            rec = CostRecord.from_json(raw)
            if rec.sample_id in seen:
                log.warning("%s: sample %s recorded twice; keeping the first", p, rec.sample_id)
                continue
            mine = {t.name: t for t in rec.own_tables()}
            unknown = [n for n in rec.tables if n not in names and n not in mine]
            if unknown:
                raise AutoshardError(f"{p}: record {rec.sample_id} names table {unknown[0]!r}, "
                                     f"not in {TABLES_FILE} nor in the record's table_specs")
            clash = [n for n in mine if n in names or (n in own and own[n] != mine[n])]
            if clash:
                raise AutoshardError(f"{p}: record {rec.sample_id} redefines table {clash[0]!r}")
            own.update(mine)
            seen[rec.sample_id] = rec
    records = sorted(seen.values(), key=lambda r: _sample_index(r.sample_id))
    comm = AlphaBeta.load(str(d / COMM_MODEL_FILE)) if (d / COMM_MODEL_FILE).is_file() else None
    return CostDataset(_dataset_pool(d, pool, tuple(own.values())), records, comm, manifest)


def _dataset_pool(d: Path, pool: TablePool | None, own: tuple[Table, ...]) -> TablePool:
    """tables.json plus the records' own tables; the normaliser is tables.json's, or (broad design, no
    tables file) fitted on the records' tables."""
    if not own:
        if pool is None:
            raise AutoshardError(f"{d}: no records yet; run 'autoshard profile -o {d}' first")
        return pool
    if pool is None:
        return TablePool(own, FeatureNormalizer.fit(own), {"generated_by": "autoshard.profile broad design"})
    return TablePool(pool.tables + own, pool.normalizer, pool.source)

