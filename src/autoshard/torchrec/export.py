"""Plans as TorchRec ``ShardingPlan``s and back.

``to_sharding_plan`` writes one ``ParameterSharding`` per table (``fused`` kernel, one ``ShardMetadata`` per
shard with the shard's row and column offsets and sizes and ``rank:R/device``), so DMP places the shards
exactly where the plan says without a process group. ``from_sharding_plan`` reads a TorchRec plan back into a
``Plan`` (table-, column-, row-, table-row-wise and data-parallel); other sharding types (e.g.
table_column_wise) are refused with one line.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from autoshard.errors import AutoshardError, PlanError
from autoshard.plan import Plan, ShardingType, TablePlacement
from autoshard.shards import Shard
from autoshard.tasks import Task

logger = logging.getLogger(__name__)

FUSED_KERNEL = "fused"
"""TorchRec's ``EmbeddingComputeKernel.FUSED``: FBGEMM's TBE with the optimizer fused into backward (the
kernel autoshard's costs are measured on). ``construct_module_sharding_plan`` would pick ``dense`` unless
told."""

DENSE_KERNEL = "dense"
"""``EmbeddingComputeKernel.DENSE``: the only kernel TorchRec offers data_parallel tables."""

ROOT_MODULE_PATH = ""
"""Module path of an EmbeddingBagCollection that is itself the model handed to DMP."""


def _placement(device_type: str, rank: int, local_size: int) -> str:
    # Same string TorchRec's sharding_plan.placement() builds: GPU ranks map to cuda:(rank % local_size).
    if device_type in ("cuda", "mtia"):
        return f"rank:{rank}/{device_type}:{rank % local_size}"
    return f"rank:{rank}/{device_type}"


def torchrec_row_block(rows: int, parts: int, i: int) -> tuple[int, int]:
    """Rows of the i-th of ``parts`` row shards as TorchRec's row-wise kernels place them: even blocks of
    ``ceil(rows / parts)`` rows, the last one shorter (its input distribution bucketises ids by that block
    size whatever the plan's ShardMetadata says)."""
    block = -(-rows // parts)
    return min(i * block, rows), min((i + 1) * block, rows)


def check_torchrec_row_split(p: TablePlacement, rows: int, num_devices: int, local_size: int) -> None:
    """PlanError (one line) unless a row-split placement is what TorchRec's kernels execute: row_wise over
    every rank in order, table_row_wise over one host's ranks in order, in even blocks of ceil(rows / ranks).
    TorchRec 1.8 bucketises ids by that block size whatever the plan says, so any other split would be
    silently wrong in DistributedModelParallel (measured: ids go to the wrong shard, with only a log line)."""
    if p.sharding_type is ShardingType.ROW_WISE:
        want = list(range(num_devices))
    else:
        first = p.shards[0].rank // local_size * local_size
        want = list(range(first, first + local_size))
    ordered = sorted(p.shards, key=lambda s: s.row_start)
    blocks = [torchrec_row_block(rows, len(want), i) for i in range(len(want))]
    got = [(s.row_start, rows if s.row_end is None else s.row_end) for s in ordered]
    if [s.rank for s in ordered] != want or got != blocks:
        raise PlanError(f"table {p.table}: {p.sharding_type.value} shards {got} on ranks "
                        f"{[s.rank for s in ordered]} are not TorchRec's split (ranks {want}, even blocks of "
                        f"{blocks[0][1]} rows), which its kernels assume; autoshard prices such a plan, but "
                        "TorchRec's DistributedModelParallel would run it wrongly, so it is not exported")


def table_rows(task: Task, rows_cap: int | None = None) -> dict[str, int]:
    """Rows each table has in the EmbeddingBagCollection (capped by ``rows_cap`` for verification)."""
    return {t.name: (min(t.rows, rows_cap) if rows_cap else t.rows) for t in task.tables}


def module_sharding_plan(
    plan: Plan,
    rows: Mapping[str, int],
    device_type: str = "cpu",
    local_size: int | None = None,
    plan_rows: Mapping[str, int] | None = None,
) -> Any:
    """The ``EmbeddingModuleShardingPlan`` of one EmbeddingBagCollection whose tables have ``rows`` rows.

    Row ranges of the plan refer to ``plan_rows`` (the task's tables; default ``rows``): where the module has
    fewer rows (a capped copy for verification), they are scaled to the module's rows."""
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
        of_rows = int(plan_rows[p.table]) if plan_rows is not None else n_rows
        if p.sharding_type.splits_rows:
            check_torchrec_row_split(p, of_rows, plan.num_devices, local)
        shards = []
        for s in p.shards:
            if p.sharding_type.splits_rows:  # TorchRec's even blocks of the module's rows
                start, end = torchrec_row_block(n_rows, len(p.shards), p.ranks.index(s.rank))
            else:
                start = s.row_start * n_rows // of_rows
                end = n_rows if s.row_end is None else s.row_end * n_rows // of_rows
            shards.append(ShardMetadata(shard_offsets=[start, s.col_start], shard_sizes=[end - start, s.cols],
                                        placement=_placement(device_type, s.rank, local)))
        module_plan[p.table] = ParameterSharding(
            sharding_type=p.sharding_type.value,
            # TorchRec runs data_parallel tables with the dense kernel (replicated weights, all-reduced grads)
            compute_kernel=DENSE_KERNEL if p.sharding_type.replicates else FUSED_KERNEL,
            ranks=[int(r) for r in p.ranks],
            # replicas are no partition: TorchRec lists data_parallel ranks without a sharding spec
            sharding_spec=None if p.sharding_type.replicates else EnumerableShardingSpec(shards),
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
                                                           local_size, table_rows(task))})


def _rank_of(placement: str) -> int:
    # "rank:3/cuda:3" -> 3
    try:
        return int(str(placement).split("/")[0].split(":")[1])
    except (IndexError, ValueError):
        raise AutoshardError(f"shard placement {placement!r} is not of the form rank:R/device") from None


def placement_from_parameter_sharding(table: str, ps: Any, dim: int | None = None) -> TablePlacement:
    """One table's ``ParameterSharding`` as a ``TablePlacement``, every shard with its offsets and sizes.

    Column shards are put in column order and adjacent column shards on the same rank are merged (TorchRec may
    split a table into more shards than ranks); row shards keep their ranges (empty ones, which TorchRec's
    even split gives ranks past the last row, are dropped); ``dim`` is needed only for data_parallel, whose
    replicas TorchRec lists without shards. Raises PlanError for what a Plan cannot hold.
    """
    try:
        st = ShardingType(ps.sharding_type)
    except ValueError:
        raise PlanError(f"table {table}: TorchRec sharding type {ps.sharding_type!r} cannot be represented "
                        f"in an autoshard plan (it holds {', '.join(t.value for t in ShardingType)}); "
                        "exclude it from the planner's sharding types") from None
    spec = list(ps.sharding_spec.shards) if ps.sharding_spec is not None else []
    if st is ShardingType.DATA_PARALLEL:
        cols = int(spec[0].shard_sizes[1]) if spec else dim
        if cols is None or not ps.ranks:
            raise PlanError(f"table {table}: data_parallel sharding without ranks or a dim; "
                            "pass the table's dim")
        return TablePlacement.data_parallel(table, [int(r) for r in ps.ranks], cols)
    if not spec:
        raise PlanError(f"table {table}: {st.value} sharding without shards; cannot read its layout")
    if st.splits_rows:
        shards = sorted((s for s in spec if int(s.shard_sizes[0]) > 0), key=lambda s: int(s.shard_offsets[0]))
        return TablePlacement(table, st, tuple(
            Shard(_rank_of(s.placement), int(s.shard_offsets[1]),
                  int(s.shard_offsets[1]) + int(s.shard_sizes[1]),
                  int(s.shard_offsets[0]), int(s.shard_offsets[0]) + int(s.shard_sizes[0])) for s in shards))
    if st is ShardingType.TABLE_WISE:
        if not ps.ranks or len(ps.ranks) != 1:
            raise PlanError(f"table {table}: table_wise sharding with ranks {ps.ranks}; expected one rank")
        return TablePlacement.table_wise(table, int(ps.ranks[0]), int(spec[0].shard_sizes[1]))
    shards = sorted(spec, key=lambda s: int(s.shard_offsets[1]))
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


def from_module_sharding_plan(
    module_plan: Mapping[str, Any],
    num_devices: int,
    algorithm: str = "torchrec",
    task_name: str = "",
    order: Sequence[str] | None = None,
    dims: Mapping[str, int] | None = None,
) -> Plan:
    """A Plan from one module's ``{table: ParameterSharding}`` (tables in ``order`` if given; ``dims`` are
    needed for data_parallel tables only)."""
    names = list(order) if order is not None else list(module_plan)
    missing = [n for n in names if n not in module_plan]
    if missing:
        raise PlanError(f"TorchRec plan has no sharding for table {missing[0]}")
    placements = tuple(placement_from_parameter_sharding(n, module_plan[n], (dims or {}).get(n))
                       for n in names)
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
                                     [t.name for t in task.tables], {t.name: t.dim for t in task.tables})
