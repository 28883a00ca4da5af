"""Whose error is it? A cost model's error on a bench run's devices, split into the part common to a task
(which no plan of the task feels), the part between one task's devices (which decides its plans), and how
much of the latter a factor per table removes, fitted on the *other* tasks' devices of the same run.

    .venv/bin/python benchmarks/table_error.py RUN [RUN ...] [--model M.pt] [--calibration-from DIR]

RUN: an ``autoshard bench`` output directory or an archived results file (``benchmarks/runs/*.json.gz``).
Per run, over its distinct measured devices (``cost_model_on_plans.bench_devices``; fwd + bwd, the median
of its rounds):

- between-task / within-task sd: of log(measured / predicted), the task means and the rest;
- within-task Spearman: the mean over tasks of the rank correlation of one task's devices;
- leave-one-task-out rows, each task's devices priced by a correction fitted on the other tasks' devices:
  ``by table`` (``costs.table_calibration``: a level and a factor per table name, as ``autoshard
  calibrate-tables`` fits it) and ``by features`` (for contrast: a ridge fit of log(measured / predicted) on
  the device's tables' mean raw features (``Table.raw_features`` at the shard's width) and its table count,
  i.e. what a model of the same inputs could still learn);
- with ``--calibration-from DIR``: a calibration fitted on DIR's timed devices (``autoshard adapt-cost``'s
  ``OUT/devices``), the tasks whose tables it covers wholly and the others apart;
- the run's own re-measurement floor (``cost_model_on_plans.remeasure_floor``).

Nothing is timed; any host. Measured at stop 76: docs/benchmarks.md, "Stop 76".
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cost_model_on_plans import bench_devices, load_results, remeasure_floor, results_file, run_name

from autoshard.costs.learned import LearnedCostModel
from autoshard.costs.loading import SHIPPED_COST_MODEL
from autoshard.costs.metrics import spearman
from autoshard.costs.table_calibration import CalibratedCostModel, fit_calibration
from autoshard.errors import AutoshardError

FEATURE_RIDGE = 10.0
"""Ridge penalty of the ``by features`` fit (standardised features)."""

Device = tuple  # (task, shards, fwd ms, bwd ms), as bench_devices gives them


def split(tasks: np.ndarray, measured: np.ndarray, predicted: np.ndarray) -> dict[str, float]:
    """Between- and within-task sd of log(measured / predicted), and the mean within-task Spearman."""
    r = np.log(measured / predicted)
    names = sorted(set(tasks))
    means = {k: float(r[tasks == k].mean()) for k in names}
    between = np.array([means[k] for k in tasks])
    rho = [spearman(predicted[tasks == k], measured[tasks == k]) for k in names if (tasks == k).sum() > 2]
    return {"between_sd": float(between.std()), "within_sd": float((r - between).std()),
            "within_spearman": float(np.mean(rho)), "devices": len(r)}


def predict(model, devices: Sequence[Device]) -> np.ndarray:
    return np.array([float(np.asarray(model.device_costs(t, [s]))[0, :2].sum()) for t, s, _, _ in devices])


def leave_one_task_out(devices: Sequence[Device], tasks: np.ndarray,
                       correct: Callable[[list[Device], list[Device]], np.ndarray]) -> np.ndarray:
    """Each task's devices priced by ``correct(train, test)``, fitted on the other tasks' devices."""
    out = np.zeros(len(devices))
    for k in sorted(set(tasks)):
        test = np.flatnonzero(tasks == k)
        train = [devices[i] for i in np.flatnonzero(tasks != k)]
        out[test] = correct(train, [devices[i] for i in test])
    return out


def by_table(model) -> Callable[[list[Device], list[Device]], np.ndarray]:
    def correct(train: list[Device], test: list[Device]) -> np.ndarray:
        fitted = fit_calibration(model, [(t, [s], np.array([[f, b]])) for t, s, f, b in train])
        return predict(CalibratedCostModel(model, fitted), test)
    return correct


def device_features(device: Device) -> np.ndarray:
    task, shards, _, _ = device
    raw = np.array([task.tables[s.table].raw_features(s.dim) for s in shards])
    return np.concatenate([raw.mean(axis=0), [np.log(len(shards))]])


def by_features(predicted: dict[int, float]) -> Callable[[list[Device], list[Device]], np.ndarray]:
    def correct(train: list[Device], test: list[Device]) -> np.ndarray:
        x = np.array([device_features(d) for d in train])
        mu, sd = x.mean(axis=0), x.std(axis=0) + 1e-9
        z = np.column_stack([(x - mu) / sd, np.ones(len(train))])
        y = np.log(np.array([d[2] + d[3] for d in train]) / np.array([predicted[id(d)] for d in train]))
        penalty = FEATURE_RIDGE * np.eye(z.shape[1])
        penalty[-1, -1] = 0.0
        w = np.linalg.solve(z.T @ z + penalty, z.T @ y)
        zt = np.column_stack([(np.array([device_features(d) for d in test]) - mu) / sd, np.ones(len(test))])
        return np.array([predicted[id(d)] for d in test]) * np.exp(zt @ w)
    return correct


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", help="autoshard bench output directories or results files")
    ap.add_argument("--model", default=str(SHIPPED_COST_MODEL), help="cost model (default: the shipped one)")
    ap.add_argument("--calibration-from", metavar="DIR",
                    help="also price with a calibration fitted on this directory of timed devices")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    try:
        model = LearnedCostModel.load(args.model, allow_other_hardware=True)  # nothing is timed here
        runs = {}
        for r in map(Path, args.runs):
            if not results_file(r).is_file():
                raise AutoshardError(f"{r}: neither a finished bench output nor a results file")
            runs[run_name(r)] = load_results(r)
        external = None
        if args.calibration_from:
            from autoshard.hardware.profile_dataset import load_dataset
            from autoshard.pipeline.calibration import calibrate

            external = calibrate(model, load_dataset(args.calibration_from))
    except (AutoshardError, OSError, KeyError, TypeError) as e:
        why = e if isinstance(e, AutoshardError) else f"not bench results or timed devices ({e})"
        print(f"table_error: error: {why}", file=sys.stderr)
        return 2
    print("fwd + bwd, log(measured / predicted): between-task sd | within-task sd | within-task Spearman")
    for name, results in runs.items():
        devices = bench_devices(results)
        tasks = np.array([t.name for t, _, _, _ in devices])
        measured = np.array([f + b for _, _, f, b in devices])
        predicted = predict(model, devices)
        rows = {"model": predicted,
                "by table, other tasks": leave_one_task_out(devices, tasks, by_table(model)),
                "by features, other tasks": leave_one_task_out(
                    devices, tasks, by_features({id(d): p for d, p in zip(devices, predicted)}))}
        print(f"\n{name}: {len(devices)} distinct devices of {len(set(tasks))} tasks")
        for label, priced in rows.items():
            s = split(tasks, measured, priced)
            print(f"  {label:<28} {s['between_sd']:.3f} | {s['within_sd']:.3f} | {s['within_spearman']:.3f}")
        if external is not None:
            covered = {t.name: external.covered(t) == t.num_tables for t, _, _, _ in devices}
            priced = predict(CalibratedCostModel(model, external), devices)
            for label, want in (("covered wholly", True), ("covered in part", False)):
                sel = np.array([covered[k] == want for k in tasks])
                if sel.any():
                    a, b = split(tasks[sel], measured[sel], predicted[sel]), split(tasks[sel], measured[sel],
                                                                                  priced[sel])
                    print(f"  --calibration-from, tasks {label} ({len(set(tasks[sel]))}): within-task sd "
                          f"{a['within_sd']:.3f} -> {b['within_sd']:.3f}, Spearman "
                          f"{a['within_spearman']:.3f} -> {b['within_spearman']:.3f}")
        floor = remeasure_floor(results)
        if floor:
            print(f"  re-measurement floor (one round vs the others' mean): MAPE {floor['mape_pct']:.1f}%, "
                  f"Spearman {floor['spearman']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
