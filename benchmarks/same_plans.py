"""Did two bench runs of the same tasks return the same plans? Per algorithm, on how many of the tasks both
runs measured the two plans place every shard alike, and beside it each run's comm fit and each planner's
longest planning time.

    .venv/bin/python benchmarks/same_plans.py benchmarks/runs/s70-amd-dlrm-10-4-r6-torchrec.json.gz \
        benchmarks/runs/s70-amd-dlrm-10-4-r6-again-torchrec.json.gz

Why (docs/benchmarks.md, "Stop 71"): stop 70's two DLRM-10 (4) runs of one code returned other learned plans
on 5-6 of 10 tasks, neuroshard's among them although it never reached a time limit. A planner is a function
of the task, the cost model and the comm fit (and, where it stops on a clock, of the host's speed); the
heuristics' plans do not depend on the fit, so they should agree everywhere, and a learned planner that
finished within its limit in both runs and still changed its plan changed it with the fit.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from autoshard.costs.comm import AlphaBeta
from autoshard.errors import AutoshardError
from autoshard.io import read_json
from autoshard.pipeline.results import TaskResult, task_results_of


def placements(tr: TaskResult) -> dict[str, dict]:
    """Per algorithm with a plan: its placement (every table's sharding type and shards)."""
    return {r.algorithm: r.plan.to_json()["tables"] for r in tr.results if r.ok and r.plan is not None}


def agreement(a: list[TaskResult], b: list[TaskResult]) -> tuple[int, dict[str, tuple[int, int]]]:
    """(tasks both measured, per algorithm (tasks with the same plan, tasks both planned))."""
    def key(t: TaskResult) -> str:
        return json.dumps(t.task.to_json(), sort_keys=True)

    by_key = {key(t): t for t in b}
    counts: dict[str, list[int]] = {}  # in the order the run lists its algorithms
    shared = 0
    for ta in a:
        tb = by_key.get(key(ta))
        if tb is None:
            continue
        shared += 1
        pa, pb = placements(ta), placements(tb)
        for algo in [x for x in pa if x in pb]:
            c = counts.setdefault(algo, [0, 0])
            c[0] += pa[algo] == pb[algo]
            c[1] += 1
    return shared, {k: (v[0], v[1]) for k, v in counts.items()}


def comm_fit(run: dict, path: str) -> AlphaBeta | None:
    """The run's comm model (None where it has none); one-line error where it is malformed."""
    if not run.get("comm"):
        return None
    try:
        return AlphaBeta.from_json(run["comm"])
    except (KeyError, TypeError, ValueError) as e:
        raise AutoshardError(f"{path}: a malformed comm model ({e!r}); pass a results file the bench "
                             "wrote") from None


def longest_planning(tasks: list[TaskResult]) -> dict[str, float]:
    out: dict[str, float] = {}
    for t in tasks:
        for r in t.results:
            if r.planning_time_s is not None:
                out[r.algorithm] = max(out.get(r.algorithm, 0.0), r.planning_time_s)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_a", help="a bench results file (.json or .json.gz)")
    p.add_argument("run_b", help="another run of the same suite")
    args = p.parse_args(argv)
    try:
        runs, fits = [], []
        for path in (args.run_a, args.run_b):
            run = read_json(path, kind="autoshard.bench")  # read once: its tasks and its comm fit
            runs.append((path, task_results_of(run, path)))
            fits.append(comm_fit(run, path))
        shared, counts = agreement(runs[0][1], runs[1][1])
        if not shared:
            raise AutoshardError(f"{args.run_a} and {args.run_b} share no task; pass two runs of one suite")
    except AutoshardError as e:
        print(f"same_plans: error: {e}", file=sys.stderr)
        return 2
    for (path, tasks), fit in zip(runs, fits):
        about = ("no comm fit" if fit is None
                 else f"comm fit {fit.alpha_ms:.2f} ms, {fit.bytes_per_ms / 1e6:.3f} GB/s")
        print(f"{Path(path).name}: {len(tasks)} tasks, {about}")
    long_a, long_b = longest_planning(runs[0][1]), longest_planning(runs[1][1])
    print(f"\n{shared} tasks in both runs")
    print("| algorithm | same plan | longest planning, s (A / B) |")
    print("|---|---|---|")
    for algo, (same, both) in counts.items():
        print(f"| {algo} | {same} of {both} | {long_a.get(algo, 0.0):.1f} / {long_b.get(algo, 0.0):.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
