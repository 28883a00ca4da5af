"""The learned cost model: invariances, batched/incremental API, save/load, training, refusal, CLI errors.

The fixture dataset is REAL: tiny tables timed with FBGEMM through ``autoshard.hardware.kernel.measure_shard``
(a few seconds, once per session); nothing here invents a cost.
"""

from __future__ import annotations

import dataclasses
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from autoshard.cli.main import main
from autoshard.costs.analytical import AnalyticalCostModel
from autoshard.costs.base import CostModel
from autoshard.costs.comm import AlphaBeta
from autoshard.costs.learned import CostNetConfig, LearnedCostModel, TrainOptions
from autoshard.costs.learned.training import split_unseen_tables
from autoshard.costs.metrics import mape, rmse, spearman
from autoshard.costs.step import device_comm_ms, device_volumes
from autoshard.errors import AutoshardError
from autoshard.hardware.evaluator import MeasuredCostModel
from autoshard.hardware.kernel import MeasureSettings
from autoshard.shards import ShardRef
from autoshard.tables import LookupKind, LookupSpec, Table, TablePool
from autoshard.tables.lookups import access_bins, sample_lookups
from autoshard.tasks import Task

BATCH = 128
"""Fixture kernel batch: small so the session's real measurements take a few seconds."""


def _pool(n: int = 10) -> TablePool:
    rng = np.random.default_rng(7)
    tables = []
    for i in range(n):
        spec = LookupSpec(LookupKind.POWER_LAW, seed=i, alpha=float(rng.uniform(0.6, 1.4)))
        t = Table(f"t{i}", int(rng.choice([4, 8, 16, 32])), int(rng.integers(200, 4000)),
                  float(rng.uniform(1, 20)), lookups=spec)
        tables.append(replace(t, access_bins=access_bins(sample_lookups(t, BATCH).indices)))
    return TablePool.from_tables(tables)


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory) -> str:
    """A real profile directory: 24 fused shards of 1-4 tiny tables timed by the profiler (FBGEMM, CPU)."""
    from autoshard.hardware.kernel import MeasureSettings
    from autoshard.hardware.profiler import ProfileConfig, profile

    out = str(tmp_path_factory.mktemp("costs"))
    settings = MeasureSettings(warmup=1, repeats=3, max_tries=1, flush_cache=False)
    config = ProfileConfig(samples=24, max_tables=4, batch_size=BATCH, seed=0, settings=settings)
    for _ in profile(_pool(), out, config):
        pass
    return out


@pytest.fixture(scope="session")
def dataset(data_dir):
    from autoshard.hardware.profiler import load_dataset

    ds = load_dataset(data_dir)
    assert len(ds.records) == 24 and ds.comm is None  # no profile-comm run: comm falls back to DEFAULT_COMM
    return ds


FAST = TrainOptions(seed=0, max_epochs=25, patience=25, batch_records=8,
                    config=CostNetConfig(hidden=32, embed=8))


@pytest.fixture(scope="session")
def model(dataset) -> LearnedCostModel:
    return LearnedCostModel.fit(dataset, FAST)


def _task(dataset, devices: int = 4) -> Task:
    return Task(dataset.pool.tables, (10**9,) * devices, batch_size=BATCH)


# -- metrics -------------------------------------------------------------------------------------------------
def test_metrics_known_values():
    assert mape([110, 90], [100, 100]) == pytest.approx(10.0)
    assert rmse([1, 3], [1, 1]) == pytest.approx(np.sqrt(2.0))
    assert spearman([1, 2, 3, 4], [10, 20, 30, 400]) == pytest.approx(1.0)
    assert spearman([4, 3, 2, 1], [1, 2, 3, 4]) == pytest.approx(-1.0)
    assert spearman([1, 1, 2], [1, 2, 3]) == pytest.approx(np.sqrt(3) / 2)  # ties share the average rank
    with pytest.raises(AutoshardError):
        mape([], [])


# -- the model -----------------------------------------------------------------------------------------------
def test_is_a_cost_model_and_shapes(model, dataset):
    assert isinstance(model, CostModel) and model.name == "learned"
    task = _task(dataset, devices=7)
    out = model.device_costs(task, [[ShardRef(0, task.tables[0].dim)], [], [ShardRef(1, 4), ShardRef(2, 4)]])
    assert out.shape == (3, 3)
    assert np.all(out[[0, 2]] > 0) and np.all(out[1] == 0)  # an empty device costs 0
    # no comm on D=1
    assert np.all(model.device_costs(_task(dataset, devices=1), [[ShardRef(0, 4)]])[:, 2] == 0)
    with pytest.raises(AutoshardError, match="has dim"):
        model.device_costs(task, [[ShardRef(0, task.tables[0].dim + 4)]])


@pytest.mark.parametrize("which", ["learned", "analytical", "measured"])
def test_with_comm_reprices_only_the_all_to_all_and_leaves_the_model_alone(model, dataset, which):
    base = {"learned": model, "analytical": AnalyticalCostModel(),
            "measured": MeasuredCostModel(MeasureSettings(warmup=0, repeats=1, rows_cap=2000))}[which]
    assert isinstance(base, CostModel)  # the declared interface: device_costs, accumulator, with_comm, comm
    task = _task(dataset, devices=4)
    devices = [[ShardRef(0, task.tables[0].dim)], [ShardRef(1, 4), ShardRef(2, 4)], []]
    before = base.device_costs(task, devices)
    cluster = AlphaBeta(alpha_ms=3.0, bytes_per_ms=2.0e5, source="test: D=4")
    swapped = base.with_comm(cluster)
    after = swapped.device_costs(task, devices)
    np.testing.assert_allclose(after[:, :2], before[:, :2], rtol=1e-6)  # fwd, bwd untouched
    expect = device_comm_ms(task, cluster, device_volumes(task, devices))
    np.testing.assert_allclose(after[:, 2], expect, rtol=1e-5)
    assert not np.allclose(after[:2, 2], before[:2, 2])
    np.testing.assert_array_equal(base.device_costs(task, devices), before)  # the original keeps its comm
    assert base.comm != cluster and swapped.comm == cluster


def test_table_and_device_order_do_not_change_predictions(model, dataset):
    task = _task(dataset)
    devices = [[ShardRef(0, task.tables[0].dim), ShardRef(3, 4), ShardRef(5, task.tables[5].dim)],
               [ShardRef(1, task.tables[1].dim)], [ShardRef(2, 4), ShardRef(4, task.tables[4].dim)], []]
    base = model.device_costs(task, devices)
    shuffled = [list(reversed(d)) for d in reversed(devices)]
    np.testing.assert_allclose(model.device_costs(task, shuffled), base[::-1], rtol=1e-5)
    # the same tables listed in another order in the task
    perm = np.random.default_rng(1).permutation(task.num_tables)
    task2 = replace(task, tables=tuple(task.tables[i] for i in perm))
    where = {int(old): new for new, old in enumerate(perm)}
    devices2 = [[ShardRef(where[s.table], s.dim) for s in d] for d in devices]
    np.testing.assert_allclose(model.device_costs(task2, devices2), base, rtol=1e-5)


def test_linear_table_cost_variant_trains_and_stays_order_invariant(dataset, tmp_path):
    linear = LearnedCostModel.fit(dataset, replace(FAST, refit=False,
                                                   config=CostNetConfig(hidden=32, embed=8, table_mlp=False)))
    hist = linear.info["history"]
    assert hist[-1]["fit_loss"] < hist[0]["fit_loss"] and "refit" not in linear.info
    task = _task(dataset)
    devices = [[ShardRef(0, task.tables[0].dim), ShardRef(3, 4)], [ShardRef(1, task.tables[1].dim)]]
    base = linear.device_costs(task, devices)
    np.testing.assert_allclose(linear.device_costs(task, [list(reversed(d)) for d in devices]), base,
                               rtol=1e-5)
    linear.save(tmp_path / "lin.pt")
    loaded = LearnedCostModel.load(tmp_path / "lin.pt")
    assert loaded.config.table_mlp is False
    np.testing.assert_array_equal(loaded.device_costs(task, devices), base)


def test_batched_and_incremental_api_agree_with_device_costs(model, dataset):
    task = _task(dataset)
    ranks = np.random.default_rng(2).integers(0, task.num_devices, size=(5, task.num_tables))
    batched = model.plan_costs(task, ranks)
    assert batched.shape == (5, task.num_devices, 3)
    for p in range(5):
        devices = [[ShardRef(t, task.tables[t].dim) for t in range(task.num_tables) if ranks[p, t] == d]
                   for d in range(task.num_devices)]
        np.testing.assert_allclose(batched[p], model.device_costs(task, devices), rtol=1e-5, atol=1e-6)
    # incremental: place tables one by one with the accumulator
    devices = model.accumulator(task, 1)
    placed: list[list[ShardRef]] = [[] for _ in range(task.num_devices)]
    for t in range(task.num_tables):
        shard = ShardRef(t, task.tables[t].dim)
        if_added = devices.costs_if_added(shard)[0]
        d = int(ranks[0, t])
        devices.add(0, d, shard)
        placed[d].append(shard)
        np.testing.assert_allclose(if_added[d], model.device_costs(task, placed)[d], rtol=1e-5)
    np.testing.assert_allclose(devices.costs_if_added(ShardRef(0, 4))[0][0] > 0, True)
    np.testing.assert_allclose(model.device_costs(task, placed), batched[0], rtol=1e-5, atol=1e-6)
    head = model.plan_head_costs(task, ranks)
    assert head.shape == (5,) and np.all(head > 0)


def test_save_load_round_trip_gives_identical_predictions(model, dataset, tmp_path):
    path = tmp_path / "cm.pt"
    model.save(path)
    loaded = LearnedCostModel.load(path)
    task = _task(dataset)
    ranks = np.random.default_rng(3).integers(0, 4, size=(4, task.num_tables))
    assert np.array_equal(loaded.plan_costs(task, ranks), model.plan_costs(task, ranks))
    assert np.array_equal(loaded.plan_head_costs(task, ranks), model.plan_head_costs(task, ranks))
    ck = torch.load(path, weights_only=True)
    assert ck["trained_on"]["batch_size"] == BATCH and ck["architecture"]["hidden"] == 32
    assert set(ck["info"]["metrics"]) >= {"fwd", "bwd", "fwd+bwd"} and "mean" in ck["normalizer"]


def test_training_reduces_the_loss_and_is_seeded(dataset, model):
    hist = model.info["history"]
    assert len(hist) == FAST.max_epochs + 1 and hist[0]["epoch"] == -1  # the untrained network first
    assert hist[-1]["fit_loss"] < 0.5 * hist[0]["fit_loss"]
    again = LearnedCostModel.fit(dataset, replace(FAST, max_epochs=3))
    again2 = LearnedCostModel.fit(dataset, replace(FAST, max_epochs=3))
    task = _task(dataset)
    ranks = np.zeros((1, task.num_tables), dtype=np.int64)
    assert np.array_equal(again.plan_costs(task, ranks), again2.plan_costs(task, ranks))


def test_refit_trains_the_saved_network_on_every_record(dataset, model, data_dir, tmp_path, capsys):
    refit = model.info["refit"]
    assert refit["train_records"] + refit["val_records"] == len(dataset.records)
    assert model.info["split"]["test_records"] > 0 and set(model.info["metrics"]) >= {"fwd", "fwd+bwd"}
    assert set(refit["train_tables"]) == {n for r in dataset.records for n in r.tables}
    ck = tmp_path / "refit.pt"
    assert main(["train-cost", "--data", data_dir, "-o", str(ck), "--epochs", "3", "--hidden", "16",
                 "--embed", "4"]) == 0
    assert "refit on all 24 records" in capsys.readouterr().out
    # every table of the dataset was trained on, so it has nothing held out left to score
    assert main(["eval-cost", "--model", str(ck), "--data", data_dir]) == 2
    assert "no records with tables the model did not train on" in _one_line_error(capsys)


def test_split_holds_out_unseen_tables(dataset):
    train, test, held = split_unseen_tables(dataset.records, 0.2, seed=0)
    seen = {n for i in train for n in dataset.records[i].tables}
    assert held and not seen & set(held)
    assert all(any(n in held for n in dataset.records[i].tables) for i in test)
    assert len(train) + len(test) == len(dataset.records)


def test_split_holds_out_a_share_of_records_when_records_hold_many_tables():
    # 120 records of 12 of 40 tables each: holding out a fifth of the TABLES would touch ~95% of the
    # records; the split holds out whole tables only until a fifth of the RECORDS is test
    rng = np.random.default_rng(3)
    names = [f"t{i}" for i in range(40)]
    records = [SimpleNamespace(tables=tuple(rng.choice(names, size=12, replace=False))) for _ in range(120)]
    train, test, held = split_unseen_tables(records, 0.2, seed=1)
    assert held and len(train) + len(test) == len(records)
    assert not {n for i in train for n in records[i].tables} & set(held)
    assert all(set(records[i].tables) & set(held) for i in test)
    assert 0.2 <= len(test) / len(records) <= 0.6  # one table more can overshoot by its own records
    again = split_unseen_tables(records, 0.2, seed=1)
    assert np.array_equal(again[0], train) and again[2] == held
    # a floor on the test records (risk_k is a percentile of them), at most half the records
    assert len(split_unseen_tables(records, 0.2, seed=1, min_records=50)[1]) >= 50
    assert len(split_unseen_tables(records[:40], 0.2, seed=1, min_records=30)[1]) >= 20
    with pytest.raises(AutoshardError, match="lower --test-fraction"):
        split_unseen_tables(records[:5], 0.9, seed=0)


def test_refuses_other_batch_size_precision_and_host(model, dataset, tmp_path):
    other = replace(_task(dataset), batch_size=4096)
    with pytest.raises(AutoshardError, match="batch size 128"):
        model.device_costs(other, [[ShardRef(0, 4)]])
    with pytest.raises(AutoshardError, match="optimizer"):
        model.check_compatible(settings={"optimizer": "rowwise_adagrad"})
    path = tmp_path / "other-host.pt"
    model.save(path)
    ck = torch.load(path, weights_only=True)
    ck["trained_on"]["host"]["cpu"] = "Some Other CPU 9000"
    torch.save(ck, path)
    with pytest.raises(AutoshardError, match="Some Other CPU 9000") as err:
        LearnedCostModel.load(path)
    assert "\n" not in str(err.value)
    allowed = LearnedCostModel.load(path, allow_other_hardware=True)
    assert allowed.device_costs(other, [[ShardRef(0, 4)]]).shape == (1, 3)


# -- CLI errors ----------------------------------------------------------------------------------------------
def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("autoshard: error:") and "\n" not in err and "Traceback" not in err
    return err


def test_cli_missing_or_empty_data_dir(tmp_path, capsys):
    assert main(["train-cost", "--data", str(tmp_path / "nope"), "-o", str(tmp_path / "m.pt")]) == 2
    assert "no such dataset directory" in _one_line_error(capsys)
    (tmp_path / "empty").mkdir()
    assert main(["train-cost", "--data", str(tmp_path / "empty"), "-o", str(tmp_path / "m.pt")]) == 2
    assert "no shards" in _one_line_error(capsys)


def test_cli_corrupt_or_missing_checkpoint(tmp_path, capsys):
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a checkpoint at all")
    assert main(["eval-cost", "--model", str(bad), "--data", str(tmp_path)]) == 2
    assert "not a readable cost model" in _one_line_error(capsys)
    assert main(["eval-cost", "--model", str(tmp_path / "none.pt"), "--data", str(tmp_path)]) == 2
    assert "no such cost model" in _one_line_error(capsys)
    torch.save({"kind": "something else"}, bad)
    assert main(["eval-cost", "--model", str(bad), "--data", str(tmp_path)]) == 2
    assert "not an autoshard cost model" in _one_line_error(capsys)


def test_load_cost_model_by_path(model, tmp_path):
    from autoshard.costs.loading import load_cost_model

    path = tmp_path / "cm.pt"
    model.save(path)
    assert load_cost_model(str(path)).name == "learned"


def test_bad_architecture_options():
    with pytest.raises(AutoshardError):
        CostNetConfig(target="linear", additive=True)
    with pytest.raises(AutoshardError):
        TrainOptions(test_fraction=1.5)
    assert dataclasses.asdict(CostNetConfig())["target"] == "log"


def test_cli_train_then_eval_writes_checkpoint_metrics_and_plot(data_dir, tmp_path, capsys):
    ck = tmp_path / "cm.pt"
    assert main(["train-cost", "--data", data_dir, "-o", str(ck), "--epochs", "4", "--hidden", "16",
                 "--embed", "4", "--no-refit"]) == 0
    out = capsys.readouterr().out
    assert "fwd+bwd" in out and "held out" in out and "refit" not in out and ck.is_file()
    png = tmp_path / "scatter.png"
    assert main(["eval-cost", "--model", str(ck), "--data", data_dir, "--plot", str(png)]) == 0
    out = capsys.readouterr().out
    assert "held-out records" in out and "Spearman" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["train-cost", "--data", data_dir, "-o", str(ck), "--batch-size", "999"]) == 2
    assert "no records at batch size 999" in _one_line_error(capsys)
    assert main(["train-cost", "--data", data_dir, "-o", str(ck), "--weight-decay", "-1"]) == 2
    assert "--weight-decay -1.0 must be >= 0" in _one_line_error(capsys)


def test_gather_sum_adds_each_segments_rows_in_order_as_segment_sum_does():
    """``gather_sum``: segment ``owner[k]`` adds row ``members[k]``; grouped segments go through a sparse
    product, scattered ones through ``segment_sum`` of the gathered rows: the same float32 sums, bit for bit,
    repeats and empty segments included."""
    from autoshard.costs.learned.network import gather_sum, segment_sum

    rng = np.random.default_rng(0)
    scales = 10.0 ** rng.integers(-3, 4, (40, 1))  # rows of many magnitudes: the order of a sum shows
    values = torch.from_numpy((rng.normal(size=(40, 17)) * scales).astype(np.float32))
    owner = np.sort(rng.integers(0, 30, 500))
    owner = owner[owner != 7]  # segment 7 stays empty
    members = rng.integers(0, 40, len(owner))

    def reference(m, o):
        return segment_sum(values[torch.from_numpy(m)], torch.from_numpy(o), 31)

    grouped = gather_sum(values, members, owner, 31)
    assert torch.equal(grouped, reference(members, owner)) and not grouped[7].any() and not grouped[30].any()
    shuffled = rng.permutation(len(owner))
    assert torch.equal(gather_sum(values, members[shuffled], owner[shuffled], 31),
                       reference(members[shuffled], owner[shuffled]))
    assert gather_sum(values, members[:0], owner[:0], 3).shape == (3, 17)


def test_gather_stats_sums_and_bounds_each_devices_shards_in_any_order():
    """``support.gather_stats``: grouped devices (min / max by reduceat) and scattered ones (by ufunc.at) give
    the statistics a loop over each device's shards gives; an empty device keeps the empty statistics."""
    from autoshard.costs.learned.support import STATS, SUM_STATS, empty_stats, gather_stats, shard_stats

    rng = np.random.default_rng(1)
    per = shard_stats(rng.normal(size=(12, 7)) * 10.0 ** rng.integers(-4, 5, (12, 1)))
    owner = np.sort(rng.integers(0, 6, 40))
    owner = owner[owner != 2]
    members = rng.integers(0, 12, len(owner))
    expect = empty_stats((6,))
    for o, m in zip(owner, members):
        expect[o, :SUM_STATS] += per[m, :SUM_STATS]
        expect[o, SUM_STATS::2] = np.minimum(expect[o, SUM_STATS::2], per[m, SUM_STATS::2])
        expect[o, SUM_STATS + 1::2] = np.maximum(expect[o, SUM_STATS + 1::2], per[m, SUM_STATS + 1::2])
    assert expect.shape == (6, len(STATS)) and np.isinf(expect[2, SUM_STATS:]).all()
    np.testing.assert_array_equal(gather_stats(per, members, owner, 6), expect)
    shuffled = rng.permutation(len(owner))
    np.testing.assert_array_equal(gather_stats(per, members[shuffled], owner[shuffled], 6)[:, SUM_STATS:],
                                  expect[:, SUM_STATS:])
    np.testing.assert_allclose(gather_stats(per, members[shuffled], owner[shuffled], 6), expect, rtol=1e-12)
