"""Several bench runs of the same tasks scored against one oracle pooled over all of them.

Run: .venv/bin/python benchmarks/pooled_runs.py RUN [RUN ...] [--algos search,neuroshard,...]

RUN: bench results files (``DIR/bench/results.json``, or gzipped in ``benchmarks/runs/``) that measured the
same tasks with identical heuristic plans (the heuristics are deterministic), e.g. the same suite planned
with different cost models. Why: one run's "ratio to the best heuristic" picks the per-task cheapest of its
own noisy heuristic costs, so a planner that returns the truly best heuristic's plan still scores above 1
(``cross_run_oracle.py`` measures that floor between two runs). Pooling N runs prices every plan by all the
measurements of it: a plan's cost on a task is the geometric mean over the runs that measured it of its step
over that run's geometric-mean heuristic step on the task (each run's and each task's level removed, so a
slower host or call moves nothing), and the oracle is the cheapest heuristic by that pooled cost. A learned
planner's plan that equals a heuristic's gets the heuristic's pooled cost (N runs of it); a plan of its own
only its own run's. Each run's algorithms are then scored against the pooled oracle and against the best
fixed heuristic (the heuristic with the lowest pooled geometric mean over the tasks); the interval is a 95%
bootstrap over tasks (``costs.metrics.geomean_interval``). It also says which heuristic's plan each learned
planner returned, per run. No measurement happens here.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from typing import Any

import numpy as np

from autoshard.bench.summary import geomean, is_heuristic
from autoshard.costs.metrics import geomean_interval
from autoshard.errors import AutoshardError
from autoshard.io import read_json


def run_plans(results: dict[str, Any]) -> dict[str, tuple[str, dict[str, tuple[str, float]]]]:
    """Per task name: (task JSON, {algorithm: (placement JSON, measured step ms)}) of one run."""
    out = {}
    for t in results["tasks"]:
        plans = {}
        for r in t["results"]:
            if r.get("ok") and r.get("measured"):
                plans[r["algorithm"]] = (json.dumps(r["plan"]["tables"], sort_keys=True),
                                         float(r["measured"]["plan_ms"]))
        out[t["task"]["name"]] = (json.dumps(t["task"], sort_keys=True), plans)
    return out


Pooled = tuple[list[str], dict[str, dict[str, float]], dict[str, dict[str, str]]]
"""(task names, per task {placement: pooled log cost}, per task {heuristic: placement})."""


def pooled_costs(runs: list[dict]) -> Pooled:
    """The tasks every run measured identically, and per task: {placement: pooled log cost} and
    {heuristic: placement}. Raises AutoshardError when the runs share no task with identical heuristics."""
    names = [n for n in runs[0] if all(n in r and r[n][0] == runs[0][n][0] for r in runs)]
    tasks, costs, heuristics = [], {}, {}
    for name in names:
        plans = [r[name][1] for r in runs]
        shared = [h for h in plans[0] if is_heuristic(h)
                  and all(h in p and p[h][0] == plans[0][h][0] for p in plans)]
        if len(shared) < 2:
            continue
        logs: dict[str, list[float]] = defaultdict(list)
        for p in plans:
            level = np.mean([np.log(p[h][1]) for h in shared])  # this run's level on this task
            seen = {}
            for placement, ms in p.values():
                seen[placement] = np.log(ms) - level  # one measurement per run of each distinct plan
            for placement, value in seen.items():
                logs[placement].append(value)
        tasks.append(name)
        costs[name] = {k: float(np.mean(v)) for k, v in logs.items()}
        heuristics[name] = {h: plans[0][h][0] for h in shared}
    if not tasks:
        raise AutoshardError("the runs share no task measured with the same heuristic plans; give runs of "
                             "one suite's tasks")
    return tasks, costs, heuristics


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+")
    p.add_argument("--algos", help="comma-separated algorithms to score (default: every learned one)")
    args = p.parse_args(argv)
    try:
        if len(args.runs) < 2:
            raise AutoshardError("give at least two runs of the same tasks")
        raw = [run_plans(read_json(path)) for path in args.runs]
        tasks, costs, heuristics = pooled_costs(raw)
        wanted = args.algos.split(",") if args.algos else None
        planned = {a for run in raw for t in tasks for a in run[t][1]}
        unknown = sorted(set(wanted or ()) - planned)
        if unknown:
            raise AutoshardError(f"--algos: no run planned {', '.join(unknown)}; the runs have "
                                 f"{', '.join(sorted(planned))}")
    except AutoshardError as e:
        print(f"pooled_runs: error: {e}", file=sys.stderr)
        return 2
    except (KeyError, TypeError, ValueError) as e:
        print(f"pooled_runs: error: not a finished bench's results file ({type(e).__name__}: {e})",
              file=sys.stderr)
        return 2
    names = sorted(heuristics[tasks[0]])
    fixed_score = {h: geomean([np.exp(costs[t][heuristics[t][h]]) for t in tasks]) for h in names}
    fixed = min(fixed_score, key=fixed_score.get)
    oracle = {t: min(costs[t][heuristics[t][h]] for h in heuristics[t]) for t in tasks}
    print(f"{len(args.runs)} runs, {len(tasks)} tasks with the heuristics' plans identical in all; pooled "
          f"oracle: per task the cheapest of {', '.join(names)} over every run; best fixed heuristic: "
          f"{fixed}")
    print("heuristic  | pooled ratio to the oracle [95%]")
    for h in names:
        ratios = [float(np.exp(costs[t][heuristics[t][h]] - oracle[t])) for t in tasks]
        low, high = geomean_interval(ratios)
        print(f"{h:<20} {geomean(ratios):.3f} [{low:.3f}, {high:.3f}]")
    print("run | algorithm | vs pooled oracle [95%] | vs best fixed [95%] | plans returned (a heuristic's, "
          "or its own)")
    for path, run in zip(args.runs, raw):
        algos = sorted({a for t in tasks for a in run[t][1] if not is_heuristic(a)
                        and (wanted is None or a in wanted)})
        for a in algos:
            done = [t for t in tasks if a in run[t][1]]
            placed = {t: run[t][1][a][0] for t in done}
            vs_oracle = [float(np.exp(costs[t][placed[t]] - oracle[t])) for t in done]
            vs_fixed = [float(np.exp(costs[t][placed[t]] - costs[t][heuristics[t][fixed]])) for t in done]
            same = Counter(next((h for h in names if heuristics[t][h] == placed[t]), "own") for t in done)
            lo, hi = geomean_interval(vs_oracle)
            flo, fhi = geomean_interval(vs_fixed)
            picks = ", ".join(f"{k} {v}" for k, v in sorted(same.items()))
            print(f"{path} | {a} | {geomean(vs_oracle):.3f} [{lo:.3f}, {hi:.3f}] | {geomean(vs_fixed):.3f} "
                  f"[{flo:.3f}, {fhi:.3f}] | {picks}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
