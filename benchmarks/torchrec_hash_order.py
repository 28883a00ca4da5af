"""Does TorchRec's planner give a task the same plan in every process? Plans a bench run's tasks with the
TorchRec baseline in one subprocess per string-hashing seed (``PYTHONHASHSEED``), with TorchRec's own
enumerator and with the baseline's (``torchrec.baseline.sharder_order_enumerator``), and prints per task a
digest of each plan and how many distinct plans each enumerator gave.

    .venv/bin/python benchmarks/torchrec_hash_order.py benchmarks/runs/s71-amd-dlrm-10-4-torchrec.json.gz \
        --seeds 0,1,2,3

Why (docs/benchmarks.md, "Stop 72"): TorchRec's planner's plans differed between two runs of the same tasks
(stop 71, 7 of 10 alike) although its inputs were the same. Its enumerator orders a table's sharding types
and kernels as Python sets do, by string hashing, which is random per process; the baseline keeps the
sharder's order. Nothing is measured; each subprocess imports TorchRec (seconds).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from autoshard.errors import AutoshardError
from autoshard.pipeline.results import read_task_results

ORDERS = ("torchrec", "sharder")
"""TorchRec's own enumerator (set order), the baseline's (the sharder's order)."""

_DRIVER = """
import hashlib, json, logging, sys
logging.disable(logging.WARNING)
from autoshard.tasks import Task
from autoshard.torchrec import baseline
if sys.argv[2] == "torchrec":
    from torchrec.distributed.planner.enumerators import EmbeddingEnumerator
    baseline.sharder_order_enumerator = lambda **kwargs: EmbeddingEnumerator(**kwargs)
with open(sys.argv[1]) as f:
    tasks = [Task.from_json(t) for t in json.load(f)]
planner = baseline.TorchRecPlanner()
for task in tasks:
    plan = json.dumps(planner.plan(task).to_json()["tables"], sort_keys=True)
    print(hashlib.sha1(plan.encode()).hexdigest()[:8])
"""


def plan_digests(task_file: str, seed: int, order: str) -> list[str]:
    """One digest per task of the TorchRec baseline's plans in a fresh process under ``seed``."""
    env = {**os.environ, "PYTHONHASHSEED": str(seed)}
    done = subprocess.run([sys.executable, "-c", _DRIVER, task_file, order], env=env, capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise AutoshardError(f"planning under PYTHONHASHSEED={seed} ({order} order) failed: {last}")
    return done.stdout.split()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run", help="a bench results file (.json or .json.gz): its tasks are planned")
    p.add_argument("--seeds", default="0,1,2,3",
                   help="comma-separated PYTHONHASHSEED values (default 0,1,2,3)")
    p.add_argument("--tasks", type=int, default=None, help="only the first N tasks")
    args = p.parse_args(argv)
    try:
        try:
            seeds = [int(s) for s in args.seeds.split(",")]
        except ValueError:
            raise AutoshardError(f"--seeds {args.seeds!r}: give comma-separated integers, e.g. 0,1,2,3"
                                 ) from None
        if len(seeds) < 2 or any(not 0 <= s <= 4294967295 for s in seeds):
            raise AutoshardError(f"--seeds {args.seeds!r}: give two or more seeds in [0, 4294967295]")
        if args.tasks is not None and args.tasks < 1:
            raise AutoshardError(f"--tasks {args.tasks}: give a positive number of tasks")
        tasks = [t.task for t in read_task_results(args.run)][:args.tasks]
        with tempfile.TemporaryDirectory() as tmp:
            task_file = str(Path(tmp) / "tasks.json")
            Path(task_file).write_text(json.dumps([t.to_json() for t in tasks]))
            digests = {(order, s): plan_digests(task_file, s, order) for order in ORDERS for s in seeds}
    except AutoshardError as e:
        print(f"torchrec_hash_order: error: {e}", file=sys.stderr)
        return 2
    heads = [f"{order} order, seed {s}" for order in ORDERS for s in seeds]
    print(f"| task | {' | '.join(heads)} | distinct plans: torchrec order / sharder order |")
    print("|---|" + "---|" * (len(heads) + 1))
    varied = dict.fromkeys(ORDERS, 0)
    for k in range(len(tasks)):
        cells = [digests[(order, s)][k] for order in ORDERS for s in seeds]
        distinct = {order: len({digests[(order, s)][k] for s in seeds}) for order in ORDERS}
        for order in ORDERS:
            varied[order] += distinct[order] > 1
        print(f"| {k} | {' | '.join(cells)} | {distinct['torchrec']} / {distinct['sharder']} |")
    print(f"\ntasks whose plan changed with the seed: TorchRec's order {varied['torchrec']} of {len(tasks)}, "
          f"the sharder's order {varied['sharder']} of {len(tasks)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
