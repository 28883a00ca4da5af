"""Does search's risk objective (mean + risk_k x spread) lose plans the mean would find, by measurement?

    .venv/bin/python benchmarks/risk_objective.py out/s60/dlrm-50-8-descent --tasks 10 -o out/s61/risk.json
    .venv/bin/python benchmarks/risk_objective.py \
        --summary benchmarks/runs/room/s58-amd-risk-objective-dlrm-50-8.json

For each of a bench run's first test tasks (``RUN/test_tasks.json``, that run's measure settings and comm
fit), the four guard heuristics and ``search`` four ways plan it with the shipped default cost model (seed 0,
10 s): guard off at the model's ``risk_k`` (``search_risk``), guard off at the mean (``risk=0``,
``search_mean``), guarded at risk_k as shipped (``search_guarded``) and guarded at the mean
(``search_mean_guarded``). Every task's plans are then timed side by side
(``hardware.evaluator.evaluate_plans``: 3 rounds, a fresh evaluator each, the least kept per device;
collectives from the comm fit: modelled), one task after another. The rows (measured and predicted step per
plan) are written after each task, so an interrupted run keeps what it timed.

``--summary`` reads such a file: each search row's geometric mean over the tasks against the best fixed
heuristic (the one of lowest geometric-mean cost there) and the per-task best, and the mean objective's
plans over the risk objective's, paired per task, with a 95% bootstrap interval over the tasks (one
measurement a plan: the rounds are not resampled).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from autoshard.errors import AutoshardError
from autoshard.io import read_json, write_json

HEURISTICS = ("dim_greedy", "lookup_greedy", "size_greedy", "size_lookup_greedy")
SEARCH_ROWS = (("search_risk", {"guard": 0}), ("search_mean", {"guard": 0, "risk": 0}),
               ("search_guarded", {}), ("search_mean_guarded", {"risk": 0}))
"""Each search row's label and the planner options it runs with."""
PAIRS = (("search_mean", "search_risk"), ("search_mean_guarded", "search_guarded"))
DEFAULT_MODEL = "src/autoshard/data/default_cost_model.pt"
BOOTSTRAP = 2000


def measure(run: Path, tasks: int, out: Path, model_path: str = DEFAULT_MODEL) -> list[dict[str, Any]]:
    """Plan and time the first ``tasks`` test tasks of the bench run in ``run`` (module docstring)."""
    from autoshard.costs.base import plan_cost
    from autoshard.costs.comm import AlphaBeta
    from autoshard.costs.learned import LearnedCostModel
    from autoshard.hardware.evaluator import evaluate_plans
    from autoshard.hardware.kernel import MeasureSettings
    from autoshard.planners.base import PlannerOptions, make_planner, run_planner
    from autoshard.tasks import load_tasks

    for need in ("test_tasks.json", "costs/comm_model.json", "bench/results.json"):
        if not (run / need).is_file():
            raise AutoshardError(f"{run} has no {need}; give the output directory of a finished bench run")
    settings = MeasureSettings.from_json(read_json(run / "bench" / "results.json")["measure_settings"])
    comm = AlphaBeta.load(str(run / "costs" / "comm_model.json"))
    model = LearnedCostModel.load(model_path, allow_other_hardware=True).with_comm(comm)
    rows: list[dict[str, Any]] = []
    for task in load_tasks(str(run / "test_tasks.json"))[:tasks]:
        start = time.perf_counter()
        labels = [*HEURISTICS, *(label for label, _ in SEARCH_ROWS)]
        planners = [(h, {}) for h in HEURISTICS] + [("search", extra) for _, extra in SEARCH_ROWS]
        plans = [run_planner(make_planner(name, PlannerOptions(seed=0, cost_model=model, time_limit_s=10,
                                                               extra=extra)), task)
                 for name, extra in planners]
        costs = evaluate_plans(task, plans, settings, comm, rounds=3)
        rows.append({"task": task.name,
                     "measured": {lab: c.plan_ms for lab, c in zip(labels, costs)},
                     "predicted": {lab: plan_cost(model, task, p).plan_ms for lab, p in zip(labels, plans)}})
        write_json(out, rows)
        print(f"{task.name}: " + " ".join(f"{k} {v:.2f}" for k, v in rows[-1]["measured"].items())
              + f" ({time.perf_counter() - start:.0f} s)", flush=True)
    return rows


def summary_lines(rows: list[dict[str, Any]]) -> list[str]:
    """The summary of ``--summary`` (module docstring), one line per figure."""
    if not rows:
        raise AutoshardError("no tasks in the file; run the measurement first")
    m = {k: np.array([r["measured"][k] for r in rows]) for k in rows[0]["measured"]}
    fixed = min(HEURISTICS, key=lambda h: float(np.mean(np.log(m[h]))))
    best = np.min([m[h] for h in HEURISTICS], axis=0)
    out = [f"{len(rows)} tasks; best fixed heuristic {fixed}"]
    for label, _ in SEARCH_ROWS:
        fixed_ratio, best_ratio = (np.exp(np.mean(np.log(m[label] / ref))) for ref in (m[fixed], best))
        out.append(f"{label}: {fixed_ratio:.3f} of the best fixed heuristic, {best_ratio:.3f} of the "
                   "per-task best")
    rng = np.random.default_rng(0)
    for a, b in PAIRS:
        logs = np.log(m[a] / m[b])
        draws = np.exp([rng.choice(logs, len(logs)).mean() for _ in range(BOOTSTRAP)])
        lo, hi = np.percentile(draws, [2.5, 97.5])
        out.append(f"{a} / {b}: {np.exp(logs.mean()):.3f} [{lo:.3f}, {hi:.3f}], lower on "
                   f"{int((logs < 0).sum())} of {len(logs)} tasks")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", nargs="?", help="a finished bench run's output directory (`autoshard bench -o`)")
    ap.add_argument("--tasks", type=int, default=10, help="how many of its test tasks (first ones)")
    ap.add_argument("-o", "--output", help="where to write the rows (JSON, rewritten after each task)")
    ap.add_argument("--summary", help="summarise a file this script wrote instead of measuring")
    args = ap.parse_args(argv)
    try:
        if args.summary:
            rows = json.loads(Path(args.summary).read_text())
        elif args.run and args.output and args.tasks > 0:
            rows = measure(Path(args.run), args.tasks, Path(args.output))
        else:
            raise AutoshardError("give RUN -o OUT (with --tasks >= 1), or --summary FILE")
        print("\n".join(summary_lines(rows)))
    except (AutoshardError, OSError, ValueError, KeyError) as e:
        print(f"risk_objective: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
