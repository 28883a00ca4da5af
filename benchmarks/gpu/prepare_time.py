"""Where a broad profile sample's CPU time goes before its kernels are timed (why ``autoshard profile
--prepare-workers`` exists).

    .venv/bin/python benchmarks/gpu/prepare_time.py profiles/nvidia-h100/broad-s31-b16384 \
        [--first 300] [--count 10]

For samples FIRST .. FIRST+COUNT-1 of the profile's design, on this host's CPU at one thread: the seconds to
draw the sample (its tables and their access bins: ``broad_sample``), its lookup batches (what
``prepare_lookups`` draws, a fresh lookup cache per sample) and the backward's gradient as a CPU draw (what
``measure_shard`` drew before stop 35; now drawn on the device). Means over the samples; no kernel is built
or timed.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

from autoshard.errors import AutoshardError
from autoshard.hardware.kernel import MeasureSettings, prepare_lookups
from autoshard.hardware.lookup_cache import clear_lookup_cache
from autoshard.hardware.profiler import BroadDesign, broad_sample, broad_task
from autoshard.io import read_json


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("profile", help="a broad profile directory (its profile.json names the design)")
    ap.add_argument("--first", type=int, default=300, help="first sample index (default 300)")
    ap.add_argument("--count", type=int, default=10, help="samples (default 10)")
    args = ap.parse_args(argv)
    try:
        manifest = read_json(Path(args.profile) / "profile.json", kind="autoshard.profile")
        if not isinstance(manifest.get("design"), dict):
            raise AutoshardError(f"{args.profile} is not a broad-design profile (no design in profile.json)")
        if args.count < 1 or args.first < 0:
            raise AutoshardError("--count must be >= 1 and --first >= 0")
    except AutoshardError as e:
        print(f"prepare_time: error: {e}", file=sys.stderr)
        return 2
    design, seed = BroadDesign.from_json(manifest["design"]), int(manifest["seed"])
    settings = MeasureSettings()
    torch.set_num_threads(1)
    parts: dict[str, list[float]] = {"sample": [], "lookups": [], "gradient (CPU)": []}
    print(f"{'index':>6} {'tables':>6} " + " ".join(f"{k:>15}" for k in parts))
    for i in range(args.first, args.first + args.count):
        clear_lookup_cache()
        t0 = time.perf_counter()
        s = broad_sample(design, seed, i)
        t1 = time.perf_counter()
        task, refs = broad_task(s)
        prepared = prepare_lookups(task, refs, settings)
        t2 = time.perf_counter()
        grad = torch.rand(task.batch_size, sum(s.dims))
        t3 = time.perf_counter()
        del prepared, grad
        for key, v in zip(parts, (t1 - t0, t2 - t1, t3 - t2)):
            parts[key].append(v)
        print(f"{i:>6} {len(s.tables):>6} " + " ".join(f"{v[-1]:>15.2f}" for v in parts.values()))
    print(f"{'mean':>13} " + " ".join(f"{sum(v) / len(v):>15.2f}" for v in parts.values()) + "  (seconds)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
