"""What the learned planners' split plans promised and what they measured, task by task, in a bench run.

Run: .venv/bin/python benchmarks/split_plan_gains.py RUN [--algos ilp,search] [--kinds row_wise,column_wise]

RUN: a bench results file (``DIR/bench/results.json``, or gzipped in ``benchmarks/runs/``). For every task
and learned planner whose plan holds a table of one of ``--kinds`` (default: row-wise), it prints the
predicted gain over the heuristic the run's planning model priced cheapest (1 - predicted plan / predicted
heuristic plan: what the planner promised the guard) and the measured step over that heuristic's and over
the cheapest measured heuristic's. Why: a rule that turns split plans down by their promised gain (stop 28's
``LearnedCostModel.row_move_margin``) is only right if the promised gain separates the plans that measured
better from those that measured worse (docs/benchmarks.md, "Stop 29"). No measurement happens here.
"""

from __future__ import annotations

import argparse
import sys

from autoshard.bench.summary import is_heuristic
from autoshard.errors import AutoshardError
from autoshard.io import read_json
from autoshard.planners.guard import GUARDED
from autoshard.shards import ShardingType


def split_gains(results: dict, algos: list[str] | None, kinds: set[str]) -> list[dict]:
    """One row per (task, learned planner) whose plan has a table of ``kinds``."""
    rows = []
    for t in results["tasks"]:
        done = {r["algorithm"]: r for r in t["results"] if r.get("ok") and r.get("measured")
                and r.get("predicted")}
        heuristics = [h for h in done if is_heuristic(h)]
        if not heuristics:
            continue
        priced = min(heuristics, key=lambda h: done[h]["predicted"]["plan_ms"])
        best = min(done[h]["measured"]["plan_ms"] for h in heuristics)
        for a, r in done.items():
            if a not in (GUARDED if algos is None else algos):
                continue
            split = sum(1 for p in r["plan"]["tables"].values() if p["sharding_type"] in kinds)
            if not split:
                continue
            rows.append({"task": t["task"]["name"], "algorithm": a, "split_tables": split,
                         "heuristic": priced,
                         "promised": 1 - r["predicted"]["plan_ms"] / done[priced]["predicted"]["plan_ms"],
                         "vs_heuristic": r["measured"]["plan_ms"] / done[priced]["measured"]["plan_ms"],
                         "vs_best": r["measured"]["plan_ms"] / best})
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run")
    p.add_argument("--algos", help="comma-separated planners (default: the learned ones, "
                   f"{','.join(GUARDED)})")
    p.add_argument("--kinds", default="row_wise", help="comma-separated sharding types (default row_wise)")
    args = p.parse_args(argv)
    try:
        kinds = set(args.kinds.split(","))
        known = {t.value for t in ShardingType}
        if not kinds <= known:
            raise AutoshardError(f"--kinds {args.kinds!r}: use sharding types of {', '.join(sorted(known))}")
        rows = split_gains(read_json(args.run), args.algos.split(",") if args.algos else None, kinds)
    except AutoshardError as e:
        print(f"split_plan_gains: error: {e}", file=sys.stderr)
        return 2
    except (KeyError, TypeError, ValueError) as e:
        print(f"split_plan_gains: error: not a finished bench's results file ({type(e).__name__}: {e})",
              file=sys.stderr)
        return 2
    print(f"{len(rows)} plans with {args.kinds} tables")
    for r in rows:
        print(f"{r['task']} {r['algorithm']}: {r['split_tables']} table(s); promised "
              f"{r['promised']:.3f} below {r['heuristic']}; measured {r['vs_heuristic']:.3f} of it, "
              f"{r['vs_best']:.3f} of the best heuristic")
    return 0


if __name__ == "__main__":
    sys.exit(main())
