"""Summarise ``benchmarks/dmp_step.py --json`` runs: how the step model's ordering of the plans compares with
TorchRec DMP's real steps, run by run and over all of them. Times nothing.

    .venv/bin/python benchmarks/dmp_summary.py benchmarks/runs/dmp/s43-intel-dmp-d2-pin-*.json.gz
    .venv/bin/python benchmarks/dmp_summary.py --without row_split_hot benchmarks/runs/dmp/s43-*-pin-*

Per run: ranks pinned or not, the Spearman correlation of DMP's order with the step model's (modelled
collectives / measured collectives / the sum of the ranks' kernels plus the measured collectives), the
plan pairs the step model (measured collectives) orders as DMP does, its cheapest plan and that plan's DMP
step over DMP's fastest. Then, per
plan, the geometric mean over the runs of its ratio to the reference plan (``balanced``) in the step model
and in DMP, and DMP's fixed cost (the step at the tiny ``--overhead-batch``) where it was run. Last, per
run, DMP's extra time for the row-split plan beyond the step model's (with its row-wise terms, from stop
44), per id and per MB it could be priced by.
``--without PLAN,...`` leaves plans out of the run rows (Spearman recomputed on the rest).
"""

from __future__ import annotations

import argparse
import sys
from itertools import combinations
from pathlib import Path

import numpy as np

from autoshard.costs import metrics
from autoshard.errors import AutoshardError
from autoshard.io import read_json

KIND = "autoshard.bench.dmp_step"


def load(path: str) -> dict:
    run = read_json(path)
    if not isinstance(run, dict) or run.get("kind") != KIND:
        raise AutoshardError(f"{path} is not a dmp_step.py --json result (kind {KIND!r})")
    return run


def concordant_pairs(model: dict[str, float], dmp: dict[str, float]) -> tuple[int, int]:
    """(pairs of plans both order the same way, pairs) over the plans of a run."""
    pairs = list(combinations(sorted(model), 2))
    same = sum(1 for a, b in pairs if (model[a] - model[b]) * (dmp[a] - dmp[b]) > 0)
    return same, len(pairs)


def spearman(a: dict[str, float], b: dict[str, float]) -> float:
    """Spearman rank correlation of two orderings of the same plans (``costs.metrics.spearman``)."""
    names = sorted(a)
    return metrics.spearman([a[n] for n in names], [b[n] for n in names])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", help="dmp_step.py --json files (.json or .json.gz)")
    ap.add_argument("--without", default="", help="plans to leave out of the run rows, comma-separated")
    args = ap.parse_args(argv)
    without = {p for p in args.without.split(",") if p}
    try:
        runs = [(Path(p).name, load(p)) for p in args.runs]
        for name, run in runs:
            if unknown := without - set(run["plans"]):
                raise AutoshardError(f"--without {','.join(sorted(unknown))}: not a plan of {name} "
                                     f"({', '.join(run['plans'])})")
    except AutoshardError as e:
        print(f"dmp_summary.py: error: {e}", file=sys.stderr)
        return 2
    print("| run | D | pinned | Spearman: model comm / measured comm / serial kernels | pairs ordered as DMP "
          "| step model's pick | its DMP step / DMP's fastest |")
    print("|---|---|---|---|---|---|---|")
    ratios: dict[str, dict[str, list[float]]] = {}
    for name, run in runs:
        plans = {p: v for p, v in run["plans"].items() if p not in without}
        dmp = {p: v["dmp"]["step_ms"] for p, v in plans.items()}
        orders = {"model": {p: v["model_ms"] for p, v in plans.items()},
                  "measured": {p: v["measured_ms"] for p, v in plans.items()},
                  "serial": {p: v["serial_kernels_ms"] + v["collectives_ms"]["measured"]
                             for p, v in plans.items()}}  # as dmp_step.py's serial column
        rho = {k: spearman(v, dmp) for k, v in orders.items()}
        same, pairs = concordant_pairs(orders["measured"], dmp)
        pick = min(orders["measured"], key=orders["measured"].__getitem__)
        print(f"| {name} | {run['devices']} | {'yes' if run.get('pin_cpus') else 'no'} | "
              f"{rho['model']:+.2f} / {rho['measured']:+.2f} / {rho['serial']:+.2f} | "
              f"{same} / {pairs} | {pick} | {dmp[pick] / min(dmp.values()):.2f} |")
        for p, v in run["plans"].items():
            r = ratios.setdefault(p, {"model": [], "measured": [], "dmp": [], "fixed": []})
            for key in ("model", "measured", "dmp"):
                r[key].append(v["ratio_to_balanced"][key])
            if v.get("dmp_tiny"):
                r["fixed"].append(v["dmp_tiny"]["step_ms"] / v["dmp"]["step_ms"])
    reference = runs[0][1].get("reference_plan", "balanced")
    print(f"\n| plan | step model / {reference}: model comm, measured comm | DMP / {reference} | "
          "DMP's fixed cost (tiny batch) / its step |")
    print("|---|---|---|---|")
    for p, r in ratios.items():
        gm = {k: float(np.exp(np.mean(np.log(v)))) if v else float("nan") for k, v in r.items()}
        fixed = f"{gm['fixed']:.2f}" if r["fixed"] else "-"
        print(f"| {p} | {gm['model']:.2f}, {gm['measured']:.2f} | {gm['dmp']:.2f} | {fixed} |")
    print(f"\n(geometric means over {len(runs)} run(s))")
    print_row_wise_extra(runs)
    return 0


def print_row_wise_extra(runs: list[tuple[str, dict]], row_plan: str = "row_split_hot",
                         reference: str = "balanced") -> None:
    """Per run: how much more DMP's row-split plan took over the reference than the step model (measured
    collectives) said, against what a row-wise term could scale with: the ids a rank bucketises a step
    (local batch x the row-split tables' pooling) and the bytes of their partial outputs (global batch x
    dims x 4). From stop 44 the step model has row-wise terms (``costs.step``), so this is what they miss;
    before, all of DMP's row-wise cost. The run's fitted terms are printed beside it where it has them."""
    rows = []
    for name, run in runs:
        plans = run["plans"]
        if row_plan not in plans or reference not in plans:
            continue
        tables = {t["name"]: t for t in run["task"]["tables"]}
        split = [n for n, t in plans[row_plan]["plan"]["tables"].items() if t["sharding_type"] == "row_wise"]
        batch, devices = run["task"]["batch_size"], run["devices"]
        ids = batch / devices * sum(tables[n]["pooling_factor"] for n in split)
        out_mb = batch * sum(tables[n]["dim"] for n in split) * 4 / 1e6
        extra = ((plans[row_plan]["dmp"]["step_ms"] - plans[reference]["dmp"]["step_ms"])
                 - (plans[row_plan]["measured_ms"] - plans[reference]["measured_ms"]))
        comm = run.get("comm", {})
        terms = (f"x{comm['reduce_scatter_factor']:.2f} / x{comm['all_gather_factor']:.2f} / "
                 f"{comm['bucketize_ns_per_id']:.1f} ns" if "reduce_scatter_factor" in comm else "none")
        rows.append((name, len(split), ids, out_mb, extra, terms))
    if not rows:
        return
    print(f"\n{row_plan} against {reference}: DMP's difference minus the step model's (measured comm)")
    print("| run | step model's row-wise terms (reduce-scatter / all-gather / bucketise) | row-split tables "
          "| ids a rank bucketises a step | partial outputs MB | extra ms | extra ns an id | extra ms a MB |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for name, n, ids, out_mb, extra, terms in rows:
        print(f"| {name} | {terms} | {n} | {ids:.0f} | {out_mb:.2f} | {extra:.2f} | "
              f"{extra / ids * 1e6:.1f} | {extra / out_mb:.2f} |")


if __name__ == "__main__":
    sys.exit(main())
