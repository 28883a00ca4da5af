"""The analytical model: per-shard and per-lookup terms beside the bytes, its non-negative fit, and the
incremental accumulator agreeing with ``device_costs``."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from autoshard.costs.analytical import AnalyticalCostModel
from autoshard.shards import ShardRef
from autoshard.tables import LookupKind, LookupSpec, Table
from autoshard.tasks import Task

TRUE = AnalyticalCostModel(fwd_launch_ms=0.2, fwd_bytes_per_ms=3.0e6, bwd_launch_ms=0.3,
                           bwd_bytes_per_ms=1.0e6,
                           fwd_shard_ms=0.01, fwd_lookup_ns=4.0, bwd_shard_ms=0.02, bwd_lookup_ns=9.0)


def _task(devices: int = 4) -> Task:
    rng = np.random.default_rng(0)
    tables = tuple(Table(f"t{i}", int(rng.choice([4, 16, 64, 128])), int(rng.integers(1_000, 10**6)),
                         float(rng.uniform(1, 80)), lookups=LookupSpec(LookupKind.POWER_LAW, seed=i))
                   for i in range(12))
    return Task(tables, (10**12,) * devices, batch_size=1024)


def _random_devices(task: Task, rng: np.random.Generator, n: int) -> list[list[ShardRef]]:
    out = []
    for _ in range(n):
        picks = rng.choice(task.num_tables, size=int(rng.integers(1, 7)), replace=False)
        out.append([ShardRef(int(i), int(rng.choice([d for d in (4, 8, 16, task.tables[i].dim)
                                                      if d <= task.tables[i].dim])))
                    for i in picks])
    return out


def test_fit_recovers_the_per_lookup_and_per_shard_terms_when_dims_vary():
    task = _task()
    devices = _random_devices(task, np.random.default_rng(1), 80)
    costs = TRUE.device_costs(task, devices)
    terms = [TRUE.shard_terms(task, d) for d in devices]
    shards = np.array([len(d) for d in devices], dtype=float)
    lookups = np.array([t[:, 0].sum() for t in terms])
    nbytes = np.array([t[:, 1].sum() for t in terms])
    fitted = AnalyticalCostModel().fit(shards, lookups, nbytes, costs[:, 0], costs[:, 1])
    for key in ("fwd_launch_ms", "fwd_shard_ms", "fwd_lookup_ns", "fwd_bytes_per_ms", "bwd_launch_ms",
                "bwd_shard_ms", "bwd_lookup_ns", "bwd_bytes_per_ms"):
        assert getattr(fitted, key) == pytest.approx(getattr(TRUE, key), rel=1e-6, abs=1e-9), key
    np.testing.assert_allclose(fitted.device_costs(task, devices)[:, :2], costs[:, :2], rtol=1e-9)


def test_fit_never_returns_negative_constants():
    rng = np.random.default_rng(2)
    n = 30
    shards = rng.integers(1, 8, n).astype(float)
    lookups, nbytes = rng.uniform(1e4, 1e6, n), rng.uniform(1e5, 1e8, n)
    fwd = 5.0 - 1e-6 * lookups + rng.normal(0, 0.1, n)  # a decreasing trend no physical term can explain
    fitted = AnalyticalCostModel().fit(shards, lookups, nbytes, fwd, fwd * 2)
    assert min(fitted.fwd_launch_ms, fitted.fwd_shard_ms, fitted.fwd_lookup_ns, fitted.fwd_bytes_per_ms) >= 0


def test_a_column_split_costs_more_than_its_bytes_once_lookups_cost_time():
    task = _task(devices=2)
    t = max(range(task.num_tables), key=lambda i: task.tables[i].dim)
    dim = task.tables[t].dim
    whole = [[ShardRef(t, dim)], []]
    halves = [[ShardRef(t, dim // 2)], [ShardRef(t, dim // 2)]]
    for model, dearer in ((replace(TRUE, fwd_lookup_ns=0.0, bwd_lookup_ns=0.0, fwd_shard_ms=0.0,
                                   bwd_shard_ms=0.0), False), (TRUE, True)):
        split = model.device_costs(task, halves)[:, :2].sum()
        one = model.device_costs(task, whole)[:, :2].sum()
        extra_launch = model.fwd_launch_ms + model.bwd_launch_ms  # the second device's launch
        assert (split - one > extra_launch + 1e-9) == dearer


def test_accumulator_agrees_with_device_costs():
    task = _task()
    rng = np.random.default_rng(3)
    devices = _random_devices(task, rng, task.num_devices)
    acc = TRUE.accumulator(task, 2)
    for d, shards in enumerate(devices):
        for s in shards:
            acc.add(1, d, s)
    probe = ShardRef(0, task.tables[0].dim)
    got = acc.costs_if_added(probe)[1]
    want = TRUE.device_costs(task, [list(shards) + [probe] for shards in devices])
    np.testing.assert_allclose(got, want, rtol=1e-12)
    alone = TRUE.device_costs(task, [[probe]] * 4)
    np.testing.assert_allclose(acc.costs_if_added(probe)[0], alone, rtol=1e-12)
