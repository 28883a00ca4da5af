"""What a pipeline run does: the tasks it samples, how it trains the models, and how it measures plans.

``autoshard.bench.suites`` names the suites (quick, tiny, the DreamShard DLRM-T (D) grid); a ``Suite`` is
plain settings, recorded in the outputs and hashed into the stage keys.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

from autoshard.hardware.evaluator import DEFAULT_ROUND_STATISTIC
from autoshard.tasks import DEFAULT_BATCH_SIZE, DREAMSHARD_DEVICE_MEMORY

FULL_POOL_TABLES = 400
"""Tables in a full suite's synthetic pool, split 200/200: a test pool of 200 tables still gives DLRM-100
tasks that differ (DreamShard's real pool has 856 tables, 428/428)."""
FULL_TEST_TASKS = 10
"""Test tasks per full suite (DreamShard: 50). Every plan of every task is timed on real kernels, several
times, on one CPU core, so 10 keeps a DLRM-100 (8) suite near ten minutes here."""
FULL_TRAIN_TASKS = 50
"""Train tasks per full suite, as DreamShard."""


@dataclass(frozen=True)
class TrainingConfig:
    """How the cost model and the policy are trained when the caller does not bring checkpoints."""

    profile_samples: int = 200
    """Random shards (sets of tables from the train pool) timed on real kernels for the cost dataset."""
    profile_max_tables: int = 8
    """Most tables in one profiled shard."""
    cost_epochs: int = 800
    """Most training epochs of the learned cost model (early stopping usually ends it near 100)."""
    cost_ensemble: int = 5
    """Networks in the cost model's ensemble (each on its own bootstrap): their disagreement is the spread the
    learned planners' guard (``planners.guard``) and risk pricing need. 1: one network (spread only where the
    analytical fallback prices a device outside the training support)."""
    cost_base: str | None = None
    """A pre-trained cost model checkpoint ('default': the shipped one) that the run fine-tunes on its own
    profile (``costs.learned.fine_tune``; again on the grown profile in every refresh round) instead of
    fitting a model from scratch. Where that checkpoint describes other hardware or measure settings, the run
    fits from scratch and says so. None: fit from scratch."""
    policy_iterations: int = 300
    """RL iterations (each collects episodes on the train tasks, then updates the policy): ~1 min for
    DLRM-20 (4) on this CPU. (Until stop 10 this was 10, which left the policy barely trained.)"""
    refresh_rounds: int = 0
    """Rounds of DreamShard's loop after the first training (``pipeline.refresh_stage``): the learned planners
    plan ``refresh_tasks`` train tasks, their devices are measured and added to the profile, the cost model is
    refit and the policy retrained; the bench then plans with the refreshed models. 0: no loop."""
    refresh_tasks: int = 2
    """Train tasks planned and measured in every refresh round, fresh ones each round (the next of the train
    split, wrapping), so each round's error is on tasks the model was not tuned on
    (``refresh_stage.round_tasks``)."""
    refresh_budget_s: float = 1800.0
    """No refresh round starts after this many seconds of the loop (the round under way finishes)."""
    extra: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)
    """Passed through to the training stages by name (e.g. a learning rate), for experiments."""


@dataclass(frozen=True)
class EvalConfig:
    """How plans are measured. Real timings on a shared 2-vCPU host drift, so every algorithm's plan of one
    task is timed back-to-back, the whole round repeated, and the rounds reduced per device component by
    ``round_statistic``."""

    rounds: int = 3
    """Rounds of timing all plans of a task (plan order rotated each round)."""
    round_statistic: str = DEFAULT_ROUND_STATISTIC
    """How a device's rounds become its cost: 'min' (contention only adds time; measured to cut the noise
    between devices by a third or more against the median: ``hardware.evaluator.DEFAULT_ROUND_STATISTIC``)
    or 'median' (the bench's statistic before stop 22)."""
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
    pool_overrides: tuple[tuple[str, float], ...] = ()
    """Synthetic-generator settings other than the published ones (``SynthConfig`` fields, e.g. a larger
    ``rows_mean`` for tables larger than a device)."""
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
