"""The tables and tasks commands through the CLI: files written, train/test pools disjoint, one-line
errors."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
import torch

from autoshard.cli.main import main
from autoshard.tables import TablePool
from autoshard.tasks import load_tasks


def run(argv: list[str]) -> int:
    """Exit code of the CLI, whether it returns it or argparse exits with it."""
    try:
        return main(argv)
    except SystemExit as e:
        return int(e.code)


@pytest.fixture(scope="module")
def pool_file(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("pool") / "pool.json")
    assert run(["tables", "synth", "--num-tables", "40", "--seed", "2", "--stats-batch-size", "256",
                "-o", path]) == 0
    return path


def test_tables_synth(pool_file, tmp_path, capsys):
    pool = TablePool.load(pool_file)
    assert len(pool.tables) == 40 and {t.dim for t in pool.tables} == {16}
    assert pool.source["config"]["seed"] == 2 and pool.source["config"]["stats_batch_size"] == 256
    again = str(tmp_path / "again.json")
    capsys.readouterr()
    assert run(["tables", "synth", "--num-tables", "40", "--seed", "2", "--stats-batch-size", "256",
                "-o", again]) == 0
    out = capsys.readouterr().out.strip()
    assert len(out.splitlines()) == 1 and "40 tables" in out
    assert TablePool.load(again).to_json() == pool.to_json()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["again.json"]  # no checkpoint left behind
    many = str(tmp_path / "many.json")
    assert run(["tables", "synth", "--num-tables", "20", "--dims", "4,8,16,32,64,128",
                "--stats-batch-size", "64", "-o", many]) == 0
    assert len({t.dim for t in TablePool.load(many).tables}) > 1


def test_tables_from_trace_and_show(tmp_path, capsys):
    lengths = torch.tensor([[1, 2, 0], [0, 0, 0], [3, 1, 1]])
    offsets = torch.zeros(10, dtype=torch.int64)
    offsets[1:] = torch.cumsum(lengths.flatten(), 0)
    indices = torch.tensor([5, 7, 7, 1, 1, 1, 2, 9])
    trace = tmp_path / "t.pt.gz"
    with gzip.open(trace, "wb") as f:
        torch.save((indices, offsets, lengths), f)
    out_file = str(tmp_path / "trace_tables.json")
    assert run(["tables", "from-trace", str(trace), "--dim", "32", "-o", out_file]) == 0
    out = capsys.readouterr().out.strip()
    assert len(out.splitlines()) == 1 and "3 tables" in out and "1 tables without lookups" in out
    pool = TablePool.load(out_file)
    assert [t.rows for t in pool.tables] == [8, 1, 10] and {t.dim for t in pool.tables} == {32}
    assert [t.pooling_factor for t in pool.tables] == pytest.approx([1.0, 0.0, 5 / 3])
    assert run(["tables", "show", out_file]) == 0
    shown = capsys.readouterr().out
    assert "3 tables" in shown and "1 without lookups" in shown and "mean access bins" in shown


def _names(path: str) -> set[str]:
    return {t.name for task in load_tasks(path) for t in task.tables}


def test_tasks_train_and_test_pools_disjoint(pool_file, tmp_path, capsys):
    train, test, both = (str(tmp_path / f"{s}.json") for s in ("train", "test", "all"))
    common = ["--tables", pool_file, "--num-tasks", "6", "--num-tables", "8", "--devices", "4",
              "--memory", "5GB"]
    assert run(["tasks", *common, "--split", "train", "--seed", "0", "-o", train]) == 0
    assert run(["tasks", *common, "--split", "test", "--seed", "1", "-o", test]) == 0
    assert run(["tasks", *common, "--split", "all", "-o", both]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 3 and "6 train tasks of 8 tables on 4 devices" in out[0]
    tasks = load_tasks(train)
    assert len(tasks) == 6 and all(t.num_tables == 8 and t.device_memory == (5 * 10**9,) * 4 for t in tasks)
    assert _names(train).isdisjoint(_names(test))
    settings = json.loads(Path(train).read_text())["settings"]
    assert set(settings["split_pool"]) >= _names(train) and len(settings["split_pool"]) == 20
    test_split_pool = json.loads(Path(test).read_text())["settings"]["split_pool"]
    assert set(test_split_pool).isdisjoint(settings["split_pool"])


def _bad_json(tmp_path) -> str:
    path = tmp_path / "bad.json"
    path.write_text('{"kind": "autoshard.tables", "tables": [')
    return str(path)


@pytest.mark.parametrize("argv, message", [
    (["tasks", "--tables", "{missing}", "--num-tables", "3", "--devices", "2", "-o", "{out}"],
     "no such file"),
    (["tasks", "--tables", "{bad}", "--num-tables", "3", "--devices", "2", "-o", "{out}"], "not valid JSON"),
    (["tasks", "--tables", "{pool}", "--num-tables", "0", "--devices", "2", "-o", "{out}"],
     "positive integer"),
    (["tasks", "--tables", "{pool}", "--num-tables", "3", "--devices", "-2", "-o", "{out}"],
     "positive integer"),
    (["tasks", "--tables", "{pool}", "--num-tables", "3", "--devices", "2", "--num-tasks", "0",
      "-o", "{out}"], "positive integer"),
    (["tasks", "--tables", "{pool}", "--num-tables", "30", "--devices", "2", "-o", "{out}"],
     "cannot sample 30"),
    (["tasks", "--tables", "{pool}", "--num-tables", "3", "--devices", "2", "--memory", "0GB", "-o", "{out}"],
     "must be positive"),
    (["tasks", "--tables", "{pool}", "--num-tables", "3", "--devices", "2", "--memory", "1MB", "-o", "{out}"],
     "give more memory"),
    (["tables", "synth", "--num-tables", "0", "-o", "{out}"], "positive integer"),
    (["tables", "synth", "--num-tables", "-5", "-o", "{out}"], "positive integer"),
    (["tables", "synth", "--num-tables", "5", "--dims", "16,0", "-o", "{out}"], "positive integer"),
    (["tables", "from-trace", "{missing}", "-o", "{out}"], "no such trace file"),
    (["tables", "from-trace", "{bad}", "-o", "{out}"], "cannot load the trace"),
    (["tables", "show", "{missing}"], "no such file"),
    (["tables", "show", "{bad}"], "not valid JSON"),
])
def test_bad_input_is_one_line_exit_2(argv, message, pool_file, tmp_path, capsys):
    subs = {"{missing}": str(tmp_path / "missing.json"), "{bad}": _bad_json(tmp_path), "{pool}": pool_file,
            "{out}": str(tmp_path / "out.json")}
    capsys.readouterr()
    assert run([subs.get(a, a) for a in argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "out.json").exists()
