"""How many kernel groups each algorithm's plans make in a bench results file: per algorithm, the mean tables
a device holds, the mean distinct shard dims a device holds (the torch backend runs one embedding bag, and
one backward sort, segment sum and update, per distinct dim: docs/benchmarks.md, "Stop 41"), the most on
one device, and the geometric-mean measured step. A learned planner whose plans hold fewer dims a device
than the heuristics' gains on the torch backend what FBGEMM's TBE, one kernel for every dim, would not give.

    .venv/bin/python benchmarks/plan_dims.py benchmarks/runs/s31-gpu-h100-production-40-8-b16384-broad.json.gz
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict

import numpy as np

from autoshard.errors import AutoshardError
from autoshard.io import read_json
from autoshard.plan import Plan
from autoshard.tasks import Task


def plan_groups(task: Task, plan: Plan) -> tuple[list[int], list[int]]:
    """Tables and distinct shard dims of every device that holds a shard."""
    devices = [d for d in plan.device_shards(task) if d]
    return [len(d) for d in devices], [len({s.dim for s in d}) for d in devices]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("results", nargs="+", help="bench results.json (or .json.gz) files")
    args = p.parse_args(argv)
    for path in args.results:
        try:
            data = read_json(path)  # plain or gzipped; a missing or broken file is one line
        except AutoshardError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        tables: dict[str, list[int]] = defaultdict(list)
        dims: dict[str, list[int]] = defaultdict(list)
        steps: dict[str, list[float]] = defaultdict(list)
        for entry in data.get("tasks", []):
            task = Task.from_json(entry["task"])
            for r in entry["results"]:
                if not r.get("ok") or not r.get("plan"):
                    continue
                t, d = plan_groups(task, Plan.from_json(r["plan"]))
                tables[r["algorithm"]] += t
                dims[r["algorithm"]] += d
                if (r.get("measured") or {}).get("plan_ms"):
                    steps[r["algorithm"]].append(float(r["measured"]["plan_ms"]))
        print(f"{path}: {len(data.get('tasks', []))} tasks")
        print("| algorithm | tables a device (mean) | distinct dims a device (mean / max) | measured step ms "
              "(geomean) |")
        print("|---|---:|---:|---:|")
        for algo, held in tables.items():
            ms = steps.get(algo) or []
            gm = f"{float(np.exp(np.mean(np.log(ms)))):.2f}" if ms else "-"
            print(f"| {algo} | {np.mean(held):.1f} | {np.mean(dims[algo]):.2f} / {max(dims[algo])} | {gm} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
