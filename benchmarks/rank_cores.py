"""Does this host give every rank a core of its own? One worker timed alone, then D workers at once, each
pinned to a physical core of its own (``hardware.multiprocess.rank_cpus``, as ``--pin-cpus`` pins ranks).

Two workloads, one torch thread each: a (400, 400) matmul loop (compute) and an ``embedding_bag`` sum over a
2M x 64 fp32 table with random ids (memory: the fused kernels' access pattern). Printed per workload: the
lone time and each concurrent worker's time over it. About 1.0: the ranks compute as on devices of their
own; about D: they share one core's throughput (then a multi-process step shows the sum of the ranks'
work, not its max, and cannot rank plans: ``benchmarks/dmp_step.py``'s CAVEAT).

    .venv/bin/python benchmarks/rank_cores.py            # D = 2
    .venv/bin/python benchmarks/rank_cores.py --devices 4 --json cores.json
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from autoshard.errors import AutoshardError
from autoshard.hardware.multiprocess import rank_cpus
from autoshard.host import host_info
from autoshard.io import write_json

WORKLOADS = ("matmul", "embedding_bag")


def work(kind: str, cpu: int, repeats: int, results: Any) -> None:
    """One worker: pinned to ``cpu``, one torch thread; puts (kind, seconds) on ``results``."""
    import os

    import torch

    os.sched_setaffinity(0, {cpu})
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(cpu)
    if kind == "matmul":
        a = torch.rand(400, 400, generator=g)

        def step() -> None:
            a @ a
    else:
        weight = torch.rand(2_000_000, 64, generator=g)
        ids = torch.randint(0, 2_000_000, (200_000,), generator=g)
        offsets = torch.arange(0, 200_000, 20)

        def step() -> None:
            torch.nn.functional.embedding_bag(ids, weight, offsets, mode="sum")
    step()
    t0 = time.perf_counter()
    for _ in range(repeats):
        step()
    results.put((kind, time.perf_counter() - t0))


def run(kind: str, cpus: list[int], repeats: int) -> list[float]:
    """Seconds of each of ``len(cpus)`` workers started together."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    procs = [ctx.Process(target=work, args=(kind, cpu, repeats, results)) for cpu in cpus]
    for p in procs:
        p.start()
    times = [results.get(timeout=600)[1] for _ in procs]
    for p in procs:
        p.join()
    return times


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--devices", type=int, default=2, help="workers D run at once (default 2)")
    ap.add_argument("--repeats", type=int, default=300, help="matmuls a worker times (embedding_bags: 1/10)")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args(argv)
    try:
        if args.devices < 2 or args.repeats < 10:
            raise AutoshardError("--devices must be >= 2 and --repeats >= 10")
        cpus = rank_cpus(args.devices)
    except AutoshardError as e:
        print(f"rank_cores.py: error: {e}", file=sys.stderr)
        return 2
    out: dict[str, Any] = {}
    print(f"{args.devices} workers pinned to CPUs {cpus} (one physical core each), one torch thread each")
    print("| workload | alone s | each of D at once / alone |")
    print("|---|---:|---|")
    for kind in WORKLOADS:
        repeats = args.repeats if kind == "matmul" else max(1, args.repeats // 10)
        alone = run(kind, cpus[:1], repeats)[0]
        together = run(kind, cpus, repeats)
        out[kind] = {"alone_s": alone, "together_s": together, "repeats": repeats}
        print(f"| {kind} | {alone:.3f} | {', '.join(f'{t / alone:.2f}' for t in together)} |")
    if args.json:
        write_json(args.json, {"devices": args.devices, "cpus": cpus, "workloads": out,
                               "command": " ".join(sys.argv), "host": host_info("cpu")})
    return 0


if __name__ == "__main__":
    sys.exit(main())
