"""How long a planner takes on 1 and on 2 torch threads, with the host idle and beside one busy process (what
a shared 2-vCPU host looks like when anything else runs): why ``run_planner`` plans on one thread.

Run: .venv/bin/python benchmarks/plan_threads.py --task TASK.json [--algo rl] [--repeats 2]

For each load (idle, one busy process) and thread count it plans the task (or the first of a tasks file)
``--repeats`` times with the planner's own ``plan`` (``run_planner`` would pin one thread itself:
``autoshard.threads``) and prints the seconds and the plan's predicted step, which must not move with the
threads. Stop 48 (docs/benchmarks.md) ran it on stop 45's 856-table x 128-device task.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from autoshard.costs.base import plan_cost
from autoshard.errors import AutoshardError
from autoshard.planners.base import PlannerOptions, make_planner
from autoshard.planners.guard import mean_model
from autoshard.tasks import load_tasks
from autoshard.threads import torch_threads

sys.path.insert(0, str(Path(__file__).resolve().parent))  # policy_threads.py, beside this script
from policy_threads import LOADS, host_load  # the same idle / busy host


def timed(planner, task, threads: int) -> tuple[float, float]:
    """(seconds, predicted step ms by the planner's mean model) of one planning at ``threads``."""
    with torch_threads(threads):
        t0 = time.perf_counter()
        plan = planner.plan(task)
        seconds = time.perf_counter() - t0
    return seconds, plan_cost(mean_model(getattr(planner, "cost_model", None)), task, plan).plan_ms


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--task", required=True, help="a task or tasks JSON file (the first task is used)")
    p.add_argument("--algo", default="rl", help="planner name (default rl)")
    p.add_argument("--repeats", type=int, default=2, help="plannings per load and thread count (default 2)")
    args = p.parse_args(argv)
    try:
        if args.repeats < 1:
            raise AutoshardError(f"--repeats {args.repeats} must be at least 1")
        task = load_tasks(args.task)[0]
        planner = make_planner(args.algo, PlannerOptions())
        timed(planner, task, 1)  # warm: the model's task caches, the first calls' allocations
        print(f"{task.num_tables} tables on {task.num_devices} devices, {args.algo}", flush=True)
        for load in LOADS:
            with host_load(load):
                for threads in (1, 2):
                    runs = [timed(planner, task, threads) for _ in range(args.repeats)]
                    seconds = ", ".join(f"{s:.2f}" for s, _ in runs)
                    steps = sorted({f"{ms:.6f}" for _, ms in runs})
                    print(f"{load}, {threads} thread(s): {seconds} s; predicted step {' / '.join(steps)} ms",
                          flush=True)
    except AutoshardError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
