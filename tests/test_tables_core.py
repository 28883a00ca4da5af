from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
from conftest import make_tables

from autoshard.errors import AutoshardError
from autoshard.tables import (
    NUM_FEATURES,
    FeatureNormalizer,
    LookupKind,
    LookupSpec,
    Precision,
    Table,
    TablePool,
)
from autoshard.tables.lookups import access_bins, sample_lookups


def test_table_sizes_and_memory():
    t = Table("a", dim=16, rows=1000, pooling_factor=3.0)
    assert t.size_bytes() == 1000 * 16 * 4
    assert t.size_bytes(Precision.FP16) == 1000 * 16 * 2
    assert t.memory_bytes(Precision.FP32, optimizer_bytes_per_element=4.0) == 1000 * 16 * 8
    assert t.memory_bytes(Precision.FP32, 0.0, dim=4) == 1000 * 4 * 4


@pytest.mark.parametrize("kwargs", [
    {"dim": 0}, {"rows": -1}, {"pooling_factor": float("nan")}, {"pooling_factor": -1.0},
    {"access_bins": (0.5,) * 3},
])
def test_bad_tables_are_refused(kwargs):
    base = {"name": "a", "dim": 8, "rows": 10, "pooling_factor": 1.0}
    with pytest.raises(AutoshardError):
        Table(**{**base, **kwargs})


def test_features_are_pool_normalised_and_task_independent():
    tables = make_tables(30)
    pool = TablePool.from_tables(tables)
    feats = np.stack([pool.normalizer.features(t) for t in tables])
    assert feats.shape == (30, NUM_FEATURES)
    # z-scored on the pool: mean ~0 on every non-constant feature
    assert np.allclose(feats.mean(axis=0)[1:4], 0.0, atol=1e-9)
    # the same table gets the same features whatever subset (task) it is in
    sub = pool.subset([t.name for t in tables[:5]])
    assert np.array_equal(sub.normalizer.features(tables[2]), pool.normalizer.features(tables[2]))


def test_column_shard_features_use_shard_dim():
    t = make_tables(1)[0]
    norm = FeatureNormalizer.fit(make_tables(10))
    full, half = norm.features(t), norm.features(t, dim=t.dim // 2)
    assert full[0] > half[0] and full[3] > half[3]
    assert np.array_equal(full[4:], half[4:])


def test_pool_json_round_trip(tmp_path):
    pool = TablePool.from_tables(make_tables(7), source={"generator": "test"})
    path = tmp_path / "p.json"
    pool.save(str(path))
    again = TablePool.load(str(path))
    assert again.tables == pool.tables
    assert again.normalizer == pool.normalizer
    assert again.source == {"generator": "test"}


def test_pool_load_errors(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(AutoshardError, match="not valid JSON"):
        TablePool.load(str(bad))
    with pytest.raises(AutoshardError, match="no such file"):
        TablePool.load(str(tmp_path / "missing.json"))
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"kind": "autoshard.plan", "version": 1}))
    with pytest.raises(AutoshardError, match="expected a 'autoshard.tables' file"):
        TablePool.load(str(wrong))
    nan = tmp_path / "nan.json"
    pool = TablePool.from_tables(make_tables(2)).to_json()
    text = json.dumps(pool).replace(str(pool["tables"][0]["pooling_factor"]), "NaN", 1)
    nan.write_text(text)
    with pytest.raises(AutoshardError, match="finite"):
        TablePool.load(str(nan))


def test_duplicate_names_refused():
    t = make_tables(1)[0]
    with pytest.raises(AutoshardError, match="more than once"):
        TablePool.from_tables([t, t])


def test_lookups_are_deterministic_and_shaped():
    t = make_tables(1)[0]
    a, b = sample_lookups(t, 256, seed=3), sample_lookups(t, 256, seed=3)
    c = sample_lookups(t, 256, seed=4)
    assert np.array_equal(a.indices, b.indices) and np.array_equal(a.offsets, b.offsets)
    assert not np.array_equal(a.indices, c.indices)
    assert a.batch_size == 256 and a.offsets[-1] == len(a.indices)
    assert a.indices.min() >= 0 and a.indices.max() < t.rows
    capped = sample_lookups(t, 256, seed=3, rows=50)
    assert capped.indices.max() < 50


@pytest.mark.parametrize("table, cap, digest", [
    (Table("pl", 16, 10**6, 12.0, lookups=LookupSpec(LookupKind.POWER_LAW, seed=5, alpha=0.8)), None,
     "2c0b349e61ee9ad1"),
    (Table("pl1", 16, 10**7, 30.0, lookups=LookupSpec(LookupKind.POWER_LAW, seed=6, alpha=1.0, vocab=10**5)),
     10**6, "1795cd4e8f26e1b8"),
    (Table("srt", 16, 5000, 3.0, lookups=LookupSpec(LookupKind.POWER_LAW, seed=7, alpha=1.3,
                                                    sorted_ids=True)), 100, "6000a362baf65733"),
])
def test_lookups_stay_the_ones_committed_profiles_were_timed_on(table, cap, digest):
    # a profile grows over several sittings and code versions: its samples must keep drawing the same ids
    # (digests taken at stop 15's code, before the id generator was made to work in place)
    lk = sample_lookups(table, 512, seed=2, rows=cap)
    data = lk.indices.astype("<i8").tobytes() + lk.offsets.astype("<i8").tobytes()
    assert hashlib.blake2b(data, digest_size=8).hexdigest() == digest


def test_access_bins_definition():
    # counts: index 0 once, 1 twice, 2 three times, 3 five times -> bins (0,1], (1,2], (2,4], (4,8]
    idx = np.array([0] + [1] * 2 + [2] * 3 + [3] * 5)
    bins = access_bins(idx)
    assert len(bins) == 17
    assert bins[:4] == (0.25, 0.25, 0.25, 0.25)
    assert access_bins(np.array([7] * 40000))[16] == 1.0
    assert sum(access_bins(np.array([], dtype=np.int64))) == 0.0
