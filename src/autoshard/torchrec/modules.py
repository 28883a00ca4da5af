"""TorchRec modules and inputs built from a task: an EmbeddingBagCollection of its tables, and
KeyedJaggedTensors of their generated lookups.

Every table becomes one ``EmbeddingBagConfig`` whose single feature has the table's name, so output keys, plan
keys and table names are the same string.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from autoshard.tables.lookup_batch import Lookups
from autoshard.tables.lookups import sample_lookups
from autoshard.tasks import Task


def ebc_configs(task: Task, rows_cap: int | None = None) -> list:
    """One ``EmbeddingBagConfig`` per table (sum pooling, fp32), rows capped by ``rows_cap``."""
    from torchrec.modules.embedding_configs import EmbeddingBagConfig, PoolingType

    return [
        EmbeddingBagConfig(
            name=t.name,
            feature_names=[t.name],
            embedding_dim=t.dim,
            num_embeddings=min(t.rows, rows_cap) if rows_cap else t.rows,
            pooling=PoolingType.SUM,
        )
        for t in task.tables
    ]


def build_ebc(task: Task, rows_cap: int | None = None, device: str = "meta"):
    """An EmbeddingBagCollection of the task's tables (on ``meta`` by default: nothing allocated)."""
    import torch
    from torchrec.modules.embedding_modules import EmbeddingBagCollection

    return EmbeddingBagCollection(tables=ebc_configs(task, rows_cap), device=torch.device(device))


def sample_batch(task: Task, batch_size: int, seed: int, rows_cap: int | None = None) -> list[Lookups]:
    """One batch of generated lookups per table (``sample_lookups``; indices folded mod ``rows_cap``)."""
    return [sample_lookups(t, batch_size, seed=seed, rows=rows_cap) for t in task.tables]


def make_kjt(task: Task, batch: Sequence[Lookups], start: int = 0, stop: int | None = None):
    """A KeyedJaggedTensor of bags ``start:stop`` of every table's lookups (keys = table names, task
    order)."""
    import torch
    from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

    values, lengths = [], []
    for lk in batch:
        end = lk.batch_size if stop is None else stop
        values.append(lk.indices[lk.offsets[start]:lk.offsets[end]])
        lengths.append(np.diff(lk.offsets[start:end + 1]))
    return KeyedJaggedTensor.from_lengths_sync(
        keys=[t.name for t in task.tables],
        values=torch.from_numpy(np.concatenate(values).astype(np.int64)),
        lengths=torch.from_numpy(np.concatenate(lengths).astype(np.int32)),
    )
