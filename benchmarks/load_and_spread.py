"""Did a high load average as a task began show in its timings? Per task of each bench results file: the
host's 1-minute load average when the task's measuring began, and the median over its plans of the spread
of the plan's measured step between rounds (its slowest round over its fastest).

    .venv/bin/python benchmarks/load_and_spread.py benchmarks/runs/s69-amd-*-torchrec.json.gz

Why: the first task of a bench often begins at a load of 2-3 on a 2-vCPU host (stop 69), right after the comm
fit's D processes ended. The load average is a one-minute mean that lags; if the first task's rounds spread no
more than the others', the reading was the fit's echo, not contention the rounds saw (the rounds rotate the
plans' order, so contention through a whole task would move every plan alike and show little here: this
tests only contention that comes and goes, the kind a lagging echo would be).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from autoshard.errors import AutoshardError
from autoshard.pipeline.results import TaskResult, read_task_results


def task_rows(tasks: list[TaskResult]) -> list[tuple[str, float | None, float | None]]:
    """(task name, load average as its measuring began, median over plans of max / min round step)."""
    rows = []
    for t in tasks:
        spreads = [max(r.rounds_ms) / min(r.rounds_ms) for r in t.results
                   if r.ok and len(r.rounds_ms) > 1 and min(r.rounds_ms) > 0]
        rows.append((t.task.name, t.load_average[0] if t.load_average else None,
                     float(np.median(spreads)) if spreads else None))
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", nargs="+", help="bench results files (.json or .json.gz)")
    args = p.parse_args(argv)
    lines = []  # the table only once every file has been read: a bad file prints nothing but its error
    for path in args.results:
        try:
            rows = task_rows(read_task_results(path))
        except AutoshardError as e:
            print(f"load_and_spread: error: {e}", file=sys.stderr)
            return 2
        if len(rows) < 2 or any(load is None or spread is None for _, load, spread in rows):
            print(f"load_and_spread: error: {path}: needs 2+ tasks, each with its load average and 2+ rounds",
                  file=sys.stderr)
            return 2
        _, load0, spread0 = rows[0]
        loads = [load for _, load, _ in rows[1:]]
        spreads = [spread for _, _, spread in rows[1:]]
        name = Path(path).name.removesuffix(".gz").removesuffix(".json")
        lines.append(f"| {name} | {load0:.1f} / {spread0:.3f} | {min(loads):.1f}-{max(loads):.1f} / "
                     f"{float(np.median(spreads)):.3f} ({min(spreads):.3f}-{max(spreads):.3f}) |")
    print("| run | first task: load / round spread | other tasks: load range / round spread median "
          "(range) |")
    print("|---|---|---|")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
