"""The exact (CP-SAT) planner: optimal on its own additive objective, valid or clearly infeasible, and the
lower bound it reports (and ``lower_bound``) never exceeds the cost of any plan."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from conftest import make_tables
from hypothesis import given, settings
from hypothesis import strategies as st

from autoshard.costs.analytical import AnalyticalCostModel
from autoshard.costs.base import plan_cost
from autoshard.costs.loading import default_cost_model, resolve_cost_model
from autoshard.errors import AutoshardError, InfeasibleError
from autoshard.plan import validate
from autoshard.planners.base import PlannerOptions, make_planner, run_planner
from autoshard.planners.column_split import from_plan
from autoshard.planners.exact import (
    ExactConfig,
    ExactPlanner,
    linear_costs,
    lower_bound,
    piece_widths,
    stage_floor,
)
from autoshard.shards import ShardRef
from autoshard.tables import Table
from autoshard.tasks import Task

HEURISTICS = ["random", "round_robin", "dim_greedy", "lookup_greedy", "size_greedy", "size_lookup_greedy"]
MODEL = AnalyticalCostModel()


@st.composite
def small_tasks(draw) -> Task:
    """Small enough for CP-SAT to prove optimality in well under a second."""
    n, d = draw(st.integers(1, 9)), draw(st.integers(1, 3))
    tables = tuple(Table(f"t{i}", dim=draw(st.sampled_from([4, 8, 16, 32, 64])),
                         rows=draw(st.integers(1, 10**6)), pooling_factor=draw(st.floats(0.0, 100.0)))
                   for i in range(n))
    total = sum(t.rows * t.dim * 4 for t in tables)
    biggest = max(t.rows * t.dim * 4 for t in tables)
    caps = tuple(max(biggest, int(total * draw(st.floats(0.3, 2.0)) / d)) for _ in range(d))
    return Task(tables=tables, device_memory=caps)


def _ranks(task, plan) -> np.ndarray:
    return from_plan(task, plan)[1]


@settings(max_examples=40, deadline=None)
@given(task=small_tasks(), seed=st.integers(0, 3))
def test_ilp_optimum_never_worse_than_any_heuristic_on_its_objective(task, seed):
    planner = ExactPlanner(MODEL, ExactConfig(sharding_moves=0, column_splits="off", refine_share=0),
                           time_limit_s=20, seed=seed)  # the table-wise ILP alone
    try:
        plan = run_planner(planner, task)
    except InfeasibleError as e:
        assert "\n" not in str(e) and ("proved" in str(e) or "short by" in str(e))
        for name in HEURISTICS:  # then no heuristic can have a plan either
            with pytest.raises(InfeasibleError):
                run_planner(make_planner(name, PlannerOptions(seed=seed)), task)
        return
    result = planner.last_result
    assert result.status == "optimal"
    costs = linear_costs(task, MODEL)
    assert costs.objective(_ranks(task, plan), task.num_devices) == pytest.approx(result.objective_ms,
                                                                                  rel=1e-12)
    assert result.lower_bound_ms <= result.objective_ms and result.gap < 1e-4
    for name in HEURISTICS:
        try:
            other = run_planner(make_planner(name, PlannerOptions(seed=seed)), task)
        except InfeasibleError:
            continue
        assert result.objective_ms <= costs.objective(_ranks(task, other), task.num_devices) * (1 + 1e-9)


def test_linearisation_is_exact_for_the_roofline_model():
    task = Task(tables=tuple(make_tables(25, seed=6, dims=(8, 16, 64))), device_memory=(10**10,) * 4)
    costs = linear_costs(task, MODEL)
    rng = np.random.default_rng(0)
    for _ in range(5):
        plan = run_planner(make_planner("random", PlannerOptions(seed=int(rng.integers(100)))), task)
        ranks = _ranks(task, plan)
        # exact for the slowest device's fwd + bwd + own comm, which the step cost never undercuts
        cost = plan_cost(MODEL, task, plan)
        assert costs.objective(ranks, 4) == pytest.approx(max(d.total_ms for d in cost.devices), rel=1e-9)
        assert cost.plan_ms >= costs.objective(ranks, 4) * (1 - 1e-9)


def test_infeasible_is_one_clear_line():
    tables = tuple(Table(f"t{i}", 64, 10_000, 1.0) for i in range(3))
    cap = int(Task(tables=tables, device_memory=(1,)).table_memory(tables[0]) * 1.5)
    with pytest.raises(InfeasibleError, match="ilp: CP-SAT proved that no table-wise placement"):
        run_planner(make_planner("ilp", PlannerOptions(extra={"column_splits": "off"})),
                    Task(tables=tables, device_memory=(cap, cap)))


def test_column_shards_plan_where_whole_tables_do_not_fit():
    # three tables of 1 unit on two devices of 1.5 units: no table-wise placement fits, halves do
    tables = tuple(Table(f"t{i}", 64, 10_000, 1.0) for i in range(3))
    cap = int(Task(tables=tables, device_memory=(1,)).table_memory(tables[0]) * 1.5)
    task = Task(tables=tables, device_memory=(cap, cap))
    plan = run_planner(make_planner("ilp", PlannerOptions(cost_model=MODEL, time_limit_s=5,
                                                          extra={"column_splits": "on"})), task)
    validate(plan, task)
    assert any(len(p.ranks) > 1 for p in plan.placements)


def test_column_splits_never_make_the_plan_dearer_by_the_model():
    task = Task(tables=tuple(make_tables(12, seed=4, dims=(32, 64, 128))), device_memory=(10**10,) * 4)
    plans = {mode: run_planner(make_planner("ilp", PlannerOptions(cost_model=MODEL, time_limit_s=4, extra={
        "column_splits": mode, "sharding_moves": 0})), task) for mode in ("off", "on")}
    off, on = (plan_cost(MODEL, task, plans[m]).plan_ms for m in ("off", "on"))
    assert on <= off * (1 + 1e-9)
    for plan in plans.values():
        validate(plan, task)



def test_ilp_hands_the_guard_the_solve_it_did_not_keep():
    from autoshard.costs.comm import AlphaBeta
    from autoshard.plan import ShardingType

    # one wide, hot table dominates a device unless it is split by columns over the others
    model = AnalyticalCostModel(comm=AlphaBeta(0.001, 1.0e9, "fast"))
    tables = (Table("wide", 256, 100_000, 60.0), *make_tables(7, 11))
    task = Task(tables, (10**10,) * 4, batch_size=4096, name="wide")

    def ilp(mode: str):
        planner = make_planner("ilp", PlannerOptions(cost_model=model, time_limit_s=4, extra={
            "column_splits": mode, "sharding_moves": 0}))
        return planner, run_planner(planner, task)

    planner, plan = ilp("on")
    assert plan.placement("wide").sharding_type is ShardingType.COLUMN_WISE
    (label, whole), = planner.last_alternatives
    validate(whole, task)
    assert label == "whole-table"
    assert all(p.sharding_type is ShardingType.TABLE_WISE for p in whole.placements)
    assert plan_cost(model, task, whole).plan_ms >= plan_cost(model, task, plan).plan_ms
    planner, _ = ilp("off")  # one solve: nothing else to weigh
    assert planner.last_alternatives == ()

def test_bad_column_splits_setting_is_one_clear_line():
    with pytest.raises(AutoshardError, match="column_splits='sometimes' must be auto, on or off"):
        make_planner("ilp", PlannerOptions(extra={"column_splits": "sometimes"}))


def test_descent_after_the_solve_never_makes_the_step_dearer():
    # dims 16-256: the per-device sum the ILP minimises differs from the step (max fwd + max bwd +
    # collectives), so the descent on the step has room (here 79.0 -> 76.5 ms); small enough that both
    # solves prove optimality, so the descent starts from the plan it is compared with
    task = Task(tables=tuple(make_tables(12, seed=5, dims=(16, 64, 256))), device_memory=(10**10,) * 4)
    costs = {}
    for share in (0, 0.5):
        planner = make_planner("ilp", PlannerOptions(cost_model=MODEL, time_limit_s=4, extra={
            "column_splits": "off", "sharding_moves": 0, "refine_share": share}))
        plan = run_planner(planner, task)
        validate(plan, task)
        assert planner.last_result.status == "optimal"
        costs[share] = plan_cost(MODEL, task, plan).plan_ms
    assert costs[0.5] <= costs[0] * (1 + 1e-9)


@pytest.mark.parametrize("setting, message", [("refine_share=1", r"refine_share=1(\.0)? must be in \[0, 1\)"),
                                              ("refine_kicks=-1", "refine_kicks=-1 must be at least 0")])
def test_bad_refine_setting_is_one_clear_line(setting, message):
    key, value = setting.split("=")
    with pytest.raises(AutoshardError, match=message):
        make_planner("ilp", PlannerOptions(extra={key: value}))


def test_lower_bound_below_every_planner():
    task = Task(tables=tuple(make_tables(16, seed=8, dims=(16, 32, 64, 128))), device_memory=(10**10,) * 4)
    bound = lower_bound(task, MODEL)
    table_wise_bound = lower_bound(task, MODEL, column_wise=False, time_limit_s=2)
    assert bound > 0 and table_wise_bound >= bound
    for name in ["neuroshard", "search", "ilp", *HEURISTICS]:
        options = PlannerOptions(cost_model=MODEL, time_limit_s=3,
                                 extra={"kicks": 2} if name == "search" else {})
        plan = run_planner(make_planner(name, options), task)
        cost = plan_cost(MODEL, task, plan).plan_ms
        assert bound <= cost * (1 + 1e-9), name
        column_wise = any(len(p.ranks) > 1 for p in plan.placements)
        if not column_wise:
            assert table_wise_bound <= cost * (1 + 1e-9), name


def test_ilp_plan_validates_and_reports_gap():
    task = Task(tables=tuple(make_tables(30, seed=9, dims=(16, 32, 64))), device_memory=(10**10,) * 4)
    planner = make_planner("ilp", PlannerOptions(cost_model=MODEL, time_limit_s=1,
                                                 extra={"column_splits": "off", "refine_share": 0}))
    plan = run_planner(planner, task)
    validate(plan, task)
    r = planner.last_result
    assert 0 <= r.gap < 1 and r.lower_bound_ms <= r.objective_ms
    assert r.status in ("optimal", "feasible")
    cost = plan_cost(MODEL, task, plan)
    assert max(d.total_ms for d in cost.devices) == pytest.approx(r.objective_ms, rel=1e-9)
    assert cost.plan_ms >= r.objective_ms * (1 - 1e-9)


@pytest.mark.parametrize(("dim", "devices", "ways"), [
    (16, 8, [(2, 8, 8), (4, 4, 4)]),
    (16, 3, [(2, 8, 8)]),
    (20, 8, [(2, 12, 8), (3, 8, 4), (5, 4, 4)]),
    (128, 2, [(2, 64, 64)]),
    (4, 8, []),
    (6, 8, []),
    (16, 1, []),
])
def test_piece_widths_cut_a_dim_into_multiples_of_4_on_the_devices_there_are(dim, devices, ways):
    assert piece_widths(dim, devices) == ways
    for count, widest, last in ways:
        assert (count - 1) * widest + last == dim and 0 < last <= widest and widest % 4 == 0
        assert count <= devices


def _hot_task(dim: int) -> Task:
    light = make_tables(7, seed=3, max_rows=10**5)
    hot = Table("hot", dim=dim, rows=10**6, pooling_factor=200.0, lookups=light[0].lookups)
    return Task(tables=(hot, *light), device_memory=(10**10,) * 8)


def test_lower_bound_prices_a_hot_tables_column_shards_as_the_model_does():
    """One dim-16 table of 200 lookups a sample beside 7 light ones on 8 devices. The shipped model prices
    its 4-wide quarter at well over a quarter of it (a lookup reads a cache line either way), so the estimate
    keeps over half the table where it used to take a quarter; the roofline model's shards scale with their
    width, so there a dim-128 table's shards bring the estimate below the table-wise one, and it stays below
    what the column-splitting planners find."""
    learned = resolve_cost_model(default_cost_model())
    task = _hot_task(16)
    costs = linear_costs(task, learned)
    hot = costs.weights_ms[0]
    assert hot > costs.weights_ms.sum() / 8  # heavier than the average: its pieces are priced
    even_division = costs.overhead_ms + max(costs.weights_ms.sum() / 8, hot / 4)
    bound = lower_bound(task, learned)
    assert bound - costs.overhead_ms > 0.5 * hot and bound > even_division
    assert bound <= lower_bound(task, learned, column_wise=False)

    task = _hot_task(128)
    split, whole = lower_bound(task, MODEL), lower_bound(task, MODEL, column_wise=False)
    assert split < whole
    for name in ("neuroshard", "ilp"):
        plan = run_planner(make_planner(name, PlannerOptions(cost_model=MODEL, time_limit_s=2)), task)
        assert split <= plan_cost(MODEL, task, plan).plan_ms * (1 + 1e-9), name


def test_stage_floor_is_below_every_plans_slowest_device_per_stage():
    """The hot dim-128 table's column shards (the roofline model prices them by width) bring each stage's
    floor below the whole table alone; every planner's plan, column-wise ones included, has a device at
    least that slow in each stage; a table that cannot be split (dim 6) keeps its whole time."""
    task = _hot_task(128)
    floor = stage_floor(task, MODEL)
    whole = MODEL.device_costs(task, [[ShardRef(0, 128)]])[0]
    assert 0 < floor.fwd_ms < whole[0] and 0 < floor.bwd_ms < whole[1]
    split_plans = 0
    for name in ["neuroshard", "ilp", "search", *HEURISTICS]:
        options = PlannerOptions(cost_model=MODEL, time_limit_s=2,
                                 extra={"kicks": 2} if name == "search" else {})
        plan = run_planner(make_planner(name, options), task)
        split_plans += any(len(p.ranks) > 1 for p in plan.placements)
        cost = plan_cost(MODEL, task, plan)
        assert cost.max_fwd_ms >= floor.fwd_ms * (1 - 1e-9) and cost.max_bwd_ms >= floor.bwd_ms * (1 - 1e-9)
    assert split_plans  # the floor was tested against column shards too

    odd = Task(tables=(replace(task.tables[0], dim=6), *task.tables[1:]), device_memory=task.device_memory)
    floor = stage_floor(odd, MODEL)
    alone = MODEL.device_costs(odd, [[ShardRef(i, t.dim)] for i, t in enumerate(odd.tables)])
    assert floor.fwd_ms == pytest.approx(alone[:, 0].max())
    assert floor.bwd_ms == pytest.approx(alone[:, 1].max())
