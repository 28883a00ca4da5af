"""The RL policy against every heuristic on held-out tasks, and its transfer to other table and device counts.

A synthetic DLRM-like pool (``autoshard.tables.synth``, NeuroShard's dims 4..128) is split into disjoint train
and test tables (DreamShard's protocol). A policy is trained on T=20, D=4 tasks of the train tables against
the cost model, then every algorithm plans the same held-out tasks of the test tables, at T=20/50/100 on D=4
and T=20 on D=2/8. Each plan is scored by the cost model and, with ``--real-tasks N``, the first N tasks of
each set also by the real evaluator (``hardware.evaluator.evaluate_plan``: fused FBGEMM kernels timed on this
host, comm from the alpha-beta model). Printed: per task set, each algorithm's geometric mean ratio to the
best heuristic of the same task (< 1: the policy beats every heuristic), and per-task ratios with
``--per-task``. Also timed: greedy planning of ``--big-tables`` tables onto ``--big-devices`` devices
(856 onto 128).

    .venv/bin/python benchmarks/rl_transfer.py                        # analytical cost model
    .venv/bin/python benchmarks/rl_transfer.py --cost-model costmodel.pt --real-tasks 2
    .venv/bin/python benchmarks/rl_transfer.py --policy policy.pt --real-tasks 2   # reuse a trained policy

The transfer measured on the real kernels, with the shipped policy (trained on DLRM-20 (4) only) and every
plan timed by ``autoshard bench`` (all 12 DLRM-T (D) suites), is in
docs/benchmarks.md ("RL transfer on the real kernels"; ``benchmarks/suite_summary.py --per-task rl`` makes
that table from the bench results).

Memory per device is ``--headroom`` x the task's table bytes / D (at least its largest table): the synthetic
tables (published mean 4.1M rows) do not fit DreamShard's 5 GB at T=100 on 4 devices.
"""

from __future__ import annotations

import argparse
import logging
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch

from autoshard.costs.base import CostModel, plan_cost
from autoshard.costs.loading import load_cost_model
from autoshard.errors import AutoshardError, InfeasibleError
from autoshard.io import write_json
from autoshard.plan import Plan
from autoshard.planners.base import PlannerOptions, make_planner, run_planner
from autoshard.planners.rl.planner import RLPlanner
from autoshard.planners.rl.policy import TrainedPolicy
from autoshard.planners.rl.train import HEURISTICS, TrainConfig, train
from autoshard.tables import TablePool
from autoshard.tasks import Task, sample_tasks, split_pool

NEUROSHARD_DIMS = (4, 8, 16, 32, 64, 128)
"""NeuroShard (MLSys'23) samples table dims from 4..128."""
STATS_BATCH = 2048
"""Batch the synthetic tables' access bins come from (smaller than the published 65536 so the pool is made in
seconds; the bins are then not comparable with the published ones, which this benchmark does not need)."""
TRAIN_SET = (20, 4)
TEST_SETS = ((20, 4), (50, 4), (100, 4), (20, 2), (20, 8))
"""(T, D) of the held-out task sets: the training shape, then more tables, then fewer and more devices."""


def with_memory(tasks: list[Task], headroom: float) -> list[Task]:
    out = []
    for t in tasks:
        need = [t.table_memory(x) for x in t.tables]
        cap = max(int(headroom * sum(need) / t.num_devices), max(need))
        out.append(Task(tables=t.tables, device_memory=(cap,) * t.num_devices, batch_size=t.batch_size,
                        name=t.name, meta=t.meta))
    return out


def task_set(pool: TablePool, n: int, t: int, d: int, seed: int, headroom: float, prefix: str) -> list[Task]:
    return with_memory(sample_tasks(pool, n, t, (1,) * d, seed=seed, prefix=f"{prefix}-T{t}-D{d}"), headroom)


def geomean(x: list[float]) -> float:
    return float(np.exp(np.mean(np.log(x)))) if x else math.nan


def plan_all(task: Task, model: CostModel, policy: TrainedPolicy, samples: int, seed: int
             ) -> dict[str, Plan | str]:
    """Every algorithm's plan, or the one-line reason it found none (a heuristic may run out of memory)."""
    planners = {name: make_planner(name, PlannerOptions(seed=seed)) for name in HEURISTICS}
    planners["rl"] = RLPlanner(policy, model)
    if samples:
        planners[f"rl_best_of_{samples}"] = RLPlanner(policy, model, samples=samples, seed=seed)
    plans: dict[str, Plan | str] = {}
    for name, planner in planners.items():
        try:
            plans[name] = run_planner(planner, task)
        except InfeasibleError as e:
            plans[name] = str(e)
    return plans


def report(rows: list[dict], key: str, algos: list[str], per_task: bool) -> None:
    """Per set: geometric mean over tasks of each algorithm's cost / best heuristic cost (by ``key``); a plan
    that ran out of memory counts as a failure, not in the mean."""
    rows = [r for r in rows if any(key in c for c in r["costs"].values())]
    sets = [s for s in TEST_SETS if any((r["T"], r["D"]) == s for r in rows)]
    print(f"\n{key}: cost / best heuristic of the same task (geometric mean over tasks; < 1 beats all; "
          "failures = out of memory)")
    print(f"{'T':>4} {'D':>3} {'n':>3} " + " ".join(f"{a[:14]:>14}" for a in algos))
    for s in sets:
        rs = [r for r in rows if (r["T"], r["D"]) == s]
        ratios: dict[str, list[float]] = {a: [] for a in algos}
        failed = dict.fromkeys(algos, 0)
        for r in rs:
            best = min(r["costs"][h][key] for h in HEURISTICS if key in r["costs"][h])
            line = []
            for a in algos:
                if key in r["costs"][a]:
                    ratios[a].append(r["costs"][a][key] / best)
                    line.append(f"{ratios[a][-1]:>14.3f}")
                else:
                    failed[a] += 1
                    line.append(f"{'fail':>14}")
            if per_task:
                print(f"     {r['task']:<22} " + " ".join(line))
        cells = [f"{geomean(ratios[a]):.3f}" + (f" ({failed[a]}f)" if failed[a] else "") for a in algos]
        print(f"{s[0]:>4} {s[1]:>3} {len(rs):>3} " + " ".join(f"{c:>14}" for c in cells))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cost-model", default="analytical", help="'analytical' or a learned checkpoint")
    p.add_argument("--policy", help="use this trained policy instead of training one")
    p.add_argument("--pool-tables", type=int, default=400, help="tables in the synthetic pool (split 50/50)")
    p.add_argument("--train-tasks", type=int, default=64)
    p.add_argument("--test-tasks", type=int, default=10, help="tasks per held-out set")
    p.add_argument("--iterations", type=int, default=300)
    p.add_argument("--samples", type=int, default=16, help="k of the best-of-k rl variant (0: greedy only)")
    p.add_argument("--real-tasks", type=int, default=0, help="tasks per set also measured on real kernels")
    p.add_argument("--real-sets", default="20x4,50x4,20x2,20x8",
                   help="TxD sets measured with --real-tasks (T=100 takes minutes per plan on this CPU)")
    p.add_argument("--headroom", type=float, default=1.3)
    p.add_argument("--big-tables", type=int, default=856)
    p.add_argument("--big-devices", type=int, default=128)
    p.add_argument("--per-task", action="store_true", help="print every task's ratios")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out-dir", default="benchmarks/results/rl_transfer")
    p.add_argument("-v", "--verbose", action="store_true")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(message)s")
    torch.set_num_threads(1)
    out = Path(args.out_dir)
    try:
        from autoshard.tables.synth import synthesize_pool

        model = load_cost_model(args.cost_model)
        began = time.perf_counter()
        pool = synthesize_pool(args.pool_tables, seed=args.seed, dims=NEUROSHARD_DIMS,
                               stats_batch_size=STATS_BATCH)
        train_pool, test_pool = split_pool(pool, seed=args.seed)
        print(f"pool: {len(pool.tables)} synthetic tables (train {len(train_pool.tables)} / test "
              f"{len(test_pool.tables)}), made in {time.perf_counter() - began:.1f} s; "
              f"cost model: {model.name}")
        train_tasks = task_set(train_pool, args.train_tasks, *TRAIN_SET, seed=args.seed + 1,
                               headroom=args.headroom, prefix="train")
        val_tasks = task_set(train_pool, 8, *TRAIN_SET, seed=args.seed + 2, headroom=args.headroom,
                             prefix="val")
        if args.policy:
            policy = TrainedPolicy.load(args.policy)
        else:
            began = time.perf_counter()
            config = TrainConfig(iterations=args.iterations, seed=args.seed,
                                 eval_every=max(args.iterations // 6, 1))
            policy = train(model, train_tasks, config, val_tasks, cost_model_spec=args.cost_model,
                           checkpoint_path=str(out / "policy.pt"))
            print(f"trained {args.iterations} iterations on {len(train_tasks)} T={TRAIN_SET[0]} "
                  f"D={TRAIN_SET[1]} tasks in {time.perf_counter() - began:.1f} s; "
                  "validation (train tables) ratio to best heuristic:")
            for h in policy.metrics["history"]:
                print(f"  it {h['iteration']:>4}: train cost/S {h['train_cost_over_s']:.3f}, "
                      f"val {h.get('eval_ratio_to_best_heuristic', math.nan):.3f}")

        algos = [*HEURISTICS, "rl"] + ([f"rl_best_of_{args.samples}"] if args.samples else [])
        rows = []
        for k, (t, d) in enumerate(TEST_SETS):
            for i, task in enumerate(task_set(test_pool, args.test_tasks, t, d, seed=args.seed + 100 + k,
                                              headroom=args.headroom, prefix="test")):
                plans = plan_all(task, model, policy, args.samples, args.seed)
                costs = {a: {"error": pl} if isinstance(pl, str) else
                         {"model_ms": plan_cost(model, task, pl).plan_ms, "plan_s": pl.planning_time_s}
                         for a, pl in plans.items()}
                if i < args.real_tasks and f"{t}x{d}" in args.real_sets.split(","):
                    from autoshard.hardware.evaluator import evaluate_plan

                    for a, pl in plans.items():
                        if not isinstance(pl, str):
                            costs[a]["real_ms"] = evaluate_plan(task, pl).plan_ms
                    print(f"measured {task.name}: " + ", ".join(f"{a} {c['real_ms']:.1f} ms" for a, c in
                                                                costs.items() if "real_ms" in c), flush=True)
                rows.append({"task": task.name, "T": t, "D": d, "costs": costs})
                write_json(out / "results.json", {"kind": "autoshard.bench.rl_transfer", "version": 1,
                                                  "command": " ".join(sys.argv), "cost_model": model.name,
                                                  "rows": rows})
        report(rows, "model_ms", algos, args.per_task)
        if args.real_tasks:
            report(rows, "real_ms", algos, args.per_task)

        big = synthesize_pool(args.big_tables, seed=args.seed + 7, dims=NEUROSHARD_DIMS, stats_batch_size=256)
        big_task = with_memory([Task(tables=big.tables, device_memory=(1,) * args.big_devices, name="big")],
                               args.headroom)[0]
        for samples in (0, args.samples):
            times, cpu = [], []
            for _ in range(3):
                c0 = time.process_time()
                plan = run_planner(RLPlanner(policy, model, samples=samples, seed=args.seed), big_task)
                # CPU time: less distorted than wall time on a shared host
                cpu.append(time.process_time() - c0)
                times.append(plan.planning_time_s)
            heuristic = []
            for h in HEURISTICS:
                try:
                    h_plan = run_planner(make_planner(h), big_task)
                    heuristic.append(plan_cost(model, big_task, h_plan).plan_ms)
                except InfeasibleError:
                    pass
            ratio = plan_cost(model, big_task, plan).plan_ms / min(heuristic)
            print(f"\nplanning {args.big_tables} tables onto {args.big_devices} devices, rl "
                  f"{'greedy' if not samples else f'best of {samples}'}: "
                  f"median wall {np.median(times):.3f} s, CPU {np.median(cpu):.3f} s "
                  f"(of 3; {model.name} cost model); cost / best heuristic {ratio:.3f}")
        print(f"wrote {out / 'results.json'}", file=sys.stderr)
    except AutoshardError as e:
        print(f"rl_transfer: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
