"""How much of a GPU bench's win is the torch backend's kernel groups: fit each measured device's forward and
backward time as non-negative costs per looked-up element, per table and per kernel group (distinct shard
dim: the torch backend runs one embedding bag, and one backward sort, segment sum and update, per distinct
dim; docs/benchmarks.md, "Stop 41"), then re-price every plan with each group past a device's first taken
off (what FBGEMM's TBE, one kernel for every dim, would charge it: modelled, not measured) and give each
algorithm's geometric-mean ratio to REFERENCE both ways.

    .venv/bin/python benchmarks/gpu/group_share.py \
        benchmarks/runs/s70-gpu-h200-production-40-8-b16384-6tasks.json.gz

A learned planner whose ratio rises towards 1 in the second column gained from grouping dims, which the
torch backend rewards and FBGEMM would not; what is left is placement the fit cannot explain by groups.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict

import numpy as np
from scipy.optimize import nnls

from autoshard.bench.summary import geomean
from autoshard.errors import AutoshardError
from autoshard.pipeline.results import read_task_results
from autoshard.plan import Plan
from autoshard.tasks import Task

FEATURES = ("elements a sample (pooling x dim x row share)", "tables", "kernel groups", "launch")


def device_features(task: Task, plan: Plan) -> list[list[float]]:
    """Per rank: looked-up elements a sample, shards, distinct shard dims, 1 (empty ranks: zeros)."""
    rows = []
    for shards in plan.device_shards(task):
        elements = sum(task.tables[s.table].pooling_factor * s.dim
                       * s.row_fraction(task.tables[s.table].rows) for s in shards)
        groups = float(len({s.dim for s in shards}))
        rows.append([elements, float(len(shards)), groups, 1.0 if shards else 0.0])
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", help="a GPU bench's results file (.json or .json.gz)")
    p.add_argument("--reference", default="size_lookup_greedy", help="the plan each ratio is taken to")
    args = p.parse_args(argv)
    try:
        runs = read_task_results(args.results)
    except AutoshardError as e:
        print(f"group_share: error: {e}", file=sys.stderr)
        return 2
    # one row per measured device that holds a shard: the fit's data
    x, fwd, bwd, plans = [], [], [], []
    for run in runs:
        for r in run.results:
            if not r.ok or r.plan is None or r.measured is None:
                continue
            feats = device_features(run.task, r.plan)
            plans.append((run.task.name, r.algorithm, feats, r.measured))
            for f, d in zip(feats, r.measured.devices, strict=True):
                if f[3]:
                    x.append(f)
                    fwd.append(d.fwd_ms)
                    bwd.append(d.bwd_ms)
    if not x:
        print(f"group_share: error: {args.results} holds no measured device", file=sys.stderr)
        return 2
    a = np.array(x)
    coef = {}
    for phase, y in (("fwd", np.array(fwd)), ("bwd", np.array(bwd))):
        c, _ = nnls(a, y)
        r2 = 1 - np.sum((a @ c - y) ** 2) / np.sum((y - y.mean()) ** 2)
        coef[phase] = c
        print(f"{phase}: " + ", ".join(f"{n} {v:.4g} ms" for n, v in zip(FEATURES, c, strict=True))
              + f"; R^2 {r2:.3f} over {len(y)} devices")
    measured, regrouped = defaultdict(dict), defaultdict(dict)
    for task, algo, feats, cost in plans:
        # each group past a device's first costs what the fit says it does; TBE would run them as one
        less = [max(f[2] - 1, 0) for f in feats]
        f_max = max(d.fwd_ms - coef["fwd"][2] * g for d, g in zip(cost.devices, less, strict=True))
        b_max = max(d.bwd_ms - coef["bwd"][2] * g for d, g in zip(cost.devices, less, strict=True))
        measured[algo][task] = cost.plan_ms
        regrouped[algo][task] = f_max + b_max + cost.collectives_ms
    ref = args.reference
    if ref not in measured:
        print(f"group_share: error: no measured plans of --reference {ref!r}", file=sys.stderr)
        return 2
    print(f"\n| algorithm | measured / {ref} (geomean) | one kernel for every dim, modelled / {ref} |")
    print("|---|---:|---:|")
    for algo in measured:
        tasks = [t for t in measured[algo] if t in measured[ref]]
        gm = [geomean([m[algo][t] / m[ref][t] for t in tasks]) for m in (measured, regrouped)]
        print(f"| {algo} | {gm[0]:.3f} | {gm[1]:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
