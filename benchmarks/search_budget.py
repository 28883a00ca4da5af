"""Would a longer search find more, by the model's own prices? Re-plans a bench run's roomy tasks with
``search`` (the guard off, so its own plan is priced) at its default budget and at a larger one, and prints
each plan's step over the best fixed heuristic's stored plan, both priced by the planning model the bench
used (a cost model checkpoint with the run's own comm fit; its mean). Nothing is measured.

    .venv/bin/python benchmarks/search_budget.py benchmarks/runs/s73-amd-dlrm-50-8-torchrec.json.gz \
        --kicks 100 --time-limit 30

Why (docs/benchmarks.md, "Stop 73"): on the roomy tasks of DLRM-50 (8) and DLRM-100 (8) the model priced the
learned plans only 4-7% below the best fixed heuristic's (``benchmarks/roomy_gain.py``), and search ended its
20 kicks in 2.4-7.0 s, well inside its 10 s. If 100 kicks find no cheaper plan, the shortfall is not the
search's budget. With the same seed the larger budget replays the default's kicks first, so its plan is never
dearer by the model unless a time limit cut either run (then the result depends on the host's speed).
"""

from __future__ import annotations

import argparse
import sys
import time

from autoshard.bench.room import room_summary
from autoshard.bench.summary import geomean
from autoshard.costs.base import plan_cost
from autoshard.costs.comm import AlphaBeta
from autoshard.costs.learned import LearnedCostModel
from autoshard.errors import AutoshardError
from autoshard.io import read_json
from autoshard.pipeline.results import task_results_of
from autoshard.planners.base import PlannerOptions, make_planner, run_planner
from autoshard.planners.local_search import LocalSearchConfig

DEFAULT_MODEL = "src/autoshard/data/default_cost_model.pt"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run", help="a bench results file (.json or .json.gz) with its comm fit")
    p.add_argument("--cost-model", default=DEFAULT_MODEL,
                   help=f"the run's planning model (default {DEFAULT_MODEL})")
    p.add_argument("--kicks", type=int, default=100, help="the larger budget's kicks (default 100)")
    p.add_argument("--time-limit", type=float, default=30.0, help="the larger budget's seconds (default 30)")
    p.add_argument("--tasks", type=int, default=None, help="only the first N roomy tasks")
    args = p.parse_args(argv)
    default = LocalSearchConfig()
    try:
        if args.kicks <= default.kicks:
            raise AutoshardError(f"--kicks {args.kicks}: give more than search's default {default.kicks}")
        if not args.time_limit > 0:
            raise AutoshardError(f"--time-limit {args.time_limit}: give a positive number of seconds")
        if args.tasks is not None and args.tasks < 1:
            raise AutoshardError(f"--tasks {args.tasks}: give a positive number of tasks")
        run = read_json(args.run, kind="autoshard.bench")
        tasks = task_results_of(run, args.run)
        comm_fit = run.get("comm")
        if not isinstance(comm_fit, dict) or not {"alpha_ms", "bytes_per_ms"} <= comm_fit.keys():
            raise AutoshardError(f"{args.run}: no comm fit stored; pass a results.json that `autoshard "
                                 "bench` wrote (its planning model priced the collectives with it)")
        comm = AlphaBeta.from_json(comm_fit)
        model = LearnedCostModel.load(args.cost_model, allow_other_hardware=True).with_comm(comm)
    except (AutoshardError, KeyError, OSError) as e:
        print(f"search_budget: error: {e}", file=sys.stderr)
        return 2
    room = room_summary(tasks, [], comm.alpha_ms)
    if room is None or not room.roomy:
        print(f"search_budget: error: {args.run} has no task with >= 10% room", file=sys.stderr)
        return 2
    limit = PlannerOptions().time_limit_s
    budgets = {f"{default.kicks} kicks, {limit:g} s": (default.kicks, limit),
               f"{args.kicks} kicks, {args.time_limit:g} s": (args.kicks, args.time_limit)}
    planners = [make_planner("search", PlannerOptions(cost_model=model, time_limit_s=seconds,
                                                      extra={"guard": 0, "kicks": kicks}))
                for kicks, seconds in budgets.values()]
    print(f"| task | {' | '.join(f'{b}: / {room.reference} (s)' for b in budgets)} |")
    print("|---|" + "---|" * len(budgets))
    ratios: list[list[float]] = [[] for _ in budgets]
    for k in room.roomy[:args.tasks]:
        tr = tasks[k]
        ref = plan_cost(model, tr.task, tr.by_algorithm()[room.reference].plan).plan_ms
        cells = []
        for planner, out in zip(planners, ratios, strict=True):
            began = time.perf_counter()
            plan = run_planner(planner, tr.task)
            out.append(plan_cost(model, tr.task, plan).plan_ms / ref)
            cells.append(f"{out[-1]:.3f} ({time.perf_counter() - began:.1f})")
        print(f"| {tr.task.name} | {' | '.join(cells)} |", flush=True)
    print(f"| geometric mean | {' | '.join(f'{geomean(r):.3f}' for r in ratios)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
