"""The common last stage of ``ilp`` and ``rl`` (``planners.finish``): the solve kept is the one the model
prices cheaper *after* the sharding moves, and the descent that follows moves the table- and column-wise
shards around the row-wise shards and replicas the moves made, never dearer by the model."""

from __future__ import annotations

import time

import pytest
from conftest import make_tables

from autoshard.costs.analytical import AnalyticalCostModel
from autoshard.costs.base import plan_cost
from autoshard.costs.comm import AlphaBeta
from autoshard.plan import Plan, ShardingType, TablePlacement, validate
from autoshard.planners.descent import refine_plan
from autoshard.planners.finish import Descent, finish, whole_and_split
from autoshard.planners.row_split import torchrec_row_wise
from autoshard.planners.sharding_moves import improve
from autoshard.tables import Table
from autoshard.tasks import Task

MODEL = AnalyticalCostModel(comm=AlphaBeta(0.001, 1.0e9, "fast"))


def _hot_task() -> Task:
    # one hot table: held whole it is the bottleneck (97 ms by MODEL), split in two columns less so (70 ms),
    # replicated on every device least (34 ms with the other moves): the moves reverse the order
    return Task((Table("hot", 64, 1_000_000, 100.0), *make_tables(7, 11)), (10**10,) * 4, batch_size=4096,
                name="hot")


def _solves(task: Task) -> tuple[Plan, Plan]:
    whole = Plan.from_ranks(task, [0, 1, 2, 3, 1, 2, 3, 1], "ilp")
    split = Plan((TablePlacement.column_wise("hot", [0, 1], [32, 32]), *whole.placements[1:]), 4, "ilp",
                 task.name)
    return whole, split


def _ms(task: Task, plan: Plan) -> float:
    return plan_cost(MODEL, task, plan).plan_ms


def test_the_solve_kept_is_the_one_cheaper_after_the_sharding_moves():
    task = _hot_task()
    whole, split = _solves(task)
    assert _ms(task, split) < _ms(task, whole)  # before the moves the column shards look better
    moved_whole = improve(task, whole, MODEL, 8)[0]
    moved_split = improve(task, split, MODEL, 8)[0]
    assert _ms(task, moved_whole) < _ms(task, moved_split)  # after them, whole tables are
    finished = finish(task, MODEL, whole_and_split(whole, split), "ilp", moves=8)
    validate(finished.plan, task)
    assert finished.plan.placement("hot").sharding_type is not ShardingType.COLUMN_WISE
    assert _ms(task, finished.plan) == pytest.approx(_ms(task, moved_whole))
    (label, other), = finished.alternatives  # the guard weighs the other solve, with its moves
    assert label == "column-shard"
    assert other.placement("hot").sharding_type is ShardingType.COLUMN_WISE
    assert _ms(task, other) == pytest.approx(_ms(task, moved_split))
    # without moves the order before them stands
    assert finish(task, MODEL, whole_and_split(whole, split), "ilp", moves=0).plan == split
    # one solve: nothing else to weigh
    assert finish(task, MODEL, whole_and_split(whole, None), "ilp", moves=8).alternatives == ()


def test_the_descent_after_the_moves_keeps_their_shards_and_never_makes_the_step_dearer():
    task = _hot_task()
    whole, split = _solves(task)
    solves = whole_and_split(whole, split)
    moved = finish(task, MODEL, solves, "ilp", moves=8).plan
    finished = finish(task, MODEL, solves, "ilp", moves=8, descent=Descent(time.perf_counter() + 30, 0, 5))
    descended = finished.plan
    validate(descended, task)
    assert descended.algorithm == "ilp"
    assert _ms(task, descended) <= _ms(task, moved) * (1 + 1e-9)
    assert [p.table for p in descended.placements] == [t.name for t in task.tables]


def test_refine_plan_moves_whole_tables_around_row_wise_shards_it_leaves_in_place():
    # 12 tables badly placed (all on rank 0 but the row-wise one): the descent has room, the row shards stay
    tables = tuple(make_tables(12, seed=4))
    task = Task(tables, (10**10,) * 4, batch_size=4096, name="rows")
    rows = torchrec_row_wise(tables[0].name, tables[0].rows, tables[0].dim, 4)
    start = Plan((rows, *Plan.from_ranks(task, [0] * 12, "rl").placements[1:]), 4, "rl", task.name)
    validate(start, task)
    refined, _ = refine_plan(task, MODEL, start, time.perf_counter() + 30, seed=0, kicks=0, who="rl")
    validate(refined, task)
    assert refined.placement(tables[0].name) == rows
    assert _ms(task, refined) < _ms(task, start)
    assert len({p.shards[0].rank for p in refined.placements[1:]}) > 1


def test_refine_plan_with_nothing_to_move_returns_the_plan_as_it_is():
    tables = tuple(make_tables(3, seed=2))
    task = Task(tables, (10**10,) * 2, batch_size=512, name="replicas")
    plan = Plan(tuple(TablePlacement.data_parallel(t.name, range(2), t.dim) for t in tables), 2, "search",
                task.name)
    refined, what = refine_plan(task, MODEL, plan, time.perf_counter() + 5, seed=0, kicks=3, who="search")
    assert refined.placements == plan.placements and what.steps == 0 and what.kicks == 0
