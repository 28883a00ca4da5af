"""Tables read from a TorchRec EmbeddingBagCollection and sample KeyedJaggedTensor batches."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torchrec  # noqa: F401  (a core dependency: a broken install must fail, not skip)
from conftest import make_tables

from autoshard.errors import AutoshardError
from autoshard.tables.lookups import access_bins, sample_lookups
from autoshard.torchrec.model_import import fit_alpha, pool_from_model, tables_from_model


def _model():
    from torchrec.modules.embedding_configs import EmbeddingBagConfig
    from torchrec.modules.embedding_modules import EmbeddingBagCollection

    return EmbeddingBagCollection(tables=[
        EmbeddingBagConfig(name="user", feature_names=["user_id"], embedding_dim=16, num_embeddings=1000),
        EmbeddingBagConfig(name="item", feature_names=["item_a", "item_b"], embedding_dim=32,
                           num_embeddings=50),
    ], device=torch.device("meta"))


def _kjt(lengths: dict[str, list[int]], rng: np.random.Generator, rows: dict[str, int]):
    from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

    keys = list(lengths)
    values = [rng.integers(0, rows[k], sum(lengths[k])) for k in keys]
    return KeyedJaggedTensor.from_lengths_sync(
        keys=keys, values=torch.from_numpy(np.concatenate(values)),
        lengths=torch.tensor([x for k in keys for x in lengths[k]], dtype=torch.int32)), values


def test_dims_rows_pooling_and_bins_from_batches():
    rng = np.random.default_rng(0)
    rows = {"user_id": 1000, "item_a": 50, "item_b": 50}
    b1, v1 = _kjt({"user_id": [1, 2, 3, 2], "item_a": [4, 0, 4, 4], "item_b": [1, 1, 1, 1]}, rng, rows)
    b2, v2 = _kjt({"user_id": [2, 2, 2, 2], "item_a": [2, 2, 2, 2], "item_b": [3, 3, 3, 3]}, rng, rows)
    tables = {t.name: t for t in tables_from_model(_model(), [b1, b2])}
    assert (tables["user"].dim, tables["user"].rows) == (16, 1000)
    assert (tables["item"].dim, tables["item"].rows) == (32, 50)
    assert tables["user"].pooling_factor == pytest.approx((8 / 4 + 8 / 4) / 2)
    # two features share "item": lookups per sample add up (3 + 1 in batch 1, 2 + 3 in batch 2)
    assert tables["item"].pooling_factor == pytest.approx((3 + 1 + 2 + 3) / 2)
    want = np.mean([access_bins(v1[0]), access_bins(v2[0])], axis=0)
    assert tables["user"].access_bins == pytest.approx(tuple(want))
    # generated lookups of an imported table respect its rows
    lk = sample_lookups(tables["item"], 64, seed=1)
    assert lk.indices.max() < 50 and lk.batch_size == 64


def test_without_batches_uses_given_pooling_and_config_list():
    model = _model()
    tables = tables_from_model(list(model.embedding_bag_configs()), pooling_factors={"user": 7.5})
    assert [t.pooling_factor for t in tables] == [7.5, 1.0]
    assert tables[0].lookups is None
    pool = pool_from_model(model)
    assert [t.name for t in pool.tables] == ["user", "item"]


def test_bad_batches_are_one_line_errors():
    rng = np.random.default_rng(1)
    only_user, _ = _kjt({"user_id": [1, 1]}, rng, {"user_id": 1000})
    with pytest.raises(AutoshardError, match="lacks feature 'item_a'"):
        tables_from_model(_model(), [only_user])
    from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

    too_big = KeyedJaggedTensor.from_lengths_sync(keys=["user_id", "item_a", "item_b"],
                                                  values=torch.tensor([1500, 3, 4]),
                                                  lengths=torch.tensor([1, 1, 1], dtype=torch.int32))
    with pytest.raises(AutoshardError, match="outside 0..999"):
        tables_from_model(_model(), [too_big])
    with pytest.raises(AutoshardError, match="EmbeddingBagCollection"):
        tables_from_model([1, 2])


def test_fitted_alpha_orders_skew():
    base = make_tables(1, seed=5)[0]
    flat = sample_lookups(base.__class__(base.name, base.dim, 10**6, 20.0, lookups=base.lookups.__class__(
        base.lookups.kind, seed=1, alpha=0.3)), 2048).indices
    steep = sample_lookups(base.__class__(base.name, base.dim, 10**6, 20.0, lookups=base.lookups.__class__(
        base.lookups.kind, seed=1, alpha=1.4)), 2048).indices
    assert fit_alpha(steep) > fit_alpha(flat) >= 0.0
    assert fit_alpha(np.arange(100)) == 0.0
