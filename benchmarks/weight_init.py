"""Does the weight init change a device's timing? Tiled uniform values (``kernel.fill_weights``, what the
profiler and evaluator use since stop 16) against one uniform draw per weight (before).

Run: .venv/bin/python benchmarks/weight_init.py profiles/amd-epyc/broad-seed0 [--records 24] [--reps 2]

Picks ``--records`` records spread over the profile's fwd+bwd range (at most ``--max-ms``) and times each
device ``--reps`` times with either init, interleaved (repetition -> record -> init, the order of the two
alternating), so drift hits both alike. Prints per init the median build-and-time seconds, then the
geometric mean over devices of the tiled / per-weight ratio of fwd, bwd and fwd+bwd (each device's median
over its repetitions), with a bootstrap 95% interval over devices.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from autoshard.bench.summary import geomean, geomean_interval
from autoshard.hardware import kernel
from autoshard.hardware.profile_dataset import load_dataset
from autoshard.host import host_info


def per_weight_uniform(weights: Sequence[Any], low: float, high: float) -> None:
    """The init before stop 16: one uniform draw per weight."""
    for w in weights:
        w.detach().uniform_(low, high)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("profile", help="a profile directory (autoshard profile -o DIR), plain or packed")
    ap.add_argument("--records", type=int, default=24)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--max-ms", type=float, default=500.0, help="only records whose fwd+bwd is below this")
    args = ap.parse_args()

    data = load_dataset(args.profile)
    picks = data.spread(args.records, args.max_ms)
    if not picks or args.reps < 1:
        raise SystemExit("no records to time (check --records, --max-ms, --reps)")
    inits = {"tiled": kernel.fill_weights, "per-weight": per_weight_uniform}
    here = host_info("cpu")
    print(f"{len(picks)} devices of {args.profile}, {args.reps} timings each per init, interleaved; "
          f"{here['cpu']}, torch {here['torch']}", flush=True)
    # timings[init][device] -> list of (fwd, bwd, seconds)
    timings: dict[str, list[list[tuple[float, float, float]]]] = {n: [[] for _ in picks] for n in inits}
    for rep in range(args.reps):
        for d, rec in enumerate(picks):
            task, refs = data.task_of(rec)
            settings = kernel.MeasureSettings.from_json({k: v for k, v in rec.settings.items()
                                                         if k != "precision"})
            order = list(inits) if (rep + d) % 2 == 0 else list(reversed(inits))
            for name in order:
                kernel.fill_weights = inits[name]  # _build_tbe / _build_torch call it by module name
                start = time.perf_counter()
                t = kernel.measure_shard(task, refs, settings)
                timings[name][d].append((t.fwd_ms, t.bwd_ms, time.perf_counter() - start))
        print(f"repetition {rep + 1}/{args.reps} done", flush=True)
    kernel.fill_weights = inits["tiled"]

    runs = {n: np.median(np.array(timings[n]), axis=1) for n in inits}  # devices x (fwd, bwd, seconds)
    for name in inits:
        seconds = float(np.median(runs[name][:, 2]))
        print(f"{name:<11} median seconds a device (build + lookups + timing): {seconds:.2f}")
    tiled, per = runs["tiled"], runs["per-weight"]
    for label, a, b in (("fwd", tiled[:, 0], per[:, 0]), ("bwd", tiled[:, 1], per[:, 1]),
                        ("fwd+bwd", tiled[:, 0] + tiled[:, 1], per[:, 0] + per[:, 1])):
        lo, hi = geomean_interval(list(a / b))
        g = geomean(list(a / b))
        print(f"tiled / per-weight {label:<8} {g:.3f} [{lo:.3f}, {hi:.3f}]")


if __name__ == "__main__":
    main()
