"""Which statistic of a bench task's measurement rounds separates its devices best: time every distinct
device of one task of a bench run in R rotated rounds (the bench's own protocol,
``hardware.evaluator.rotated_rounds``: a fresh evaluator each round, the order rotated), then compare the
median, mean and minimum of every 3 of the R rounds.

Run: .venv/bin/python benchmarks/round_statistic.py BENCH_DIR --task I [--rounds 9] [--save F.npy]
     .venv/bin/python benchmarks/round_statistic.py --load F.npy

BENCH_DIR is a bench output's ``bench/`` (its ``results.json``: the task, its plans and the run's measure
settings). What is printed, per statistic: the standard deviation over all C(R, 3) subsets of the log of
each device's estimate *relative to the subset's mean over the devices* (a plan comparison sees devices
against each other; a round that is slow for every device cancels there), the median over the devices.
Lower separates plans better. Stop 22 chose the bench's round statistic (minimum) on this table.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

import numpy as np

STATISTICS = {"median": np.median, "mean": np.mean, "min": np.min}


def time_rounds(results: dict, task_index: int, rounds: int) -> np.ndarray:
    """(rounds, devices, 2) fwd/bwd ms of every distinct device of the task's measured plans."""
    from autoshard.hardware.evaluator import MeasuredCostModel, contents_key, rotated_rounds
    from autoshard.hardware.kernel import MeasureSettings
    from autoshard.plan import Plan
    from autoshard.tasks import Task

    t = results["tasks"][task_index]
    task = Task.from_json(t["task"])
    settings = MeasureSettings.from_json(results["measure_settings"])
    unique: dict = {}
    for x in t["results"]:
        if x.get("ok") and x.get("plan"):
            for shards in Plan.from_json(x["plan"]).device_shards(task):
                if shards:
                    unique.setdefault(contents_key(task, shards), shards)
    order = list(unique)
    print(f"{task.name}: {len(order)} distinct devices x {rounds} rounds", file=sys.stderr)

    def time_round(keys: list) -> np.ndarray:
        evaluator = MeasuredCostModel(settings)
        return np.array([evaluator.compute_ms(task, unique[k]) for k in keys])

    return rotated_rounds(order, rounds, time_round, lambda r: print(f"round {r}", file=sys.stderr))


def compare_statistics(per_round: np.ndarray, take: int = 3) -> dict[str, float]:
    """Per statistic: median over devices of the log-sd over all ``take``-round subsets of the device's
    estimate relative to the subset's mean over devices (module docstring)."""
    logs = np.log(per_round.sum(axis=-1))  # (rounds, devices): fwd + bwd
    subsets = list(itertools.combinations(range(len(logs)), take))
    out = {"per-round log-sd": float(np.median(logs.std(axis=0)))}
    for name, f in STATISTICS.items():
        est = np.array([np.log(f(np.exp(logs[list(s)]), axis=0)) for s in subsets])
        est -= est.mean(axis=1, keepdims=True)
        out[f"{name} of {take}"] = float(np.median(est.std(axis=0)))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bench_dir", nargs="?", help="a bench output's bench/ directory (its results.json)")
    ap.add_argument("--task", type=int, default=0, help="which test task of the run (default 0)")
    ap.add_argument("--rounds", type=int, default=9, help="rounds to time (default 9; at least 4)")
    ap.add_argument("--save", help="also save the timings (rounds, devices, fwd/bwd) to this .npy")
    ap.add_argument("--load", help="analyse timings saved by --save instead of measuring")
    args = ap.parse_args(argv)
    if args.load:
        if not Path(args.load).is_file():
            print(f"error: {args.load} not found; give a .npy written by --save", file=sys.stderr)
            return 2
        per_round = np.load(args.load)
    else:
        path = Path(args.bench_dir or "") / "results.json"
        if not args.bench_dir or not path.is_file():
            print("error: give a bench output's bench/ directory holding results.json (or --load F.npy)",
                  file=sys.stderr)
            return 2
        results = json.loads(path.read_text())
        if not 0 <= args.task < len(results.get("tasks", ())):
            print(f"error: --task {args.task}: the run has {len(results.get('tasks', ()))} tasks",
                  file=sys.stderr)
            return 2
        if args.rounds < 4:
            print(f"error: --rounds {args.rounds}: need at least 4 to compare subsets of 3", file=sys.stderr)
            return 2
        per_round = time_rounds(results, args.task, args.rounds)
        if args.save:
            np.save(args.save, per_round)
    for name, value in compare_statistics(per_round).items():
        print(f"{name:>18}: {value:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
