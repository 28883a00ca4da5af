"""A results file from a bench run that stopped before its report: the measured tasks of BENCH_DIR/tasks
with the settings of a finished run's results.json (LIKE), its round statistic and command replaced.

    python benchmarks/gpu/assemble_partial.py BENCH_DIR --like RESULTS --round-statistic median \
        --restate min --command "autoshard bench ..." -o OUT.json

``--set KEY=JSON`` replaces a top-level field of LIKE (the stopped run's host, cost model, skipped
planners). ``--restate STAT`` restates every plan's cost from its stored per-round device timings with STAT
(``pipeline.measure.restate``), as ``benchmarks/suite_summary.py --round-statistic`` does. Used for the GPU
re-run of stop 25 (docs/benchmarks.md "Stop 25"), which the lent GPU's time
stopped after 8 of 10 tasks; ``benchmarks/suite_summary.py`` then reads OUT.json like any results file.
No measurement happens here.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from autoshard.bench.summary import summarize
from autoshard.errors import AutoshardError
from autoshard.io import read_json, write_json
from autoshard.pipeline.measure import restate_task
from autoshard.pipeline.results import TaskResult


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("bench_dir", help="the stopped run's bench directory (its tasks/*.json)")
    p.add_argument("--like", required=True, help="results.json of a finished run with the same settings")
    p.add_argument("--round-statistic", required=True, choices=["min", "median"],
                   help="the statistic the stopped run reduced its rounds with")
    p.add_argument("--restate", choices=["min", "median"], help="restate the costs with this statistic")
    p.add_argument("--command", required=True, help="the stopped run's command line")
    p.add_argument("--set", action="append", default=[], metavar="KEY=JSON",
                   help="replace LIKE's top-level KEY with the JSON value (repeatable): the stopped run's "
                        "own host, cost model or skipped planners where they differ from LIKE's")
    p.add_argument("-o", "--output", required=True)
    args = p.parse_args(argv)
    overrides = {}
    for item in args.set:
        key, sep, value = item.partition("=")
        try:
            if not sep or not key:
                raise ValueError("no '='")
            overrides[key] = json.loads(value)
        except ValueError as e:
            print(f"assemble_partial: error: --set {item!r} is not KEY=JSON ({e}); e.g. --set "
                  "'policy=\"src/autoshard/data/default_policy.pt\"'", file=sys.stderr)
            return 2
    files = sorted(Path(args.bench_dir, "tasks").glob("*.json"))
    if not files:
        print(f"assemble_partial: error: no tasks/*.json in {args.bench_dir}", file=sys.stderr)
        return 2
    try:
        tasks = [read_json(f, kind="autoshard.bench_task") for f in files]
        like = read_json(args.like)
        results = [TaskResult.from_json(t) for t in tasks]
    except AutoshardError as e:
        print(f"assemble_partial: error: {e}", file=sys.stderr)
        return 2
    statistic, note = args.round_statistic, ""
    if args.restate and args.restate != statistic:
        results = [restate_task(r, args.restate) for r in results]
        statistic, note = args.restate, f" (run with {args.round_statistic}, restated with {args.restate})"
    algorithms = [r.algorithm for r in results[0].results]
    summary = summarize(results, algorithms, statistic=statistic)
    out = {**like, **overrides, "tasks": [r.to_json() for r in results], "round_statistic": statistic,
           "command": args.command, "summary": [s.to_json() for s in summary],
           "partial": f"{len(tasks)} measured tasks of a run stopped before its report{note}"}
    write_json(args.output, out)
    print(f"wrote {args.output}: {len(tasks)} tasks")
    return 0


if __name__ == "__main__":
    sys.exit(main())
