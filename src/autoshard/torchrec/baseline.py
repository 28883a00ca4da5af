"""TorchRec's own ``EmbeddingShardingPlanner`` as a baseline on an autoshard task.

The task's tables become an EmbeddingBagCollection on ``meta`` (nothing allocated, real row counts). TorchRec
plans it on a ``Topology`` of ``task.num_devices`` ranks on one host whose per-device memory is
``task.device_memory``, with its default proposers, perf model and GreedyPerfPartitioner, and its plan is read
back into a ``Plan`` (``autoshard.torchrec.export.from_sharding_plan``).

What TorchRec is offered: every sharding type a Plan can hold and autoshard's step model prices, with the
``fused`` kernel (``dense`` for data_parallel), less what TorchRec's sharder does not propose on the compute
device or the task cannot express. Checked with TorchRec 1.8 (``EmbeddingBagCollectionSharder``):

- ``table_wise``, ``column_wise``: proposed on ``cpu`` and ``cuda`` topologies, ``fused`` kernel.
- ``data_parallel``: proposed on both, but only with the ``dense`` kernel (the sharder lists no other for it;
  constrained to ``fused`` alone TorchRec finds no option for the table). So every table's constraint allows
  ``fused`` and ``dense``; TorchRec's kernel filter keeps ``fused`` for the sharded types (where ``dense`` is
  not offered) and ``dense`` for data_parallel, which is what ``to_sharding_plan`` writes back.
- ``row_wise``: TorchRec's sharder proposes it on ``cuda`` only: its ``sharding_types("cpu")`` leaves the
  row-based types out (TorchRec issue 1252: gloo lacked reduce-scatter then), so its enumerator never builds
  a row-wise option on a ``cpu`` topology. That is a statement about TorchRec's CPU runtime of old, not about
  its planner (whose perf model and partitioners price row_wise on any device), and autoshard measures row
  shards on CPU (and DMP runs TorchRec's row_wise on gloo today: tests/test_torchrec_verify_timing.py). So the
  baseline plans with ``BaselineSharder``, TorchRec's sharder that also proposes row_wise on ``cpu``.
  Without it TorchRec could not plan a task whose table is larger than a device on ``cpu`` unless that
  table's column blocks fit (production-40-8 at stop 16: no plan on any task). But TorchRec's perf model
  prices row_wise for NCCL, not for gloo on CPU, where this host's reduce-scatter runs 2.7-3.5x an all-to-all
  of the same bytes (stop 44): offered row_wise for every table, it row-split 9.7 of DLRM-10 (8)'s 10 tables a
  plan and measured 1.56x the best heuristic, where TorchRec's own cpu sharder measured 1.003x (stop 45,
  docs/benchmarks.md). So ``TorchRecBaselineConfig.cpu_row_wise`` is ``"auto"`` by default: on ``cpu``
  row_wise is offered only to the tables larger than every device (TorchRec's own sharder for the rest),
  and to every table when TorchRec finds no plan so (memory it cannot pack with whole tables and column
  splits; one oversize-22-8 task of ten at stop 46: the plan a user who turned row_wise on would get);
  ``True`` offers it to every table, ``False`` is TorchRec's sharder as it is (no row_wise on ``cpu``).
- ``table_row_wise``: not offered. It splits rows over the ranks of one host and needs a topology with hosts
  (``local_world_size < world_size``); a task has no host grouping, so its topology is one host, where
  TorchRec's table_row_wise is row_wise over all ranks under another name.
- ``table_column_wise`` and ``grid_shard`` are not offered: a Plan cannot hold them.

``column_wise`` is offered only for tables whose dim is a multiple of ``COLUMN_SHARD_MULTIPLE``: TorchRec cuts
columns into blocks of a multiple of 4 or leaves the table one block, which a Plan holds only if its dim is a
multiple of 4.

A table larger than any device is handed to TorchRec whole (``TorchRecPlanner.plans_rows``: ``run_planner``
does not cut it into row pieces first), so TorchRec splits it its own way: row_wise or column_wise.

What is held equal, so the comparison is fair and TorchRec's plan passes ``autoshard.plan.validate``:

- Column splits. autoshard's planners split columns in multiples of ``COLUMN_SHARD_MULTIPLE`` (4); TorchRec's
  ``min_partition`` (smallest column block; TorchRec's default is 128, so a table of dim < 256 is never split)
  defaults here to the same 4. ``min_partition`` may be set (e.g. 128 for TorchRec's own default).
- Memory. TorchRec's default storage estimate of a training shard is its weights, optimizer state as TorchRec
  infers it from the sharder's fused_params (none by default, whatever the task says), plus input/output
  buffers; and HeuristicalStorageReservation keeps 15% of every device back. Measured with TorchRec 1.8 on a
  2-rank CPU topology at task batch 2048 (TorchRec's default enumerator, table_wise, fused): 100k x 64 rows,
  pooling 20: 1.033x our ``task.table_memory``; 1M x 64: 1.003x; 4M x 128: 1.001x; 10k x 16, pooling 10: 1.46x
  (~0.3-0.85 MB of buffers per table). Close for real tables, but with the 15% reserve TorchRec would refuse
  tasks autoshard places, and with optimizer state its plans could overflow the task. So every shard's storage
  here is exactly ``task.table_memory(table, shard_cols, shard_rows)`` (``TaskStorageEstimator``; a row shard
  holds fewer rows, a data_parallel replica the whole table) and nothing is reserved
  (``FixedPercentageStorageReservation(0)``): both planners see the same capacity and the same sizes. The
  capacity goes to the tier the fused kernel uses: DDR for compute device ``cpu``, HBM for ``cuda``.
- Batch. ``task.batch_size`` is what each device's kernels process; TorchRec's ``batch_size`` is per rank and
  its kernels see ``batch_size x world_size`` under table-, column- and row-wise sharding (a data_parallel
  replica sees its rank's ``batch_size``, as autoshard prices it), so it gets ``ceil(batch_size / D)``.
- Pooling. Each table's ``pooling_factor`` is passed as TorchRec's ``pooling_factors`` constraint.
- Names. Table (and feature) names are the task's, so TorchRec's plan is keyed by them.
- Order. A table's options are enumerated in the order the sharder lists its sharding types and kernels
  (``sharder_order_enumerator``), not in the set order TorchRec's enumerator leaves them in, which follows
  Python's string hashing: so the baseline is one plan per task in every process.

A column-wise split TorchRec makes with two non-adjacent column blocks on one rank cannot be held by a Plan;
that table is then no longer offered ``column_wise`` (its other offered types stay) and TorchRec plans again
(``MAX_REPLANS`` times at most).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, replace
from typing import Any

from autoshard.errors import AutoshardError, InfeasibleError, PlanError
from autoshard.plan import COLUMN_SHARD_MULTIPLE, Plan, ShardingType
from autoshard.planners.base import PlannerOptions, parse_setting
from autoshard.tasks import Task

logger = logging.getLogger(__name__)

ALLOWED_SHARDING_TYPES = (ShardingType.TABLE_WISE.value, ShardingType.COLUMN_WISE.value,
                          ShardingType.ROW_WISE.value, ShardingType.DATA_PARALLEL.value)
"""What TorchRec may be offered (and is, by default): a Plan's types less table_row_wise (the task has no
hosts; see the module docstring)."""

NOT_OFFERED = {
    ShardingType.TABLE_ROW_WISE.value: "a task has no host grouping; on its one-host topology TorchRec's "
                                       "table_row_wise is row_wise",
}
"""Sharding types a Plan can hold that the baseline does not offer, and why."""

DEFAULT_MIN_PARTITION = COLUMN_SHARD_MULTIPLE
"""Smallest column block TorchRec may cut: autoshard's column-shard multiple, not TorchRec's 128."""

MAX_REPLANS = 3
"""Re-plans after no longer offering column_wise to tables whose column shards TorchRec split non-adjacently
onto one rank."""

COMPUTE_DEVICES = ("cpu", "cuda")


AUTO = "auto"
"""``TorchRecBaselineConfig.cpu_row_wise``'s default: row_wise on cpu only where a table fits no device,
and for every table when TorchRec finds no plan without it (``TorchRecPlanner.plan``)."""


@dataclass(frozen=True)
class TorchRecBaselineConfig:
    """Settings of the TorchRec baseline."""

    compute_device: str = "cpu"
    """TorchRec's compute device; it picks the perf model's bandwidths and which memory tier holds the
    shards."""
    sharding_types: tuple[str, ...] = ALLOWED_SHARDING_TYPES
    """Sharding types TorchRec may use (a subset of ``ALLOWED_SHARDING_TYPES``; those TorchRec does not
    propose on the compute device are dropped, e.g. row_wise on cpu)."""
    min_partition: int | None = DEFAULT_MIN_PARTITION
    """Smallest column-wise shard width TorchRec may use (None: TorchRec's default, 128 columns)."""
    timeout_seconds: int | None = None
    """TorchRec planner time limit (None: no limit)."""
    cpu_row_wise: bool | str = AUTO
    """Row_wise on a ``cpu`` topology (``BaselineSharder``): ``"auto"`` for the tables larger than every
    device only (for every table if TorchRec then finds no plan), True for every table, False never
    (TorchRec's sharder as it is, which proposes it on ``cuda`` only). The module docstring says why
    ``"auto"``."""

    @property
    def proposes_cpu_row_wise(self) -> bool:
        """Whether the sharder proposes row_wise on cpu at all (``"auto"`` then narrows it per table)."""
        return self.cpu_row_wise is not False


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
    """A TorchRec ShardEstimator giving every shard the task's own memory size (weights + optimizer state) for
    its rows and columns."""

    def __init__(self, task: Task, compute_device: str) -> None:
        self._tables = {t.name: t for t in task.tables}
        self._task = task
        self._cpu = compute_device == "cpu"

    def estimate(self, sharding_options: list, sharder_data_map: Any = None) -> None:
        from torchrec.distributed.planner.types import Storage

        for option in sharding_options:
            table = self._tables[option.name]
            for shard in option.shards:
                need = self._task.table_memory(table, int(shard.size[1]), int(shard.size[0]))
                shard.storage = Storage(hbm=0, ddr=need) if self._cpu else Storage(hbm=need, ddr=0)


def baseline_sharder(cpu_row_wise: bool = True) -> Any:
    """TorchRec's EmbeddingBagCollectionSharder; with ``cpu_row_wise`` one that also proposes row_wise on a
    ``cpu`` topology (the module docstring says why)."""
    from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder

    if not cpu_row_wise:
        return EmbeddingBagCollectionSharder()

    class BaselineSharder(EmbeddingBagCollectionSharder):
        """TorchRec's sharder, proposing row_wise on cpu as on cuda (same fused kernel)."""

        def sharding_types(self, compute_device_type: str) -> list[str]:
            types = list(super().sharding_types(compute_device_type))
            if compute_device_type == "cpu" and ShardingType.ROW_WISE.value not in types:
                types.append(ShardingType.ROW_WISE.value)
            return types

    return BaselineSharder()


def proposed_sharding_types(compute_device: str, cpu_row_wise: bool = True) -> tuple[str, ...]:
    """Sharding types the baseline's sharder (``baseline_sharder``) proposes on ``compute_device`` (of those
    a Plan can hold)."""
    proposed = set(baseline_sharder(cpu_row_wise).sharding_types(compute_device))
    return tuple(t.value for t in ShardingType if t.value in proposed)


def offered_sharding_types(config: TorchRecBaselineConfig) -> tuple[str, ...]:
    """``config.sharding_types`` that TorchRec proposes on ``config.compute_device``; AutoshardError if
    none."""
    proposed = proposed_sharding_types(config.compute_device, config.proposes_cpu_row_wise)
    offered = tuple(t for t in config.sharding_types if t in proposed)
    if not offered:
        raise AutoshardError(f"TorchRec proposes none of {list(config.sharding_types)} on compute device "
                             f"{config.compute_device!r} (it proposes {', '.join(proposed)}); offer one of "
                             "those, or plan with compute_device=cuda or cpu_row_wise=true for row_wise")
    return offered


def _table_types(offered: tuple[str, ...], dim: int, no_column_wise: bool) -> list[str]:
    types = [t for t in offered if t != ShardingType.COLUMN_WISE.value
             or not no_column_wise and dim % COLUMN_SHARD_MULTIPLE == 0]
    return types or [ShardingType.TABLE_WISE.value]


def torchrec_constraints(
    task: Task, config: TorchRecBaselineConfig, no_column_wise: set[str]
) -> dict[str, Any]:
    """TorchRec ParameterConstraints per table: offered sharding types (column_wise not for tables in
    ``no_column_wise`` nor of a dim it cannot split in multiples of 4; on cpu with ``cpu_row_wise`` "auto",
    row_wise only for a table larger than every device), kernels, min_partition, pooling."""
    from torchrec.distributed.planner.types import ParameterConstraints

    from autoshard.torchrec.export import DENSE_KERNEL, FUSED_KERNEL

    offered = offered_sharding_types(config)
    row_wise_where_needed = config.compute_device == "cpu" and config.cpu_row_wise == AUTO
    largest_device = max(task.device_memory)
    constraints = {}
    for t in task.tables:
        types = _table_types(offered, t.dim, t.name in no_column_wise)
        if row_wise_where_needed and task.table_memory(t) <= largest_device:
            types = [st for st in types if st != ShardingType.ROW_WISE.value] or types
        # one list for all the table's types: TorchRec keeps of it what the sharder lists for each type
        # (fused for the sharded types, dense for data_parallel)
        kernels = sorted({DENSE_KERNEL if ShardingType(st).replicates else FUSED_KERNEL for st in types})
        constraints[t.name] = ParameterConstraints(sharding_types=types, compute_kernels=kernels,
                                                   min_partition=config.min_partition,
                                                   pooling_factors=[float(t.pooling_factor)])
    return constraints


def sharder_order_enumerator(**kwargs: Any) -> Any:
    """TorchRec's EmbeddingEnumerator (``kwargs`` are its own), keeping each table's sharding types and
    kernels in the order the sharder lists them.

    TorchRec's enumerator intersects a table's constrained sharding types (and kernels) with the sharder's as
    Python sets and enumerates the result in set order, which follows the interpreter's string hashing
    (``PYTHONHASHSEED``, random per process). The order of the options decides which proposals TorchRec's
    proposers try and which of equally priced plans it keeps, so the same task got other plans in other
    processes (3 of DLRM-10 (4)'s 10 test tasks, two variants over four seeds; docs/benchmarks.md, "Stop
    72"). In the sharder's order the baseline is one plan per task, whatever the process."""
    from torchrec.distributed.planner.enumerators import EmbeddingEnumerator

    for method in ("_filter_sharding_types", "_filter_compute_kernels"):
        if not callable(getattr(EmbeddingEnumerator, method, None)):
            raise AutoshardError(f"this TorchRec's EmbeddingEnumerator has no {method}, which the baseline "
                                 "orders; install the TorchRec of the install recipe (make install)")

    class SharderOrderEnumerator(EmbeddingEnumerator):
        def _filter_sharding_types(self, name: str, allowed_sharding_types: list[str], *args: Any,
                                   **kwargs: Any) -> list[str]:
            kept = set(super()._filter_sharding_types(name, allowed_sharding_types, *args, **kwargs))
            return [t for t in allowed_sharding_types if t in kept]

        def _filter_compute_kernels(self, name: str, allowed_compute_kernels: list[str], *args: Any,
                                    **kwargs: Any) -> list[str]:
            kept = set(super()._filter_compute_kernels(name, allowed_compute_kernels, *args, **kwargs))
            return [k for k in allowed_compute_kernels if k in kept]

    return SharderOrderEnumerator(**kwargs)


def torchrec_sharding_plan(task: Task, config: TorchRecBaselineConfig, no_column_wise: set[str]) -> Any:
    """Run TorchRec's EmbeddingShardingPlanner on ``task``; returns its ShardingPlan."""
    from torchrec.distributed.planner import EmbeddingShardingPlanner
    from torchrec.distributed.planner.constants import DEFAULT_PERF_ESTIMATOR
    from torchrec.distributed.planner.estimator import EmbeddingPerfEstimatorFactory
    from torchrec.distributed.planner.storage_reservations import FixedPercentageStorageReservation
    from torchrec.distributed.planner.types import PlannerError

    from autoshard.torchrec.modules import build_ebc

    topology = make_topology(task, config.compute_device)
    batch = per_rank_batch(task)
    constraints = torchrec_constraints(task, config, no_column_wise)
    enumerator = sharder_order_enumerator(
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
        return planner.plan(build_ebc(task, device="meta"),
                            [baseline_sharder(config.proposes_cpu_row_wise)])
    except PlannerError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise InfeasibleError(f"torchrec planner found no plan: {first[:300]}; give more memory or devices") \
            from None


class TorchRecPlanner:
    """``--algo torchrec``: TorchRec's EmbeddingShardingPlanner on the task, its plan read back."""

    name = "torchrec"
    plans_rows = True
    """TorchRec gets every table whole, also one larger than a device, and splits it itself (row_wise or
    column_wise); ``run_planner`` does not cut it into row pieces beforehand."""

    def __init__(self, config: TorchRecBaselineConfig | None = None) -> None:
        self.config = config or TorchRecBaselineConfig()
        # Import TorchRec now (seconds) so run_planner's planning time is TorchRec's planning, not its import.
        import torchrec.distributed.planner  # noqa: F401

        bad = [s for s in self.config.sharding_types if s not in ALLOWED_SHARDING_TYPES]
        if bad or not self.config.sharding_types:
            why = f" ({bad[0]}: {NOT_OFFERED[bad[0]]})" if bad and bad[0] in NOT_OFFERED else ""
            raise AutoshardError(f"sharding types {list(self.config.sharding_types)}: use a non-empty "
                                 f"subset of {list(ALLOWED_SHARDING_TYPES)}{why}")
        if self.config.min_partition is not None and self.config.min_partition < 1:
            raise AutoshardError(f"min_partition {self.config.min_partition} must be a positive number of "
                                 "columns")
        if self.config.compute_device not in COMPUTE_DEVICES:
            raise AutoshardError(f"compute device {self.config.compute_device!r} unknown; "
                                 f"use one of {', '.join(COMPUTE_DEVICES)}")
        dropped = [s for s in self.config.sharding_types if s not in offered_sharding_types(self.config)]
        if dropped:
            logger.debug("TorchRec does not propose %s on compute device %s; not offered", dropped,
                        self.config.compute_device)

    def plan(self, task: Task) -> Plan:
        try:
            return self._plan(task, self.config)
        except InfeasibleError as e:
            if not (self.config.compute_device == "cpu" and self.config.cpu_row_wise == AUTO):
                raise
            # what a TorchRec user does when the planner finds no plan: offer row_wise to every table
            logger.warning("torchrec: %s; planning again with row_wise offered to every table", e)
            return self._plan(task, replace(self.config, cpu_row_wise=True))

    def _plan(self, task: Task, config: TorchRecBaselineConfig) -> Plan:
        from autoshard.torchrec.export import from_sharding_plan, placement_from_parameter_sharding

        dims = {t.name: t.dim for t in task.tables}
        no_column_wise: set[str] = set()
        for _ in range(MAX_REPLANS + 1):
            sharding_plan = torchrec_sharding_plan(task, config, no_column_wise)
            module_plan = next(iter(sharding_plan.plan.values()))
            split = set()
            for name, ps in module_plan.items():
                try:
                    placement_from_parameter_sharding(name, ps, dims.get(name))
                except PlanError:
                    if ps.sharding_type != ShardingType.COLUMN_WISE.value:
                        raise
                    split.add(name)
            if not split:
                return from_sharding_plan(sharding_plan, task, algorithm=self.name)
            logger.info("torchrec put non-adjacent column shards of %s on one rank; "
                        "re-planning them without column_wise", sorted(split))
            no_column_wise |= split
        raise PlanError(f"torchrec kept splitting tables {sorted(no_column_wise)} into column shards "
                        "autoshard cannot hold; plan without column_wise in sharding_types")


def torchrec_planner(options: PlannerOptions) -> TorchRecPlanner:
    """Registry factory; ``options.extra`` may set compute_device, sharding_types, min_partition (default
    ``DEFAULT_MIN_PARTITION``; ``none``: TorchRec's own), timeout_seconds, cpu_row_wise (auto, true or
    false; default auto).
    ``options.time_limit_s`` is not applied: TorchRec's planner has no anytime result."""
    extra = dict(options.extra)
    known = {"compute_device", "sharding_types", "min_partition", "timeout_seconds", "cpu_row_wise"}
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
        min_partition=_min_partition(extra.get("min_partition", DEFAULT_MIN_PARTITION)),
        timeout_seconds=int(extra["timeout_seconds"]) if extra.get("timeout_seconds") is not None else None,
        cpu_row_wise=_cpu_row_wise(extra.get("cpu_row_wise", AUTO)),
    ))


def _cpu_row_wise(value: Any) -> bool | str:
    text = str(value).strip().lower()
    if text == AUTO:
        return AUTO
    try:
        return bool(parse_setting("cpu_row_wise", text, bool))
    except AutoshardError:
        raise AutoshardError(f"torchrec planner: cpu_row_wise={value!r}: give auto (row_wise only for tables "
                             "larger than every device), true or false") from None


def _min_partition(value: Any) -> int | None:
    if value is None or str(value).strip().lower() == "none":
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        raise AutoshardError(f"torchrec planner: min_partition {value!r} is not a whole number of columns "
                             "(or none for TorchRec's default)") from None
