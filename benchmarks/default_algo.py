"""Which algorithm should ``autoshard plan`` use when none is named? Per archived bench run, each candidate's
measured step over the former default's (size_lookup_greedy, ``--against``): the geometric mean over the
run's tasks with the bench's bootstrap interval (``bench.summary.compare``: tasks and rounds resampled) and
its verdict, and the tasks where the two plans' rounds fall clearly apart (first timing; ``rounds_apart``);
then the geometric mean over every task of every run, and the largest single-task ratio.

    .venv/bin/python benchmarks/default_algo.py benchmarks/runs/s7[1-9]-*.json.gz

Why (docs/benchmarks.md, "Stop 80"): stop 79 measured ``plan``'s default (size_lookup_greedy) 3-5% behind
every learned planner on DLRM-100 (8) and DLRM-20 (4), and each learned planner answers to the heuristic
guard, which returns a heuristic's plan where its own gain is within the model's uncertainty. Is any learned
planner ever worse than the fixed default, run by run, over the archive? Nothing is planned or measured again.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from autoshard.bench.summary import compare, geomean, task_costs
from autoshard.errors import AutoshardError
from autoshard.hardware.evaluator import UNRECORDED_ROUND_STATISTIC
from autoshard.io import read_json
from autoshard.pipeline.results import rounds_apart, task_results_of

CANDIDATES = ("rl", "neuroshard", "search", "ilp", "lookup_greedy", "torchrec")
"""The learned planners, the other heuristic that is often the best fixed one, and TorchRec's planner."""


def run_rows(run: dict, path: str, candidates: tuple[str, ...], against: str) -> tuple[list[str], dict]:
    """One run's cells (``ratio [low, high] +clearly better/-clearly worse`` per candidate) and its per-task
    ratios per candidate."""
    statistic = run.get("round_statistic", UNRECORDED_ROUND_STATISTIC)
    tasks = [task_costs(tr) for tr in task_results_of(run, path)]
    cells, ratios = [], {}
    for name in candidates:
        pairs = [t for t in tasks if name in t and against in t]
        ratios[name] = [t[name][0] / t[against][0] for t in pairs]
        if not pairs:
            cells.append("-")
            continue
        c = compare(tasks, name, {against}, statistic=statistic)
        apart = [rounds_apart(t[name][1], t[against][1]) for t in pairs]
        interval = f" [{c.low:.3f}, {c.high:.3f}]" if c.low is not None else ""
        cells.append(f"{c.ratio:.3f}{interval} +{apart.count(1)}/-{apart.count(-1)}")
    return cells, ratios


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", help="bench results files (.json or .json.gz)")
    p.add_argument("--against", default="size_lookup_greedy",
                   help="the reference algorithm (default size_lookup_greedy, plan's default before stop 80)")
    args = p.parse_args(argv)
    try:  # every file read before a line is printed: a bad one leaves no half-written table
        runs = [(path, read_json(path, kind="autoshard.bench")) for path in args.runs]
        rows = [(path, *run_rows(run, path, CANDIDATES, args.against)) for path, run in runs]
    except AutoshardError as e:
        print(f"default_algo: error: {e}", file=sys.stderr)
        return 2
    kept = [(path, cells, ratios) for path, cells, ratios in rows if any(ratios.values())]
    for path, _, _ in (r for r in rows if not any(r[2].values())):
        print(f"{Path(path).name}: no task with {args.against} measured; skipped", file=sys.stderr)
    if not kept:
        print(f"default_algo: error: no run measured {args.against}; pass bench results that did",
              file=sys.stderr)
        return 2
    total = {name: [r for _, _, ratios in kept for r in ratios[name]] for name in CANDIDATES}
    print(f"each / {args.against}: geometric mean [interval] +clearly better/-clearly worse tasks")
    print(f"| run | {' | '.join(CANDIDATES)} |")
    print("|---|" + "---|" * len(CANDIDATES))
    for path, cells, _ in kept:
        print(f"| {Path(path).name} | {' | '.join(cells)} |")
    cells = [f"**{geomean(v):.3f}** (max {max(v):.3f}, {len(v)} tasks)" if v else "-" for v in total.values()]
    print(f"| all | {' | '.join(cells)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
