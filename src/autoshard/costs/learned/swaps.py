"""``PlanSwaps``: the learned model's price of plans that differ from one plan in a single table's placement
(``LearnedCostModel.placement_swaps``), for the sharding moves (``planners.sharding_moves``), which try the
hottest tables as replicas and as row-wise shards one at a time.

Why: pricing each candidate as a whole plan re-derives every device's state from its shards, in Python over
every shard (rl on 856 tables x 128 devices: 12 candidates of one to three tables spread over all 128 ranks,
each priced from its 1,100-1,240 shards, took most of the planner's sharding moves; docs/benchmarks.md,
"Stop 50"). Here the plan's device states are derived once; a candidate re-derives only the devices the
table leaves (from their remaining shards) and adds the new shards to the devices they join. The sums run in
another order than a whole plan's pricing, so the prices agree to float32 rounding, not bit for bit.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from autoshard.costs.learned.support import SUM_STATS
from autoshard.costs.step import step_cost
from autoshard.plan import Plan, TablePlacement
from autoshard.shards import ShardRef
from autoshard.tasks import Task


@dataclass(frozen=True)
class DeviceStates:
    """What the learned model prices devices from (``LearnedCostModel.device_states``)."""

    acc: torch.Tensor
    """(D, A) additive states: the sums of the devices' shard vectors."""
    volumes: np.ndarray
    """(D, len(VOLUMES)) traffic volumes (``costs.step``)."""
    stats: np.ndarray | None
    """(D, len(STATS)) support statistics (None: the model prices no fallback)."""
    unverified: np.ndarray | None
    """(D,) whether a device holds a split shard of a kind the model has not seen on its machine (None: the
    model has no such kind)."""


class PlanSwaps:
    """``plan``'s device states under ``model`` (a ``LearnedCostModel``), priced at mean + ``risk`` x spread;
    ``step_ms(placement)`` is the model's step of the plan with that table's placement replaced."""

    def __init__(self, model: Any, task: Task, plan: Plan, risk: float = 0.0) -> None:
        self.model, self.task, self.risk = model, task, float(risk)
        self.index = {t.name: i for i, t in enumerate(task.tables)}
        self.devices = plan.device_shards(task)
        self.states: DeviceStates = model.device_states(task, self.devices)

    def device_costs(self, placement: TablePlacement) -> np.ndarray:
        """(D, 3) fwd, bwd, comm ms of the plan's devices with ``placement`` in place of its table's."""
        return self._priced(placement)[0]

    def step_ms(self, placement: TablePlacement) -> float:
        """The model's step (ms) of the plan with ``placement`` in place of its table's."""
        costs, states = self._priced(placement)
        return float(step_cost(self.task, self.model.comm, costs[:, 0], costs[:, 1], states.volumes).total_ms)

    def _priced(self, placement: TablePlacement) -> tuple[np.ndarray, DeviceStates]:
        states = self._swapped(placement)[1]
        return self.model.state_costs(self.task, states, self.risk), states

    def _swapped(self, placement: TablePlacement) -> tuple[list[list[ShardRef]], DeviceStates]:
        """The device shard lists and states with ``placement`` in place of its table's."""
        task, model, old = self.task, self.model, self.states
        table = self.index[placement.table]
        replica = placement.sharding_type.replicates
        added = [(s.rank, s.ref(table, replica)) for s in placement.shards]
        # the devices the table leaves, with their remaining shards
        remaining = {d: [s for s in dev if s.table != table] for d, dev in enumerate(self.devices)
                     if any(s.table == table for s in dev)}
        devices = list(self.devices)
        for d, shards in remaining.items():
            devices[d] = shards
        for d, ref in added:
            devices[d] = [*devices[d], ref]
        acc, volumes = old.acc.clone(), old.volumes.copy()
        stats = None if old.stats is None else old.stats.copy()
        unverified = None if old.unverified is None else old.unverified.copy()
        # those devices are re-derived from their remaining shards (a minimum or maximum cannot be taken
        # back); the new shards join below, there too
        if remaining:
            left = list(remaining)
            rest = model.device_states(task, list(remaining.values()))
            acc[left] = rest.acc
            volumes[left] = rest.volumes
            if stats is not None and rest.stats is not None:
                stats[left] = rest.stats
            if unverified is not None and rest.unverified is not None:
                unverified[left] = rest.unverified
        ranks = np.array([d for d, _ in added], dtype=np.int64)
        new = model.device_states(task, [[ref] for _, ref in added])  # each new shard as a device alone
        acc.index_add_(0, torch.from_numpy(ranks), new.acc)
        np.add.at(volumes, ranks, new.volumes)
        if stats is not None and new.stats is not None:
            np.add.at(stats[:, :SUM_STATS], ranks, new.stats[:, :SUM_STATS])
            np.minimum.at(stats[:, SUM_STATS::2], ranks, new.stats[:, SUM_STATS::2])
            np.maximum.at(stats[:, SUM_STATS + 1::2], ranks, new.stats[:, SUM_STATS + 1::2])
        if unverified is not None and new.unverified is not None:
            np.logical_or.at(unverified, ranks, new.unverified)
        return devices, DeviceStates(acc, volumes, stats, unverified)

    def swapped(self, placement: TablePlacement) -> PlanSwaps:
        """These states with ``placement`` in place of its table's (a kept move); ``self`` is unchanged."""
        out = copy.copy(self)
        out.devices, out.states = self._swapped(placement)
        return out
