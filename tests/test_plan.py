from __future__ import annotations

import json

import pytest

from autoshard.breakdown import PlanCost
from autoshard.errors import AutoshardError, PlanError
from autoshard.plan import PLAN_VERSION, Plan, ShardingType, TablePlacement, format_report, validate
from autoshard.shards import Shard
from autoshard.tasks import Task


def _plan(task: Task) -> Plan:
    return Plan.from_ranks(task, [i % task.num_devices for i in range(task.num_tables)], "test")


def test_valid_plan_round_trips_json(task, tmp_path):
    t0 = task.tables[0]
    placements = list(_plan(task).placements)
    placements[0] = TablePlacement.column_wise(t0.name, [1, 3], [t0.dim - 4, 4])
    cost = PlanCost.from_array([[1.0, 2.0, 0.5]] * 4, "test")
    plan = Plan(tuple(placements), 4, "test", task.name, cost, 0.01)
    validate(plan, task)
    path = str(tmp_path / "plan.json")
    plan.save(path)
    again = Plan.load(path)
    assert again == plan
    assert again.placement(t0.name).sharding_type is ShardingType.COLUMN_WISE
    assert again.cost.plan_ms == pytest.approx(3.5)


def test_device_shards_and_memory(task):
    plan = _plan(task)
    shards = plan.device_shards(task)
    assert sum(len(s) for s in shards) == task.num_tables
    assert sum(plan.memory_used(task)) == sum(task.table_memory(t) for t in task.tables)


@pytest.mark.parametrize("mutate, message", [
    (lambda ps, t: ps[1:], "does not place"),
    (lambda ps, t: ps + ps[:1], "more than once"),
    (lambda ps, t: [TablePlacement.table_wise(ps[0].table, 9, t.tables[0].dim)] + ps[1:], "out of range"),
    (lambda ps, t: [TablePlacement.table_wise(ps[0].table, 0, 3)] + ps[1:], "do not add up"),
    (lambda ps, t: [TablePlacement.column_wise(ps[0].table, [0, 0], [8, 8])] + ps[1:], "distinct ranks"),
    (lambda ps, t: [TablePlacement.column_wise(ps[0].table, [0, 1], [6, 10])] + ps[1:], "multiples of 4"),
    (lambda ps, t: [TablePlacement.table_wise("nope", 0, 16)] + ps[1:], "not in the task"),
])
def test_validation_errors(task, mutate, message):
    plan = _plan(task)
    bad = Plan(tuple(mutate(list(plan.placements), task)), 4, "bad")
    with pytest.raises(PlanError, match=message):
        validate(bad, task)


def test_memory_over_capacity_is_refused(tables):
    task = Task(tables=tuple(tables), device_memory=(1,) * 2)
    with pytest.raises(PlanError, match="uses"):
        validate(Plan.from_ranks(task, [0] * len(tables), "x"), task)


def test_bad_plan_files(tmp_path):
    p = tmp_path / "p.json"
    p.write_text('{"kind": "autoshard.plan", "version": 2, "devices": 2, '
                 '"tables": {"a": {"sharding_type": "row"}}}')
    with pytest.raises(AutoshardError, match="sharding_type"):
        Plan.load(str(p))


def test_report_lists_every_device(task):
    plan = _plan(task).with_cost(PlanCost.from_array([[1, 1, 1], [2, 2, 2], [0, 0, 0], [1, 0, 0]], "test"))
    text = format_report(plan, task, proxy=[1.0, 2.0, 3.0, 4.0])
    assert "plan cost (test, per-device max, before the step model): 6.000 ms on device 1" in text
    assert len(text.splitlines()) == 2 + 4 + 1


def test_version_1_plan_file_still_loads(task, tmp_path):
    # written by autoshard 0.1.0 before shards had row ranges: ranks + shard_dims per table
    t = task.tables
    v1 = {"kind": "autoshard.plan", "version": 1, "algorithm": "old", "devices": 4, "task": task.name,
          "planning_time_s": 0.5,
          "tables": {x.name: {"sharding_type": "table_wise", "ranks": [i % 4], "shard_dims": [x.dim]}
                     for i, x in enumerate(t[1:], start=1)}
          | {t[0].name: {"sharding_type": "column_wise", "ranks": [3, 1], "shard_dims": [t[0].dim - 4, 4]}},
          "cost": None}
    path = tmp_path / "old.json"
    path.write_text(json.dumps(v1))
    plan = Plan.load(str(path))
    validate(plan, task)
    assert plan.placement(t[0].name) == TablePlacement.column_wise(t[0].name, [3, 1], [t[0].dim - 4, 4])
    plan.save(str(tmp_path / "new.json"))
    assert json.loads((tmp_path / "new.json").read_text())["version"] == PLAN_VERSION
    assert Plan.load(str(tmp_path / "new.json")) == plan


def _rows_plan(task: Task, placement: TablePlacement) -> Plan:
    rest = _plan(task).placements[1:]
    return Plan((placement,) + rest, task.num_devices, "rows", task.name)


def test_row_shards_validate_and_add_up_to_the_table(task, tmp_path):
    t = task.tables[0]
    cuts = [t.rows // 5, t.rows // 2, t.rows - t.rows // 5 - t.rows // 2]
    plan = _rows_plan(task, TablePlacement.row_wise(t.name, [3, 0, 2], cuts, t.dim))
    validate(plan, task)
    shards = [s for dev in plan.device_shards(task) for s in dev if s.table == 0]
    assert sorted(s.num_rows(t.rows) for s in shards) == sorted(cuts)
    assert sum(task.shard_memory(s) for s in shards) == task.table_memory(t)
    plan.save(str(tmp_path / "rows.json"))
    assert Plan.load(str(tmp_path / "rows.json")) == plan


@pytest.mark.parametrize("shards, message", [
    (lambda t: (Shard(0, 0, t.dim, 0, 10), Shard(1, 0, t.dim, 12, t.rows)), "exactly once"),   # gap
    (lambda t: (Shard(0, 0, t.dim, 0, 10), Shard(1, 0, t.dim, 5, t.rows)), "exactly once"),    # overlap
    (lambda t: (Shard(0, 0, t.dim, 0, 10), Shard(1, 0, t.dim, 10, t.rows - 1)), "end at row"),
    (lambda t: (Shard(0, 0, t.dim, 0, 10), Shard(0, 0, t.dim, 10, t.rows)), "distinct ranks"),
    (lambda t: (Shard(0, 0, t.dim - 4, 0, 10), Shard(1, 0, t.dim - 4, 10, t.rows)), "every column"),
    (lambda t: (Shard(0, 0, t.dim, 0, t.rows + 1),), "outside"),
])
def test_bad_row_shards_are_refused(task, shards, message):
    t = task.tables[0]
    with pytest.raises(PlanError, match=message):
        validate(_rows_plan(task, TablePlacement(t.name, ShardingType.ROW_WISE, shards(t))), task)


def test_column_blocks_split_by_rows_must_each_cover_all_rows(task):
    # a column block may itself be split by rows only under a row-splitting type; here each block is whole
    t = task.tables[0]
    ok = TablePlacement(t.name, ShardingType.COLUMN_WISE, (Shard(0, 0, 8), Shard(1, 8, t.dim)))
    validate(_rows_plan(task, ok), task)
    half = TablePlacement(t.name, ShardingType.COLUMN_WISE, (Shard(0, 0, 8, 0, 5), Shard(1, 8, t.dim)))
    with pytest.raises(PlanError, match="use row_wise"):
        validate(_rows_plan(task, half), task)


def test_replicas_count_whole_on_every_rank(task):
    t = task.tables[0]
    plan = _rows_plan(task, TablePlacement.data_parallel(t.name, [0, 1, 2, 3], t.dim))
    validate(plan, task)
    tw = _plan(task)
    extra = [a - b for a, b in zip(plan.memory_used(task), tw.memory_used(task))]
    assert sorted(extra)[1:] == [task.table_memory(t)] * 3


def test_table_row_wise_stays_on_one_host(tables):
    from autoshard.topology import Topology

    task = Task(tables=tuple(tables), device_memory=(10**9,) * 4, name="hosts", topology=Topology(hosts=2))
    t = task.tables[0]
    half = t.rows // 2
    ok = _rows_plan(task, TablePlacement.row_wise(t.name, [2, 3], [half, t.rows - half], t.dim,
                                                  ShardingType.TABLE_ROW_WISE))
    validate(ok, task)
    across = _rows_plan(task, TablePlacement.row_wise(t.name, [1, 2], [half, t.rows - half], t.dim,
                                                      ShardingType.TABLE_ROW_WISE))
    with pytest.raises(PlanError, match="one host"):
        validate(across, task)
