"""Would pricing a plan by its expected slowest device, under the model's own per-device error, pick better
plans than pricing it by its predicted slowest device? Replayed on archived bench runs.

    .venv/bin/python benchmarks/expected_max.py benchmarks/runs/s7[2-4]-*.json.gz [--scales 0,0.5,1,1.5]

Why (docs/benchmarks.md, "Stop 75"): a planner that balances the model's predictions leaves every device
near the predicted maximum, and the measured step is the slowest of them under the model's error (the
optimiser's curse); a plan whose devices sit level is exposed through every device, one with a single
dominant device through one. The objective that says so prices a plan by E[max_d fwd_d x e_d] + E[max_d
bwd_d x e_d] + its collectives, e_d lognormal of mean 1 and log-sd sigma, devices independent (modelled).

For each run: sigma is the run's per-device error, the sd of log(measured / predicted) over every forward
and backward of its candidate plans, each plan's own level removed (the level moves every plan alike);
cross-fitted: a task's sigma comes from the run's other tasks. Each task's candidates are its measured plans
but ``random``'s and ``torchrec``'s (the heuristics' and the learned planners' plans, the set the guard
chooses among); each objective picks its cheapest (``scale`` x sigma; scale 0 is the predicted maximum, the
planners' objective). Per run and pooled over the runs: the mean Spearman between the objective and the
measured steps over a task's candidates, the picked plan's measured step over the task's best candidate
(geometric mean), and the E[max] pick's over the predicted maximum's pick, task by task, with the bench's
bootstrap interval (``bench.summary.compare``: tasks and measurement rounds resampled) and verdict. Fixed
Gaussian draws (seed 0), so the replay is deterministic. Nothing is planned or measured; it weighs picks
among plans the planners made for the other objective, not plans a planner would make for this one.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

from autoshard.bench.summary import compare, geomean
from autoshard.breakdown import PlanCost
from autoshard.errors import AutoshardError
from autoshard.io import read_json
from autoshard.pipeline.results import AlgoResult, TaskResult, task_results_of

LEFT_OUT = ("random", "torchrec")
"""Rows that are not candidates: the guard never picks them."""
DRAWS = 4000
"""Gaussian draws per device for E[max] (its Monte Carlo sd is under 0.1% of a step at sigma 0.2)."""


def candidates(tr: TaskResult) -> list[AlgoResult]:
    """``tr``'s measured plans with a predicted breakdown, but those of ``LEFT_OUT``."""
    return [r for r in tr.results if r.ok and r.algorithm not in LEFT_OUT and r.measured is not None
            and r.predicted is not None and r.predicted.devices and len(r.measured.devices)
            == len(r.predicted.devices)]


def level_free_logs(r: AlgoResult) -> list[float]:
    """log(measured / predicted) of every forward and backward of ``r``'s devices, its plan's mean removed."""
    out: list[float] = []
    for stage in ("fwd_ms", "bwd_ms"):
        logs = [math.log(max(getattr(m, stage), 1e-9) / max(getattr(p, stage), 1e-9))
                for p, m in zip(r.predicted.devices, r.measured.devices)]
        out += [x - sum(logs) / len(logs) for x in logs]
    return out


def expected_max(values: np.ndarray, sigma: float, z: np.ndarray) -> float:
    """E[max_d values_d x e_d], e_d = exp(sigma z_d - sigma^2 / 2) (mean 1), over the rows of ``z``."""
    if sigma <= 0:
        return float(values.max())
    factors = np.exp(sigma * z[:, :len(values)] - sigma * sigma / 2)
    return float(np.mean(np.max(values[None, :] * factors, axis=1)))


def price(cost: PlanCost, sigma: float, z: np.ndarray) -> float:
    """The plan's step with each stage's slowest device replaced by its expected slowest under ``sigma``."""
    fwd = np.array([d.fwd_ms for d in cost.devices])
    bwd = np.array([d.bwd_ms for d in cost.devices])
    rest = cost.plan_ms - cost.max_fwd_ms - cost.max_bwd_ms
    return expected_max(fwd, sigma, z) + expected_max(bwd, sigma, z) + rest


def replay(tasks: list[TaskResult], scales: list[float], z: np.ndarray) -> tuple[float, dict[float, dict]]:
    """The run's sigma (all tasks) and, per scale, the Spearmans, regrets and picks over its tasks."""
    logs = [[x for r in candidates(tr) for x in level_free_logs(r)] for tr in tasks]
    every = [x for t in logs for x in t]
    if len(every) < 2:
        raise AutoshardError("no task has a candidate plan with predicted and measured devices")
    out: dict[float, dict] = {s: {"rho": [], "regret": [], "picks": []} for s in scales}
    for i, tr in enumerate(tasks):
        plans = candidates(tr)
        if len(plans) < 2:
            continue
        others = [x for j, t in enumerate(logs) if j != i for x in t]
        sigma = float(np.std(others)) if len(others) > 1 else float(np.std(every))
        measured = [r.measured.plan_ms for r in plans]
        for s in scales:
            priced = [price(r.predicted, s * sigma, z) for r in plans]
            pick = plans[int(np.argmin(priced))]
            rho = spearmanr(priced, measured).correlation
            if not math.isnan(rho):
                out[s]["rho"].append(float(rho))
            out[s]["regret"].append(pick.measured.plan_ms / min(measured))
            out[s]["picks"].append((pick.measured.plan_ms, tuple(pick.rounds_ms)))
    if not out[scales[0]]["regret"]:
        raise AutoshardError("no task has two candidate plans to pick between")
    return float(np.std(every)), out


def rows(name: str, sigma: float | None, result: dict[float, dict]) -> list[str]:
    """Markdown rows: one per scale, its pick against the predicted maximum's pick (scale 0)."""
    base = result[0.0]["picks"]
    lines = []
    for s, r in result.items():
        if s == 0.0:
            versus = "-"
        else:
            c = compare([{"emax": a, "max": b} for a, b in zip(r["picks"], base)], "emax", ["max"])
            interval = f" [{c.low:.3f}, {c.high:.3f}]" if c.low is not None else ""
            versus = f"{c.ratio:.3f}{interval} {c.verdict}"
        sig = f"{sigma:.3f}" if sigma is not None else "per run"
        lines.append(f"| {name} | {sig} | {s:g} | {len(r['regret'])} | {np.mean(r['rho']):.3f} | "
                     f"{geomean(r['regret']):.4f} | {versus} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", help="bench results files (.json or .json.gz)")
    p.add_argument("--scales", default="0,0.5,1,1.5",
                   help="comma-separated multiples of each run's sigma to price with (0, the predicted "
                        "maximum, is always included)")
    args = p.parse_args(argv)
    try:
        scales = sorted({0.0, *(float(x) for x in args.scales.split(",") if x.strip())})
    except ValueError:
        print(f"expected_max: error: --scales {args.scales!r}: give comma-separated numbers >= 0",
              file=sys.stderr)
        return 2
    if any(s < 0 or not math.isfinite(s) for s in scales):
        print(f"expected_max: error: --scales {args.scales!r}: give comma-separated numbers >= 0",
              file=sys.stderr)
        return 2
    z = np.random.default_rng(0).standard_normal((DRAWS, 512))
    replayed = []
    for path in args.runs:  # every run read and replayed before a row is printed
        try:
            tasks = task_results_of(read_json(path, kind="autoshard.bench"), path)
            replayed.append((Path(path).name.split(".json")[0], *replay(tasks, scales, z)))
        except AutoshardError as e:
            print(f"expected_max: error: {Path(path).name}: {e}", file=sys.stderr)
            return 2
    print("| run | sigma | scale | tasks | mean Spearman vs measured | pick / task's best candidate | "
          "pick / predicted max's pick [95% interval] verdict |")
    print("|---|---|---|---|---|---|---|")
    pooled: dict[float, dict] = {s: {"rho": [], "regret": [], "picks": []} for s in scales}
    for name, sigma, result in replayed:
        print("\n".join(rows(name, sigma, result)))
        for s in scales:
            for k in pooled[s]:
                pooled[s][k] += result[s][k]
    if len(replayed) > 1:
        print("\n".join(rows(f"pooled ({len(replayed)} runs)", None, pooled)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
