"""Plans <-> TorchRec ShardingPlans: export, read back, and refusal of what a Plan cannot hold."""

from __future__ import annotations

import pytest
from conftest import make_tables
from torchrec.distributed.types import EnumerableShardingSpec, ParameterSharding, ShardingPlan, ShardMetadata

from autoshard.costs.analytical import AnalyticalCostModel
from autoshard.errors import AutoshardError, PlanError
from autoshard.plan import Plan, ShardingType, TablePlacement, validate
from autoshard.tables import Table
from autoshard.tasks import Task
from autoshard.torchrec.export import FUSED_KERNEL, from_sharding_plan, to_sharding_plan


def _task(n: int = 5, devices: int = 3) -> Task:
    return Task(tuple(make_tables(n, seed=3, dims=(16, 32, 64))), (10**10,) * devices, name="export")


def _mixed_plan(task: Task) -> Plan:
    t = task.tables
    return Plan((
        TablePlacement.table_wise(t[0].name, 2, t[0].dim),
        TablePlacement.column_wise(t[1].name, [1, 0, 2], [4, t[1].dim - 12, 8]),
        TablePlacement.table_wise(t[2].name, 0, t[2].dim),
        TablePlacement.column_wise(t[3].name, [2, 1], [t[3].dim - 4, 4]),
        TablePlacement.column_wise(t[4].name, [1], [t[4].dim]),
    ), task.num_devices, "manual", task.name)


def test_round_trip_table_and_column_wise():
    task = _task()
    plan = _mixed_plan(task)
    back = from_sharding_plan(to_sharding_plan(plan, task), task, algorithm="manual")
    assert back.placements == plan.placements
    assert back.num_devices == plan.num_devices


def test_export_uses_fused_kernel_ranks_and_shard_sizes():
    task = _task()
    plan = _mixed_plan(task)
    sp = to_sharding_plan(plan, task, device_type="cuda", rows_cap=50)
    module_plan = sp.plan[""]
    t1 = task.tables[1]
    ps = module_plan[t1.name]
    assert ps.compute_kernel == FUSED_KERNEL
    assert ps.sharding_type == ShardingType.COLUMN_WISE.value and ps.ranks == [1, 0, 2]
    shards = ps.sharding_spec.shards
    assert [s.shard_sizes for s in shards] == [[min(t1.rows, 50), 4], [min(t1.rows, 50), t1.dim - 12],
                                               [min(t1.rows, 50), 8]]
    assert [s.shard_offsets for s in shards] == [[0, 0], [0, 4], [0, t1.dim - 8]]
    assert str(shards[0].placement).startswith("rank:1/cuda:1")
    assert module_plan[task.tables[0].name].sharding_type == ShardingType.TABLE_WISE.value


def test_shards_out_of_column_order_are_sorted_and_adjacent_same_rank_merged():
    task = _task(1, 2)
    t = task.tables[0]
    q = t.dim // 4
    shards = [ShardMetadata([0, 2 * q], [t.rows, 2 * q], "rank:0/cpu"),
              ShardMetadata([0, 0], [t.rows, q], "rank:1/cpu"),
              ShardMetadata([0, q], [t.rows, q], "rank:1/cpu")]
    ps = ParameterSharding("column_wise", "fused", [0, 1, 1], EnumerableShardingSpec(shards))
    plan = from_sharding_plan(ShardingPlan({"": {t.name: ps}}), task)
    assert plan.placements == (TablePlacement.column_wise(t.name, [1, 0], [2 * q, 2 * q]),)


def test_row_ranges_round_trip_through_validate_cost_model_and_torchrec():
    # a shard with a row range goes plan -> validate -> cost model -> ShardingPlan -> Plan unchanged
    task = _task(4, 3)
    t = task.tables
    # TorchRec's split: even blocks of ceil(rows / 3) on ranks 0, 1, 2
    block1, block2 = -(-t[1].rows // 3), -(-t[2].rows // 3)
    plan = Plan((
        TablePlacement.table_wise(t[0].name, 0, t[0].dim),
        TablePlacement.row_wise(t[1].name, [0, 1, 2], [block1, block1, t[1].rows - 2 * block1], t[1].dim),
        TablePlacement.row_wise(t[2].name, [0, 1, 2], [block2, block2, t[2].rows - 2 * block2], t[2].dim,
                                ShardingType.TABLE_ROW_WISE),
        TablePlacement.data_parallel(t[3].name, [0, 1, 2], t[3].dim),
    ), task.num_devices, "manual", task.name)
    validate(plan, task)
    costs = AnalyticalCostModel().device_costs(task, plan.device_shards(task))
    assert costs.shape == (3, 3) and (costs > 0).all()
    sp = to_sharding_plan(plan, task)
    rw = sp.plan[""][t[1].name].sharding_spec.shards
    assert [s.shard_offsets for s in rw] == [[0, 0], [block1, 0], [2 * block1, 0]]
    assert [s.shard_sizes for s in rw] == [[block1, t[1].dim]] * 2 + [[t[1].rows - 2 * block1, t[1].dim]]
    back = from_sharding_plan(sp, task, algorithm="manual")
    assert back.placements == plan.placements
    validate(back, task)


def test_row_splits_torchrec_cannot_execute_are_refused():
    # TorchRec 1.8 bucketises ids by even blocks of ceil(rows / ranks) whatever the plan says: an uneven
    # split (or one over a subset of the ranks) would run silently wrong in DistributedModelParallel
    task = _task(2, 3)
    t = task.tables
    half = t[1].rows // 2
    for ranks, rows in (([0, 1, 2], [t[1].rows - 7, 4, 3]), ([2, 0], [half, t[1].rows - half])):
        plan = Plan((TablePlacement.table_wise(t[0].name, 0, t[0].dim),
                     TablePlacement.row_wise(t[1].name, ranks, rows, t[1].dim)), 3, "uneven", task.name)
        validate(plan, task)
        with pytest.raises(PlanError, match="not TorchRec's split"):
            to_sharding_plan(plan, task)


def test_unrepresentable_torchrec_shardings_are_refused():
    task = _task(1, 2)
    t = task.tables[0]
    twcw = ParameterSharding("table_column_wise", "fused", [0, 1], None)
    with pytest.raises(PlanError, match="table_column_wise"):
        from_sharding_plan(ShardingPlan({"": {t.name: twcw}}), task)
    q = t.dim // 4
    split = [ShardMetadata([0, 0], [t.rows, q], "rank:0/cpu"),
             ShardMetadata([0, q], [t.rows, q], "rank:1/cpu"),
             ShardMetadata([0, 2 * q], [t.rows, 2 * q], "rank:0/cpu")]
    ps = ParameterSharding("column_wise", "fused", [0, 1, 0], EnumerableShardingSpec(split))
    with pytest.raises(PlanError, match="non-adjacent"):
        from_sharding_plan(ShardingPlan({"": {t.name: ps}}), task)


def test_export_refuses_plan_of_other_tables_or_devices():
    task = _task()
    plan = _mixed_plan(task)
    other = Task(tuple(make_tables(5, seed=9)), (10**10,) * 3, name="other")
    renamed = Task(tuple(Table(f"x{i}", t.dim, t.rows, t.pooling_factor) for i, t in enumerate(other.tables)),
                   other.device_memory)
    with pytest.raises(PlanError, match="does not have"):
        to_sharding_plan(plan, renamed)
    with pytest.raises(PlanError, match="3 devices"):
        to_sharding_plan(plan, Task(task.tables, (10**10,) * 2))
    with pytest.raises(AutoshardError, match="no module"):
        from_sharding_plan(to_sharding_plan(plan, task, module_path="sparse.ebc"), task, module_path="")
