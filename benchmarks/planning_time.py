"""Planning time per algorithm at 50, 200 and 856 tables (the issue-6 scaling benchmark).

For each size, one synthetic DLRM-like task (``autoshard.tables.synth.synthesize_pool``, NeuroShard's dims
4..128) is planned by every algorithm through ``run_planner`` (timed and validated), and each plan is scored
with the planning cost model; the table also gives each plan's gap to ``exact.lower_bound`` (a bound under the
model's linearised per-device costs, valid for column-wise plans too). Results go to a JSON file, written
after every row; re-running with the same settings resumes and skips rows already there.

    .venv/bin/python benchmarks/planning_time.py                      # 50/200/856 tables, analytical model
    .venv/bin/python benchmarks/planning_time.py --sizes 50 --algos neuroshard,ilp --time-limit 5

Device counts and memory: ``DEVICES`` below; memory per device is ``--headroom`` x the task's table bytes /
devices (at least the largest table), as the synthetic tables (published mean 4.1M rows) do not fit
DreamShard's 5 GB at these sizes.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

import numpy as np

from autoshard.costs.base import plan_cost
from autoshard.costs.loading import load_cost_model
from autoshard.errors import AutoshardError
from autoshard.io import read_json, write_json
from autoshard.planners.base import PlannerOptions, make_planner, run_planner
from autoshard.planners.exact import lower_bound
from autoshard.tables import Table
from autoshard.tasks import Task

DEVICES = {50: 4, 200: 8, 856: 16}
"""Devices per task size: DreamShard/NeuroShard's 4- and 8-device settings, 16 for the full 856-table pool."""
DEFAULT_ALGOS = ("size_lookup_greedy", "neuroshard", "search", "ilp")
NEUROSHARD_DIMS = (4, 8, 16, 32, 64, 128)
"""NeuroShard (MLSys'23) samples table dims from 4..128."""
STATS_BATCH = 1024
"""Batch the synthetic tables' access bins are computed from; planning time does not depend on the bins, so a
small batch keeps pool generation fast (the bins are then not comparable with the published batch-65536
ones)."""


def make_task(num_tables: int, seed: int, headroom: float, batch_size: int) -> Task:
    try:
        from autoshard.tables.synth import synthesize_pool

        tables = synthesize_pool(num_tables, seed=seed, dims=NEUROSHARD_DIMS,
                                 stats_batch_size=STATS_BATCH).tables
    except ImportError:  # synth not in this checkout: rows/pooling of the published mean order, uniform dims
        rng = np.random.default_rng(seed)
        tables = tuple(Table(f"t{i}", int(rng.choice(NEUROSHARD_DIMS)), int(rng.gamma(1.7, 2.4e6)) + 1,
                             float(rng.lognormal(2.0, 1.0))) for i in range(num_tables))
    d = DEVICES.get(num_tables, max(2, num_tables // 50))
    probe = Task(tables=tuple(tables), device_memory=(1,) * d)
    need = [probe.table_memory(t) for t in tables]
    cap = max(int(headroom * sum(need) / d), max(need))
    return Task(tables=tuple(tables), device_memory=(cap,) * d, batch_size=batch_size,
                name=f"synth-{num_tables}x{d}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default="50,200,856", help="comma list of table counts")
    p.add_argument("--algos", default=",".join(DEFAULT_ALGOS), help="comma list of registered algorithms")
    p.add_argument("--cost-model", default="analytical", help="'analytical' or a learned checkpoint")
    p.add_argument("--time-limit", type=float, default=10.0, help="seconds for search and ilp")
    p.add_argument("--headroom", type=float, default=1.3, help="device memory / (table bytes / devices)")
    p.add_argument("--batch-size", type=int, default=2048)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("-o", "--output", default="benchmarks/results/planning_time.json")
    p.add_argument("-v", "--verbose", action="store_true")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(message)s")
    try:
        sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
        algos = [a.strip() for a in args.algos.split(",") if a.strip()]
        # plans and prices with the model, nothing timed but the planners: any host
        model = load_cost_model(args.cost_model, allow_other_hardware=True)
        settings = {"cost_model": args.cost_model, "time_limit_s": args.time_limit, "headroom": args.headroom,
                    "batch_size": args.batch_size, "seed": args.seed,
                    "devices": {str(k): v for k, v in DEVICES.items()}}  # JSON keys are strings
        rows: list[dict] = []
        if Path(args.output).exists():
            old = read_json(args.output, kind="autoshard.bench.planning_time")
            if old.get("settings") == settings:
                rows = list(old.get("rows", []))
        done = {(r["tables"], r["algorithm"]) for r in rows}
        options = PlannerOptions(seed=args.seed, cost_model=model, time_limit_s=args.time_limit)
        print(f"{'tables':>6} {'devs':>4} {'algorithm':<20} {'plan s':>8} {'model ms':>10} {'gap to LB':>9} "
              f"{'col splits':>10}")
        for n in sizes:
            task = make_task(n, args.seed, args.headroom, args.batch_size)
            bound = lower_bound(task, model)
            for algo in algos:
                if (n, algo) in done:
                    r = next(r for r in rows if (r["tables"], r["algorithm"]) == (n, algo))
                else:
                    r = {"tables": n, "devices": task.num_devices, "algorithm": algo, "lower_bound_ms": bound}
                    planner = make_planner(algo, options)
                    try:
                        plan = run_planner(planner, task)
                    except AutoshardError as e:
                        r.update(error=str(e))
                    else:
                        cost = plan_cost(model, task, plan).plan_ms
                        r.update(planning_time_s=plan.planning_time_s, model_ms=cost, gap=cost / bound - 1.0,
                                 column_splits=sum(len(pl.ranks) - 1 for pl in plan.placements))
                        extra = getattr(planner, "last_result", None)
                        if extra is not None:
                            r["result"] = {k: v for k, v in vars(extra).items()}
                    rows.append(r)
                    write_json(args.output, {"kind": "autoshard.bench.planning_time", "version": 1,
                                             "settings": settings, "command": " ".join(sys.argv),
                                             "written": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                             "rows": rows})
                if "error" in r:
                    print(f"{n:>6} {r['devices']:>4} {algo:<20} failed: {r['error']}")
                else:
                    print(f"{n:>6} {r['devices']:>4} {algo:<20} {r['planning_time_s']:>8.3f} "
                          f"{r['model_ms']:>10.3f} {100 * r['gap']:>8.2f}% {r['column_splits']:>10}")
        print(f"wrote {args.output}", file=sys.stderr)
    except AutoshardError as e:
        print(f"planning_time: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
