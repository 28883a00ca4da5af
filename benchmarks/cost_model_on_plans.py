"""Cost-model accuracy on the devices the planners actually build, measured by ``autoshard bench``.

Every ``autoshard bench`` run measures, on the real kernels, every device of every plan of its held-out test
tasks (tables from the suite's *test* pool, which no cost model trained on). Those are realistic held-out
records: 2-18 tables a device, in the combinations planners choose. This script scores cost models on the
distinct devices of one or more bench outputs: MAPE and Spearman of fwd, bwd and fwd + bwd, also per band of
tables per device.

    .venv/bin/python benchmarks/cost_model_on_plans.py --bench /tmp/b2040full /tmp/b5040 \
        --model src/autoshard/data/default_cost_model.pt [--train-from /tmp/b2040full/costs --seeds 3]

``--train-from DATA`` also fits, on that profiling dataset: the roofline ``AnalyticalCostModel`` (least
squares), the ``size_lookup_proxy`` (dim x pooling x log10 rows, summed per device, one least-squares scale
per head), and per seed the learned model ``autoshard train-cost`` makes now (refit on all records), the same
with ``--linear-table-cost`` (``CostNetConfig.table_mlp=False``), and the one it made before (lr 2e-3, weight
decay 1e-5, patience 40, no refit), all scored on the same devices.

Measured 2026-11-22 on the 2-vCPU AMD EPYC host (batch 2048; bench devices of DLRM-20 (4) (6 tasks, 235
distinct devices), DLRM-50 (4) (4 tasks, 160) and DLRM-20 (2) (3 tasks); training data: the 200 profiled
shards of ``autoshard bench --suite dlrm-20-4``), fwd+bwd MAPE / Spearman:

    model                               DLRM-20 (4)      DLRM-50 (4)      DLRM-20 (2)
    before (63 records), seed 0         21.7% / 0.696    15.3% / 0.639    see the run's output
    refit on all (160 records), seed 0  14.1% / 0.864    12.5% / 0.833    11.6% / 0.960
    refit, seed 1                       14.7% / 0.851    11.9% / 0.857    12.3% / 0.902
    refit, seed 2                       16.6% / 0.801    13.5% / 0.836    15.4% / 0.844

(the DLRM-20 (4) devices also served to choose the recipe, so the other two columns are the clean check).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from autoshard.costs.analytical import AnalyticalCostModel
from autoshard.costs.learned import CostNetConfig, LearnedCostModel, TrainOptions
from autoshard.costs.metrics import mape, spearman
from autoshard.errors import AutoshardError
from autoshard.io import read_json
from autoshard.pipeline.results import TaskResult
from autoshard.planners.heuristics import size_lookup_proxy
from autoshard.shards import ShardRef
from autoshard.tasks import Task

TABLE_BANDS = ((1, 2), (3, 5), (6, 9), (10, 14), (15, 10**6))
"""Tables-per-device bands for the breakdown (training records hold 1-8 tables; planners go beyond)."""

PREVIOUS_RECIPE = {"lr": 2e-3, "weight_decay": 1e-5, "patience": 40, "val_fraction": 0.1, "refit": False}
"""``TrainOptions`` of autoshard before the refit change (the shipped model of stop 9 was trained so)."""


def results_file(run: Path) -> Path:
    """A finished ``autoshard bench`` output directory's ``bench/results.json``, or ``run`` itself: a results
    file (plain or gzipped, e.g. ``benchmarks/runs/*.json.gz``)."""
    return run / "bench" / "results.json" if run.is_dir() else run


def run_name(run: Path) -> str:
    return run.name.removesuffix(".gz").removesuffix(".json") if run.is_file() else run.name


def load_results(run: Path) -> list[TaskResult]:
    """The per-task results of a finished ``autoshard bench`` output directory or results file."""
    return [TaskResult.from_json(t) for t in read_json(results_file(run))["tasks"]]


def remeasure_floor(results: list[TaskResult]) -> dict[str, float] | None:
    """Repeatability of the bench's own device timings: each round's fwd + bwd against the mean of the other
    rounds of the same device, as MAPE and Spearman (None for results written before ``device_rounds_ms``)."""
    one, rest = [], []
    for tr in results:
        for res in tr.results:
            if len(res.device_rounds_ms) < 2:
                continue
            total = np.array(res.device_rounds_ms).sum(axis=2)  # (rounds, devices)
            for r in range(total.shape[0]):
                others = np.delete(total, r, axis=0).mean(axis=0)
                keep = others > 0
                one += total[r, keep].tolist()
                rest += others[keep].tolist()
    if not one:
        return None
    return {"mape_pct": mape(one, rest), "spearman": spearman(one, rest), "n": len(one)}


def bench_devices(results: list[TaskResult]) -> list[tuple[Task, list[ShardRef], float, float]]:
    """Distinct measured devices: (task, shards, fwd ms, bwd ms), the median of the rounds."""
    seen: dict[tuple[str, tuple[ShardRef, ...]], tuple[Task, list[ShardRef], float, float]] = {}
    for tr in results:
        for res in tr.results:
            if not res.ok or res.plan is None or res.measured is None:
                continue
            measured = res.measured.to_array()
            for shards, row in zip(res.plan.device_shards(tr.task), measured):
                if shards:
                    key = tuple(sorted(shards))
                    seen[(tr.task.name, key)] = (tr.task, list(key), float(row[0]), float(row[1]))
    return list(seen.values())


class ScaledProxy:
    """``size_lookup_proxy`` summed over a device's shards, times one least-squares factor per head
    (fwd, bwd)."""

    def __init__(self, dataset: Any) -> None:
        tables = {t.name: t for t in dataset.pool.tables}
        x = np.array([sum(size_lookup_proxy(tables[n].with_dim(d)) for n, d in zip(r.tables, r.dims))
                      for r in dataset.records])
        y = np.array([[r.fwd_ms, r.bwd_ms] for r in dataset.records])
        self.k = (x @ y) / max(float(x @ x), 1e-12)

    def device_costs(self, task: Task, devices: list[list[ShardRef]]) -> np.ndarray:
        x = np.array([sum(size_lookup_proxy(task.tables[s.table].with_dim(s.dim)) for s in d)
                      for d in devices])
        return np.column_stack([x[:, None] * self.k[None, :], np.zeros(len(devices))])


def score(model: Any, devices: list[tuple[Task, list[ShardRef], float, float]]) -> dict[str, Any]:
    pred = np.array([model.device_costs(task, [shards])[0, :2] for task, shards, _, _ in devices])
    meas = np.array([[f, b] for _, _, f, b in devices])
    counts = np.array([len(shards) for _, shards, _, _ in devices])
    out: dict[str, Any] = {"n": len(devices)}
    for head, p, m in (("fwd", pred[:, 0], meas[:, 0]), ("bwd", pred[:, 1], meas[:, 1]),
                       ("fwd+bwd", pred.sum(axis=1), meas.sum(axis=1))):
        out[head] = {"mape_pct": mape(p, m), "spearman": spearman(p, m)}
    bands = {}
    for lo, hi in TABLE_BANDS:
        sel = (counts >= lo) & (counts <= hi)
        if sel.sum() >= 3:
            p, m = pred[sel].sum(axis=1), meas[sel].sum(axis=1)
            bands[f"{lo}-{hi if hi < 10**6 else ''}"] = {"n": int(sel.sum()), "mape_pct": mape(p, m),
                                                         "bias": float(np.median(p / m))}
    out["by_tables"] = bands
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", nargs="+", required=True,
                    help="autoshard bench output directories, or results files (benchmarks/runs/*.json.gz)")
    ap.add_argument("--model", nargs="*", default=[], help="cost model checkpoints to score")
    ap.add_argument("--train-from", help="profiling dataset: also train the current and the previous recipe")
    ap.add_argument("--seeds", type=int, default=3, help="seeds per recipe with --train-from (default 3)")
    ap.add_argument("--out", help="write every number as JSON here")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    runs: dict[str, list[TaskResult]] = {}
    for d in map(Path, args.bench):
        try:
            if not results_file(d).is_file():
                raise AutoshardError(f"{d} is neither a finished autoshard bench output "
                                     "(no bench/results.json) nor a results file")
            runs[run_name(d)] = load_results(d)
        except (AutoshardError, KeyError, TypeError) as e:
            why = e if isinstance(e, AutoshardError) else f"{d}: not a bench's results ({type(e).__name__})"
            print(f"error: {why}", file=sys.stderr)
            return 2
    suites = {name: bench_devices(task_results) for name, task_results in runs.items()}
    # scores models on archived runs' devices, nothing timed here: any host
    models: dict[str, Any] = {p: LearnedCostModel.load(p, allow_other_hardware=True) for p in args.model}
    if args.train_from:
        from autoshard.hardware.profiler import load_dataset

        data = load_dataset(args.train_from)
        models["analytical (fitted)"] = AnalyticalCostModel().fit_from_dataset(data)
        models["size_lookup proxy (scaled)"] = ScaledProxy(data)
        for seed in range(args.seeds):
            models[f"previous recipe, seed {seed}"] = LearnedCostModel.fit(
                data, replace(TrainOptions(seed=seed), **PREVIOUS_RECIPE))
            models[f"current recipe (refit), seed {seed}"] = LearnedCostModel.fit(
                data, TrainOptions(seed=seed))
            models[f"linear table cost (refit), seed {seed}"] = LearnedCostModel.fit(
                data, TrainOptions(seed=seed, config=CostNetConfig(table_mlp=False)))
    results = {name: {s: score(m, devs) for s, devs in suites.items()} for name, m in models.items()}
    print("fwd+bwd MAPE % / Spearman on distinct measured bench devices (tables unseen by every model):")
    print(f"{'model':<40}" + "".join(f"{s + f' ({len(d)})':>26}" for s, d in suites.items()))
    for name, per in results.items():
        print(f"{name:<40}" + "".join(f"{per[s]['fwd+bwd']['mape_pct']:>17.1f} / "
                                      f"{per[s]['fwd+bwd']['spearman']:.3f}"
                                      for s in suites))
    for name, task_results in runs.items():
        floor = remeasure_floor(task_results)
        if floor:
            print(f"re-measurement floor of {name}: one round vs the mean of the others, fwd+bwd MAPE "
                  f"{floor['mape_pct']:.1f}%, Spearman {floor['spearman']:.3f} ({floor['n']} device-rounds)")
    print("\nby tables per device (fwd+bwd MAPE %, median predicted/measured):")
    for name, per in results.items():
        for s in suites:
            bands = "  ".join(f"{b}: {v['mape_pct']:.0f}% x{v['bias']:.2f} (n={v['n']})"
                              for b, v in per[s]["by_tables"].items())
            print(f"  {name} | {s}: {bands}")
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
