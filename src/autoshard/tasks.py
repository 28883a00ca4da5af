"""Sharding tasks: a set of tables, D devices with memory capacities, precision and optimizer state.

Train/test task sets follow DreamShard's "DLRM-T (D)" scheme (NeurIPS 2022, Sec. 5): the table pool is split
into disjoint train and test pools, and each task samples T tables from one pool onto D devices.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from autoshard.errors import AutoshardError, InfeasibleError
from autoshard.io import ARTEFACT_VERSION, check_finite, check_object, format_bytes, read_json, write_json
from autoshard.shards import ShardRef
from autoshard.tables.lookups import row_range_share
from autoshard.tables.table import Precision, Table, TablePool, check_unique_names
from autoshard.topology import Topology

DEFAULT_BATCH_SIZE = 2048
"""Per-device batch size the costs refer to. The papers time batch 65536 on GPUs; on this CPU one table at
batch 8192 already takes ~18 ms fwd+bwd (shared/README.md), so 2048 keeps profiling affordable."""

DREAMSHARD_DEVICE_MEMORY = 5 * 10**9
"""DreamShard's DLRM tasks give each device 5 GB (shared/data/dlrm_datasets/feature_stats.json)."""


def shard_lookup_share(table: Table, shard: ShardRef, num_devices: int) -> float:
    """Share of the step's lookups of ``table`` its shard ``shard`` serves: 1 for a whole table or a column
    shard, 1 / D for a data-parallel replica (its rank's samples), and for a row shard the share of the
    table's lookups that fall in its rows (``tables.lookups.row_range_share``: skew-aware, not its share of
    rows). The one place every cost model, the step's id traffic and the cost model's training records take
    it from."""
    if shard.replica:
        return 1.0 / num_devices
    if shard.row_start == 0 and shard.row_end is None:
        return 1.0
    return row_range_share(table, shard.row_start, shard.row_end)


@dataclass(frozen=True)
class Task:
    """A sharding problem: place every table on the devices so the slowest device is fastest, within
    memory."""

    tables: tuple[Table, ...]
    device_memory: tuple[int, ...]
    """Memory capacity of each device in bytes (devices may differ)."""
    precision: Precision = Precision.FP32
    optimizer_bytes_per_element: float = 0.0
    """Optimizer state per weight element (0 for SGD, 4 for fp32 Adagrad)."""
    batch_size: int = DEFAULT_BATCH_SIZE
    name: str = "task"
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    topology: Topology = field(default_factory=Topology)
    """Hosts x local devices and their links (one host by default)."""

    def __post_init__(self) -> None:
        if not self.tables:
            raise AutoshardError(f"task {self.name}: no tables; a task needs at least one table")
        if len(self.device_memory) == 0:
            raise AutoshardError(f"task {self.name}: zero devices; give at least one device")
        if any(m <= 0 for m in self.device_memory):
            raise AutoshardError(f"task {self.name}: device memory must be positive, "
                                 f"got {list(self.device_memory)}")
        if self.batch_size <= 0:
            raise AutoshardError(f"task {self.name}: batch size {self.batch_size} must be positive")
        check_finite(self.optimizer_bytes_per_element, "optimizer_bytes_per_element")
        if self.optimizer_bytes_per_element < 0:
            raise AutoshardError("optimizer_bytes_per_element must be >= 0")
        check_unique_names(self.tables, f"task {self.name}")
        self.topology.local_size(len(self.device_memory))  # devices split evenly over the hosts

    @property
    def num_devices(self) -> int:
        return len(self.device_memory)

    @property
    def num_tables(self) -> int:
        return len(self.tables)

    def table_memory(self, table: Table, dim: int | None = None, rows: int | None = None) -> int:
        """Bytes ``table`` (or a shard of ``dim`` columns and ``rows`` rows) takes on a device in this
        task."""
        return table.memory_bytes(self.precision, self.optimizer_bytes_per_element, dim, rows)

    def shard_memory(self, shard: ShardRef) -> int:
        """Bytes a shard (weights + optimizer state) takes on a device in this task."""
        t = self.tables[shard.table]
        return self.table_memory(t, shard.dim, shard.num_rows(t.rows))

    def lookup_share(self, shard: ShardRef) -> float:
        """Share of the step's lookups of its table ``shard`` serves (``shard_lookup_share``)."""
        return shard_lookup_share(self.tables[shard.table], shard, self.num_devices)

    def check_fits(self) -> None:
        """Fail early, naming the bytes missing, if the devices together cannot hold the tables. A table
        larger than any one device is not an error: planners split it by rows
        (``autoshard.planners.row_split``)."""
        need = sum(self.table_memory(t) for t in self.tables)
        have = sum(self.device_memory)
        if need > have:
            raise InfeasibleError(
                f"task {self.name}: the tables need {format_bytes(need)} but the {self.num_devices} devices "
                f"have {format_bytes(have)} in all (short by {format_bytes(need - have)}); give more memory "
                "or more devices")

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "device_memory": list(self.device_memory),
            "precision": self.precision.value,
            "optimizer_bytes_per_element": self.optimizer_bytes_per_element,
            "batch_size": self.batch_size,
            "meta": self.meta,
            **({"topology": self.topology.to_json()} if self.topology != Topology() else {}),
            "tables": [t.to_json() for t in self.tables],
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> Task:
        check_object(d, "a task entry", "regenerate the file with 'autoshard tasks'")
        try:
            precision = Precision(d.get("precision", "fp32"))
        except ValueError:
            raise AutoshardError(f"precision {d.get('precision')!r} unknown; use fp32 or fp16") from None
        try:
            return Task(
                tables=tuple(Table.from_json(t) for t in d["tables"]),
                device_memory=tuple(int(m) for m in d["device_memory"]),
                precision=precision,
                optimizer_bytes_per_element=float(d.get("optimizer_bytes_per_element", 0.0)),
                batch_size=int(d.get("batch_size", DEFAULT_BATCH_SIZE)),
                name=str(d.get("name", "task")),
                meta=dict(d.get("meta", {})),
                topology=Topology.from_json(d["topology"]) if d.get("topology") else Topology(),
            )
        except KeyError as e:
            raise AutoshardError(f"a task lacks the field {e}; each needs tables and device_memory") from None
        except (TypeError, ValueError, AttributeError, OverflowError) as e:
            raise AutoshardError(f"task {d.get('name', '?')}: a field has the wrong type ({e}); "
                                 "device_memory is a list of byte counts, batch_size an integer, meta an "
                                 "object") from None


def save_tasks(path: str, tasks: Sequence[Task], settings: dict[str, Any] | None = None) -> None:
    write_json(path, {
        "kind": "autoshard.tasks",
        "version": ARTEFACT_VERSION,
        "settings": dict(settings or {}),
        "tasks": [t.to_json() for t in tasks],
    })


def load_tasks(path: str) -> list[Task]:
    d = read_json(path, kind="autoshard.tasks")
    if not isinstance(d.get("tasks"), list) or not d["tasks"]:
        raise AutoshardError(f"{path}: no tasks in the file; regenerate it with 'autoshard tasks'")
    return [Task.from_json(t) for t in d["tasks"]]


def split_pool(pool: TablePool, seed: int = 0, train_fraction: float = 0.5) -> tuple[TablePool, TablePool]:
    """Disjoint train and test pools (DreamShard splits the 856 DLRM tables 428/428), both with the whole
    pool's normaliser so features stay comparable."""
    if not 0.0 < train_fraction < 1.0:
        raise AutoshardError(f"train fraction {train_fraction} must be strictly between 0 and 1")
    n = len(pool.tables)
    if n < 2:
        raise AutoshardError("a pool of fewer than 2 tables cannot be split into train and test")
    order = np.random.default_rng(seed).permutation(n)
    k = min(max(1, round(n * train_fraction)), n - 1)
    names = [pool.tables[i].name for i in order]
    return pool.subset(names[:k]), pool.subset(names[k:])


def sample_tasks(
    pool: TablePool,
    num_tasks: int,
    num_tables: int,
    device_memory: Sequence[int],
    seed: int = 0,
    precision: Precision = Precision.FP32,
    optimizer_bytes_per_element: float = 0.0,
    batch_size: int = DEFAULT_BATCH_SIZE,
    prefix: str = "task",
) -> list[Task]:
    """``num_tasks`` tasks of ``num_tables`` tables each, drawn without replacement within a task."""
    if num_tasks <= 0:
        raise AutoshardError(f"number of tasks {num_tasks} must be positive")
    if not 0 < num_tables <= len(pool.tables):
        raise AutoshardError(
            f"cannot sample {num_tables} tables from a pool of {len(pool.tables)}; use 1..{len(pool.tables)}"
        )
    rng = np.random.default_rng(seed)
    tasks = []
    for i in range(num_tasks):
        idx = np.sort(rng.choice(len(pool.tables), size=num_tables, replace=False))
        tasks.append(Task(
            tables=tuple(pool.tables[j] for j in idx),
            device_memory=tuple(int(m) for m in device_memory),
            precision=precision,
            optimizer_bytes_per_element=optimizer_bytes_per_element,
            batch_size=batch_size,
            name=f"{prefix}-{i}",
            meta={"seed": seed, "index": i},
        ))
    return tasks
