"""Synthetic DLRM-like table pools whose statistics match the published dlrm_datasets trace statistics.

Every synthetic table carries a lookup distribution (``LookupSpec`` POWER_LAW: a power law of exponent
``alpha`` over the table's active vocabulary of ``vocab`` rows, scattered over all its rows by a seeded
bijection, and gamma-Poisson bag sizes; see ``tables.lookups``), so real index batches can be generated later,
deterministically. Its 17 access bins are COMPUTED from one generated batch of ``stats_batch_size`` samples
(``sample_lookups`` + the bin counting of ``access_bins``), never assumed.

How each quantity is drawn (``N`` tables; every draw is stratified, i.e. table ``i`` takes the quantile
``(perm_i + U_i) / N`` of the distribution and categorical draws are quotas, so that even a small pool covers
the distributions evenly; all seeded by ``seed``):

- rows: a gamma distribution with the published mean 4.107M and std 3.135M (feature_stats.json; the shape is
  not published: a gamma keeps the largest of 856 tables near 22M rows, a lognormal would reach ~30M).
- pooling factor: exactly ``round(0.042 N)`` tables get no lookups (pooling 0, the published estimate of the
  share of tables with no lookups); the others a lognormal whose mean and std make the whole pool's mean 15.81
  and std 25.59 (feature_stats.json).
- (alpha, vocab): a piecewise-uniform density over cells of alpha (``ALPHA_EDGES``) x log10(vocab / lookups
  in one batch of 65536) (``VOCAB_EDGES``; vocab capped at rows) with weights ``CELL_WEIGHTS`` (all three in
  ``tables.published``), fitted by ``tables.density_fit.fit_cell_density`` to the published per-table mean
  access bins, the pooled reuse histograms of locality_stats_2021.txt and its distinct/lookups ratio. A power
  law over all rows alone cannot match them (its long tail of rows seen once keeps the pooled (0,1] share near
  0.73, published 0.473); a bounded active vocabulary can. Drawn independently of rows and pooling (their
  correlation is unpublished).
- pooling_cv (bag-size variation): a constant ``DEFAULT_POOLING_CV``; it does not change the access bins (the
  indices of a batch are i.i.d. whatever the bag sizes) and no statistic of it is published.
- dims: one value for all tables (DreamShard: 16) or a seeded uniform choice per table among several
  (NeuroShard: 4..128; AutoShard: 16, 32). The dim is the last draw, so it changes no other feature.

What matches (measured; each pool records its own numbers in ``source["stats"]``, see ``tables.pool_stats``):
856 tables, seed 0, bins at batch 65536 (``synthesize_pool(856, 0)``), against the published values:
rows mean 4.105M (4.107M), std 3.12M (3.13M); pooling mean 15.67 (15.81), std 23.3 (25.6); no lookups 4.2%
(4.2%); every pool-mean access bin within 0.006 of the published mean (bin 0: 0.229 vs 0.2246); pooled
distinct-index histogram within 0.04 per bin ((0,1]: 0.434 vs 0.473, (1,2]: 0.168 vs 0.152, (2,4]: 0.167 vs
0.139); pooled lookup histogram within 0.07 per bin (>32768: 0.085 vs 0.019, others within 0.02); distinct
indices per lookup 0.141 (0.145).
Enforced by tests/test_synth.py: rows mean within 3%, pooling mean within 5%, empty share within 0.002 (856
tables); for a 40-table pool at batch 65536 (seconds to make), every mean bin within 0.05 and every pooled
distinct-index bin within 0.13 (seeds 0-5 measured: worst 0.038 and 0.12; small
pools are dominated by their few largest tables). Not fitted: the per-table std of the bins, which comes out
larger than published (tables of this family concentrate their reuse in fewer bins), e.g. bin 0 std 0.29 vs
0.23 and bins 3-10 about 0.12 vs 0.05-0.08 (856 tables).

Stats batch size: the published bins are for batch 65536, so that is the default; the 856-table pool then
draws ~880M indices (64 s of CPU on one core of this machine, 0.7 GB peak memory; about 4 minutes of
wall time with the CPU shared). A smaller ``stats_batch_size`` is faster but moves mass to the low bins
(each index is seen fewer times: at batch 8192, 7.5 s of CPU, the mean (0,1] bin is 0.477 instead
of 0.229), so its bins are NOT comparable with the published ones
or with trace-derived tables at batch 65536; it is recorded in ``source`` so such pools are told apart.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from autoshard.errors import AutoshardError
from autoshard.io import atomic_write_bytes
from autoshard.tables.lookups import reuse_histograms, sample_lookups
from autoshard.tables.pool_stats import pool_stats
from autoshard.tables.published import (
    ALPHA_EDGES,
    CELL_WEIGHTS,
    PUBLISHED_BATCH_SIZE,
    PUBLISHED_EMPTY_FRACTION,
    PUBLISHED_POOLING_MEAN,
    PUBLISHED_POOLING_STD,
    PUBLISHED_ROWS_MEAN,
    PUBLISHED_ROWS_STD,
    VOCAB_EDGES,
)
from autoshard.tables.table import NUM_ACCESS_BINS, LookupKind, LookupSpec, Table, TablePool

logger = logging.getLogger(__name__)

GENERATOR = "autoshard.synth"
GENERATOR_VERSION = 1
"""Bumped whenever the same seed would give different tables."""

STATS_BATCH_SIZE = PUBLISHED_BATCH_SIZE
"""Default batch at which access bins are computed: the published one, so bins are comparable."""
STATS_SEED = 0
"""``sample_lookups`` seed of the batch the bins are computed from."""
DEFAULT_POOLING_CV = 1.0
"""Bag-size coefficient of variation of synthetic tables (not published; it does not affect the bins)."""


@dataclass(frozen=True)
class SynthConfig:
    """Settings of one synthetic pool (all recorded in ``TablePool.source``)."""

    num_tables: int
    """Number of tables in the pool."""
    seed: int = 0
    """Seeds every draw; the same config gives the same pool."""
    dims: tuple[int, ...] = (16,)
    """Embedding dims: one value for all tables, or a seeded uniform choice per table among several."""
    stats_batch_size: int = STATS_BATCH_SIZE
    """Batch (samples) of generated lookups the access bins are computed from."""
    rows_mean: float = PUBLISHED_ROWS_MEAN
    """Target mean of rows (gamma distribution)."""
    rows_std: float = PUBLISHED_ROWS_STD
    """Target std of rows."""
    pooling_mean: float = PUBLISHED_POOLING_MEAN
    """Target pool mean of the pooling factor (tables with no lookups included)."""
    pooling_std: float = PUBLISHED_POOLING_STD
    """Target pool std of the pooling factor (tables with no lookups included)."""
    empty_fraction: float = PUBLISHED_EMPTY_FRACTION
    """Share of tables with no lookups (pooling 0)."""
    pooling_cv: float = DEFAULT_POOLING_CV
    """Bag-size coefficient of variation of every table."""
    alpha_edges: tuple[float, ...] = ALPHA_EDGES
    """Alpha cells of the (alpha, vocab) density."""
    vocab_edges: tuple[float, ...] = VOCAB_EDGES
    """log10(vocab / (65536 * pooling)) cells of the (alpha, vocab) density."""
    cell_weights: tuple[tuple[int, int, float], ...] = CELL_WEIGHTS
    """(alpha cell, vocab cell, probability) triples; cells not listed have probability 0."""

    def check(self) -> None:
        if self.num_tables <= 0:
            raise AutoshardError(f"number of tables {self.num_tables} must be positive")
        if not self.dims or any(int(d) <= 0 for d in self.dims):
            raise AutoshardError(f"dims {list(self.dims)} must be one or more positive integers")
        if self.stats_batch_size <= 0:
            raise AutoshardError(f"stats batch size {self.stats_batch_size} must be positive")
        if self.rows_mean <= 0 or self.rows_std <= 0 or self.pooling_mean <= 0 or self.pooling_std <= 0:
            raise AutoshardError("rows and pooling means and stds must be positive")
        if not 0.0 <= self.empty_fraction < 1.0:
            raise AutoshardError(f"empty fraction {self.empty_fraction} must be in [0, 1)")
        na, nv = len(self.alpha_edges) - 1, len(self.vocab_edges) - 1
        if not self.cell_weights or any(not (0 <= i < na and 0 <= j < nv and w >= 0)
                                        for i, j, w in self.cell_weights) \
                or sum(w for _, _, w in self.cell_weights) <= 0:
            raise AutoshardError("the (alpha, vocab) density needs non-negative weights of existing cells, "
                                 "not all 0")


def _stratified(rng: np.random.Generator, n: int) -> np.ndarray:
    """``n`` uniforms, one in each of the strata [k/n, (k+1)/n), in random order (Latin hypercube in 1-D)."""
    return (rng.permutation(n) + rng.random(n)) / n


def _quota(rng: np.random.Generator, weights: Sequence[float], n: int) -> np.ndarray:
    """``n`` category labels with counts n * w (largest remainder), shuffled: the stratified categorical
    draw."""
    w = np.asarray(weights, dtype=np.float64)
    w = w / w.sum()
    exact = w * n
    counts = np.floor(exact).astype(np.int64)
    rest = n - int(counts.sum())
    if rest:
        # ties broken at random so that no cell is favoured by its position
        order = np.lexsort((rng.random(len(w)), -(exact - counts)))
        counts[order[:rest]] += 1
    return rng.permutation(np.repeat(np.arange(len(w)), counts))


def _lognormal_params(mean: float, std: float) -> tuple[float, float]:
    sigma2 = math.log1p((std / mean) ** 2)
    return math.log(mean) - sigma2 / 2.0, math.sqrt(sigma2)


def _nonempty_pooling_moments(cfg: SynthConfig) -> tuple[float, float]:
    """Mean and std of the pooling of tables with lookups so that the whole pool has the target moments."""
    keep = 1.0 - cfg.empty_fraction
    mean = cfg.pooling_mean / keep
    second = (cfg.pooling_std ** 2 + cfg.pooling_mean ** 2) / keep
    var = second - mean ** 2
    if var <= 0:
        raise AutoshardError("pooling std too small for the empty fraction; "
                             "lower empty_fraction or raise pooling_std")
    return mean, math.sqrt(var)


def draw_features(cfg: SynthConfig) -> dict[str, np.ndarray]:
    """Per-table rows, pooling factor, alpha, vocab, dim and lookup seed (no bins yet), deterministic per
    ``cfg``."""
    from scipy import stats

    cfg.check()
    n = cfg.num_tables
    rng = np.random.default_rng([cfg.seed, GENERATOR_VERSION])
    shape = (cfg.rows_mean / cfg.rows_std) ** 2
    rows = stats.gamma.ppf(_stratified(rng, n), shape, scale=cfg.rows_std ** 2 / cfg.rows_mean)
    rows = np.maximum(1, np.rint(rows)).astype(np.int64)

    num_empty = round(cfg.empty_fraction * n)
    empty = np.zeros(n, dtype=bool)
    empty[rng.permutation(n)[:num_empty]] = True
    mu, sigma = _lognormal_params(*_nonempty_pooling_moments(cfg))
    pooling = np.zeros(n, dtype=np.float64)
    pooling[~empty] = stats.lognorm.ppf(_stratified(rng, n - num_empty), sigma, scale=math.exp(mu))

    a_edges = np.asarray(cfg.alpha_edges, dtype=np.float64)
    v_edges = np.asarray(cfg.vocab_edges, dtype=np.float64)
    cells = np.array([(i, j) for i, j, _ in cfg.cell_weights], dtype=np.int64)
    pick = cells[_quota(rng, [w for _, _, w in cfg.cell_weights], n)]
    ai, vi = pick[:, 0], pick[:, 1]
    alpha = a_edges[ai] + rng.random(n) * (a_edges[ai + 1] - a_edges[ai])
    log_ratio = v_edges[vi] + rng.random(n) * (v_edges[vi + 1] - v_edges[vi])
    vocab = np.clip(np.rint(PUBLISHED_BATCH_SIZE * pooling * 10.0**log_ratio), 1, rows).astype(np.int64)

    lookup_seed = rng.integers(0, 2**31 - 1, size=n)
    dims = np.asarray(cfg.dims, dtype=np.int64)
    # last draw, so the dims chosen never change any other feature of a table
    dim = np.full(n, dims[0]) if len(dims) == 1 else rng.choice(dims, size=n)
    return {"rows": rows, "pooling": np.round(pooling, 4), "alpha": np.round(alpha, 4), "vocab": vocab,
            "dim": dim, "lookup_seed": lookup_seed, "empty": empty}


def synthesize_pool(
    num_tables: int,
    seed: int = 0,
    dims: Sequence[int] = (16,),
    stats_batch_size: int = STATS_BATCH_SIZE,
    progress: Callable[[int], None] | None = None,
    checkpoint: str | None = None,
    **overrides: Any,
) -> TablePool:
    """A pool of ``num_tables`` DLRM-like tables; bins computed from generated lookups at
    ``stats_batch_size``.

    ``overrides`` set other ``SynthConfig`` fields. ``progress(k)`` is called after each table with the number
    done (the CLI shows a bar with it). With ``checkpoint`` (a path), every finished table is appended to that
    JSON-lines file and a later call with the same settings reuses them, so an interrupted run resumes; the
    caller deletes the file once the pool is saved.
    """
    cfg = SynthConfig(num_tables=int(num_tables), seed=int(seed), dims=tuple(int(d) for d in dims),
                      stats_batch_size=int(stats_batch_size), **overrides)
    f = draw_features(cfg)
    config_json = {k: _jsonable(v) for k, v in cfg.__dict__.items()}
    done = _read_checkpoint(checkpoint, config_json) if checkpoint else {}
    log = _open_checkpoint(checkpoint, config_json, done) if checkpoint else None
    name_width = len(str(num_tables - 1))
    tables = []
    unique_hist = np.zeros(NUM_ACCESS_BINS, dtype=np.int64)
    lookup_hist = np.zeros(NUM_ACCESS_BINS, dtype=np.int64)
    try:
        for i in range(cfg.num_tables):
            if i in done:
                table, unique, looked = done[i]
            else:
                table, unique, looked = _make_table(cfg, f, i, f"synth{cfg.seed}_{i:0{name_width}d}")
                if log is not None:
                    log.write(json.dumps({"i": i, "table": table.to_json(), "unique": unique.tolist(),
                                          "lookups": looked.tolist()}) + "\n")
                    log.flush()
            unique_hist += unique
            lookup_hist += looked
            tables.append(table)
            if progress is not None:
                progress(i + 1)
    finally:
        if log is not None:
            log.close()
    source = {
        "generator": GENERATOR,
        "generator_version": GENERATOR_VERSION,
        "config": config_json,
        "stats_seed": STATS_SEED,
        "targets": ("shared/data/dlrm_datasets/feature_stats.json, "
                    "locality_stats_2021.txt (2021 trace, batch 65536)"),
        "empty_tables": [t.name for t, e in zip(tables, f["empty"]) if e],
        "stats": pool_stats(tables, unique_hist, lookup_hist),
    }
    return TablePool.from_tables(tables, source)


def _make_table(cfg: SynthConfig, f: dict[str, np.ndarray], i: int, name: str
                ) -> tuple[Table, np.ndarray, np.ndarray]:
    """Table ``i`` with its bins computed from one generated batch; and its reuse histograms (counts)."""
    table = Table(
        name=name,
        dim=int(f["dim"][i]),
        rows=int(f["rows"][i]),
        pooling_factor=float(f["pooling"][i]),
        lookups=LookupSpec(LookupKind.POWER_LAW, seed=int(f["lookup_seed"][i]), alpha=float(f["alpha"][i]),
                           pooling_cv=cfg.pooling_cv, vocab=int(f["vocab"][i])),
    )
    lk = sample_lookups(table, cfg.stats_batch_size, seed=STATS_SEED)
    unique, looked = reuse_histograms(lk.indices)
    total = int(unique.sum())
    bins = tuple(float(x) for x in unique / total) if total else (0.0,) * NUM_ACCESS_BINS
    return replace(table, access_bins=bins), unique, looked


def _read_checkpoint(path: str, config: dict[str, Any]) -> dict[int, tuple[Table, np.ndarray, np.ndarray]]:
    """Tables finished by an earlier run with the same settings (a torn last line is ignored)."""
    p = Path(path)
    if not p.is_file():
        return {}
    lines = p.read_text().splitlines()
    try:
        head = json.loads(lines[0]) if lines else None
    except json.JSONDecodeError:
        head = None
    if head != {"checkpoint": GENERATOR, "version": GENERATOR_VERSION, "config": config}:
        logger.info("ignoring checkpoint %s: made with other settings", path)
        return {}
    done = {}
    for line in lines[1:]:
        try:
            d = json.loads(line)
            done[int(d["i"])] = (Table.from_json(d["table"]), np.asarray(d["unique"], dtype=np.int64),
                                 np.asarray(d["lookups"], dtype=np.int64))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError, AutoshardError):
            break  # interrupted mid-write
    logger.info("resuming from %s: %d tables already done", path, len(done))
    return done


def _open_checkpoint(path: str, config: dict[str, Any], done: dict[int, tuple[Table, np.ndarray, np.ndarray]]
                     ) -> TextIO:
    """Rewrite the checkpoint with its header and the reusable tables, then keep it open for appending."""
    head = {"checkpoint": GENERATOR, "version": GENERATOR_VERSION, "config": config}
    lines = [json.dumps(head)] + [
        json.dumps({"i": i, "table": t.to_json(), "unique": u.tolist(), "lookups": lk.tolist()})
        for i, (t, u, lk) in sorted(done.items())
    ]
    atomic_write_bytes(path, ("\n".join(lines) + "\n").encode())
    return open(path, "a")


def _jsonable(v: Any) -> Any:
    return [_jsonable(x) for x in v] if isinstance(v, (tuple, list)) else v
