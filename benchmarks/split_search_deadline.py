"""How NeuroShard's column-split beam search spends a time budget (rl's ``split_search_s``): per task, the
layout found with the deadline against the layout found without one.

Run: .venv/bin/python benchmarks/split_search_deadline.py TASKS.json [--tasks 3] [--budget 1.0]
     [--cost-model M]

TASKS.json is a task list (``autoshard tasks``, or a bench directory's ``test_tasks.json``). Prints per task
the column splits, the model's plan cost and the seconds of the search with the deadline and without; the
planning model is the shipped default (priced at its risk factor) unless ``--cost-model`` is given. Run it
with ``PYTHONPATH`` pointing at another checkout's ``src`` to compare code versions.

Measured at stop 21 (AMD EPYC VM): docs/benchmarks.md, "neuroshard's split search under a deadline".
"""

from __future__ import annotations

import argparse
import sys
import time

from autoshard.costs.loading import load_cost_model
from autoshard.errors import AutoshardError
from autoshard.planners.base import PlannerOptions
from autoshard.planners.neuroshard import NeuroShardConfig, NeuroShardPlanner
from autoshard.planners.pricing import planning_model
from autoshard.tasks import load_tasks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tasks", help="a task list (JSON)")
    parser.add_argument("--tasks", dest="count", type=int, default=3,
                        help="how many of its tasks (default 3)")
    parser.add_argument("--budget", type=float, default=1.0, help="the search's seconds (default 1.0, rl's)")
    parser.add_argument("--cost-model", help="planning model checkpoint (default: the shipped one)")
    args = parser.parse_args(argv)
    try:
        if args.count < 1 or args.budget <= 0:
            raise AutoshardError("--tasks must be >= 1 and --budget > 0")
        tasks = load_tasks(args.tasks)[: args.count]
        # priced by the model, nothing timed here: any host
        given = load_cost_model(args.cost_model, allow_other_hardware=True) if args.cost_model else None
        model = planning_model(PlannerOptions(cost_model=given))
    except AutoshardError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print("| task | with the deadline: splits, model ms, s | without: splits, model ms, s |")
    print("|---|---|---|")
    for task in tasks:
        searcher = NeuroShardPlanner(model, NeuroShardConfig(sharding_moves=0))
        row = []
        for deadline in (args.budget, None):
            began = time.perf_counter()
            layout, _, cost = searcher.search(task, None if deadline is None else began + deadline)
            row.append(f"{len(layout) - task.num_tables}, {cost:.3f}, {time.perf_counter() - began:.2f}")
        print(f"| {task.name} | {row[0]} | {row[1]} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
