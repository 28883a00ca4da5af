"""Fitting the (alpha, vocab) density of the synthetic generator to the published statistics (offline,
~50 s of CPU; its result is ``tables.published.CELL_WEIGHTS``). Reproduce with
  .venv/bin/python -c "from autoshard.tables.density_fit import fit_cell_density as f; print(f())"

The density is piecewise uniform over cells of alpha (``ALPHA_EDGES``) x log10(vocab / lookups in one batch
of 65536) (``VOCAB_EDGES``). ``fit_cell_density`` fits its cell weights by non-negative least squares on
analytic, Poissonised expectations over a calibration sample of rows/pooling drawn as ``synthesize_pool``
draws them (batch 65536), to the published per-table mean access bins, the pooled reuse histograms of
locality_stats_2021.txt and its distinct/lookups ratio.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from autoshard.tables.published import (
    ALPHA_EDGES,
    PUBLISHED_BATCH_SIZE,
    PUBLISHED_BINS_MEAN,
    PUBLISHED_BINS_STD,
    PUBLISHED_POOLED_LOOKUP_HIST,
    PUBLISHED_POOLED_UNIQUE_HIST,
    PUBLISHED_UNIQUE_PER_LOOKUP,
    VOCAB_EDGES,
)
from autoshard.tables.synth import SynthConfig, draw_features
from autoshard.tables.table import NUM_ACCESS_BINS

_HEAD_RANKS = 2000
"""Ranks below this are treated one by one in the analytic expectation; above, in log-spaced groups."""
_TAIL_GROUPS = 1500


def _poisson_bin_tables(log_lam: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For Poisson(lam) counts: P(count in bin j) and E[count * 1{count in bin j}] / lam, per lam
    ([L, 17])."""
    from scipy import stats

    lam = np.exp(log_lam)[:, None]
    edges = np.array([0] + [2**k for k in range(NUM_ACCESS_BINS - 1)],
                     dtype=np.float64)  # 0, 1, 2, 4, ..., 32768
    cdf = stats.poisson.cdf(edges[None, :], lam)
    p = np.empty((len(log_lam), NUM_ACCESS_BINS))
    p[:, :-1] = np.diff(cdf, axis=1)
    p[:, -1] = stats.poisson.sf(edges[-1], lam[:, 0])
    # E[c 1{a < c <= b}] = lam * P(a - 1 < c' <= b - 1) for c' ~ Poisson(lam)
    cdf1 = stats.poisson.cdf(edges[None, :] - 1, lam)
    q = np.empty_like(p)
    q[:, :-1] = np.diff(cdf1, axis=1)
    q[:, -1] = stats.poisson.sf(edges[-1] - 1, lam[:, 0])
    return p, q


def _expected_hists(n: float, rows: int, alpha: float, grid: np.ndarray, p_tab: np.ndarray, q_tab: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Expected distinct indices and lookups per bin for ``n`` i.i.d. lookups of the rank power law."""
    def cdf(x: np.ndarray) -> np.ndarray:
        # CDF of the continuous rank x in [0, rows) (see lookups._power_law_ranks)
        if abs(alpha - 1.0) < 1e-9:
            return np.log1p(x) / math.log(rows + 1.0)
        return ((x + 1.0) ** (1.0 - alpha) - 1.0) / ((rows + 1.0) ** (1.0 - alpha) - 1.0)

    head = min(rows, _HEAD_RANKS)
    bounds = np.arange(head + 1, dtype=np.float64)
    if rows > head:
        bounds = np.unique(np.concatenate([bounds, np.rint(np.geomspace(head, rows, _TAIL_GROUPS))]))
    width = np.diff(bounds)
    lam = n * np.diff(cdf(bounds)) / width
    log_lam = np.log(np.maximum(lam, 1e-300))
    p = np.stack([np.interp(log_lam, grid, p_tab[:, j]) for j in range(NUM_ACCESS_BINS)], axis=1)
    q = np.stack([np.interp(log_lam, grid, q_tab[:, j]) for j in range(NUM_ACCESS_BINS)], axis=1)
    tiny = lam < math.exp(grid[0])
    p[tiny] = 0.0
    q[tiny] = 0.0
    p[tiny, 0] = lam[tiny]  # P(count = 1) ~ lam for vanishing lam
    q[tiny, 0] = 1.0
    return (width[:, None] * p).sum(axis=0), (width[:, None] * lam[:, None] * q).sum(axis=0)


def cell_basis(calibration_tables: int = 64, batch_size: int = PUBLISHED_BATCH_SIZE, seed: int = 0,
               alpha_edges: Sequence[float] = ALPHA_EDGES, vocab_edges: Sequence[float] = VOCAB_EDGES
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float]:
    """Per (alpha, vocab) cell: expected mean bins, mean squared bins, pooled distinct and lookup histograms;
    and the total lookups.

    Rows and pooling of ``calibration_tables`` tables are drawn as ``synthesize_pool`` draws them; each cell
    is evaluated at 2 x 2 points inside it with Poissonised counts (arrays [cells, 17], cell = i * nv + j).
    """
    cfg = SynthConfig(num_tables=calibration_tables, seed=seed, alpha_edges=tuple(alpha_edges),
                      vocab_edges=tuple(vocab_edges), cell_weights=((0, 0, 1.0),))
    f = draw_features(cfg)
    grid = np.linspace(math.log(1e-9), math.log(1e9), 4000)
    p_tab, q_tab = _poisson_bin_tables(grid)
    na, nv = len(alpha_edges) - 1, len(vocab_edges) - 1
    mean_bins = np.zeros((na * nv, NUM_ACCESS_BINS))
    mean_sq = np.zeros_like(mean_bins)
    pooled_u = np.zeros_like(mean_bins)
    pooled_l = np.zeros_like(mean_bins)
    for i in range(na):
        for j in range(nv):
            c = i * nv + j
            for a in np.linspace(alpha_edges[i], alpha_edges[i + 1], 5)[1::2]:
                for v in np.linspace(vocab_edges[j], vocab_edges[j + 1], 5)[1::2]:
                    for rows, pooling in zip(f["rows"], f["pooling"]):
                        if pooling <= 0:
                            continue
                        vocab = int(np.clip(round(PUBLISHED_BATCH_SIZE * pooling * 10.0**v), 1, rows))
                        u, lk = _expected_hists(batch_size * pooling, vocab, float(a), grid, p_tab, q_tab)
                        mean_bins[c] += u / u.sum() / 4.0
                        mean_sq[c] += (u / u.sum()) ** 2 / 4.0
                        pooled_u[c] += u / 4.0
                        pooled_l[c] += lk / 4.0
    return (mean_bins / calibration_tables, mean_sq / calibration_tables, pooled_u, pooled_l,
            float(batch_size * f["pooling"].sum()))


def fit_cell_density(pooled_weight: float = 0.3, std_weight: float = 0.0, **basis_args: Any
                     ) -> tuple[tuple[int, int, float], ...]:
    """Cell weights that best match the published statistics (non-negative least squares, summing to one).

    Equations: pool mean bins = published mean bins; pool mean squared bins = published std^2 + mean^2 (so
    the per-table spread matches too); pooled distinct-index and lookup histograms = locality_stats_2021
    (linear in the weights once multiplied out: sum_c w_c (U_cj - h_j U_c) = 0); distinct / lookups =
    published. ``pooled_weight`` and ``std_weight`` weigh those equations against the mean bins.
    """
    from scipy.optimize import nnls

    mean_bins, mean_sq, pooled_u, pooled_l, n_total = cell_basis(**basis_args)
    nv = len(basis_args.get("vocab_edges", VOCAB_EDGES)) - 1
    hu = np.asarray(PUBLISHED_POOLED_UNIQUE_HIST)
    hl = np.asarray(PUBLISHED_POOLED_LOOKUP_HIST)
    u_tot = pooled_u.sum(axis=1, keepdims=True)
    scale = float(u_tot.mean())
    rows_u = (pooled_u - hu[None, :] * u_tot) / scale
    rows_l = (pooled_l - hl[None, :] * n_total) / n_total
    rows_ratio = (u_tot[:, 0] - PUBLISHED_UNIQUE_PER_LOOKUP * n_total) / scale
    cells = len(mean_bins)
    target_sq = np.asarray(PUBLISHED_BINS_STD) ** 2 + np.asarray(PUBLISHED_BINS_MEAN) ** 2
    a_mat = np.vstack([mean_bins.T, std_weight * mean_sq.T, pooled_weight * rows_u.T,
                       pooled_weight * rows_l.T, pooled_weight * rows_ratio[None, :],
                       100.0 * np.ones((1, cells))])
    b_vec = np.concatenate([np.asarray(PUBLISHED_BINS_MEAN), std_weight * target_sq,
                            np.zeros(2 * NUM_ACCESS_BINS + 1), [100.0]])
    w, _ = nnls(a_mat, b_vec)
    w = w / w.sum()
    return tuple((c // nv, c % nv, round(float(w[c]), 4)) for c in range(cells) if round(float(w[c]), 4) > 0)
