"""Which sharding types each algorithm's plans use in archived bench runs. Times nothing.

    .venv/bin/python benchmarks/plan_kinds.py benchmarks/runs/s40-intel-production-40-8.json.gz
    .venv/bin/python benchmarks/plan_kinds.py benchmarks/runs/s4[012]-intel-*.json.gz --algos rl,search

Per run and algorithm: the plans (of the run's tasks) that hold any row-wise shard (``row_wise`` or
``table_row_wise``), any column split, any data-parallel replica, and the mean number of tables a plan
splits by rows. For reading a suite's figures against what the step model prices least well (row-wise on
CPU TorchRec DMP: docs/benchmarks.md, "Stop 43").
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from autoshard.errors import AutoshardError
from autoshard.io import read_json

ROW_TYPES = {"row_wise", "table_row_wise"}


def kinds(plan: dict) -> dict[str, int]:
    """Tables of ``plan`` (a plan's JSON) split by rows, split by columns, and replicated."""
    types = [t["sharding_type"] for t in plan.get("tables", {}).values()]
    return {"row": sum(t in ROW_TYPES for t in types), "column": sum(t == "column_wise" for t in types),
            "replica": sum(t == "data_parallel" for t in types)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", help="bench results (results.json or an archived .json.gz)")
    ap.add_argument("--algos", default="", help="only these algorithms (comma-separated; default all)")
    args = ap.parse_args(argv)
    only = {a for a in args.algos.split(",") if a}
    print("| run | algorithm | plans with row-wise shards | with column splits | with replicas | "
          "row-split tables a plan |")
    print("|---|---|---|---|---|---|")
    try:
        for path in args.runs:
            run = read_json(path)
            if not isinstance(run, dict) or run.get("kind") != "autoshard.bench":
                raise AutoshardError(f"{path} is not a bench result (autoshard bench's results.json)")
            per_algo: dict[str, list[dict[str, int]]] = {}
            for task in run["tasks"]:
                for r in task["results"]:
                    if r.get("plan") and (not only or r["algorithm"] in only):
                        per_algo.setdefault(r["algorithm"], []).append(kinds(r["plan"]))
            for algo, plans in per_algo.items():
                n = len(plans)
                share = {k: sum(p[k] > 0 for p in plans) for k in ("row", "column", "replica")}
                rows = sum(p["row"] for p in plans) / n
                print(f"| {Path(path).name} | {algo} | {share['row']}/{n} | {share['column']}/{n} | "
                      f"{share['replica']}/{n} | {rows:.1f} |")
    except AutoshardError as e:
        print(f"plan_kinds.py: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
