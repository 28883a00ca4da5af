"""TorchRec's planner with other settings on a bench run's tasks, timed side by side with the run's plans: is
the bench's TorchRec baseline (row_wise offered on CPU, ``torchrec.baseline``) the strongest TorchRec?

Run: .venv/bin/python benchmarks/torchrec_variants.py BENCH_DIR [--variant cpu_row_wise=false ...]
                                                       [--algos rl,search] [--rounds 3] [-o rows.json]

BENCH_DIR is an ``autoshard bench`` output run with ``torchrec`` among its algorithms (its
``bench/results.json``). For every task: the run's oracle-picked heuristic plan H* (its cheapest measured
heuristic plan), the run's TorchRec plan, TorchRec planned again with each ``--variant``
(``KEY=VALUE[;KEY=VALUE]`` settings of ``autoshard plan --algo torchrec --option``; default
``cpu_row_wise=false``: TorchRec's own sharder, which proposes no row_wise on a CPU topology) and the run's
plans of ``--algos``, all timed together in ``--rounds`` interleaved rounds
(``hardware.evaluator.evaluate_plans``, collectives from the run's comm fit, as the bench prices them at
D > 2). H* is re-timed here, so its ratio carries no oracle-pick bias.
Printed: per task each plan's step / H*'s, then per plan the geometric mean over tasks with a 95% bootstrap
interval (``costs.metrics.geomean_interval``) and each learned plan against the best TorchRec plan of the task
(the minimum over the TorchRec variants, picked after measuring: a bias in TorchRec's favour).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from autoshard.bench.summary import geomean, is_heuristic
from autoshard.cli.plan import parse_options
from autoshard.costs.comm import AlphaBeta
from autoshard.costs.metrics import geomean_interval
from autoshard.errors import AutoshardError
from autoshard.hardware.evaluator import evaluate_plans
from autoshard.hardware.kernel import MeasureSettings
from autoshard.io import read_json, write_json
from autoshard.plan import Plan
from autoshard.planners.base import PlannerOptions, make_planner, run_planner
from autoshard.tasks import Task


def _variant(text: str) -> dict[str, str]:
    try:
        return parse_options(text.split(";"))
    except AutoshardError:
        raise AutoshardError(f"--variant {text!r}: give KEY=VALUE[;KEY=VALUE], e.g. cpu_row_wise=false"
                             ) from None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bench", help="an autoshard bench output directory (torchrec among its algorithms)")
    ap.add_argument("--variant", action="append", help="TorchRec settings KEY=VALUE[;KEY=VALUE] (repeatable; "
                                                       "default cpu_row_wise=false)")
    ap.add_argument("--algos", default="rl,search", help="the run's plans to time beside them")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("-o", "--output", help="also write the per-task rows as JSON here")
    args = ap.parse_args(argv)
    path = Path(args.bench) / "bench" / "results.json"
    try:
        if not path.is_file():
            raise AutoshardError(f"{path}: no such file; give an 'autoshard bench' output directory")
        run = read_json(path)
        variants = [_variant(v) for v in (args.variant or ["cpu_row_wise=false"])]
        comm = AlphaBeta.from_json(run["comm"])
        settings = MeasureSettings.from_json(run["measure_settings"])
    except (AutoshardError, KeyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    algos = [a for a in args.algos.split(",") if a]
    rows = []
    for t in run.get("tasks") or []:
        task = Task.from_json(t["task"])
        res = {a["algorithm"]: a for a in t["results"] if a.get("plan") and a.get("measured")}
        heuristics = [h for h in res if is_heuristic(h)]
        if not heuristics or "torchrec" not in res:
            continue
        hstar = min(heuristics, key=lambda h: res[h]["measured"]["plan_ms"])
        plans = {"H*": Plan.from_json(res[hstar]["plan"]),
                 "torchrec": Plan.from_json(res["torchrec"]["plan"])}
        for v in variants:
            label = "torchrec[" + ";".join(f"{k}={x}" for k, x in v.items()) + "]"
            plans[label] = run_planner(make_planner("torchrec", PlannerOptions(extra=dict(v))), task)
        for a in algos:
            if a in res:
                plans[a] = Plan.from_json(res[a]["plan"])
        costs = evaluate_plans(task, list(plans.values()), settings, comm, rounds=args.rounds)
        ms = {name: c.plan_ms for name, c in zip(plans, costs)}
        row = {"task": task.name, "hstar": hstar, "ms": ms}
        rows.append(row)
        print(task.name, " ".join(f"{n} {ms[n] / ms['H*']:.3f}" for n in ms if n != "H*"), flush=True)
    if not rows:
        print("error: no task with a heuristic and a torchrec plan", file=sys.stderr)
        return 2
    print("plan / H* (re-timed), geometric mean over tasks [95% interval]")
    names = [n for n in rows[0]["ms"] if n != "H*"]
    for n in names:
        ratios = [r["ms"][n] / r["ms"]["H*"] for r in rows if n in r["ms"]]
        low, high = geomean_interval(ratios)
        print(f"  {n:40s} {geomean(ratios):.3f} [{low:.3f}, {high:.3f}] ({len(ratios)} tasks)")
    torchrecs = [n for n in names if n.startswith("torchrec")]
    for a in (n for n in names if not n.startswith("torchrec")):
        ratios = [r["ms"][a] / min(r["ms"][n] for n in torchrecs) for r in rows if a in r["ms"]]
        low, high = geomean_interval(ratios)
        print(f"  {a} / the best TorchRec plan of the task: {geomean(ratios):.3f} [{low:.3f}, {high:.3f}]")
    if args.output:
        write_json(args.output, {"command": sys.argv, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
