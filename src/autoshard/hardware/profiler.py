"""The profiling dataset: real costs of random shards, appended one record a line, resumable,
split over ranks.

Directory layout (``-o costs/``):

- ``tables.json``: the table pool profiled (``autoshard.tables``), records name its tables;
- ``profile.json``: the settings every record was measured with; a re-run with other settings is refused;
- ``shards-rank<R>.jsonl``: one :class:`CostRecord` per line, appended with flush + fsync by rank R;
- ``comm.jsonl`` and ``comm_model.json``: written by ``autoshard profile-comm`` (see ``hardware.comm``).

Sample ``i`` is a deterministic function of ``(seed, i)``: 1..K tables drawn from the pool, and with
probability ``column_share`` a table is cut to a column shard (a random multiple of 4 columns, below its
dim), so the cost model sees column shards. Rank R of W takes the samples with ``i % W == R``. A re-run reads
every ``shards-*.jsonl`` in the directory and measures only the samples not there yet, so Ctrl-C or a crash
loses at most the sample being measured, and none is measured twice.
"""

from __future__ import annotations

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
from autoshard.tables.table import Precision, TablePool
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
    """MeasureSettings as JSON plus 'precision'; the same for every record of a dataset."""
    host: dict[str, Any]
    """Where it was measured (hostname, CPU/GPU, versions, rank)."""
    rows: tuple[int, ...] = ()
    """Rows each table had for timing (the rows rule of hardware.kernel)."""
    tries: int = 1
    """Measurement tries (more than 1 when a try was noisier than settings.max_cv)."""

    def to_json(self) -> dict[str, Any]:
        return {"sample_id": self.sample_id, "tables": list(self.tables), "dims": list(self.dims),
                "batch_size": self.batch_size, "fwd_ms": self.fwd_ms, "bwd_ms": self.bwd_ms,
                "fwd_cv": self.fwd_cv, "bwd_cv": self.bwd_cv, "settings": self.settings, "host": self.host,
                "rows": list(self.rows), "tries": self.tries}

    @staticmethod
    def from_json(d: dict[str, Any]) -> CostRecord:
        try:
            rec = CostRecord(str(d["sample_id"]), tuple(map(str, d["tables"])),
                             tuple(int(x) for x in d["dims"]), int(d["batch_size"]), float(d["fwd_ms"]),
                             float(d["bwd_ms"]), float(d["fwd_cv"]), float(d["bwd_cv"]),
                             dict(d["settings"]), dict(d["host"]),
                             tuple(int(x) for x in d.get("rows", ())), int(d.get("tries", 1)))
        except (KeyError, TypeError, ValueError) as e:
            raise AutoshardError(f"cost record {d.get('sample_id')!r} lacks or has a bad field ({e})") \
                from None
        if len(rec.tables) != len(rec.dims) or not rec.tables:
            raise AutoshardError(f"cost record {rec.sample_id}: "
                                 "tables and dims must be non-empty, same length")
        return rec


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

    def __post_init__(self) -> None:
        if self.samples <= 0 or self.max_tables <= 0 or self.batch_size <= 0:
            raise AutoshardError("--samples, --max-tables and --batch-size must be positive integers")
        if not 0.0 <= self.column_share <= 1.0:
            raise AutoshardError(f"column share {self.column_share} must be within 0..1")

    def manifest(self) -> dict[str, Any]:
        """What every record in a directory must share (samples may grow between runs)."""
        return {"kind": "autoshard.profile", "version": ARTEFACT_VERSION, "seed": self.seed,
                "max_tables": self.max_tables, "batch_size": self.batch_size,
                "precision": self.precision.value, "column_share": self.column_share,
                "settings": self.settings.to_json()}

    def record_settings(self) -> dict[str, Any]:
        return {**self.settings.to_json(), "precision": self.precision.value}


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


def prepare_dir(pool: TablePool, out_dir: str | Path, config: ProfileConfig) -> None:
    """Create ``out_dir`` with tables.json and profile.json, or check an existing one matches (to resume)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tables = out / TABLES_FILE
    if tables.exists():
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


def profile(pool: TablePool, out_dir: str | Path, config: ProfileConfig, rank: int = 0,
            world_size: int = 1) -> Iterator[CostRecord]:
    """Measure this rank's pending samples, appending each record (fsynced) before yielding it."""
    from autoshard.host import host_info

    check_rank(rank, world_size)
    prepare_dir(pool, out_dir, config)
    path = shard_file(out_dir, rank)
    repair_tail(path)  # a torn line from a killed run: the next record must start on a fresh line
    host = {**host_info(config.settings.device.value), "rank": rank, "world_size": world_size}
    for i in pending_samples(out_dir, config, rank, world_size):
        shards = sample_shards(pool, config.seed, i, config.max_tables, config.column_share)
        names, dims = [n for n, _ in shards], [d for _, d in shards]
        task, refs = _sample_task(pool, names, dims, config.batch_size, config.precision)
        timing = measure_shard(task, refs, config.settings)
        rec = CostRecord(sample_id(config.seed, i), tuple(names), tuple(dims), config.batch_size,
                         timing.fwd_ms, timing.bwd_ms, timing.fwd_cv, timing.bwd_cv, config.record_settings(),
                         host, timing.rows, timing.tries)
        append_jsonl(path, rec.to_json())
        yield rec


def load_dataset(path: str | Path) -> CostDataset:
    """Read a profile directory: the pool, every rank's records (merged, in sample order) and the comm
    model."""
    d = Path(path)
    if not d.is_dir():
        raise AutoshardError(f"{d}: no such directory; run 'autoshard profile -o {d}' first")
    if not (d / TABLES_FILE).is_file():
        raise AutoshardError(f"{d} has no {TABLES_FILE}; "
                             "it is not a profile directory (autoshard profile -o DIR)")
    pool = TablePool.load(str(d / TABLES_FILE))
    names = set(pool.by_name())
    seen: dict[str, CostRecord] = {}
    for p in sorted(d.glob(SHARDS_GLOB)):
        for raw in read_jsonl(p):
            rec = CostRecord.from_json(raw)
            unknown = [n for n in rec.tables if n not in names]
            if unknown:
                raise AutoshardError(f"{p}: record {rec.sample_id} names table {unknown[0]!r}, "
                                     f"not in {TABLES_FILE}")
            if rec.sample_id in seen:
                log.warning("%s: sample %s recorded twice; keeping the first", p, rec.sample_id)
                continue
            seen[rec.sample_id] = rec
    records = sorted(seen.values(), key=lambda r: _sample_index(r.sample_id))
    comm = AlphaBeta.load(str(d / COMM_MODEL_FILE)) if (d / COMM_MODEL_FILE).is_file() else None
    manifest = read_json(d / MANIFEST_FILE, kind="autoshard.profile") if (d / MANIFEST_FILE).is_file() else {}
    return CostDataset(pool, records, comm, manifest)

