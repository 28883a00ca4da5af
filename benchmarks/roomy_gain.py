"""On the tasks with room, how much better did the model think the learned plans were, and how much better did
they measure? Per run and learned planner, the geometric mean over the roomy tasks (``bench.room``: the best
fixed heuristic >= 10% above the balance floor) of the plan's step over the best fixed heuristic's, as the
planning model predicted it (its mean, the plan's ``predicted`` cost the bench stored) and as it measured.

    .venv/bin/python benchmarks/roomy_gain.py benchmarks/runs/s73-amd-dlrm-50-8-torchrec.json.gz \
        benchmarks/runs/s73-amd-dlrm-100-8-torchrec.json.gz benchmarks/runs/s72-amd-dlrm-20-8-torchrec.json.gz

Why (docs/benchmarks.md, "Stop 73"): issue 15 asks for >= 5% wherever there is >= 10% room, and on the roomy
tasks of DLRM-50 (8) and DLRM-100 (8) the learned planners measured 1.4-4.7% better. Two causes read apart
here: the planners found no plan the model itself prices 5% below the heuristic's (the predicted column above
0.95: the search or the model's view of the room), or they did and the measurement took part of it back (the
measured column above the predicted: the model's error, which a planner's optimisation selects for). Nothing
is planned or measured; a run without predictions for a planner leaves its cell "-".
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from autoshard.bench.room import room_summary
from autoshard.bench.summary import geomean
from autoshard.errors import AutoshardError
from autoshard.io import read_json
from autoshard.pipeline.results import TaskResult, task_results_of

LEARNED = ("rl", "neuroshard", "search", "ilp")


def roomy_ratios(tasks: list[TaskResult], roomy: tuple[int, ...], reference: str,
                 algorithm: str) -> tuple[list[float], list[float]]:
    """(predicted ratios, measured ratios) of ``algorithm`` over ``reference`` on the ``roomy`` tasks where
    both plans have both costs."""
    predicted, measured = [], []
    for k in roomy:
        by = tasks[k].by_algorithm()
        a, h = by.get(algorithm), by.get(reference)
        if a is None or h is None or not (a.predicted and a.measured and h.predicted and h.measured):
            continue
        predicted.append(a.predicted.plan_ms / h.predicted.plan_ms)
        measured.append(a.measured.plan_ms / h.measured.plan_ms)
    return predicted, measured


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", help="bench results files (.json or .json.gz)")
    args = p.parse_args(argv)
    try:  # every file read before a line is printed: a bad one leaves no half-written table
        runs = []
        for path in args.runs:
            run = read_json(path, kind="autoshard.bench")
            runs.append((path, task_results_of(run, path), float(run.get("comm", {}).get("alpha_ms", 0.0))))
    except AutoshardError as e:
        print(f"roomy_gain: error: {e}", file=sys.stderr)
        return 2
    rows = []
    for path, tasks, alpha in runs:
        room = room_summary(tasks, [], alpha)
        if room is None or not room.roomy:
            print(f"{Path(path).name}: no task with >= 10% room; skipped", file=sys.stderr)
            continue
        cells = []
        for a in LEARNED:
            predicted, measured = roomy_ratios(tasks, room.roomy, room.reference, a)
            cells.append(f"{geomean(predicted):.3f} / {geomean(measured):.3f}" if predicted else "-")
        rows.append(f"| {Path(path).name} | {room.reference} | {len(room.roomy)} | {' | '.join(cells)} |")
    if not rows:
        print("roomy_gain: error: no run had a task with >= 10% room; pass bench results of a suite with "
              "room", file=sys.stderr)
        return 2
    heads = " | ".join(f"{a}: predicted / measured" for a in LEARNED)
    print(f"| run | best fixed heuristic | roomy tasks | {heads} |")
    print("|---|---|---|" + "---|" * len(LEARNED))
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
