"""The named benchmark suites (``autoshard.pipeline.suite.Suite``: which tasks are sampled, how plans are
measured, and how the models are trained).

The "DLRM-T (D)" suites follow DreamShard (NeurIPS 2022, Sec. 5): disjoint train and test table pools,
tasks of T tables sampled from a pool onto D devices with 5 GB each. The paper uses 428-table pools and 50
test tasks on GPUs at batch 65536; a CPU run here times every kernel for real, so the suites keep fewer test
tasks and a smaller batch (``FULL_*`` sizes in ``autoshard.pipeline.suite``), which the report states. Where
T average tables cannot fit on D devices of 5 GB, the device memory is raised (``suite_device_memory``).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from autoshard.errors import AutoshardError
from autoshard.pipeline.suite import EvalConfig, Suite, TrainingConfig
from autoshard.tasks import DREAMSHARD_DEVICE_MEMORY

SUITE_TABLE_COUNTS = (10, 20, 50, 100)
"""T of DreamShard's DLRM-T (D) tasks (paper Tables 1-2)."""
SUITE_DEVICE_COUNTS = (2, 4, 8)
"""D of DreamShard's DLRM-T (D) tasks."""

PUBLISHED_ROWS_MEAN = 4_107_470
"""Mean rows of the dlrm_datasets tables (shared/data/dlrm_datasets/feature_stats.json), which the synthetic
pool matches: a dim-16 fp32 table so averages ~263 MB."""
MEMORY_HEADROOM = 1.5
"""A suite's device memory is at least this many times the average per-device table bytes, so that sampled
tasks are feasible (DreamShard's 5 GB cannot hold 100 average tables on 2 devices)."""


def suite_device_memory(num_tables: int, num_devices: int, dim: int = 16) -> int:
    """DreamShard's 5 GB per device, raised (in whole GB) where T tables on D devices would not fit."""
    need = MEMORY_HEADROOM * num_tables * PUBLISHED_ROWS_MEAN * dim * 4 / num_devices
    return max(DREAMSHARD_DEVICE_MEMORY, math.ceil(need / 1e9) * 10**9)


def _dlrm(t: int, d: int) -> Suite:
    mem = suite_device_memory(t, d)
    return Suite(
        name=f"dlrm-{t}-{d}", num_tables=t, num_devices=d, device_memory=mem,
        description=f"DLRM-{t} ({d}): {t} tables sampled from the held-out pool onto {d} devices of "
                    f"{mem // 10**9} GB",
    )


QUICK = Suite(
    name="quick", num_tables=10, num_devices=2, num_test_tasks=4, num_train_tasks=10, pool_tables=60,
    batch_size=512, time_limit_s=2.0,
    description="CI-sized: DLRM-10 (2) at batch 512, 4 test tasks, kernels timed with <= 200k rows a table",
    eval=EvalConfig(rounds=3, warmup=1, repeats=3, rows_cap=200_000),
    training=TrainingConfig(profile_samples=60, profile_max_tables=6, cost_epochs=300, policy_iterations=100,
                            refresh_rounds=2, refresh_tasks=2, cost_base="default"),
)
"""Sized for the quickstart: the whole pipeline in a few minutes on 2 CPU cores: 60 shards profiled here, the
shipped model fine-tuned on them (NeuroShard's pre-train, then adapt: a model fitted on 60 shards alone ranked
the quick tasks' near-equal heuristic plans by chance), and two rounds of DreamShard's refresh loop (the
learned planners' devices of 2 train tasks measured, added to the profile, the model fine-tuned again)."""

TINY = Suite(
    name="tiny", num_tables=6, num_devices=2, num_test_tasks=2, num_train_tasks=4, pool_tables=20,
    batch_size=64, time_limit_s=0.5, stats_batch_size=1024,
    description="test-sized: DLRM-6 (2) at batch 64, 2 test tasks, kernels timed with <= 5k rows a table",
    eval=EvalConfig(rounds=2, warmup=1, repeats=2, rows_cap=5_000),
    training=TrainingConfig(profile_samples=12, profile_max_tables=3, cost_epochs=20, policy_iterations=1,
                            cost_ensemble=2),
)
"""For the tests: seconds end to end."""

OVERSIZE = Suite(
    name="oversize-22-8", num_tables=22, num_devices=8, device_memory=16 * 10**9, dims=(128,),
    num_test_tasks=10, pool_tables=160, pool_overrides=(("rows_mean", 5.0e6), ("rows_std", 1.0e7)),
    description="22 dim-128 tables (rows gamma mean 5M, std 10M: 8 of the first 10 test tasks hold a "
                "32-46M-row table of 16-24 GB) onto 8 devices of 16 GB: tables larger than a device, "
                "split by rows",
)
"""The production shape of the row-wise issue: TorchRec plans such tasks; a table-wise planner cannot."""

PRODUCTION = Suite(
    name="production-40-8", num_tables=40, num_devices=8, device_memory=24 * 10**9, dims=(32, 64, 128, 256),
    pool_tables=200, pool_overrides=(("rows_mean", 3.0e6), ("rows_std", 8.0e6), ("pooling_mean", 30.0),
                                     ("pooling_std", 35.0)),
    description="40 tables of dims 32-256 (rows gamma mean 3M, std 8M: a few of 10M+ rows; multi-hot pooling "
                "gamma mean 30, std 35: up to 100+) onto 8 devices of 24 GB",
)
"""The cost-model issue's production shape: what a recommender of today holds, far from DreamShard's dim-16
tables (a model trained on those prices most of its devices by the analytical fallback)."""

SUITES: dict[str, Suite] = {
    "quick": QUICK,
    "tiny": TINY,
    "oversize-22-8": OVERSIZE,
    "production-40-8": PRODUCTION,
    **{f"dlrm-{t}-{d}": _dlrm(t, d) for t in SUITE_TABLE_COUNTS for d in SUITE_DEVICE_COUNTS},
}


def get_suite(name: str) -> Suite:
    """The suite called ``name``; AutoshardError listing the valid names otherwise."""
    if name not in SUITES:
        raise AutoshardError(f"unknown suite {name!r}; choose one of: {', '.join(SUITES)}")
    return SUITES[name]


def with_overrides(config: Any, **changes: Any) -> Any:
    """A copy of a suite (or its eval/training config) with the given fields changed (None values ignored)."""
    return replace(config, **{k: v for k, v in changes.items() if v is not None})
