"""Read a user's TorchRec model into autoshard tables: point autoshard at the model instead of a tables file.

From an ``EmbeddingBagCollection`` (or its ``EmbeddingBagConfig`` list) and a few sample input batches
(``KeyedJaggedTensor``) it takes, per table:

- ``dim``, ``rows`` from the config;
- ``pooling_factor``: mean bag length per sample over the batches, summed over the table's features (a table
  shared by several features does that many lookups per sample; autoshard models one bag per table, so the
  pooled output of a multi-feature table, ``dim x features`` wide, is counted as ``dim`` in communication);
- ``access_bins``: ``autoshard.tables.lookups.access_bins`` of each batch's indices of the table (all its
  features), averaged over the batches;
- ``lookups``: a POWER_LAW spec fitted to the batches (``fit_alpha``: log-log slope of index frequency vs
  rank; ``pooling_cv``: std / mean of bag lengths), so generated batches for timing and verification resemble
  the real ones. It is an approximation of the real stream, recorded as such in the pool's ``source``.

Without batches, pooling factors come from ``pooling_factors`` (name -> value) or default to 1.0 and the
access bins to "every index once".
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from autoshard.errors import AutoshardError
from autoshard.tables.lookups import access_bins
from autoshard.tables.table import LookupKind, LookupSpec, Table, TablePool

logger = logging.getLogger(__name__)

DEFAULT_POOLING_FACTOR = 1.0
"""Pooling factor of a table with no sample batches and no given value (one lookup per sample)."""

ALPHA_RANGE = (0.0, 3.0)
"""Clamp of the fitted power-law exponent; sample_lookups treats ~0 as uniform, >3 is all on a few rows."""

MIN_FIT_POINTS = 3
"""Fewest distinct indices seen twice or more needed to fit alpha; fewer means near-uniform access (alpha
0)."""


def fit_alpha(indices: np.ndarray) -> float:
    """Power-law exponent of index frequency vs frequency rank (least squares in log-log over indices seen >=
    2 times: singletons are where a finite sample truncates the tail)."""
    if len(indices) == 0:
        return 0.0
    _, counts = np.unique(indices, return_counts=True)
    counts = np.sort(counts)[::-1]
    ranks = np.arange(1, len(counts) + 1)
    keep = counts >= 2
    if keep.sum() < MIN_FIT_POINTS:
        return 0.0
    slope = np.polyfit(np.log(ranks[keep]), np.log(counts[keep]), 1)[0]
    return float(np.clip(-slope, *ALPHA_RANGE))


def _configs(model: Any) -> list:
    from torchrec.modules.embedding_configs import EmbeddingBagConfig
    from torchrec.modules.embedding_modules import EmbeddingBagCollection

    if isinstance(model, EmbeddingBagCollection):
        return list(model.embedding_bag_configs())
    configs = list(model)
    if not configs or not all(isinstance(c, EmbeddingBagConfig) for c in configs):
        raise AutoshardError("give an EmbeddingBagCollection or a non-empty list of EmbeddingBagConfig")
    return configs


def tables_from_model(
    model: Any,
    batches: Sequence[Any] = (),
    pooling_factors: Mapping[str, float] | None = None,
    seed: int = 0,
) -> list[Table]:
    """autoshard tables for the EmbeddingBagCollection (or config list) ``model``; see the module
    docstring."""
    configs = _configs(model)
    given = dict(pooling_factors or {})
    batch_list = list(batches)
    for b in batch_list:
        # .keys(): a KeyedJaggedTensor has no __contains__, so `f in b` would index it by position
        missing = [f for c in configs for f in c.feature_names if f not in b.keys()]  # noqa: SIM118
        if missing:
            raise AutoshardError(f"a sample batch lacks feature {missing[0]!r} of the model; pass the "
                                 "model's input batches (KeyedJaggedTensor with all its features)")
    tables = []
    for i, c in enumerate(configs):
        if not batch_list:
            tables.append(Table(c.name, int(c.embedding_dim), int(c.num_embeddings),
                                float(given.get(c.name, DEFAULT_POOLING_FACTOR))))
            continue
        pooling, bins, all_idx, all_len = 0.0, [], [], []
        for b in batch_list:
            jt = b.to_dict()
            idx = np.concatenate([jt[f].values().cpu().numpy().astype(np.int64) for f in c.feature_names])
            lengths = [jt[f].lengths().cpu().numpy() for f in c.feature_names]
            pooling += sum(float(ln.mean()) if len(ln) else 0.0 for ln in lengths) / len(batch_list)
            if idx.size and (idx.min() < 0 or idx.max() >= c.num_embeddings):
                raise AutoshardError(f"table {c.name}: sample indices outside 0..{c.num_embeddings - 1}; "
                                     "pass batches of this model")
            bins.append(access_bins(idx))
            all_idx.append(idx)
            all_len.extend(lengths)
        lens = np.concatenate(all_len).astype(np.float64)
        cv = float(lens.std() / lens.mean()) if lens.size and lens.mean() > 0 else 0.0
        spec = LookupSpec(LookupKind.POWER_LAW, seed=seed + i,
                          alpha=fit_alpha(np.concatenate(all_idx)), pooling_cv=cv)
        tables.append(Table(c.name, int(c.embedding_dim), int(c.num_embeddings), pooling,
                            tuple(float(x) for x in np.mean(bins, axis=0)), spec))
    return tables


def pool_from_model(
    model: Any,
    batches: Sequence[Any] = (),
    pooling_factors: Mapping[str, float] | None = None,
    seed: int = 0,
) -> TablePool:
    """``tables_from_model`` as a TablePool whose ``source`` records where the tables came from."""
    tables = tables_from_model(model, batches, pooling_factors, seed)
    return TablePool.from_tables(tables, {
        "generator": "autoshard.torchrec.model_import",
        "sample_batches": len(list(batches)),
        "lookups": "power_law fitted to the sample batches (approximate)" if batches else "none",
    })
