"""Plans: which device (rank) holds each table or column shard; validation, memory, JSON and a report.

JSON schema (``kind: autoshard.plan``, ``version: 1``)::

    {
      "kind": "autoshard.plan", "version": 1,
      "algorithm": "size_lookup_greedy",       # who made it
      "devices": 4,                            # number of ranks
      "task": "task-0",                        # the task's name
      "planning_time_s": 0.004,                # wall time of plan(), or null
      "tables": {
        "t0": {"sharding_type": "table_wise",  "ranks": [2],    "shard_dims": [16]},
        "t1": {"sharding_type": "column_wise", "ranks": [0, 3], "shard_dims": [32, 32]}
      },
      "cost": null | {"source": "measured", "plan_ms": ..., "devices": [{"fwd_ms", "bwd_ms", "comm_ms",
                                                                          "total_ms"}, ...]}
    }

``sharding_type`` uses TorchRec's strings. Column shards are listed in column order: shard ``i`` holds columns
``sum(shard_dims[:i]) .. sum(shard_dims[:i+1])`` of the table and lives on ``ranks[i]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any

from autoshard.costs.breakdown import PlanCost, ShardRef
from autoshard.errors import AutoshardError, PlanError
from autoshard.io import ARTEFACT_VERSION, format_bytes, read_json, write_json
from autoshard.tasks import Task

COLUMN_SHARD_MULTIPLE = 4
"""Column shards are multiples of 4 columns, as TorchRec's column_wise sharding and FBGEMM's kernels expect."""


class ShardingType(str, Enum):
    """TorchRec's sharding type strings."""

    TABLE_WISE = "table_wise"
    COLUMN_WISE = "column_wise"


@dataclass(frozen=True)
class TablePlacement:
    """Where one table goes: one rank (table-wise) or several column shards on distinct ranks."""

    table: str
    sharding_type: ShardingType
    ranks: tuple[int, ...]
    shard_dims: tuple[int, ...]

    @staticmethod
    def table_wise(table: str, rank: int, dim: int) -> TablePlacement:
        return TablePlacement(table, ShardingType.TABLE_WISE, (int(rank),), (int(dim),))

    @staticmethod
    def column_wise(table: str, ranks: Sequence[int], shard_dims: Sequence[int]) -> TablePlacement:
        return TablePlacement(table, ShardingType.COLUMN_WISE, tuple(map(int, ranks)), tuple(map(int, shard_dims)))

    def to_json(self) -> dict[str, Any]:
        return {"sharding_type": self.sharding_type.value, "ranks": list(self.ranks),
                "shard_dims": list(self.shard_dims)}

    @staticmethod
    def from_json(table: str, d: dict[str, Any]) -> TablePlacement:
        try:
            st = ShardingType(d["sharding_type"])
        except (KeyError, ValueError):
            raise AutoshardError(
                f"plan: table {table} has sharding_type {d.get('sharding_type')!r}; use table_wise or column_wise"
            ) from None
        try:
            return TablePlacement(table, st, tuple(int(r) for r in d["ranks"]),
                                  tuple(int(x) for x in d["shard_dims"]))
        except (KeyError, TypeError, ValueError):
            raise AutoshardError(f"plan: table {table} needs integer lists 'ranks' and 'shard_dims'") from None


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
            tuple(TablePlacement.table_wise(t.name, r, t.dim) for t, r in zip(task.tables, ranks, strict=True)),
            task.num_devices, algorithm, task.name,
        )

    def placement(self, table: str) -> TablePlacement:
        for p in self.placements:
            if p.table == table:
                return p
        raise PlanError(f"plan has no placement for table {table}")

    def device_shards(self, task: Task) -> list[list[ShardRef]]:
        """For every rank, the shards it holds, as (table index in ``task``, dim)."""
        index = {t.name: i for i, t in enumerate(task.tables)}
        devices: list[list[ShardRef]] = [[] for _ in range(self.num_devices)]
        for p in self.placements:
            for r, d in zip(p.ranks, p.shard_dims):
                devices[r].append(ShardRef(index[p.table], d))
        return devices

    def memory_used(self, task: Task) -> list[int]:
        """Bytes used on each rank: weights + optimizer state of every shard it holds."""
        return [sum(task.table_memory(task.tables[s.table], s.dim) for s in shards)
                for shards in self.device_shards(task)]

    def with_cost(self, cost: PlanCost) -> Plan:
        return replace(self, cost=cost)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": "autoshard.plan",
            "version": ARTEFACT_VERSION,
            "algorithm": self.algorithm,
            "devices": self.num_devices,
            "task": self.task_name,
            "planning_time_s": self.planning_time_s,
            "tables": {p.table: p.to_json() for p in self.placements},
            "cost": self.cost.to_json() if self.cost else None,
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> Plan:
        tables = d.get("tables")
        if not isinstance(tables, dict):
            raise AutoshardError("plan file has no 'tables' mapping; regenerate it with 'autoshard plan'")
        try:
            devices = int(d["devices"])
        except (KeyError, TypeError, ValueError):
            raise AutoshardError("plan file lacks an integer 'devices'; regenerate it with 'autoshard plan'") from None
        return Plan(
            tuple(TablePlacement.from_json(name, p) for name, p in tables.items()),
            devices,
            str(d.get("algorithm", "")),
            str(d.get("task", "")),
            PlanCost.from_json(d["cost"]) if d.get("cost") else None,
            d.get("planning_time_s"),
        )

    def save(self, path: str) -> None:
        write_json(path, self.to_json())

    @staticmethod
    def load(path: str) -> Plan:
        return Plan.from_json(read_json(path, kind="autoshard.plan"))


def validate(plan: Plan, task: Task) -> None:
    """Raise PlanError (one line) unless every table of ``task`` is placed exactly once, shard dims add up to
    the table's dim (multiples of 4 on distinct ranks for column shards), ranks exist, and no device is over
    its memory."""
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
        if not p.ranks or len(p.ranks) != len(p.shard_dims):
            raise PlanError(f"table {p.table}: ranks and shard_dims must be non-empty and the same length")
        if any(not 0 <= r < plan.num_devices for r in p.ranks):
            raise PlanError(f"table {p.table}: rank out of range 0..{plan.num_devices - 1} in {list(p.ranks)}")
        if sum(p.shard_dims) != t.dim or any(d <= 0 for d in p.shard_dims):
            raise PlanError(f"table {p.table}: shard dims {list(p.shard_dims)} do not add up to its dim {t.dim}")
        if p.sharding_type is ShardingType.TABLE_WISE and len(p.ranks) != 1:
            raise PlanError(f"table {p.table}: table_wise needs exactly one rank, got {list(p.ranks)}")
        if p.sharding_type is ShardingType.COLUMN_WISE:
            if len(set(p.ranks)) != len(p.ranks):
                raise PlanError(f"table {p.table}: column shards must be on distinct ranks, got {list(p.ranks)}")
            if any(d % COLUMN_SHARD_MULTIPLE for d in p.shard_dims):
                raise PlanError(
                    f"table {p.table}: column shard dims {list(p.shard_dims)} must be multiples of "
                    f"{COLUMN_SHARD_MULTIPLE}"
                )
    missing = [n for n in tables if n not in seen]
    if missing:
        raise PlanError(f"plan does not place {len(missing)} table(s), e.g. {missing[0]}")
    for r, (used, cap) in enumerate(zip(plan.memory_used(task), task.device_memory)):
        if used > cap:
            raise PlanError(f"device {r} uses {format_bytes(used)} but has {format_bytes(cap)}")


def format_report(plan: Plan, task: Task, proxy: Sequence[float] | None = None) -> str:
    """A per-device table: shards, memory used / capacity, optional cost proxy, and the cost breakdown if known."""
    shards = plan.device_shards(task)
    used = plan.memory_used(task)
    header = f"{'device':>6} {'tables':>6} {'memory used / capacity':>26}"
    if proxy is not None:
        header += f" {'cost proxy':>12}"
    if plan.cost is not None:
        header += f" {'fwd ms':>8} {'bwd ms':>8} {'comm ms':>8} {'total ms':>9}"
    lines = [(f"plan by {plan.algorithm or '?'} for {task.name}: {task.num_tables} tables on {plan.num_devices} "
              "devices"), header]
    for r in range(plan.num_devices):
        mem = f"{format_bytes(used[r])} / {format_bytes(task.device_memory[r])}"
        line = f"{r:>6} {len(shards[r]):>6} {mem:>26}"
        if proxy is not None:
            line += f" {proxy[r]:>12.4g}"
        if plan.cost is not None:
            c = plan.cost.devices[r]
            line += f" {c.fwd_ms:>8.3f} {c.bwd_ms:>8.3f} {c.comm_ms:>8.3f} {c.total_ms:>9.3f}"
        lines.append(line)
    if plan.cost is not None:
        lines.append(f"plan cost ({plan.cost.source}): {plan.cost.plan_ms:.3f} ms on device {plan.cost.bottleneck}")
    return "\n".join(lines)
