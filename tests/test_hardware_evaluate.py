"""Real plan evaluation: MeasuredCostModel, evaluate_plan and ``autoshard evaluate``."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from autoshard.cli.main import main
from autoshard.costs.base import CostModel
from autoshard.costs.comm import AlphaBeta
from autoshard.costs.step import ALL_TO_ALLS, COLLECTIVES, device_comm_ms, device_volumes
from autoshard.errors import AutoshardError, PlanError
from autoshard.hardware import evaluator
from autoshard.hardware.evaluator import (
    MeasuredCostModel,
    evaluate_plan,
    evaluate_plan_rounds,
    evaluate_plans,
    rotated_rounds,
)
from autoshard.hardware.kernel import MeasureSettings
from autoshard.plan import Plan, TablePlacement, validate
from autoshard.shards import ShardRef
from autoshard.tables import LookupKind, LookupSpec, Table, TablePool
from autoshard.tasks import Task

FAST = MeasureSettings(warmup=0, repeats=2, max_cv=100.0, max_tries=1, flush_cache=False)
FAST_ARGS = ["--repeats", "2", "--warmup", "0", "--max-cv", "100", "--max-tries", "1", "--no-flush",
             "--batch-size", "64"]
COMM = AlphaBeta(alpha_ms=0.5, bytes_per_ms=1.0e5, source="test")


def _tables() -> list[Table]:
    return [Table(f"t{i}", 16, 1000 * (i + 1), 3.0, lookups=LookupSpec(LookupKind.POWER_LAW, seed=i))
            for i in range(3)]


def _plan(devices: int = 3) -> Plan:
    return Plan((TablePlacement.table_wise("t0", 0, 16), TablePlacement.column_wise("t1", [0, 1], [8, 8]),
                 TablePlacement.table_wise("t2", 1, 16)), devices, "hand", "small")


def test_measured_model_is_a_cost_model_and_empty_devices_cost_nothing() -> None:
    task = Task(tuple(_tables()), (10**9,) * 3, batch_size=64)
    model = MeasuredCostModel(FAST, COMM)
    assert isinstance(model, CostModel) and model.name == "measured"
    costs = model.device_costs(task, [[ShardRef(0, 16)], [], [ShardRef(1, 8), ShardRef(2, 16)]])
    assert costs.shape == (3, 3)
    assert np.all(costs[[0, 2], :2] > 0) and np.all(costs[1] == 0)
    devices = [[ShardRef(1, 8), ShardRef(2, 16)]]
    assert costs[2, 2] == pytest.approx(device_comm_ms(task, COMM, device_volumes(task, devices))[0])
    again = model.device_costs(task, [[ShardRef(2, 16), ShardRef(1, 8)]])  # same contents: measured once
    assert again[0] == pytest.approx(costs[2])


def test_evaluate_plan_measures_every_device() -> None:
    task = Task(tuple(_tables()), (10**9,) * 3, batch_size=64)
    cost = evaluate_plan(task, _plan(), FAST, COMM)
    assert cost.source == "measured" and len(cost.devices) == 3
    assert cost.devices[2].total_ms == 0.0
    # the step: slowest fwd + slowest bwd + the step's collectives, never below any device's own total
    assert cost.plan_ms == pytest.approx(cost.max_fwd_ms + cost.max_bwd_ms + cost.collectives_ms)
    assert cost.plan_ms >= max(d.total_ms for d in cost.devices) * (1 - 1e-12) > 0
    assert [c.source for c in cost.collectives] == ["modelled"] * len(COLLECTIVES)


def test_evaluate_plan_rounds_times_every_device_each_round_and_keeps_the_statistic() -> None:
    task = Task(tuple(_tables()), (10**9,) * 3, batch_size=64)
    calls: list[tuple[int, int]] = []
    cost, per_round = evaluate_plan_rounds(task, _plan(), FAST, COMM, rounds=3,
                                           progress=lambda d, t: calls.append((d, t)))
    assert per_round.shape == (3, 3, 2) and np.all(per_round[:, 2] == 0) and np.all(per_round[:, :2] > 0)
    assert calls == [(k, 6) for k in range(1, 7)]  # 2 devices with shards x 3 rounds
    np.testing.assert_allclose([[d.fwd_ms, d.bwd_ms] for d in cost.devices], per_round.min(axis=0))
    assert cost.plan_ms == pytest.approx(cost.max_fwd_ms + cost.max_bwd_ms + cost.collectives_ms)
    median, _ = evaluate_plan_rounds(task, _plan(), FAST, COMM, rounds=1, statistic="median")
    assert median.source == "measured" and median.devices[2].total_ms == 0.0
    with pytest.raises(AutoshardError, match="rounds 0"):
        evaluate_plan_rounds(task, _plan(), FAST, COMM, rounds=0)
    with pytest.raises(AutoshardError, match="round statistic 'max'"):
        evaluate_plan(task, _plan(), FAST, COMM, statistic="max")


def test_evaluate_plans_times_shared_devices_once_a_round_and_reduces_its_rounds(monkeypatch) -> None:
    task = Task(tuple(_tables()), (10**9,) * 3, batch_size=64)
    other = Plan((TablePlacement.table_wise("t0", 0, 16), TablePlacement.column_wise("t1", [0, 2], [8, 8]),
                  TablePlacement.table_wise("t2", 1, 16)), 3, "hand2", "small")
    timed: list[tuple] = []
    real = evaluator.measure_shard

    def counting(task_, shards, settings):  # the real kernels, counted
        timed.append(evaluator.contents_key(task_, shards))
        return real(task_, shards, settings)

    monkeypatch.setattr(evaluator, "measure_shard", counting)
    a, b = evaluate_plans(task, [_plan(), other], FAST, COMM, rounds=3)
    # distinct devices: t0 + t1[:8] (both plans' device 0), t1[8:] + t2, t2 alone, t1[8:] alone -> 4, each
    # timed once per round
    assert len(timed) == 4 * 3 and len(set(timed)) == 4
    assert a.devices[0].fwd_ms == b.devices[0].fwd_ms and a.devices[0].bwd_ms == b.devices[0].bwd_ms
    assert a.source == b.source == "measured"
    assert a.plan_ms == pytest.approx(a.max_fwd_ms + a.max_bwd_ms + a.collectives_ms)
    with pytest.raises(AutoshardError, match="rounds 0"):
        evaluate_plans(task, [other], FAST, COMM, rounds=0)
    with pytest.raises(AutoshardError, match="round statistic 'mean': use one of min, median"):
        evaluate_plans(task, [other], FAST, COMM, statistic="mean")


def test_evaluate_validates_the_plan_first() -> None:
    task = Task(tuple(_tables()), (10**9,) * 2, batch_size=64)
    with pytest.raises(PlanError, match="3 devices"):
        evaluate_plan(task, _plan(3), FAST, COMM)


@pytest.mark.slow
def test_evaluate_cli_prints_and_writes_json(tmp_path: Path, capsys) -> None:
    TablePool.from_tables(_tables()).save(str(tmp_path / "tables.json"))
    _plan(2).save(str(tmp_path / "plan.json"))
    COMM.save(str(tmp_path / "comm_model.json"))
    out = tmp_path / "eval.json"
    assert main(["evaluate", "--plan", str(tmp_path / "plan.json"), "--tables", str(tmp_path / "tables.json"),
                 "--comm-model", str(tmp_path / "comm_model.json"), "--json", str(out), "--rounds", "2",
                 *FAST_ARGS]) == 0
    text = capsys.readouterr().out
    assert "step cost (measured)" in text and "fwd ms" in text
    assert "kernels: the min of 2 round(s) per device; spread across rounds" in text
    d = json.loads(out.read_text())
    assert (d["kind"] == "autoshard.evaluation" and d["batch_size"] == 64
            and d["comm_model"]["source"] == "test")
    devs = d["cost"]["devices"]
    assert len(devs) == 2 and all(x["fwd_ms"] > 0 and x["bwd_ms"] > 0 and x["comm_ms"] > 0 for x in devs)
    step = d["cost"]["step"]
    composed = step["max_fwd_ms"] + step["max_bwd_ms"] + step["collectives_ms"]
    assert d["cost"]["plan_ms"] == pytest.approx(composed)
    # every collective with each rank's bytes; the all-to-alls timed on 2 processes beside the model's guess
    cols = {c["name"]: c for c in d["cost"]["collectives"]}
    assert set(cols) == {name for name, _ in COLLECTIVES}
    for name in ("input_ids", "pooled_outputs", "output_grads"):
        c = cols[name]
        assert c["source"] == "measured" and c["measured_ms"] > 0 and c["modelled_ms"] > 0
        assert len(c["sent_bytes"]) == 2 and sum(c["sent_bytes"]) == pytest.approx(sum(c["received_bytes"]))
    unused = ("replica_grads", "row_bucketize", "row_outputs", "row_grads")  # no replicas, no row shards
    assert all(cols[name]["ms"] == 0.0 for name in unused)
    assert d["settings"]["repeats"] == 2 and d["host"]["hostname"]
    rounds = np.array(d["device_rounds_ms"])
    assert d["rounds"] == 2 and d["round_statistic"] == "min" and rounds.shape == (2, 2, 2)
    assert [x["fwd_ms"] for x in devs] == pytest.approx(rounds[:, :, 0].min(axis=0))


def test_evaluate_cli_bad_plan_exits_2_with_one_line(tmp_path: Path, capsys) -> None:
    TablePool.from_tables(_tables()).save(str(tmp_path / "tables.json"))
    Plan((TablePlacement.table_wise("t0", 0, 16),), 2, "hand").save(str(tmp_path / "plan.json"))
    assert main(["evaluate", "--plan", str(tmp_path / "plan.json"), "--tables", str(tmp_path / "tables.json"),
                 *FAST_ARGS]) == 2
    err = capsys.readouterr().err.strip()
    assert "does not place" in err and "\n" not in err
    assert main(["evaluate", "--plan", str(tmp_path / "missing.json"), "--tables",
                 str(tmp_path / "tables.json")]) == 2


def test_rotated_rounds_times_every_item_once_a_round_in_a_rotated_order():
    items = ["a", "b", "c", "d", "e", "f"]
    orders: list[list[str]] = []

    def time_round(order: list[str]) -> np.ndarray:
        orders.append(order)
        return np.array([[items.index(x), len(orders)] for x in order], dtype=float)

    done: list[int] = []
    timed = rotated_rounds(items, 3, time_round, done.append)
    assert done == [1, 2, 3]
    assert [sorted(o) for o in orders] == [sorted(items)] * 3
    assert len({o[0] for o in orders}) == 3  # no item is first in every round
    # rows land at the item's index whatever order it was timed in, and in the round that timed it
    assert timed.shape == (3, 6, 2)
    np.testing.assert_array_equal(timed[:, :, 0], np.tile(np.arange(6), (3, 1)))
    np.testing.assert_array_equal(timed[:, :, 1], np.repeat([[1], [2], [3]], 6, axis=1))
    with pytest.raises(AutoshardError):
        rotated_rounds(items, 0, time_round)


def test_rounds_minimum_rotates_its_rounds_and_keeps_each_contents_least_timing():
    """The measured descent's and the stage floor's timer: every content timed once a round by a fresh
    evaluator, the first of a call not always the same one, the least per content and component kept."""
    task = Task(tuple(_tables()), (10**9,) * 3, batch_size=64)
    devices = [[ShardRef(0, 16)], [ShardRef(1, 16)], [ShardRef(2, 16)]]
    firsts: list[int] = []

    class RecordingEvaluator(evaluator.MeasuredCostModel):
        def device_costs(self, task, devices):
            firsts.append(devices[0][0].table)
            return super().device_costs(task, devices)

    timer = evaluator.RoundsMinimum(lambda: RecordingEvaluator(FAST, COMM), 3)
    least = timer.device_costs(task, devices)
    assert sorted(firsts) == [0, 1, 2]  # each content led one round
    assert least.shape == (3, 3) and (least[:, :2] > 0).all()
    assert timer.device_costs(task, []).shape == (0, 3)


def test_evaluate_cli_pin_cpus_errors_are_one_line_before_any_timing(tmp_path: Path, monkeypatch,
                                                                     capsys) -> None:
    from autoshard.hardware import multiprocess

    TablePool.from_tables(_tables()).save(str(tmp_path / "tables.json"))
    _plan(2).save(str(tmp_path / "plan.json"))
    args = ["evaluate", "--plan", str(tmp_path / "plan.json"), "--tables", str(tmp_path / "tables.json"),
            "--pin-cpus", *FAST_ARGS]
    monkeypatch.setattr(evaluator, "time_in_rounds", lambda *a, **k: pytest.fail("a kernel was timed"))
    assert main([*args, "--collectives", "model"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--pin-cpus pins the CPU (gloo) ranks" in err[0]
    monkeypatch.setattr(multiprocess, "physical_cores", lambda: [0])
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pinning 2 ranks needs 2 physical cores" in err[0]
    task = Task(tuple(_tables()), (10**9,) * 2, batch_size=64)
    with pytest.raises(AutoshardError, match="pinning 2 ranks needs 2"):  # the library checks it too
        evaluate_plan_rounds(task, _plan(2), FAST, COMM, collectives="measure", pin_cpus=True)
    with pytest.raises(AutoshardError, match="use collectives='measure'"):
        evaluate_plan_rounds(task, _plan(2), FAST, COMM, pin_cpus=True)


@pytest.mark.slow
def test_evaluate_cli_pins_the_collectives_ranks(tmp_path: Path, monkeypatch, capsys) -> None:
    from autoshard.hardware import collectives, multiprocess

    if len(multiprocess.physical_cores()) < 2:
        pytest.skip("one physical core: nothing to pin two ranks to")
    pinned: list[bool] = []
    real = collectives.run_on_ranks

    def spy(*args, **kwargs):  # the ranks' own affinity: tests/test_multiprocess.py
        pinned.append(kwargs.get("pin_cpus", False))
        return real(*args, **kwargs)

    monkeypatch.setattr(collectives, "run_on_ranks", spy)
    TablePool.from_tables(_tables()).save(str(tmp_path / "tables.json"))
    _plan(2).save(str(tmp_path / "plan.json"))
    out = tmp_path / "eval.json"
    assert main(["evaluate", "--plan", str(tmp_path / "plan.json"), "--tables", str(tmp_path / "tables.json"),
                 "--pin-cpus", "--json", str(out), "--rounds", "1", *FAST_ARGS]) == 0
    assert "each rank pinned to a physical core of its own" in capsys.readouterr().out
    d = json.loads(out.read_text())
    assert d["pin_cpus"] is True and pinned == [True]
    assert all(c["measured_ms"] > 0 for c in d["cost"]["collectives"] if c["name"] in ALL_TO_ALLS)


@pytest.mark.slow
def test_a_row_split_plans_reduce_scatter_and_all_gather_are_timed_as_those_collectives() -> None:
    from autoshard.hardware.evaluator import measure_plan_collectives

    task = Task(tuple(_tables()), (10**9,) * 2, batch_size=64)
    plan = Plan((TablePlacement.row_wise("t0", [0, 1], [500, 500], 16),
                 TablePlacement.table_wise("t1", 0, 16), TablePlacement.table_wise("t2", 1, 16)),
                2, "rows", "small")
    validate(plan, task)
    slow = replace(COMM, reduce_scatter_factor=2.0, bucketize_ns_per_id=5.0)
    cols = {c.name: c for c in measure_plan_collectives(task, plan, slow, backend="gloo", repeats=3)}
    for name in (*ALL_TO_ALLS, "row_outputs", "row_grads"):
        assert cols[name].source == "measured" and cols[name].measured_ms > 0, name
    # the model's guess stays beside it; bucketisation and the (absent) replicas stay modelled
    assert cols["row_outputs"].modelled_ms > 0 and cols["row_bucketize"].source == "modelled"
    assert cols["row_bucketize"].ms == pytest.approx(32 * 3.0 * 5.0e-6)
    assert cols["replica_grads"].ms == 0.0
