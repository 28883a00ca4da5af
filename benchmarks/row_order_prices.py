"""What the rank order of a row-wise table's ranges is worth: every plan of a bench run that splits a table
by rows, priced as it is and with its ranges handed to its ranks in the best order found, by a planning
model's mean, no hardware timed.

Run: .venv/bin/python benchmarks/row_order_prices.py RESULTS [--task NAME ...] [--model M.pt]

RESULTS is an ``autoshard bench`` results file (plain or gzipped: ``benchmarks/runs/``); its tasks, plans and
comm fit are used (``--task``: only these, repeatable; ``--model``: the pricing model, default the shipped
one). A merged plan of row pieces (``planners.row_split``) gives its ranks their ranges in ascending rank
order, so the hottest rows of a skewed table (each range carries its own share of the lookups,
``Task.lookup_share``) go to the lowest rank holding pieces, whatever else that rank holds. Here every
row-wise table's order is improved by pairwise swaps of two ranks' ranges (each rank keeps its row count,
so memory is unchanged) until no swap lowers the plan's price. Prints per task and plan the price as
planned, the best order's, their ratio and the prices tried; then the least ratio and the geometric mean.

Measured at stop 91 (AMD EPYC VM, 6 s): stop 83's oversize-22-8 priced by the seed-1 wide model (shipped
since stop 90), 72 plans: geometric mean 0.998, least 0.972 (docs/benchmarks.md, "Stop 91").
"""

from __future__ import annotations

import itertools
import math
import sys
from dataclasses import replace
from pathlib import Path

from autoshard.costs.base import CostModel, plan_cost
from autoshard.errors import AutoshardError
from autoshard.plan import Plan, ShardingType
from autoshard.shards import Shard
from autoshard.tasks import Task

sys.path.insert(0, str(Path(__file__).resolve().parent))  # row_pieces_prices.py, beside this script
from row_pieces_prices import run_and_model

SKIPPED = ("random", "round_robin")
"""Plans not worth pricing (no planner a user would keep)."""


def in_order(task: Task, plan: Plan, table: str, ranks: list[int]) -> Plan:
    """``plan`` with ``table``'s row ranges handed out in rank order ``ranks`` (each rank keeps its rows)."""
    placement = next(p for p in plan.placements if p.table == table)
    end = next(t.rows for t in task.tables if t.name == table)
    by_rank = {s.rank: s for s in placement.shards}
    rows = {r: (s.row_end if s.row_end is not None else end) - s.row_start for r, s in by_rank.items()}
    shards, start = [], 0
    for rank in ranks:
        shards.append(Shard(rank, by_rank[rank].col_start, by_rank[rank].col_end, start, start + rows[rank]))
        start += rows[rank]
    moved = replace(placement, shards=tuple(shards))
    return replace(plan, placements=tuple(moved if p.table == table else p for p in plan.placements))


def best_order(model: CostModel, task: Task, plan: Plan) -> tuple[Plan, float, int]:
    """(plan, price, prices tried): every row-wise table's ranges reordered by pairwise swaps of two ranks
    until none lowers the price."""
    price, tried = plan_cost(model, task, plan).plan_ms, 0
    tables = [p.table for p in plan.placements if p.sharding_type == ShardingType.ROW_WISE]
    improved = True
    while improved:
        improved = False
        for table in tables:
            ranks = [s.rank for s in next(p for p in plan.placements if p.table == table).shards]
            for i, j in itertools.combinations(range(len(ranks)), 2):
                swapped = list(ranks)
                swapped[i], swapped[j] = swapped[j], swapped[i]
                candidate = in_order(task, plan, table, swapped)
                cost = plan_cost(model, task, candidate).plan_ms
                tried += 1
                if cost < price * (1 - 1e-9):
                    plan, price, ranks, improved = candidate, cost, swapped, True
    return plan, price, tried


def main(argv: list[str] | None = None) -> int:
    read = run_and_model(__doc__, argv)
    if read is None:
        return 2
    args, run, tasks, mean = read
    try:  # every plan read before any pricing: a malformed one is one error line, not a traceback
        plans = [(task, result["algorithm"], Plan.from_json(result["plan"]))
                 for entry, task in zip(run["tasks"], tasks, strict=True)
                 if not args.task or task.name in args.task
                 for result in entry["results"]
                 if result.get("ok") and result.get("plan") and result["algorithm"] not in SKIPPED]
    except (AutoshardError, KeyError, TypeError, ValueError) as e:
        print(f"error: {args.results}: {e}", file=sys.stderr)
        return 2
    ratios = []
    print("task                      plan                 as planned   best order   ratio   prices tried")
    for task, algorithm, plan in plans:
        if not any(p.sharding_type == ShardingType.ROW_WISE for p in plan.placements):
            continue
        planned = plan_cost(mean, task, plan).plan_ms
        _, best, tried = best_order(mean, task, plan)
        ratios.append(best / planned)
        print(f"{task.name:<25} {algorithm:<20} {planned:10.2f} {best:12.2f} {best / planned:7.3f} "
              f"{tried:14d}")
    if not ratios:
        print("no plan splits a table by rows")
        return 0
    print(f"{len(ratios)} plans: least ratio {min(ratios):.3f}, geometric mean "
          f"{math.exp(sum(map(math.log, ratios)) / len(ratios)):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
