"""The profiling dataset: real costs of random shards, appended one record a line, resumable,
split over ranks.

Directory layout (``-o costs/``):

- ``tables.json``: the table pool profiled (``autoshard.tables``), records name its tables (the ``pool``
  design; the ``broad`` design has none: every record carries its own tables, ``CostRecord.table_specs``);
- ``profile.json``: the settings every record was measured with; a re-run with other settings is refused;
- ``shards-rank<R>.jsonl``: one :class:`CostRecord` per line, appended with flush + fsync by rank R;
- ``shards-packed.jsonl.gz``: records packed by ``autoshard profile-pack`` (``pack_records``), to keep a
  profile under version control and grow it over several sittings;
- ``comm.jsonl`` and ``comm_model.json``: written by ``autoshard profile-comm`` (see ``hardware.comm``).

Two designs say what sample ``i`` is, either a deterministic function of ``(seed, i)``: ``pool`` (tables
drawn from tables.json) and ``broad`` (tables generated per sample); see ``hardware.profile_design``. The
record format is in ``hardware.profile_records``, the reading of a directory back (``load_dataset``, also
importable from here) in ``hardware.profile_dataset``.

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

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autoshard.errors import AutoshardError
from autoshard.hardware.jsonl import append_jsonl, repair_tail
from autoshard.hardware.kernel import MeasureSettings, measure_shard
from autoshard.hardware.profile_dataset import UNBOUNDED_MEMORY, CostDataset, load_dataset, sample_task
from autoshard.hardware.profile_design import (
    DEFAULT_COLUMN_SHARE,
    DEFAULT_MAX_TABLES,
    DEVICE_AXES,
    STRATUM_STARTS,
    TABLE_AXES,
    BroadDesign,
    BroadSample,
    broad_sample,
    sample_shards,
    tables_strata,
)
from autoshard.hardware.profile_records import (
    MANIFEST_FILE,
    PACKED_FILE,
    SHARDS_GLOB,
    TABLES_FILE,
    CostRecord,
    check_same_hardware,
    done_sample_ids,
    pack_records,
    record_files,
    recorded_hosts,
    sample_id,
    shard_file,
)
from autoshard.io import ARTEFACT_VERSION, read_json, write_json
from autoshard.shards import ShardRef
from autoshard.tables.table import Precision, TablePool
from autoshard.tasks import DEFAULT_BATCH_SIZE, Task

__all__ = [  # the loop's own names, and (from the modules it was split into) those importers use here
    "DEFAULT_COLUMN_SHARE", "DEFAULT_MAX_TABLES", "DEVICE_AXES", "MANIFEST_FILE", "PACKED_FILE",
    "SHARDS_GLOB",
    "STRATUM_STARTS", "TABLES_FILE", "TABLE_AXES", "UNBOUNDED_MEMORY", "BroadDesign", "BroadSample",
    "CostDataset", "CostRecord", "ProfileConfig", "broad_sample", "check_rank", "done_sample_ids",
    "load_dataset", "pack_records", "pending_samples", "prepare_dir", "profile", "record_files", "sample_id",
    "sample_shards", "shard_file",
    "tables_strata",
]


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
    design (``config.design``) generates its tables: pass ``pool=None``. The directory is checked (settings,
    tables, hardware of its records) here, before anything is measured, not on the first iteration."""
    from autoshard.host import host_info

    check_rank(rank, world_size)
    prepare_dir(pool, out_dir, config)
    host = {**host_info(config.settings.device.value), "rank": rank, "world_size": world_size}
    check_same_hardware(out_dir, recorded_hosts(out_dir), host)
    return _measure_pending(pool, out_dir, config, rank, world_size, host)


def _measure_pending(pool: TablePool | None, out_dir: str | Path, config: ProfileConfig, rank: int,
                     world_size: int, host: dict[str, Any]) -> Iterator[CostRecord]:
    path = shard_file(out_dir, rank)
    repair_tail(path)  # a torn line from a killed run: the next record must start on a fresh line
    for i in pending_samples(out_dir, config, rank, world_size):
        if config.design is not None:
            rec = _measure_broad(config, config.design, i, host)
        else:
            assert pool is not None
            shards = sample_shards(pool, config.seed, i, config.max_tables, config.column_share)
            names, dims = [n for n, _ in shards], [d for _, d in shards]
            task, refs = sample_task(pool, names, dims, config.batch_size, config.precision)
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
    ranges = sample.row_ranges or ((0, None),) * len(sample.tables)
    refs = [ShardRef(j, d, r0, r1) for j, (d, (r0, r1)) in enumerate(zip(sample.dims, ranges))]
    timing = measure_shard(task, refs, config.settings)
    return CostRecord(sample_id(config.seed, index), tuple(t.name for t in sample.tables), sample.dims,
                      sample.batch_size, timing.fwd_ms, timing.bwd_ms, timing.fwd_cv, timing.bwd_cv,
                      config.record_settings(sample.precision), host, timing.rows, timing.tries,
                      tuple(t.rows for t in sample.tables), tuple(t.to_json() for t in sample.tables),
                      sample.row_ranges)
