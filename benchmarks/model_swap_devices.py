"""Two (or more) cost models on the same measured devices of archived bench runs: which ranks a task's devices
better, and which is less biased on the devices that hold a wide, heavily pooled table among few others.

    .venv/bin/python benchmarks/model_swap_devices.py RESULTS [RESULTS ...] \
        --model src/autoshard/data/default_cost_model.pt --model NEW.pt [--dim 128] [--pooling 50] [--few 3]

RESULTS: bench results files (``DIR/bench/results.json`` or gzipped in ``benchmarks/runs/``). Every distinct
measured device of the run (``cost_model_on_plans.bench_devices``: fwd and bwd, the median of its rounds) is
priced by each model. Printed per run and model, on fwd + bwd:

- ``level``: the geometric mean of measured / predicted (the day's speed against the model's; no plan of a
  task feels it);
- ``within``: the standard deviation of log(measured / predicted) about each task's mean, and its mean
  absolute error (what decides which plan of a task wins);
- ``rho``: the mean over tasks of the rank correlation of a task's devices;
- ``wide few``: the measured / predicted forward and backward of the devices holding a shard at least
  ``--dim`` columns wide of a table pooled at least ``--pooling`` among at most ``--few`` shards, over the
  other devices' (stop 85's bias: rl kept a plan that gave such tables devices of their own);
- ``alone``: the tables the run timed alone and whole for its stage floor
  (``wide_pooled_devices.tables_alone``), the wide pooled ones and the others: measured / predicted forward
  and backward.

Nothing is planned or measured; any host. Why and what it printed: docs/benchmarks.md, "Stop 86".
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cost_model_on_plans import bench_devices
from wide_pooled_devices import tables_alone

from autoshard.costs.learned import LearnedCostModel
from autoshard.errors import AutoshardError
from autoshard.io import read_json
from autoshard.pipeline.results import task_results_of


def score(devices: list, model, dim: int, pooling: float, few: int) -> dict[str, float]:
    """The figures above for one model on one run's ``devices`` ((task, shards, fwd ms, bwd ms) each)."""
    by_task: dict[str, list] = defaultdict(list)
    for device in devices:
        by_task[device[0].name].append(device)
    levels, within, rhos, wide, rest = [], [], [], [], []
    for rows in by_task.values():
        task = rows[0][0]
        predicted = np.asarray(model.device_costs(task, [shards for _, shards, _, _ in rows]))[:, :2]
        measured = np.array([[f, b] for _, _, f, b in rows])
        log_ratio = np.log(measured.sum(axis=1) / predicted.sum(axis=1))
        levels.append(log_ratio.mean())
        within.extend(log_ratio - log_ratio.mean())
        if len(rows) > 2:
            rhos.append(spearmanr(measured.sum(axis=1), predicted.sum(axis=1)).statistic)
        for (_, shards, _, _), m, p in zip(rows, measured, predicted):
            held = any(s.dim >= dim and task.tables[s.table].pooling_factor >= pooling for s in shards)
            (wide if held and len(shards) <= few else rest).append(np.log(m / p))
    within_arr = np.asarray(within)
    out = {"devices": float(len(devices)), "level": float(np.exp(np.mean(levels))),
           "within_sd": float(within_arr.std()),
           "within_mae_pct": float(100 * np.abs(np.expm1(within_arr)).mean()),
           "rho": float(np.mean(rhos)) if rhos else float("nan"), "wide_few": float(len(wide))}
    if wide and rest:
        excess = np.exp(np.mean(wide, axis=0) - np.mean(rest, axis=0))
        out["wide_few_fwd"], out["wide_few_bwd"] = float(excess[0]), float(excess[1])
    return out


def alone_ratios(tasks: list, model, dim: int, pooling: float) -> dict[str, tuple[int, float, float]]:
    """(count, fwd, bwd): geometric-mean measured / predicted of the tables timed alone, wide pooled or
    not."""
    groups: dict[str, list] = defaultdict(list)
    for table, f, pf, b, pb in tables_alone(tasks, model):
        key = "wide pooled" if table.dim >= dim and table.pooling_factor >= pooling else "other"
        groups[key].append((np.log(f / pf), np.log(b / pb)))
    return {k: (len(v), *np.exp(np.mean(v, axis=0))) for k, v in groups.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", nargs="+", help="bench results files")
    ap.add_argument("--model", action="append", required=True, help="a cost model checkpoint (repeat)")
    ap.add_argument("--dim", type=int, default=128, help="least shard width (columns) counted as wide")
    ap.add_argument("--pooling", type=float, default=50.0, help="least pooling factor counted as heavy")
    ap.add_argument("--few", type=int, default=3, help="most shards a device holds to count as few")
    args = ap.parse_args(argv)
    if args.dim < 1 or args.pooling < 0 or args.few < 1:
        print("error: --dim and --few must be positive and --pooling not negative", file=sys.stderr)
        return 2
    lines: list[str] = []
    try:  # every file read and priced before a line is printed: a bad one leaves nothing half-written
        models = {m: LearnedCostModel.load(m, allow_other_hardware=True) for m in args.model}
        for path in args.results:
            tasks = task_results_of(read_json(path, kind="autoshard.bench"), path)
            devices = bench_devices(tasks)
            lines.append(f"{Path(path).name}: {len(devices)} devices, {len(tasks)} tasks")
            for name, model in models.items():
                s = score(devices, model, args.dim, args.pooling, args.few)
                wide = (f"; wide few ({s['wide_few']:.0f}) over the rest: fwd {s['wide_few_fwd']:.2f} "
                        f"bwd {s['wide_few_bwd']:.2f}" if "wide_few_fwd" in s else "")
                lines.append(f"  {Path(name).name:28s} level {s['level']:.3f}, "
                             f"within sd {s['within_sd']:.3f} ({s['within_mae_pct']:.1f}%), "
                             f"rho {s['rho']:.3f}{wide}")
                alone = alone_ratios(tasks, model, args.dim, args.pooling)
                if alone:
                    groups = sorted(alone.items(), reverse=True)
                    lines.append("    alone: " + "; ".join(f"{k} ({n}) fwd {f:.2f} bwd {b:.2f}"
                                                         for k, (n, f, b) in groups))
    except AutoshardError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0

if __name__ == "__main__":
    sys.exit(main())
