"""``autoshard bench`` end to end on the test-sized suite: real kernels, every registered planner, re-run."""

from __future__ import annotations

import json

import pytest
from conftest import make_tables

from autoshard.cli.main import main
from autoshard.costs.comm import DEFAULT_COMM, AlphaBeta
from autoshard.pipeline.cache import code_version
from autoshard.planners.base import PLANNERS
from autoshard.tables import TablePool
from autoshard.tasks import Task


@pytest.mark.slow  # real kernels, every registered planner, a policy trained
def test_tiny_suite_runs_end_to_end_then_resumes_from_cache(tmp_path, capsys):
    tables = tmp_path / "tables.json"
    TablePool.from_tables(make_tables(20, dims=(8, 16, 32), max_rows=5000)).save(str(tables))
    out = tmp_path / "run"
    comm = tmp_path / "comm_model.json"  # a cluster unlike the analytical model's own default comm
    AlphaBeta(alpha_ms=5.0, bytes_per_ms=2.0e5, source="test cluster").save(str(comm))
    argv = ["bench", "--suite", "tiny", "-o", str(out), "--tables", str(tables), "--cost-model", "analytical",
            "--comm", str(comm), "--test-tasks", "1", "--rounds", "1"]
    assert main(argv) == 0
    first = capsys.readouterr()
    bench = out / "bench"
    for name in ("report.md", "results.json", "devices.png", "costs.png", "predicted_vs_measured.png"):
        assert (bench / name).is_file(), name
    assert not list(out.rglob("*.tmp"))
    raw = json.loads((bench / "results.json").read_text())
    assert raw["host"]["cpu"] and raw["measure_settings"]["rows_cap"] == 5000
    assert raw["suite"]["name"] == "tiny" and raw["code"] == code_version()
    assert raw["round_statistic"] == raw["suite"]["eval"]["round_statistic"] == "min"
    (task,) = raw["tasks"]
    ran = {r["algorithm"]: r for r in task["results"]}
    assert set(ran) == set(PLANNERS)  # every registered planner was run (rl with a policy trained here)
    for r in ran.values():
        if r["ok"]:
            assert r["measured"]["source"] == "measured" and r["measured"]["plan_ms"] > 0
            assert r["predicted"]["source"].startswith("analytical") and len(r["rounds_ms"]) == 1
            # planners price the all-to-all with the suite's comm fit, as the evaluator does
            predicted = [d["comm_ms"] for d in r["predicted"]["devices"]]
            assert predicted == pytest.approx([d["comm_ms"] for d in r["measured"]["devices"]], rel=1e-5)
            assert max(predicted) > 10.0  # 2 x alpha: the default comm would give well under 1 ms
    for h in ("size_greedy", "size_lookup_greedy", "round_robin"):
        assert ran[h]["ok"]
    report = (bench / "report.md").read_text()
    assert "autoshard bench --suite tiny" in report and "| size_greedy (heuristic) | 1/1 |" in report
    assert report in first.out

    # A re-run finds every stage and the measured task in the output directory and reproduces the report.
    assert main(argv) == 0
    again = capsys.readouterr()
    assert "[test_tasks] cached" in again.err and "[policy] running" not in again.err
    assert json.loads((bench / "results.json").read_text())["tasks"] == raw["tasks"]

    # More test tasks: the policy is not retrained and the task measured already is reused as it was (a
    # re-measurement would differ in its timings), only the new one is planned and measured.
    more = [*argv[:-4], "--test-tasks", "2", "--rounds", "1"]
    assert main(more) == 0
    grown = capsys.readouterr()
    assert "[train_tasks] cached" in grown.err and "[policy] cached" in grown.err
    assert "[test_tasks] running" in grown.err
    tasks = json.loads((bench / "results.json").read_text())["tasks"]
    assert len(tasks) == 2 and tasks[0] == raw["tasks"][0] and tasks[1]["task"] != tasks[0]["task"]


def test_bad_arguments_are_one_line_errors(tmp_path, capsys):
    assert main(["bench", "-o", str(tmp_path)]) == 2
    assert "give --suite NAME" in capsys.readouterr().err
    assert main(["bench", "--suite", "tiny", "-o", str(tmp_path), "--rounds", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--rounds 0" in err
    assert main(["bench", "--suite", "tiny", "-o", str(tmp_path), "--algos", "size_greedy,nope"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "unknown algorithm(s) nope" in err
    for flag, value in (("--backend", "nope"), ("--round-statistic", "mean")):
        with pytest.raises(SystemExit) as exc:  # a parser error
            main(["bench", "--suite", "tiny", "-o", str(tmp_path), flag, value])
        assert exc.value.code == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and flag in err and value in err
    assert main(["quickstart", "-o", str(tmp_path), "--tables", str(tmp_path / "missing.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--tables" in err and "no such file" in err
    for flags, match in ((["--refresh-rounds", "-1"], "--refresh-rounds -1"),
                         (["--refresh-tasks", "0"], "--refresh-tasks 0"),
                         (["--refresh-budget", "0"], "--refresh-budget 0"),
                         (["--refresh-budget", "inf"], "--refresh-budget inf"),
                         (["--measure-top", "0"], "--measure-top 0"),
                         (["--descend", "2"], "--descend N balances each measured pick; add --measure-top K"),
                         (["--measure-top", "2", "--descend", "0"], "--descend 0"),
                         (["--refit"], "--refit corrects the model by each measured pick's timings")):
        assert main(["bench", "--suite", "tiny", "-o", str(tmp_path), *flags]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and match in err
    assert not (tmp_path / "stages").exists()  # nothing ran


@pytest.mark.slow  # real kernels, a cost model trained and refit, a policy trained further
def test_refresh_loop_measures_the_learned_planners_devices_and_reports_each_round(tmp_path, capsys):
    from autoshard.hardware.profiler import load_dataset
    from autoshard.pipeline.refresh import REFRESH_FILE, REFRESH_SEED_BASE, DeviceRecorder
    from autoshard.planners.base import PlannerOptions, make_planner, run_planner
    from autoshard.tasks import load_tasks

    tables = tmp_path / "tables.json"
    TablePool.from_tables(make_tables(20, dims=(8, 16, 32), max_rows=5000)).save(str(tables))
    out = tmp_path / "run"
    argv = ["bench", "--suite", "tiny", "-o", str(out), "--tables", str(tables), "--comm", "default",
            "--algos", "size_greedy,search,rl", "--test-tasks", "1", "--rounds", "1",
            "--refresh-rounds", "2", "--refresh-tasks", "1"]
    assert main(argv) == 0
    first = capsys.readouterr()
    rounds = json.loads((out / "refresh" / "rounds.json").read_text())["rounds"]
    assert [r["round"] for r in rounds] == [0, 1]
    assert rounds[0]["records_added"] > 0 and rounds[0]["devices"] > 0
    assert 0 <= rounds[0]["device_mape"] < 10
    assert set(rounds[0]["ratio_to_best_heuristic"]) == {"search", "rl"}
    # whose plan each learned planner returned, on each of the loop's tasks (1 here)
    assert {a: sum(n.values()) for a, n in rounds[0]["plan_sources"].items()} == {"search": 1, "rl": 1}
    # each round plans fresh train tasks (the first two of the split), so its error is on tasks not tuned on
    train = [t.name for t in load_tasks(str(out / "train_tasks.json"))]
    assert [r["tasks"] for r in rounds] == [train[:1], train[1:2]]
    assert rounds[1]["records_total"] == rounds[0]["records_total"] + rounds[1]["records_added"]
    costs = out / "costs"
    refreshed = [r for r in load_dataset(costs).records if r.sample_id.startswith(str(REFRESH_SEED_BASE)[:3])]
    assert len(refreshed) == sum(r["records_added"] for r in rounds) and (costs / REFRESH_FILE).is_file()
    raw = json.loads((out / "bench" / "results.json").read_text())
    assert "refresh/cost_model.pt" in raw["cost_model"] and raw["policy"].endswith("refresh/policy.pt")
    report = (out / "bench" / "report.md").read_text()
    assert "Refresh loop" in report and "| 0 |" in report and "| 1 |" in report and report in first.out
    # D = 2 on 2 cores: the loop timed its plans' all-to-alls and refit the PLANNING comm on them (not the
    # evaluator's); the bench planned with it
    from autoshard.hardware.comm import fit_points

    points = [p for r in rounds for p in r["collective_points"]]
    assert len(points) >= 6 and all(b > 0 and ms > 0 and modelled > 0 for b, ms, modelled, _ in points)
    first_round = rounds[0]["collective_points"]
    errors = [abs(modelled - ms) / ms for _, ms, modelled, _ in first_round]
    assert rounds[0]["comm_mape"] == pytest.approx(sum(errors) / len(errors))
    # each distinct all-to-all (task, plan, collective) at its least time over the rounds
    least: dict[str, tuple[float, float]] = {}
    for b, ms, _, key in points:
        least[key] = min(least.get(key, (b, ms)), (b, ms), key=lambda x: x[1])
    refit = AlphaBeta.load(str(out / "refresh" / "comm_model.json"))
    expected = fit_points([b for b, _ in least.values()], [ms for _, ms in least.values()], "")
    assert (refit.alpha_ms, refit.bytes_per_ms) == pytest.approx((expected.alpha_ms, expected.bytes_per_ms))
    assert rounds[-1]["comm_refit"]["alpha_ms"] == pytest.approx(refit.alpha_ms)
    assert f"refit on the {len(least)} distinct all-to-alls the refresh loop timed" in raw["cost_model"]
    assert raw["comm"] == DEFAULT_COMM.to_json()  # the evaluator keeps its own (--comm default)
    assert "comm fit error on the plans' timed all-to-alls" in report
    # ...and the loop's ratios are composed with those timed all-to-alls, not the comm fit's
    assert all(r["collectives"] == "measured" for r in rounds)
    assert "kernels timed once each, collectives timed with each plan's own splits" in report

    # A recorder over the grown profile reads back the devices an earlier run recorded: nothing timed again.
    task = load_tasks(str(out / "train_tasks.json"))[0]
    plan = run_planner(make_planner("size_greedy", PlannerOptions(seed=0)), task)
    recorder = DeviceRecorder(load_dataset(costs), costs)
    cost, _ = recorder.plan_cost(task, plan.device_shards(task), DEFAULT_COMM, 0, 0)
    assert recorder.added == 0 and cost.plan_ms > 0

    assert main(argv) == 0  # re-run: the loop is cached
    assert "[refresh] cached" in capsys.readouterr().err

    # Interrupted after its last round wrote rounds.json: a resume keeps the finished rounds, refits nothing.
    from autoshard.pipeline.refresh_stage import finished_rounds

    stage = out / "stages" / "refresh.json"
    record = json.loads(stage.read_text())
    stage.write_text(json.dumps({**record, "complete": False}))
    model_bytes = (out / "refresh" / "cost_model.pt").read_bytes()
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "[refresh] resuming" in err and "resuming after round 1 (of 2)" in err
    assert (out / "refresh" / "cost_model.pt").read_bytes() == model_bytes
    assert json.loads((out / "refresh" / "rounds.json").read_text())["rounds"] == rounds
    # ... unless the model left there is not the one the last finished round names: then from round 0
    assert finished_rounds(out / "refresh", with_policy=True) == rounds
    (out / "refresh" / "policy.pt").write_bytes(b"another policy")
    assert finished_rounds(out / "refresh", with_policy=True) == []
    assert finished_rounds(out / "refresh", with_policy=False) == rounds


def test_the_refresh_loop_refits_the_planning_comm_on_each_all_to_alls_least_time():
    from autoshard.pipeline.refresh_stage import MIN_COLLECTIVES, refit_comm

    sweep = AlphaBeta(0.4, 6e5, "sweep")
    # a perturbed round (every all-to-all 4x slower) and a quiet one of the same plans: the quiet one counts
    sizes = [8e4, 1e5, 1.2e5, 1.5e5, 2e5, 2.5e5]
    slow = {"collective_points": [[b, 2.0, 0.5, f"t/p{i}/pooled_outputs"] for i, b in enumerate(sizes)]}
    quiet = {"collective_points": [[b, 0.5, 0.5, f"t/p{i}/pooled_outputs"] for i, b in enumerate(sizes)]}
    for rows in ([slow, quiet], [quiet, slow]):
        fit = refit_comm(rows, sweep)
        assert fit.alpha_ms == pytest.approx(0.5) and fit.bytes_per_ms == 1e12  # flat: bytes do not matter
        assert fit.source == "refit on the 6 distinct all-to-alls the refresh loop timed (not sweep)"
    # too few distinct all-to-alls, or one size only: the sweep's fit stays
    few = {"collective_points": quiet["collective_points"][:MIN_COLLECTIVES - 1]}
    assert refit_comm([few], sweep) is sweep
    same = {"collective_points": [[1e5, 0.5 + i / 10, 0.5, f"t/p{i}/ids"] for i in range(8)]}
    assert refit_comm([same], sweep) is sweep and refit_comm([], sweep) is sweep


def test_the_refresh_row_says_whose_plan_each_learned_planner_returned():
    from autoshard.bench.report import refresh_lines
    from autoshard.pipeline.refresh_stage import OWN_PLAN, describe_round, describe_sources, plan_source

    steps = {"dim_greedy": ("A", None), "lookup_greedy": ("B", None), "size_greedy": ("B", None),
             "search": ("B", None), "rl": ("C", None)}
    # the first heuristic in the guard's order that planned it, else the planner's own
    assert plan_source("B", steps) == "lookup_greedy" and plan_source("C", steps) == OWN_PLAN
    assert describe_sources({OWN_PLAN: 1, "lookup_greedy": 2}) == " (lookup_greedy's plan 2, its own 1)"
    assert describe_sources(None) == describe_sources({}) == ""
    row = {"round": 0, "records_added": 4, "records_total": 10, "devices": 4, "device_mape": 0.2,
           "underestimated_share": 0.5, "ratio_to_best_heuristic": {"search": 1.2, "rl": 1.1},
           "plan_sources": {"search": {"lookup_greedy": 2}, "rl": {OWN_PLAN: 1, "size_greedy": 1}},
           "collectives": "modelled", "elapsed_s": 3.0}
    line = describe_round(row)
    assert "search 1.200 (lookup_greedy's plan 2), rl 1.100 (its own 1, size_greedy's plan 1)" in line
    table = "\n".join(refresh_lines([row]))
    assert "| 1.200 (lookup_greedy's plan 2) | 1.100 (its own 1, size_greedy's plan 1) |" in table
    # a row written before the loop recorded it reads as before
    old = {k: v for k, v in row.items() if k != "plan_sources"}
    assert "search 1.200, rl 1.100" in describe_round(old) and "| 1.200 | 1.100 |" in "\n".join(
        refresh_lines([old]))


def test_the_report_command_restates_every_flag_that_changes_the_run():
    from autoshard.cli.bench import COLLECTIVES_DEFAULT, _command, _reconstruct
    from autoshard.cli.main import build_parser

    args = build_parser().parse_args(["bench", "--suite", "tiny", "-o", "out", "--measure-top", "3",
                                      "--descend", "8", "--collectives", "model"])
    command = _command("bench", _reconstruct(args, "out"))
    assert "--measure-top 3" in command and "--descend 8" in command and "--collectives model" in command
    plain = build_parser().parse_args(["bench", "--suite", "tiny", "-o", "out"])
    assert plain.collectives == COLLECTIVES_DEFAULT and "--collectives" not in _reconstruct(plain, "out")


def test_refresh_rounds_plan_fresh_tasks_and_wrap_round_the_split():
    """``refresh_stage.round_tasks``: round r plans the next tasks of the train split, so no task is planned
    twice before every one was; more tasks a round than the split has is the whole split each round."""
    from autoshard.errors import AutoshardError
    from autoshard.pipeline.refresh_stage import round_tasks

    tasks = [Task(tuple(make_tables(2, seed=i)), (10**9,) * 2, name=f"t{i}") for i in range(5)]
    two = round_tasks(tasks, 2)
    assert [[t.name for t in two(r)] for r in range(4)] == [["t0", "t1"], ["t2", "t3"], ["t4", "t0"],
                                                             ["t1", "t2"]]
    assert [t.name for t in round_tasks(tasks, 9)(3)] == [f"t{i}" for i in range(5)]
    with pytest.raises(AutoshardError, match="at least one task"):
        round_tasks([], 2)
