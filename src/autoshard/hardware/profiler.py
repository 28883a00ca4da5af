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

import logging
import math
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np

from autoshard.errors import AutoshardError
from autoshard.hardware.jsonl import append_jsonl, repair_tail
from autoshard.hardware.kernel import (
    MeasureSettings,
    PreparedLookups,
    ShardTiming,
    measure_shard,
    prepare_lookups,
)
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
from autoshard.hardware.profile_level import LEVEL_FILE, read_level
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

logger = logging.getLogger(__name__)

__all__ = [  # the loop's own names, and (from the modules it was split into) those importers use here
    "DEFAULT_COLUMN_SHARE", "DEFAULT_MAX_TABLES", "DEVICE_AXES", "MANIFEST_FILE", "PACKED_FILE",
    "SHARDS_GLOB",
    "STRATUM_STARTS", "TABLES_FILE", "TABLE_AXES", "UNBOUNDED_MEMORY", "BroadDesign", "BroadSample",
    "CostDataset", "CostRecord", "ProfileConfig", "broad_sample", "broad_task", "check_rank",
    "done_sample_ids",
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
        new = config.manifest()
        if old != new:
            diff = sorted(_differences(old, new))
            raise AutoshardError(f"{out} was profiled with other settings ({', '.join(diff)}); pass the same "
                                 "options to resume, or use a new -o directory")
    else:
        write_json(manifest, config.manifest())


def _differences(old: dict[str, Any], new: dict[str, Any], prefix: str = "") -> list[str]:
    """The keys where two manifests differ, a nested dict's as 'design.sobol_axes' (so the error names the
    option to pass)."""
    out = []
    for k in set(old) | set(new):
        a, b = old.get(k), new.get(k)
        if isinstance(a, dict) and isinstance(b, dict):
            out += _differences(a, b, f"{prefix}{k}.")
        elif a != b:
            out.append(f"{prefix}{k}")
    return out


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
            world_size: int = 1, prepare_workers: int = 0) -> Iterator[CostRecord]:
    """Measure this rank's pending samples, appending each record (fsynced) before yielding it. The broad
    design (``config.design``) generates its tables: pass ``pool=None``. The directory is checked (settings,
    tables, hardware of its records) here, before anything is measured, not on the first iteration.

    ``prepare_workers`` > 0 draws the next samples' tables and lookups (``prepare_lookups``) in that many
    worker processes while this process times: the records are the same, only sooner. For a GPU host,
    whose CPU side was most of a sample's time; on a CPU device the workers compete with the timed
    kernels."""
    from autoshard.host import host_info

    check_rank(rank, world_size)
    if prepare_workers < 0:
        raise AutoshardError(f"prepare workers {prepare_workers} must be >= 0 (0: prepare in this process)")
    prepare_dir(pool, out_dir, config)
    host = {**host_info(config.settings.device.value), "rank": rank, "world_size": world_size}
    check_same_hardware(out_dir, recorded_hosts(out_dir), host)
    _warn_if_leveled(out_dir, config, rank, world_size)
    return _measure_pending(pool, out_dir, config, rank, world_size, host, prepare_workers)


def _warn_if_leveled(out_dir: str | Path, config: ProfileConfig, rank: int, world_size: int) -> None:
    """A level (``autoshard profile-level``) holds for the records timed when it was measured: records added
    on another day, at another host speed, would be merged under it as if timed with them."""
    level = read_level(out_dir)
    if level is None:
        return
    pending = len(pending_samples(out_dir, config, rank, world_size))
    if pending:
        logger.warning("%s has a %s measured before these %d samples; re-run `autoshard profile-level --data "
                       "%s --reference <%s>` once they are profiled, or train-cost merges them at its level",
                       out_dir, LEVEL_FILE, pending, out_dir, level.reference)


@dataclass(frozen=True)
class _Sample:
    """Sample ``index`` of a profile, ready to time: its one-device task, shards and drawn lookups."""

    index: int
    task: Task
    refs: tuple[ShardRef, ...]
    prepared: PreparedLookups | None
    """None only between a prefetch worker and the parent (``_worker_sample``)."""
    broad: BroadSample | None
    """The broad design's sample (its tables' specs and row ranges go into the record); None: pool design."""


def broad_task(sample: BroadSample) -> tuple[Task, tuple[ShardRef, ...]]:
    """The one-device task (unbounded memory) and shards a broad sample is timed as."""
    task = Task(sample.tables, (UNBOUNDED_MEMORY,), precision=sample.precision, batch_size=sample.batch_size,
                name="profile-sample")
    ranges = sample.row_ranges or ((0, None),) * len(sample.tables)
    return task, tuple(ShardRef(j, d, r0, r1) for j, (d, (r0, r1)) in enumerate(zip(sample.dims, ranges)))


def _make_sample(pool: TablePool | None, config: ProfileConfig, index: int) -> _Sample:
    if config.design is not None:
        sample = broad_sample(config.design, config.seed, index)
        task, refs = broad_task(sample)
    else:
        assert pool is not None
        sample = None
        shards = sample_shards(pool, config.seed, index, config.max_tables, config.column_share)
        task, ref_list = sample_task(pool, [n for n, _ in shards], [d for _, d in shards], config.batch_size,
                                     config.precision)
        refs = tuple(ref_list)
    return _Sample(index, task, refs, prepare_lookups(task, refs, config.settings), sample)


_worker_state: tuple[TablePool | None, ProfileConfig, Path] | None = None


def _init_worker(pool: TablePool | None, config: ProfileConfig, spill: Path) -> None:
    import signal

    global _worker_state
    _worker_state = (pool, config, spill)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle: no worker tracebacks


def _worker_sample(index: int) -> tuple[_Sample, Path]:
    """Sample ``index`` without its lookups, which go to a file in the spill directory: handed back through
    the pool, hundreds of MB would be unpickled by the parent's result thread, holding the GIL while the
    parent times (its kernel launches would wait for it); read from the file, they load between timings."""
    assert _worker_state is not None
    pool, config, spill = _worker_state
    sample = _make_sample(pool, config, index)
    assert sample.prepared is not None
    path = spill / f"sample-{index}.npz"
    arrays = {f"b{k}_{j}": a for k, batch in enumerate(sample.prepared.batches) for j, a in enumerate(batch)}
    np.savez(path, rows=np.asarray(sample.prepared.rows, dtype=np.int64), **arrays)
    return replace(sample, prepared=None), path


def _load_spilled(sample: _Sample, path: Path) -> _Sample:
    with np.load(path) as z:
        count = sum(1 for f in z.files if f.endswith("_0"))
        batches = tuple((z[f"b{k}_0"], z[f"b{k}_1"]) for k in range(count))
        prepared = PreparedLookups(tuple(int(r) for r in z["rows"]), batches)
    path.unlink()
    return replace(sample, prepared=prepared)


def _samples(pool: TablePool | None, config: ProfileConfig, indices: list[int],
             workers: int) -> Iterator[_Sample]:
    """The samples of ``indices`` in order, made here or ``workers`` processes ahead of the consumer."""
    if workers == 0:
        for i in indices:
            yield _make_sample(pool, config, i)
        return
    import multiprocessing
    import shutil
    import tempfile
    from concurrent.futures import Future, ProcessPoolExecutor

    spill = Path(tempfile.mkdtemp(prefix="autoshard-profile-"))
    # spawn: a fork of a process that has initialised CUDA is not safe; the workers only use numpy
    executor = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                   initializer=_init_worker, initargs=(pool, config, spill))
    ahead: deque[Future[tuple[_Sample, Path]]] = deque()
    todo = iter(indices)
    try:
        for i in islice(todo, 2 * workers):  # two per worker: one being drawn, one waiting
            ahead.append(executor.submit(_worker_sample, i))
        while ahead:
            sample = _load_spilled(*ahead.popleft().result())
            nxt = next(todo, None)
            if nxt is not None:
                ahead.append(executor.submit(_worker_sample, nxt))
            yield sample
    finally:  # also on Ctrl-C or when the consumer stops early: drop the samples not started
        executor.shutdown(wait=True, cancel_futures=True)
        shutil.rmtree(spill, ignore_errors=True)


def _record(config: ProfileConfig, sample: _Sample, timing: ShardTiming, host: dict[str, Any]) -> CostRecord:
    task, sid = sample.task, sample_id(config.seed, sample.index)
    names = tuple(t.name for t in task.tables)
    dims = tuple(r.dim for r in sample.refs)
    if sample.broad is not None:
        b = sample.broad
        return CostRecord(sid, names, dims, b.batch_size, timing.fwd_ms, timing.bwd_ms, timing.fwd_cv,
                          timing.bwd_cv, config.record_settings(b.precision), host, timing.rows, timing.tries,
                          tuple(t.rows for t in b.tables), tuple(t.to_json() for t in b.tables), b.row_ranges)
    return CostRecord(sid, names, dims, config.batch_size, timing.fwd_ms, timing.bwd_ms, timing.fwd_cv,
                      timing.bwd_cv, config.record_settings(), host, timing.rows, timing.tries,
                      tuple(r.num_rows(task.tables[r.table].rows) for r in sample.refs))


GPU_STATE_INTERVAL_S = 5.0
"""Seconds between two readings of the GPU's state in a profile (records in between carry the last)."""


class _GpuState:
    """The GPU's clocks, temperature and power (``host.gpu_state``) after a sample, read at most every
    ``GPU_STATE_INTERVAL_S`` (nvidia-smi takes tens of ms; a drift takes minutes); {} off CUDA or where they
    cannot be read, so records then carry nothing extra."""

    def __init__(self, settings: MeasureSettings) -> None:
        self.cuda = settings.device.value == "cuda"
        self.last: dict[str, Any] = {}
        self.read_at = -math.inf

    def __call__(self) -> dict[str, Any]:
        if self.cuda and time.monotonic() - self.read_at >= GPU_STATE_INTERVAL_S:
            import torch

            from autoshard.host import gpu_state

            state = gpu_state(torch.cuda.current_device())
            self.last, self.read_at = ({"gpu_state": state} if state else {}), time.monotonic()
        return self.last


def _measure_pending(pool: TablePool | None, out_dir: str | Path, config: ProfileConfig, rank: int,
                     world_size: int, host: dict[str, Any], workers: int) -> Iterator[CostRecord]:
    path = shard_file(out_dir, rank)
    repair_tail(path)  # a torn line from a killed run: the next record must start on a fresh line
    state = _GpuState(config.settings)
    for sample in _samples(pool, config, pending_samples(out_dir, config, rank, world_size), workers):
        timing = measure_shard(sample.task, sample.refs, config.settings, sample.prepared)
        rec = _record(config, sample, timing, {**host, **state()})
        append_jsonl(path, rec.to_json())
        yield rec
