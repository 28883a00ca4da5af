"""Where do the measured plans of archived bench runs stand above their task's balance floor, per stage?

    .venv/bin/python benchmarks/floor_gaps.py benchmarks/runs/s55-amd-dlrm-20-8-descent-v4.json.gz \
        --algos search+top3,search+top3+descent8

``autoshard.bench.room`` floors a task at the least over its measured plans of (mean device fwd, at least the
costliest table's stage floor) + (the same for bwd) + (each collective at the least busiest-rank bytes). A
plan's step is its slowest fwd + its slowest bwd + its collectives, so its distance to the floor splits into
three gaps: its slowest fwd over the floor's fwd term, its slowest bwd over the bwd term, its collectives over
theirs (each term of the plan that sets the task's floor). Printed per run: on how many tasks the floor's bwd
term is above that plan's mean device bwd (set by the costliest table's piece, or by the work its cut adds),
and for the suite's best fixed heuristic and each asked algorithm the mean of each gap over the tasks (ms)
and its share of the mean distance. A gap a planner cannot close tells where the room it leaves is. Runs
before stop 57 recorded no shards timed alone: their floor pairs one plan's mean with the costliest table's
cheapest column cut, which no single plan may reach together; from stop 57 the cut's own work and ids are
priced (``bench.room.cut_floor_terms``). Reads the runs only; measures nothing.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import numpy as np

from autoshard.bench.room import least_shard_bytes, result_floor_terms
from autoshard.bench.summary import best_fixed_heuristic, task_costs
from autoshard.breakdown import PlanCost
from autoshard.errors import AutoshardError
from autoshard.io import read_json
from autoshard.pipeline.results import TaskResult

STAGES = ("fwd", "bwd", "collectives")


def step_terms(cost: PlanCost) -> np.ndarray:
    """(3,) a measured plan's step by term: slowest fwd, slowest bwd, collectives."""
    return np.array([max(d.fwd_ms for d in cost.devices), max(d.bwd_ms for d in cost.devices),
                     sum(c.ms for c in cost.collectives)])


def run_gaps(raw: dict[str, Any], algos: list[str]) -> tuple[str, dict[str, np.ndarray], int]:
    """The run's best fixed heuristic, {algorithm: (tasks, 3) gaps over each task's floor} for it and
    ``algos`` (tasks where every one of them was measured), and on how many of those tasks the floor's bwd
    term is above the mean device bwd of the plan that sets it (a table's piece timed alone, or, where the
    run timed its cuts, the work a cut adds)."""
    alpha = float((raw.get("comm") or {}).get("alpha_ms", 0.0))
    if not isinstance(raw.get("tasks"), list):
        raise AutoshardError("not a bench results file (no tasks); give a bench/results.json")
    try:
        results = [TaskResult.from_json(t) for t in raw["tasks"]]
    except (KeyError, TypeError, ValueError) as e:
        raise AutoshardError(f"a task of the run cannot be read ({type(e).__name__}: {e})") from None
    reference = best_fixed_heuristic([task_costs(tr) for tr in results])
    if reference is None:
        raise AutoshardError("the run has no heuristic measured; nothing to compare with")
    names = list(dict.fromkeys([reference, *algos]))
    gaps: dict[str, list[np.ndarray]] = {a: [] for a in names}
    by_stage = 0
    for tr in results:
        by = {r.algorithm: r for r in tr.results if r.ok and r.measured is not None}
        if any(a not in by for a in names):
            continue
        least = least_shard_bytes(tr.task)
        floors = {a: result_floor_terms(tr.task, r, tr.stage_floor, least, alpha) for a, r in by.items()}
        setter = min(floors, key=lambda a: float(floors[a].sum()))
        floor = floors[setter]
        by_stage += bool(floor[1] > np.mean([d.bwd_ms for d in by[setter].measured.devices]) * (1 + 1e-9))
        for a in names:
            gaps[a].append(step_terms(by[a].measured) - floor)
    if not gaps[reference]:
        raise AutoshardError(f"no task has every one of {', '.join(names)} measured; check --algos")
    return reference, {a: np.array(g).reshape(-1, 3) for a, g in gaps.items()}, by_stage


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help="bench results files (bench/results.json, or gzipped)")
    ap.add_argument("--algos", default="", help="comma-separated algorithms beside the best fixed heuristic")
    args = ap.parse_args(argv)
    algos = [a.strip() for a in args.algos.split(",") if a.strip()]
    try:
        for path in args.runs:
            raw = read_json(path, kind="autoshard.bench")
            try:
                reference, gaps, by_stage = run_gaps(raw, algos)
            except AutoshardError as e:
                raise AutoshardError(f"{path}: {e}") from None
            n = len(next(iter(gaps.values())))
            print(f"{path}: {n} tasks with every algorithm measured; gaps over the task's balance floor, "
                  "mean ms (share of the distance); the floor's bwd term is above its plan's mean device "
                  f"bwd on {by_stage} of them")
            for a, g in gaps.items():
                mean = g.mean(axis=0) if len(g) else np.zeros(3)
                total = float(mean.sum())
                parts = ", ".join(f"{s} {m:.2f} ({m / total:.0%})" if total > 0 else f"{s} {m:.2f}"
                                  for s, m in zip(STAGES, mean))
                label = f"{a} (best fixed heuristic)" if a == reference else a
                print(f"  {label}: {total:.2f} ms = {parts}")
    except AutoshardError as e:
        print(f"floor_gaps: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
