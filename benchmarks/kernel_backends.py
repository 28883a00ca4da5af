"""FBGEMM's fused TBE vs the torch-only backend (hardware.torch_backend): fwd and bwd time of a few devices.

Run: .venv/bin/python benchmarks/kernel_backends.py [--device cpu|cuda] [--optimizers exact_sgd,...]
Each device is timed with ``measure_shard`` (its protocol: 1 torch thread on CPU, cache flush before each fwd
and bwd, warmup, median of the repeats) once per backend; backends not installed (fbgemm_gpu) are skipped.
Devices: 1 table 100k x 64; 10 such tables; 4 tables of dims 16/32/64/128 (100k rows); all pooling 20,
power-law lookups, batch 2048.
"""

from __future__ import annotations

import argparse
import importlib.util
import time

from autoshard.hardware.kernel import KernelBackend, MeasureSettings, Optimizer, measure_shard
from autoshard.shards import ShardRef
from autoshard.tables import LookupKind, LookupSpec, Table
from autoshard.tasks import Task

ROWS = 100_000
POOLING = 20.0
BATCH = 2048
DEVICES = {
    "1 x 100k x 64": (64,),
    "10 x 100k x 64": (64,) * 10,
    "4 x 100k x 16/32/64/128": (16, 32, 64, 128),
}


def _task(dims: tuple[int, ...]) -> Task:
    tables = tuple(Table(f"t{i}", d, ROWS, POOLING, lookups=LookupSpec(LookupKind.POWER_LAW, seed=i))
                   for i, d in enumerate(dims))
    return Task(tables, (10**12,), batch_size=BATCH, name="kernel-backends")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--optimizers", default="exact_sgd,rowwise_adagrad",
                    help="comma-separated: exact_sgd, rowwise_adagrad")
    ap.add_argument("--repeats", type=int, default=10)
    args = ap.parse_args()
    backends = [b for b in KernelBackend
                if b is not KernelBackend.FBGEMM or importlib.util.find_spec("fbgemm_gpu") is not None]
    print(f"device {args.device}, batch {BATCH}, pooling {POOLING:g}, rows {ROWS}; median (min) of "
          f"{args.repeats} runs, ms; ratio = torch / fbgemm median")
    print(f"{'device':<24} {'optimizer':<16} {'backend':<8} {'fwd ms':>15} {'bwd ms':>17} "
          f"{'fwd x':>6} {'bwd x':>6} {'wall s':>6}")
    for name, dims in DEVICES.items():
        task = _task(dims)
        shards = [ShardRef(i, d) for i, d in enumerate(dims)]
        for opt in args.optimizers.split(","):
            base = None  # the fbgemm timing, when fbgemm_gpu is installed
            for backend in backends:
                settings = MeasureSettings(optimizer=Optimizer(opt), device=args.device, backend=backend,
                                           repeats=args.repeats)
                start = time.perf_counter()
                t = measure_shard(task, shards, settings)
                took = time.perf_counter() - start
                if backend is KernelBackend.FBGEMM:
                    base = t
                ratio = (f"{t.fwd_ms / base.fwd_ms:6.2f} {t.bwd_ms / base.bwd_ms:6.2f}"
                         if base is not None and t is not base else f"{'':6} {'':6}")
                fwd = f"{t.fwd_ms:7.2f} ({min(t.fwd_runs_ms):6.2f})"
                bwd = f"{t.bwd_ms:8.2f} ({min(t.bwd_runs_ms):7.2f})"
                print(f"{name:<24} {opt:<16} {backend.value:<8} {fwd} {bwd} {ratio} {took:6.1f}", flush=True)


if __name__ == "__main__":
    main()
