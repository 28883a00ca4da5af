"""Malformed artefacts a user may hand the CLI (a field of the wrong type, a missing or empty one, a number
too large for a float): each is one line naming the problem, exit 2, no traceback, nothing written. On stop
76's code 27 of these ended in a traceback and one was accepted (docs/benchmarks.md, "Stop 77")."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from autoshard.cli.main import main
from autoshard.costs.loading import SHIPPED_POLICY
from autoshard.costs.table_calibration import TableCalibration
from autoshard.errors import AutoshardError

Edit = Callable[[dict[str, Any]], Any]


def _edited(path: Path, edit: Edit, out: Path) -> str:
    """``path``'s JSON with ``edit`` applied (it changes the dict in place), written to ``out``."""
    d = json.loads(path.read_text())
    edit(d)
    out.write_text(json.dumps(d).replace('"__BIG__"', "1e400"))  # JSON text json.dumps cannot write
    return str(out)


def _set(*path_and_value: Any) -> Edit:
    """Set the field at the path (keys and indices) to the last argument."""
    *keys, value = path_and_value

    def edit(d: dict[str, Any]) -> None:
        for k in keys[:-1]:
            d = d[k]
        d[keys[-1]] = value
    return edit


def _first_placement(value: Any) -> Edit:
    def edit(d: dict[str, Any]) -> None:
        d["tables"][next(iter(d["tables"]))] = value
    return edit


def _first_shard(key: str, value: Any) -> Edit:
    def edit(d: dict[str, Any]) -> None:
        d["tables"][next(iter(d["tables"]))]["shards"][0][key] = value
    return edit


def _run(argv: list[str], capsys, expect: str, written: Path | None = None) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("autoshard: error:") and len(err.splitlines()) == 1 and expect in err, err
    if written is not None:
        assert not written.exists()


@pytest.fixture()
def made(tmp_path, tables_file) -> dict[str, Path]:
    """A valid plan and task file of the conftest tables, to break one field at a time."""
    plan, tasks = tmp_path / "plan.json", tmp_path / "tasks.json"
    assert main(["plan", "--tables", tables_file, "--devices", "2", "--algo", "size_greedy",
                 "--cost-model", "analytical", "-o", str(plan)]) == 0
    assert main(["tasks", "--tables", tables_file, "--split", "all", "--num-tasks", "1", "--num-tables", "3",
                 "--devices", "2", "-o", str(tasks)]) == 0
    return {"plan": plan, "tasks": tasks, "tables": Path(tables_file)}


@pytest.mark.parametrize(("edit", "expect"), [
    (_set("tables", 0, "dim", "__BIG__"), "too large for a float"),
    (_set("tables", ["t0"]), "not an object"),
    (_set("tables", 0, "lookups", 5), "bad value"),
    (_set("source", "synthetic"), "'source'"),
    (_set("normalizer", []), "normaliser"),
    (_set("normalizer", "mean", [1.0]), "normaliser needs"),
])
def test_a_broken_tables_file(made, tmp_path, capsys, edit, expect):
    tables = _edited(made["tables"], edit, tmp_path / "broken.json")
    out = tmp_path / "out.json"
    _run(["plan", "--tables", tables, "--devices", "2", "--algo", "size_greedy", "-o", str(out)], capsys,
         expect, out)


@pytest.mark.parametrize(("edit", "expect"), [
    (_set("tasks", [5]), "not an object"),
    (_set("tasks", 0, "device_memory", ["5GB", "5GB"]), "wrong type"),
    (_set("tasks", 0, "device_memory", 8), "wrong type"),
    (_set("tasks", 0, "batch_size", "big"), "wrong type"),
    (_set("tasks", 0, "optimizer_bytes_per_element", None), "wrong type"),
    (_set("tasks", 0, "meta", [1]), "wrong type"),
    (_set("tasks", 0, "device_memory", ["__BIG__", 10**9]), "too large for a float"),
])
def test_a_broken_task_file(made, tmp_path, capsys, edit, expect):
    tasks = _edited(made["tasks"], edit, tmp_path / "broken.json")
    out = tmp_path / "out.json"
    _run(["plan", "--task", tasks, "--algo", "size_greedy", "-o", str(out)], capsys, expect, out)


@pytest.mark.parametrize(("edit", "expect"), [
    (_set("cost", {"source": "x"}), "'cost' is malformed"),
    (_set("cost", "abc"), "'cost' is malformed"),
    (_first_placement([1]), "not an object"),
    (_first_placement(None), "not an object"),
    (_first_shard("rows", [0]), "a shard of table"),
    (_first_shard("rank", "__BIG__"), "too large for a float"),
    (_set("devices", "__BIG__"), "too large for a float"),
])
def test_a_broken_plan_file(made, tmp_path, capsys, edit, expect):
    plan = _edited(made["plan"], edit, tmp_path / "broken.json")
    out = tmp_path / "eval.json"
    _run(["evaluate", "--plan", plan, "--tables", str(made["tables"]), "--json", str(out)], capsys, expect,
         out)


def test_a_comm_model_too_large_for_a_float(tmp_path, tables_file, capsys):
    comm = tmp_path / "comm.json"
    comm.write_text('{"kind": "autoshard.comm_model", "version": 1, "alpha_ms": 1e400, "bytes_per_ms": 1e6, '
                    '"source": "hand-made"}')
    out = tmp_path / "plan.json"
    _run(["plan", "--tables", tables_file, "--devices", "2", "--comm", str(comm), "-o", str(out)], capsys,
         "too large for a float", out)


@pytest.mark.parametrize(("edit", "expect"), [
    (lambda ck: ck.pop("policy_config"), "broken policy checkpoint"),
    (lambda ck: ck.pop("normalizer"), "broken policy checkpoint"),
    (lambda ck: ck["policy_config"].update(unknown_field=1), "broken policy checkpoint"),
    (lambda ck: ck["policy_config"].update(hidden=ck["policy_config"]["hidden"] + 1),
     "broken policy checkpoint"),
])
def test_a_broken_policy_checkpoint(tmp_path, tables_file, capsys, edit, expect):
    ck = copy.deepcopy(torch.load(str(SHIPPED_POLICY), map_location="cpu", weights_only=True))
    edit(ck)
    policy = tmp_path / "policy.pt"
    torch.save(ck, str(policy))
    out = tmp_path / "plan.json"
    _run(["plan", "--tables", tables_file, "--devices", "2", "--algo", "rl", "--policy", str(policy),
          "-o", str(out)], capsys, expect, out)


def test_a_calibration_whose_factors_are_not_a_mapping(tmp_path):
    cal = tmp_path / "cal.json"
    cal.write_text(json.dumps({"kind": "autoshard.table_calibration", "version": 1, "level": [0, 0],
                               "factors": [], "devices": 3}))
    with pytest.raises(AutoshardError, match="broken table calibration") as e:
        TableCalibration.load(str(cal))
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("span", ["1:inf", "nan", "inf"])
def test_a_profile_range_that_is_not_finite(tmp_path, capsys, span):
    out = tmp_path / "costs"
    _run(["profile", "--design", "broad", "--rows", span, "--samples", "1", "-o", str(out)], capsys,
         "finite number", out)
