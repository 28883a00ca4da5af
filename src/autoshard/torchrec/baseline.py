"""TorchRec's own ``EmbeddingShardingPlanner`` as a baseline on an autoshard task.

The task's tables become an EmbeddingBagCollection on ``meta`` (nothing allocated, real row counts). TorchRec
plans it on a ``Topology`` of ``task.num_devices`` ranks whose per-device memory is ``task.device_memory``,
with its default proposers, perf model and GreedyPerfPartitioner, allowed ``table_wise`` and ``column_wise``
and the ``fused`` kernel only (what an autoshard plan can hold), and its plan is read back into a ``Plan``.

What is held equal, so the comparison is fair and TorchRec's plan passes ``autoshard.plan.validate``:

- Memory. TorchRec's default storage estimate of a training shard is its weights, optimizer state as TorchRec
  infers it from the sharder's fused_params (none by default, whatever the task says), plus input/output
  buffers; and HeuristicalStorageReservation keeps 15% of every device back. Measured with TorchRec 1.8 on a
  2-rank CPU topology at task batch 2048 (TorchRec's default enumerator, table_wise, fused): 100k x 64 rows,
  pooling 20: 1.033x our ``task.table_memory``; 1M x 64: 1.003x; 4M x 128: 1.001x; 10k x 16, pooling 10: 1.46x
  (~0.3-0.85 MB of buffers per table). Close for real tables, but with the 15% reserve TorchRec would refuse
  tasks autoshard places, and with optimizer state its plans could overflow the task. So every shard's storage
  here is exactly ``task.table_memory(table, shard_cols)`` (``TaskStorageEstimator``) and nothing is reserved
  (``FixedPercentageStorageReservation(0)``): both planners see the same capacity and the same sizes. The
  capacity goes to the tier the fused kernel uses: DDR for compute device ``cpu``, HBM for ``cuda``.
- Batch. ``task.batch_size`` is what each device's kernels process; TorchRec's ``batch_size`` is per rank and
  its kernels see ``batch_size x world_size`` under table-wise sharding, so it gets ``ceil(batch_size / D)``.
- Pooling. Each table's ``pooling_factor`` is passed as TorchRec's ``pooling_factors`` constraint.
- Names. Table (and feature) names are the task's, so TorchRec's plan is keyed by them.

A column-wise split TorchRec makes with two non-adjacent column blocks on one rank cannot be held by a Plan;
that table is then constrained to ``table_wise`` and TorchRec plans again (``MAX_REPLANS`` times at most).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any

from autoshard.errors import AutoshardError, InfeasibleError, PlanError
from autoshard.plan import Plan, ShardingType
from autoshard.planners.base import PlannerOptions
from autoshard.tasks import Task

logger = logging.getLogger(__name__)

ALLOWED_SHARDING_TYPES = (ShardingType.TABLE_WISE.value, ShardingType.COLUMN_WISE.value)
"""What a Plan can hold; TorchRec's row_wise, table_row_wise, grid_shard and data_parallel are not offered."""

MAX_REPLANS = 3
"""Re-plans after forcing tables whose column shards TorchRec split non-adjacently onto one rank to
table_wise."""

COMPUTE_DEVICES = ("cpu", "cuda")


@dataclass(frozen=True)
class TorchRecBaselineConfig:
    """Settings of the TorchRec baseline."""

    compute_device: str = "cpu"
    """TorchRec's compute device; it picks the perf model's bandwidths and which memory tier holds the
    shards."""
    sharding_types: tuple[str, ...] = ALLOWED_SHARDING_TYPES
    """Sharding types TorchRec may use (a subset of table_wise, column_wise)."""
    min_partition: int | None = None
    """Smallest column-wise shard width TorchRec may use (None: TorchRec's default, 128 columns)."""
    timeout_seconds: int | None = None
    """TorchRec planner time limit (None: no limit)."""


def make_topology(task: Task, compute_device: str = "cpu") -> Any:
    """A TorchRec Topology with one device per task device, each with the task's memory in the fused tier."""
    from torchrec.distributed.planner.types import (
        CustomTopologyData,
        KernelConfig,
        TopologyFactory,
        TrainerConfig,
    )

    if compute_device not in COMPUTE_DEVICES:
        raise AutoshardError(f"compute device {compute_device!r} unknown; "
                             f"use one of {', '.join(COMPUTE_DEVICES)}")
    caps = [int(m) for m in task.device_memory]
    data = {"hbm_cap": caps}
    if compute_device == "cpu":
        data["ddr_cap"] = caps
    custom = CustomTopologyData(data, task.num_devices)
    trainer = TrainerConfig(world_size=task.num_devices, local_world_size=task.num_devices,
                            additional_params={"custom_topology_data": custom})
    return TopologyFactory.create_topology(trainer, kernel_config=KernelConfig(compute_device=compute_device))


def per_rank_batch(task: Task) -> int:
    """TorchRec's per-rank batch for kernels that process ``task.batch_size`` (see the module docstring)."""
    return math.ceil(task.batch_size / task.num_devices)


class TaskStorageEstimator:
    """A TorchRec ShardEstimator giving every shard the task's own memory size (weights + optimizer state)."""

    def __init__(self, task: Task, compute_device: str) -> None:
        self._tables = {t.name: t for t in task.tables}
        self._task = task
        self._cpu = compute_device == "cpu"

    def estimate(self, sharding_options: list, sharder_data_map: Any = None) -> None:
        from torchrec.distributed.planner.types import Storage

        for option in sharding_options:
            table = self._tables[option.name]
            for shard in option.shards:
                need = self._task.table_memory(table, int(shard.size[1]))
                shard.storage = Storage(hbm=0, ddr=need) if self._cpu else Storage(hbm=need, ddr=0)


def torchrec_constraints(
    task: Task, config: TorchRecBaselineConfig, table_wise_only: set[str]
) -> dict[str, Any]:
    """TorchRec ParameterConstraints per table: allowed sharding types, fused kernel, pooling factor."""
    from torchrec.distributed.planner.types import ParameterConstraints

    from autoshard.torchrec.export import FUSED_KERNEL

    return {
        t.name: ParameterConstraints(
            sharding_types=[ShardingType.TABLE_WISE.value] if t.name in table_wise_only else list(
                config.sharding_types),
            compute_kernels=[FUSED_KERNEL],
            min_partition=config.min_partition,
            pooling_factors=[float(t.pooling_factor)],
        )
        for t in task.tables
    }


def torchrec_sharding_plan(task: Task, config: TorchRecBaselineConfig, table_wise_only: set[str]) -> Any:
    """Run TorchRec's EmbeddingShardingPlanner on ``task``; returns its ShardingPlan."""
    from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder
    from torchrec.distributed.planner import EmbeddingShardingPlanner
    from torchrec.distributed.planner.constants import DEFAULT_PERF_ESTIMATOR
    from torchrec.distributed.planner.enumerators import EmbeddingEnumerator
    from torchrec.distributed.planner.estimator import EmbeddingPerfEstimatorFactory
    from torchrec.distributed.planner.storage_reservations import FixedPercentageStorageReservation
    from torchrec.distributed.planner.types import PlannerError

    from autoshard.torchrec.modules import build_ebc

    topology = make_topology(task, config.compute_device)
    batch = per_rank_batch(task)
    constraints = torchrec_constraints(task, config, table_wise_only)
    enumerator = EmbeddingEnumerator(
        topology=topology, batch_size=batch, constraints=constraints,
        estimator=[EmbeddingPerfEstimatorFactory.create(DEFAULT_PERF_ESTIMATOR, topology=topology,
                                                        constraints=constraints),
                   TaskStorageEstimator(task, config.compute_device)],
    )
    planner = EmbeddingShardingPlanner(
        topology=topology, batch_size=batch, enumerator=enumerator,
        storage_reservation=FixedPercentageStorageReservation(0.0), constraints=constraints, debug=False,
        stats=[], timeout_seconds=config.timeout_seconds,
    )
    try:
        return planner.plan(build_ebc(task, device="meta"), [EmbeddingBagCollectionSharder()])
    except PlannerError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise InfeasibleError(f"torchrec planner found no plan: {first[:300]}; give more memory or devices") \
            from None


class TorchRecPlanner:
    """``--algo torchrec``: TorchRec's EmbeddingShardingPlanner on the task, its plan read back."""

    name = "torchrec"

    def __init__(self, config: TorchRecBaselineConfig | None = None) -> None:
        self.config = config or TorchRecBaselineConfig()
        # Import TorchRec now (seconds) so run_planner's planning time is TorchRec's planning, not its import.
        import torchrec.distributed.planner  # noqa: F401

        bad = [s for s in self.config.sharding_types if s not in ALLOWED_SHARDING_TYPES]
        if bad or not self.config.sharding_types:
            raise AutoshardError(f"sharding types {list(self.config.sharding_types)}: use a non-empty "
                                 f"subset of {list(ALLOWED_SHARDING_TYPES)}")

    def plan(self, task: Task) -> Plan:
        from autoshard.torchrec.export import from_sharding_plan, placement_from_parameter_sharding

        table_wise_only: set[str] = set()
        for _ in range(MAX_REPLANS + 1):
            sharding_plan = torchrec_sharding_plan(task, self.config, table_wise_only)
            module_plan = next(iter(sharding_plan.plan.values()))
            split = set()
            for name, ps in module_plan.items():
                try:
                    placement_from_parameter_sharding(name, ps)
                except PlanError:
                    if ps.sharding_type != ShardingType.COLUMN_WISE.value:
                        raise
                    split.add(name)
            if not split:
                return from_sharding_plan(sharding_plan, task, algorithm=self.name)
            logger.info("torchrec put non-adjacent column shards of %s on one rank; "
                        "re-planning them table_wise", sorted(split))
            table_wise_only |= split
        raise PlanError(f"torchrec kept splitting tables {sorted(table_wise_only)} into column shards "
                        "autoshard cannot hold; plan with sharding_types=('table_wise',)")


def torchrec_planner(options: PlannerOptions) -> TorchRecPlanner:
    """Registry factory; ``options.extra`` may set compute_device, sharding_types, min_partition,
    timeout_seconds. ``options.time_limit_s`` is not applied: TorchRec's planner has no anytime result."""
    extra = dict(options.extra)
    known = {"compute_device", "sharding_types", "min_partition", "timeout_seconds"}
    unknown = sorted(set(extra) - known)
    if unknown:
        raise AutoshardError(f"torchrec planner: unknown setting {unknown[0]!r}; "
                             f"known: {', '.join(sorted(known))}")
    st = extra.get("sharding_types", ALLOWED_SHARDING_TYPES)
    if isinstance(st, str):
        st = tuple(s.strip() for s in st.split(",") if s.strip())
    return TorchRecPlanner(TorchRecBaselineConfig(
        compute_device=str(extra.get("compute_device", "cpu")),
        sharding_types=tuple(st),
        min_partition=int(extra["min_partition"]) if extra.get("min_partition") is not None else None,
        timeout_seconds=int(extra["timeout_seconds"]) if extra.get("timeout_seconds") is not None else None,
    ))
