"""ilp or rl with and without its descent on the model's step, priced by the model (nothing measured).

Plans every task of a tasks file three ways with ``--algo ilp`` (the guard off, so the planner's own plan is
compared): ``refine_share=0`` (the solved placement, stop 32's ilp), the descent alone (``refine_kicks=0``),
and the default (descent and kicks); or with ``--algo rl``: ``refine=off`` (the policy's placement, stop
33's rl), the descent alone, and the default. Prints each plan's step cost under the planning model (the
cost model at mean + k x spread, as the planners see it). What the "descends on the model's step" sections
of docs/benchmarks.md (stop 33: ilp, stop 34: rl) report:

    autoshard bench --suite production-40-8 --test-tasks 10 ... -o out/s33/production-40-8   # its tasks
    .venv/bin/python benchmarks/ilp_refine.py out/s33/production-40-8/test_tasks.json
    .venv/bin/python benchmarks/ilp_refine.py out/s33/production-40-8/test_tasks.json --algo rl \
        --policy src/autoshard/data/default_policy.pt

With a time limit, how far the solve and the descent get depends on the machine's speed.
"""

from __future__ import annotations

import argparse
import sys

from autoshard.costs.base import plan_cost
from autoshard.costs.loading import load_cost_model, resolve_cost_model
from autoshard.errors import AutoshardError
from autoshard.planners.base import PlannerOptions, make_planner, run_planner
from autoshard.tasks import load_tasks

VARIANTS = {
    "ilp": {"solved": {"refine_share": 0}, "descent": {"refine_kicks": 0}, "descent+kicks": {}},
    "rl": {"policy": {"refine": "off"}, "descent": {"refine_kicks": 0}, "descent+kicks": {}},
}
"""Settings compared per algorithm (``--option`` keys)."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tasks", help="tasks file (autoshard tasks, or a bench's test_tasks.json)")
    parser.add_argument("--cost-model", default=None, help="cost model checkpoint (default: the shipped one)")
    parser.add_argument("--time-limit", type=float, default=10.0, help="ilp's time limit per plan (s)")
    parser.add_argument("--algo", choices=sorted(VARIANTS), default="ilp", help="planner compared")
    parser.add_argument("--policy", default=None, help="rl's policy checkpoint (default: the shipped one)")
    args = parser.parse_args(argv)
    variants = VARIANTS[args.algo]
    try:
        tasks = load_tasks(args.tasks)
        # priced by the model, nothing timed here (any host); None: the shipped model
        base = load_cost_model(args.cost_model, allow_other_hardware=True) if args.cost_model else None
        model = resolve_cost_model(base)
        # built once (rl loads its policy file here): a bad --policy is one line before anything is planned
        options = [PlannerOptions(cost_model=base, time_limit_s=args.time_limit, policy_path=args.policy,
                                  extra={**extra, "guard": 0}) for extra in variants.values()]
        planners = [make_planner(args.algo, o) for o in options]
    except (AutoshardError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    first = next(iter(variants))
    print("| task | " + " | ".join(f"{v} (ms)" for v in variants) + f" | descent+kicks / {first} |")
    print("|---|" + "---|" * (len(variants) + 1))
    for task in tasks:
        costs = [plan_cost(model, task, run_planner(planner, task)).plan_ms for planner in planners]
        cells = " | ".join(f"{c:.2f}" for c in costs)
        print(f"| {task.name} | {cells} | {costs[-1] / costs[0]:.3f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
