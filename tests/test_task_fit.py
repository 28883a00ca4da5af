"""The task fit (``costs.task_fit``): a model corrected by one task's measured devices."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import make_tables

from autoshard.costs.analytical import AnalyticalCostModel
from autoshard.costs.base import plan_cost
from autoshard.costs.loading import resolve_cost_model
from autoshard.costs.task_fit import TaskFitModel, fit_task
from autoshard.errors import AutoshardError
from autoshard.plan import validate
from autoshard.planners.base import PlannerOptions, make_planner, run_planner
from autoshard.shards import ShardRef
from autoshard.tasks import Task


def _task() -> Task:
    return Task(tables=tuple(make_tables(10, seed=3, dims=(8, 16, 32), max_rows=5000)),
                device_memory=(10**9,) * 4, batch_size=64, name="fit")


def _devices(task: Task, n: int, seed: int) -> list[list[ShardRef]]:
    """``n`` random device contents of 1-4 whole tables."""
    rng = np.random.default_rng(seed)
    return [[ShardRef(int(t), task.tables[int(t)].dim)
             for t in sorted(rng.choice(task.num_tables, size=int(rng.integers(1, 5)), replace=False))]
            for _ in range(n)]


def _truth(task: Task, model, devices, level=(0.9, 1.4), hot=(2, 3.0)) -> np.ndarray:
    """A 'host' that runs every device at ``level`` of the model per stage, and table ``hot[0]`` ``hot[1]``
    times dearer than the model says (its part of each device scaled)."""
    alone = {}
    out = np.asarray(model.device_costs(task, devices), dtype=np.float64)[:, :2] * np.asarray(level)
    for n, dev in enumerate(devices):
        for s in dev:
            alone.setdefault(s, np.asarray(model.device_costs(task, [[s]]))[0, :2])
        if any(s.table == hot[0] for s in dev):
            part = sum(alone[s] for s in dev if s.table == hot[0]) / sum(alone[s] for s in dev)
            out[n] *= 1 + (hot[1] - 1) * part
    return out


def test_the_fit_learns_the_hosts_level_and_a_mispriced_table_and_predicts_unseen_devices_better():
    task, model = _task(), AnalyticalCostModel()
    seen, unseen = _devices(task, 30, seed=0), _devices(task, 30, seed=1)
    fit = fit_task(task, model, seen, _truth(task, model, seen), ridge=0.1)
    assert fit.devices == len({tuple(sorted(d)) for d in seen})
    # the mispriced table gets the largest factor in both stages; the level moves towards the host's
    assert max(fit.factors, key=lambda t: fit.factors[t][1]) == 2
    corrected = TaskFitModel(model, fit)
    truth = _truth(task, model, unseen)
    before = np.abs(np.asarray(model.device_costs(task, unseen))[:, :2] / truth - 1).mean()
    after = np.abs(np.asarray(corrected.device_costs(task, unseen))[:, :2] / truth - 1).mean()
    assert after < 0.5 * before
    # the devices' own comm column stays the base model's; an empty device costs nothing
    got = corrected.device_costs(task, [unseen[0], []])
    assert got[0, 2] == pytest.approx(np.asarray(model.device_costs(task, [unseen[0]]))[0, 2])
    assert np.all(got[1] == 0)


def test_a_table_never_measured_keeps_the_level_alone_and_a_column_shard_its_tables_factor():
    task, model = _task(), AnalyticalCostModel()
    seen = [d for d in _devices(task, 30, seed=0) if all(s.table != 7 for s in d)]
    fit = fit_task(task, model, seen, _truth(task, model, seen, hot=(2, 3.0)))
    assert 7 not in fit.factors
    corrected = TaskFitModel(model, fit)
    alone = [ShardRef(7, task.tables[7].dim)]
    def ratio(dev):
        return corrected.device_costs(task, [dev])[0, :2] / np.asarray(model.device_costs(task, [dev]))[0, :2]

    assert ratio(alone) == pytest.approx(np.exp(fit.level))
    half = [ShardRef(2, task.tables[2].dim // 2)]
    assert ratio(half) == pytest.approx(np.exp(np.asarray(fit.level) + np.asarray(fit.factors[2])))


def test_a_planner_plans_with_the_fitted_model_and_a_model_without_spread_stays_unpriced():
    task, model = _task(), AnalyticalCostModel()
    seen = _devices(task, 20, seed=0)
    corrected = TaskFitModel(model, fit_task(task, model, seen, _truth(task, model, seen)))
    assert resolve_cost_model(corrected) is corrected  # no spread: no risk pricing
    plan = run_planner(make_planner("search", PlannerOptions(seed=0, cost_model=corrected, time_limit_s=1.0)),
                       task)
    validate(plan, task)
    assert plan_cost(corrected, task, plan).plan_ms > 0
    assert corrected.with_comm(model.comm).fit == corrected.fit


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"ridge": 0.0}, "ridge"),
    ({"measured": np.ones((2, 2))}, "one \\(fwd, bwd\\) row per device"),
    ({"devices": [[], []], "measured": np.ones((2, 2))}, "no measured device holds a shard"),
])
def test_bad_fit_input_is_a_one_line_error(kwargs, match):
    task, model = _task(), AnalyticalCostModel()
    devices = _devices(task, 3, seed=0)
    args = {"devices": devices, "measured": np.ones((3, 2)), **kwargs}
    with pytest.raises(AutoshardError, match=match) as info:
        fit_task(task, model, args.pop("devices"), args.pop("measured"), **args)
    assert "\n" not in str(info.value)
