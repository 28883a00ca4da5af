"""Two rows of one bench run, task by task: row A's measured step over row B's, the geometric mean over the
tasks with the bench's bootstrap interval (``bench.summary.compare``: tasks and measurement rounds
resampled), the verdict, and on how many tasks the two placed every shard alike.

    .venv/bin/python benchmarks/row_pairs.py benchmarks/runs/s74-intel-dlrm-50-8-hot4-torchrec.json.gz \
        [--pairs search+hot4:search,rl+hot4:rl]

Default pairs: every ``PLANNER+...`` row of the run against its ``PLANNER`` row (the anchored, measured-pick
and descent rows against the plain planner). Why (docs/benchmarks.md, "Stop 74"): a row's ratio to the best
fixed heuristic says whether it wins; whether an option of a planner (``--anchor-hot``) helps is that
planner with it against the same planner without it, on the same tasks, in the same rounds. Nothing is
planned or measured.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from autoshard.bench.summary import compare, task_costs
from autoshard.errors import AutoshardError
from autoshard.io import read_json
from autoshard.pipeline.results import task_results_of


def default_pairs(algorithms: list[str]) -> list[tuple[str, str]]:
    """Every ``X+...`` row paired with its ``X`` row, where the run has both."""
    have = set(algorithms)
    return [(a, a.split("+", 1)[0]) for a in algorithms if "+" in a and a.split("+", 1)[0] in have]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run", help="a bench results file (.json or .json.gz)")
    p.add_argument("--pairs", help="comma-separated A:B row pairs (default: every PLANNER+... row against "
                                   "PLANNER)")
    args = p.parse_args(argv)
    try:
        tasks = task_results_of(read_json(args.run, kind="autoshard.bench"), args.run)
    except AutoshardError as e:
        print(f"row_pairs: error: {e}", file=sys.stderr)
        return 2
    algorithms = list(dict.fromkeys(r.algorithm for tr in tasks for r in tr.results))
    if args.pairs:
        pairs = [tuple(x.split(":", 1)) for x in args.pairs.split(",") if x.strip()]
        bad = [":".join(x) for x in pairs if len(x) != 2 or not set(x) <= set(algorithms)]
        if bad or not pairs:
            print(f"row_pairs: error: --pairs {args.pairs!r}: give A:B pairs of the run's rows "
                  f"({', '.join(algorithms)})", file=sys.stderr)
            return 2
    else:
        pairs = default_pairs(algorithms)
        if not pairs:
            print(f"row_pairs: error: {Path(args.run).name} has no PLANNER+... row beside its PLANNER row; "
                  "pass --pairs A:B", file=sys.stderr)
            return 2
    costs = [task_costs(tr) for tr in tasks]
    print("| A | B | tasks | A / B [95% interval] verdict | same plan on |")
    print("|---|---|---|---|---|")
    for a, b in pairs:
        c = compare(costs, a, [b])
        same = 0
        for tr in tasks:
            by = tr.by_algorithm()
            x, y = by.get(a), by.get(b)
            if x is not None and y is not None and x.plan is not None and y.plan is not None:
                same += x.plan.device_shards(tr.task) == y.plan.device_shards(tr.task)
        interval = f"[{c.low:.3f}, {c.high:.3f}] " if c.low is not None else ""
        ratio = f"{c.ratio:.3f} " if c.ratio is not None else "- "
        print(f"| {a} | {b} | {c.tasks} | {ratio}{interval}{c.verdict} | {same} of {len(tasks)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
