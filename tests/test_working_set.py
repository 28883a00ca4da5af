"""The working-set features: the distinct rows a batch touches, estimated from a table's access bins
(counted at the dlrm_datasets batch), against the rows sampled batches really touch; and the network option
that uses them."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from autoshard.costs.learned import CostNetConfig
from autoshard.costs.learned.features import REUSE_FEATURE_NAMES, reuse_features
from autoshard.errors import AutoshardError
from autoshard.tables import LookupKind, LookupSpec, Table
from autoshard.tables.lookups import access_bins, sample_lookups
from autoshard.tables.table import REUSE_STATS_BATCH, distinct_rows_per_batch

CASES = [  # (rows, pooling, alpha, vocab): uniform, skewed, a small hot vocabulary, near-uniform and heavy
    (200_000, 5.0, 0.0, None),
    (2_000_000, 10.0, 1.1, None),
    (500_000, 20.0, 0.6, 3_000),
    (9_000_000, 67.0, 0.07, 290_000),
]


def _table(i: int, rows: int, pooling: float, alpha: float, vocab: int | None) -> Table:
    t = Table(f"t{i}", 16, rows, pooling,
              lookups=LookupSpec(LookupKind.POWER_LAW, seed=100 + i, alpha=alpha, vocab=vocab))
    return replace(t, access_bins=access_bins(sample_lookups(t, REUSE_STATS_BATCH).indices))


@pytest.mark.parametrize("case", range(len(CASES)))
def test_distinct_rows_estimate_follows_sampled_batches(case):
    t = _table(case, *CASES[case])
    batches = np.array([512.0, 2048.0, 16384.0, 65536.0])
    est = distinct_rows_per_batch(np.stack([t.raw_features()] * len(batches)), batches)
    real = np.array([len(np.unique(sample_lookups(t, int(b), seed=7).indices)) for b in batches])
    # long-tailed tables are over-estimated at small batches (their once-seen rows are rarer than 1 / B):
    # up to ~1.5x at 1/128 of the bins' batch; the networks learn from the feature, which keeps the order
    assert np.all(np.abs(np.log(est / real)) < np.log(1.6)), (est, real)
    assert abs(est[-1] / real[-1] - 1.0) < 0.15  # at the bins' own batch
    assert np.all(np.diff(est) >= 0) and np.all(est <= t.rows)


def test_distinct_rows_are_capped_by_the_rows_and_zero_without_lookups():
    tiny = _table(9, 50, 30.0, 0.0, None)
    assert distinct_rows_per_batch(tiny.raw_features()[None], 65536.0)[0] == pytest.approx(50.0)
    silent = replace(tiny, pooling_factor=0.0)
    assert distinct_rows_per_batch(silent.raw_features()[None], 4096.0)[0] == 0.0
    no_bins = replace(tiny, access_bins=(0.0,) * len(tiny.access_bins))  # all-zero bins: every row once
    assert np.isfinite(distinct_rows_per_batch(no_bins.raw_features()[None], 4096.0)).all()


def test_reuse_features_grow_with_batch_dim_and_element_bytes():
    t = _table(3, *CASES[3])
    raw = np.stack([t.raw_features()] * 3)
    small, big = reuse_features(raw[:1], 512.0, 4.0), reuse_features(raw[:1], 65536.0, 4.0)
    assert small.shape == (1, len(REUSE_FEATURE_NAMES)) and np.all(big > small)
    half = reuse_features(raw[:1], 65536.0, 2.0)
    assert half[0, 0] == pytest.approx(big[0, 0]) and half[0, 1] < big[0, 1]
    per_shard = reuse_features(raw, np.array([512.0, 2048.0, 65536.0]), np.array([4.0, 4.0, 2.0]))
    assert per_shard[0] == pytest.approx(small[0]) and per_shard[2] == pytest.approx(half[0])


def test_working_set_needs_the_device_context():
    with pytest.raises(AutoshardError, match="need the device context"):
        CostNetConfig(reuse=True)
    wide = CostNetConfig(context=True, reuse=True).input_width
    assert wide == CostNetConfig(context=True).input_width + len(REUSE_FEATURE_NAMES)
    assert CostNetConfig.from_json({k: v for k, v in CostNetConfig(context=True).to_json().items()
                                    if k != "reuse"}).reuse is False  # checkpoints before the option


def test_density_features_spread_a_batch_over_the_rows_it_is_timed_with():
    """``density_features`` (stop 94): under the rows cap the share of the timed rows a batch touches is
    its distinct rows over the table's and falls as the table grows (the same batch spread more thinly);
    above it the table is timed with the cap's rows and the share is that of the cap's rows its distinct rows
    fold onto (higher than the uncapped share); the bytes are the timed rows' at the shard's dim and element
    size."""
    from autoshard.costs.learned.features import (
        DENSITY_FEATURE_NAMES,
        DENSITY_LOC,
        DENSITY_SCALE,
        density_features,
        timed_rows,
    )

    sizes = (100_000, 1_000_000, 4_000_000, 40_000_000)
    raw = np.stack([replace(_table(1, *CASES[1]), rows=n).raw_features() for n in sizes])
    feats = density_features(raw, 2048.0, 4.0, 1_000_000)
    assert feats.shape == (len(sizes), len(DENSITY_FEATURE_NAMES))
    share = feats[:, 0] * DENSITY_SCALE[0] + DENSITY_LOC[0]
    log_bytes = feats[:, 1] * DENSITY_SCALE[1] + DENSITY_LOC[1]
    assert np.all((share > 0) & (share <= 1)) and share[0] > share[1]
    np.testing.assert_allclose(timed_rows(raw, 1_000_000), [100_000, 1_000_000, 1_000_000, 1_000_000])
    np.testing.assert_allclose(log_bytes, np.log10(np.array([100_000, 1e6, 1e6, 1e6]) * 16 * 4))
    distinct = distinct_rows_per_batch(raw, 2048.0)
    full = 10.0 ** raw[:, 1]
    np.testing.assert_allclose(share[:2], distinct[:2] / full[:2])  # under the cap: the share touched
    np.testing.assert_allclose(share[3], -np.expm1(-distinct[3] / 1e6), rtol=0.02)  # far above: folded
    assert share[1] > share[2] > share[3] * 0.5
    uncapped = density_features(raw, 2048.0, 4.0, None)
    assert uncapped[3, 0] < uncapped[2, 0] < feats[2, 0] and uncapped[0] == pytest.approx(feats[0])
    half = density_features(raw, 2048.0, 2.0, 1_000_000)  # fp16: same share, half the bytes
    np.testing.assert_allclose(half[:, 0], feats[:, 0])
    np.testing.assert_allclose((feats[:, 1] - half[:, 1]) * DENSITY_SCALE[1], np.log10(2.0))


def test_density_needs_the_working_set():
    from autoshard.costs.learned.features import DENSITY_FEATURE_NAMES

    with pytest.raises(AutoshardError, match="need the working-set features"):
        CostNetConfig(context=True, density=True)
    both = CostNetConfig(context=True, reuse=True, density=True).input_width
    assert both == CostNetConfig(context=True, reuse=True).input_width + len(DENSITY_FEATURE_NAMES)
    assert CostNetConfig.from_json({k: v for k, v in CostNetConfig(context=True, reuse=True).to_json().items()
                                    if k != "density"}).density is False  # checkpoints before the option
