"""The data stages: the table pool, its train / test split, and the tasks sampled from each half."""

from __future__ import annotations

import hashlib
from pathlib import Path

from autoshard.errors import AutoshardError
from autoshard.pipeline.context import Context
from autoshard.tables import TablePool
from autoshard.tables.synth import GENERATOR_VERSION, synthesize_pool
from autoshard.tasks import sample_tasks, save_tasks, split_pool


def stage_pool(ctx: Context) -> str:
    """``pool.json``: the user's table file (keyed by its contents), or a synthetic DLRM-like pool."""
    s = ctx.suite
    src = ctx.config.tables_path
    if src:
        digest = hashlib.sha256(Path(src).read_bytes()).hexdigest()[:16] if Path(src).is_file() else ""
        return ctx.stage("pool", {"tables_path": src, "sha256": digest}, [], ["pool.json"],
                         lambda resume: TablePool.load(src).save(str(ctx.out / "pool.json")))
    settings = {"generator": "autoshard.tables.synth.synthesize_pool", "num_tables": s.pool_tables,
                "generator_version": GENERATOR_VERSION,
                "seed": s.seed, "dims": list(s.dims), "stats_batch_size": s.stats_batch_size,
                **({"overrides": dict(s.pool_overrides)} if s.pool_overrides else {})}

    def make(resume: bool) -> None:
        kwargs: dict = {} if s.stats_batch_size is None else {"stats_batch_size": s.stats_batch_size}
        kwargs.update(dict(s.pool_overrides))
        pool = synthesize_pool(s.pool_tables, seed=s.seed, dims=s.dims,
                               progress=lambda k: ctx.progress("pool tables", k, s.pool_tables), **kwargs)
        pool.save(str(ctx.out / "pool.json"))

    return ctx.stage("pool", settings, [], ["pool.json"], make)


def stage_split(ctx: Context, k_pool: str) -> str:
    """``train_pool.json`` and ``test_pool.json``: disjoint halves of the pool."""

    def make(resume: bool) -> None:
        train, test = split_pool(TablePool.load(str(ctx.out / "pool.json")), seed=ctx.suite.seed)
        train.save(str(ctx.out / "train_pool.json"))
        test.save(str(ctx.out / "test_pool.json"))

    return ctx.stage("split", {"seed": ctx.suite.seed}, [k_pool], ["train_pool.json", "test_pool.json"],
                     make)


def stage_tasks(ctx: Context, k_split: str, split: str) -> str:
    """``{split}_tasks.json``: tasks drawn from that split's pool. Train and test are separate stages, so
    raising ``--test-tasks`` neither retrains the policy nor re-measures the test tasks already done (the
    draws are sequential: the first N tasks are the same for any count >= N)."""
    s = ctx.suite
    n, seed_offset = (s.num_train_tasks, 0) if split == "train" else (s.num_test_tasks, 1)
    settings = {"num_tables": s.num_tables, "num_devices": s.num_devices,
                "device_memory": s.device_memory, "batch_size": s.batch_size, "tasks": n, "seed": s.seed}

    def make(resume: bool) -> None:
        pool = TablePool.load(str(ctx.out / f"{split}_pool.json"))
        if s.num_tables > len(pool.tables):
            raise AutoshardError(
                f"suite {s.name}: {s.num_tables} tables per task but the {split} pool has "
                f"{len(pool.tables)}; use a bigger pool (pool_tables >= {2 * s.num_tables})"
            )
        tasks = sample_tasks(pool, n, s.num_tables, (s.device_memory,) * s.num_devices,
                             seed=s.seed * 10 + seed_offset, batch_size=s.batch_size,
                             prefix=f"{s.name}-{split}")
        save_tasks(str(ctx.out / f"{split}_tasks.json"), tasks, settings)

    return ctx.stage(f"{split}_tasks", settings, [k_split], [f"{split}_tasks.json"], make)
