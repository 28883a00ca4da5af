"""How well does one run's per-task best heuristic hold up when the same plans are measured again? The floor
under every "ratio to the best heuristic" a planner can score, from two bench runs of the same tasks.

Run: .venv/bin/python benchmarks/cross_run_oracle.py RUN_A RUN_B [--collectives own|a|b]

RUN_A, RUN_B: bench results files (``DIR/bench/results.json``, or gzipped in ``benchmarks/runs/``) that
measured the same tasks. Why: the bench's reference is the per-task cheapest heuristic plan (an oracle pick
among noisy costs), and a planner that returns one heuristic's plan scores 1 at best. Were the measurement
reproducible, the oracle pick of run A would also be the cheapest in run B; this prints, in each direction,
the geometric mean over tasks of run B's cost of run A's pick over run B's own pick: what a planner that
knew run A's measurements exactly would score against run B's oracle. A learned planner's oracle ratio at
or below it is at the floor of what the ground truth can resolve, not a loss the model can fix.

Only the heuristics whose plans are identical in both runs are compared (the heuristics are deterministic,
so in practice all of them), and only tasks identical in both. ``--collectives``: each run's step as it
measured it (``own``, default), or both runs' steps recomposed with run A's or run B's collectives
(``a`` / ``b``: max fwd + max bwd of the run's kernels + the chosen run's collectives of that plan), to
see the kernels' share alone when the two runs timed their collectives differently. The interval is a 95%
bootstrap over tasks (``costs.metrics.geomean_interval``).

It also prints how reproducible the DEVICES are: for every distinct device (tables and column widths) both
runs measured, the spread of log(B / A) of its forward and backward after removing the runs' overall ratio
(standard deviation; a run on a slower host moves every device alike), and how the two move together.
``--cost-model CKPT`` scores a cost model the same way on run B's devices (log(measured / predicted), its
level removed), which says whether the model's error is above what the ground truth reproduces. No
measurement happens here.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from autoshard.bench.summary import geomean, is_heuristic
from autoshard.costs.metrics import geomean_interval
from autoshard.errors import AutoshardError
from autoshard.io import read_json
from autoshard.shards import ShardRef
from autoshard.tasks import Task

sys.path.insert(0, str(Path(__file__).resolve().parent))  # refresh_folds.py, beside this script
import refresh_folds

COLLECTIVES = ("own", "a", "b")


def heuristic_steps(results: dict[str, Any]) -> dict[str, tuple[str, dict[str, tuple[str, dict]]]]:
    """Per task name: (task JSON, {heuristic: (plan JSON, measured step breakdown)}) of one run (the runs'
    cache keys differ with their code versions, so tasks are matched by name and content)."""
    out: dict[str, tuple[str, dict[str, tuple[str, dict]]]] = {}
    for t in results["tasks"]:
        plans = {r["algorithm"]: (json.dumps(r["plan"]["tables"], sort_keys=True), r["measured"]["step"])
                 for r in t["results"]
                 if r.get("ok") and r.get("measured") and is_heuristic(r["algorithm"])}
        out[t["task"]["name"]] = (json.dumps(t["task"], sort_keys=True), plans)
    return out


def paired_tasks(a: dict, b: dict) -> list[tuple[dict[str, dict], dict[str, dict]]]:
    """For every task both runs measured identically: the heuristics whose plans match, with each run's step
    breakdown."""
    pairs = []
    for key, (task_a, plans_a) in a.items():
        if key not in b or b[key][0] != task_a:
            continue
        plans_b = b[key][1]
        same = [h for h in plans_a if h in plans_b and plans_a[h][0] == plans_b[h][0]]
        if len(same) >= 2:
            pairs.append(({h: plans_a[h][1] for h in same}, {h: plans_b[h][1] for h in same}))
    return pairs


def step_ms(step: dict, collectives_from: dict | None) -> float:
    """A plan's step: as measured, or its kernels with another run's collectives of the same plan."""
    coll = step["collectives_ms"] if collectives_from is None else collectives_from["collectives_ms"]
    return float(step["max_fwd_ms"]) + float(step["max_bwd_ms"]) + float(coll)


def picked_elsewhere(pairs: list, collectives: str, reverse: bool) -> list[float]:
    """Per task: the pricing run's cost of the picking run's cheapest heuristic over its own cheapest
    (A picks, B prices; ``reverse``: B picks, A prices)."""
    ratios = []
    for steps_a, steps_b in pairs:
        common = {"own": None, "a": steps_a, "b": steps_b}[collectives]
        pick_run, price_run = (steps_b, steps_a) if reverse else (steps_a, steps_b)
        pick_costs = {h: step_ms(s, None if common is None else common[h]) for h, s in pick_run.items()}
        price_costs = {h: step_ms(s, None if common is None else common[h]) for h, s in price_run.items()}
        pick = min(pick_costs, key=lambda h: (pick_costs[h], h))
        ratios.append(price_costs[pick] / min(price_costs.values()))
    return ratios


def measured_devices(results: dict[str, Any]) -> dict[tuple, tuple[Task, list[ShardRef], float, float]]:
    """Every distinct whole-table device of a run's measured plans: (tables, widths) -> (task, shards, fwd
    ms, bwd ms) (``refresh_folds.whole_table_devices``)."""
    return {tuple((task.tables[s.table].name, s.dim) for s in shards):
            (task, shards, float(m["fwd_ms"]), float(m["bwd_ms"]))
            for task, shards, m in refresh_folds.whole_table_devices(results["tasks"])}


def centred_log_ratios(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """log(num / den) per row and column, each column's median removed (the overall level)."""
    logs = np.log(num / den)
    return logs - np.median(logs, axis=0)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_a")
    p.add_argument("run_b")
    p.add_argument("--collectives", choices=COLLECTIVES, default="own",
                   help="each run's own step (default), or both with run A's / run B's collectives")
    p.add_argument("--cost-model", help="also score this checkpoint on run B's devices")
    args = p.parse_args(argv)
    try:
        raw_a, raw_b = read_json(args.run_a), read_json(args.run_b)
        a, b = heuristic_steps(raw_a), heuristic_steps(raw_b)
        devices_a, devices_b = measured_devices(raw_a), measured_devices(raw_b)
        model = None
        if args.cost_model:  # loaded before anything is printed: a bad checkpoint prints only its error
            from autoshard.costs.learned import LearnedCostModel

            model = LearnedCostModel.load(args.cost_model, allow_other_hardware=True)
    except AutoshardError as e:
        print(f"cross_run_oracle: error: {e}", file=sys.stderr)
        return 2
    except (KeyError, TypeError, ValueError) as e:
        print(f"cross_run_oracle: error: not a finished bench's results file ({type(e).__name__}: {e})",
              file=sys.stderr)
        return 2
    pairs = paired_tasks(a, b)
    if not pairs:
        print("cross_run_oracle: error: the two runs share no task measured with the same heuristic plans; "
              "give two runs of one suite", file=sys.stderr)
        return 2
    steps = ("as measured" if args.collectives == "own"
             else f"kernels + run {args.collectives.upper()}'s collectives")
    print(f"{len(pairs)} tasks in both runs, {len(pairs[0][0])} heuristics' plans identical; steps: {steps}")
    for reverse, (picks, prices) in ((False, ("A", "B")), (True, ("B", "A"))):
        ratios = picked_elsewhere(pairs, args.collectives, reverse)
        low, high = geomean_interval(ratios)
        same = sum(1 for r in ratios if r <= 1.0 + 1e-12)
        print(f"run {picks}'s best heuristic measured in run {prices}: {geomean(ratios):.3f} [{low:.3f}, "
              f"{high:.3f}] of run {prices}'s best (its best too on {same} of {len(ratios)} tasks); "
              f"per task: {', '.join(f'{r:.3f}' for r in ratios)}")
    both = sorted(set(devices_a) & set(devices_b))
    if len(both) >= 3:
        first = np.array([devices_a[k][2:] for k in both])
        second = np.array([devices_b[k][2:] for k in both])
        logs = centred_log_ratios(second, first)
        print(f"{len(both)} devices measured in both runs: log(B / A) spread, overall level removed: forward "
              f"{logs[:, 0].std():.3f}, backward {logs[:, 1].std():.3f}; correlation of the two "
              f"{np.corrcoef(logs[:, 0], logs[:, 1])[0, 1]:.2f}")
    if model is not None:
        keys = sorted(devices_b)
        try:
            predicted = np.array([model.device_costs(task, [shards])[0, :2]
                                  for task, shards, _, _ in (devices_b[k] for k in keys)])
        except AutoshardError as e:
            print(f"cross_run_oracle: error: {e}", file=sys.stderr)
            return 2
        logs = centred_log_ratios(np.array([devices_b[k][2:] for k in keys]), predicted)
        print(f"{args.cost_model} on run B's {len(keys)} devices: log(measured / predicted) spread, level "
              f"removed: forward {logs[:, 0].std():.3f}, backward {logs[:, 1].std():.3f}; correlation of the "
              f"two {np.corrcoef(logs[:, 0], logs[:, 1])[0, 1]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
