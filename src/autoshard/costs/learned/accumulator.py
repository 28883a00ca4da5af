"""``LearnedAccumulator``: the learned model's incremental API for planners
(``LearnedCostModel.accumulator``): devices filled shard by shard, every candidate of every episode priced
in one batched network call."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from autoshard.costs.learned.splits import shard_split_kinds
from autoshard.costs.learned.support import combine, empty_stats, shard_stats, shard_values
from autoshard.costs.step import VOLUMES, shard_volumes
from autoshard.shards import ShardRef
from autoshard.tasks import Task


class LearnedAccumulator:
    """A device's state is the sum of its shards' vectors (and of their traffic volumes, and its support
    statistics), so adding a shard is one addition and every candidate of every episode is priced in one
    batched network call. ``model``: the ``LearnedCostModel`` pricing the states."""

    def __init__(self, model: Any, task: Task, num_envs: int, risk: float = 0.0) -> None:
        self.model, self.task, self.risk = model, task, float(risk)
        self.enc = model.encode_task(task)
        self.acc = torch.zeros((num_envs, task.num_devices, self.enc.shape[-1]), dtype=self.enc.dtype)
        self.volumes = torch.zeros((num_envs, task.num_devices, len(VOLUMES)), dtype=torch.float64)
        self.stats = empty_stats((num_envs, task.num_devices)) if model.prices_fallback else None
        self.unverified_kinds = model.unverified_split_kinds
        """The split kinds the model has not seen on its machine; devices holding one are flagged."""
        self.unverified = (np.zeros((num_envs, task.num_devices), dtype=bool) if self.unverified_kinds
                           else None)

    def _vector(self, shard: ShardRef) -> torch.Tensor:
        if shard.is_whole and shard.dim == self.task.tables[shard.table].dim:
            return self.enc[shard.table]
        return self.model.encode_refs(self.task, [shard])[0]

    def _stats(self, shard: ShardRef) -> np.ndarray:
        return shard_stats(shard_values(self.task, [shard], self.model.support))[0]

    def _is_unverified(self, shard: ShardRef) -> bool:
        return any(k in self.unverified_kinds for k in shard_split_kinds(self.task, shard))

    def costs_if_added(self, shard: ShardRef) -> np.ndarray:
        volumes = self.volumes + torch.from_numpy(shard_volumes(self.task, [shard])[0])
        acc = self.acc + self._vector(shard)
        if self.model._plain and self.unverified is None:
            return self.model.costs_from_acc(self.task, acc, volumes).double().numpy()
        stats = None if self.stats is None else combine(self.stats, self._stats(shard))
        unverified = None if self.unverified is None else self.unverified | self._is_unverified(shard)
        pred = self.model._price(self.task, acc, volumes, stats, unverified)
        return pred.mean + self.risk * pred.std if self.risk else pred.mean

    def add(self, env: int, device: int, shard: ShardRef) -> None:
        self.acc[env, device] += self._vector(shard)
        self.volumes[env, device] += torch.from_numpy(shard_volumes(self.task, [shard])[0])
        if self.stats is not None:
            self.stats[env, device] = combine(self.stats[env, device], self._stats(shard))
        if self.unverified is not None and self._is_unverified(shard):
            self.unverified[env, device] = True
