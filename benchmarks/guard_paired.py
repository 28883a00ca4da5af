"""The guard's margin taken as independent (``planners.guard``) or paired over the ensemble's members, on a
bench run's test tasks: for each task, a learned planner's own (unguarded) plan P, the heuristic plan H* the
model prices cheapest, the predicted gain, both margins, and P and H* measured side by side.

Run: .venv/bin/python benchmarks/guard_paired.py RUN_DIR [--algo search] [--rounds 5] [--cost-model CK]
                                                  [--no-measure] [-o rows.json]

RUN_DIR is a bench output directory (its ``bench/results.json`` for the tasks, measure settings, seed and
time limit; its ``costs/comm_model.json`` for the suite's comm fit). The margins (k = 1):

- independent (the guard's): sqrt(s(P)^2 + s(H*)^2), s the model's spread of a plan's step;
- paired: the standard deviation over the ensemble's members of step_m(P) - step_m(H*).

P and H* are timed in ``--rounds`` rotated rounds with the bench's protocol (the minimum kept), their
collectives from the comm fit (the same formula for both). Stop 22 ran this on DLRM-20 (2) and DLRM-50 (2),
adopted the paired margin, and reverted it when DLRM-10 (2) measured worse (docs/benchmarks.md, "Stop 22").
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", help="a bench output directory (bench/results.json, costs/comm_model.json)")
    ap.add_argument("--algo", default="search", help="the guarded planner (default search)")
    ap.add_argument("--rounds", type=int, default=5, help="measurement rounds of P and H* (default 5)")
    ap.add_argument("--cost-model", default="src/autoshard/data/default_cost_model.pt",
                    help="the ensemble the run planned with (default: the shipped one)")
    ap.add_argument("--no-measure", action="store_true", help="print the margins only, time nothing")
    ap.add_argument("-o", "--output", help="also write the rows as JSON here")
    args = ap.parse_args(argv)
    run = Path(args.run_dir)
    results_path, comm_path = run / "bench" / "results.json", run / "costs" / "comm_model.json"
    for p in (results_path, comm_path, Path(args.cost_model)):
        if not p.is_file():
            print(f"error: {p} not found; give a bench output directory and the model it planned with",
                  file=sys.stderr)
            return 2

    from autoshard.costs.base import plan_cost
    from autoshard.costs.comm import AlphaBeta
    from autoshard.costs.learned import LearnedCostModel
    from autoshard.hardware.evaluator import evaluate_plans
    from autoshard.hardware.kernel import MeasureSettings
    from autoshard.planners.base import PlannerOptions, make_planner
    from autoshard.planners.guard import GUARDED, GuardedPlanner, _leximax, plan_spread_ms
    from autoshard.tasks import Task

    if args.algo not in GUARDED:
        print(f"error: --algo {args.algo}: choose one of the guarded planners {', '.join(GUARDED)}",
              file=sys.stderr)
        return 2
    r = json.loads(results_path.read_text())
    comm = AlphaBeta.load(str(comm_path))
    settings = MeasureSettings.from_json(r["measure_settings"])
    # re-prices an archived run's plans, nothing timed here: any host
    model = LearnedCostModel.load(args.cost_model, allow_other_hardware=True).with_comm(comm)
    members = model.member_models()
    policy = "src/autoshard/data/default_policy.pt" if args.algo == "rl" else None
    options = PlannerOptions(seed=r["suite"]["seed"], cost_model=model,
                             time_limit_s=r["suite"]["time_limit_s"], policy_path=policy)
    rows = []
    for i, t in enumerate(r["tasks"]):
        task = Task.from_json(t["task"])
        guarded = make_planner(args.algo, options)
        assert isinstance(guarded, GuardedPlanner)
        own = guarded.inner.plan(task)
        heuristics = {h: planner.plan(task) for h, planner in guarded.heuristics.items()}
        costs = {h: plan_cost(model, task, p) for h, p in heuristics.items()}
        best = min(costs, key=lambda h: (_leximax(costs[h]), h))
        mine, theirs = plan_cost(model, task, own).plan_ms, costs[best].plan_ms
        independent = math.hypot(plan_spread_ms(model, task, own, mine),
                                 plan_spread_ms(model, task, heuristics[best], theirs))
        diffs = [plan_cost(m, task, own).plan_ms - plan_cost(m, task, heuristics[best]).plan_ms
                 for m in members]
        paired = float(np.std(diffs, ddof=1))
        row = {"task": i, "heuristic": best, "pred_own": mine, "pred_heur": theirs,
               "independent": independent, "paired": paired}
        kept = ["P" if mine + margin < theirs else "H*" for margin in (independent, paired)]
        line = (f"| {i} | {best} | {(theirs - mine) / theirs:+.1%} | {independent:.2f} | {paired:.2f} "
                f"| {kept[0]} | {kept[1]} |")
        if args.no_measure:
            line += " - |"
        elif own.device_shards(task) != heuristics[best].device_shards(task):
            a, b = evaluate_plans(task, [own, heuristics[best]], settings, comm, rounds=args.rounds)
            row.update(meas_own=a.plan_ms, meas_heur=b.plan_ms)
            line += f" {a.plan_ms / b.plan_ms:.3f} |"
        else:
            line += " (same plan) |"
        rows.append(row)
        print(line, flush=True)
    if args.output:
        Path(args.output).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
