"""What the learned planners' guard (``planners.guard``) would have returned with another margin, or another
rule for its reference heuristic, on a bench run's measured tasks: no new measurement is needed, because the
guard returns either the planner's own plan P or a heuristic's plan, and the bench measured both.

Run: .venv/bin/python benchmarks/guard_margin.py BENCH_DIR|RESULTS_FILE --cost-model CHECKPOINT
                                                 [--k 0,1,2,3,4.86] [--default-heuristic size_lookup_greedy]

BENCH_DIR is a bench output's ``bench/`` (its ``results.json``), RESULTS_FILE such a file (plain or gzipped:
``benchmarks/runs/``); CHECKPOINT the cost model the run planned with (the comm is the run's own fit, as
in the bench). For every task and learned planner it prices the planner's measured plan P and the guard
heuristics' plans with the model's mean and spread, and prints the geometric mean over tasks of the measured
step over the per-task best heuristic's (the bench's ratio) of:

- margin k: the guard's rule ``mean(P) + k x hypot(s(P), s(H*)) < mean(H*)`` (today k = 1), H* the
  heuristic the model prices cheapest: P's measured step if kept, else H*'s;
- reference rules (at k = 1): 'cheapest' (today), 'default' (the default heuristic unless another is
  predicted cheaper by more than the same margin), 'always' (the default heuristic), and H* itself;
- prices for H* itself (the pick among the heuristic plans, which is all a learned planner returns where
  its own plan does not beat them): the mean step (today), the step at mean + 1 and + 2 x spread (an upper
  quantile), the sum over devices of the mean fwd + bwd (the total work, balance left out), and the
  expected step with every device's error drawn at the ensemble's spread or at 12% of its cost (the
  measured per-device MAPE), ``expected_step`` (stop 49).

A planner whose measured plan is already a heuristic's (the guard returned it in the run) keeps that plan
at every margin: a stricter margin can only return more heuristic plans, so the figures are exact for
k >= the run's, and for k below it they are those plans' (an upper bound on what a looser guard returns).
"""

from __future__ import annotations

import argparse
import functools
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

from autoshard.bench.summary import is_heuristic
from autoshard.costs.base import plan_cost
from autoshard.costs.comm import AlphaBeta
from autoshard.costs.learned import LearnedCostModel
from autoshard.costs.learned.risk import risk_priced
from autoshard.errors import AutoshardError
from autoshard.io import read_json
from autoshard.plan import Plan
from autoshard.planners.guard import GUARD_HEURISTICS, GUARDED, _leximax, plan_spread_ms
from autoshard.tasks import Task

RULES = ("cheapest", "default", "always")
PRICES = ("mean", "mean+1s", "mean+2s", "sum", "E[max]", "E[max]12%")

NOISE_DRAWS = 4000
"""Draws of the devices' errors behind an E[max] price."""


@functools.lru_cache(maxsize=8)
def _noise(devices: int) -> np.ndarray:
    """(NOISE_DRAWS, devices) standard normals, the same for every plan of that many devices."""
    return np.random.default_rng(0).standard_normal((NOISE_DRAWS, devices))


def expected_step(cost: Any, spread: np.ndarray) -> float:
    """E[max fwd] + E[max bwd] + collectives of a plan whose devices' fwd and bwd are off by ``spread`` (D, 2)
    x a standard normal, one draw per device shared by its fwd and bwd (the same tables): among near-tied
    plans, the one with fewer devices near its bottleneck has less room for the model's errors to raise it."""
    z = _noise(len(cost.devices))
    fwd = np.array([x.fwd_ms for x in cost.devices])
    bwd = np.array([x.bwd_ms for x in cost.devices])
    return float((fwd + spread[:, 0] * z).max(axis=1).mean() + (bwd + spread[:, 1] * z).max(axis=1).mean()
                 + cost.collectives_ms)


def geomean(values: list[float]) -> float:
    return float(math.exp(np.mean(np.log(values)))) if values else float("nan")


def _guarded(mine: tuple[float, float, float], heuristic: tuple, heuristic_measured: float,
             k: float) -> float:
    """The measured step of what the guard returns: the planner's plan ((mean, spread, measured)) if its mean
    plus the margin is below the heuristic's (mean, leximax, spread), else the heuristic's."""
    mean, spread, measured = mine
    keep = mean + k * math.hypot(spread, heuristic[2]) < heuristic[0]
    return measured if keep else heuristic_measured


def _price_keys(model: LearnedCostModel, task: Task, plans: dict[str, Plan],
                costs: dict[str, Any]) -> dict[str, dict[str, tuple]]:
    """Each ``PRICES`` rule's sort key of every heuristic plan, from its mean cost (``costs``, already
    priced) or priced again at an upper quantile; the mean's key is the guard's own leximax."""
    keys: dict[str, dict[str, tuple]] = {"mean": {h: _leximax(c) for h, c in costs.items()}}
    for k in (1.0, 2.0):
        upper = risk_priced(model, k)
        keys[f"mean+{k:g}s"] = {h: (plan_cost(upper, task, p).plan_ms,) for h, p in plans.items()}
    keys["sum"] = {h: (sum(d.fwd_ms + d.bwd_ms for d in c.devices),) for h, c in costs.items()}
    spreads = {h: model.device_costs_spread(task, p.device_shards(task))[:, :2] for h, p in plans.items()}
    keys["E[max]"] = {h: (expected_step(c, spreads[h]),) for h, c in costs.items()}
    keys["E[max]12%"] = {h: (expected_step(c, 0.12 * np.array([[d.fwd_ms, d.bwd_ms] for d in c.devices])),)
                         for h, c in costs.items()}
    return keys


def analyse(results: dict, model: LearnedCostModel, ks: list[float], default: str) -> dict:
    out: dict = {"margin": {}, "rules": {}, "prices": {}}
    for t in results["tasks"]:
        task = Task.from_json(t["task"])
        ran = {r["algorithm"]: r for r in t["results"] if r["ok"]}
        best = min(r["measured"]["plan_ms"] for a, r in ran.items() if is_heuristic(a))
        plans = {h: Plan.from_json(ran[h]["plan"]) for h in GUARD_HEURISTICS if h in ran}
        costs = {h: plan_cost(model, task, plan) for h, plan in plans.items()}
        priced = {h: (c.plan_ms, _leximax(c), plan_spread_ms(model, task, plans[h], c.plan_ms))
                  for h, c in costs.items()}
        cheapest = min(priced, key=lambda n: (priced[n][1], n))
        for price, key in _price_keys(model, task, plans, costs).items():
            pick = min(key, key=lambda n: (key[n], n))
            out["prices"].setdefault(price, []).append(ran[pick]["measured"]["plan_ms"] / best)
        fixed = default if default in priced else cheapest
        beats = priced[cheapest][0] + math.hypot(priced[cheapest][2], priced[fixed][2]) < priced[fixed][0]
        reference = {"cheapest": cheapest, "default": cheapest if beats else fixed, "always": fixed}
        for rule, h in reference.items():
            out["rules"].setdefault(("H*", rule), []).append(ran[h]["measured"]["plan_ms"] / best)
        for a in GUARDED:
            if a not in ran:
                continue
            plan = Plan.from_json(ran[a]["plan"])
            cost = plan_cost(model, task, plan)
            spread = plan_spread_ms(model, task, plan, cost.plan_ms)
            mine = (cost.plan_ms, spread, ran[a]["measured"]["plan_ms"])
            for k in ks:
                out["margin"].setdefault((a, k), []).append(
                    _guarded(mine, priced[cheapest], ran[cheapest]["measured"]["plan_ms"], k) / best)
            for rule, h in reference.items():
                out["rules"].setdefault((a, rule), []).append(
                    _guarded(mine, priced[h], ran[h]["measured"]["plan_ms"], 1.0) / best)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("bench", help="a bench output's bench/ directory (results.json), or a results file "
                   "(plain or .json.gz, e.g. benchmarks/runs/)")
    p.add_argument("--cost-model", required=True, help="the checkpoint the run planned with")
    p.add_argument("--k", default="0,1,2,3,4.86", help="guard margins to try (comma-separated)")
    p.add_argument("--default-heuristic", default="size_lookup_greedy", choices=GUARD_HEURISTICS)
    args = p.parse_args(argv)
    try:
        path = Path(args.bench) / "results.json" if Path(args.bench).is_dir() else Path(args.bench)
        if not path.is_file():
            raise AutoshardError(f"{path}: no such file; give a bench output's bench/ directory or its "
                                 "results file")
        try:
            ks = [float(x) for x in args.k.split(",") if x.strip()]
        except ValueError:
            raise AutoshardError(f"--k {args.k!r}: give comma-separated numbers, e.g. 0,1,2") from None
        try:
            results = read_json(path)
            comm = AlphaBeta.from_json(results["comm"])
            if not all("results" in t and "task" in t for t in results["tasks"]):
                raise KeyError("tasks[].results")
        except (AutoshardError, ValueError, KeyError, IndexError, TypeError) as e:
            raise AutoshardError(f"{path}: not a finished bench's results.json ({type(e).__name__}: {e}); "
                                 "re-run 'autoshard bench' to finish it") from None
        # re-prices an archived run's plans, nothing timed here: any host
        model = LearnedCostModel.load(args.cost_model, allow_other_hardware=True).with_comm(comm)
        out = analyse(results, model, ks, args.default_heuristic)
    except AutoshardError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"{path} ({len(results['tasks'])} tasks): measured step / per-task best heuristic, geometric mean")
    print("guard margin k:   " + "  ".join(f"{k:>6g}" for k in ks))
    for a in GUARDED:
        if (a, ks[0]) in out["margin"]:
            print(f"  {a:<15}" + "  ".join(f"{geomean(out['margin'][(a, k)]):6.3f}" for k in ks))
    print(f"reference heuristic (k = 1; default {args.default_heuristic}): " + "  ".join(RULES))
    for a in ("H*", *GUARDED):
        if (a, RULES[0]) in out["rules"]:
            print(f"  {a:<15}" + "  ".join(f"{geomean(out['rules'][(a, r)]):8.3f}" for r in RULES))
    print("H* picked by price:           " + "  ".join(f"{p:>8}" for p in PRICES))
    print("  H*             " + "  ".join(f"{geomean(out['prices'][p]):8.3f}" for p in PRICES))
    return 0


if __name__ == "__main__":
    sys.exit(main())
