"""The learned model's price of a plan with one table's placement swapped (``costs.learned.swaps``) is the
price of that plan made whole, device by device, for every kind of placement, on devices inside and outside
the support."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from conftest import make_tables

from autoshard.costs.base import plan_cost
from autoshard.costs.learned.model import LearnedCostModel
from autoshard.costs.learned.risk import risk_priced
from autoshard.costs.loading import SHIPPED_COST_MODEL
from autoshard.plan import Plan, ShardingType, TablePlacement
from autoshard.planners.sharding_moves import improve, torchrec_row_wise
from autoshard.shards import column_shards
from autoshard.tables import Table
from autoshard.tasks import Task

REL = 1e-5
"""float32 sums in another order: the prices agree to about 1e-7 relative."""


@pytest.fixture(scope="module")
def shipped() -> LearnedCostModel:
    return LearnedCostModel.load(SHIPPED_COST_MODEL, allow_other_hardware=True)


@pytest.fixture(scope="module")
def task() -> Task:
    # the pooling-300 table "wide" lies outside the shipped model's support (its devices are priced by the
    # hand-over), and so does a column shard narrower than its least dim, 4
    tables = [*make_tables(14, seed=5, dims=(16, 32, 64), max_rows=200_000), Table("wide", 64, 50_000, 300.0)]
    return Task(tuple(tables), (10**11,) * 8, batch_size=4096, name="swaps")


def _plan(task: Task) -> Plan:
    # device 0 holds "wide" beside two tables; device 7 holds table 13 alone
    return Plan.from_ranks(task, [0, 1, 2, 3, 4, 5, 6, 0, 1, 2, 3, 4, 5, 7, 0], "start")


def _placements(task: Task) -> list[TablePlacement]:
    hot, wide, t5, t13 = task.tables[0], task.tables[-1], task.tables[5], task.tables[13]
    d = task.num_devices
    return [
        torchrec_row_wise(hot.name, hot.rows, hot.dim, d),  # a shard joins every device
        TablePlacement.data_parallel(task.tables[3].name, range(d), task.tables[3].dim),
        TablePlacement(t5.name, ShardingType.COLUMN_WISE, column_shards([2, 3], [2, t5.dim - 2])),  # dim 2
        TablePlacement(wide.name, ShardingType.COLUMN_WISE, column_shards([6, 1], [32, 32])),  # 0 comes in
        TablePlacement(t13.name, ShardingType.TABLE_WISE, column_shards([2], [t13.dim])),  # 7 left empty
    ]


def _swapped(plan: Plan, placement: TablePlacement) -> Plan:
    return replace(plan, placements=tuple(placement if p.table == placement.table else p
                                          for p in plan.placements))


def _check(model, task: Task, plan: Plan) -> None:
    swaps = model.placement_swaps(task, plan)
    for placement in _placements(task):
        whole = _swapped(plan, placement)
        expected = model.device_costs(task, whole.device_shards(task))
        np.testing.assert_allclose(swaps.device_costs(placement), expected, rtol=REL, err_msg=placement.table)
        assert swaps.step_ms(placement) == pytest.approx(plan_cost(model, task, whole).plan_ms, rel=REL)


@pytest.mark.parametrize("risk", [0.0, 1.0])
def test_a_swapped_placement_is_priced_as_the_whole_swapped_plan(shipped, task, risk):
    plan = _plan(task)
    outside = {d for d, _ in shipped.out_of_support(task, plan.device_shards(task))}
    assert outside == {0}, "device 0 should be priced by the hand-over"
    _check(risk_priced(shipped, risk), task, plan)


def test_kept_swaps_chain_and_leave_the_states_they_came_from(shipped, task):
    model = risk_priced(shipped, 1.0)
    plan = _plan(task)
    swaps = model.placement_swaps(task, plan)
    first, second = _placements(task)[0], _placements(task)[3]
    before = swaps.device_costs(second)
    both = swaps.swapped(first)
    expected = model.device_costs(task, _swapped(_swapped(plan, first), second).device_shards(task))
    np.testing.assert_allclose(both.device_costs(second), expected, rtol=REL)
    np.testing.assert_array_equal(swaps.device_costs(second), before)


def test_unverified_split_shards_keep_their_spread_floor_when_swapped(shipped, task):
    # a model adapted to a machine where it saw no split shard: a device holding one is priced at a spread
    # of at least UNVERIFIED_SPLIT_REL of its cost, which comes and goes with the shard
    blind = shipped._replace(info={**shipped.info, "split_kinds_seen": []})
    assert blind.unverified_split_kinds == {"column", "row"}
    model = risk_priced(blind, 1.0)
    plan = _swapped(_plan(task), _placements(task)[2])  # devices 2 and 3 hold column shards of table 5
    assert not np.allclose(model.device_costs(task, plan.device_shards(task)),
                           risk_priced(shipped, 1.0).device_costs(task, plan.device_shards(task)))
    _check(model, task, plan)
    t5 = task.tables[5]
    back = TablePlacement(t5.name, ShardingType.TABLE_WISE, column_shards([5], [t5.dim]))
    swaps = model.placement_swaps(task, plan)
    expected = model.device_costs(task, _swapped(plan, back).device_shards(task))
    np.testing.assert_allclose(swaps.device_costs(back), expected, rtol=REL)


def test_the_moves_choose_as_with_whole_plans(shipped, task):
    # the same moves and the same step as pricing every candidate plan whole (the route of ``improve`` for a
    # model without ``placement_swaps``)
    model = risk_priced(shipped, 1.0)
    plan = _plan(task)

    class Whole:
        """The model without its ``placement_swaps``."""

        name, comm, row_move_margin = model.name, model.comm, model.row_move_margin

        def device_costs(self, t, devices):
            return model.device_costs(t, devices)

    fast, fast_changes = improve(task, plan, model, tries=8)
    slow, slow_changes = improve(task, plan, Whole(), tries=8)
    assert fast_changes, "no move was kept: the test would compare nothing"
    assert [c.split(" (")[0] for c in fast_changes] == [c.split(" (")[0] for c in slow_changes]
    assert fast.placements == slow.placements
    assert np.isclose(plan_cost(model, task, fast).plan_ms, plan_cost(model, task, slow).plan_ms, rtol=REL)
