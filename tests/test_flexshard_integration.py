"""FlexShard in the pipeline: `plan` on sequence tables, the sequence plan file, `evaluate` on it, and the
sequence bench suites (seq-*)."""

from __future__ import annotations

import copy
import json

import pytest

from autoshard.cli.main import main
from autoshard.costs.sequence_traffic import (
    COLLECTIVES,
    SequencePlacement,
    flexshard,
    row_wise,
    table_row_wise,
    table_wise,
)
from autoshard.errors import AutoshardError, InfeasibleError
from autoshard.planners.sequence_plan import (
    SEQUENCE_PLANNERS,
    SequencePlan,
    device_budget,
    plan_sequence,
    row_wise_footprint,
    write_sequence_tables,
)
from autoshard.tables.sequence import SequenceTable
from autoshard.topology import Topology

TABLES = [SequenceTable.from_power_law(f"t{i}", rows, dim, alpha, seq, seq_len_cv=0.5, head_rows=256, seed=i)
          for i, (rows, dim, alpha, seq) in enumerate([(20_000, 16, 1.2, 200.0), (8_000, 8, 0.9, 60.0),
                                                      (30_000, 16, 1.0, 400.0)])]
D, HOSTS = 4, 2


@pytest.fixture
def seq_file(tmp_path) -> str:
    path = str(tmp_path / "seq.json")
    write_sequence_tables(path, TABLES)
    return path


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("autoshard: error:") and len(err.splitlines()) == 1, err
    return err


# ------------------------------------------------------------------------------------------ the artefact
@pytest.mark.parametrize("placement", [
    flexshard(1000, 8, 2, 10, 40, offset=3), row_wise(1000, 8, 2, offset=5), table_row_wise(1000, 8, 2, 1, 2),
    table_wise(1000, 8, 2, 6), flexshard(7, 3, 1, 2, 0)])
def test_placement_json_round_trip(placement: SequencePlacement) -> None:
    back = SequencePlacement.from_json(json.loads(json.dumps(placement.to_json())))
    assert back == placement


@pytest.mark.parametrize("algorithm", list(SEQUENCE_PLANNERS))
def test_sequence_plan_round_trips_through_its_file(tmp_path, algorithm: str) -> None:
    budget = 4 * row_wise_footprint(TABLES, D)  # room for table_wise too
    plan = plan_sequence(TABLES, algorithm, Topology(HOSTS), D, 32, budget)
    path = tmp_path / "plan.json"
    plan.save(path)
    back = SequencePlan.load(path)
    assert back.to_json() == plan.to_json()
    assert back.placements == plan.placements and back.devices == "2x2"
    assert back.traffic(TABLES).comm_ms == pytest.approx(plan.traffic(TABLES).comm_ms)
    assert json.loads(path.read_text())["kind"] == "autoshard.sequence_plan"


def _plan_json() -> dict:
    plan = plan_sequence(TABLES, "flexshard", Topology(HOSTS), D, 32, device_budget(None, TABLES, D))
    return plan.to_json()


def _set(d: dict, path: tuple, value) -> dict:
    d = copy.deepcopy(d)
    at = d
    for k in path[:-1]:
        at = at[k]
    if value is _DROP:
        del at[path[-1]]
    else:
        at[path[-1]] = value
    return d


_DROP = object()


@pytest.mark.parametrize(("path", "value", "match"), [
    (("kind",), "autoshard.plan", "not a sequence plan"),
    (("version",), 99, "version 99"),
    (("devices",), _DROP, "'devices'"),
    (("devices",), "2y2", "HOSTSxLOCAL"),
    (("devices",), "1x4", "topology of 2 hosts"),
    (("tables",), [], "non-empty list"),
    (("tables", 0, "name"), 7, "needs a name"),
    (("tables", 1, "name"), "t0", "distinct"),
    (("tables", 0, "dim"), 1.5, "integer dim"),
    (("tables", 0, "rows"), 5, "5 rows but a placement"),
    (("tables", 0, "placement", "tiers", 0, "start"), 1, "cover rows"),
    (("tables", 0, "placement", "tiers", 0, "stop"), 2.5, "whole numbers"),
    (("tables", 0, "placement", "tiers", 0, "copies"), [[0], [9]], "distinct ranks"),
    (("tables", 0, "placement", "tiers"), "all", "needs kind"),
    (("tables", 0, "placement", "num_devices"), 8, "plan's 2x2 devices"),
    (("device_memory_bytes",), "lots", "must be numbers"),
    (("batch_per_rank",), -1, "batch per rank"),
])
def test_bad_sequence_plans_are_one_line_errors(path: tuple, value, match: str) -> None:
    d = _set(_plan_json(), path, value)
    with pytest.raises(AutoshardError, match=match) as e:
        SequencePlan.from_json(json.loads(json.dumps(d)))
    assert "\n" not in str(e.value)


def test_plan_checks_the_tables_it_is_evaluated_with() -> None:
    plan = SequencePlan.from_json(_plan_json())
    with pytest.raises(AutoshardError, match="'t2' is in one but not the other"):
        plan.check_tables(TABLES[:2])
    with pytest.raises(AutoshardError, match="another order"):
        plan.check_tables(TABLES[::-1])
    other = [*TABLES[:2], SequenceTable.from_power_law("t2", 30_000, 32, 1.0, 400.0)]
    with pytest.raises(AutoshardError, match="dim 16, the tables file has 30000 of dim 32"):
        plan.check_tables(other)


def test_budget_rules() -> None:
    footprint = row_wise_footprint(TABLES, D)
    assert device_budget(None, TABLES, D) == pytest.approx(footprint * 1.05)
    with pytest.raises(InfeasibleError, match="row_wise alone needs"):
        device_budget("1KB", TABLES, D)
    with pytest.raises(AutoshardError, match="one size for every device"):
        device_budget("1GB,2GB", TABLES, D)
    with pytest.raises(InfeasibleError, match="fullest device needs") as e:  # table_wise concentrates bytes
        plan_sequence(TABLES, "table_wise", Topology(HOSTS), D, 32, footprint * 1.05)
    assert "\n" not in str(e.value)


# ------------------------------------------------------------------------------------------ the CLI
def test_plan_flexshard_then_evaluate_modelled(tmp_path, seq_file, capsys) -> None:
    out, ev = tmp_path / "seqplan.json", tmp_path / "eval.json"
    assert main(["plan", "--tables", seq_file, "--devices", "2x2", "--batch-size", "32", "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.startswith("flexshard:")  # the default for sequence tables
    assert all(t.name in text for t in TABLES) and "MODELLED" in text and "memory per device" in text
    plan = SequencePlan.load(out)
    assert plan.algorithm == "flexshard" and plan.batch_per_rank == 32
    assert plan.device_memory_bytes == pytest.approx(row_wise_footprint(TABLES, D) * 1.05)
    assert main(["evaluate", "--plan", str(out), "--tables", seq_file, "--collectives", "model",
                 "--json", str(ev)]) == 0
    text = capsys.readouterr().out
    assert all(name in text for name in COLLECTIVES) and "measured ms: none" in text
    got = json.loads(ev.read_text())
    traffic = plan.traffic(TABLES)
    by_name = {c["name"]: c for c in got["collectives"]}
    for name in COLLECTIVES:
        assert by_name[name]["bytes"] == pytest.approx(traffic.get(name).bytes)
        assert by_name[name]["inter_bytes"] == pytest.approx(traffic.get(name).inter_bytes)
        assert by_name[name]["modelled_ms"] == pytest.approx(traffic.get(name).ms)
        assert by_name[name]["measured_ms"] is None
    assert got["modelled_ms"] == pytest.approx(traffic.comm_ms) and got["measured_ms"] is None
    rw = tmp_path / "rw.json"
    assert main(["plan", "--tables", seq_file, "--devices", "2x2", "--algo", "row_wise", "-o", str(rw)]) == 0
    assert traffic.comm_ms < SequencePlan.load(rw).traffic(TABLES).comm_ms


def test_list_algos_marks_the_sequence_planners(capsys) -> None:
    assert main(["plan", "--list-algos"]) == 0
    out = capsys.readouterr().out
    assert "size_lookup_greedy" in out
    for name in SEQUENCE_PLANNERS:
        assert any(line.startswith(name) and "[sequence tables]" in line for line in out.splitlines())


@pytest.mark.parametrize(("argv", "match"), [
    (["--algo", "lookup_greedy"], ("lookup_greedy plans pooled tables; for sequence tables choose one of: "
                                   "flexshard")),
    (["--algo", "nope"], "is not an algorithm"),
    (["--memory", "1KB"], "row_wise alone needs"),
    (["--memory", "lots"], "not understood"),
    (["--memory", "1GB,2GB"], "one size for every device"),
    (["--algo", "table_wise"], "fullest device needs"),
    (["--cost-model", "analytical"], "--cost-model applies to pooled tables"),
])
def test_plan_sequence_errors_are_one_line(seq_file, capsys, argv: list, match: str) -> None:
    assert main(["plan", "--tables", seq_file, "--devices", "2x2", *argv]) == 2
    assert match in _one_line_error(capsys)


def test_sequence_algorithms_refused_for_pooled_tables(tables_file, seq_file, capsys) -> None:
    assert main(["plan", "--tables", tables_file, "--devices", "2", "--algo", "flexshard"]) == 2
    err = _one_line_error(capsys)
    assert "flexshard plans sequence tables" in err and "size_lookup_greedy" in err
    assert main(["plan", "--tables", seq_file]) == 2
    assert "--devices HOSTSxLOCAL" in _one_line_error(capsys)


def test_evaluate_sequence_plan_errors(tmp_path, seq_file, capsys) -> None:
    out = tmp_path / "seqplan.json"
    assert main(["plan", "--tables", seq_file, "--devices", "2x2", "-o", str(out)]) == 0
    capsys.readouterr()
    other = tmp_path / "other.json"
    write_sequence_tables(other, TABLES[:2])
    for argv, match in ((["--tables", str(other)], "not these sequence tables"),
                        ([], "give --tables FILE"),
                        (["--tables", seq_file, "--comm-model", "x.json"], "--comm-model applies to pooled")):
        assert main(["evaluate", "--plan", str(out), "--collectives", "model", *argv]) == 2
        assert match in _one_line_error(capsys)


# ------------------------------------------------------------------------------------------ the bench
def test_seq_bench_model_produces_ratios_and_resumes(tmp_path, capsys) -> None:
    out = tmp_path / "bench"
    argv = ["bench", "--suite", "seq-2x2", "--test-tasks", "2", "--collectives", "model", "-o", str(out)]
    assert main(argv) == 0
    first = capsys.readouterr()
    assert "seq-2x2: task 2/2" in first.err and "### comm ms per step" in first.out
    res = json.loads((out / "results.json").read_text())
    assert res["kind"] == "autoshard.seq_bench_results" and len(res["tasks"]) == 2
    summary = {(s["metric"], s["algorithm"]): s for s in res["summary"]}
    assert ("measured_ms", "flexshard") not in summary  # nothing measured
    fs = summary[("comm_ms", "flexshard")]
    assert fs["vs_row_wise"]["tasks"] == 2 and fs["vs_row_wise"]["ratio"] < 1
    assert fs["vs_row_wise"]["low"] <= fs["vs_row_wise"]["ratio"] <= fs["vs_row_wise"]["high"]
    assert fs["vs_best_baseline"]["ratio"] <= 1.0 + 1e-12 and fs["fits"] == 2
    assert summary[("comm_ms", "row_wise")]["vs_row_wise"]["ratio"] == pytest.approx(1.0)
    assert (out / "report.md").read_text().startswith("## seq-2x2")
    assert main(argv) == 0  # the second run reuses both tasks
    again = capsys.readouterr()
    assert again.err.count("cached") == 2
    assert json.loads((out / "results.json").read_text())["summary"] == res["summary"]


@pytest.mark.parametrize(("argv", "match"), [
    (["--suite", "seq-9x9"], "unknown sequence suite 'seq-9x9'"),
    (["--suite", "seq-2x2", "--cost-model", "analytical"], "--cost-model does not apply to sequence suites"),
    (["--suite", "seq-2x2", "--algos", "flexshard,lookup_greedy"], "--algos lookup_greedy"),
    (["--suite", "seq-2x2", "--test-tasks", "0"], "--test-tasks 0"),
    (["--suite", "seq-2x2", "--round-statistic", "min"], "--round-statistic does not apply to sequence"),
])
def test_seq_bench_errors_are_one_line(tmp_path, capsys, argv: list, match: str) -> None:
    assert main(["bench", *argv, "-o", str(tmp_path / "b")]) == 2
    assert match in _one_line_error(capsys)


def test_list_suites_has_the_sequence_suites(capsys) -> None:
    assert main(["bench", "--list-suites"]) == 0
    out = capsys.readouterr().out
    assert "seq-2x2" in out and "seq-2x4" in out and "dlrm-20-4" in out


@pytest.mark.slow
def test_seq_bench_and_evaluate_measure_on_processes(tmp_path, seq_file, capsys) -> None:
    out = tmp_path / "bench"
    assert main(["bench", "--suite", "seq-2x2", "--test-tasks", "1", "--rounds", "2", "--collectives",
                 "measure", "--algos", "flexshard", "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "(MEASURED)" in text and "MEASURED on 4 local gloo processes" in text
    res = json.loads((out / "results.json").read_text())
    for algo in ("row_wise", "flexshard"):  # row_wise is added as the reference
        r = res["tasks"][0]["results"][algo]
        assert r["measured_ms"] > 0 and len(r["measured"]["rounds_ms"]) == 2
    assert r["measured"]["collectives_ms"]["replica_sync"] > 0  # flexshard's replicas are all-reduced
    plan, ev = tmp_path / "seqplan.json", tmp_path / "eval.json"
    assert main(["plan", "--tables", seq_file, "--devices", "2x2", "-o", str(plan)]) == 0
    assert main(["evaluate", "--plan", str(plan), "--tables", seq_file, "--warmup", "1", "--repeats", "2",
                 "--json", str(ev)]) == 0
    assert "measured ms: MEASURED on 4 local gloo processes" in capsys.readouterr().out
    got = json.loads(ev.read_text())
    assert got["collectives_mode"] == "measure" and got["measured_ms"] > 0
    assert all(c["measured_ms"] is not None for c in got["collectives"])
