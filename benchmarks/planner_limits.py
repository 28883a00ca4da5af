"""Each learned planner's planning time and the model's price of its plan on one task, under time limits:
what a planner buys with its `--time-limit` (stop 51 ran it on stop 45's 856-table x 128-device task).

Run: .venv/bin/python benchmarks/planner_limits.py --task TASKS.json [--task-index 0]
         [--plans rl,neuroshard:0,neuroshard:0.5,neuroshard:1,neuroshard:2] [--repeats 1]

A plan spec is ALGO or ALGO:SECONDS (``PlannerOptions.time_limit_s``; default 10 s). Each plan goes through
``run_planner`` (guard, validation, garbage collector paused) with the default (shipped) cost model and
policy, seed 0; printed per spec and repeat: the wall time, and the plan's step as the planning model prices
it, at its risk quantile (mean + risk_k x spread per device, what the planners minimise) and at its mean.
Compare two checkouts by running this script on each in turn (``PYTHONPATH=OTHER/src``): the host drifts.
"""

from __future__ import annotations

import argparse
import sys
import time

from autoshard.costs.base import plan_cost
from autoshard.costs.learned.risk import RiskPricedModel
from autoshard.costs.loading import resolve_cost_model
from autoshard.errors import AutoshardError
from autoshard.planners.base import PlannerOptions, make_planner, run_planner
from autoshard.tasks import load_tasks

DEFAULT_PLANS = "rl,neuroshard:0,neuroshard:0.5,neuroshard:1,neuroshard:2"


def parse_plan(spec: str) -> tuple[str, float]:
    """``ALGO`` or ``ALGO:SECONDS`` -> (algorithm, time limit)."""
    algo, _, limit = spec.partition(":")
    try:
        seconds = float(limit) if limit else PlannerOptions().time_limit_s
    except ValueError:
        raise AutoshardError(f"plan {spec!r}: give ALGO or ALGO:SECONDS, e.g. neuroshard:0.5") from None
    return algo, seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", required=True, help="tasks file (autoshard tasks ...)")
    ap.add_argument("--task-index", type=int, default=0)
    ap.add_argument("--plans", default=DEFAULT_PLANS, help=f"comma-separated specs (default {DEFAULT_PLANS})")
    ap.add_argument("--repeats", type=int, default=1)
    args = ap.parse_args()
    try:
        tasks = load_tasks(args.task)
        if not 0 <= args.task_index < len(tasks):
            raise AutoshardError(f"--task-index {args.task_index}: {args.task} holds {len(tasks)} task(s)")
        task = tasks[args.task_index]
        # every planner built before the first plan: a bad spec stops the run before it prints a row
        planners = [(algo, seconds, make_planner(algo, PlannerOptions(seed=0, time_limit_s=seconds)))
                    for algo, seconds in (parse_plan(s) for s in args.plans.split(",") if s)]
        risk = resolve_cost_model(None)
        mean = risk.base if isinstance(risk, RiskPricedModel) else risk
        print(f"{task.name}: {task.num_tables} tables, {task.num_devices} devices; the step priced by "
              f"{risk.name} at its risk quantile / its mean")
        for algo, seconds, planner in planners:
            for _ in range(args.repeats):
                start = time.perf_counter()
                plan = run_planner(planner, task)
                wall = time.perf_counter() - start
                at_risk, at_mean = (plan_cost(m, task, plan).plan_ms for m in (risk, mean))
                print(f"  {algo:<12} limit {seconds:>5g} s  planned in {wall:6.2f} s  "
                      f"{at_risk:8.3f} / {at_mean:8.3f} ms", flush=True)
    except AutoshardError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
