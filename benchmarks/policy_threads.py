"""How long the rl policy's training takes on 1 and on 2 torch threads, with the host idle and beside one busy
process (what a shared 2-vCPU host looks like when anything else runs).

Run: .venv/bin/python benchmarks/policy_threads.py --run RUN_DIR [--iterations 20]

RUN_DIR is a bench or quickstart output (its ``train_tasks.json`` and ``cost_model.pt``). For each load
(idle, one busy process) and thread count it trains ``--iterations`` iterations from scratch with
``planners.rl.train._train`` (the body of ``train``, which pins one thread itself: ``autoshard.threads``)
and prints the seconds. Why: stop 27 saw a policy stage take 385 s instead of 42 s beside an analysis.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from autoshard.errors import AutoshardError
from autoshard.pipeline.models import load_cost_model
from autoshard.planners.rl.train import TrainConfig, _train
from autoshard.tasks import load_tasks
from autoshard.threads import torch_threads


def _spin(stop_at: float) -> None:
    while time.time() < stop_at:
        pass


LOADS = ("idle", "one busy process")


@contextmanager
def host_load(load: str) -> Iterator[None]:
    """Run the block with the host idle or beside one spinning process (``LOADS``); stopped after."""
    busy = None
    if load != "idle":
        busy = mp.get_context("spawn").Process(target=_spin, args=(time.time() + 600,), daemon=True)
        busy.start()
    try:
        yield
    finally:
        if busy is not None:
            busy.terminate()
            busy.join()


def timed(model, tasks, iterations: int, threads: int) -> float:
    with torch_threads(threads):
        t0 = time.perf_counter()
        _train(model, tasks, TrainConfig(iterations=iterations, seed=0), eval_tasks=(), cost_model_spec=None,
               checkpoint_path=None, resume=None, progress=None)
        return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--run", required=True, help="bench or quickstart output directory")
    p.add_argument("--iterations", type=int, default=20)
    args = p.parse_args(argv)
    try:
        run = Path(args.run)
        if not (run / "train_tasks.json").is_file() or not (run / "cost_model.pt").is_file():
            raise AutoshardError(f"{run}: no train_tasks.json and cost_model.pt; give a bench or quickstart "
                                 "output directory")
        # the policy trains against the model, nothing timed but the training: any host
        model = load_cost_model(str(run / "cost_model.pt"), allow_other_hardware=True)
        tasks = load_tasks(str(run / "train_tasks.json"))
        for load in LOADS:
            with host_load(load):
                for threads in (1, 2):
                    seconds = timed(model, tasks, args.iterations, threads)
                    print(f"{load}, {threads} thread(s): {seconds:.1f} s for {args.iterations} iterations",
                          flush=True)
    except AutoshardError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
