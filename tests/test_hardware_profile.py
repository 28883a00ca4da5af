"""The profiling dataset: records, resume after a kill, ranks, bad inputs (autoshard profile,
load_dataset)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autoshard.cli.main import main
from autoshard.errors import AutoshardError
from autoshard.hardware.profiler import CostRecord, load_dataset, sample_shards
from autoshard.plan import COLUMN_SHARD_MULTIPLE
from autoshard.tables import LookupKind, LookupSpec, Table, TablePool

FAST = ["--repeats", "2", "--warmup", "0", "--max-cv", "100", "--max-tries", "1", "--no-flush",
        "--batch-size", "32", "--max-tables", "3"]


def _pool(path: Path, n: int = 6) -> Path:
    tables = [Table(f"t{i}", (8, 16, 32)[i % 3], (300, 2000, 5000)[i % 3], (1.0, 4.0, 8.0)[i % 3],
                    lookups=LookupSpec(LookupKind.POWER_LAW, seed=i, alpha=1.1)) for i in range(n)]
    TablePool.from_tables(tables).save(str(path))
    return path


def _ids(costs: Path) -> list[str]:
    return [json.loads(line)["sample_id"] for p in sorted(costs.glob("shards-*.jsonl"))
            for line in p.read_text().splitlines() if line.strip()]


def test_profile_writes_records_with_all_fields(tmp_path: Path) -> None:
    tables = _pool(tmp_path / "tables.json")
    costs = tmp_path / "costs"
    assert main(["profile", "--tables", str(tables), "--samples", "4", "-o", str(costs), *FAST]) == 0
    data = load_dataset(costs)
    assert [r.sample_id for r in data.records] == ["0-0", "0-1", "0-2", "0-3"]
    assert data.comm is None and [t.name for t in data.pool.tables] == [f"t{i}" for i in range(6)]
    pool = data.pool.by_name()
    for r in data.records:
        assert isinstance(r, CostRecord)
        assert 1 <= len(r.tables) <= 3 and len(r.tables) == len(r.dims) == len(r.rows)
        assert all(0 < d <= pool[n].dim for n, d in zip(r.tables, r.dims))
        assert r.batch_size == 32 and r.fwd_ms > 0 and r.bwd_ms > 0 and r.fwd_cv >= 0 and r.bwd_cv >= 0
        assert r.settings["precision"] == "fp32" and r.settings["rows_cap"] == 1_000_000
        assert r.settings["threads"] == 1 and r.settings["optimizer"] == "exact_sgd"
        assert r.host["rank"] == 0 and r.host["hostname"]
        assert CostRecord.from_json(r.to_json()) == r
        task, shards = data.task_of(r)
        assert [task.tables[s.table].name for s in shards] == list(r.tables)


def test_samples_are_deterministic_and_include_column_shards(tmp_path: Path) -> None:
    pool = TablePool.load(str(_pool(tmp_path / "tables.json")))
    assert sample_shards(pool, 3, 17, 4) == sample_shards(pool, 3, 17, 4)
    cut = [(n, d) for i in range(200) for n, d in sample_shards(pool, 0, i, 4, column_share=0.5)
           if d < pool.by_name()[n].dim]
    assert cut and all(d % COLUMN_SHARD_MULTIPLE == 0 for _, d in cut)
    assert all(d == pool.by_name()[n].dim for i in range(50) for n, d in sample_shards(pool, 0, i, 4, 0.0))


@pytest.mark.slow  # a CLI subprocess profiling real kernels until it is killed
def test_resume_after_kill_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    tables = _pool(tmp_path / "tables.json")
    costs = tmp_path / "costs"
    shards = costs / "shards-rank0.jsonl"
    total = 10
    cmd = [sys.executable, "-m", "autoshard.cli.main", "profile", "--tables", str(tables), "--samples",
           str(total), "-o", str(costs), *FAST[:-4], "--batch-size", "256", "--repeats", "6"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if shards.exists() and shards.read_text().count("\n") >= 2:
                break
            time.sleep(0.05)
        assert proc.poll() is None, "the profile finished before it could be killed; make samples slower"
        os.kill(proc.pid, signal.SIGKILL)  # a crash: no clean-up runs
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
    first = _ids(costs)
    assert 2 <= len(first) < total
    with open(shards, "a") as f:  # and the crash tore the line being written
        f.write('{"sample_id":"0-99","tab')
    assert main(["profile", "--tables", str(tables), "--samples", str(total), "-o", str(costs),
                 *FAST[:-4], "--batch-size", "256", "--repeats", "6"]) == 0
    ids = _ids(costs)
    assert ids[:len(first)] == first  # what was collected is kept, not re-measured
    assert sorted(ids) == sorted(f"0-{i}" for i in range(total))  # nothing lost, nothing twice
    assert len(load_dataset(costs).records) == total


def test_ranks_write_their_own_files_and_load_dataset_merges(tmp_path: Path, monkeypatch) -> None:
    tables = _pool(tmp_path / "tables.json")
    costs = tmp_path / "costs"
    assert main(["profile", "--tables", str(tables), "--samples", "5", "-o", str(costs), "--rank", "1",
                 "--world-size", "2", *FAST]) == 0
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")  # as torchrun sets them
    assert main(["profile", "--tables", str(tables), "--samples", "5", "-o", str(costs), *FAST]) == 0
    assert sorted(_ids_of(costs / "shards-rank0.jsonl")) == ["0-0", "0-2", "0-4"]
    assert sorted(_ids_of(costs / "shards-rank1.jsonl")) == ["0-1", "0-3"]
    assert [r.sample_id for r in load_dataset(costs).records] == [f"0-{i}" for i in range(5)]


def _ids_of(path: Path) -> list[str]:
    return [json.loads(line)["sample_id"] for line in path.read_text().splitlines()]


def test_resume_with_other_settings_is_refused(tmp_path: Path, capsys) -> None:
    tables = _pool(tmp_path / "tables.json")
    costs = tmp_path / "costs"
    assert main(["profile", "--tables", str(tables), "--samples", "1", "-o", str(costs), *FAST]) == 0
    capsys.readouterr()
    assert main(["profile", "--tables", str(tables), "--samples", "2", "-o", str(costs), *FAST,
                 "--precision", "fp16"]) == 2
    err = capsys.readouterr().err.strip()
    assert "other settings" in err and "precision" in err and "\n" not in err


@pytest.mark.parametrize("extra, match", [
    (["--rank", "2", "--world-size", "2"], "rank 2"),
    (["--column-share", "1.5"], "column share"),
    (["--max-shard-bytes", "lots"], "not understood"),
])
def test_bad_profile_arguments_exit_2_with_one_line(tmp_path: Path, capsys, extra, match) -> None:
    tables = _pool(tmp_path / "tables.json")
    assert main(["profile", "--tables", str(tables), "--samples", "1", "-o", str(tmp_path / "c"), *FAST,
                 *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert match in err and "\n" not in err


def test_missing_tables_file_exits_2(tmp_path: Path, capsys) -> None:
    assert main(["profile", "--tables", str(tmp_path / "nope.json"), "--samples", "1", "-o",
                 str(tmp_path / "c")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_load_dataset_rejects_a_corrupt_middle_line(tmp_path: Path) -> None:
    tables = _pool(tmp_path / "tables.json")
    costs = tmp_path / "costs"
    assert main(["profile", "--tables", str(tables), "--samples", "2", "-o", str(costs), *FAST]) == 0
    path = costs / "shards-rank0.jsonl"
    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[0], "garbage", lines[1]]) + "\n")
    with pytest.raises(AutoshardError, match=r"shards-rank0.jsonl:2"):
        load_dataset(costs)
    (tmp_path / "empty").mkdir()
    with pytest.raises(AutoshardError, match="not a profile directory"):
        load_dataset(tmp_path / "empty")


def test_pack_merges_ranks_byte_stably_and_profiling_resumes_beside_it(tmp_path: Path, capsys) -> None:
    tables = _pool(tmp_path / "tables.json")
    costs = tmp_path / "costs"
    for rank in (0, 1):
        assert main(["profile", "--tables", str(tables), "--samples", "4", "-o", str(costs),
                     "--rank", str(rank), "--world-size", "2", *FAST]) == 0
    before = load_dataset(costs).records
    assert main(["profile-pack", str(costs)]) == 0
    assert "packed 4 records" in capsys.readouterr().out
    assert not list(costs.glob("shards-*.jsonl")) and (costs / "shards-packed.jsonl.gz").is_file()
    assert load_dataset(costs).records == before
    packed = (costs / "shards-packed.jsonl.gz").read_bytes()
    assert main(["profile-pack", str(costs)]) == 0
    assert (costs / "shards-packed.jsonl.gz").read_bytes() == packed  # no time stamp: commit-stable
    # a later sitting grows the profile: only the new samples are measured, beside the packed file
    assert main(["profile", "--tables", str(tables), "--samples", "6", "-o", str(costs), *FAST]) == 0
    assert sorted(_ids_of(costs / "shards-rank0.jsonl")) == ["0-4", "0-5"]
    assert [r.sample_id for r in load_dataset(costs).records] == [f"0-{i}" for i in range(6)]


def test_pack_refuses_a_directory_that_is_not_a_profile(tmp_path: Path, capsys) -> None:
    assert main(["profile-pack", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "not a profile directory" in err and "\n" not in err


def test_a_corrupt_packed_file_is_a_one_line_error(tmp_path: Path, capsys) -> None:
    tables = _pool(tmp_path / "tables.json")
    costs = tmp_path / "costs"
    assert main(["profile", "--tables", str(tables), "--samples", "2", "-o", str(costs), *FAST]) == 0
    assert main(["profile-pack", str(costs)]) == 0
    packed = costs / "shards-packed.jsonl.gz"
    packed.write_bytes(packed.read_bytes()[:20])  # truncated
    capsys.readouterr()
    assert main(["profile-pack", str(costs)]) == 2
    err = capsys.readouterr().err.strip()
    assert "not a readable gzip JSON-lines file" in err and "\n" not in err and "Traceback" not in err
