"""Host calibration (``hardware.host_calibration``, ``autoshard calibrate-cost``): a learned model scaled to
this machine by re-timing records of its own profile.

The profile is REAL: small tables of the broad design timed on this machine's kernels (a few seconds).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import profile_small

from autoshard.cli.main import main
from autoshard.costs.learned import CostNetConfig, LearnedCostModel, TrainOptions
from autoshard.costs.learned.features import TargetScaler
from autoshard.costs.learned.network import Target
from autoshard.costs.loading import load_cost_model
from autoshard.errors import AutoshardError
from autoshard.hardware.host_calibration import Retiming, calibrate, host_scale, pick_records
from autoshard.hardware.profiler import load_dataset
from autoshard.shards import ShardRef
from autoshard.tasks import Task

pytestmark = pytest.mark.usefixtures("one_thread")

TRAIN = TrainOptions(seed=0, max_epochs=15, patience=15, batch_records=8, ensemble=3,
                     config=CostNetConfig(hidden=32, embed=8, context=True))


@pytest.fixture(scope="module")
def profile_dir(tmp_path_factory) -> Path:
    return profile_small(tmp_path_factory.mktemp("calib") / "costs", 24, 0)


@pytest.fixture(scope="module")
def model(profile_dir) -> LearnedCostModel:
    return LearnedCostModel.fit(load_dataset(profile_dir), TRAIN)


def _task_and_devices(dataset, tables_on_last: int) -> tuple[Task, list[list[ShardRef]]]:
    """A 2-device task of the profile's tables at a batch it trained on; the last device holds
    ``tables_on_last`` tables (beyond the design's 6: outside the model's support)."""
    tables = tuple(dataset.pool.tables[: 1 + tables_on_last])
    task = Task(tables=tables, device_memory=(10**10, 10**10), batch_size=64, name="calib")
    devices = [[ShardRef(0, tables[0].dim)], [ShardRef(i, t.dim) for i, t in enumerate(tables) if i > 0]]
    return task, devices


@pytest.mark.parametrize("target", [Target.LOG, Target.LINEAR])
def test_a_scaled_target_scaler_multiplies_the_fwd_and_bwd_heads_exactly(target):
    ms = np.array([[1.0, 3.0, 5.0], [2.0, 7.0, 11.0], [0.5, 1.5, 2.5]])
    scaler = TargetScaler.fit(target, ms)
    out = torch.tensor([[0.3, -0.2, 0.1], [-1.0, 0.5, 0.0]], dtype=torch.float64)
    before, after = scaler.to_ms(out, slice(0, 3)), scaler.scaled(1.5, 0.8).to_ms(out, slice(0, 3))
    np.testing.assert_allclose((after / before).numpy(), np.tile([1.5, 0.8, 1.0], (2, 1)), rtol=1e-5)
    with pytest.raises(AutoshardError):
        scaler.scaled(0.0, 1.0)


def test_a_host_scale_multiplies_every_prediction_spread_and_fallback_and_leaves_comm(model, profile_dir,
                                                                                       tmp_path):
    dataset = load_dataset(profile_dir)
    task, devices = _task_and_devices(dataset, tables_on_last=9)
    assert [d for d, _ in model.out_of_support(task, devices)] == [1]  # the fallback prices device 1
    calibrated = model.with_host_scale(1.7, 0.6, {"why": "test"})
    base, scaled = model.device_costs(task, devices), calibrated.device_costs(task, devices)
    np.testing.assert_allclose(scaled[:, 0], 1.7 * base[:, 0], rtol=1e-5)
    np.testing.assert_allclose(scaled[:, 1], 0.6 * base[:, 1], rtol=1e-5)
    np.testing.assert_allclose(scaled[:, 2], base[:, 2], rtol=1e-12)
    spread = model.device_costs_spread(task, devices)
    scaled_spread = calibrated.device_costs_spread(task, devices)
    # a float32 std: members that agree closely lose digits of it
    np.testing.assert_allclose(scaled_spread[:, :2], spread[:, :2] * [1.7, 0.6], rtol=1e-4,
                               atol=1e-6 * float(base[:, :2].max()))
    # the model given is left alone; the factors are relative to the trained level, never compounded
    np.testing.assert_allclose(model.device_costs(task, devices), base)
    again = calibrated.with_host_scale(1.0, 1.0, {})
    np.testing.assert_allclose(again.device_costs(task, devices), base, rtol=1e-5)
    # the checkpoint keeps the scaled model and says how it was calibrated
    calibrated.save(tmp_path / "c.pt")
    loaded = load_cost_model(str(tmp_path / "c.pt"))
    np.testing.assert_allclose(loaded.device_costs(task, devices), scaled, rtol=1e-5)
    assert loaded.info["host_calibration"] == {"why": "test", "fwd": 1.7, "bwd": 0.6}


def test_calibrate_scales_by_the_geometric_mean_of_the_retimed_records(model, profile_dir):
    dataset = load_dataset(profile_dir)
    picked = pick_records(dataset, str(profile_dir), 4)
    calibrated, scale, timings = calibrate(model, dataset, str(profile_dir), picked)
    assert len(timings) == 4 == scale.records
    fwd = math.exp(np.mean([math.log(t.fwd_ms / t.recorded_fwd_ms) for t in timings]))
    bwd = math.exp(np.mean([math.log(t.bwd_ms / t.recorded_bwd_ms) for t in timings]))
    assert scale.fwd == pytest.approx(fwd) and scale.bwd == pytest.approx(bwd)
    assert scale.fwd_interval[0] <= scale.fwd <= scale.fwd_interval[1]
    task, devices = _task_and_devices(dataset, tables_on_last=3)
    ratio = calibrated.device_costs(task, devices)[:, :2] / model.device_costs(task, devices)[:, :2]
    np.testing.assert_allclose(ratio, np.tile([fwd, bwd], (2, 1)), rtol=1e-5)
    # the records timed are spread over the profile's cost range, cheapest and dearest included
    costs = sorted(r.fwd_ms + r.bwd_ms for r in dataset.records)
    timed = sorted(t.recorded_fwd_ms + t.recorded_bwd_ms for t in timings)
    assert timed[0] == costs[0] and timed[-1] == costs[-1]


def test_host_scale_needs_two_usable_records():
    one = Retiming("s", 1, 64, "fp32", "cpu", "cpu", 1.0, 2.0, 1.1, 2.2, 0.1)
    zero = Retiming("z", 1, 64, "fp32", "cpu", "cpu", 0.0, 2.0, 1.1, 2.2, 0.1)
    with pytest.raises(AutoshardError, match="at least 2"):
        host_scale([one, zero], "p")
    assert host_scale([one, one], "p").fwd == pytest.approx(1.1)


def test_calibrate_cost_cli_writes_a_scaled_checkpoint_and_refuses_bad_input(model, profile_dir, tmp_path,
                                                                             capsys):
    model.save(tmp_path / "m.pt")
    out = tmp_path / "calibrated.pt"
    assert main(["calibrate-cost", "--model", str(tmp_path / "m.pt"), "--data", str(profile_dir),
                 "--records", "3", "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "this host / the profile's" in printed and "3 records" in printed
    info = load_cost_model(str(out)).info["host_calibration"]
    assert info["records"] == 3 and info["fwd"] > 0 and info["bwd"] > 0
    for argv, needle in (
            (["--records", "1"], "at least 2"),
            (["--max-ms", "0"], "--max-ms"),
            (["--max-ms", "1e-9"], "raise --max-ms"),
    ):
        bad = tmp_path / "bad.pt"
        rc = main(["calibrate-cost", "--model", str(tmp_path / "m.pt"), "--data", str(profile_dir),
                   "-o", str(bad), *argv])
        err = capsys.readouterr().err
        assert rc != 0 and needle in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
        assert not bad.exists()
    rc = main(["calibrate-cost", "--model", "analytical", "--data", str(profile_dir),
               "-o", str(tmp_path / "a.pt")])
    err = capsys.readouterr().err
    assert rc != 0 and "not a learned cost model" in err


def test_calibrate_refuses_a_profile_of_another_cpu_than_the_models(model, profile_dir):
    dataset = load_dataset(profile_dir)
    picked = pick_records(dataset, str(profile_dir), 2)
    other = LearnedCostModel(model.net, model.normalizer, model.scaler, model.comm,
                             {**model.trained_on, "host": {**model.trained_on["host"], "cpu": "Another CPU"}},
                             model.info)
    with pytest.raises(AutoshardError, match="trained on Another CPU"):
        calibrate(other, dataset, str(profile_dir), picked)


def test_the_cli_defaults_are_the_librarys():
    """calibrate-cost states its defaults without importing torch at start-up; they must be the library's."""
    from autoshard.cli.main import build_parser
    from autoshard.hardware.host_calibration import DEFAULT_MAX_MS, DEFAULT_RECORDS

    args = build_parser().parse_args(["calibrate-cost", "--model", "m.pt", "--data", "d", "-o", "o.pt"])
    assert (args.records, args.max_ms) == (DEFAULT_RECORDS, DEFAULT_MAX_MS)


def test_calibrate_cost_cli_scales_another_cpus_model_to_this_host(model, profile_dir, tmp_path, capsys):
    """The shipped model describes another CPU than most users': calibrate-cost loads it anyway (it re-times
    that model's own records here), says so, and the checkpoint it writes still names the model's CPU."""
    from autoshard.host import host_info

    here = str(host_info()["cpu"])
    other_profile = tmp_path / "other-cpu-profile"
    other_profile.mkdir()
    for f in profile_dir.iterdir():  # the same records, stated as measured on another CPU
        if f.is_file():
            text = f.read_text() if f.suffix in (".json", ".jsonl") else None
            if text is None:
                (other_profile / f.name).write_bytes(f.read_bytes())
            else:
                (other_profile / f.name).write_text(text.replace(json.dumps(here), json.dumps("Another CPU")))
    other = LearnedCostModel(model.net, model.normalizer, model.scaler, model.comm,
                             {**model.trained_on, "host": {**model.trained_on["host"], "cpu": "Another CPU"}},
                             model.info)
    other.save(tmp_path / "other.pt")
    with pytest.raises(AutoshardError, match="Another CPU"):  # plan, evaluate, bench: refused as before
        load_cost_model(str(tmp_path / "other.pt"))
    out = tmp_path / "calibrated.pt"
    assert main(["calibrate-cost", "--model", str(tmp_path / "other.pt"), "--data", str(other_profile),
                 "--records", "2", "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "trained on 'Another CPU'" in printed and "this host / the profile's" in printed
    calibrated = load_cost_model(str(out), allow_other_hardware=True)
    assert calibrated.trained_on["host"]["cpu"] == "Another CPU"
    assert calibrated.info["host_calibration"]["records"] == 2
