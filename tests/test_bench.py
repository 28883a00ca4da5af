"""The benchmark: suites, planning every task with every algorithm, interleaved measuring, summary, report."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from conftest import make_tables

from autoshard.bench.report import confirm_lines, descent_lines, pick_lines, refit_lines, write_report
from autoshard.bench.suites import SUITES, get_suite
from autoshard.bench.summary import geomean, is_heuristic, summarize
from autoshard.breakdown import PlanCost
from autoshard.cli.main import main
from autoshard.costs.analytical import AnalyticalCostModel
from autoshard.costs.base import plan_cost
from autoshard.errors import AutoshardError
from autoshard.io import write_json
from autoshard.pipeline.measure import (
    BenchConfig,
    confirm_apart,
    measure_task,
    plan_task,
    restate,
    restate_task,
    run_bench,
    select_algorithms,
)
from autoshard.pipeline.measured_descent import OUTCOMES
from autoshard.pipeline.results import AlgoResult, TaskResult, read_task_results, rounds_apart
from autoshard.plan import validate
from autoshard.planners.base import PLANNERS, PlannerOptions
from autoshard.tasks import Task

HEURISTICS = ("random", "round_robin", "dim_greedy", "lookup_greedy", "size_greedy", "size_lookup_greedy")


class CountingModel:
    """The analytical model, counting the device contents it is asked about, optionally scaled per call.

    Calling it makes a new "instance" (as the bench does each round) that shares the call log."""

    def __init__(self, scales: tuple[float, ...] = (1.0,)) -> None:
        self.inner = AnalyticalCostModel()
        self.name = "counting"
        self.comm = self.inner.comm
        self.calls: list[int] = []
        self.instances = 0
        self.scales = scales

    def __call__(self):
        self.instances += 1
        return self

    def device_costs(self, task, devices):
        scale = self.scales[len(self.calls) % len(self.scales)]
        self.calls.append(len(devices))
        return self.inner.device_costs(task, devices) * scale


def _task(n: int = 12, devices: int = 3, seed: int = 0, name: str = "t") -> Task:
    return Task(tables=tuple(make_tables(n, seed=seed, dims=(8, 16, 32), max_rows=5000)),
                device_memory=(10**9,) * devices, batch_size=64, name=name)


def test_suites_cover_dreamshard_grid_and_unknown_name_is_one_line_error():
    for t in (10, 20, 50, 100):
        for d in (2, 4, 8):
            s = get_suite(f"dlrm-{t}-{d}")
            assert (s.num_tables, s.num_devices) == (t, d)
            assert s.pool_tables // 2 >= t  # the test pool can hold a task
    assert "quick" in SUITES
    with pytest.raises(AutoshardError, match="unknown suite 'nope'; choose one of"):
        get_suite("nope")


def test_bad_suite_name_exits_2_with_one_line(capsys):
    assert main(["bench", "--suite", "nope", "-o", "unused"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "unknown suite" in err


def test_select_algorithms_lists_registered_and_says_which_are_skipped():
    algos, skipped = select_algorithms(None)
    assert algos == list(PLANNERS)
    for a in ("torchrec", "rl", "neuroshard", "search", "ilp"):
        assert (a in algos) != (a in skipped)
    chosen, skipped = select_algorithms(["size_greedy", "random"])
    assert chosen == ["size_greedy", "random"]
    assert skipped["dim_greedy"].startswith("not requested")
    with pytest.raises(AutoshardError, match="unknown algorithm"):
        select_algorithms(["size_greedy", "no_such_algo"])
    assert is_heuristic("size_greedy") and not is_heuristic("no_such_algo")


def _apart_task() -> tuple[Task, list[AlgoResult]]:
    """A task planned by size_greedy and by random, random's plan renamed 'search' (a non-heuristic plan
    that differs from the best heuristic's)."""
    task = _task()
    planned = plan_task(task, ("size_greedy", "random"), PlannerOptions(), None)
    return task, [planned[0], replace(planned[1], algorithm="search")]


def test_a_plan_set_apart_from_the_best_heuristic_is_re_timed_beside_it_and_counted_only_if_it_agrees():
    task, planned = _apart_task()
    steady = CountingModel()
    measured = measure_task(task, planned, steady, rounds=3)
    heuristic, search = measured
    assert rounds_apart(search.rounds_ms, heuristic.rounds_ms) == -1  # random's plan: dearer every round
    confirmed = confirm_apart(task, measured, steady, rounds=3)
    # three more rounds, each timing only the two plans' distinct devices
    distinct = {tuple(sorted(d)) for r in planned for d in r.plan.device_shards(task) if d}
    assert steady.calls[3:] == [len(distinct)] * 3
    assert all(len(r.confirm_rounds_ms) == 3 for r in confirmed)
    assert confirmed[1].confirm_rounds_ms == pytest.approx(search.rounds_ms)  # the same truth again
    assert [r.measured for r in confirmed] == [r.measured for r in measured]  # costs stay the first timing's
    assert AlgoResult.from_json(confirmed[1].to_json()) == confirmed[1]
    assert summarize([TaskResult(task, tuple(confirmed))], ["search"])[0].clear_losses == 1
    assert "- search: worse in both timings on 1 task" in confirm_lines([TaskResult(task, tuple(confirmed))])

    # the re-timing's second round three times as slow (the noise the confirmation guards against): the two
    # plans' re-timed rounds overlap, so the task is no longer counted clearly worse
    noisy = CountingModel(scales=(1.0, 1.0, 1.0, 1.0, 3.0, 1.0))
    unconfirmed = confirm_apart(task, measure_task(task, planned, noisy, rounds=3), noisy, rounds=3)
    assert unconfirmed[1].confirm_rounds_ms and unconfirmed[1].rounds_ms == search.rounds_ms
    summary = summarize([TaskResult(task, tuple(unconfirmed))], ["search"])[0]
    assert summary.clear_losses == 0 and summary.clear_wins == 0
    lines = confirm_lines([TaskResult(task, tuple(unconfirmed)), TaskResult(task, tuple(confirmed))])
    assert "- search: worse in both timings on 1 task, apart in the first timing only on 1 task" in lines
    # results from before the confirmation (no re-timing stored) keep the first rounds' verdict
    assert summarize([TaskResult(task, tuple(measured))], ["search"])[0].clear_losses == 1


def test_no_re_timing_where_the_rounds_overlap_or_a_learned_planner_kept_the_heuristics_plan():
    task, planned = _apart_task()
    kept = [planned[0], replace(planned[0], algorithm="search")]  # the guard kept size_greedy's plan
    ev = CountingModel()
    measured = measure_task(task, kept, ev, rounds=3)
    assert confirm_apart(task, measured, ev, rounds=3) == measured and len(ev.calls) == 3
    assert confirm_lines([TaskResult(task, tuple(measured))]) == []
    noisy = CountingModel(scales=(1.0, 2.0, 1.0))  # a round twice as slow: the rounds overlap
    overlapping = measure_task(task, planned, noisy, rounds=3)
    assert rounds_apart(overlapping[1].rounds_ms, overlapping[0].rounds_ms) == 0
    assert confirm_apart(task, overlapping, noisy, rounds=3) == overlapping and len(noisy.calls) == 3


def test_plan_task_records_failures_instead_of_stopping():
    task = _task()
    tight = Task(tables=task.tables, device_memory=(1,) * 3, batch_size=64, name="tight")
    model = AnalyticalCostModel()
    ok = plan_task(task, HEURISTICS, PlannerOptions(), model)
    assert all(r.ok and r.plan is not None and r.predicted is not None for r in ok)
    assert ok[0].predicted.plan_ms == pytest.approx(plan_cost(model, task, ok[0].plan).plan_ms)
    bad = plan_task(tight, ("size_greedy",), PlannerOptions(), model)
    assert not bad[0].ok and "give more memory" in bad[0].error



def test_a_learned_planners_guard_decision_is_recorded_kept_through_measuring_and_counted_in_the_report():
    from autoshard.bench.report import guard_lines

    task = _task()
    model = AnalyticalCostModel()
    planned = plan_task(task, ("lookup_greedy", "search"), PlannerOptions(time_limit_s=0.5), model)
    heuristic, learned = planned
    assert heuristic.guard == ""
    assert learned.guard.startswith("search: kept ") and "uncertainty" in learned.guard
    assert AlgoResult.from_json(json.loads(json.dumps(learned.to_json()))).guard == learned.guard
    measured = measure_task(task, planned, CountingModel, rounds=1)
    assert [r.guard for r in measured] == [r.guard for r in planned]
    kept = learned.guard.split(": ", 1)[1].split(" (")[0]
    lines = guard_lines([TaskResult(task, tuple(measured)), TaskResult(task, tuple(measured))])
    assert lines[0].startswith("Heuristic guard") and f"- search: {kept} on 2 tasks" in lines
    assert guard_lines([TaskResult(task, (heuristic,))]) == []

@pytest.mark.parametrize("statistic, scale", [("median", 2.0), ("min", 1.0)])
def test_measure_task_dedupes_devices_interleaves_rounds_and_takes_the_round_statistic(statistic, scale):
    task = _task()
    planned = plan_task(task, HEURISTICS, PlannerOptions(), None)
    evaluator = CountingModel(scales=(1.0, 3.0, 2.0))
    measured = measure_task(task, planned, evaluator, rounds=3, statistic=statistic)
    # one call per round, each with every distinct non-empty device of all plans once
    distinct = {tuple(sorted(d)) for r in planned for d in r.plan.device_shards(task) if d}
    assert evaluator.calls == [len(distinct)] * 3 and evaluator.instances == 3
    truth = AnalyticalCostModel()
    for r in measured:
        exact = plan_cost(truth, task, r.plan)
        # the x1, x3, x2 rounds: median x2, min x1, per device and component;
        # kernels and the device's own comm scale; the step's collectives are the comm model's, unscaled
        np.testing.assert_allclose(r.measured.to_array(), scale * exact.to_array())
        kernels = exact.max_fwd_ms + exact.max_bwd_ms
        assert sorted(r.rounds_ms) == pytest.approx([k * kernels + exact.collectives_ms for k in (1, 2, 3)])
        assert r.measured.plan_ms == pytest.approx(scale * kernels + exact.collectives_ms)
        assert r.plan.cost == r.measured
        # every round's per-device fwd/bwd is kept: round k measured x1, x3, x2
        arr = exact.to_array()
        for rnd, k in zip(r.device_rounds_ms, (1.0, 3.0, 2.0)):
            np.testing.assert_allclose(np.array(rnd), k * arr[:, :2])
        assert AlgoResult.from_json(r.to_json()) == r


def test_restate_rederives_a_result_with_another_round_statistic_from_its_stored_rounds():
    task = _task()
    planned = plan_task(task, HEURISTICS, PlannerOptions(), None)
    by_median = measure_task(task, planned, CountingModel(scales=(1.0, 3.0, 2.0)), rounds=3,
                             statistic="median")
    by_min = measure_task(task, planned, CountingModel(scales=(1.0, 3.0, 2.0)), rounds=3, statistic="min")
    for med, low in zip(by_median, by_min):
        again = restate(med, "min")
        # kernels restated; a device's own comm is kept as measured (this fake scales it per round too)
        np.testing.assert_allclose(again.measured.to_array()[:, :2], low.measured.to_array()[:, :2])
        assert again.measured.plan_ms == pytest.approx(low.measured.plan_ms)
        assert again.plan.cost == again.measured and again.rounds_ms == med.rounds_ms
        assert restate(med, "median").measured.plan_ms == pytest.approx(med.measured.plan_ms)
    tr = TaskResult(task, tuple(by_median))
    assert [r.measured.plan_ms for r in restate_task(tr, "min").results] == pytest.approx(
        [r.measured.plan_ms for r in by_min])
    with pytest.raises(AutoshardError, match="round statistic 'mean'"):
        restate(by_median[0], "mean")
    # from some rounds only: round k measured x1, x3, x2, so rounds (1, 2) give the x2 round's kernels
    for med, low in zip(by_median, by_min):
        two = restate(med, "min", rounds=(1, 2))
        np.testing.assert_allclose(two.measured.to_array()[:, :2], 2.0 * low.measured.to_array()[:, :2])
        assert restate(med, "min", rounds=(0, 1, 2)).measured.plan_ms == pytest.approx(low.measured.plan_ms)
    for bad in ((), (3,), (-1, 0)):
        with pytest.raises(AutoshardError, match="not a non-empty selection of the result's 3 rounds"):
            restate(by_median[0], "min", rounds=bad)
    with pytest.raises(AutoshardError, match="round statistic"):
        measure_task(task, planned, CountingModel(), rounds=1, statistic="max")


def test_summary_ratios_geomeans_and_wins():
    task_a, task_b = _task(name="a"), _task(seed=1, name="b")

    def res(algo: str, ms: float) -> AlgoResult:
        cost = PlanCost.from_array(np.array([[ms, 0.0, 0.0]]), "measured")
        return AlgoResult(algo, True, measured=cost, rounds_ms=(ms, ms * 1.1))

    results = [
        TaskResult(task_a, (res("size_greedy", 10.0), res("random", 20.0), res("x", 8.0)),
                   lower_bound_ms=5.0),
        TaskResult(task_b, (res("size_greedy", 30.0), res("random", 15.0),
                            AlgoResult("x", False, "no room"))),
    ]
    s = {x.algorithm: x for x in summarize(results, ["size_greedy", "random", "x"])}
    assert s["size_greedy"].geomean_ratio_to_best_heuristic == pytest.approx(geomean([1.0, 2.0]))
    assert s["random"].geomean_ratio_to_best_heuristic == pytest.approx(geomean([2.0, 1.0]))
    assert s["x"].geomean_ratio_to_best_heuristic == pytest.approx(0.8)
    assert (s["x"].tasks_ok, s["x"].tasks_total, s["x"].errors) == (1, 2, ("no room",))
    assert (s["x"].wins, s["random"].wins, s["size_greedy"].wins) == (1, 1, 0)
    assert s["x"].geomean_gap_to_lower_bound == pytest.approx(8.0 / 5.0 - 1)
    assert s["x"].geomean_ratio_to_estimate == pytest.approx(8.0 / 5.0) and s["x"].below_estimate == 0
    # the interval needs 2 tasks: x has one, so no interval and no verdict
    x = s["x"]
    assert (x.vs_best_heuristic.tasks, x.ratio_interval, x.verdict) == (1, None, "no clear difference")
    assert s["random"].vs_best_heuristic.tasks == 2 and s["random"].vs_torchrec is None
    assert s["size_greedy"].noise == pytest.approx(0.1 / 1.05)
    # x (8.0, 8.8) vs the best heuristic size_greedy (10.0, 11.0) on task a: every round below
    assert (s["x"].clear_wins, s["x"].clear_losses) == (1, 0)
    # random (20, 22) vs size_greedy (10, 11) on a: above; on b random is the best heuristic itself
    assert (s["random"].clear_wins, s["random"].clear_losses) == (0, 1)
    assert geomean([]) is None


def test_run_bench_resumes_from_per_task_files_and_reports(tmp_path):
    tasks = [_task(name="a"), _task(seed=1, name="b")]
    config = BenchConfig(HEURISTICS, PlannerOptions(cost_model=AnalyticalCostModel()), rounds=2,
                         lower_bound_on="none", key="k1")
    ev = CountingModel()
    first = run_bench(tasks, config, ev, tmp_path)
    assert len(ev.calls) == 4 and (tmp_path / "tasks" / "a.json").is_file()
    again = CountingModel()
    second = run_bench(tasks, config, again, tmp_path)
    assert again.calls == [] and [t.to_json() for t in second] == [t.to_json() for t in first]
    changed = CountingModel()
    run_bench(tasks, BenchConfig(HEURISTICS, config.options, rounds=2, lower_bound_on="none", key="k2"),
              changed, tmp_path)
    assert len(changed.calls) == 4

    summaries = summarize(first, list(HEURISTICS))
    meta = {"host": {"cpu": "test"}, "skipped": {"rl": "not registered"}, "rounds": 2}
    files = write_report(tmp_path, "unit", "autoshard bench --suite unit", summaries, first, meta)
    md = files["report_md"].read_text()
    assert "autoshard bench --suite unit" in md and "| size_greedy (heuristic) |" in md
    assert "- rl: not registered" in md and "no non-heuristic algorithm ran" in md
    assert "2 test tasks (fewer than 10 tasks: the interval is wide)" in md and "(2 tasks)" in md
    raw = json.loads(files["results_json"].read_text())
    assert raw["kind"] == "autoshard.bench" and len(raw["tasks"]) == 2
    first_summary = raw["summary"][0]
    assert first_summary["vs_best_heuristic"]["tasks"] == 2 and "geomean_gap_to_lower_bound" in first_summary
    assert raw["tasks"][0]["results"][0]["measured"]["plan_ms"] > 0
    for role in ("devices_png", "costs_png", "predicted_png"):
        assert files[role].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_pipeline_stage_caches_and_resumes_after_an_interruption(tmp_path):
    from autoshard.pipeline.context import PipelineConfig
    from autoshard.pipeline.run import Pipeline

    lines: list[str] = []
    pipe = Pipeline(PipelineConfig(get_suite("tiny")), tmp_path, say=lines.append)
    calls: list[bool] = []

    def interrupted(resume: bool) -> None:
        calls.append(resume)
        (tmp_path / "part.txt").write_text("half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        pipe.stage("s", {"n": 1}, ["dep"], ["part.txt"], interrupted)

    def finish(resume: bool) -> None:
        calls.append(resume)

    key = pipe.stage("s", {"n": 1}, ["dep"], ["part.txt"], finish)
    assert calls == [False, True] and pipe.status["s"] == "ran"
    assert pipe.stage("s", {"n": 1}, ["dep"], ["part.txt"], finish) == key and pipe.status["s"] == "cached"
    assert calls == [False, True]
    pipe.stage("s", {"n": 2}, ["dep"], ["part.txt"], finish)  # a changed setting runs it afresh
    assert calls == [False, True, False]
    pipe.stage("s", {"n": 2}, ["other dep"], ["part.txt"], finish)  # so does a changed upstream stage
    assert calls == [False, True, False, False]
    assert any("resuming" in line for line in lines)
    # cached outputs that this version cannot use (e.g. an old checkpoint) are made again
    pipe.stage("s", {"n": 2}, ["other dep"], ["part.txt"], finish, usable=lambda: "unreadable checkpoint")
    assert calls == [False, True, False, False, False] and pipe.status["s"] == "ran"
    pipe.stage("s", {"n": 2}, ["other dep"], ["part.txt"], finish, usable=lambda: "")
    assert pipe.status["s"] == "cached"


def test_a_code_change_reruns_a_cached_stage(tmp_path, monkeypatch):
    from autoshard.pipeline import cache

    stages = cache.StageCache(tmp_path)
    calls: list[bool] = []
    key = stages.stage("s", {"n": 1}, [], [], calls.append)
    assert stages.stage("s", {"n": 1}, [], [], calls.append) == key and calls == [False]
    monkeypatch.setattr(cache, "PIPELINE_CODE_VERSION", cache.PIPELINE_CODE_VERSION + 1)
    assert stages.stage("s", {"n": 1}, [], [], calls.append) != key and calls == [False, False]
    monkeypatch.setattr(cache, "__version__", "0.0.0-other")
    stages.stage("s", {"n": 1}, [], [], calls.append)
    assert calls == [False, False, False] and stages.status["s"] == "ran"


class _CrashingPlanner:
    name = "crashing"

    def plan(self, task):
        raise ValueError("a planner bug\nwith a second line")


def crashing_planner(options):
    return _CrashingPlanner()


def test_a_crashing_planner_is_reported_not_fatal(monkeypatch):
    monkeypatch.setitem(PLANNERS, "crashing", ("test_bench:crashing_planner", "raises"))
    results = plan_task(_task(), ("crashing", "size_greedy"), PlannerOptions(), None)
    assert not results[0].ok and results[0].error == "crashed: ValueError: a planner bug"
    assert results[1].ok


def test_a_measured_pick_times_its_candidates_at_planning_time_and_keeps_the_measured_best():
    from autoshard.hardware.kernel import MeasureSettings
    from autoshard.pipeline.measure import measured_pick_name
    from autoshard.planners.guard import GUARD_HEURISTICS

    task = _task()
    model = AnalyticalCostModel()
    settings = MeasureSettings(warmup=1, repeats=2, max_tries=1, rows_cap=5000)
    name = measured_pick_name("search", 2)
    options = PlannerOptions(seed=0, cost_model=model, time_limit_s=1.0)
    plain, picked = plan_task(task, ("search", name), options, model, settings, model.comm)
    assert picked.algorithm == "search+top2" and picked.ok and picked.plan is not None
    # the kept plan is one of the candidates: the planner's own or a heuristic's, and says whose it is
    assert picked.plan.algorithm in {"search", *GUARD_HEURISTICS}
    assert picked.plan.cost is None and picked.predicted is not None
    # two candidates were timed on the real kernels: planning took longer than the plain planner
    assert picked.planning_time_s > 0 and picked.planning_time_s >= 0.5 * plain.planning_time_s
    with pytest.raises(AutoshardError, match="positive integer"):
        select_algorithms(["search+top0"])
    with pytest.raises(AutoshardError, match="unknown algorithm"):
        select_algorithms(["nope+top2"])
    assert select_algorithms(["search", name])[0] == ["search", name]
    with pytest.raises(AutoshardError, match="positive integer"):
        select_algorithms(["search+top2+descent0"])
    with pytest.raises(AutoshardError, match="positive integer"):
        select_algorithms(["search+top2+descentx"])


def test_a_measured_pick_with_descent_plans_validly_and_names_its_steps():
    from autoshard.hardware.kernel import MeasureSettings
    from autoshard.pipeline.measure import measured_pick_name, parse_measured_pick

    name = measured_pick_name("search", 1, 2)
    assert name == "search+top1+descent2" and parse_measured_pick(name).descent == 2
    assert parse_measured_pick("search+top3").descent == 0 and parse_measured_pick("search") is None
    task = _task()
    model = AnalyticalCostModel()
    settings = MeasureSettings(warmup=1, repeats=2, max_tries=1, rows_cap=5000)
    options = PlannerOptions(seed=0, cost_model=model, time_limit_s=1.0)
    (picked,) = plan_task(task, (name,), options, model, settings, model.comm)
    assert picked.ok and picked.algorithm == name and picked.plan.cost is None
    validate(picked.plan, task)
    # what the descent did is kept with the result, read back, and counted in the report
    assert any(outcome in picked.descent for outcome in OUTCOMES)
    assert AlgoResult.from_json(picked.to_json()).descent == picked.descent
    lines = descent_lines([TaskResult(task, (picked,))])
    assert lines[0].startswith("Measured descent") and f"- {name}: " in lines[2] and "on 1 task" in lines[2]


@pytest.mark.parametrize("again_slow", [0, 1])
def test_a_measured_pick_leaves_the_models_cheapest_only_if_a_second_timing_agrees(monkeypatch, again_slow):
    """Faults injected into the timings: the first makes the model's cheapest candidate time 10x as dear (a
    noisy episode of the host, larger than any real difference between the candidates), the side-by-side
    re-timing one of the two (``again_slow``: 0 the model's cheapest again, 1 the measured best); the pick
    follows the re-timing."""
    from autoshard.costs.step import compose
    from autoshard.hardware.kernel import MeasureSettings
    from autoshard.pipeline import choose

    real, calls = choose.evaluate_plans, []

    def noisy(task, plans, *args, **kwargs):
        costs = list(real(task, plans, *args, **kwargs))
        slow = 0 if not calls else again_slow
        calls.append([p.algorithm for p in plans])
        c = costs[slow]
        costs[slow] = compose(c.to_array() * np.array([10.0, 10.0, 1.0]), c.collectives, c.source)
        return costs

    monkeypatch.setattr(choose, "evaluate_plans", noisy)
    task = _task()
    model = AnalyticalCostModel()
    settings = MeasureSettings(warmup=1, repeats=2, max_tries=1, rows_cap=5000)
    options = PlannerOptions(seed=0, cost_model=model, time_limit_s=1.0)
    candidates = choose.candidate_plans(task, "search", options)
    choice = choose.measure_top(task, candidates, model, 2, settings)
    cheapest, other = (c.plan for c in choice.candidates[:2])
    assert len(calls) == 2 and calls[1] == [cheapest.algorithm, other.algorithm]
    first, again = choice.confirmed_ms
    kept = other if again_slow == 0 else cheapest
    assert choice.best.placements == kept.placements
    assert choice.best.cost.plan_ms == (again if again_slow == 0 else first)
    verdict = choose.PICK_CONFIRMED if again_slow == 0 else choose.PICK_OVERRULED
    note = choice.describe()
    assert note.endswith(verdict) and f"{other.algorithm}'s plan timed cheapest" in note
    # the bench's +topK row runs the same pick under the same fault, keeps its note, and its report counts it
    calls.clear()
    (row,) = plan_task(task, ("search+top2",), options, model, settings, model.comm)
    assert len(calls) == 2 and row.descent.endswith(verdict) and "timed cheapest" in row.descent
    lines = pick_lines([TaskResult(task, (row,))])
    assert lines[0].startswith("Measured pick") and lines[2] == f"- search+top2: {verdict} on 1 task"
    # without the check, the first timing decides alone
    calls.clear()
    alone = choose.measure_top(task, candidates, model, 2, settings, confirm=False)
    assert len(calls) == 1 and alone.confirmed_ms is None and alone.best.placements == other.placements
    assert alone.describe().endswith(choose.PICK_UNCHECKED)


def test_a_refit_pick_replans_with_the_corrected_model_and_keeps_the_cheaper_side_by_side():
    from autoshard.hardware.kernel import MeasureSettings
    from autoshard.pipeline.choose import REFIT_OUTCOMES, candidate_plans, measure_top, refit_pick
    from autoshard.pipeline.measure import MeasuredPick, measured_pick_name, parse_measured_pick

    name = measured_pick_name("search", 2, 1, refit=True)
    assert name == "search+top2+refit+descent1"
    assert parse_measured_pick(name) == MeasuredPick("search", 2, 1, True)
    assert not parse_measured_pick("search+top2+descent1").refit
    for bad in ("search+top2+descent1+refit", "search+top2+refitx", "search+top2+refit+refit"):
        with pytest.raises(AutoshardError, match=r"\+refit\]"):
            parse_measured_pick(bad)
    task = _task()
    model = AnalyticalCostModel()
    settings = MeasureSettings(warmup=1, repeats=2, max_tries=1, rows_cap=5000)
    options = PlannerOptions(seed=0, cost_model=model, time_limit_s=1.0)
    choice = measure_top(task, candidate_plans(task, "search", options), model, 2, settings)
    assert len(choice.timed) == 2 and all(p.cost is not None for p in choice.timed)
    refit = refit_pick(task, "search", options, choice, model, settings)
    assert refit.fit.devices >= 1 and any(o in refit.describe() for o in REFIT_OUTCOMES)
    validate(refit.best, task)
    if refit.side_by_side_ms is not None:  # a new plan was timed: the cheaper of the two is kept
        assert refit.best.cost.plan_ms == pytest.approx(min(refit.side_by_side_ms))
    else:
        assert refit.best is choice.best
    # in the bench: one pick shared by the rows, the refit's note with its result and counted in the report
    rows = plan_task(task, (measured_pick_name("search", 2), measured_pick_name("search", 2, refit=True)),
                     options, model, settings, model.comm)
    assert all(r.ok for r in rows) and rows[1].planning_time_s > rows[0].planning_time_s
    assert any(o in rows[1].descent for o in REFIT_OUTCOMES)
    assert rows[0].descent.startswith("pick: 2 of ") and not any(o in rows[0].descent for o in REFIT_OUTCOMES)
    lines = refit_lines([TaskResult(task, tuple(rows))])
    assert lines[0].startswith("Refit") and "- search+top2+refit: " in lines[2] and "on 1 task" in lines[2]
    assert descent_lines([TaskResult(task, tuple(rows))]) == []


def test_a_descent_starts_from_the_pick_its_measured_pick_kept(monkeypatch):
    """PLANNER+topK and PLANNER+topK+descentN of one task share the pick: timing the candidates twice could
    pick two different starts and the descent's row would not say what the descent did."""
    import autoshard.pipeline.measure as measure_module
    from autoshard.hardware.kernel import MeasureSettings
    from autoshard.pipeline.measure import measured_pick_name

    starts, picks_timed = [], []
    real_descent, real_top = measure_module.measured_descent, measure_module.measure_top

    def recording_descent(task, plan, *args, **kwargs):
        starts.append(plan)
        return real_descent(task, plan, *args, **kwargs)

    def recording_top(*args, **kwargs):
        picks_timed.append(args[0].name)
        return real_top(*args, **kwargs)

    monkeypatch.setattr(measure_module, "measured_descent", recording_descent)
    monkeypatch.setattr(measure_module, "measure_top", recording_top)
    task = _task()
    model = AnalyticalCostModel()
    settings = MeasureSettings(warmup=1, repeats=2, max_tries=1, rows_cap=5000)
    options = PlannerOptions(seed=0, cost_model=model, time_limit_s=1.0)
    picked, descended = plan_task(task, (measured_pick_name("search", 2), measured_pick_name("search", 2, 1)),
                                  options, model, settings, model.comm)
    assert picked.ok and descended.ok and picks_timed == [task.name]
    assert len(starts) == 1 and starts[0].placements == picked.plan.placements
    # the descent's planning time is the pick's and its own
    assert descended.planning_time_s > picked.planning_time_s


def test_the_planning_code_key_follows_code_not_comments_or_docstrings(tmp_path):
    """A changed planner default re-plans a cached bench (``cache.planning_code_key`` in its key); an edited
    comment or docstring does not."""
    from autoshard.pipeline import cache

    module = tmp_path / "planners" / "p.py"
    module.parent.mkdir()
    source = '"""A planner."""\n\nRISK = 0.0  # the mean\n\n\ndef f():\n    """Doc."""\n    return RISK\n'
    module.write_text(source)
    key = cache.code_key(tmp_path, ["planners"])
    module.write_text('"""A planner, reworded."""\n\nRISK = 0.0  # at the mean (stop 59)\n\n\ndef f():\n'
                      '    """Other doc."""\n    return RISK\n')
    assert cache.code_key(tmp_path, ["planners"]) == key
    module.write_text(source.replace("RISK = 0.0", "RISK = 1.0"))
    assert cache.code_key(tmp_path, ["planners"]) != key
    (tmp_path / "costs").mkdir()
    (tmp_path / "costs" / "m.py").write_text("X = 1\n")
    assert cache.code_key(tmp_path, ["planners", "costs"]) != cache.code_key(tmp_path, ["planners"])
    # this installation's planners and cost models: the key every bench task and refresh loop records
    assert cache.planning_code_key() == cache.code_key(
        Path(cache.__file__).resolve().parent.parent, cache.PLANNING_CODE)


def test_a_malformed_task_result_is_one_line_and_stops_the_resume_naming_its_file(tmp_path):
    """``TaskResult.from_json`` on an entry with a key missing or a value of the wrong type raises one
    ``AutoshardError`` naming the task (every results reader gets it); the bench's resume stops on such a
    cached file with its path, and measures nothing over it."""
    tasks = [_task(name="a")]
    config = BenchConfig(HEURISTICS, PlannerOptions(cost_model=AnalyticalCostModel()), rounds=2,
                         lower_bound_on="none", key="k1")
    run_bench(tasks, config, CountingModel(), tmp_path)
    path = tmp_path / "tasks" / "a.json"
    good = json.loads(path.read_text())
    for broken in ({k: v for k, v in good.items() if k != "results"},
                   {**good, "results": [{**good["results"][0], "rounds_ms": "fast"}]},
                   {**good, "task": None}):
        with pytest.raises(AutoshardError) as e:
            TaskResult.from_json(broken)
        assert "malformed" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(AutoshardError, match="of task 'a' is malformed"):
        TaskResult.from_json({**good, "results": [{"ok": True}]})
    write_json(path, {k: v for k, v in good.items() if k != "results"})
    before = path.read_bytes()
    again = CountingModel()
    with pytest.raises(AutoshardError, match=r"a\.json: a bench task result of task 'a' is malformed") as e:
        run_bench(tasks, config, again, tmp_path)
    assert str(e.value).endswith("delete it to measure a again")
    # a results file's reader names the file for the same faults, and for a file with no task list
    results = tmp_path / "results.json"
    write_json(results, {"kind": "autoshard.bench", "version": 1, "tasks": [good]})
    assert [t.task.name for t in read_task_results(str(results))] == ["a"]
    for broken in ({"kind": "autoshard.bench", "version": 1,
                    "tasks": [{k: v for k, v in good.items() if k != "results"}]},
                   {"kind": "autoshard.bench", "version": 1}):
        write_json(results, broken)
        with pytest.raises(AutoshardError, match=r"results\.json: ") as e:
            read_task_results(str(results))
        assert "\n" not in str(e.value)
    assert again.calls == [] and path.read_bytes() == before
