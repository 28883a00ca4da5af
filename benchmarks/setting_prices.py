"""What a planner setting changes in the plans a learned planner makes, by the planning model's own prices:
each archived bench run's tasks planned again under each ``--setting`` (``autoshard plan --option``), every
plan priced by the model it was planned with (its mean step, as the planners plan), no hardware timed.

Run: .venv/bin/python benchmarks/setting_prices.py RESULTS... --setting even_splits=false
         --setting even_splits=true [--algo neuroshard] [--model M.pt ...]

RESULTS are ``autoshard bench`` results files (plain or gzipped: ``benchmarks/runs/``); their tasks and comm
fit are used. ``--setting`` is one planner setting list (``KEY=VALUE[,KEY=VALUE]``; ``-`` for the defaults),
repeated; the first is the reference. ``--model`` (repeat; default the shipped model) plans and prices. Prints
per run and model the geometric mean over its tasks of each setting's price over the reference's, the least
such ratio, and on how many tasks it moved by more than 0.5%: where the setting could matter at all, before a
same-day measurement (``benchmarks/model_swap_same_day.py --replan --run-option ... --option ...``) says
whether it does.

Measured at stop 88 (AMD EPYC VM): ``--setting even_splits=false --setting even_splits=true`` over eight
archived runs, docs/benchmarks.md, "Stop 88".
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
import torch

from autoshard.cli.plan import parse_options
from autoshard.costs.base import CostModel, plan_cost
from autoshard.costs.comm import AlphaBeta
from autoshard.costs.loading import SHIPPED_COST_MODEL, load_cost_model, resolve_cost_model
from autoshard.errors import AutoshardError
from autoshard.io import read_json
from autoshard.planners.base import PlannerOptions, make_planner, run_planner
from autoshard.tasks import Task

MOVED = 0.005
"""A task counts as moved when its price changes by more than this share."""


def settings_of(texts: list[str]) -> list[dict[str, str]]:
    """``['-', 'a=1,b=2']`` -> ``[{}, {'a': '1', 'b': '2'}]``."""
    return [{} if t.strip() == "-" else parse_options(t.split(",")) for t in texts]


def prices(run: dict, loaded: CostModel, algo: str, settings: list[dict[str, str]],
           policy: str | None) -> list[list[float]]:
    """For every task of ``run``: the mean-step price of ``algo``'s plan under each setting."""
    model = loaded.with_comm(AlphaBeta.from_json(run["comm"]))
    mean = resolve_cost_model(model, 0.0)
    limit = float((run.get("planner_extra") or {}).get("time_limit_s", 10.0))
    out = []
    for t in run["tasks"]:
        task = Task.from_json(t["task"])
        row = []
        for extra in settings:
            options = PlannerOptions(cost_model=model, policy_path=policy, time_limit_s=limit,
                                     extra=dict(extra))
            row.append(plan_cost(mean, task, run_planner(make_planner(algo, options), task)).plan_ms)
        out.append(row)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", nargs="+", help="bench results files")
    ap.add_argument("--setting", action="append", required=True,
                    help="planner settings KEY=VALUE[,KEY=VALUE] or '-' (repeat; the first is the reference)")
    ap.add_argument("--algo", default="neuroshard", help="the learned planner (neuroshard, search, ilp, rl)")
    ap.add_argument("--model", action="append", help="a cost model checkpoint (repeat; default the shipped)")
    ap.add_argument("--policy", default=None, help="rl's policy (default the shipped one)")
    args = ap.parse_args(argv)
    models = args.model or [str(SHIPPED_COST_MODEL)]
    try:
        if len(args.setting) < 2:
            raise AutoshardError("give at least two --setting lists: a reference and one to compare")
        settings = settings_of(args.setting)
        loaded = {m: load_cost_model(m, allow_other_hardware=True) for m in models}  # each read once
        for extra in settings:  # an unknown key: one line now, before any planning
            make_planner(args.algo, PlannerOptions(cost_model=loaded[models[0]], policy_path=args.policy,
                                                   extra=dict(extra)))
        runs = [(path, read_json(path, kind="autoshard.bench")) for path in args.results]
    except AutoshardError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    for path, run in runs:
        print(f"{Path(path).name}: {len(run.get('tasks') or [])} tasks, {args.algo}")
        for m in models:
            table = np.array(prices(run, loaded[m], args.algo, settings, args.policy))
            ratios = table[:, 1:] / table[:, :1]
            cells = []
            for k, text in enumerate(args.setting[1:]):
                r = ratios[:, k]
                cells.append(f"{text}: {math.exp(np.mean(np.log(r))):.4f} (least {r.min():.3f}, "
                             f"{int((np.abs(r - 1) > MOVED).sum())} of {len(r)} moved)")
            print(f"  {Path(m).name:32s} over {args.setting[0]}: " + "; ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
