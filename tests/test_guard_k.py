"""``benchmarks/guard_k.py``: the guard replayed at each k on every learned planner's candidates, and its
summary."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import load_script, make_tables

from autoshard.costs.learned import LearnedCostModel
from autoshard.costs.loading import SHIPPED_COST_MODEL
from autoshard.planners.base import PlannerOptions, make_planner, run_planner
from autoshard.planners.guard import DEFAULT_GUARD_K, GUARDED
from autoshard.tasks import Task

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "guard_k.py"


@pytest.fixture(scope="module")
def guard_k():
    return load_script(SCRIPT)


def _layout(plan) -> list:
    return sorted((p.table, p.sharding_type.value, p.shards) for p in plan.placements)


def test_the_replay_at_the_shipped_k_is_what_each_guarded_planner_returns(guard_k, one_thread):
    """The replay runs the guard itself on the planner's plans: at the shipped k its pick is the plan
    ``make_planner`` (guarded) returns, and with the guard off the planner's own."""
    task = Task(tables=tuple(make_tables(8, seed=3)), device_memory=(10**9,) * 2, name="replay")
    model = LearnedCostModel.load(str(SHIPPED_COST_MODEL), allow_other_hardware=True)
    plans, chosen = guard_k.plan_task(task, model, GUARDED)
    assert set(chosen) == set(GUARDED)
    for name in GUARDED:
        picks = chosen[name]
        assert picks[guard_k.OFF] == f"{name}:{guard_k.OWN}"
        assert set(picks) == {guard_k.OFF, *map(guard_k.k_label, guard_k.KS)}
        assert all(label in plans for label in picks.values())
        guarded = run_planner(make_planner(name, PlannerOptions(seed=0, cost_model=model, time_limit_s=10)),
                              task)
        assert _layout(guarded) == _layout(plans[picks[guard_k.k_label(DEFAULT_GUARD_K)]]), name


def _row(task: str, measured: dict[str, float], chosen: dict[str, dict[str, str]]) -> dict:
    return {"task": task, "measured": measured, "predicted": dict(measured), "chosen": chosen}


def _picks(guard_k, own_up_to: float) -> dict[str, str]:
    """search's own plan at k <= ``own_up_to`` (and off), lookup_greedy's above."""
    picks = {guard_k.OFF: "search:own"}
    picks.update({guard_k.k_label(k): "search:own" if k <= own_up_to else "lookup_greedy"
                  for k in guard_k.KS})
    return picks


HEURISTIC_MS = {"dim_greedy": 12.0, "lookup_greedy": 10.0, "size_greedy": 11.0, "size_lookup_greedy": 10.5}


def test_the_summary_prices_each_k_against_the_fixed_heuristic_and_the_shipped_k(guard_k, tmp_path, capsys):
    # task a: search's own plan 8 ms, kept up to k = 0.5; task b: its own 12.5 ms, kept up to k = 0.25
    rows = [_row("a", {**HEURISTIC_MS, "search:own": 8.0}, {"search": _picks(guard_k, 0.5)}),
            _row("b", {**HEURISTIC_MS, "search:own": 12.5}, {"search": _picks(guard_k, 0.25)})]
    path = tmp_path / "rows.json"
    path.write_text(json.dumps(rows))
    assert guard_k.main(["--summary", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"{path} (best fixed heuristic lookup_greedy): 2 tasks; planners search"
    by_label = {line.strip().split(":")[0]: line.strip() for line in out[1:]}
    # off: 8/10 and 12.5/10, geometric mean sqrt(1.0) = 1; at k = 1 lookup_greedy's on both
    assert by_label["search k=off"].startswith("search k=off: own plan on 2; / best fixed heuristic 1.000 [")
    assert by_label["search k=0.5"].startswith(
        f"search k=0.5: own plan on 1; / best fixed heuristic {(0.8 * 1.0) ** 0.5:.3f} [")
    one = by_label["search k=1"]
    assert one.startswith("search k=1: own plan on 0; / best fixed heuristic 1.000 [1.000, 1.000]; ")
    # against the shipped k (0.5: search's own 8 ms on a, lookup_greedy's 10 on b): k = 0.5 itself is 1; k = 1
    # is 10/8 on a; off is 12.5/10 on b
    assert DEFAULT_GUARD_K == 0.5
    half = by_label["search k=0.5"]
    assert half.endswith("/ k=0.5 1.000 [1.000, 1.000], above it by > 5% on 0, below on 0, worst 1.000")
    assert one.endswith(f"/ k=0.5 {1.25 ** 0.5:.3f} [1.000, 1.250], above it by > 5% on 1, below on 0, "
                        "worst 1.250")
    assert by_label["search k=off"].endswith("above it by > 5% on 1, below on 0, worst 1.250")
    assert by_label["all k=0.5"].startswith(f"all k=0.5: / best fixed heuristic {0.8 ** 0.5:.3f} [")
    # H*, the model's pick among the heuristics (here lookup_greedy, which is also the best fixed one)
    assert out[-1].startswith("  H* (the model's pick among the heuristics") and out[-1].endswith(
        "/ best fixed heuristic 1.000 [1.000, 1.000]")
    # two files: each summarised, then pooled, each task against its own file's fixed heuristic
    other = tmp_path / "other.json"
    other.write_text(json.dumps([_row("c", {**HEURISTIC_MS, "size_lookup_greedy": 9.0, "search:own": 9.0},
                                      {"search": _picks(guard_k, 2.0)})]))
    assert guard_k.main(["--summary", str(path), str(other)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert f"{other} (best fixed heuristic size_lookup_greedy): 1 tasks; planners search" in out
    pooled = out[out.index("pooled over 2 files: 3 tasks; planners search") + 1:]
    assert pooled[0].startswith(
        f"  search k=off: own plan on 3; / best fixed heuristic {(0.8 * 1.25 * 1.0) ** (1 / 3):.3f} [")
    # --table: a row per file and the pooled one, every k over the shipped k, the own plans kept
    assert guard_k.main(["--summary", str(path), str(other), "--table"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].startswith("| tasks | k = off | k = 0.25 | k = 0.5 |") and len(table) == 5
    # off: 1 and 1.25 of the shipped k's plans
    assert table[2].startswith(f"| rows | {1.25 ** 0.5:.3f} [1.000, 1.250] (2/2) | ")
    assert table[3].startswith("| other | 1.000 (1/1) | ") and table[4].startswith("| **pooled, 3 tasks** | ")


def test_the_heuristics_summary_pairs_the_models_pick_with_each_fixed_heuristic(guard_k, tmp_path, capsys):
    # task a: the model prices size_greedy cheapest (11 ms measured, lookup_greedy's 10 the cheapest); task b:
    # it prices lookup_greedy cheapest (8 ms, the cheapest)
    a = _row("a", {**HEURISTIC_MS, "search:own": 9.0}, {"search": _picks(guard_k, 0.5)})
    a["predicted"] = {**a["measured"], "size_greedy": 8.5}
    b = _row("b", {**HEURISTIC_MS, "lookup_greedy": 8.0, "search:own": 9.0}, {"search": _picks(guard_k, 0.5)})
    path = tmp_path / "rows.json"
    path.write_text(json.dumps([a, b]))
    assert guard_k.main(["--summary", str(path), "--heuristics"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2 and out[0].startswith("rows: H* over dim_greedy ")
    # over lookup_greedy: 11/10 on a, 1 on b; over size_greedy 1 and 8/11
    assert f"; lookup_greedy {1.1 ** 0.5:.3f} [1.000, 1.100]; " in out[0]
    assert f"; size_greedy {(8 / 11) ** 0.5:.3f} [0.727, 1.000]; " in out[0]
    assert out[1] == (f"  over the task's cheapest heuristic plan: dim_greedy {(1.2 * 1.5) ** 0.5:.3f}; "
                      f"lookup_greedy 1.000; size_greedy {(1.1 * 11 / 8) ** 0.5:.3f}; "
                      f"size_lookup_greedy {(1.05 * 10.5 / 8) ** 0.5:.3f}; H* {1.1 ** 0.5:.3f}")
    # two files: a pair of lines each, then the pooled pair
    copy = tmp_path / "copy.json"
    copy.write_text(path.read_text())
    assert guard_k.main(["--summary", str(path), str(copy), "--heuristics"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 6 and out[2].startswith("copy: H* over ") and out[4].startswith(
        "pooled, 4 tasks: H* over dim_greedy ")


def test_a_file_that_is_not_its_rows_is_refused_in_one_line(guard_k, tmp_path, capsys):
    bad = tmp_path / "bad.json"
    for content in ("[]", "{\"a\": 1}", json.dumps([_row("a", {"search:own": 1.0}, {})]),
                    json.dumps([_row("a", {**HEURISTIC_MS}, {"search": {"off": "search:own"}})])):
        bad.write_text(content)
        assert guard_k.main(["--summary", str(bad)]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("guard_k: error: ") and "\n" not in err, content
    bad.write_text("not json")
    assert guard_k.main(["--summary", str(bad)]) == 2
    assert "is not JSON" in capsys.readouterr().err
    # an -o holding something else is refused before any stage runs
    assert guard_k.main(["--suite", "tiny", "--workdir", str(tmp_path / "wd"), "-o", str(bad)]) == 2
    assert "is not JSON" in capsys.readouterr().err and not (tmp_path / "wd").exists()
    assert guard_k.main(["--suite", "tiny", "--planners", "search,greedy", "-o", str(tmp_path / "x")]) == 2
    assert "--planners 'search,greedy'" in capsys.readouterr().err


@pytest.mark.slow
def test_it_measures_a_suites_train_task_and_resumes(guard_k, tmp_path, capsys):
    """--suite tiny: one task's heuristics and every planner's candidates timed, picks for every k; a re-run
    with the same -o measures nothing."""
    out, workdir = tmp_path / "k.json", tmp_path / "wd"
    argv = ["--suite", "tiny", "--tasks", "1", "--planners", "search,rl", "--workdir", str(workdir),
            "-o", str(out)]
    assert guard_k.main(argv) == 0
    rows = json.loads(out.read_text())
    assert [r["task"] for r in rows] == ["tiny-train-0"] and set(rows[0]["chosen"]) == {"search", "rl"}
    assert all(ms > 0 for ms in rows[0]["measured"].values())
    assert {"search:own", "rl:own", "lookup_greedy"} <= set(rows[0]["measured"])
    assert "tiny-train-0: " in capsys.readouterr().out
    assert guard_k.main(argv) == 0
    assert "tiny-train-0: " not in capsys.readouterr().out and json.loads(out.read_text()) == rows


ROOM = Path(__file__).resolve().parent.parent / "benchmarks" / "runs" / "room"
STOP_62_SUITES = ("dlrm-10-2", "dlrm-20-2", "dlrm-50-2", "dlrm-100-2", "dlrm-20-4", "dlrm-50-4", "dlrm-10-8",
                  "dlrm-20-8")


def test_it_restates_stop_62s_choice_of_the_guards_k(guard_k, capsys):
    """docs/benchmarks.md, "Stop 62" (and ``planners.guard``'s docstring): the guard replayed on the eight
    suites' archived train tasks, every k against k = 1 (the default until then) and against 0.5 (since)."""
    # in the order of the documented command's glob (the bootstrap draws follow the tasks' order)
    files = sorted(str(ROOM / f"s62-amd-guard-k-{s}-train.json") for s in STOP_62_SUITES)
    assert guard_k.main(["--summary", *files, "--table", "--reference-k", "1"]) == 0
    pooled = capsys.readouterr().out.splitlines()[-1]
    assert pooled.split(" | ") == [
        "| **pooled, 80 tasks**", "0.989 [0.975, 1.005] (320/320)", "0.985 [0.973, 0.996] (215/320)",
        "0.988 [0.978, 0.997] (169/320)", "0.994 [0.986, 1.000] (140/320)", "1.000 [1.000, 1.000] (106/320)",
        "1.009 [1.003, 1.017] (70/320)", "1.015 [1.006, 1.025] (44/320)", "1.025 [1.014, 1.038] (6/320) |"]
    assert guard_k.main(["--summary", *files]) == 0
    out = capsys.readouterr().out.splitlines()
    pooled = out[out.index("pooled over 8 files: 80 tasks; planners search, neuroshard, ilp, rl"):]
    assert ("  all k=0.5: / best fixed heuristic 0.952 [0.933, 0.971]; / k=0.5 1.000 [1.000, 1.000], above "
            "it by > 5% on 0, below on 0, worst 1.000") in pooled
    assert ("  all k=1: / best fixed heuristic 0.964 [0.945, 0.981]; / k=0.5 1.012 [1.003, 1.023], above it "
            "by > 5% on 10, below on 2, worst 1.322") in pooled
    assert pooled[-1].endswith("/ best fixed heuristic 0.989 [0.972, 1.006]")
