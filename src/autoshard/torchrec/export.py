"""Plans as TorchRec ``ShardingPlan``s and back.

``to_sharding_plan`` writes one ``ParameterSharding`` per table (``fused`` kernel, one ``ShardMetadata`` per
shard with the shard's rows x columns, its column offset and ``rank:R/device``), so DMP places the shards
exactly where the plan says without a process group. ``from_sharding_plan`` reads a TorchRec plan back into a
``Plan``; sharding types autoshard cannot represent (row_wise, data_parallel, ...) are refused with one line.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from autoshard.errors import AutoshardError, PlanError
from autoshard.plan import Plan, ShardingType, TablePlacement
from autoshard.tasks import Task

logger = logging.getLogger(__name__)

FUSED_KERNEL = "fused"
"""TorchRec's ``EmbeddingComputeKernel.FUSED``: FBGEMM's TBE with the optimizer fused into backward (the
kernel autoshard's costs are measured on). ``construct_module_sharding_plan`` would pick ``dense`` unless
told."""

ROOT_MODULE_PATH = ""
"""Module path of an EmbeddingBagCollection that is itself the model handed to DMP."""


def _placement(device_type: str, rank: int, local_size: int) -> str:
    # Same string TorchRec's sharding_plan.placement() builds: GPU ranks map to cuda:(rank % local_size).
    if device_type in ("cuda", "mtia"):
        return f"rank:{rank}/{device_type}:{rank % local_size}"
    return f"rank:{rank}/{device_type}"


def table_rows(task: Task, rows_cap: int | None = None) -> dict[str, int]:
    """Rows each table has in the EmbeddingBagCollection (capped by ``rows_cap`` for verification)."""
    return {t.name: (min(t.rows, rows_cap) if rows_cap else t.rows) for t in task.tables}


def module_sharding_plan(
    plan: Plan,
    rows: Mapping[str, int],
    device_type: str = "cpu",
    local_size: int | None = None,
) -> Any:
    """The ``EmbeddingModuleShardingPlan`` of one EmbeddingBagCollection whose tables have ``rows`` rows."""
    from torchrec.distributed.types import (
        EmbeddingModuleShardingPlan,
        EnumerableShardingSpec,
        ParameterSharding,
        ShardMetadata,
    )

    local = local_size or plan.num_devices
    module_plan = EmbeddingModuleShardingPlan()
    for p in plan.placements:
        if p.table not in rows:
            raise PlanError(f"plan places table {p.table}, which the module does not have; "
                            "use the plan made for it")
        n_rows = int(rows[p.table])
        shards, offset = [], 0
        for rank, cols in zip(p.ranks, p.shard_dims):
            shards.append(ShardMetadata(shard_offsets=[0, offset], shard_sizes=[n_rows, int(cols)],
                                        placement=_placement(device_type, int(rank), local)))
            offset += int(cols)
        module_plan[p.table] = ParameterSharding(
            sharding_type=p.sharding_type.value,
            compute_kernel=FUSED_KERNEL,
            ranks=[int(r) for r in p.ranks],
            sharding_spec=EnumerableShardingSpec(shards),
        )
    missing = [n for n in rows if n not in module_plan]
    if missing:
        raise PlanError(f"plan does not place table {missing[0]} of the module; plan all of its tables")
    return module_plan


def to_sharding_plan(
    plan: Plan,
    task: Task,
    device_type: str = "cpu",
    local_size: int | None = None,
    rows_cap: int | None = None,
    module_path: str = ROOT_MODULE_PATH,
) -> Any:
    """A TorchRec ``ShardingPlan`` for the EmbeddingBagCollection of ``task``'s tables at ``module_path``.

    ``local_size`` is the number of ranks per host (default: all ranks on one host); no process group is
    needed. ``rows_cap`` must match the rows of the module the plan is applied to (see ``table_rows``).
    """
    from torchrec.distributed.types import ShardingPlan

    if plan.num_devices != task.num_devices:
        raise PlanError(f"plan is for {plan.num_devices} devices but the task has {task.num_devices}")
    return ShardingPlan({module_path: module_sharding_plan(plan, table_rows(task, rows_cap), device_type,
                                                           local_size)})


def _rank_of(placement: str) -> int:
    # "rank:3/cuda:3" -> 3
    try:
        return int(str(placement).split("/")[0].split(":")[1])
    except (IndexError, ValueError):
        raise AutoshardError(f"shard placement {placement!r} is not of the form rank:R/device") from None


def placement_from_parameter_sharding(table: str, ps: Any) -> TablePlacement:
    """One table's ``ParameterSharding`` as a ``TablePlacement``.

    Column shards are put in column order; adjacent column shards on the same rank are merged (TorchRec may
    split a table into more shards than ranks). Raises PlanError for what a Plan cannot hold.
    """
    st = ps.sharding_type
    if st == ShardingType.TABLE_WISE.value:
        if not ps.ranks or len(ps.ranks) != 1:
            raise PlanError(f"table {table}: table_wise sharding with ranks {ps.ranks}; expected one rank")
        shards = ps.sharding_spec.shards if ps.sharding_spec is not None else []
        dim = int(shards[0].shard_sizes[1]) if shards else None
        if dim is None:
            raise PlanError(f"table {table}: table_wise sharding without a shard; cannot read its dim")
        return TablePlacement.table_wise(table, int(ps.ranks[0]), dim)
    if st == ShardingType.COLUMN_WISE.value:
        if ps.sharding_spec is None or not ps.sharding_spec.shards:
            raise PlanError(f"table {table}: column_wise sharding without shards")
        shards = sorted(ps.sharding_spec.shards, key=lambda s: int(s.shard_offsets[1]))
        ranks: list[int] = []
        dims: list[int] = []
        expected = 0
        for s in shards:
            if int(s.shard_offsets[1]) != expected or int(s.shard_offsets[0]) != 0:
                raise PlanError(f"table {table}: column shards leave a gap or overlap at column {expected}")
            rank, cols = _rank_of(s.placement), int(s.shard_sizes[1])
            if ranks and ranks[-1] == rank:
                dims[-1] += cols
            else:
                ranks.append(rank)
                dims.append(cols)
            expected += cols
        if len(set(ranks)) != len(ranks):
            raise PlanError(f"table {table}: non-adjacent column shards on one rank ({ranks}); "
                            "autoshard needs one column block per rank")
        return TablePlacement.column_wise(table, ranks, dims)
    raise PlanError(f"table {table}: TorchRec sharding type {st!r} cannot be represented in an autoshard "
                    "plan (only table_wise and column_wise); exclude it from the planner's sharding types")


def from_module_sharding_plan(
    module_plan: Mapping[str, Any],
    num_devices: int,
    algorithm: str = "torchrec",
    task_name: str = "",
    order: Sequence[str] | None = None,
) -> Plan:
    """A Plan from one module's ``{table: ParameterSharding}`` (tables in ``order`` if given)."""
    names = list(order) if order is not None else list(module_plan)
    missing = [n for n in names if n not in module_plan]
    if missing:
        raise PlanError(f"TorchRec plan has no sharding for table {missing[0]}")
    placements = tuple(placement_from_parameter_sharding(n, module_plan[n]) for n in names)
    return Plan(placements, num_devices, algorithm, task_name)


def from_sharding_plan(
    sharding_plan: Any,
    task: Task,
    algorithm: str = "torchrec",
    module_path: str | None = None,
) -> Plan:
    """The Plan for ``task`` held in a TorchRec ``ShardingPlan`` (its only module, or ``module_path``)."""
    plans = sharding_plan.plan
    if module_path is None:
        if len(plans) != 1:
            raise AutoshardError(f"TorchRec plan has modules {sorted(plans)}; name the one to read")
        module_path = next(iter(plans))
    if module_path not in plans:
        raise AutoshardError(f"TorchRec plan has no module {module_path!r}; it has {sorted(plans)}")
    return from_module_sharding_plan(plans[module_path], task.num_devices, algorithm, task.name,
                                     [t.name for t in task.tables])
