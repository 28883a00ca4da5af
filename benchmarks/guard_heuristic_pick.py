"""How good is the guard's pick among the heuristics? Per run, the measured step of H* (the heuristic plan the
guard weighs a learned plan against, and returns when that plan does not clear its margin: the cheapest of
the four guard heuristics by the planning model's mean) over the measured best of the four, beside what
always returning one fixed heuristic would give; geometric means over the tasks, and over every task of
every run.

    .venv/bin/python benchmarks/guard_heuristic_pick.py benchmarks/runs/s6[3-9]-amd-*.json.gz \
        benchmarks/runs/s7*-amd-*.json.gz

Why (docs/benchmarks.md, "Stop 72"): on DLRM-50 (4) at stop 72 every learned planner's one clear loss was
test-4, where all four returned lookup_greedy's plan (the guard's H*, its own plan's gain within the margin)
and size_lookup_greedy's measured 3.4% below it. Is the model's pick among the heuristics worth keeping, or
would one fixed heuristic do better? H* is read from the stored guard decisions (``planners.guard``), so
nothing is planned or measured again; a run without them (no guarded planner) is skipped with a line.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from pathlib import Path

from autoshard.errors import AutoshardError
from autoshard.io import read_json
from autoshard.pipeline.results import TaskResult, task_results_of
from autoshard.planners.guard import GUARD_HEURISTICS, GUARDED

_REFERENCE = re.compile(r"(?:below |kept )(\w+)'s")
"""H*'s name in a stored decision: "kept its plan (predicted ... below H's, ...)" or "kept H's plan"."""


def reference(tr: TaskResult) -> str | None:
    """H* of the task, as the first guarded planner's stored decision names it (all share it: H* depends
    on the heuristics' plans and the planning model's mean only); None where none is stored."""
    by = tr.by_algorithm()
    for name in GUARDED:
        r = by.get(name)
        m = _REFERENCE.search(r.guard) if r is not None and r.guard else None
        if m and m.group(1) in GUARD_HEURISTICS:
            return m.group(1)
    return None


def pick_ratios(tasks: list[TaskResult]) -> dict[str, list[float]]:
    """Per choice ("H*" and each guard heuristic), its measured step over the best of the four, one value a
    task that has H* and all four heuristics measured."""
    out: dict[str, list[float]] = {"H*": [], **{h: [] for h in GUARD_HEURISTICS}}
    for tr in tasks:
        by = tr.by_algorithm()
        star = reference(tr)
        if star is None or not all(h in by and by[h].ok and by[h].measured for h in GUARD_HEURISTICS):
            continue
        ms = {h: by[h].measured.plan_ms for h in GUARD_HEURISTICS}
        best = min(ms.values())
        out["H*"].append(ms[star] / best)
        for h in GUARD_HEURISTICS:
            out[h].append(ms[h] / best)
    return out


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", help="bench results files (.json or .json.gz)")
    p.add_argument("--above", type=float, default=0.02,
                   help="also count the tasks where H* measured more than this above the best (default 0.02)")
    args = p.parse_args(argv)
    heads = ["H*", *GUARD_HEURISTICS]
    try:  # every file read before a line is printed: a bad one leaves no half-written table
        runs = [(path, task_results_of(read_json(path, kind="autoshard.bench"), path)) for path in args.runs]
    except AutoshardError as e:
        print(f"guard_heuristic_pick: error: {e}", file=sys.stderr)
        return 2
    print(f"| run | tasks | {' | '.join(heads)} | H* > {1 + args.above:.2f} |")
    print("|---|---|" + "---|" * (len(heads) + 1))
    total: dict[str, list[float]] = {h: [] for h in heads}
    for path, tasks in runs:
        ratios = pick_ratios(tasks)
        if not ratios["H*"]:
            print(f"{Path(path).name}: no task with a stored guard decision and the four heuristics; skipped",
                  file=sys.stderr)
            continue
        for h in heads:
            total[h] += ratios[h]
        above = sum(r > 1 + args.above for r in ratios["H*"])
        cells = " | ".join(f"{geomean(ratios[h]):.3f}" for h in heads)
        print(f"| {Path(path).name} | {len(ratios['H*'])} | {cells} | {above} |")
    if not total["H*"]:
        print("guard_heuristic_pick: error: no run had a stored guard decision; pass bench results of the "
              "guarded planners (rl, neuroshard, search, ilp)", file=sys.stderr)
        return 2
    above = sum(r > 1 + args.above for r in total["H*"])
    cells = " | ".join(f"**{geomean(total[h]):.3f}**" for h in heads)
    print(f"| all | {len(total['H*'])} | {cells} | {above} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
