"""Tables larger than any device: split into row pieces before planning, merged into row-wise shards after.

Every planner places whole tables (or column shards of them). A table that fits on no device is therefore
cut, before the planner runs, into ``k`` row pieces of ``ceil(rows / k)`` rows, with ``k = max(D,
ceil(memory / (PIECE_FILL x largest device)))``, each a table of its own in a derived task: ``1 / k`` of the
rows, looked up ``1 / k`` of the pooling (the uniform share: pieces must stay interchangeable, see below; the
merged plan is then priced with each range's real, skew-aware share, ``Task.lookup_share``, and search's
sharding moves may re-cut a skewed table by lookups). The planner places the pieces like any
table, under the same memory constraint, so every planner (heuristics, search, ilp, rl) handles such tables
alike and none needs to know about row sharding. The guard (``planners.guard``) weighs the merged plans,
priced on the original task, not the pieces' (``GuardedPlanner.plan_split``: the heuristics' two prices part
by 15-30% on oversize-22-8 test-0, stop 90). Afterwards the pieces on each rank are merged into one
contiguous row range (pieces are interchangeable, so any assignment of pieces to ranks is one of contiguous
ranges: ranks in ascending order take consecutive pieces) and the table becomes a ``row_wise`` placement
with even or uneven ranges. Pieces are never column-split (``Task.meta['row_pieces']`` marks them).

``PIECE_FILL`` < 1 leaves room on a device for other tables beside a piece; a task whose total memory is
short is refused before any planning, naming the bytes missing (``Task.check_fits``).

Pieces placed freely may share a rank, which makes uneven ranges on fewer ranks than TorchRec's row_wise
(one even block of ``ceil(rows / D)`` rows on every rank, the only form its kernels run), so such a plan
runs in autoshard's runtime but does not export. ``torchrec_rows=True`` (TorchRec's drop-in planner,
``autoshard plan --torchrec-rows``) places every oversize table in TorchRec's form before planning instead:
its blocks are fixed on every rank, the planner plans the other tables in the memory left, and ``merge``
adds the blocks back. The planner then does not weigh the blocks' kernel time, which is spread over every
rank alike (even rows: skew can still make one block hotter).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace

from autoshard.errors import InfeasibleError
from autoshard.io import format_bytes
from autoshard.plan import Plan, ShardingType, TablePlacement
from autoshard.shards import Shard, even_row_bounds, row_shards
from autoshard.tasks import Task

PIECE_FILL = 0.5
"""A piece takes at most this share of the largest device, so other tables still fit beside it."""

PIECES_KEY = "row_pieces"
"""``Task.meta`` key of the derived task: {piece table name: (table name, first row, end row)}."""


@dataclass(frozen=True)
class RowPieces:
    """The derived task and how its pieces map back to the original tables' rows."""

    task: Task
    """The task with every oversize table replaced by its pieces."""
    original: Task
    pieces: dict[str, tuple[str, int, int]]
    """Piece name -> (table name, first row, end row)."""
    fixed: tuple[TablePlacement, ...] = ()
    """Placements made before planning (``torchrec_rows``: TorchRec's even row_wise blocks on every rank)."""

    @property
    def left_to_plan(self) -> bool:
        """False when every table was placed before planning (the derived task then keeps a stand-in)."""
        return len(self.fixed) < self.original.num_tables

    def merge(self, plan: Plan | None) -> Plan:
        """The plan of the derived task as a plan of the original: pieces merged per rank into row ranges,
        the fixed placements added. ``None``: nothing was left to plan (``left_to_plan`` False)."""
        if plan is None:
            plan = Plan((), self.original.num_devices, task_name=self.task.name)
        by_table: dict[str, list[tuple[int, int]]] = {}  # table -> [(rank, rows)]
        placements = list(self.fixed)
        for p in plan.placements:
            if p.table not in self.pieces:
                placements.append(p)
                continue
            name, start, end = self.pieces[p.table]
            by_table.setdefault(name, []).append((p.shards[0].rank, end - start))
        for t in self.original.tables:
            if t.name not in by_table:
                continue
            rows_on: dict[int, int] = {}
            for rank, n in by_table[t.name]:
                rows_on[rank] = rows_on.get(rank, 0) + n
            shards, start = [], 0
            for rank in sorted(rows_on):
                shards.append(Shard(rank, 0, t.dim, start, start + rows_on[rank]))
                start += rows_on[rank]
            placements.append(TablePlacement(t.name, ShardingType.ROW_WISE, tuple(shards)))
        order = {t.name: i for i, t in enumerate(self.original.tables)}
        placements.sort(key=lambda p: order[p.table])
        return replace(plan, placements=tuple(placements), task_name=self.original.name)


def pieces_needed(task: Task, need: int) -> int:
    return max(2, math.ceil(need / (PIECE_FILL * max(task.device_memory))))


def torchrec_row_wise(table: str, rows: int, dim: int, num_devices: int) -> TablePlacement:
    """Row shards over every rank in TorchRec's even blocks of ceil(rows / D) rows (what its kernels run)."""
    counts = [b - a for a, b in itertools.pairwise(even_row_bounds(rows, num_devices))]
    return TablePlacement(table, ShardingType.ROW_WISE, row_shards(range(len(counts)), counts, dim))


def split_oversize(task: Task, torchrec_rows: bool = False) -> RowPieces | None:
    """The derived task if some table fits on no device alone, else None; ``torchrec_rows``: with such tables
    placed in TorchRec's row_wise form beforehand (module docstring)."""
    cap = max(task.device_memory)
    if all(task.table_memory(t) <= cap for t in task.tables):
        return None
    if torchrec_rows:
        return _place_torchrec_rows(task, cap)
    tables, pieces = [], {}
    for t in task.tables:
        need = task.table_memory(t)
        if need <= cap:
            tables.append(t)
            continue
        # at least one piece a device, cut at TorchRec's row blocks (ceil(rows / k)): when the planner puts
        # the D pieces on D distinct ranks, the merged plan is exactly TorchRec's row_wise and exports
        k = min(max(pieces_needed(task, need), task.num_devices), t.rows)
        bounds = even_row_bounds(t.rows, k)  # no empty pieces
        for i in range(len(bounds) - 1):
            name = f"{t.name}@rows{bounds[i]}-{bounds[i + 1]}"
            share = (bounds[i + 1] - bounds[i]) / t.rows
            tables.append(replace(t, name=name, rows=bounds[i + 1] - bounds[i],
                                  pooling_factor=t.pooling_factor * share))
            pieces[name] = (t.name, bounds[i], bounds[i + 1])
    if any(t.name in pieces for t in task.tables):
        raise InfeasibleError("row pieces' names collide with table names; rename the tables")
    meta = {**task.meta, PIECES_KEY: pieces}
    return RowPieces(replace(task, tables=tuple(tables), meta=meta), task, pieces)


def is_piece(task: Task, table_name: str) -> bool:
    """Whether ``table_name`` is a row piece of a derived task (never to be column-split)."""
    return table_name in task.meta.get(PIECES_KEY, {})


def _place_torchrec_rows(task: Task, cap: int) -> RowPieces:
    """Every table larger than ``cap`` as TorchRec's row_wise over every rank, the device memory it takes
    subtracted; the derived task holds the other tables (or, if none is left, a stand-in never planned)."""
    fixed, left = [], list(task.device_memory)
    for t in task.tables:
        if task.table_memory(t) <= cap:
            continue
        if t.rows < task.num_devices:
            raise InfeasibleError(f"table {t.name}: {t.rows} rows cannot be cut into TorchRec's row_wise "
                                  f"blocks over {task.num_devices} ranks; drop --torchrec-rows")
        placement = torchrec_row_wise(t.name, t.rows, t.dim, task.num_devices)
        for s in placement.shards:
            left[s.rank] -= task.table_memory(t, rows=s.num_rows(t.rows))
        short = [r for r, m in enumerate(left) if m < 0]
        if short:
            block = format_bytes(task.table_memory(t, rows=placement.shards[0].num_rows(t.rows)))
            raise InfeasibleError(
                f"table {t.name}: TorchRec's row_wise puts {block} on every rank, more than rank {short[0]} "
                "has left; give more memory or devices, or drop --torchrec-rows (autoshard's own row pieces "
                "need not be even)")
        fixed.append(placement)
    placed = {p.table for p in fixed}
    tables = tuple(t for t in task.tables if t.name not in placed) or task.tables[:1]
    # a rank a block filled keeps one byte: a task needs positive memory, and nothing fits in it
    derived = replace(task, tables=tables, device_memory=tuple(max(m, 1) for m in left))
    return RowPieces(derived, task, {}, tuple(fixed))
