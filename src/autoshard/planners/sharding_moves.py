"""Row-wise and data-parallel moves: after ``search`` has placed the shards, try turning single tables into
data-parallel replicas on every rank, or into TorchRec's row-wise shards over every rank, keeping a change
only when the cost model's step cost drops.

Top to bottom: price the plan (``costs.base.plan_cost``: the step); take the table-wise tables in
descending predicted cost alone (the hot ones first: a replica spares their id and output traffic, a row
split spreads their kernel work); for each, price the plan with that table replicated, then with it
row-split in TorchRec's even blocks (so the plan still exports), then row-split in ranges of equal lookup
shares (a skewed table's hot rows in a short range: TorchRec's estimator assumes every row shard gets an
equal share of the lookups, and its kernels bucketise by even blocks, so only autoshard's runtime runs
these; ``uneven_rows``, off by default), and keep the cheapest if it beats the current plan by
``min_gain`` (a row-wise one by the cost model's ``row_move_margin`` where it has one: the learned model
prices row-wise devices low, so a small promised gain is not a gain); stop after ``tries`` tables or at the
deadline. Memory is checked exactly (a replica costs
the whole table on every rank). Row pieces of tables larger than a device (``row_split``) are left alone.

When it pays: a replica removes a table from the all-to-alls but adds an all-reduce of its whole gradient
(rows x dim x 4 bytes, 2 (D - 1) / D of it per rank) and, if no other replica exists, one more collective's
latency; a row split divides the kernel work but multiplies the pooled-output traffic by the ranks. So
replicas pay for small, hot tables on a fast network, row splits for kernel-bound devices.
"""

from __future__ import annotations

import itertools
import logging
import time
from dataclasses import replace

import numpy as np

from autoshard.costs.base import CostModel, plan_cost
from autoshard.plan import Plan, ShardingType, TablePlacement
from autoshard.planners.row_split import is_piece, torchrec_row_wise
from autoshard.shards import ShardRef, row_shards
from autoshard.tables.lookups import lookup_balanced_bounds
from autoshard.tables.table import Table
from autoshard.tasks import Task

log = logging.getLogger(__name__)


def _with(plan: Plan, placement: TablePlacement) -> Plan:
    return replace(plan, placements=tuple(placement if p.table == placement.table else p
                                          for p in plan.placements))


def _placement_memory(task: Task, placement: TablePlacement, table: int) -> np.ndarray:
    """(D,) bytes ``placement``'s shards take on each rank (what ``Plan.memory_used`` sums for it): a move
    changes one table's placement, so a candidate's memory is the plan's with that table's swapped, not
    its 856 tables summed again. ``table``: the placed table's index in ``task``."""
    replica = placement.sharding_type.replicates
    out = np.zeros(task.num_devices, dtype=np.int64)
    for s in placement.shards:
        out[s.rank] += task.shard_memory(s.ref(table, replica))
    return out


def lookup_balanced_row_wise(table: Table, num_devices: int) -> TablePlacement | None:
    """Row shards over every rank in ranges of about equal lookup shares (``tables.lookups.
    lookup_balanced_bounds``), or None where they are TorchRec's even blocks anyway. TorchRec 1.8 cannot run
    them (it bucketises ids by even blocks); autoshard's runtime (``verify --runtime autoshard``) can."""
    bounds = lookup_balanced_bounds(table, num_devices)
    counts = [b - a for a, b in itertools.pairwise(bounds)]
    placement = TablePlacement(table.name, ShardingType.ROW_WISE,
                               row_shards(range(len(counts)), counts, table.dim))
    even = torchrec_row_wise(table.name, table.rows, table.dim, num_devices)
    return None if placement.shards == even.shards else placement


def improve(task: Task, plan: Plan, model: CostModel, tries: int = 8, min_gain: float = 1e-3,
            deadline: float | None = None, uneven_rows: bool = False,
            who: str = "search") -> tuple[Plan, list[str]]:
    """``plan`` with the row-wise and data-parallel moves that lower the step cost, and what was changed
    (``uneven_rows``: also try lookup-balanced uneven row ranges, which TorchRec cannot export; ``who``:
    the planner the log line names)."""
    if task.num_devices <= 1 or tries <= 0:
        return plan, []
    cost = plan_cost(model, task, plan).plan_ms
    # a learned model prices a candidate from the plan's device states with the one table swapped
    # (``costs.learned.swaps``); any other model, the candidate plan whole
    swaps = getattr(model, "placement_swaps", None)
    states = swaps(task, plan) if callable(swaps) else None
    row_gain = max(min_gain, float(getattr(model, "row_move_margin", 0.0)))
    alone = model.device_costs(task, [[ShardRef(i, t.dim)] for i, t in enumerate(task.tables)]).sum(axis=1)
    capacity = np.asarray(task.device_memory, dtype=np.int64)
    used = np.asarray(plan.memory_used(task), dtype=np.int64)
    changes: list[str] = []
    tried = 0
    for i in np.argsort(-alone, kind="stable").tolist():
        if tried >= tries or (deadline is not None and time.perf_counter() > deadline):
            break
        t = task.tables[i]
        current = plan.placement(t.name)
        if is_piece(task, t.name) or current.sharding_type is not ShardingType.TABLE_WISE:
            continue
        tried += 1
        options = [("data_parallel", TablePlacement.data_parallel(t.name, range(task.num_devices), t.dim))]
        if t.rows >= task.num_devices:
            options.append(("row_wise", torchrec_row_wise(t.name, t.rows, t.dim, task.num_devices)))
            balanced = lookup_balanced_row_wise(t, task.num_devices) if uneven_rows else None
            if balanced is not None:
                options.append(("row_wise (lookup-balanced)", balanced))
        best = None
        without = used - _placement_memory(task, current, i)
        for label, placement in options:
            candidate_used = without + _placement_memory(task, placement, i)
            if np.any(candidate_used > capacity):
                continue
            if states is not None:
                c = states.step_ms(placement)
            else:
                c = plan_cost(model, task, _with(plan, placement)).plan_ms
            gain = min_gain if placement.sharding_type is ShardingType.DATA_PARALLEL else row_gain
            if c < cost * (1 - gain) and (best is None or c < best[0]):
                best = (c, placement, label, candidate_used)
        if best is not None:
            changes.append(f"{t.name} -> {best[2]} ({cost:.3f} -> {best[0]:.3f} ms)")
            cost, plan, used = best[0], _with(plan, best[1]), best[3]
            if states is not None:
                states = states.swapped(best[1])
    if changes:
        log.info("%s: sharding moves %s", who, "; ".join(changes))
    return plan, changes
