"""How TorchRec's row-wise output collectives compare with the all-to-all the step model prices them as.

Until stop 44 the step model (``autoshard.costs.step``) priced a row shard's pooled outputs as partial sums
sent to the rank that owns each sample, timed or fitted as an all-to-all; this script is what showed that
wrong on gloo, and ``autoshard profile-comm`` now measures the factors (and the bucketisation) itself at
every sweep point (``hardware.comm``). TorchRec's row-wise sharding runs a real ``reduce_scatter`` for the
forward output and an ``all_gather`` for its gradient. On NCCL the three move the same bytes at about the
same speed; on gloo (CPU ranks, this project's ground truth on CPU) they need not. This script times, on D
gloo ranks (``--pin-cpus``: each on a physical core of its own), for each (global batch, summed dim of the
row-split tables):

- ``reduce_scatter_tensor`` of the (batch, dim) fp32 partial sums (each rank keeps batch / D rows summed),
- ``all_gather_into_tensor`` of the (batch / D, dim) gradient slices,
- ``all_to_all_single`` moving the same bytes per rank as the reduce-scatter's input ((D - 1) / D of it to
  other ranks), what the step model's measured and modelled collectives time,

interleaved (each repeat runs the three once, a barrier before each), median ms of rank 0's timings.

With ``--bucketize-ids N,...`` it also times, in this process on one thread, FBGEMM's
``block_bucketize_sparse_features`` on N ids (3 features of 100,000 rows, uniform ids, bags of 50, D row
blocks): the op TorchRec's row-wise input distribution runs on every rank's local ids before the id
all-to-all (the step model's ``row_bucketize``, from stop 44; on a GPU a fast kernel, on CPU it is not).

    .venv/bin/python benchmarks/row_collectives.py --pin-cpus --bucketize-ids 307200,614400
    .venv/bin/python benchmarks/row_collectives.py --devices 4 --points 8192x64,8192x256 --json rc.json

Measured 2026-11-28 on the 2-vCPU Intel Xeon VM (2 physical cores, ranks pinned; an ad-hoc first version
of this script, the committed figures in docs/benchmarks.md, "Stop 43", name their run): gloo's
reduce-scatter took 2.5-4.4x the all-to-all of the same bytes, its all-gather 1.3-2.1x.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from typing import Any

import numpy as np

from autoshard.errors import AutoshardError
from autoshard.hardware.comm import bucketizer
from autoshard.hardware.multiprocess import RankContext, run_on_ranks
from autoshard.host import host_info
from autoshard.io import write_json

PRIMITIVES = ("reduce_scatter", "all_gather", "all_to_all")


def parse_points(text: str) -> list[tuple[int, int]]:
    """'BATCHxDIM,...' -> [(batch, dim), ...]; one-line error on anything else."""
    points = []
    for item in text.split(","):
        try:
            batch, dim = (int(x) for x in item.lower().split("x"))
        except ValueError:
            raise AutoshardError(f"--points {item!r}: use BATCHxDIM, e.g. 4096x64") from None
        if batch < 1 or dim < 1:
            raise AutoshardError(f"--points {item!r}: batch and dim must be positive")
        points.append((batch, dim))
    return points


def _worker(ctx: RankContext, points: list[tuple[int, int]], warmup: int,
            repeats: int) -> list[dict[str, list[float]]]:
    """One rank: every point's three collectives, interleaved; this rank's ms of each timed run."""
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    out = [_time_point(batch, dim, ctx.world_size, warmup, repeats) for batch, dim in points]
    dist.barrier()
    return out


def _time_point(batch: int, dim: int, world: int, warmup: int, repeats: int) -> dict[str, list[float]]:
    """One (batch, dim): the three collectives, each repeat running them once in a rotated order."""
    import torch
    import torch.distributed as dist

    local = -(-batch // world)  # rows a rank keeps (the batch padded to a multiple of D)
    partial = torch.ones(local * world, dim)  # every sample's partial sums of this rank's row shards
    kept = torch.zeros(local, dim)
    gathered = torch.zeros(local * world, dim)
    flat_in = torch.ones(local * world * dim)  # the same bytes, an even all-to-all
    flat_out = torch.zeros(local * world * dim)
    run = {"reduce_scatter": lambda: dist.reduce_scatter_tensor(kept, partial),
           "all_gather": lambda: dist.all_gather_into_tensor(gathered, kept),
           "all_to_all": lambda: dist.all_to_all_single(flat_out, flat_in)}
    times: dict[str, list[float]] = {name: [] for name in PRIMITIVES}
    for k in range(warmup + repeats):
        for j in range(len(PRIMITIVES)):
            name = PRIMITIVES[(j + k) % len(PRIMITIVES)]  # every rank the same order
            dist.barrier()
            t0 = time.perf_counter()
            run[name]()
            t1 = time.perf_counter()
            if k >= warmup:
                times[name].append((t1 - t0) * 1e3)
    return times


def time_bucketize(num_ids: int, devices: int, repeats: int, warmup: int) -> float:
    """Median ms of FBGEMM's ``block_bucketize_sparse_features`` on ``num_ids`` ids (module docstring)."""
    import torch

    features, rows, pooling = 3, 100_000, 50
    if num_ids < 1 or num_ids % (features * pooling):
        raise AutoshardError(f"--bucketize-ids {num_ids}: use a positive multiple of {features * pooling} "
                             f"ids ({features} features, bags of {pooling})")
    name, bucketize = bucketizer()
    if name != "fbgemm":
        raise AutoshardError("--bucketize-ids needs fbgemm_gpu (fbgemm-gpu-cpu); not installed")
    torch.set_num_threads(1)
    lengths = torch.full((num_ids // pooling,), pooling, dtype=torch.int64)  # feature by feature, as a KJT
    ids = torch.randint(0, rows, (num_ids,), dtype=torch.int64, generator=torch.Generator().manual_seed(0))
    blocks = torch.full((features,), -(-rows // devices), dtype=torch.int64)
    times = []
    for k in range(warmup + repeats):
        t0 = time.perf_counter()
        bucketize(lengths, ids, blocks, devices)
        if k >= warmup:
            times.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(times))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--devices", type=int, default=2, help="gloo ranks D (default 2)")
    ap.add_argument("--points", default="4096x16,4096x64,4096x192,8192x64",
                    help="global batch x summed dim of the row-split tables, comma-separated")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--pin-cpus", action="store_true", help="every rank on a physical core of its own")
    ap.add_argument("--bucketize-ids", default="",
                    help="also time FBGEMM's block_bucketize_sparse_features on these id counts "
                         "(comma-separated)")
    ap.add_argument("--json", help="write everything here")
    args = ap.parse_args(argv)
    try:
        if args.devices < 2:
            raise AutoshardError("--devices must be at least 2: a collective needs two ranks")
        if args.repeats < 1 or args.warmup < 0:
            raise AutoshardError("--repeats must be >= 1 and --warmup >= 0")
        points = parse_points(args.points)
        try:
            id_counts = [int(x) for x in args.bucketize_ids.split(",") if x.strip()]
        except ValueError:
            raise AutoshardError(f"--bucketize-ids {args.bucketize_ids!r}: use id counts, e.g. "
                                 "307200,614400") from None
        bucketize = {n: time_bucketize(n, args.devices, args.repeats, args.warmup) for n in id_counts}
        per_rank = run_on_ranks(_worker, args.devices, (points, args.warmup, args.repeats), backend="gloo",
                                what="row collectives", pin_cpus=args.pin_cpus)
    except AutoshardError as e:
        print(f"row_collectives.py: error: {e}", file=sys.stderr)
        return 2
    rows = []
    print(f"D={args.devices} gloo, {'each rank pinned to a physical core' if args.pin_cpus else 'unpinned'}; "
          f"median of {args.repeats} (rank 0)")
    print("| global batch x dim | bytes a rank (input) | reduce_scatter ms | all_gather ms | all_to_all ms | "
          "reduce_scatter / all_to_all | all_gather / all_to_all |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for (batch, dim), times in zip(points, per_rank[0]):
        med = {name: float(np.median(times[name])) for name in PRIMITIVES}
        row = {"batch": batch, "dim": dim, "input_bytes": -(-batch // args.devices) * args.devices * dim * 4,
               **{f"{name}_ms": med[name] for name in PRIMITIVES}}
        rows.append(row)
        a2a = med["all_to_all"]
        print(f"| {batch} x {dim} | {row['input_bytes']} | {med['reduce_scatter']:.3f} | "
              f"{med['all_gather']:.3f} | {a2a:.3f} | {med['reduce_scatter'] / a2a:.2f} | "
              f"{med['all_gather'] / a2a:.2f} |")
    if bucketize:
        print(f"\n| ids bucketised into {args.devices} row blocks (one rank's) | "
              "block_bucketize_sparse_features ms (1 thread) | ns an id |")
        print("|---:|---:|---:|")
        for n, ms in bucketize.items():
            print(f"| {n} | {ms:.2f} | {ms * 1e6 / n:.1f} |")
    if args.json:
        result: dict[str, Any] = {"command": shlex.join(sys.argv), "devices": args.devices,
                                  "pin_cpus": args.pin_cpus, "warmup": args.warmup, "repeats": args.repeats,
                                  "points": rows, "rank_times_ms": per_rank,
                                  "bucketize_ms": {str(n): ms for n, ms in bucketize.items()},
                                  "host": host_info("cpu")}
        write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
