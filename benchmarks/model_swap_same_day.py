"""The learned planners' plans of a bench run against another cost model's plans of the same tasks, timed
side by side on the same day: what swapping the planning model changes, without a second bench run on a day
whose host runs at another speed.

Run: .venv/bin/python benchmarks/model_swap_same_day.py BENCH_DIR --model OTHER.pt [--policy POLICY.pt]
     [--replan --run-policy RUN_POLICY.pt]
     .venv/bin/python benchmarks/model_swap_same_day.py BENCH_DIR --calibration CAL.json [--model M.pt]
     .venv/bin/python benchmarks/model_swap_same_day.py BENCH_DIR --replan --run-option KEY=VALUE
     [--task NAME ...]

With ``--calibration`` OTHER is ``--model`` (default the shipped model) corrected by that table calibration
(``autoshard calibrate-tables``; ``costs.table_calibration``).

BENCH_DIR is an ``autoshard bench`` output (its ``bench/results.json``). For every task, the run's
oracle-picked heuristic plan H* (the cheapest heuristic plan the run measured), the run's learned plans and
``OTHER``'s (planned again here with the run's comm fit, the run's planning time limit and seed) are timed
together in 3 interleaved rounds (``hardware.evaluator.evaluate_plans``, collectives from the run's comm fit;
a device two plans share is timed once, so two equal plans measure the same). H* is re-timed here, so its
ratio carries no oracle-pick bias. Prints per planner the geometric mean of plan / H* for the run's model and
for OTHER, their ratio with a 95% bootstrap interval over the tasks, and the tasks where one is more than 1%
below the other. Where a planner's two plans measure more than 2% apart, a line under the task says what each
model priced them and H* at (the ensemble's mean step, ms; ``--run-model``: the model the run planned with,
default the shipped one), so a loss shows which model misranked which plans. ``--replan`` plans the run's side
again here too, with ``--run-model`` and today's code, instead of reading the run's plans: the two sides then
differ in the model alone (for an archived run planned by older code; ``zcat benchmarks/runs/X.json.gz >
DIR/bench/results.json`` makes it a BENCH_DIR). ``--run-option`` / ``--option KEY=VALUE`` (as ``autoshard plan
--option``) set planner settings on the run's side (with ``--replan``) and on OTHER's; without ``--model``,
OTHER is ``--run-model``: the same model planning with other settings (e.g. ``--replan --run-option
even_splits=false``: a search change, same day). ``--task NAME`` (repeatable) times only those tasks of the
run (a long suite in parts, or one task again).

Measured at stop 20 (AMD EPYC VM, 11 min): DLRM-20 (8) planned with the calibrated default (the run) against
the default as shipped (OTHER): docs/benchmarks.md, "The same tasks, the same day".
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
import torch

from autoshard.bench.summary import is_heuristic
from autoshard.cli.plan import parse_options
from autoshard.costs.base import plan_cost
from autoshard.costs.comm import AlphaBeta
from autoshard.costs.loading import SHIPPED_COST_MODEL, SHIPPED_POLICY, load_cost_model
from autoshard.costs.metrics import geomean_interval
from autoshard.costs.table_calibration import CalibratedCostModel
from autoshard.errors import AutoshardError
from autoshard.hardware.evaluator import evaluate_plans
from autoshard.hardware.kernel import MeasureSettings
from autoshard.io import read_json
from autoshard.pipeline.calibration import load_calibration
from autoshard.plan import Plan
from autoshard.planners.base import PlannerOptions, make_planner, run_planner
from autoshard.tasks import Task

LEARNED = ("rl", "neuroshard", "search", "ilp")


def _geomean(x: np.ndarray) -> float:
    return float(math.exp(np.mean(np.log(x))))


def _other_model(args: argparse.Namespace):
    """``--model``, corrected by ``--calibration`` when given (which must be a calibration of that model)."""
    if not args.calibration:
        if not args.model and not (args.option or args.run_option):
            raise AutoshardError("give --model OTHER.pt, --calibration CAL.json, or planner settings "
                                 "(--option / --run-option KEY=VALUE)")
        return load_cost_model(args.model or args.run_model, allow_other_hardware=args.allow_other_hardware)
    path = args.model or str(SHIPPED_COST_MODEL)
    calibration = load_calibration(args.calibration, path)
    return CalibratedCostModel(load_cost_model(path, allow_other_hardware=True), calibration)


def _disagreements(task: Task, plans: dict[str, Plan], ms: dict[str, float], algos: list[str],
                   models: dict[str, object]) -> list[str]:
    """For each planner whose two plans measured more than 2% apart: the measured step of H* and of both
    plans, and each model's mean price of the three (which model ranked them as they measured)."""
    lines = []
    for a in algos:
        names = ("H*", f"run:{a}", f"other:{a}")
        if abs(ms[names[2]] / ms[names[1]] - 1.0) <= 0.02:
            continue
        priced = {m: [plan_cost(model, task, plans[n]).plan_ms for n in names] for m, model in models.items()}
        measured = " / ".join(f"{ms[n]:.2f}" for n in names)
        prices = "; ".join(f"{m} prices " + " / ".join(f"{x:.2f}" for x in p) for m, p in priced.items())
        lines.append(f"  {a}: H* / run / other measured {measured} ms; {prices}")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("bench", help="an autoshard bench output directory")
    ap.add_argument("--model", help="the other planning cost model (with --calibration: the model it "
                                    "corrects, default the shipped one)")
    ap.add_argument("--calibration", help="a table calibration (autoshard calibrate-tables) of --model")
    ap.add_argument("--run-model", default=str(SHIPPED_COST_MODEL),
                    help="the run's model (prices disagreeing plans; with --replan, plans)")
    ap.add_argument("--replan", action="store_true",
                    help="plan the run's side again with --run-model instead of reading the run's plans")
    ap.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                    help="a planner setting for OTHER's plans (repeatable)")
    ap.add_argument("--run-option", action="append", default=[], metavar="KEY=VALUE",
                    help="a planner setting for the run's side (with --replan; repeatable)")
    ap.add_argument("--policy", default=str(SHIPPED_POLICY), help="OTHER's policy for rl")
    ap.add_argument("--run-policy", help="the run's side's policy for rl (with --replan; default the "
                                         "shipped one)")
    ap.add_argument("--task", action="append", default=[], metavar="NAME",
                    help="only this task of the run (repeatable; default all)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--allow-other-hardware", action="store_true",
                    help="plan with a --model trained on other hardware anyway (as bench's flag)")
    args = ap.parse_args(argv)
    path = Path(args.bench) / "bench" / "results.json"
    try:
        if not path.is_file():
            raise AutoshardError(f"{path}: no such file; give an 'autoshard bench' output directory")
        run = read_json(path)
        tasks = run.get("tasks") or []
        if not tasks or "comm" not in run or "measure_settings" not in run:
            raise AutoshardError(f"{path} has no measured tasks; let the bench finish first")
        unknown = sorted(set(args.task) - {t["task"]["name"] for t in tasks})
        if unknown:
            raise AutoshardError(f"no task {unknown[0]!r} in {path}; its tasks are "
                                 f"{', '.join(t['task']['name'] for t in tasks)}")
        tasks = [t for t in tasks if not args.task or t["task"]["name"] in args.task]
        if (args.run_option or args.run_policy) and not args.replan:
            raise AutoshardError("--run-option and --run-policy set how the run's side is planned: add "
                                 "--replan")
        other_extra, run_extra = parse_options(args.option), parse_options(args.run_option)
        comm = AlphaBeta.from_json(run["comm"])  # the run's whole fit, its row-wise terms included
        settings = MeasureSettings.from_json(run["measure_settings"])
        other = _other_model(args).with_comm(comm)
        run_model = load_cost_model(args.run_model, allow_other_hardware=True).with_comm(comm)
        limit = float((run.get("planner_extra") or {}).get("time_limit_s", 10.0))
        options = PlannerOptions(cost_model=other, policy_path=args.policy, time_limit_s=limit,
                                 extra=other_extra)
        again = PlannerOptions(cost_model=run_model, policy_path=args.run_policy or str(SHIPPED_POLICY),
                               time_limit_s=limit, extra=run_extra)
        for a in LEARNED:  # a setting no planner knows: one line now, not a traceback at the first task
            make_planner(a, options), make_planner(a, again)
    except AutoshardError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    ratios: dict[str, dict[str, list[float]]] = {a: {"run": [], "other": []} for a in LEARNED}
    for t in tasks:
        task = Task.from_json(t["task"])
        res = {a["algorithm"]: a for a in t["results"] if a.get("plan") and a.get("measured")}
        heuristics = [h for h in res if is_heuristic(h)]
        algos = [a for a in LEARNED if a in res]
        if not heuristics or not algos:
            continue
        hstar = min(heuristics, key=lambda h: res[h]["measured"]["plan_ms"])
        plans = {"H*": Plan.from_json(res[hstar]["plan"])}
        for a in algos:
            plans[f"run:{a}"] = (run_planner(make_planner(a, again), task) if args.replan
                                 else Plan.from_json(res[a]["plan"]))
            plans[f"other:{a}"] = run_planner(make_planner(a, options), task)
        names = list(plans)
        ms = dict(zip(names, (c.plan_ms for c in evaluate_plans(task, list(plans.values()), settings, comm,
                                                                  rounds=args.rounds))))
        for a in algos:
            ratios[a]["run"].append(ms[f"run:{a}"] / ms["H*"])
            ratios[a]["other"].append(ms[f"other:{a}"] / ms["H*"])
        print(task.name, " ".join(f"{a} {ratios[a]['run'][-1]:.3f}/{ratios[a]['other'][-1]:.3f}"
                                  for a in algos), flush=True)
        for line in _disagreements(task, plans, ms, algos, {"run's model": run_model, "other": other}):
            print(line, flush=True)
    print("planner     run's model / H*   other / H*   run / other [95% interval]   tasks run better / worse")
    for a in LEARNED:
        r, o = np.array(ratios[a]["run"]), np.array(ratios[a]["other"])
        if not len(r):
            continue
        low, high = geomean_interval(list(r / o))
        print(f"{a:<11} {_geomean(r):>17.3f} {_geomean(o):>12.3f} {_geomean(r / o):>8.3f} "
              f"[{low:.3f}, {high:.3f}] {int((r < 0.99 * o).sum()):>12} / {int((r > 1.01 * o).sum())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
