"""Column-wise sharding helpers: a plan as a flat list of shards plus a rank per shard, and column splits.

Search planners work on a *layout*: a tuple of ``ShardRef(table, dim)`` sorted by table index, where the
shards of one table are consecutive and in column order (so shard ``k`` of a table holds the columns after
shards ``0..k-1``). A layout plus one rank per shard is a plan; ``to_plan`` and ``from_plan`` convert both
ways. Keeping shards sorted by table makes a device's shards come out in the same order as
``Plan.device_shards``, so a cost model sees identical inputs whichever way a plan is evaluated.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from autoshard.errors import AutoshardError, PlanError
from autoshard.plan import COLUMN_SHARD_MULTIPLE, Plan, ShardingType, TablePlacement
from autoshard.shards import ShardRef
from autoshard.tables.table import Table
from autoshard.tasks import Task

log = logging.getLogger(__name__)

Layout = tuple[ShardRef, ...]


def can_halve(dim: int) -> bool:
    """Whether a shard of ``dim`` columns splits into two shards whose dims are multiples of 4."""
    return dim % COLUMN_SHARD_MULTIPLE == 0 and dim >= 2 * COLUMN_SHARD_MULTIPLE


def halve(dim: int) -> tuple[int, int]:
    """Two column shards as equal as multiples of 4 allow (24 -> 12+12, 12 -> 4+8), the smaller first."""
    if not can_halve(dim):
        raise AutoshardError(
            f"a shard of {dim} columns cannot be halved into multiples of {COLUMN_SHARD_MULTIPLE}; "
            f"it needs a dim that is a multiple of {COLUMN_SHARD_MULTIPLE} "
            f"and at least {2 * COLUMN_SHARD_MULTIPLE}"
        )
    a = (dim // 2) // COLUMN_SHARD_MULTIPLE * COLUMN_SHARD_MULTIPLE
    return a, dim - a


def even_split(dim: int, parts: int) -> tuple[int, ...]:
    """``parts`` column shards of a ``dim``-column table, multiples of 4 as equal as possible, adding up to
    dim."""
    if parts < 1:
        raise AutoshardError(f"cannot split a table into {parts} column shards; use 1 or more")
    if parts == 1:
        return (dim,)
    if dim % COLUMN_SHARD_MULTIPLE or dim < parts * COLUMN_SHARD_MULTIPLE:
        raise AutoshardError(
            f"a table of dim {dim} cannot be split into {parts} column shards of multiples of "
            f"{COLUMN_SHARD_MULTIPLE}; use at most {dim // COLUMN_SHARD_MULTIPLE} shards "
            "of a dim divisible by 4"
        )
    units = dim // COLUMN_SHARD_MULTIPLE
    base, extra = divmod(units, parts)
    return tuple((base + (1 if k < extra else 0)) * COLUMN_SHARD_MULTIPLE for k in range(parts))


def table_wise_layout(task: Task) -> Layout:
    """Every table whole: one shard per table."""
    return tuple(ShardRef(i, t.dim) for i, t in enumerate(task.tables))


def split_shard(layout: Layout, position: int) -> Layout:
    """The layout with shard ``position`` halved in place (its two halves stay adjacent, in column order)."""
    s = layout[position]
    a, b = halve(s.dim)
    return layout[:position] + (ShardRef(s.table, a), ShardRef(s.table, b)) + layout[position + 1:]


def split_table(layout: Layout, table: int) -> Layout:
    """The layout with every shard of ``table`` halved in place (2 column shards of 8 -> 4 of 4): one step
    from an even split to the next even one, which halving one shard at a time reaches only through an
    uneven layout (8 + 4 + 4) that a beam may drop."""
    out: list[ShardRef] = []
    for s in layout:
        out.extend((ShardRef(s.table, a) for a in halve(s.dim)) if s.table == table else (s,))
    return tuple(out)


def shards_per_table(layout: Layout, num_tables: int) -> np.ndarray:
    """How many column shards each table has in ``layout``."""
    return np.bincount(np.fromiter((s.table for s in layout), dtype=np.int64, count=len(layout)),
                       minlength=num_tables)


def layout_key(layout: Layout) -> Layout:
    """A canonical key: layouts reached by splitting in different orders compare equal."""
    return tuple(sorted(layout))


def shard_memory(task: Task, layout: Layout) -> np.ndarray:
    """Bytes each shard takes on a device (weights + optimizer state), int64."""
    return np.array([task.shard_memory(s) for s in layout], dtype=np.int64)


def check_ranks(layout: Layout, ranks: Sequence[int]) -> np.ndarray:
    """``ranks`` as an array, one per shard of ``layout``, or PlanError naming the mismatch."""
    ranks = np.asarray(ranks)
    if len(ranks) != len(layout):
        raise PlanError(f"{len(layout)} shards but {len(ranks)} ranks; give one rank per shard")
    return ranks


def device_contents(layout: Layout, ranks: Sequence[int], num_devices: int) -> list[list[ShardRef]]:
    """The shards each rank holds, in layout order (= ``Plan.device_shards`` order for ``to_plan``'s plan)."""
    ranks = check_ranks(layout, ranks)
    order = np.argsort(ranks, kind="stable")  # stable: each device's shards stay in layout order
    items = list(map(layout.__getitem__, order.tolist()))
    bounds = np.searchsorted(ranks[order], np.arange(num_devices + 1)).tolist()
    return [items[a:b] for a, b in itertools.pairwise(bounds)]


def to_plan(task: Task, layout: Layout, ranks: Sequence[int], algorithm: str) -> Plan:
    """A plan from a layout and one rank per shard: whole tables table-wise, split ones column-wise."""
    check_ranks(layout, ranks)
    groups: dict[int, list[tuple[int, int]]] = {}
    for s, r in zip(layout, ranks):
        groups.setdefault(s.table, []).append((int(r), s.dim))
    placements = []
    for i in sorted(groups):
        name = task.tables[i].name
        shards = groups[i]
        if len(shards) == 1 and shards[0][1] == task.tables[i].dim:
            placements.append(TablePlacement.table_wise(name, shards[0][0], shards[0][1]))
        else:
            placements.append(TablePlacement.column_wise(name, [r for r, _ in shards],
                                                         [d for _, d in shards]))
    return Plan(tuple(placements), task.num_devices, algorithm, task.name)


def from_plan(task: Task, plan: Plan) -> tuple[Layout, np.ndarray]:
    """The layout and ranks of a table- and column-wise plan of ``task`` (the inverse of ``to_plan``)."""
    index = {t.name: i for i, t in enumerate(task.tables)}
    by_table: dict[int, TablePlacement] = {}
    for p in plan.placements:
        if p.table not in index:
            raise PlanError(f"plan places table {p.table}, which is not in the task")
        by_table[index[p.table]] = p
    layout: list[ShardRef] = []
    ranks: list[int] = []
    for i in sorted(by_table):
        p = by_table[i]
        if p.sharding_type not in (ShardingType.TABLE_WISE, ShardingType.COLUMN_WISE):
            raise PlanError(f"table {p.table} is placed {p.sharding_type.value}; column-split layouts hold "
                            "table_wise and column_wise placements only")
        for r, d in zip(p.ranks, p.shard_dims):
            layout.append(ShardRef(i, int(d)))
            ranks.append(int(r))
    return tuple(layout), np.array(ranks, dtype=np.int64)


def column_shard_task(task: Task, layout: Layout) -> Task:
    """``task`` with one table per shard of ``layout``: a column shard is its table at the shard's dim (its
    features, memory and traffic are the shard's: every column shard receives all of its table's ids and
    sends its own columns), named ``<table>#col<k>``; whole tables stay as they are."""
    seen: dict[int, int] = {}
    tables: list[Table] = []
    for s in layout:
        t = task.tables[s.table]
        k = seen[s.table] = seen.get(s.table, -1) + 1
        tables.append(t if s.dim == t.dim else replace(t, name=f"{t.name}#col{k}", dim=s.dim))
    return replace(task, tables=tuple(tables), name=f"{task.name} (column shards)")


def merge_column_shards(task: Task, layout: Layout, ranks: np.ndarray, algorithm: str) -> Plan:
    """The plan of ``layout`` placed on ``ranks``, where a table's column shards that landed on one rank are
    merged into one shard of their summed dims (TorchRec's column-wise puts a table's shards on distinct
    ranks; which columns a shard holds does not change its cost)."""
    dims: dict[tuple[int, int], int] = {}
    for s, r in zip(layout, ranks):
        dims[(s.table, int(r))] = dims.get((s.table, int(r)), 0) + s.dim
    merged = [(ShardRef(table, dim), rank) for (table, rank), dim in dims.items()]
    return to_plan(task, [m[0] for m in merged], [m[1] for m in merged], algorithm)


AUTO_SPLIT_PAIRS = 20_000
"""``column_splits="auto"`` (``rl``, ``ilp``) searches column splits for tasks of at most this many tables x
devices (production-40-8: 320; 856 tables on 128 devices: 109,568, where it would triple rl's planning
time)."""


def splits_wanted(mode: str, task: Task) -> bool:
    """Whether a planner set to ``column_splits=mode`` ("on", "off", "auto") searches column splits on
    ``task``."""
    return task.num_devices > 1 and (mode == "on" or (mode == "auto" and not beyond_split_search(task)))


def beyond_split_search(task: Task) -> bool:
    """Whether ``task`` (more than one device) is larger than ``column_splits="auto"`` searches splits for."""
    return task.num_devices > 1 and task.num_tables * task.num_devices > AUTO_SPLIT_PAIRS
