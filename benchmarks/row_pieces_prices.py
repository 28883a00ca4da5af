"""What the row pieces hide: on tasks with a table larger than any device, each guard heuristic's plan priced
on the derived task of row pieces (each piece an even share of its table's lookups, as the planners plan
it) and merged into row-wise tables on the original task (each range its own share, as it runs), by a
planning model's mean, no hardware timed.

Run: .venv/bin/python benchmarks/row_pieces_prices.py RESULTS [--task NAME ...] [--model M.pt]

RESULTS is an ``autoshard bench`` results file (plain or gzipped: ``benchmarks/runs/``); its tasks and comm
fit are used (``--task``: only these, repeatable). ``--model`` plans nothing, only prices (default the
shipped model). Prints per task and heuristic the two prices and their ratio, and which heuristic each
price would make the guard's H* (``planners.guard.guard_reference``): until stop 90 the guard weighed the
pieces' prices (``GuardedPlanner.plan_split``).

Measured at stop 90 (AMD EPYC VM, seconds): oversize-22-8 test-0 of stop 83's run with the seed-1 wide
model, docs/benchmarks.md, "Stop 90".
"""

from __future__ import annotations

import argparse
import sys

import torch

from autoshard.costs.base import CostModel, plan_cost
from autoshard.costs.comm import AlphaBeta
from autoshard.costs.loading import SHIPPED_COST_MODEL, load_cost_model, resolve_cost_model
from autoshard.errors import AutoshardError
from autoshard.io import read_json
from autoshard.planners.base import PlannerOptions, make_planner
from autoshard.planners.guard import GUARD_HEURISTICS, guard_reference
from autoshard.planners.row_split import split_oversize
from autoshard.tasks import Task


def run_and_model(doc: str, argv: list[str] | None
                  ) -> tuple[argparse.Namespace, dict, list[Task], CostModel] | None:
    """Parse ``RESULTS [--task NAME ...] [--model M.pt]`` and read the run, its tasks and the model's mean
    with the run's comm fit (shared with ``row_order_prices.py``); None after one ``error:`` line on bad
    input."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("results", help="an autoshard bench results file")
    ap.add_argument("--task", action="append", default=[], help="only this task (repeatable)")
    ap.add_argument("--model", default=str(SHIPPED_COST_MODEL), help="the pricing model")
    args = ap.parse_args(argv)
    try:
        run = read_json(args.results)
        if not isinstance(run, dict) or not run.get("tasks") or "comm" not in run:
            raise AutoshardError(f"{args.results} is not a finished bench's results file")
        tasks = [Task.from_json(t["task"]) for t in run["tasks"]]
        unknown = sorted(set(args.task) - {t.name for t in tasks})
        if unknown:
            raise AutoshardError(f"no task {unknown[0]!r} in {args.results}")
        model = load_cost_model(args.model, allow_other_hardware=True)
    except (AutoshardError, OSError, KeyError, TypeError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return None
    torch.set_num_threads(1)
    return args, run, tasks, resolve_cost_model(model.with_comm(AlphaBeta.from_json(run["comm"])), 0.0)


def main(argv: list[str] | None = None) -> int:
    read = run_and_model(__doc__, argv)
    if read is None:
        return 2
    args, _, tasks, mean = read
    heuristics = {h: make_planner(h, PlannerOptions()) for h in GUARD_HEURISTICS}
    for task in tasks:
        if args.task and task.name not in args.task:
            continue
        pieces = split_oversize(task)
        if pieces is None:
            print(f"{task.name}: every table fits a device (no pieces)")
            continue
        on_pieces = {h: p.plan(pieces.task) for h, p in heuristics.items()}
        merged = {h: pieces.merge(plan) for h, plan in on_pieces.items()}
        print(f"{task.name}: {len(pieces.pieces)} pieces; heuristic  pieces ms  merged ms  merged / pieces")
        for h in heuristics:
            a = plan_cost(mean, pieces.task, on_pieces[h]).plan_ms
            b = plan_cost(mean, task, merged[h]).plan_ms
            print(f"  {h:<20} {a:9.2f} {b:10.2f} {b / a:9.3f}")
        by_pieces = guard_reference(pieces.task, on_pieces, mean)[0]
        by_merged = guard_reference(task, merged, mean)[0]
        print(f"  H* by the pieces' prices: {by_pieces}; by the merged prices: {by_merged}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
