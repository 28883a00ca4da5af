"""Table calibration (``costs.table_calibration``, ``autoshard calibrate-tables``, ``plan --calibration``): a
level and a factor per table name, fitted on measured devices of several tasks, correct any task's devices."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import QUICK_MEASURE, make_tables, profile_small

from autoshard.cli.main import main
from autoshard.costs.analytical import AnalyticalCostModel
from autoshard.costs.learned import LearnedCostModel
from autoshard.costs.loading import SHIPPED_COST_MODEL
from autoshard.costs.table_calibration import CalibratedCostModel, TableCalibration, fit_calibration
from autoshard.costs.task_fit import DEFAULT_RIDGE
from autoshard.errors import AutoshardError
from autoshard.hardware.profiler import ProfileConfig, profile
from autoshard.shards import ShardRef
from autoshard.tables import TablePool
from autoshard.tasks import Task

TRUTH = TableCalibration(level=(0.10, -0.05), factors={"t0": (0.30, 0.45), "t1": (-0.25, -0.20),
                                                       "t3": (0.10, -0.30), "t6": (0.40, 0.20)}, devices=0)
"""How "this hardware" differs from the base model in the synthetic timings below."""


def _tasks() -> tuple[Task, Task]:
    tables = make_tables(8, seed=3, dims=(8, 16, 32), max_rows=50_000)
    return (Task(tuple(tables[:6]), (10**9,) * 2, name="a"), Task(tuple(tables[2:]), (10**9,) * 2, name="b"))


def _devices(task: Task, n: int, seed: int) -> list[list[ShardRef]]:
    """``n`` random devices of 1-4 of ``task``'s tables, some as a column half."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        picks = rng.choice(task.num_tables, size=int(rng.integers(1, 5)), replace=False)
        out.append([ShardRef(int(i), task.tables[i].dim // (2 if rng.random() < 0.3 else 1)) for i in picks])
    return out


def _timed(truth: CalibratedCostModel, task: Task, devices: list[list[ShardRef]]) -> np.ndarray:
    return np.asarray(truth.device_costs(task, devices))[:, :2]


def test_a_calibration_fitted_on_two_tasks_prices_a_third_tasks_devices_as_the_hardware_does():
    base = AnalyticalCostModel()
    truth = CalibratedCostModel(base, TRUTH)
    a, b = _tasks()
    samples = [(t, d, _timed(truth, t, d)) for t, d in ((a, _devices(a, 40, 0)), (b, _devices(b, 40, 1)))]
    fitted = fit_calibration(base, samples, ridge=1e-4, model_path="m.pt", model_key="k")
    assert fitted.devices == 80 and set(fitted.factors) == {t.name for t in a.tables + b.tables}
    # a new task of the same tables, another order: devices it never saw priced as the truth prices them
    c = Task(tuple(reversed(b.tables)), (10**9,) * 4, name="c")
    unseen = _devices(c, 30, 2)
    corrected = np.asarray(CalibratedCostModel(base, fitted).device_costs(c, unseen))[:, :2]
    np.testing.assert_allclose(corrected, _timed(truth, c, unseen), rtol=0.01)
    raw = np.asarray(base.device_costs(c, unseen))[:, :2]
    assert np.abs(np.log(raw / _timed(truth, c, unseen))).max() > 0.2  # so the correction did something
    # the comm column is the base's
    np.testing.assert_array_equal(np.asarray(CalibratedCostModel(base, fitted).device_costs(c, unseen))[:, 2],
                                  np.asarray(base.device_costs(c, unseen))[:, 2])


def test_a_table_the_calibration_never_saw_keeps_the_level_alone():
    base = AnalyticalCostModel()
    a, _ = _tasks()
    calibration = TableCalibration(level=(0.2, -0.1), factors={a.tables[0].name: (1.0, 1.0)}, devices=1)
    assert calibration.covered(a) == 1
    assert calibration.for_task(a).factors == {0: (1.0, 1.0)}
    other = [[ShardRef(3, a.tables[3].dim)], [ShardRef(4, a.tables[4].dim), ShardRef(5, a.tables[5].dim)]]
    ratio = (np.asarray(CalibratedCostModel(base, calibration).device_costs(a, other))[:, :2]
             / np.asarray(base.device_costs(a, other))[:, :2])
    np.testing.assert_allclose(ratio, np.exp([[0.2, -0.1]] * 2))


def test_a_calibration_file_round_trips_and_a_broken_one_is_one_line(tmp_path):
    path = tmp_path / "cal.json"
    TRUTH.save(str(path))
    assert TableCalibration.load(str(path)) == TRUTH
    d = json.loads(path.read_text())
    for broken in ({**d, "kind": "autoshard.plan"}, {**d, "factors": {"t0": [1.0]}},
                   {**d, "level": [0.1]}, {k: v for k, v in d.items() if k != "devices"}):
        path.write_text(json.dumps(broken))
        with pytest.raises(AutoshardError) as e:
            TableCalibration.load(str(path))
        assert len(str(e.value).splitlines()) == 1 and str(path) in str(e.value)
    with pytest.raises(AutoshardError, match="ridge"):
        fit_calibration(AnalyticalCostModel(), [], ridge=0)
    with pytest.raises(AutoshardError, match="no measured device"):
        fit_calibration(AnalyticalCostModel(), [])


@pytest.mark.slow  # real kernels: a small profile of a tables file is timed here
def test_calibrate_tables_fits_on_timed_devices_of_a_tables_file_and_plan_uses_it(tmp_path, capsys):
    pool = TablePool.from_tables(make_tables(8, dims=(8, 16, 32), max_rows=5000))
    tables = tmp_path / "tables.json"
    pool.save(str(tables))
    devices = tmp_path / "devices"
    for _ in profile(pool, devices, ProfileConfig(samples=30, seed=0, settings=QUICK_MEASURE, max_tables=4)):
        pass
    cal = tmp_path / "cal.json"
    assert main(["calibrate-tables", "--devices", str(devices), "-o", str(cal)]) == 0
    out = capsys.readouterr().out
    assert "fitted on 30 devices of 8 tables" in out and "on devices it did not see (30, 5 folds)" in out
    calibration = TableCalibration.load(str(cal))
    assert calibration.model_path == str(SHIPPED_COST_MODEL) and calibration.devices == 30
    plan = tmp_path / "plan.json"
    assert main(["plan", "--tables", str(tables), "--devices", "2", "--algo", "search", "--time-limit", "1",
                 "--calibration", str(cal), "-o", str(plan)]) == 0
    out = capsys.readouterr().out
    assert f"table calibration {cal}: 8 of 8 tables corrected (fitted on 30 devices" in out
    assert "learned + table calibration (8 tables)" in out
    assert json.loads(plan.read_text())["devices"] == 2


def test_calibrate_tables_and_plan_refuse_bad_input_in_one_line(tmp_path, capsys):
    pool = TablePool.from_tables(make_tables(4, dims=(8,), max_rows=1000))
    tables = tmp_path / "tables.json"
    pool.save(str(tables))
    cal = tmp_path / "cal.json"
    TableCalibration((0.0, 0.0), {}, 1, model_path="elsewhere.pt",
                     model_key="0123456789abcdef").save(str(cal))
    out = tmp_path / "never.json"
    for argv, says in (
            (["calibrate-tables", "--devices", str(tmp_path / "none"), "-o", str(out)], "no such dataset"),
            (["calibrate-tables", "--devices", str(tmp_path), "--model", "analytical", "-o", str(out)],
             "--model analytical"),
            (["calibrate-tables", "--devices", str(tmp_path), "--ridge", "0", "-o", str(out)], "--ridge 0"),
            (["plan", "--tables", str(tables), "--devices", "2", "--calibration", str(cal)],
             "corrects elsewhere.pt"),
            (["plan", "--tables", str(tables), "--devices", "2", "--calibration", str(cal), "--cost-model",
              "analytical"], "analytical is not one"),
            (["plan", "--tables", str(tables), "--devices", "2", "--calibration", str(tables)],
             "expected a 'autoshard.table_calibration' file")):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and says in err, err
    assert not out.exists()
    with pytest.raises(SystemExit):  # the help states the library's ridge (the CLI starts without numpy)
        main(["calibrate-tables", "--help"])
    assert f"(default {DEFAULT_RIDGE})" in " ".join(capsys.readouterr().out.split())


@pytest.mark.slow  # real kernels: a small broad profile
def test_calibrate_tables_refuses_a_broad_profile_whose_table_names_mean_nothing(tmp_path, capsys):
    broad = profile_small(tmp_path / "broad", samples=4, seed=0)
    assert main(["calibrate-tables", "--devices", str(broad), "-o", str(tmp_path / "cal.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "broad profile" in err
    assert not (tmp_path / "cal.json").exists()


def test_a_learned_model_calibrated_keeps_its_out_of_support_line_and_spread():
    model = LearnedCostModel.load(SHIPPED_COST_MODEL, allow_other_hardware=True)
    a, _ = _tasks()
    calibrated = CalibratedCostModel(model, TableCalibration((0.1, 0.1), {}, 1))
    # a batch past the shipped model's trained range (513-65455 a device): outside its support
    wide = Task((make_tables(1, dims=(256,))[0],), (10**9,), batch_size=131072, name="wide")
    said = model.describe_fallback(wide, [[ShardRef(0, 256)]])
    assert said and calibrated.describe_fallback(wide, [[ShardRef(0, 256)]]) == said
    devices = _devices(a, 5, 3)
    np.testing.assert_allclose(np.asarray(calibrated.device_costs_spread(a, devices))[:, :2],
                               np.asarray(model.device_costs_spread(a, devices))[:, :2] * np.exp(0.1),
                               rtol=1e-9)
