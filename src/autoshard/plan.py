"""Plans: the shards of every table and the rank each lives on; validation, memory, JSON and a report.

JSON schema (``kind: autoshard.plan``, ``version: 2``)::

    {
      "kind": "autoshard.plan", "version": 2,
      "algorithm": "size_lookup_greedy",       # who made it
      "devices": 4,                            # number of ranks
      "task": "task-0",                        # the task's name
      "planning_time_s": 0.004,                # wall time of plan(), or null
      "tables": {
        "t0": {"sharding_type": "table_wise",  "shards": [{"rank": 2, "columns": [0, 16]}]},
        "t1": {"sharding_type": "column_wise", "shards": [{"rank": 0, "columns": [0, 32]},
                                                          {"rank": 3, "columns": [32, 64]}]},
        "t2": {"sharding_type": "row_wise",    "shards": [{"rank": 0, "columns": [0, 16], "rows": [0, 600]},
                                                          {"rank": 1, "columns": [0, 16],
                                                           "rows": [600, 1000]}]}
      },
      "cost": null | {"source": "measured", "plan_ms": ..., "devices": [{"fwd_ms", "bwd_ms", "comm_ms",
                                                                          "total_ms"}, ...]}
    }

``sharding_type`` uses TorchRec's strings; a shard is ``autoshard.shards.Shard`` (columns and rows are
``[start, end)``; no ``rows`` = every row). Version 1 files (``"ranks"`` and ``"shard_dims"`` per table,
column shards in column order) are still read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from autoshard.breakdown import PlanCost
from autoshard.errors import AutoshardError, PlanError
from autoshard.io import check_object, format_bytes, read_json, write_json
from autoshard.shards import (
    COLUMN_SHARD_MULTIPLE,
    Shard,
    ShardingType,
    ShardRef,
    check_shards,
    column_shards,
    row_shards,
)
from autoshard.tasks import Task

__all__ = ["COLUMN_SHARD_MULTIPLE", "PLAN_VERSION", "Plan", "ShardingType", "TablePlacement", "format_report",
           "validate"]

PLAN_VERSION = 2
"""2: shards with column and row ranges; 1: ranks + shard_dims (column shards only), still read."""


@dataclass(frozen=True)
class TablePlacement:
    """Where one table goes: a sharding type and its shards (see ``autoshard.shards``)."""

    table: str
    sharding_type: ShardingType
    shards: tuple[Shard, ...]

    @property
    def ranks(self) -> tuple[int, ...]:
        return tuple(s.rank for s in self.shards)

    @property
    def shard_dims(self) -> tuple[int, ...]:
        return tuple(s.cols for s in self.shards)

    @staticmethod
    def table_wise(table: str, rank: int, dim: int) -> TablePlacement:
        return TablePlacement(table, ShardingType.TABLE_WISE, (Shard(int(rank), 0, int(dim)),))

    @staticmethod
    def column_wise(table: str, ranks: Sequence[int], shard_dims: Sequence[int]) -> TablePlacement:
        """Column shards in column order: shard ``i`` holds the next ``shard_dims[i]`` columns, on
        ``ranks[i]``."""
        return TablePlacement(table, ShardingType.COLUMN_WISE, column_shards(ranks, shard_dims))

    @staticmethod
    def row_wise(table: str, ranks: Sequence[int], row_counts: Sequence[int], dim: int,
                 sharding_type: ShardingType = ShardingType.ROW_WISE) -> TablePlacement:
        """Row shards in row order: shard ``i`` holds the next ``row_counts[i]`` rows, on ``ranks[i]``."""
        return TablePlacement(table, sharding_type, row_shards(ranks, row_counts, dim))

    @staticmethod
    def data_parallel(table: str, ranks: Sequence[int], dim: int) -> TablePlacement:
        return TablePlacement(table, ShardingType.DATA_PARALLEL,
                              tuple(Shard(int(r), 0, int(dim)) for r in ranks))

    def to_json(self) -> dict[str, Any]:
        return {"sharding_type": self.sharding_type.value, "shards": [s.to_json() for s in self.shards]}

    @staticmethod
    def from_json(table: str, d: dict[str, Any], version: int = PLAN_VERSION) -> TablePlacement:
        check_object(d, f"plan: table {table}'s placement", "regenerate the plan with 'autoshard plan'")
        try:
            st = ShardingType(d["sharding_type"])
        except (KeyError, ValueError):
            raise AutoshardError(
                f"plan: table {table} has sharding_type {d.get('sharding_type')!r}; use one of "
                f"{', '.join(t.value for t in ShardingType)}"
            ) from None
        if version == 1:
            try:
                ranks, dims = [int(r) for r in d["ranks"]], [int(x) for x in d["shard_dims"]]
            except (KeyError, TypeError, ValueError):
                raise AutoshardError(f"plan: table {table} needs integer lists 'ranks' and 'shard_dims'") \
                    from None
            if len(ranks) != len(dims):
                raise PlanError(f"table {table}: ranks and shard_dims must be non-empty and the same length")
            return TablePlacement(table, st, column_shards(ranks, dims))
        shards = d.get("shards")
        if not isinstance(shards, list):
            raise AutoshardError(f"plan: table {table} needs a 'shards' list")
        return TablePlacement(table, st, tuple(Shard.from_json(table, s) for s in shards))


@dataclass(frozen=True)
class Plan:
    """A complete placement of a task's tables on ``num_devices`` ranks."""

    placements: tuple[TablePlacement, ...]
    num_devices: int
    algorithm: str = ""
    task_name: str = ""
    cost: PlanCost | None = None
    planning_time_s: float | None = None

    @staticmethod
    def from_ranks(task: Task, ranks: Sequence[int], algorithm: str) -> Plan:
        """A table-wise plan putting ``task.tables[i]`` on ``ranks[i]``."""
        return Plan(
            tuple(TablePlacement.table_wise(t.name, r, t.dim)
                  for t, r in zip(task.tables, ranks, strict=True)),
            task.num_devices, algorithm, task.name,
        )

    def placement(self, table: str) -> TablePlacement:
        for p in self.placements:
            if p.table == table:
                return p
        raise PlanError(f"plan has no placement for table {table}")

    def device_shards(self, task: Task) -> list[list[ShardRef]]:
        """For every rank, the shards it holds, as cost models see them (table index in ``task``, columns,
        row range)."""
        index = {t.name: i for i, t in enumerate(task.tables)}
        devices: list[list[ShardRef]] = [[] for _ in range(self.num_devices)]
        for p in self.placements:
            i, replica = index[p.table], p.sharding_type.replicates
            for s in p.shards:
                devices[s.rank].append(s.ref(i, replica))
        return devices

    def memory_used(self, task: Task) -> list[int]:
        """Bytes used on each rank: weights + optimizer state of every shard it holds (a replica counts
        whole)."""
        return [sum(task.shard_memory(s) for s in shards) for shards in self.device_shards(task)]

    def with_cost(self, cost: PlanCost) -> Plan:
        return replace(self, cost=cost)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": "autoshard.plan",
            "version": PLAN_VERSION,
            "algorithm": self.algorithm,
            "devices": self.num_devices,
            "task": self.task_name,
            "planning_time_s": self.planning_time_s,
            "tables": {p.table: p.to_json() for p in self.placements},
            "cost": self.cost.to_json() if self.cost else None,
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> Plan:
        version = int(d.get("version", PLAN_VERSION))
        tables = d.get("tables")
        if not isinstance(tables, dict):
            raise AutoshardError("plan file has no 'tables' mapping; regenerate it with 'autoshard plan'")
        try:
            devices = int(d["devices"])
        except (KeyError, TypeError, ValueError):
            raise AutoshardError("plan file lacks an integer 'devices'; "
                                 "regenerate it with 'autoshard plan'") from None
        try:
            cost = PlanCost.from_json(d["cost"]) if d.get("cost") else None
        except (KeyError, TypeError, ValueError, AttributeError, IndexError):
            raise AutoshardError("plan file's 'cost' is malformed; drop it (it is only a record) or "
                                 "regenerate the plan with 'autoshard plan'") from None
        return Plan(
            tuple(TablePlacement.from_json(name, p, version) for name, p in tables.items()),
            devices,
            str(d.get("algorithm", "")),
            str(d.get("task", "")),
            cost,
            d.get("planning_time_s"),
        )

    def save(self, path: str) -> None:
        write_json(path, self.to_json())

    @staticmethod
    def load(path: str) -> Plan:
        return Plan.from_json(read_json(path, kind="autoshard.plan", versions=(1, PLAN_VERSION)))


def validate(plan: Plan, task: Task) -> None:
    """Raise PlanError (one line) unless every table of ``task`` is placed exactly once, its shards cover it
    exactly once on existing ranks by the rules of their sharding type (``autoshard.shards.check_shards``),
    and no device is over its memory."""
    if plan.num_devices != task.num_devices:
        raise PlanError(f"plan is for {plan.num_devices} devices but the task has {task.num_devices}")
    tables = {t.name: t for t in task.tables}
    seen: set[str] = set()
    for p in plan.placements:
        if p.table not in tables:
            raise PlanError(f"plan places table {p.table}, which is not in the task")
        if p.table in seen:
            raise PlanError(f"plan places table {p.table} more than once")
        seen.add(p.table)
        t = tables[p.table]
        check_shards(p.table, t.rows, t.dim, p.sharding_type, p.shards, plan.num_devices)
        if p.sharding_type is ShardingType.TABLE_ROW_WISE:
            hosts = {task.topology.host_of(r, task.num_devices) for r in p.ranks}
            if len(hosts) != 1:
                raise PlanError(f"table {p.table}: table_row_wise shards must be on one host's ranks, got "
                                f"ranks {list(p.ranks)} on hosts {sorted(hosts)} of {task.topology.hosts}")
    missing = [n for n in tables if n not in seen]
    if missing:
        raise PlanError(f"plan does not place {len(missing)} table(s), e.g. {missing[0]}")
    for r, (used, cap) in enumerate(zip(plan.memory_used(task), task.device_memory)):
        if used > cap:
            raise PlanError(f"device {r} uses {format_bytes(used)} but has {format_bytes(cap)}")


def format_report(plan: Plan, task: Task, proxy: Sequence[float] | None = None) -> str:
    """A per-device table: shards, memory used / capacity, optional cost proxy, and the cost breakdown if
    known."""
    shards = plan.device_shards(task)
    used = plan.memory_used(task)
    header = f"{'device':>6} {'tables':>6} {'memory used / capacity':>26}"
    if proxy is not None:
        header += f" {'cost proxy':>12}"
    if plan.cost is not None:
        header += f" {'fwd ms':>8} {'bwd ms':>8} {'own comm ms':>11} {'total ms':>9}"
    lines = [(f"plan by {plan.algorithm or '?'} for {task.name}: {task.num_tables} tables on "
              f"{plan.num_devices} devices"), header]
    for r in range(plan.num_devices):
        mem = f"{format_bytes(used[r])} / {format_bytes(task.device_memory[r])}"
        line = f"{r:>6} {len(shards[r]):>6} {mem:>26}"
        if proxy is not None:
            line += f" {proxy[r]:>12.4g}"
        if plan.cost is not None:
            c = plan.cost.devices[r]
            line += f" {c.fwd_ms:>8.3f} {c.bwd_ms:>8.3f} {c.comm_ms:>11.3f} {c.total_ms:>9.3f}"
        lines.append(line)
    cost = plan.cost
    if cost is not None and cost.collectives:
        lines.append(f"{'collective':>16} {'stage':>5} {'max sent':>10} {'max received':>12} {'ms':>8} "
                     f"{'modelled ms':>11}  source")
        for col in cost.collectives:
            if col.name.startswith("row_") and col.ms == 0.0:
                continue  # no row shards: TorchRec runs none of the row-wise collectives
            sent, received = format_bytes(max(col.sent_bytes)), format_bytes(max(col.received_bytes))
            lines.append(f"{col.name:>16} {col.stage:>5} {sent:>10} {received:>12} {col.ms:>8.3f} "
                         f"{col.modelled_ms:>11.3f}  {col.source}")
        lines.append(f"step cost ({cost.source}): {cost.plan_ms:.3f} ms = max fwd {cost.max_fwd_ms:.3f} + "
                     f"max bwd {cost.max_bwd_ms:.3f} + collectives {cost.collectives_ms:.3f}")
    elif cost is not None:
        lines.append(f"plan cost ({cost.source}, per-device max, before the step model): "
                     f"{cost.plan_ms:.3f} ms on device {cost.bottleneck}")
    return "\n".join(lines)
