"""Real FBGEMM timing of one device's fused shard (hardware.kernel), on small tables."""

from __future__ import annotations

import math

import pytest

from autoshard.errors import AutoshardError
from autoshard.hardware.kernel import DeviceKind, MeasureSettings, Optimizer, effective_rows, measure_shard
from autoshard.shards import ShardRef
from autoshard.tables import LookupKind, LookupSpec, Precision, Table
from autoshard.tasks import Task

FAST = MeasureSettings(warmup=1, repeats=3, max_cv=10.0, max_tries=1, flush_cache=False, num_batches=2)


def _task(precision: Precision = Precision.FP32, rows: tuple[int, ...] = (500, 3000, 20000)) -> Task:
    tables = tuple(Table(f"t{i}", 16 + 8 * i, r, 4.0 + i, lookups=LookupSpec(LookupKind.POWER_LAW, seed=i))
                   for i, r in enumerate(rows))
    return Task(tables, (10**9, 10**9), precision=precision, batch_size=64, name="small")


def test_measure_shard_fields() -> None:
    task = _task()
    t = measure_shard(task, [ShardRef(0, 16), ShardRef(2, 32)], FAST)
    assert t.fwd_ms > 0 and t.bwd_ms > 0
    assert math.isfinite(t.fwd_cv) and t.fwd_cv >= 0 and math.isfinite(t.bwd_cv) and t.bwd_cv >= 0
    assert t.tries == 1
    assert t.rows == (500, 20000)
    assert len(t.fwd_runs_ms) == len(t.bwd_runs_ms) == FAST.repeats
    assert sorted(t.fwd_runs_ms)[1] == pytest.approx(t.fwd_ms)  # the median of 3


def test_column_shard_fp16_rowwise_adagrad() -> None:
    task = _task(Precision.FP16)
    settings = MeasureSettings(optimizer=Optimizer.ROWWISE_ADAGRAD, warmup=0, repeats=2, max_cv=10.0,
                               max_tries=1, flush_cache=False)
    t = measure_shard(task, [ShardRef(1, 8)], settings)
    assert t.fwd_ms > 0 and t.bwd_ms > 0


def test_noisy_measurement_is_retried_up_to_max_tries() -> None:
    # max_cv this small cannot be met by wall-clock timings, so every try is made
    settings = MeasureSettings(warmup=0, repeats=3, max_cv=1e-9, max_tries=2, flush_cache=False)
    assert measure_shard(_task(), [ShardRef(0, 16)], settings).tries == 2


def test_rows_rule_caps_and_fits_memory() -> None:
    task = _task(rows=(500, 3000, 20000))
    shards = [ShardRef(0, 16), ShardRef(1, 24), ShardRef(2, 32)]
    assert effective_rows(task, shards, MeasureSettings(rows_cap=1000)) == [500, 1000, 1000]
    # 72 columns x 4 bytes; 72 * 4 * 100 bytes allows 100 rows per table
    assert effective_rows(task, shards, MeasureSettings(max_shard_bytes=72 * 4 * 100)) == [100, 100, 100]
    t = measure_shard(task, shards, MeasureSettings(rows_cap=1000, warmup=0, repeats=1, flush_cache=False))
    assert t.rows == (500, 1000, 1000)


def test_settings_round_trip_and_validation() -> None:
    s = MeasureSettings(optimizer="rowwise_adagrad", device="cpu", repeats=7)
    assert s.optimizer is Optimizer.ROWWISE_ADAGRAD and s.device is DeviceKind.CPU
    assert MeasureSettings.from_json(s.to_json()) == s
    with pytest.raises(AutoshardError, match="optimizer"):
        MeasureSettings(optimizer="adam")
    with pytest.raises(AutoshardError, match="repeats"):
        MeasureSettings(repeats=0)


def test_bad_shards_raise_one_line() -> None:
    task = _task()
    for shards, match in (([], "empty"), ([ShardRef(5, 8)], "out of range"), ([ShardRef(0, 64)], "dim 64"),
                           ([ShardRef(0, 6)], "multiple of 4")):
        with pytest.raises(AutoshardError, match=match) as e:
            measure_shard(task, shards, FAST)
        assert "\n" not in str(e.value)


def test_cuda_without_gpu_is_a_clear_error() -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(AutoshardError, match="cuda"):
        measure_shard(_task(), [ShardRef(0, 16)], MeasureSettings(device="cuda"))


def test_a_skewed_tables_hot_row_range_costs_more_than_a_cold_one_of_the_same_size() -> None:
    # ids numbered by frequency (row 0 the hottest): the first quarter of the rows serves most lookups
    spec = LookupSpec(LookupKind.POWER_LAW, seed=3, alpha=1.2, sorted_ids=True)
    table = Table("skewed", 64, 400_000, 40.0, lookups=spec)
    task = Task((table,), (10**10,) * 4, batch_size=2048, name="skew")
    quarter = table.rows // 4
    settings = MeasureSettings(warmup=1, repeats=5, max_cv=10.0, max_tries=1, num_batches=2)
    hot = measure_shard(task, [ShardRef(0, 64, 0, quarter)], settings)
    cold = measure_shard(task, [ShardRef(0, 64, 3 * quarter, table.rows)], settings)
    assert hot.rows == cold.rows == (quarter,)
    assert hot.fwd_ms + hot.bwd_ms > 1.5 * (cold.fwd_ms + cold.bwd_ms)


def test_time_budget_cuts_the_steps_of_a_slow_shard_but_never_below_three() -> None:
    task, shards = _task(), [ShardRef(0, 16)]
    full = MeasureSettings(warmup=2, repeats=8, max_cv=10.0, max_tries=1, flush_cache=False, num_batches=2)
    assert len(measure_shard(task, shards, full).fwd_runs_ms) == 8
    tight = MeasureSettings(warmup=2, repeats=8, max_cv=10.0, max_tries=1, flush_cache=False, num_batches=2,
                            time_budget_ms=1e-6)  # every step is "slow" against this budget
    t = measure_shard(task, shards, tight)
    assert len(t.fwd_runs_ms) == len(t.bwd_runs_ms) == 3 and t.fwd_ms > 0
    roomy = MeasureSettings(warmup=2, repeats=8, max_cv=10.0, max_tries=1, flush_cache=False, num_batches=2,
                            time_budget_ms=1e9)
    assert len(measure_shard(task, shards, roomy).fwd_runs_ms) == 8


def test_time_budget_is_recorded_only_when_set() -> None:
    assert "time_budget_ms" not in MeasureSettings().to_json()  # profiles made before the option still match
    s = MeasureSettings(time_budget_ms=2000.0)
    assert s.to_json()["time_budget_ms"] == 2000.0 and MeasureSettings.from_json(s.to_json()) == s
    with pytest.raises(AutoshardError, match="time_budget_ms"):
        MeasureSettings(time_budget_ms=-1.0)
    for bad in (float("inf"), float("nan")):
        with pytest.raises(AutoshardError, match="finite"):
            MeasureSettings(time_budget_ms=bad)


def test_fill_weights_writes_every_weight_within_range_and_seeded() -> None:
    import torch

    from autoshard.hardware.kernel import WEIGHT_INIT_TILE, fill_weights

    def filled(seed: int) -> list[torch.Tensor]:
        torch.manual_seed(seed)
        # one table longer than the tile (whole tiles + a rest), one shorter, one non-contiguous, one fp16
        ws = [torch.zeros(WEIGHT_INIT_TILE // 8 + 3, 16), torch.zeros(7, 4), torch.zeros(12, 8)[:, :4],
              torch.zeros(300, 8, dtype=torch.float16)]
        fill_weights(ws, -0.01, 0.01)
        return ws

    a, b, c = filled(0), filled(0), filled(1)
    for w in a:
        assert bool((w != 0).all()) and float(w.abs().max()) <= 0.01 * 1.001  # fp16 rounds up a little
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert not torch.equal(a[1], c[1])
    assert len(torch.unique(a[0][:, 0])) > 0.9 * a[0].shape[0]  # rows differ: the tile is not a row multiple

