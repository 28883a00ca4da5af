"""Column-wise sharding: splits add up in multiples of 4, plans of column shards validate and respect memory,
round-trip through JSON, and are priced shard by shard by the cost model."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoshard.costs.analytical import AnalyticalCostModel
from autoshard.costs.base import plan_cost
from autoshard.errors import AutoshardError, InfeasibleError
from autoshard.plan import COLUMN_SHARD_MULTIPLE, Plan, ShardingType, validate
from autoshard.planners.base import PlannerOptions, make_planner, run_planner
from autoshard.planners.column_split import (
    device_contents,
    even_split,
    from_plan,
    halve,
    shard_memory,
    split_shard,
    split_table,
    table_wise_layout,
    to_plan,
)
from autoshard.planners.neuroshard import NeuroShardConfig, NeuroShardPlanner
from autoshard.tables import Table
from autoshard.tasks import Task


@settings(max_examples=200, deadline=None)
@given(units=st.integers(1, 64), parts=st.integers(1, 16))
def test_even_split_adds_up_in_multiples_of_4(units, parts):
    dim = units * COLUMN_SHARD_MULTIPLE
    if parts > units:
        with pytest.raises(AutoshardError, match="cannot be split"):
            even_split(dim, parts)
        return
    dims = even_split(dim, parts)
    assert sum(dims) == dim and len(dims) == parts
    assert all(d > 0 and d % COLUMN_SHARD_MULTIPLE == 0 for d in dims)
    assert max(dims) - min(dims) <= COLUMN_SHARD_MULTIPLE


@pytest.mark.parametrize("dim, halves", [(8, (4, 4)), (12, (4, 8)), (24, (12, 12)), (128, (64, 64))])
def test_halve(dim, halves):
    assert halve(dim) == halves


@pytest.mark.parametrize("dim", [4, 6, 10, 3])
def test_halve_refuses_dims_that_cannot_split(dim):
    with pytest.raises(AutoshardError, match="cannot be halved"):
        halve(dim)


@st.composite
def split_plans(draw):
    """A random task, random column splits of its tables, and random distinct ranks per table's shards."""
    n, d = draw(st.integers(1, 8)), draw(st.integers(1, 5))
    tables = tuple(Table(f"t{i}", dim=draw(st.sampled_from([4, 8, 12, 16, 32, 64])),
                         rows=draw(st.integers(1, 10**5)), pooling_factor=draw(st.floats(0.0, 50.0)))
                   for i in range(n))
    layout = table_wise_layout(Task(tables=tables, device_memory=(1,) * d))
    for _ in range(draw(st.integers(0, 6))):
        ok = [p for p, s in enumerate(layout) if s.dim % 4 == 0 and s.dim >= 8
              and sum(x.table == s.table for x in layout) < d]
        if not ok:
            break
        layout = split_shard(layout, draw(st.sampled_from(ok)))
    ranks = []
    for i in range(n):
        k = sum(s.table == i for s in layout)
        ranks += draw(st.permutations(range(d)))[:k]
    return tables, d, layout, np.array(ranks)


@settings(max_examples=100, deadline=None)
@given(case=split_plans())
def test_column_shards_add_up_and_memory_is_per_shard(case):
    tables, d, layout, ranks = case
    # memory exactly what the shards need per device: valid; one byte less on the fullest device: refused
    probe = Task(tables=tables, device_memory=(10**12,) * d)
    need = np.bincount(ranks, weights=shard_memory(probe, layout), minlength=d).astype(np.int64)
    task = Task(tables=tables, device_memory=tuple(int(max(m, 1)) for m in need))
    plan = to_plan(task, layout, ranks, "test")
    validate(plan, task)
    for p in plan.placements:
        t = next(t for t in tables if t.name == p.table)
        assert sum(p.shard_dims) == t.dim
        if p.sharding_type is ShardingType.COLUMN_WISE:
            assert len(set(p.ranks)) == len(p.ranks) and all(x % 4 == 0 for x in p.shard_dims)
    assert plan.memory_used(task) == need.tolist()
    back_layout, back_ranks = from_plan(task, plan)
    assert back_layout == layout and back_ranks.tolist() == ranks.tolist()
    assert plan.device_shards(task) == device_contents(layout, ranks, d)
    fullest = int(np.argmax(need))
    if need[fullest] > 1:
        tight = list(task.device_memory)
        tight[fullest] -= 1
        with pytest.raises(AutoshardError, match=f"device {fullest} uses"):
            validate(plan, Task(tables=tables, device_memory=tuple(tight)))


@settings(max_examples=100, deadline=None)
@given(case=split_plans(), pick=st.integers(0, 7))
def test_splitting_a_table_halves_each_of_its_shards_in_place_and_leaves_the_rest(case, pick):
    tables, _, layout, _ = case
    table = pick % len(tables)
    mine = [s.dim for s in layout if s.table == table]
    if not all(d % 4 == 0 and d >= 8 for d in mine):
        with pytest.raises(AutoshardError, match="cannot be halved"):
            split_table(layout, table)
        return
    out = split_table(layout, table)
    assert [d for s in out if s.table == table for d in [s.dim]] == [x for d in mine for x in halve(d)]
    assert [s for s in out if s.table != table] == [s for s in layout if s.table != table]
    assert [s.table for s in out] == sorted(s.table for s in out)  # still a layout: sorted by table


def _needs_split() -> Task:
    """Three tables of 0.6 device each on 2 devices: no table-wise plan fits, halving one table does."""
    tables = tuple(Table(f"t{i}", 64, 10_000, 10.0 + i) for i in range(3))
    cap = int(Task(tables=tables, device_memory=(1,)).table_memory(tables[0]) / 0.6)
    return Task(tables=tables, device_memory=(cap, cap), name="needs-split")


def test_neuroshard_splits_a_table_when_table_wise_cannot_fit():
    task = _needs_split()
    with pytest.raises(InfeasibleError):
        run_planner(make_planner("size_lookup_greedy"), task)
    plan = run_planner(make_planner("neuroshard"), task)
    validate(plan, task)
    split = [p for p in plan.placements if p.sharding_type is ShardingType.COLUMN_WISE]
    assert split and all(sorted(p.ranks) == [0, 1] for p in split)


@pytest.mark.parametrize("algo", ["neuroshard", "search"])
def test_column_wise_plan_round_trips_and_is_priced_per_shard(tmp_path, algo):
    task = _needs_split()
    plan = run_planner(make_planner(algo, PlannerOptions(time_limit_s=5)), task)
    path = str(tmp_path / "plan.json")
    plan.save(path)
    back = Plan.load(path)
    assert back.placements == plan.placements
    validate(back, task)
    model = AnalyticalCostModel()
    cost = plan_cost(model, task, back)
    assert np.allclose(cost.to_array(), model.device_costs(task, back.device_shards(task)))
    assert any(s.dim < task.tables[s.table].dim for dev in back.device_shards(task) for s in dev)


@st.composite
def tight_tasks(draw) -> Task:
    n, d = draw(st.integers(1, 10)), draw(st.integers(1, 4))
    tables = tuple(Table(f"t{i}", dim=draw(st.sampled_from([4, 8, 16, 32, 64])),
                         rows=draw(st.integers(1, 10**5)), pooling_factor=draw(st.floats(0.0, 50.0)))
                   for i in range(n))
    total = sum(t.rows * t.dim * 4 for t in tables)
    biggest = max(t.rows * t.dim * 4 for t in tables)
    slack = draw(st.floats(0.4, 2.0))
    return Task(tables=tables, device_memory=tuple(max(biggest, int(total * slack / d)) for _ in range(d)))


@settings(max_examples=40, deadline=None)
@given(task=tight_tasks())
def test_neuroshard_plans_validate_or_raise_clear_infeasible(task):
    planner = NeuroShardPlanner(config=NeuroShardConfig(max_depth=3, cap_steps=3))
    try:
        plan = run_planner(planner, task)
    except InfeasibleError as e:
        assert "\n" not in str(e) and "give more memory" in str(e)
        return
    validate(plan, task)
    assert all(u <= c for u, c in zip(plan.memory_used(task), task.device_memory))
