"""How far TorchRec DMP's own step moves between two ``benchmarks/dmp_tasks.py`` runs of the same plans: the
floor under any comparison of the evaluator with DMP. Times nothing.

    .venv/bin/python benchmarks/dmp_tasks_repeat.py A.json B.json

For the tasks both runs hold: each plan's DMP step in B over A (median and p10-p90 over plans), how often the
two runs name the same best heuristic plan, and the Spearman correlation of the two runs' orders of a task's
plans (median, range) beside the evaluator's against each run.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from autoshard.costs import metrics
from autoshard.errors import AutoshardError
from autoshard.io import read_json

sys.path.insert(0, str(Path(__file__).resolve().parent))  # dmp_tasks.py, beside this script
from dmp_tasks import KIND, best_heuristic


def load(path: str) -> dict[int, list[dict]]:
    run = read_json(path)
    if not isinstance(run, dict) or run.get("kind") != KIND:
        raise AutoshardError(f"{path} is not a dmp_tasks.py --json result (kind {KIND!r})")
    return {t["index"]: t["plans"] for t in run["tasks"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a")
    ap.add_argument("b")
    args = ap.parse_args(argv)
    try:
        a, b = load(args.a), load(args.b)
        common = sorted(set(a) & set(b))
        if not common:
            raise AutoshardError(f"{args.a} and {args.b} share no task")
    except AutoshardError as e:
        print(f"dmp_tasks_repeat.py: error: {e}", file=sys.stderr)
        return 2
    ratios, same_best, same_ev_a, rho_ab, rho_ev = [], 0, 0, [], []
    for i in common:
        ra, rb = a[i], b[i]
        if [r["algorithms"] for r in ra] != [r["algorithms"] for r in rb]:
            print(f"dmp_tasks_repeat.py: error: task {i}: the runs hold different plans", file=sys.stderr)
            return 2
        ratios += [y["step_ms"] / x["step_ms"] for x, y in zip(ra, rb)]
        best_a, best_b = best_heuristic(ra, "step_ms"), best_heuristic(rb, "step_ms")
        same_best += best_a["algorithms"] == best_b["algorithms"]
        same_ev_a += best_heuristic(ra, "evaluator_ms") is best_a
        if len(ra) > 2:
            rho_ab.append(metrics.spearman([r["step_ms"] for r in ra], [r["step_ms"] for r in rb]))
            rho_ev.append(metrics.spearman([r["evaluator_ms"] for r in ra], [r["step_ms"] for r in rb]))
    lo, mid, hi = np.quantile(ratios, [0.1, 0.5, 0.9])
    n = len(common)
    print(f"{n} task(s), {len(ratios)} plans: DMP step B / A median {mid:.3f} (p10-p90 {lo:.3f}-{hi:.3f})")
    print(f"the same best heuristic plan in both DMP runs: {same_best} of {n}; the evaluator's and run A's: "
          f"{same_ev_a} of {n}")
    if rho_ab:
        print(f"Spearman of a task's plans, DMP A vs DMP B: median {np.median(rho_ab):+.2f} (range "
              f"{min(rho_ab):+.2f} to {max(rho_ab):+.2f}); evaluator vs DMP B: median "
              f"{np.median(rho_ev):+.2f} (range {min(rho_ev):+.2f} to {max(rho_ev):+.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
