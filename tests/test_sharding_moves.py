"""search's row-wise and data-parallel moves: taken only when the step cost drops, memory respected."""

from __future__ import annotations

from conftest import make_tables

from autoshard.costs.analytical import AnalyticalCostModel
from autoshard.costs.base import plan_cost
from autoshard.costs.comm import AlphaBeta
from autoshard.plan import Plan, ShardingType, validate
from autoshard.planners.base import PlannerOptions, make_planner, run_planner
from autoshard.planners.sharding_moves import improve, torchrec_row_wise
from autoshard.tables import Table
from autoshard.tasks import Task


def test_a_tiny_hot_table_becomes_replicas_on_a_fast_network_and_never_raises_the_cost():
    # a fast network (tiny latency) and one small, very hot table on a kernel-bound device
    model = AnalyticalCostModel(comm=AlphaBeta(0.001, 1.0e9, "fast"))
    tables = [Table("hot", 16, 200, 400.0)] + list(make_tables(7, seed=3, dims=(16,), max_rows=20000))
    task = Task(tuple(tables), (10**9,) * 4, batch_size=4096, name="moves")
    start = Plan.from_ranks(task, [0, 1, 2, 3, 0, 1, 2, 3], "start")
    before = plan_cost(model, task, start).plan_ms
    better, changes = improve(task, start, model, tries=8)
    validate(better, task)
    after = plan_cost(model, task, better).plan_ms
    assert after <= before
    assert changes and better.placement("hot").sharding_type in (ShardingType.DATA_PARALLEL,
                                                                  ShardingType.ROW_WISE)


def test_moves_respect_memory():
    model = AnalyticalCostModel(comm=AlphaBeta(0.001, 1.0e9, "fast"))
    tables = list(make_tables(6, seed=4, dims=(16,), max_rows=50000))
    need = max(Task(tuple(tables), (10**12,)).table_memory(t) for t in tables)
    task = Task(tuple(tables), (int(need * 2.2),) * 4, batch_size=1024, name="tight")
    plan = run_planner(make_planner("size_greedy", PlannerOptions()), task)
    # replicating every table would not fit a device, so the moves it makes had to be chosen within memory
    assert sum(task.table_memory(t) for t in tables) > task.device_memory[0]
    better, changes = improve(task, plan, model, tries=6)
    assert changes
    validate(better, task)


def test_torchrec_row_wise_blocks():
    p = torchrec_row_wise("t", 10, 16, 4)
    got = [(s.rank, s.row_start, s.row_end) for s in p.shards]
    assert got == [(0, 0, 3), (1, 3, 6), (2, 6, 9), (3, 9, 10)]
