"""Benchmark suites: which tasks are sampled, how plans are measured, and how the models are trained.

The "DLRM-T (D)" suites follow DreamShard (NeurIPS 2022, Sec. 5): disjoint train and test table pools,
tasks of T tables sampled from a pool onto D devices with 5 GB each. The paper uses 428-table pools and 50
test tasks on GPUs at batch 65536; a CPU run here times every kernel for real, so the suites keep fewer test
tasks and a smaller batch (sizes in the constants below), which the report states. Where T average tables
cannot fit on D devices of 5 GB, the device memory is raised (``suite_device_memory``).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from autoshard.errors import AutoshardError
from autoshard.tasks import DEFAULT_BATCH_SIZE, DREAMSHARD_DEVICE_MEMORY

SUITE_TABLE_COUNTS = (10, 20, 50, 100)
"""T of DreamShard's DLRM-T (D) tasks (paper Tables 1-2)."""
SUITE_DEVICE_COUNTS = (2, 4, 8)
"""D of DreamShard's DLRM-T (D) tasks."""

FULL_POOL_TABLES = 400
"""Tables in a full suite's synthetic pool, split 200/200: a test pool of 200 tables still gives DLRM-100
tasks that differ (DreamShard's real pool has 856 tables, 428/428)."""
FULL_TEST_TASKS = 10
"""Test tasks per full suite (DreamShard: 50). Every plan of every task is timed on real kernels, several
times, on one CPU core, so 10 keeps a DLRM-100 (8) suite near ten minutes here."""
FULL_TRAIN_TASKS = 50
"""Train tasks per full suite, as DreamShard."""

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


@dataclass(frozen=True)
class TrainingConfig:
    """How the cost model and the policy are trained when the caller does not bring checkpoints."""

    profile_samples: int = 200
    """Random shards (sets of tables from the train pool) timed on real kernels for the cost dataset."""
    profile_max_tables: int = 8
    """Most tables in one profiled shard."""
    cost_epochs: int = 800
    """Most training epochs of the learned cost model (early stopping usually ends it near 100)."""
    policy_iterations: int = 300
    """RL iterations (each collects episodes on the train tasks, then updates the policy): ~1 min for
    DLRM-20 (4) on this CPU. (Until stop 10 this was 10, which left the policy barely trained.)"""
    extra: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)
    """Passed through to the training stages by name (e.g. a learning rate), for experiments."""


@dataclass(frozen=True)
class EvalConfig:
    """How plans are measured. Real timings on a shared 2-vCPU host drift, so every algorithm's plan of one
    task is timed back-to-back, the whole round repeated, and the median per device component is kept."""

    rounds: int = 3
    """Rounds of timing all plans of a task (plan order rotated each round); the median round is reported."""
    warmup: int = 2
    """Untimed kernel iterations before each timing (MeasureSettings.warmup)."""
    repeats: int = 5
    """Timed kernel iterations per measurement (MeasureSettings.repeats)."""
    rows_cap: int = 1_000_000
    """Most rows a table keeps when timed (MeasureSettings.rows_cap: bigger tables fold their lookups into
    this many rows), so a 5 GB table does not need 5 GB of host RAM."""


@dataclass(frozen=True)
class Suite:
    """One benchmark set-up: a synthetic table pool, train/test tasks sampled from its disjoint halves,
    the algorithms' budgets, and how plans are measured."""

    name: str
    num_tables: int
    """T: tables per task."""
    num_devices: int
    """D: devices per task."""
    num_test_tasks: int = FULL_TEST_TASKS
    """Held-out tasks every algorithm plans and that are measured."""
    num_train_tasks: int = FULL_TRAIN_TASKS
    """Tasks (from the train pool) the policy trains on."""
    pool_tables: int = FULL_POOL_TABLES
    """Tables in the synthetic pool, split half/half into train and test pools."""
    device_memory: int = DREAMSHARD_DEVICE_MEMORY
    """Bytes per device (DreamShard: 5 GB)."""
    batch_size: int = DEFAULT_BATCH_SIZE
    """Batch the embedding kernels of every device process."""
    seed: int = 0
    """Seed of the pool, the split, the task samples and every seeded planner."""
    time_limit_s: float = 10.0
    """Wall-time budget of the searching planners (search, neuroshard, ilp) per task."""
    dims: tuple[int, ...] = (16,)
    """Embedding dims of the synthetic tables (DreamShard: 16 for all)."""
    stats_batch_size: int | None = None
    """Batch the synthetic tables' access bins are computed at (None = the generator's default, the published
    65536); smaller is faster but shifts the bins, so only the test-sized suite lowers it."""
    description: str = ""
    eval: EvalConfig = EvalConfig()
    training: TrainingConfig = TrainingConfig()

    def settings(self) -> dict[str, Any]:
        """Every field as plain JSON (recorded in the outputs, hashed for caching)."""
        return json.loads(json.dumps(asdict(self), default=str))

    def settings_hash(self, *parts: str) -> str:
        """Short hash of the suite's settings and any extra parts (e.g. a checkpoint path)."""
        blob = json.dumps([self.settings(), *parts], sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:12]


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
    training=TrainingConfig(profile_samples=60, profile_max_tables=6, cost_epochs=300, policy_iterations=100),
)
"""Sized for the quickstart: the whole pipeline in a few minutes on 2 CPU cores."""

TINY = Suite(
    name="tiny", num_tables=6, num_devices=2, num_test_tasks=2, num_train_tasks=4, pool_tables=20,
    batch_size=64, time_limit_s=0.5, stats_batch_size=1024,
    description="test-sized: DLRM-6 (2) at batch 64, 2 test tasks, kernels timed with <= 5k rows a table",
    eval=EvalConfig(rounds=2, warmup=1, repeats=2, rows_cap=5_000),
    training=TrainingConfig(profile_samples=12, profile_max_tables=3, cost_epochs=20, policy_iterations=1),
)
"""For the tests: seconds end to end."""

SUITES: dict[str, Suite] = {
    "quick": QUICK,
    "tiny": TINY,
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
