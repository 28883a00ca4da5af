"""Make a GPU bench's CPU-only stages here, so that the lent GPU's minutes go to kernels.

    python benchmarks/gpu_prepare.py --suite dlrm-50-4 --batch-size 16384 -o out/gpu/dlrm-50-4

runs the pipeline's data stages (pool, split, train and test tasks: ``autoshard.pipeline.data``) of
``autoshard bench --suite SUITE --batch-size B --device cuda --backend torch -o DIR`` in DIR. None of them
touches a kernel, and their keys do not depend on the device, so the bench run later on the GPU host finds
them cached. ``DIR/train_pool.json`` is what the GPU profile samples (``autoshard profile --tables``).
The GPU session's commands are in docs/benchmarks.md ("Stop 25").
"""

from __future__ import annotations

import argparse
import sys

from autoshard.bench.suites import get_suite, with_overrides
from autoshard.errors import AutoshardError
from autoshard.pipeline.context import Context, PipelineConfig
from autoshard.pipeline.data import stage_pool, stage_split, stage_tasks


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--suite", required=True)
    p.add_argument("--batch-size", type=int, help="the bench's --batch-size (default: the suite's)")
    p.add_argument("--test-tasks", type=int, help="the bench's --test-tasks (default: the suite's)")
    p.add_argument("-o", "--output", required=True, help="the bench's output directory")
    args = p.parse_args(argv)
    try:
        suite = with_overrides(get_suite(args.suite), batch_size=args.batch_size,
                               num_test_tasks=args.test_tasks)
        ctx = Context(PipelineConfig(suite=suite, device="cuda", backend="torch"), args.output)
        k_split = stage_split(ctx, stage_pool(ctx))
        stage_tasks(ctx, k_split, "train")
        stage_tasks(ctx, k_split, "test")
    except AutoshardError as e:
        print(f"gpu_prepare: error: {e}", file=sys.stderr)
        return 2
    print(f"{args.output}: pool, split, train and test tasks of {suite.name} at batch {suite.batch_size}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
