"""Published statistics of the dlrm_datasets traces that synthetic pools are matched to, and the
(alpha, vocab) density of the synthetic generator fitted to them.

Sources: shared/data/dlrm_datasets/feature_stats.json (dlrm_datasets 2021 file fbgemm_t856_bs65536: 856
tables, batch 65536) and locality_stats_2021.txt (its first entry). ``CELL_WEIGHTS`` is the result of
``tables.density_fit.fit_cell_density()`` (non-negative least squares against these targets).
"""

from __future__ import annotations

PUBLISHED_NUM_TABLES = 856
PUBLISHED_BATCH_SIZE = 65536
PUBLISHED_ROWS_MEAN = 4107470.0
PUBLISHED_ROWS_STD = 3134820.0
PUBLISHED_POOLING_MEAN = 15.8117
PUBLISHED_POOLING_STD = 25.5944
PUBLISHED_EMPTY_FRACTION = 0.042
PUBLISHED_BINS_MEAN = (
    0.2246, 0.1044, 0.1261, 0.1061, 0.0824, 0.0562, 0.0386, 0.0328, 0.0313,
    0.0271, 0.0266, 0.0215, 0.0189, 0.0147, 0.0063, 0.0076, 0.0327,
)
PUBLISHED_BINS_STD = (
    0.2265, 0.0695, 0.0916, 0.0756, 0.0589, 0.0514, 0.0484, 0.0568, 0.0673,
    0.0645, 0.0743, 0.069, 0.0696, 0.0809, 0.0429, 0.0509, 0.1228,
)
PUBLISHED_POOLED_UNIQUE_HIST = (
    0.473, 0.152, 0.139, 0.112, 0.072, 0.032, 0.011, 0.005, 0.002, 0.001,
    0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
)
"""locality_stats_2021.txt 'Histogram of col sizes': share of all distinct indices of the pool per access
bin."""
PUBLISHED_POOLED_LOOKUP_HIST = (
    0.069, 0.044, 0.068, 0.101, 0.121, 0.104, 0.073, 0.058, 0.052, 0.050,
    0.049, 0.048, 0.048, 0.043, 0.031, 0.023, 0.019,
)
"""locality_stats_2021.txt 'Ratio of index distribution': share of all lookups per access bin."""
PUBLISHED_UNIQUE_PER_LOOKUP = 128435723 / 887017990
"""locality_stats_2021.txt: distinct indices / lookups over the whole batch (1 / 'Avg col size' 6.9)."""

ALPHA_EDGES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 20.0)
"""Power-law exponent cells of the (alpha, vocab) density: cell i is [ALPHA_EDGES[i], ALPHA_EDGES[i+1])."""
VOCAB_EDGES = (-5.0, -4.0, -3.0, -2.0, -1.5, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0)
"""Cells of log10(vocab / (65536 * pooling)): a table's active vocabulary relative to its lookups in one
published batch (vocab is then capped at rows; so the top cells mean 'all rows')."""
CELL_WEIGHTS: tuple[tuple[int, int, float], ...] = (
    (0, 0, 0.0395), (0, 1, 0.0228), (0, 2, 0.0402), (0, 3, 0.0356), (0, 4, 0.0631), (1, 1, 0.0484),
    (1, 2, 0.0619), (1, 4, 0.0961), (1, 5, 0.3825), (1, 9, 0.1565), (2, 5, 0.0212), (2, 8, 0.0225),
    (7, 0, 0.0097),
)
"""(alpha cell, vocab cell, probability) of the piecewise-uniform density; fitted by
``density_fit.fit_cell_density()`` (defaults: 64 calibration tables, pooled_weight 0.3, std_weight 0). Cells
not listed have probability 0."""
