"""Planning time of every heuristic at 856 tables x 128 devices (target: well under a second).

Run: .venv/bin/python benchmarks/heuristics_speed.py [--tables 856] [--devices 128] [--repeats 5]
Prints the median wall time of ``run_planner`` (plan + validation) per heuristic.
"""

from __future__ import annotations

import argparse
import statistics
import time

from autoshard.planners.base import PlannerOptions, make_planner, run_planner
from autoshard.tables.synth import synthesize_pool
from autoshard.tasks import DREAMSHARD_DEVICE_MEMORY, Task

HEURISTICS = ["random", "round_robin", "dim_greedy", "lookup_greedy", "size_greedy", "size_lookup_greedy"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tables", type=int, default=856)
    ap.add_argument("--devices", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--stats-batch-size", type=int, default=4096,
                    help="batch for the generator's access bins (bins don't affect heuristic speed)")
    ap.add_argument("--dim", type=int, default=16, help="table dim (DreamShard's DLRM tasks use 16)")
    args = ap.parse_args()
    pool = synthesize_pool(args.tables, seed=0, dims=(args.dim,), stats_batch_size=args.stats_batch_size)
    task = Task(tables=pool.tables, device_memory=(DREAMSHARD_DEVICE_MEMORY,) * args.devices, name="speed")
    print(f"{args.tables} tables x {args.devices} devices, median of {args.repeats} runs")
    for algo in HEURISTICS:
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            run_planner(make_planner(algo, PlannerOptions(seed=0)), task)
            times.append(time.perf_counter() - start)
        print(f"{algo:<20} {statistics.median(times) * 1000:8.1f} ms")


if __name__ == "__main__":
    main()
