"""``autoshard verify``: a plan run for real in TorchRec DMP on 2 CPU processes, and its input checks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torchrec  # noqa: F401  (a core dependency: a broken install must fail, not skip)
from conftest import make_tables

from autoshard.cli.main import main
from autoshard.plan import Plan, TablePlacement
from autoshard.tables import TablePool
from autoshard.tasks import Task, save_tasks


@pytest.fixture
def small(tmp_path):
    tables = make_tables(6, seed=21, dims=(16, 32), max_rows=5000)
    tables_file = str(tmp_path / "tables.json")
    TablePool.from_tables(tables).save(tables_file)
    t = tables
    plan = Plan((
        TablePlacement.table_wise(t[0].name, 0, t[0].dim),
        TablePlacement.column_wise(t[1].name, [1, 0], [8, t[1].dim - 8]),
        TablePlacement.table_wise(t[2].name, 1, t[2].dim),
        TablePlacement.table_wise(t[3].name, 1, t[3].dim),
        TablePlacement.column_wise(t[4].name, [0, 1], [t[4].dim - 4, 4]),
        TablePlacement.table_wise(t[5].name, 0, t[5].dim),
    ), 2, "manual", "small")
    plan_file = str(tmp_path / "plan.json")
    plan.save(plan_file)
    return tables, tables_file, plan, plan_file


@pytest.mark.slow
def test_two_process_cpu_verify_matches_unsharded(small, tmp_path, capsys):
    tables, tables_file, plan, plan_file = small
    out = str(tmp_path / "verify.json")
    code = main(["verify", "--plan", plan_file, "--tables", tables_file, "--batch-size", "64", "--steps", "2",
                 "--warmup", "1", "--rows-cap", "1000", "--timeout", "240", "--json", out,
                 "--profile-steps", "1", "--profile-top", "400"])
    text = capsys.readouterr().out
    assert code == 0, text
    assert "matches the unsharded module" in text
    assert "rank 1: ops by self CPU time per profiled step (1 steps, torch.profiler)" in text
    result = json.loads(Path(out).read_text())
    assert result["matches"] is True and result["devices"] == 2
    assert result["local_batch"] == 32 and result["global_batch"] == 64
    assert result["rows_cap"] == 1000
    assert result["rows_used"] == {t.name: min(t.rows, 1000) for t in tables}
    shards = [len(s) for s in plan.device_shards(Task(tuple(tables), (10**9,) * 2))]
    assert [r["shards"] for r in result["ranks"]] == shards
    assert all(len(r["step_ms"]) == 2 and r["median_ms"] > 0 for r in result["ranks"])
    assert result["max_step_ms"] == max(r["median_ms"] for r in result["ranks"])
    assert result["max_abs_diff"] <= 1e-4
    for r in result["ranks"]:  # the profiled step's ops, every one (at batch 64 the fused kernels need not
        # be among the 15 slowest: one CI run listed none of them there), the fused kernels among them
        ops = {op["name"]: op for op in r["profile"]}
        assert 15 < len(ops) <= 400 and all(op["self_ms"] >= 0 and op["calls"] > 0 for op in ops.values())
        assert any(name.startswith("fbgemm::split_embedding") for name in ops)


def test_plan_for_other_tables_is_a_one_line_error(small, tmp_path, capsys):
    _, _, _, plan_file = small
    other = str(tmp_path / "other.json")
    TablePool.from_tables(make_tables(6, seed=21, dims=(64,), max_rows=5000)).save(other)
    assert main(["verify", "--plan", plan_file, "--tables", other]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "autoshard: error:" in err[0] and "dim" in err[0]


def test_wrong_device_count_is_a_one_line_error(small, tmp_path, capsys):
    tables, _, _, plan_file = small
    tasks_file = str(tmp_path / "tasks.json")
    save_tasks(tasks_file, [Task(tuple(tables), (10**9,) * 3, batch_size=64, name="three")])
    assert main(["verify", "--plan", plan_file, "--task", tasks_file, "--task-index", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "2 devices but the task has 3" in err[0]
    assert main(["verify", "--plan", plan_file, "--task", tasks_file, "--task-index", "4"]) == 2
    assert "out of range" in capsys.readouterr().err


def test_bad_options_are_one_line_errors(small, capsys):
    _, tables_file, _, plan_file = small
    assert main(["verify", "--plan", plan_file, "--tables", tables_file, "--optimizer", "adam"]) == 2
    assert "exact_sgd" in capsys.readouterr().err
    assert main(["verify", "--plan", plan_file, "--tables", tables_file, "--memory", "1KB"]) == 2
    assert "device 0 uses" in capsys.readouterr().err
    assert main(["verify", "--plan", plan_file, "--tables", tables_file, "--pin-cpus", "--device",
                 "cuda"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pin_cpus pins CPU ranks" in err[0]
    assert main(["verify", "--plan", plan_file, "--tables", tables_file, "--profile-steps", "-1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "need profile_steps >= 0" in err[0]
    assert main(["verify", "--plan", plan_file, "--tables", tables_file, "--profile-steps", "1",
                 "--profile-top", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "profile_top >= 1" in err[0]
    assert main(["verify", "--plan", plan_file, "--tables", tables_file, "--profile-steps", "2", "--runtime",
                 "autoshard"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--profile-steps profiles TorchRec DMP steps" in err[0]


def test_pinning_more_ranks_than_cores_is_a_one_line_error_before_any_process(small, monkeypatch, capsys):
    from autoshard.hardware import multiprocess

    _, tables_file, _, plan_file = small
    monkeypatch.setattr(multiprocess, "physical_cores", lambda: [0])
    monkeypatch.setattr(multiprocess, "free_port", lambda: pytest.fail("a process was about to start"))
    assert main(["verify", "--plan", plan_file, "--tables", tables_file, "--pin-cpus"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pinning 2 ranks needs 2 physical cores" in err[0]
