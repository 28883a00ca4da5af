"""Synthetic DLRM-like pools: statistics against the published dlrm_datasets ones, bins from real generated
lookups, determinism per seed, recorded settings."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from autoshard.errors import AutoshardError
from autoshard.tables import TablePool
from autoshard.tables import published as P
from autoshard.tables import synth as S
from autoshard.tables.lookups import access_bins, sample_lookups

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "dlrm_datasets"

BIN_POOL_TABLES = 40
"""Tables of the pool whose bins are checked at the published batch 65536 (a few seconds of generation)."""
BINS_MEAN_TOL = 0.05
"""Pool mean of every access bin within 0.05 (absolute) of the published mean for a 40-table pool (seeds 0-5
measured: worst 0.038; a whole 856-table pool: 0.006). 40 i.i.d. tables with the published per-table std (up
to 0.23) would give a standard error of 0.036 on bin 0 alone; the stratified draws keep it lower."""
POOLED_HIST_TOL = 0.13
"""Pooled distinct-index histogram (locality_stats_2021 'Histogram of col sizes') within 0.13 per bin for 40
tables (seeds 0-5: worst 0.12, as a few large tables dominate a small pool; 856 tables: 0.04)."""


@pytest.fixture(scope="module")
def bins_pool() -> TablePool:
    return S.synthesize_pool(BIN_POOL_TABLES, seed=0)


@pytest.fixture(scope="module")
def full_pool() -> TablePool:
    """856 tables as the 2021 trace; bins at a tiny batch (only rows/pooling are checked on it)."""
    return S.synthesize_pool(P.PUBLISHED_NUM_TABLES, seed=0, stats_batch_size=8)


def test_published_constants_are_the_shared_files_numbers():
    path = SHARED / "feature_stats.json"
    if not path.is_file():
        pytest.skip("shared/data/dlrm_datasets is not next to this checkout")
    stats = json.loads(path.read_text())
    f = stats["features"]
    assert P.PUBLISHED_ROWS_MEAN == f["rows"]["mean"] and P.PUBLISHED_ROWS_STD == f["rows"]["std"]
    assert P.PUBLISHED_POOLING_MEAN == f["pooling_factor"]["mean"]
    assert P.PUBLISHED_POOLING_STD == f["pooling_factor"]["std"]
    assert list(P.PUBLISHED_BINS_MEAN) == f["access_bins"]["mean"]
    assert P.PUBLISHED_EMPTY_FRACTION == stats["tables_with_no_lookups_fraction_estimate"]
    text = (SHARED / "locality_stats_2021.txt").read_text().splitlines()
    start = text.index("Histogram of col sizes:") + 1
    assert ([float(line.split(":")[1]) for line in text[start:start + 17]]
            == list(P.PUBLISHED_POOLED_UNIQUE_HIST))


def test_rows_and_pooling_match_published(full_pool):
    st = full_pool.source["stats"]
    assert st["rows_mean"] == pytest.approx(P.PUBLISHED_ROWS_MEAN, rel=0.03)
    assert st["rows_std"] == pytest.approx(P.PUBLISHED_ROWS_STD, rel=0.10)
    assert st["pooling_mean"] == pytest.approx(P.PUBLISHED_POOLING_MEAN, rel=0.05)
    assert st["pooling_std"] == pytest.approx(P.PUBLISHED_POOLING_STD, rel=0.25)
    assert st["empty_fraction"] == pytest.approx(P.PUBLISHED_EMPTY_FRACTION, abs=0.002)
    assert len(full_pool.source["empty_tables"]) == round(P.PUBLISHED_EMPTY_FRACTION * P.PUBLISHED_NUM_TABLES)


def test_bins_match_published(bins_pool):
    bins = np.array([t.access_bins for t in bins_pool.tables])
    assert np.abs(bins.mean(axis=0) - np.array(P.PUBLISHED_BINS_MEAN)).max() < BINS_MEAN_TOL
    pooled = np.array(bins_pool.source["stats"]["pooled_unique_hist"])
    assert np.abs(pooled - np.array(P.PUBLISHED_POOLED_UNIQUE_HIST)).max() < POOLED_HIST_TOL
    # rows and pooling of a small pool stay near the targets too (stratified draws)
    st = bins_pool.source["stats"]
    assert st["rows_mean"] == pytest.approx(P.PUBLISHED_ROWS_MEAN, rel=0.10)
    assert st["pooling_mean"] == pytest.approx(P.PUBLISHED_POOLING_MEAN, rel=0.25)


def test_bins_are_those_of_generated_lookups(bins_pool):
    for table in bins_pool.tables[:6]:
        lk = sample_lookups(table, S.STATS_BATCH_SIZE, seed=S.STATS_SEED)
        assert table.access_bins == pytest.approx(access_bins(lk.indices), abs=1e-12)
        assert lk.indices.max(initial=0) < table.rows


def test_settings_recorded(bins_pool):
    src = bins_pool.source
    assert src["generator"] == S.GENERATOR and src["generator_version"] == S.GENERATOR_VERSION
    cfg = src["config"]
    assert cfg["num_tables"] == BIN_POOL_TABLES and cfg["seed"] == 0 and cfg["dims"] == [16]
    assert cfg["stats_batch_size"] == S.STATS_BATCH_SIZE and src["stats_seed"] == S.STATS_SEED
    assert [list(c) for c in P.CELL_WEIGHTS] == cfg["cell_weights"]
    json.dumps(src, allow_nan=False)


def test_deterministic_per_seed():
    a = S.synthesize_pool(12, seed=3, stats_batch_size=512)
    b = S.synthesize_pool(12, seed=3, stats_batch_size=512)
    c = S.synthesize_pool(12, seed=4, stats_batch_size=512)
    assert a.to_json() == b.to_json()
    assert [t.rows for t in a.tables] != [t.rows for t in c.tables]
    assert np.array_equal(sample_lookups(a.tables[0], 64, seed=1).indices,
                          sample_lookups(TablePool.from_json(a.to_json()).tables[0], 64, seed=1).indices)


def test_dims_choice_leaves_other_features_alone():
    one = S.synthesize_pool(30, seed=1, stats_batch_size=64)
    many = S.synthesize_pool(30, seed=1, dims=(4, 8, 16, 32, 64, 128), stats_batch_size=64)
    assert {t.dim for t in one.tables} == {16}
    dims = [t.dim for t in many.tables]
    assert set(dims) <= {4, 8, 16, 32, 64, 128} and len(set(dims)) >= 3
    assert [(t.rows, t.pooling_factor, t.access_bins, t.lookups) for t in one.tables] == \
        [(t.rows, t.pooling_factor, t.access_bins, t.lookups) for t in many.tables]


@pytest.mark.parametrize("kwargs", [
    {"num_tables": 0}, {"num_tables": 5, "dims": (0,)}, {"num_tables": 5, "stats_batch_size": 0},
    {"num_tables": 5, "empty_fraction": 1.0}, {"num_tables": 5, "cell_weights": ((99, 0, 1.0),)},
])
def test_bad_settings_raise(kwargs):
    with pytest.raises(AutoshardError):
        S.synthesize_pool(**kwargs)


def test_interrupted_run_resumes_from_checkpoint(tmp_path, monkeypatch):
    ckpt = str(tmp_path / "pool.json.partial.jsonl")
    made = []
    make_table = S._make_table
    monkeypatch.setattr(S, "_make_table",
                        lambda cfg, f, i, name: made.append(i) or make_table(cfg, f, i, name))

    def stop_after_5(k: int) -> None:
        if k == 5:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        S.synthesize_pool(10, seed=7, stats_batch_size=256, progress=stop_after_5, checkpoint=ckpt)
    assert len(Path(ckpt).read_text().splitlines()) == 1 + 5  # header + the 5 finished tables
    seen = []
    made.clear()
    resumed = S.synthesize_pool(10, seed=7, stats_batch_size=256, progress=seen.append, checkpoint=ckpt)
    assert made == [5, 6, 7, 8, 9]  # the first five came from the checkpoint
    assert resumed.to_json() == S.synthesize_pool(10, seed=7, stats_batch_size=256).to_json()
    assert seen == list(range(1, 11))
    # a checkpoint made with other settings is not reused
    other = S.synthesize_pool(10, seed=8, stats_batch_size=256, checkpoint=ckpt)
    assert other.to_json() == S.synthesize_pool(10, seed=8, stats_batch_size=256).to_json()
