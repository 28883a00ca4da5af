"""Shards: a table's pieces and where they live. The ground floor every later stage builds on.

A shard is a rectangle of one table, a row range times a column range, on one rank: TorchRec's
``ShardMetadata`` (``shard_offsets = [row_start, col_start]``, ``shard_sizes = [rows, cols]``,
``placement = "rank:R/DEVICE"``) is the model. A table's placement is a sharding type plus its shards:

- ``table_wise``: one shard, the whole table, on one rank;
- ``column_wise``: column blocks, each all rows, on distinct ranks;
- ``row_wise``: row ranges (even or uneven), each all columns, on distinct ranks;
- ``table_row_wise``: row ranges like ``row_wise``, on the ranks of one host;
- ``data_parallel``: the whole table on every listed rank (replicas, not a partition).

A row range of ``None`` means "every row of the table": table-wise and column-wise shards never need to know
the table's row count, so plans of those types (and plan files of version 1) are built without it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, NamedTuple

from autoshard.errors import PlanError

COLUMN_SHARD_MULTIPLE = 4
"""Column shards are multiples of 4 columns, as TorchRec's column_wise sharding and FBGEMM's kernels
expect."""


class ShardingType(str, Enum):
    """TorchRec's sharding type strings."""

    TABLE_WISE = "table_wise"
    COLUMN_WISE = "column_wise"
    ROW_WISE = "row_wise"
    TABLE_ROW_WISE = "table_row_wise"
    DATA_PARALLEL = "data_parallel"

    @property
    def splits_rows(self) -> bool:
        return self in (ShardingType.ROW_WISE, ShardingType.TABLE_ROW_WISE)

    @property
    def replicates(self) -> bool:
        return self is ShardingType.DATA_PARALLEL


@dataclass(frozen=True)
class Shard:
    """Columns ``[col_start, col_end)`` and rows ``[row_start, row_end)`` of a table, on ``rank``.

    ``row_end is None`` means up to the table's last row (the shard is not split by rows)."""

    rank: int
    col_start: int
    col_end: int
    row_start: int = 0
    row_end: int | None = None

    @property
    def cols(self) -> int:
        return self.col_end - self.col_start

    @property
    def splits_rows(self) -> bool:
        return self.row_start != 0 or self.row_end is not None

    def num_rows(self, table_rows: int) -> int:
        return (table_rows if self.row_end is None else self.row_end) - self.row_start

    def offsets(self) -> tuple[int, int]:
        """TorchRec's ``shard_offsets``: (first row, first column)."""
        return (self.row_start, self.col_start)

    def sizes(self, table_rows: int) -> tuple[int, int]:
        """TorchRec's ``shard_sizes``: (rows, columns)."""
        return (self.num_rows(table_rows), self.cols)

    def ref(self, table_index: int, replica: bool = False) -> ShardRef:
        """The shard as cost models see it (the table by its index in ``task.tables``)."""
        return ShardRef(table_index, self.cols, self.row_start, self.row_end, replica)

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"rank": self.rank, "columns": [self.col_start, self.col_end]}
        if self.splits_rows:
            d["rows"] = [self.row_start, self.row_end]
        return d

    @staticmethod
    def from_json(table: str, d: dict[str, Any]) -> Shard:
        try:
            rank = int(d["rank"])
            c0, c1 = (int(x) for x in d["columns"])
            rows = d.get("rows")
            r0, r1 = (0, None) if rows is None else (int(rows[0]), None if rows[1] is None else int(rows[1]))
        except (KeyError, TypeError, ValueError, IndexError, AttributeError):
            raise PlanError(f"plan: a shard of table {table} needs an integer 'rank', "
                            "'columns': [start, end] and optionally 'rows': [start, end]") from None
        return Shard(rank, c0, c1, r0, r1)


class ShardRef(NamedTuple):
    """A shard as cost models see it: the table by index into ``task.tables``, its column count, its row range
    (``row_end`` None = to the table's last row; table- and column-wise shards keep the defaults), and whether
    it is a data-parallel replica (a whole table that looks up only its own rank's samples)."""

    table: int
    dim: int
    row_start: int = 0
    row_end: int | None = None
    replica: bool = False

    def num_rows(self, table_rows: int) -> int:
        return (table_rows if self.row_end is None else self.row_end) - self.row_start

    def row_fraction(self, table_rows: int) -> float:
        """Share of the table's rows the shard holds (1.0 unless split by rows)."""
        if self.row_start == 0 and self.row_end is None:
            return 1.0
        return self.num_rows(table_rows) / table_rows

    @property
    def is_whole(self) -> bool:
        """A whole table looked up by the whole batch (table-wise, or a column shard of every row)."""
        return self.row_start == 0 and self.row_end is None and not self.replica


def column_shards(ranks: Sequence[int], dims: Sequence[int]) -> tuple[Shard, ...]:
    """Consecutive column blocks of widths ``dims`` on ``ranks``, every row."""
    out, start = [], 0
    for r, d in zip(ranks, dims, strict=True):
        out.append(Shard(int(r), start, start + int(d)))
        start += int(d)
    return tuple(out)


def even_row_bounds(rows: int, parts: int) -> list[int]:
    """Boundaries [0, ..., rows] of TorchRec's even row blocks: ``parts`` blocks of ceil(rows / parts) rows,
    the empty ones at the end dropped (what its row-wise sharding bucketises ids by)."""
    block = -(-rows // max(1, parts))
    return sorted({min(i * block, rows) for i in range(max(1, parts) + 1)})


def row_shards(ranks: Sequence[int], row_counts: Sequence[int], dim: int) -> tuple[Shard, ...]:
    """Consecutive row ranges of ``row_counts`` rows on ``ranks``, every column."""
    out, start = [], 0
    for r, n in zip(ranks, row_counts, strict=True):
        out.append(Shard(int(r), 0, int(dim), start, start + int(n)))
        start += int(n)
    return tuple(out)


def check_shards(table: str, rows: int, dim: int, sharding_type: ShardingType, shards: Sequence[Shard],
                 num_devices: int) -> None:
    """Raise PlanError (one line) unless ``shards`` are a valid ``sharding_type`` placement of a table of
    ``rows`` x ``dim``: ranks exist, the rectangles cover the table exactly once per column block (replicas:
    each is the whole table, on distinct ranks), and the type's own rules hold."""
    if not shards:
        raise PlanError(f"table {table}: no shards")
    bad = [s.rank for s in shards if not 0 <= s.rank < num_devices]
    if bad:
        raise PlanError(f"table {table}: rank out of range 0..{num_devices - 1} "
                        f"in {[s.rank for s in shards]}")
    for s in shards:
        end = rows if s.row_end is None else s.row_end
        if not (0 <= s.col_start < s.col_end <= dim and 0 <= s.row_start < end <= rows):
            raise PlanError(f"table {table}: shard columns [{s.col_start}, {s.col_end}) rows [{s.row_start}, "
                            f"{end}) lie outside the table's {rows} rows x {dim} columns")
    ranks = [s.rank for s in shards]
    if sharding_type is ShardingType.DATA_PARALLEL:
        if any(s.cols != dim or s.splits_rows and s.num_rows(rows) != rows for s in shards):
            raise PlanError(f"table {table}: data_parallel replicas must each hold the whole table")
        if len(set(ranks)) != len(ranks):
            raise PlanError(f"table {table}: data_parallel replicas must be on distinct ranks, got {ranks}")
        return
    if sharding_type is ShardingType.TABLE_WISE and len(shards) != 1:
        raise PlanError(f"table {table}: table_wise needs exactly one rank, got {ranks}")
    if sharding_type in (ShardingType.COLUMN_WISE, ShardingType.ROW_WISE, ShardingType.TABLE_ROW_WISE) \
            and len(set(ranks)) != len(ranks):
        kind = "column" if sharding_type is ShardingType.COLUMN_WISE else "row"
        raise PlanError(f"table {table}: {kind} shards must be on distinct ranks, got {ranks}")
    if not sharding_type.splits_rows and any(s.splits_rows and s.num_rows(rows) != rows for s in shards):
        raise PlanError(f"table {table}: {sharding_type.value} shards hold every row; "
                        "use row_wise to split rows")
    if sharding_type.splits_rows and any(s.cols != dim for s in shards):
        raise PlanError(f"table {table}: {sharding_type.value} shards hold every column; use column_wise "
                        "to split columns")
    if sharding_type is ShardingType.COLUMN_WISE and any(s.cols % COLUMN_SHARD_MULTIPLE for s in shards):
        raise PlanError(f"table {table}: column shard dims {[s.cols for s in shards]} must be multiples of "
                        f"{COLUMN_SHARD_MULTIPLE}")
    _check_cover(table, rows, dim, shards)


def _check_cover(table: str, rows: int, dim: int, shards: Sequence[Shard]) -> None:
    """Column blocks partition [0, dim); within each block, row ranges partition [0, rows)."""
    blocks: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for s in shards:
        blocks.setdefault((s.col_start, s.col_end), []).append((s.row_start, rows if s.row_end is None
                                                                else s.row_end))
    col = 0
    for c0, c1 in sorted(blocks):
        if c0 != col:
            raise PlanError(f"table {table}: column shards {sorted(blocks)} do not add up to its dim {dim} "
                            "(gap or overlap)")
        row = 0
        for r0, r1 in sorted(blocks[(c0, c1)]):
            if r0 != row:
                raise PlanError(f"table {table}: row ranges of columns [{c0}, {c1}) do not cover its {rows} "
                                f"rows exactly once (gap or overlap at row {min(r0, row)})")
            row = r1
        if row != rows:
            raise PlanError(f"table {table}: row ranges of columns [{c0}, {c1}) end at row {row} of {rows}")
        col = c1
    if col != dim:
        raise PlanError(f"table {table}: shard dims {[c1 - c0 for c0, c1 in sorted(blocks)]} "
                        f"do not add up to its dim {dim}")
