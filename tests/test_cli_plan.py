"""The plan command through the CLI: output, written plan, and one-line errors for bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autoshard.cli.main import main
from autoshard.costs.comm import AlphaBeta
from autoshard.plan import Plan, validate
from autoshard.tables import TablePool
from autoshard.tasks import Task


def test_plan_prints_per_device_table_and_writes_plan(tables_file, tmp_path, capsys):
    out = str(tmp_path / "plan.json")
    assert main(["plan", "--tables", tables_file, "--devices", "4", "--memory", "5GB",
                 "--algo", "size_lookup_greedy", "-o", out]) == 0
    text = capsys.readouterr().out
    assert "memory used / capacity" in text and text.count("/ 5.00GB") == 4
    plan = Plan.load(out)
    pool = TablePool.load(tables_file)
    validate(plan, Task(tables=pool.tables, device_memory=(5 * 10**9,) * 4))
    assert plan.algorithm == "size_lookup_greedy"


def test_default_algorithm_is_search_behind_the_guard(tables_file, tmp_path, capsys):
    """Without --algo, pooled tables are planned by search on the shipped model behind the heuristic guard
    (stop 80: 0.955 of size_lookup_greedy over 230 archived bench tasks, ``benchmarks/default_algo.py``); the
    guard's decision is printed, whichever plan it kept."""
    out = str(tmp_path / "plan.json")
    assert main(["plan", "--tables", tables_file, "--devices", "4", "--memory", "5GB", "-o", out]) == 0
    text = capsys.readouterr().out
    assert "plan by search for" in text
    guard = [line for line in text.splitlines() if line.startswith("guard: search: kept ")]
    assert len(guard) == 1 and "the model's uncertainty" in guard[0]
    plan = Plan.load(out)
    assert plan.algorithm == "search"
    validate(plan, Task(tables=TablePool.load(tables_file).tables, device_memory=(5 * 10**9,) * 4))
    assert main(["plan", "--tables", tables_file, "--devices", "4", "--algo", "size_lookup_greedy"]) == 0
    assert "guard:" not in capsys.readouterr().out  # a heuristic answers to no guard


def _comm_column(text: str) -> list[float]:
    rows = [line.split() for line in text.splitlines() if line.split() and line.split()[0].isdigit()]
    return [float(r[-2]) for r in rows]  # columns end with: fwd ms, bwd ms, comm ms, total ms


def test_comm_flag_prices_the_all_to_all_of_the_given_cluster(tables_file, tmp_path, capsys):
    argv = ["plan", "--tables", tables_file, "--devices", "2", "--algo", "lookup_greedy",
            "--cost-model", "analytical"]
    assert main(argv) == 0
    own = _comm_column(capsys.readouterr().out)
    comm = tmp_path / "comm_model.json"
    AlphaBeta(alpha_ms=40.0, bytes_per_ms=1.0e5, source="test cluster").save(str(comm))
    assert main([*argv, "--comm", str(comm)]) == 0
    slow = _comm_column(capsys.readouterr().out)
    assert len(own) == len(slow) == 2 and all(s > o + 79.0 for o, s in zip(own, slow))  # 2 x alpha more each
    assert main([*argv, "--comm", str(tmp_path / "missing.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert "no such file" in err and len(err.splitlines()) == 1


def test_list_algos(capsys):
    assert main(["plan", "--list-algos"]) == 0
    out = capsys.readouterr().out
    for name in ["random", "round_robin", "dim_greedy", "lookup_greedy", "size_greedy", "size_lookup_greedy"]:
        assert name in out


def test_per_device_memory_list(tables_file, capsys):
    assert main(["plan", "--tables", tables_file, "--devices", "2", "--memory", "8GB,4GB"]) == 0
    assert "/ 8.00GB" in capsys.readouterr().out


def _bad_json(tmp_path):
    p = tmp_path / "bad.json"
    p.write_text("{oops")
    return str(p)


def _nan_tables(tmp_path, tables_file):
    d = json.loads(Path(tables_file).read_text())
    d["tables"][0]["pooling_factor"] = float("nan")
    p = tmp_path / "nan.json"
    p.write_text(json.dumps(d))
    return str(p)


@pytest.mark.parametrize("args, message", [
    (lambda tmp, tf: ["--tables", str(tmp / "missing.json"), "--devices", "2"], "no such file"),
    (lambda tmp, tf: ["--tables", _bad_json(tmp), "--devices", "2"], "not valid JSON"),
    (lambda tmp, tf: ["--tables", tf, "--devices", "2", "--algo", "nope"], "unknown algorithm"),
    (lambda tmp, tf: ["--tables", tf, "--devices", "2", "--memory", "1KB"], "give more memory"),
    (lambda tmp, tf: ["--tables", tf, "--devices", "2", "--memory=-3GB"], "memory size"),
    (lambda tmp, tf: ["--tables", tf, "--devices", "2", "--memory", "lots"], "not understood"),
    (lambda tmp, tf: ["--tables", _nan_tables(tmp, tf), "--devices", "2"], "finite"),
    (lambda tmp, tf: ["--tables", tf], "--devices"),
])
def test_bad_input_is_one_line_and_nonzero(tmp_path, tables_file, capsys, args, message):
    assert main(["plan", *args(tmp_path, tables_file)]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1 and "Traceback" not in err


@pytest.mark.parametrize("devices", ["0", "-2"])
def test_non_positive_devices_rejected_by_parser(tables_file, devices, capsys):
    with pytest.raises(SystemExit) as e:
        main(["plan", "--tables", tables_file, f"--devices={devices}"])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "positive integer" in err and len(err.splitlines()) == 1


@pytest.mark.slow  # times real FBGEMM kernels under a 2 s ILP limit (~4 s)
def test_ilp_with_measured_cost_model_times_real_kernels(tmp_path, capsys):
    from conftest import make_tables

    from autoshard.tasks import save_tasks

    tables = tuple(t.with_dim(8) for t in make_tables(4, seed=5, max_rows=2000))
    path = str(tmp_path / "tasks.json")
    save_tasks(path, [Task(tables=tables, device_memory=(10**8,) * 2, batch_size=64, name="tiny")])
    out = str(tmp_path / "plan.json")
    assert main(["plan", "--task", path, "--algo", "ilp", "--cost-model", "measured", "--time-limit", "2",
                 "-o", out]) == 0
    text = capsys.readouterr().out
    assert "step cost (measured)" in text and "costs estimated by measured" in text
    validate(Plan.load(out), Task(tables=tables, device_memory=(10**8,) * 2, batch_size=64))


def test_measure_top_times_the_best_candidates_and_keeps_the_measured_best(tables_file, tmp_path, capsys):
    out = tmp_path / "plan.json"
    assert main(["plan", "--tables", tables_file, "--devices", "4", "--memory", "5GB", "--algo", "search",
                 "--cost-model", "analytical", "--time-limit", "1", "--batch-size", "64",
                 "--measure-top", "2", "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "candidate" in text and "measured 2 of" in text and "kept" in text
    plan = Plan.load(str(out))
    assert plan.cost is not None and plan.cost.source == "measured"


def test_descend_balances_the_measured_pick_by_timed_moves(tables_file, tmp_path, capsys):
    out = tmp_path / "plan.json"
    argv = ["plan", "--tables", tables_file, "--devices", "4", "--memory", "5GB", "--algo", "search",
            "--cost-model", "analytical", "--time-limit", "1", "--batch-size", "64", "--measure-top", "1"]
    assert main([*argv, "--descend", "2", "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "measured 1 of" in text and "measured descent:" in text and "contents timed" in text
    plan = Plan.load(str(out))
    assert plan.cost is not None and plan.cost.source == "measured"
    validate(plan, Task(tables=TablePool.load(tables_file).tables, device_memory=(5 * 10**9,) * 4,
                        batch_size=64))
    # --descend balances a measured pick: alone it is a one-line error, nothing written
    (tmp_path / "plan.json").unlink()
    assert main([*argv[:-2], "--descend", "2", "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--measure-top" in err and not out.exists()


def test_refit_replans_the_measured_pick_with_the_corrected_model(tables_file, tmp_path, capsys):
    out = tmp_path / "plan.json"
    argv = ["plan", "--tables", tables_file, "--devices", "4", "--memory", "5GB", "--algo", "search",
            "--cost-model", "analytical", "--time-limit", "1", "--batch-size", "64"]
    assert main([*argv, "--measure-top", "2", "--refit", "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "measured 2 of" in text and "refit: fitted on" in text
    plan = Plan.load(str(out))
    assert plan.cost is not None and plan.cost.source == "measured"
    # --refit corrects the model by a measured pick: alone it is a one-line error, nothing written
    out.unlink()
    assert main([*argv, "--refit", "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--measure-top" in err and not out.exists()


def test_anchor_hot_times_the_hottest_tables_alone_and_plans_with_the_corrected_model(tables_file, tmp_path,
                                                                                      capsys):
    out = tmp_path / "plan.json"
    argv = ["plan", "--tables", tables_file, "--devices", "4", "--memory", "5GB", "--algo", "search",
            "--cost-model", "analytical", "--time-limit", "1", "--batch-size", "64"]
    assert main([*argv, "--anchor-hot", "1", "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "anchors:" in text and "of 1 tables" in text and "against the model" in text
    assert "analytical + " in text and "anchors" in text.split("costs estimated by")[1]
    plan = Plan.load(str(out))
    validate(plan, Task(tables=TablePool.load(tables_file).tables, device_memory=(5 * 10**9,) * 4,
                        batch_size=64))
    # with --measure-top the corrected model ranks the candidates
    assert main([*argv, "--anchor-hot", "1", "--measure-top", "1", "-o", str(out)]) == 0
    assert "measured 1 of" in capsys.readouterr().out
    out.unlink()
    with pytest.raises(SystemExit) as info:
        main([*argv, "--anchor-hot", "0", "-o", str(out)])
    assert info.value.code == 2 and not out.exists()
    assert "--anchor-hot: 0 must be a positive integer" in capsys.readouterr().err
