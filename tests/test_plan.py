from __future__ import annotations

import pytest

from autoshard.costs.breakdown import PlanCost
from autoshard.errors import AutoshardError, PlanError
from autoshard.plan import Plan, ShardingType, TablePlacement, format_report, validate
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
    p.write_text('{"kind": "autoshard.plan", "version": 1, "devices": 2, "tables": {"a": {"sharding_type": "row"}}}')
    with pytest.raises(AutoshardError, match="sharding_type"):
        Plan.load(str(p))


def test_report_lists_every_device(task):
    plan = _plan(task).with_cost(PlanCost.from_array([[1, 1, 1], [2, 2, 2], [0, 0, 0], [1, 0, 0]], "test"))
    text = format_report(plan, task, proxy=[1.0, 2.0, 3.0, 4.0])
    assert "plan cost (test): 6.000 ms on device 1" in text
    assert len(text.splitlines()) == 2 + 4 + 1
