"""Anchors (``costs.anchors``, ``pipeline.anchors``): the model corrected by the hottest tables' shards timed
alone, and the planners and bench rows that plan with it."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import make_tables

from autoshard.costs.analytical import AnalyticalCostModel
from autoshard.costs.anchors import AnchoredCostModel, anchor_deltas
from autoshard.costs.loading import resolve_cost_model
from autoshard.errors import AutoshardError
from autoshard.hardware.kernel import MeasureSettings
from autoshard.pipeline.anchors import Anchors, anchored_model, cut_widths, hot_shards, time_anchors
from autoshard.pipeline.measure import base_algorithm, parse_anchored, plan_task, select_algorithms
from autoshard.plan import validate
from autoshard.planners.base import PlannerOptions, make_planner, run_planner
from autoshard.shards import ShardRef
from autoshard.tasks import Task

SETTINGS = MeasureSettings(warmup=1, repeats=2, max_tries=1, rows_cap=5000)


def _task(devices: int = 4) -> Task:
    return Task(tables=tuple(make_tables(10, seed=3, dims=(8, 16, 32), max_rows=5000)),
                device_memory=(10**9,) * devices, batch_size=64, name="anchors")


def test_an_anchored_shard_adds_its_timing_not_the_models_price_and_nothing_else_moves():
    task, model = _task(), AnalyticalCostModel()
    t = 2
    whole, half = ShardRef(t, task.tables[t].dim), ShardRef(t, task.tables[t].dim // 2)
    alone = np.asarray(model.device_costs(task, [[whole], [half]]))[:, :2]
    timed = {whole: (alone[0, 0] + 1.0, alone[0, 1] + 3.0), half: (alone[1, 0], alone[1, 1] - 0.05)}
    deltas = anchor_deltas(task, model, timed)
    assert deltas[whole] == pytest.approx((1.0, 3.0)) and deltas[half] == pytest.approx((0.0, -0.05))
    anchored = AnchoredCostModel(model, deltas)
    other = ShardRef(5, task.tables[5].dim)
    devices = [[whole], [whole, other], [half, half], [other], [ShardRef(t, task.tables[t].dim, 0, 100)], []]
    got, base = anchored.device_costs(task, devices), np.asarray(model.device_costs(task, devices))
    # each anchored shard adds its delta once per copy on the device; other shards, a row piece of the same
    # table and the comm column stay the base's; an empty device costs nothing
    assert got[0, :2] == pytest.approx(base[0, :2] + (1.0, 3.0))
    assert got[1, :2] == pytest.approx(base[1, :2] + (1.0, 3.0))
    assert got[2, :2] == pytest.approx(base[2, :2] + (0.0, -0.1))
    assert got[3] == pytest.approx(base[3]) and got[4] == pytest.approx(base[4])
    assert got[:, 2] == pytest.approx(base[:, 2]) and np.all(got[5] == 0)
    # the accumulator agrees with device_costs; with_comm keeps the anchors; no spread, no risk pricing
    acc = anchored.accumulator(task, 1)
    acc.add(0, 1, whole)
    assert acc.costs_if_added(other)[0, 1] == pytest.approx(got[1])
    assert anchored.with_comm(model.comm).deltas == anchored.deltas
    assert resolve_cost_model(anchored) is anchored


def test_a_device_never_prices_below_zero_and_bad_anchors_are_one_line_errors():
    task, model = _task(), AnalyticalCostModel()
    whole = ShardRef(1, task.tables[1].dim)
    anchored = AnchoredCostModel(model, {whole: (-1e6, -1e6)})
    assert np.all(anchored.device_costs(task, [[whole]])[0, :2] == 0)
    for bad, match in (({ShardRef(1, task.tables[1].dim, 0, 10): (1.0, 1.0)}, "whole-row"),
                       ({ShardRef(1, task.tables[1].dim, replica=True): (1.0, 1.0)}, "whole-row"),
                       ({whole: (-1.0, 1.0)}, "negative")):
        with pytest.raises(AutoshardError, match=match) as info:
            anchor_deltas(task, model, bad)
        assert "\n" not in str(info.value)


def test_a_planner_cuts_the_table_its_anchors_say_is_dear_whole():
    task, model = _task(devices=4), AnalyticalCostModel()
    alone = np.asarray(model.device_costs(task, [[ShardRef(i, t.dim)] for i, t in enumerate(task.tables)]))
    before = run_planner(make_planner("search", PlannerOptions(seed=0, cost_model=model, time_limit_s=1.0)),
                         task)
    # the dearest table the model alone keeps whole
    whole = [i for i, t in enumerate(task.tables) if len(before.placement(t.name).shards) == 1]
    hot = max(whole, key=lambda i: float(alone[i, :2].sum()))
    # timed alone, whole, it takes the whole task's work again: no balance hides it, any cut avoids it
    total = float(alone[:, :2].sum())
    timed = (float(alone[hot, 0]), float(alone[hot, 1]) + total)
    anchors = Anchors({ShardRef(hot, task.tables[hot].dim): timed}, seconds=0.0)
    corrected = anchored_model(task, model, anchors)
    options = PlannerOptions(seed=0, cost_model=corrected, time_limit_s=1.0)
    after = run_planner(make_planner("search", options), task)
    validate(after, task)
    assert len(after.placement(task.tables[hot].name).shards) > 1


def test_cut_widths_follow_the_halving_and_hot_shards_take_the_dearest_tables():
    assert cut_widths(16, 8) == [16, 8, 4] and cut_widths(16, 2) == [16, 8]
    assert cut_widths(128, 8) == [128, 64, 32, 16] and cut_widths(24, 8) == [24, 12, 8, 4]
    assert cut_widths(6, 8) == [6] and cut_widths(16, 1) == [16]
    task, model = _task(), AnalyticalCostModel()
    shards = hot_shards(task, model, 2)
    alone = np.asarray(model.device_costs(task, [[ShardRef(i, t.dim)] for i, t in enumerate(task.tables)]))
    dearest = list(np.argsort(-alone[:, :2].sum(axis=1), kind="stable")[:2])
    assert [s.table for s in shards] == [t for t in dearest for _ in cut_widths(task.tables[t].dim, 4)]
    with pytest.raises(AutoshardError, match="at least 1"):
        hot_shards(task, model, 0)


def test_anchors_are_timed_on_the_real_kernels_and_a_bench_row_plans_with_them():
    task, model = _task(), AnalyticalCostModel()
    shards = hot_shards(task, model, 1)
    anchors = time_anchors(task, shards, SETTINGS, model.comm, rounds=2)
    assert set(anchors.timed) == set(shards) and all(f > 0 and b > 0 for f, b in anchors.timed.values())
    assert anchors.seconds > 0 and task.tables[shards[0].table].name in anchors.describe(task)
    options = PlannerOptions(seed=0, cost_model=model, time_limit_s=1.0)
    _, hot = plan_task(task, ("search", "search+hot1"), options, model, SETTINGS, model.comm)
    assert hot.ok and hot.algorithm == "search+hot1" and hot.plan is not None
    validate(hot.plan, task)
    assert hot.descent.startswith(f"anchors: {len(shards)} shards of 1 tables")
    assert hot.predicted is not None and hot.planning_time_s > 0


def test_anchored_row_names_parse_and_bad_ones_are_refused():
    assert parse_anchored("search+hot4") == ("search", 4) and parse_anchored("search") is None
    assert base_algorithm("rl+hot2") == "rl" and base_algorithm("ilp+top3+refit") == "ilp"
    assert select_algorithms(["search", "search+hot4"])[0] == ["search", "search+hot4"]
    for bad, match in (("search+hot0", "positive integer"), ("search+hotx", "positive integer"),
                       ("nope+hot2", "unknown algorithm")):
        with pytest.raises(AutoshardError, match=match):
            select_algorithms([bad])


def test_on_the_learned_model_the_batched_and_incremental_paths_price_as_device_costs_do():
    from autoshard.costs.learned.risk import RiskPricedModel
    from autoshard.costs.loading import default_cost_model
    from autoshard.planners.pricing import gathers

    task, base = _task(), default_cost_model()
    hot, other = ShardRef(2, task.tables[2].dim), ShardRef(5, task.tables[5].dim)
    half = ShardRef(2, task.tables[2].dim // 2)
    anchored = AnchoredCostModel(base, {hot: (0.3, 2.0), half: (-0.01, 0.4)})
    devices = [[hot, other], [half, half], [other], [ShardRef(7, task.tables[7].dim), hot]]
    want = anchored.device_costs(task, devices)
    assert want[0, :2] == pytest.approx(np.asarray(base.device_costs(task, devices))[0, :2] + (0.3, 2.0),
                                        rel=1e-5)
    # the planners' batched path: devices as ids into one shard list, grouped by device
    shards = [hot, other, half, ShardRef(7, task.tables[7].dim)]
    ids = {s: i for i, s in enumerate(shards)}
    members = np.array([ids[s] for dev in devices for s in dev])
    owner = np.repeat(np.arange(len(devices)), [len(dev) for dev in devices])
    assert gathers(anchored) and not gathers(AnchoredCostModel(AnalyticalCostModel(), {}))
    got = anchored.device_costs_gathered(task, shards, members, owner, len(devices))
    assert got == pytest.approx(want, rel=1e-4, abs=1e-6)
    # risk-priced: the same through device_costs and the incremental accumulator
    priced = RiskPricedModel(anchored, 0.5)
    at_risk = anchored.device_costs_risk(task, devices, 0.5)
    assert priced.device_costs(task, devices) == pytest.approx(at_risk, rel=1e-5)
    acc = priced.accumulator(task, 1)
    for device, dev in enumerate(devices[:task.num_devices]):
        for s in dev[:-1]:
            acc.add(0, device, s)
    for device, dev in enumerate(devices[:task.num_devices]):
        row = acc.costs_if_added(dev[-1])[0, device]
        assert row == pytest.approx(at_risk[device], rel=1e-4, abs=1e-6)
