"""The room report (``autoshard.bench.room``): each measured plan's step with its work spread perfectly,
never above the plan itself, and the bench recording the stage floor it needs."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import make_tables

from autoshard.bench.report import room_lines
from autoshard.bench.room import (
    ROOM_THRESHOLD,
    balanced_collective_ms,
    cut_floor_terms,
    least_shard_bytes,
    plan_floor_ms,
    plan_floor_terms,
    room_summary,
    task_floor_ms,
)
from autoshard.breakdown import CollectiveCost, CostBreakdown, PlanCost, StageFloor
from autoshard.costs.analytical import AnalyticalCostModel
from autoshard.io import read_json
from autoshard.pipeline.measure import BenchConfig, run_bench
from autoshard.pipeline.results import TaskResult
from autoshard.plan import Plan, TablePlacement
from autoshard.planners.base import PlannerOptions
from autoshard.planners.exact import stage_floor
from autoshard.shards import ShardRef
from autoshard.tasks import Task

RUNS = Path(__file__).resolve().parents[1] / "benchmarks" / "runs"
LEARNED = ("rl", "neuroshard", "search", "ilp")


def _collective(sent, received, ms=3.0, modelled=3.0, name="input_ids") -> CollectiveCost:
    return CollectiveCost(name, "fwd", ms, tuple(sent), tuple(received), modelled)


def test_a_collective_is_cut_to_its_mean_or_the_largest_tables_bytes_and_keeps_its_latency():
    even = _collective([4.0, 4.0], [4.0, 4.0])
    assert balanced_collective_ms(even, alpha_ms=1.0) == pytest.approx(3.0)
    skewed = _collective([6.0, 2.0], [2.0, 6.0])  # mean 4 of a busiest 6: the bytes' 2 ms become 4/3
    assert balanced_collective_ms(skewed, alpha_ms=1.0) == pytest.approx(1.0 + 2.0 * 4 / 6)
    assert balanced_collective_ms(skewed) == pytest.approx(3.0 * 4 / 6)  # no latency: the lowest floor
    assert balanced_collective_ms(skewed, least_bytes=5.0, alpha_ms=1.0) == pytest.approx(1.0 + 2.0 * 5 / 6)
    measured = _collective([6.0, 2.0], [2.0, 6.0], ms=1.5)  # measured at half the model: the same ratio
    assert balanced_collective_ms(measured, alpha_ms=1.0) == pytest.approx(1.5 * (1.0 + 2.0 * 4 / 6) / 3.0)
    bucketise = _collective([0.0, 0.0], [0.0, 0.0], ms=0.7, modelled=0.7, name="row_bucketize")
    assert balanced_collective_ms(bucketise, alpha_ms=1.0) == 0.7


def test_the_largest_tables_holder_must_receive_all_its_ids_and_send_its_narrowest_shards_outputs():
    task = Task(tables=tuple(make_tables(5, seed=2, dims=(16, 32))), device_memory=(10**9,) * 4,
                batch_size=400)
    least = least_shard_bytes(task)
    ids = max(t.pooling_factor * 8 + 4 for t in task.tables)
    assert least["ids"] == pytest.approx(3 * 100 * ids)  # 3 other ranks' 100 samples each
    assert least["outputs"] == pytest.approx(3 * 100 * 4 * 8)  # dim 32 cut in 4: 8 wide
    one = Task(tables=task.tables, device_memory=(10**9,), batch_size=400)
    assert least_shard_bytes(one) == {"ids": 0.0, "outputs": 0.0}


@pytest.mark.parametrize("run", ["s51-amd-dlrm-20-8-torchrec", "s48-intel-dlrm-50-2-r6-torchrec",
                                 "s46-intel-production-40-8-calibrated-torchrec"])
def test_every_archived_plans_floor_is_below_its_measured_step(run):
    """avg <= max per stage, each collective cut to at most its own bytes: the floor of a plan never
    exceeds the plan (modelled and measured collectives alike)."""
    data = read_json(RUNS / f"{run}.json.gz")
    alpha = data["comm"]["alpha_ms"]
    for tr in (TaskResult.from_json(t) for t in data["tasks"]):
        least = least_shard_bytes(tr.task)
        for r in tr.results:
            if r.ok and r.measured is not None:
                assert 0 < plan_floor_ms(r.measured, None, least, alpha) <= r.measured.plan_ms * (1 + 1e-9)


@pytest.mark.parametrize(("run", "room", "roomy", "ratios"), [
    ("s48-intel-dlrm-50-2-r6-torchrec", "1.051", "1 task", "ilp 0.962, neuroshard 0.962, rl 0.962"),
    ("s51-amd-dlrm-20-8-torchrec", "1.253", "10 tasks", "ilp 0.970, neuroshard 0.968, rl 0.969"),
])
def test_the_room_of_an_archived_run_without_a_stage_floor(run, room, roomy, ratios):
    """Runs before stop 53 recorded no stage floor: the report's room is then balance only (docs/
    benchmarks.md, "Stop 53", first column)."""
    data = read_json(RUNS / f"{run}.json.gz")
    results = [TaskResult.from_json(t) for t in data["tasks"]]
    lines = room_lines(results, LEARNED, data["comm"]["alpha_ms"])
    assert f"geometric mean {room} over 10 tasks" in lines[0] and "stage floor on 0 of them" in lines[0]
    assert f"at least 10% on {roomy}." in lines[0] and ratios in lines[1]


def test_a_stage_floor_raises_the_floor_and_the_summary_counts_the_tasks_with_room():
    data = read_json(RUNS / "s51-amd-dlrm-20-8-torchrec.json.gz")
    results = [TaskResult.from_json(t) for t in data["tasks"]]
    alpha = data["comm"]["alpha_ms"]
    bare = room_summary(results, LEARNED, alpha)
    hot = StageFloor(fwd_ms=50.0, bwd_ms=50.0)  # far above every device: the floor is then at least 100 ms
    random_plan = results[0].by_algorithm()["random"].measured
    assert task_floor_ms(results[0], hot, alpha) > 100.0 > random_plan.plan_ms
    high = room_summary(results, LEARNED, alpha, [hot] * len(results))
    assert high.reference == bare.reference == "lookup_greedy" and high.with_stage_floor == 10
    assert high.geomean_room < 1 and high.roomy == () and high.ratio_on_roomy == {}
    assert bare.with_stage_floor == 0 and len(bare.roomy) == 10
    assert bare.geomean_room >= ROOM_THRESHOLD


def test_the_bench_records_the_stage_floor_and_reports_the_room(tmp_path):
    """With the estimate on the evaluator (the analytical model here), every task records the evaluator's
    stage floor; it survives the task file, and the report's room uses it."""
    model = AnalyticalCostModel()
    tasks = [Task(tables=tuple(make_tables(10, seed=s, dims=(16, 32), max_rows=5000)),
                  device_memory=(10**9,) * 4, batch_size=256, name=f"t{s}") for s in range(2)]
    options = PlannerOptions(cost_model=model, time_limit_s=1)
    config = BenchConfig(("lookup_greedy", "size_greedy", "ilp"), options, rounds=1,
                         lower_bound_on="evaluator", key="k")
    results = run_bench(tasks, config, lambda: model, tmp_path)
    for task, tr in zip(tasks, results, strict=True):
        alone = stage_floor(task, model)  # the bench also times its plans' shards of the floor's tables
        assert (tr.stage_floor.fwd_ms, tr.stage_floor.bwd_ms) == (alone.fwd_ms, alone.bwd_ms)
        assert set(alone.alone) <= set(tr.stage_floor.alone)
        saved = TaskResult.from_json(json.loads((tmp_path / "tasks" / f"{task.name}.json").read_text()))
        assert saved.stage_floor == tr.stage_floor
        cheapest = min(r.measured.plan_ms for r in tr.results if r.measured is not None)
        assert 0 < task_floor_ms(tr, alpha_ms=model.comm.alpha_ms) <= cheapest * (1 + 1e-9)
    lines = room_lines(results, ["ilp"], model.comm.alpha_ms)
    assert "over 2 tasks (with the costliest table's stage floor, the work and ids its cut adds priced)" \
        in lines[0]
    old = {k: v for k, v in results[0].to_json().items() if k != "stage_floor"}
    assert TaskResult.from_json(old).stage_floor is None  # task files of older runs still read


def _hot_task() -> Task:
    """Four tables on 4 devices, table 0 dim 16 (cuts: halves and quarters), the others dim 8."""
    tables = make_tables(4, seed=3, dims=(8,), max_rows=5000)
    tables[0] = replace(tables[0], dim=16)
    return Task(tables=tuple(tables), device_memory=(10**9,) * 4, batch_size=400, name="hot")


def _hot_floor(hot: Task) -> StageFloor:
    """Table 0 whole 10 ms a stage; halves 6; quarters 4, so four quarters do 16 ms of work where the whole
    did 10 (what a column cut costs on this CPU: each piece still looks up every id)."""
    return StageFloor(fwd_ms=4.0, bwd_ms=4.0, alone=((ShardRef(0, 4), 4.0, 4.0), (ShardRef(0, 8), 6.0, 6.0),
                                                     (ShardRef(0, 16), 10.0, 10.0)))


def _measured(devices, collectives=()) -> PlanCost:
    return PlanCost(tuple(CostBreakdown(f, b, 0.0) for f, b in devices), "measured", tuple(collectives))


def test_the_cut_floor_prices_the_work_a_cut_adds():
    """The plan holds table 0 whole on rank 0 (10 ms a stage) and 2 ms on each other device: its mean is 4 ms,
    and the first formula pairs that mean with the quarters' 4 ms. But quarters add 6 ms of work a stage (mean
    5.5) and halves 2 ms (mean 4.5, widest 6): the least over cuts is the quarters', 5.5 a stage."""
    task = _hot_task()
    plan = Plan.from_ranks(task, [0, 1, 2, 3], "hand")
    cost = _measured([(10.0, 10.0), (2.0, 2.0), (2.0, 2.0), (2.0, 2.0)])
    floor = _hot_floor(task)
    assert plan_floor_terms(cost, floor) == pytest.approx([4.0, 4.0, 0.0])
    assert cut_floor_terms(task, plan, cost, floor) == pytest.approx([5.5, 5.5, 0.0])
    # table 0 held as quarters already: the cut adds nothing more, the floor is the plan's mean
    quarters = Plan((TablePlacement.column_wise(task.tables[0].name, [0, 1, 2, 3], [4, 4, 4, 4]),
                     *plan.placements[1:]), 4, "hand", task.name)
    cost_q = _measured([(4.0, 4.0), (6.0, 6.0), (6.0, 6.0), (4.0, 4.0)])
    assert cut_floor_terms(task, quarters, cost_q, floor) == pytest.approx([5.0, 5.0, 0.0])
    # a shard of table 0 not timed alone (an uneven cut): the first formula
    uneven = Plan((TablePlacement.column_wise(task.tables[0].name, [0, 1], [12, 4]), *plan.placements[1:]),
                  4, "hand", task.name)
    assert cut_floor_terms(task, uneven, cost, floor) == pytest.approx(plan_floor_terms(cost, floor))


def test_the_cut_floor_counts_the_ids_a_cut_sends_again():
    """The input-id all-to-all's mean bytes rise by the extra copies of the table's ids a cut sends: with
    them dear enough, keeping the table whole is the floor."""
    task = _hot_task()
    plan = Plan.from_ranks(task, [0, 1, 2, 3], "hand")
    devices = [(10.0, 10.0), (2.0, 2.0), (2.0, 2.0), (2.0, 2.0)]
    floor = _hot_floor(task)
    # a GB a rank already: the quarters' three extra copies of table 0's ids add little
    roomy_bytes = [_collective([1e9] * 4, [1e9] * 4, ms=1.0)]
    cheap = cut_floor_terms(task, plan, _measured(devices, roomy_bytes), floor)
    assert cheap[:2] == pytest.approx([5.5, 5.5]) and 1.0 < cheap[2] < 1.001
    # 100 bytes a rank: a copy of table 0's ids (its 300 other-rank samples' ids) is dearer than any cut saves
    few_bytes = [_collective([100.0] * 4, [100.0] * 4, ms=1.0)]
    dear = cut_floor_terms(task, plan, _measured(devices, few_bytes), floor)
    assert dear == pytest.approx([10.0, 10.0, 1.0])  # kept whole: the plan itself


def test_the_cut_floor_never_exceeds_its_plan():
    """Pieces timed alone above the plan's own devices (noise): the plan's own step bounds its floor."""
    task = _hot_task()
    plan = Plan.from_ranks(task, [0, 1, 2, 3], "hand")
    cost = _measured([(9.0, 9.0), (2.0, 2.0), (2.0, 2.0), (2.0, 2.0)])
    high = StageFloor(4.0, 4.0, alone=((ShardRef(0, 4), 9.5, 9.5), (ShardRef(0, 8), 9.5, 9.5),
                                       (ShardRef(0, 16), 10.0, 10.0)))
    assert cut_floor_terms(task, plan, cost, high) == pytest.approx([9.0, 9.0, 0.0])


def test_many_tables_cuts_are_improved_one_at_a_time_past_the_combination_cap(monkeypatch):
    """Past ``MAX_CUT_COMBINATIONS`` the least is found one table at a time; on this task it is the same."""
    from autoshard.bench import room

    task = _hot_task()
    plan = Plan.from_ranks(task, [0, 1, 2, 3], "hand")
    cost = _measured([(10.0, 10.0), (2.0, 2.0), (2.0, 2.0), (2.0, 2.0)])
    floor = _hot_floor(task)
    exact = cut_floor_terms(task, plan, cost, floor)
    monkeypatch.setattr(room, "MAX_CUT_COMBINATIONS", 1)
    assert cut_floor_terms(task, plan, cost, floor) == pytest.approx(exact)


def test_the_bench_times_its_plans_shards_of_the_floors_tables_alone(tmp_path):
    """The recorded floor keeps every shard it timed alone (the floor's tables whole and cut, and the plans'
    shards of them); each measured plan's cut floor is at most its step; the task file reads back."""
    model = AnalyticalCostModel()
    task = Task(tables=tuple(make_tables(8, seed=5, dims=(16, 32), max_rows=5000)),
                device_memory=(10**9,) * 4, batch_size=256, name="t")
    config = BenchConfig(("lookup_greedy", "size_greedy", "neuroshard"), PlannerOptions(cost_model=model,
                                                                                        time_limit_s=1),
                         rounds=1, lower_bound_on="evaluator", key="k")
    (tr,) = run_bench([task], config, lambda: model, tmp_path)
    alone = tr.stage_floor.alone_ms()
    tables = {ref.table for ref in alone}
    assert tables and all(ShardRef(t, task.tables[t].dim) in alone for t in tables)
    for r in tr.results:
        held = [ref for d in r.plan.device_shards(task) for ref in d if ref.table in tables]
        assert all(ref in alone for ref in held)
        terms = cut_floor_terms(task, r.plan, r.measured, tr.stage_floor, least_shard_bytes(task),
                                model.comm.alpha_ms)
        assert 0 < terms.sum() <= r.measured.plan_ms * (1 + 1e-9)
    saved = TaskResult.from_json(json.loads((tmp_path / "tasks" / "t.json").read_text()))
    assert saved.stage_floor == tr.stage_floor


def test_stop_57s_dlrm_50_8_run_reports_its_room_with_the_cut_priced():
    """docs/benchmarks.md, "Stop 57": the first run that timed its plans' shards alone; pricing the cut
    takes its room from 1.094 (4 tasks >= 10%) to 1.067 (none)."""
    data = read_json(RUNS / "s57-amd-dlrm-50-8-descent.json.gz")
    results = [TaskResult.from_json(t) for t in data["tasks"]]
    alpha = data["comm"]["alpha_ms"]
    assert all(tr.stage_floor.alone for tr in results)
    cut = room_summary(results, LEARNED, alpha)
    old = room_summary(results, LEARNED, alpha, [replace(tr.stage_floor, alone=()) for tr in results])
    assert (f"{cut.geomean_room:.3f}", cut.roomy) == ("1.067", ())
    assert (f"{old.geomean_room:.3f}", len(old.roomy)) == ("1.094", 4)
    assert cut.with_cuts == cut.tasks == 10
