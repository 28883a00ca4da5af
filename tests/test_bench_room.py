"""The room report (``autoshard.bench.room``): each measured plan's step with its work spread perfectly,
never above the plan itself, and the bench recording the stage floor it needs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import make_tables

from autoshard.bench.report import room_lines
from autoshard.bench.room import (
    ROOM_THRESHOLD,
    balanced_collective_ms,
    least_shard_bytes,
    plan_floor_ms,
    room_summary,
    task_floor_ms,
)
from autoshard.breakdown import CollectiveCost, StageFloor
from autoshard.costs.analytical import AnalyticalCostModel
from autoshard.io import read_json
from autoshard.pipeline.measure import BenchConfig, run_bench
from autoshard.pipeline.results import TaskResult
from autoshard.planners.base import PlannerOptions
from autoshard.planners.exact import stage_floor
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
        assert tr.stage_floor == stage_floor(task, model)
        saved = TaskResult.from_json(json.loads((tmp_path / "tasks" / f"{task.name}.json").read_text()))
        assert saved.stage_floor == tr.stage_floor
        cheapest = min(r.measured.plan_ms for r in tr.results if r.measured is not None)
        assert 0 < task_floor_ms(tr, alpha_ms=model.comm.alpha_ms) <= cheapest * (1 + 1e-9)
    lines = room_lines(results, ["ilp"], model.comm.alpha_ms)
    assert "over 2 tasks (with the costliest table's stage floor)" in lines[0]
    old = {k: v for k, v in results[0].to_json().items() if k != "stage_floor"}
    assert TaskResult.from_json(old).stage_floor is None  # task files of older runs still read
