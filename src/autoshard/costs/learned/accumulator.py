"""``LearnedAccumulator``: the learned model's incremental API for planners
(``LearnedCostModel.accumulator``): devices filled shard by shard, every candidate of every episode priced
in one batched network call."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import torch

from autoshard.costs.learned.splits import shard_split_kinds
from autoshard.costs.learned.support import combine, empty_stats, shard_stats, shard_values
from autoshard.costs.step import VOLUMES, shard_volumes
from autoshard.shards import ShardRef
from autoshard.tasks import Task


class _ShardParts(NamedTuple):
    """What adding one shard adds to a device's state (``LearnedAccumulator._parts``)."""

    vector: torch.Tensor
    volumes: torch.Tensor
    stats: np.ndarray | None
    unverified: bool


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
        self._cache: dict[ShardRef, _ShardParts] = {}
        self._whole_volumes = model.task_volumes(task)  # every table's at its full dim, in one call

    def _parts(self, shard: ShardRef) -> _ShardParts:
        """The shard's additive vector, traffic volumes, support statistics and unverified flag, computed
        once per shard: a planner's step prices a shard on every device (``costs_if_added``) and then adds
        it to one (``add``). Whole tables at their full dim come from the task's batched encodings."""
        parts = self._cache.get(shard)
        if parts is None:
            task, model = self.task, self.model
            whole = shard.is_whole and shard.dim == task.tables[shard.table].dim
            vector = self.enc[shard.table] if whole else model.encode_refs(task, [shard])[0]
            volumes = (self._whole_volumes[shard.table] if whole
                       else torch.from_numpy(shard_volumes(task, [shard])[0]))
            stats = None
            if self.stats is not None:
                stats = (model._table_stats(task)[shard.table] if whole
                         else shard_stats(shard_values(task, [shard], model.support))[0])
            unverified = any(k in self.unverified_kinds for k in shard_split_kinds(task, shard))
            parts = self._cache[shard] = _ShardParts(vector, volumes, stats, unverified)
        return parts

    def costs_if_added(self, shard: ShardRef) -> np.ndarray:
        parts = self._parts(shard)
        volumes = self.volumes + parts.volumes
        acc = self.acc + parts.vector
        if self.model._plain and self.unverified is None:
            return self.model.costs_from_acc(self.task, acc, volumes).double().numpy()
        stats = None if self.stats is None else combine(self.stats, parts.stats)
        unverified = None if self.unverified is None else self.unverified | parts.unverified
        pred = self.model._price(self.task, acc, volumes, stats, unverified)
        return pred.mean + self.risk * pred.std if self.risk else pred.mean

    def add(self, env: int, device: int, shard: ShardRef) -> None:
        parts = self._parts(shard)
        self.acc[env, device] += parts.vector
        self.volumes[env, device] += parts.volumes
        if self.stats is not None:
            self.stats[env, device] = combine(self.stats[env, device], parts.stats)
        if self.unverified is not None and parts.unverified:
            self.unverified[env, device] = True
