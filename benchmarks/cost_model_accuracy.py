"""Cost-model accuracy on held-out UNSEEN tables, and the throughput of the learned model's batched API.

Compares, on the same test records (every record that contains a held-out table):
- the learned model in several variants (DreamShard's linear-target sum, log target, log + additive head,
  log + additive + pairwise interaction), each trained with ``LearnedCostModel.fit`` on the other records;
- the roofline ``AnalyticalCostModel`` fitted (least squares) on the same training records;
- the ``size_lookup_proxy`` (dim x pooling x log10 rows) summed per device, scaled by a least-squares factor.
Metrics: MAPE and Spearman on per-device fwd, bwd, fwd+bwd, and on the plan cost of random 4-device groups.

Then: predictions per second of the kept variant for 4-device plans of 50 tables, via ``plan_costs`` (a batch
of candidate plans per call), ``device_costs`` (one plan per call) and ``costs_if_added`` (incremental).

    .venv/bin/python benchmarks/cost_model_accuracy.py --data costs/ [--out result.json] [--remeasure 40]

``--remeasure N`` re-times N test records with their own settings and scores the re-measurement against the
recorded value like a model: the repeatability of the data, the floor under any model's error on it.

The tables below were measured with the training recipe of stop 9 (lr 2e-3, weight decay 1e-5, no refit on
all records); ``benchmarks/cost_model_on_plans.py`` scores the current recipe against it on the devices of the
planners' plans, measured by ``autoshard bench``.

Measured 2026-11-22 on the shared 2-vCPU AMD EPYC host (1 torch thread, batch 512, fp32, exact SGD; 80-table
synthetic pool ``autoshard tables synth --num-tables 80 --seed 0 --dims 4,8,16,32,64,128``; 16 tables held
out; the host was shared with several other engineers' jobs, load average 2-12, so timings are noisy):

dataset A: 500 samples of the profiler's sampler (same shards as ``autoshard profile --max-tables 6
--batch-size 512 --rows-cap 50000 --repeats 8 --max-tries 1``) but each record keeps the MIN of the timed runs
(contention only adds time), plus ``autoshard profile-comm --devices 4 --batch-size 512``;
245 train / 255 test records:

    model                      fwd MAPE  rho   bwd MAPE  rho   fwd+bwd MAPE  rho   plan MAPE  rho
    analytical (fitted)          17.6  0.887     42.1  0.884       31.4  0.891       29.5  0.747
    size_lookup proxy (scaled)   52.6  0.885     55.0  0.884       52.6  0.891       37.8  0.754
    learned dreamshard-linear    19.3  0.890     43.0  0.850       33.5  0.858       27.6  0.489
    learned log                  23.5  0.869     69.7  0.870       54.5  0.872       51.4  0.581
    learned log-additive (kept)  24.9  0.861     29.0  0.927       24.2  0.931       18.5  0.769
    learned log-add.-interact.   32.8  0.713     23.9  0.938       24.7  0.926       20.7  0.794
    re-measuring (noise floor)   24.3  0.937     41.3  0.930       35.2  0.930          -      -
    (same run; an earlier run's re-measurement gave fwd+bwd 27.4% / 0.912: the floor itself moves with load)

dataset B: the real profiler as is (median of 10 runs, re-measured up to 3 times when CV > 0.1; median CV
still 0.33 fwd / 0.18 bwd, 293 of 400 samples used all 3 tries):
``autoshard profile --tables pool80.json --samples 400 --max-tables 6 --batch-size 512 --rows-cap 50000
-o costs_prof`` + ``autoshard profile-comm -o costs_prof --devices 4 --batch-size 512``; 197 train / 203 test:

    model                      fwd MAPE  rho   bwd MAPE  rho   fwd+bwd MAPE  rho   plan MAPE  rho
    analytical (fitted)          53.9  0.751     51.0  0.746       48.7  0.739       38.0  0.523
    size_lookup proxy (scaled)   66.3  0.747     62.7  0.742       63.6  0.734       52.5  0.530
    learned dreamshard-linear    56.2  0.658     54.6  0.659       50.2  0.672       31.7  0.469
    learned log                  45.4  0.713     40.3  0.746       39.8  0.741       33.4  0.496
    learned log-additive (kept)  42.2  0.759     40.8  0.760       38.3  0.766       33.7  0.483
    learned log-add.-interact.   46.3  0.744     34.6  0.789       36.3  0.780       32.5  0.466
    re-measuring (noise floor)   37.4  0.752     40.2  0.800       40.0  0.781          -      -

The kept model is as close to the measurements as a second measurement is; the issue's target (MAPE < 10%,
rho > 0.95) cannot be shown on data whose own repeatability is 27-35% / 0.91-0.93 (A) or 40% / 0.78 (B).
Plan = max over 4-device groups of fwd + bwd + comm (63 groups); DreamShard's plan head: 29.9% / 0.598,
worse than the max of the per-device heads. Throughput (kept model, 50 tables x 4 devices, 1 torch
thread): plan_costs 26k plans/s (104k device predictions/s) in batches of 1024, device_costs 203 plans/s,
costs_if_added 483 calls/s at load ~10; 96k / 985 / 3.4k at load ~2.

Known limit (checked by timing a real 80-table size_lookup_greedy plan on 4 devices): a held-out table far
outside the training range (synth0_19, pooling 233 where most tables pool < 60) is predicted at 2 ms fwd where
it measures 10-13 ms, and devices with 25-28 tables (training records hold at most 6) are under-predicted by
~2x (the fitted roofline under-predicts them as well). Profile with --max-tables near the tables per device
the planners will produce, and with the extreme tables in the training split.
"""

from __future__ import annotations

import argparse
import math
import sys
import time

import numpy as np
import torch

from autoshard.costs.analytical import AnalyticalCostModel
from autoshard.costs.learned import CostNetConfig, LearnedCostModel, TrainOptions
from autoshard.costs.learned.evaluation import EVAL_PLAN_DEVICES
from autoshard.costs.learned.training import _random_groups, select_records, split_unseen_tables
from autoshard.costs.metrics import score
from autoshard.hardware.profiler import load_dataset
from autoshard.planners.heuristics import size_lookup_proxy
from autoshard.shards import ShardRef
from autoshard.tables.table import Precision
from autoshard.tasks import Task

VARIANTS = {
    "dreamshard-linear": CostNetConfig(target="linear", additive=False),
    "log": CostNetConfig(target="log", additive=False),
    "log-additive": CostNetConfig(target="log", additive=True),
    "log-additive-interaction": CostNetConfig(target="log", additive=True, interaction=True),
}

THROUGHPUT_TABLES = 50
THROUGHPUT_DEVICES = 4
THROUGHPUT_BATCH = 1024
"""Candidate plans per ``plan_costs`` call (a policy or search scoring many candidates at once)."""


def _scores(pred_dev: np.ndarray, true_dev: np.ndarray, groups: np.ndarray, comm_dev: np.ndarray) -> dict:
    """Per-device fwd/bwd/fwd+bwd and the plan cost (max of fwd + bwd + comm) of the 4-device groups."""
    plan_pred = (pred_dev[groups].sum(axis=-1) + comm_dev).max(axis=1)
    plan_true = (true_dev[groups].sum(axis=-1) + comm_dev).max(axis=1)
    return {"fwd": score(pred_dev[:, 0], true_dev[:, 0]), "bwd": score(pred_dev[:, 1], true_dev[:, 1]),
            "fwd+bwd": score(pred_dev.sum(axis=1), true_dev.sum(axis=1)),
            "plan(max of devices)": score(plan_pred, plan_true)}


def _throughput(model: LearnedCostModel, pool, batch_size: int, precision: Precision) -> dict:
    rng = np.random.default_rng(0)
    idx = rng.choice(len(pool.tables), size=min(THROUGHPUT_TABLES, len(pool.tables)), replace=False)
    task = Task(tuple(pool.tables[i] for i in idx), (2**62,) * THROUGHPUT_DEVICES, precision=precision,
                batch_size=batch_size)
    ranks = rng.integers(0, THROUGHPUT_DEVICES, size=(THROUGHPUT_BATCH, task.num_tables))
    model.plan_costs(task, ranks[:8])  # warm up (encodes and caches the task)
    reps = 20
    t0 = time.perf_counter()
    for _ in range(reps):
        model.plan_costs(task, ranks)
    batched = reps * THROUGHPUT_BATCH / (time.perf_counter() - t0)
    devices = [[ShardRef(t, task.tables[t].dim) for t in range(task.num_tables) if ranks[0, t] == d]
               for d in range(THROUGHPUT_DEVICES)]
    n = 200
    t0 = time.perf_counter()
    for _ in range(n):
        model.device_costs(task, devices)
    single = n / (time.perf_counter() - t0)
    enc = model.encode_task(task)
    acc = torch.zeros(THROUGHPUT_DEVICES, enc.shape[1])
    t0 = time.perf_counter()
    for t in range(task.num_tables):
        c = model.costs_if_added(task, acc, t)
        acc[int(torch.argmin(c.sum(dim=1)))] += enc[t]
    incr = task.num_tables / (time.perf_counter() - t0)
    return {"tables": task.num_tables, "devices": THROUGHPUT_DEVICES,
            "torch_threads": torch.get_num_threads(),
            "plan_costs_plans_per_s": batched, "plan_costs_batch": THROUGHPUT_BATCH,
            "device_costs_plans_per_s": single, "costs_if_added_calls_per_s": incr}


def _remeasure(ds, test: list, n: int, statistic: str) -> dict:
    """The noise floor: re-time ``n`` test records with their own settings and score the re-measurement
    against the recorded value, exactly as a model is scored (no model can be expected to beat this)."""
    from autoshard.hardware.kernel import MeasureSettings, measure_shard

    again, recorded = [], []
    for r in test[:n]:
        task, shards = ds.task_of(r)
        t = measure_shard(task, shards, MeasureSettings.from_json(r.settings))
        f, b = (min(t.fwd_runs_ms), min(t.bwd_runs_ms)) if statistic == "min" else (t.fwd_ms, t.bwd_ms)
        again.append([f, b])
        recorded.append([r.fwd_ms, r.bwd_ms])
    a, t_ = np.array(again), np.array(recorded)
    return {"fwd": score(a[:, 0], t_[:, 0]), "bwd": score(a[:, 1], t_[:, 1]),
            "fwd+bwd": score(a.sum(axis=1), t_.sum(axis=1))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--test-fraction", "--test-tables", dest="test_fraction", type=float, default=0.2,
                    help="share of the records held out, as whole tables (train-cost's split)")
    ap.add_argument("--variants", default=",".join(VARIANTS), help="comma list of variant names")
    ap.add_argument("--out", help="write the results JSON here")
    ap.add_argument("--remeasure", type=int, default=0,
                    help="re-time this many test records to measure the noise floor of the data itself")
    ap.add_argument("--statistic", choices=["median", "min"], default="median",
                    help="statistic of the timed runs the dataset's records hold (for --remeasure)")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)

    ds = load_dataset(args.data)
    records, batch_size, precision = select_records(ds.records, None)
    train_ids, test_ids, held = split_unseen_tables(records, args.test_fraction, args.seed,
                                                      TrainOptions().min_test_records)
    train = [records[i] for i in train_ids]
    test = [records[i] for i in test_ids]
    tables = ds.pool.by_name()
    true_dev = np.array([[r.fwd_ms, r.bwd_ms] for r in test])
    dim_sum = np.array([sum(r.dims) for r in test], dtype=np.float64)
    # the same groups as autoshard.costs.learned.evaluation.evaluate with this seed
    groups = _random_groups(np.random.default_rng(args.seed), np.arange(len(test)), EVAL_PLAN_DEVICES)
    print(f"dataset {args.data}: {len(records)} records at batch {batch_size} ({precision.value}); "
          f"held out {len(held)} of {len({n for r in records for n in r.tables})} tables -> "
          f"{len(train)} train / {len(test)} test records; host {records[0].host.get('cpu')}")
    results: dict = {"data": args.data, "batch_size": batch_size, "records": len(records),
                     "train_records": len(train), "test_records": len(test), "held_out_tables": held,
                     "models": {}}

    analytical = AnalyticalCostModel().fit_from_dataset(ds, train)
    comm_dev = analytical.comm.device_comm_ms(dim_sum[groups], batch_size, EVAL_PLAN_DEVICES, precision.bytes)

    def shard_sum(r, f) -> float:
        return sum(f(tables[n].with_dim(d)) for n, d in zip(r.tables, r.dims))

    def analytical_ms(r) -> list[float]:
        task = Task(tuple(tables[n] for n in r.tables), (2**62,), precision=precision, batch_size=batch_size)
        return list(analytical.device_costs(task, [r.shard_refs()])[0, :2])

    results["models"]["analytical(fitted)"] = _scores(np.array([analytical_ms(r) for r in test]), true_dev,
                                                      groups, comm_dev)
    proxy_train = np.array([shard_sum(r, size_lookup_proxy) for r in train])
    y_train = np.array([[r.fwd_ms, r.bwd_ms] for r in train])
    k = (proxy_train @ y_train) / max(float(proxy_train @ proxy_train), 1e-12)  # least squares, per head
    proxy_test = np.array([shard_sum(r, size_lookup_proxy) for r in test])
    results["models"]["size_lookup proxy(scaled)"] = _scores(proxy_test[:, None] * k[None, :], true_dev,
                                                             groups, comm_dev)

    best_name, best_model, best_mape = None, None, math.inf
    for name in [v for v in args.variants.split(",") if v]:
        t0 = time.perf_counter()
        model = LearnedCostModel.fit(ds, TrainOptions(seed=args.seed, test_fraction=args.test_fraction,
                                                      config=VARIANTS[name]))
        m = dict(model.info["metrics"])
        m["train_s"] = time.perf_counter() - t0
        m["best_epoch"] = model.info["best_epoch"]
        results["models"][f"learned[{name}]"] = m
        if m["fwd+bwd"]["mape_pct"] < best_mape:
            best_name, best_model, best_mape = name, model, m["fwd+bwd"]["mape_pct"]
        print(f"  trained {name}: {m['train_s']:.0f} s, best epoch {m['best_epoch']}", file=sys.stderr)

    heads = ["fwd", "bwd", "fwd+bwd", "plan(max of devices)"]
    print(f"\n{'model':<34}" + "".join(f"{h + ' MAPE%':>16}{'rho':>7}" for h in heads))
    for name, m in results["models"].items():
        print(f"{name:<34}" + "".join(f"{m[h]['mape_pct']:>16.2f}{m[h]['spearman']:>7.3f}" for h in heads))
    if best_model is not None:
        head = results["models"][f"learned[{best_name}]"].get("plan(plan head)")
        if head:
            print(f"learned[{best_name}] plan head (DreamShard's max-pooled head): "
                  f"MAPE {head['mape_pct']:.2f}% rho {head['spearman']:.3f}")
        tp = _throughput(best_model, ds.pool, batch_size, precision)
        results["throughput"] = {"model": best_name, **tp}
        print(f"\nthroughput of learned[{best_name}] on {tp['tables']} tables x {tp['devices']} devices, "
              f"{tp['torch_threads']} torch thread: plan_costs {tp['plan_costs_plans_per_s']:.0f} plans/s "
              f"({tp['plan_costs_plans_per_s'] * tp['devices']:.0f} device predictions/s, batches of "
              f"{tp['plan_costs_batch']}); device_costs {tp['device_costs_plans_per_s']:.0f} plans/s; "
              f"costs_if_added {tp['costs_if_added_calls_per_s']:.0f} calls/s")
    if args.remeasure > 0:
        floor = _remeasure(ds, test, args.remeasure, args.statistic)
        results["noise_floor(re-measured vs recorded)"] = floor
        print(f"noise floor, {floor['fwd+bwd']['n']} test records re-timed ({args.statistic} of runs) "
              "vs recorded: "
              + ", ".join(f"{h} MAPE {floor[h]['mape_pct']:.2f}% rho {floor[h]['spearman']:.3f}"
                          for h in floor))
    if args.out:
        from autoshard.io import write_json

        write_json(args.out, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
