"""A profile directory read back (``load_dataset``): the table pool, every rank's records merged in
sample order, and the comm model (``CostDataset``), what the cost models are trained and calibrated on."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from autoshard.costs.comm import AlphaBeta
from autoshard.errors import AutoshardError
from autoshard.hardware.comm import COMM_MODEL_FILE
from autoshard.hardware.jsonl import read_jsonl
from autoshard.hardware.profile_level import ProfileLevel, at_reference_level, read_level
from autoshard.hardware.profile_records import (
    MANIFEST_FILE,
    TABLES_FILE,
    CostRecord,
    record_files,
    sample_index,
)
from autoshard.io import read_json
from autoshard.shards import ShardRef
from autoshard.tables.table import FeatureNormalizer, Precision, Table, TablePool
from autoshard.tasks import Task

T = TypeVar("T")

log = logging.getLogger(__name__)

UNBOUNDED_MEMORY = 2**62
"""Device memory of the one-device task a sample is timed in: profiling measures, it does not plan."""


@dataclass(frozen=True)
class CostDataset:
    """Everything a profile directory holds."""

    pool: TablePool
    records: list[CostRecord]
    comm: AlphaBeta | None
    settings: dict[str, Any] = field(default_factory=dict)
    """The profile manifest (profile.json), empty when the directory has none."""
    level: ProfileLevel | None = None
    """The directory's level.json (``hardware.profile_level``): its host over another profile's, which
    ``merge_datasets`` divides its records by when that profile is merged with it; None: none measured."""

    def task_of(self, record: CostRecord) -> tuple[Task, list[ShardRef]]:
        """The one-device task and shards a record was measured as (to re-measure or featurise it)."""
        task, _ = sample_task(self.pool, record.tables, record.dims, record.batch_size, record.precision)
        return task, record.shard_refs()

    def spread(self, count: int, max_ms: float = float("inf")) -> list[CostRecord]:
        """``count`` records spread evenly over the recorded fwd+bwd range up to ``max_ms`` (fewer when
        fewer qualify): what re-measurement benchmarks time."""
        return spread_evenly([r for r in self.records if r.fwd_ms + r.bwd_ms <= max_ms], count,
                             key=lambda r: r.fwd_ms + r.bwd_ms)

    @property
    def design(self) -> str:
        """'broad' (tables generated per sample) or 'pool' (tables of tables.json)."""
        return "broad" if isinstance(self.settings.get("design"), dict) else "pool"


def spread_evenly(items: Sequence[T], count: int, key: Callable[[T], float]) -> list[T]:
    """``count`` of ``items`` spread evenly over their order by ``key`` (all when fewer, none for
    ``count`` <= 0)."""
    ordered = sorted(items, key=key)
    if not ordered or count <= 0:
        return []
    picks = {round(i * (len(ordered) - 1) / max(count - 1, 1)) for i in range(count)}
    return [ordered[k] for k in sorted(picks)]


def sample_task(pool: TablePool, names: Sequence[str], dims: Sequence[int], batch_size: int,
                precision: Precision) -> tuple[Task, list[ShardRef]]:
    """The one-device task (unbounded memory) and shards a sample of the pool's tables is timed as."""
    lookup = pool.by_name()
    missing = [n for n in names if n not in lookup]
    if missing:
        raise AutoshardError(f"tables {missing[:3]} are not in the profiled pool; "
                             "the dataset is inconsistent")
    task = Task(tuple(lookup[n] for n in names), (UNBOUNDED_MEMORY,), precision=precision,
                batch_size=batch_size, name="profile-sample")
    return task, [ShardRef(i, int(d)) for i, d in enumerate(dims)]


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
    for p in record_files(d):
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
    records = sorted(seen.values(), key=lambda r: sample_index(r.sample_id))
    comm = AlphaBeta.load(str(d / COMM_MODEL_FILE)) if (d / COMM_MODEL_FILE).is_file() else None
    return CostDataset(_dataset_pool(d, pool, tuple(own.values())), records, comm, manifest, read_level(d))


def merge_datasets(datasets: Sequence[CostDataset], names: Sequence[str]) -> CostDataset:
    """Several profiles of one machine as one dataset (``train-cost --data A --data B``: the broad profile
    and one of row-cut samples, say): their records, their tables (one definition per name; the feature
    normaliser refitted on them all), the first comm model and manifest. ``names`` name the datasets in
    errors. A sample id in two of them is an error: profile the second with another ``--seed``.

    A dataset whose level (``CostDataset.level``) refers to another of ``names`` joins at that one's speed:
    its records' forward and backward divided by the level (a level measured on the same host the same
    sitting as the records; ``hardware.profile_level``). One referring to none of them joins as measured,
    with a warning."""
    if len(datasets) == 1:
        return datasets[0]
    tables: dict[str, Table] = {}
    where: dict[str, str] = {}  # table name -> the dataset defining it
    owner: dict[str, str] = {}  # sample id -> the dataset holding it
    for data, name in zip(datasets, names, strict=True):
        for t in data.pool.tables:
            if t.name in tables and tables[t.name] != t:
                raise AutoshardError(f"{name} and {where[t.name]} define table {t.name!r} differently; "
                                     "merge profiles of distinct tables")
            tables.setdefault(t.name, t)
            where.setdefault(t.name, name)
        for rec in data.records:
            if rec.sample_id in owner:
                raise AutoshardError(f"{name} and {owner[rec.sample_id]} both hold sample {rec.sample_id}; "
                                     "profile one of them with another --seed")
            owner[rec.sample_id] = name
    pool = TablePool(tuple(tables.values()), FeatureNormalizer.fit(tuple(tables.values())),
                     {"generated_by": "autoshard merge of " + ", ".join(names)})
    records = [r for data, name in zip(datasets, names) for r in _joining_records(data, name, names)]
    comm = next((data.comm for data in datasets if data.comm is not None), None)
    return CostDataset(pool, records, comm, datasets[0].settings)


def level_joining(data: CostDataset, name: str, names: Sequence[str]) -> ProfileLevel | None:
    """The level ``data`` (named ``name``) joins a merge of ``names`` at: its own where it refers to another
    of them, else None (as measured)."""
    level = data.level
    return level if level is not None and any(level.refers_to(o) for o in names if o != name) else None


def _joining_records(data: CostDataset, name: str, names: Sequence[str]) -> list[CostRecord]:
    level = level_joining(data, name, names)
    if level is not None:
        return at_reference_level(data.records, level)
    if data.level is not None:
        log.warning("%s: its level.json refers to %s, which is not merged with it; its records join as "
                    "measured", name, data.level.reference)
    return data.records


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
