"""Which kinds of split shard a cost model has seen on the machine it prices (``LearnedCostModel.
unverified_split_kinds``): one place for what a split shard is, on a task and in a profile record.

Why: a model adapted to another machine (``fine_tune.fine_tune(..., adapt_hardware=True)``) learns that
machine from a few dozen devices, and the loop's devices are the planners' plans, which are table-wise
unless a planner splits. Its ensemble's members all continue from the pre-training's weights, so on a split
shard they agree on how the OLD machine scales it, and their spread cannot show that the new one scales it
otherwise. Stop 29 (docs/benchmarks.md), an H100: the shipped CPU model adapted on 36 whole-table devices
priced the three devices holding column halves of a plan 16-21% below what they measured, where whole-table
devices measured 3-16% below their price, and search's plan, kept by the guard for a predicted 5% gain,
measured 15% worse than the heuristic plan it replaced.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from autoshard.shards import ShardRef
from autoshard.tasks import Task

SPLIT_KINDS = ("column", "row")
"""The kinds of split shard a profile record can hold: a column shard (fewer columns than its table) and a
row shard (a range of its rows). Data-parallel replicas are never recorded (``pipeline.refresh``)."""
UNVERIFIED_SPLIT_REL = 0.2
"""Least spread, relative to its cost, of a device holding a kind of split shard its model never saw on the
machine it was adapted to: the under-pricing measured on such devices, 16-21% for column halves on an H100
(stop 29; whole-table devices there were priced 3-16% high), and 4-19% relative to whole-table devices for
row shards on this project's CPUs, where no profile holds them (stop 28, ``LearnedCostModel.
row_move_margin``). With the guard's k = 1 a plan whose slowest device holds one must be predicted about 20%
cheaper than the best heuristic plan to be kept."""

UNTRAINED_ROW_MOVE_MARGIN = 0.185
"""``LearnedCostModel.row_move_margin`` of a model pre-trained without row shards: 1 - the lowest ratio
measured between how such a model prices devices holding row shards and devices holding whole tables
(predicted / measured, medians), 0.815 on stop 23's DLRM-100 (8) run; 0.815-0.958 on all 11 archived CPU
runs with row-wise devices and 0.83-0.89 in stop 28's quickstarts (``benchmarks/row_device_error.py``). Such
a model prices a row shard as the smaller table it is featured as, and a row-wise plan that promised less
measured worse than the heuristic plan it left (stop 28: two of three quickstarts clearly worse on a task
that way). Profiles with row-cut samples (``BroadDesign.row_share``, stop 30) teach the networks row
shards."""


def shard_split_kinds(task: Task, shard: ShardRef) -> tuple[str, ...]:
    """The ``SPLIT_KINDS`` ``shard`` is of (none for a whole table or a replica)."""
    kinds = []
    if shard.dim < task.tables[shard.table].dim:
        kinds.append("column")
    if not shard.replica and (shard.row_start > 0 or shard.row_end is not None):
        kinds.append("row")
    return tuple(kinds)


def record_split_kinds(pool: Any, records: Iterable[Any]) -> set[str]:
    """The ``SPLIT_KINDS`` among profile ``records`` (``hardware.profile_records.CostRecord``) of tables in
    ``pool`` (a record's own ``table_specs`` first)."""
    dims = {t.name: t.dim for t in pool.tables}
    kinds: set[str] = set()
    for r in records:
        own = {t.name: t.dim for t in r.own_tables()} if r.table_specs else dims
        if any(d < own.get(name, d) for name, d in zip(r.tables, r.dims)):
            kinds.add("column")
        if any((r0, r1) != (0, None) for r0, r1 in r.row_ranges):
            kinds.add("row")
    return kinds


__all__ = ("SPLIT_KINDS", "UNTRAINED_ROW_MOVE_MARGIN", "UNVERIFIED_SPLIT_REL", "record_split_kinds",
           "shard_split_kinds")
