"""Pricing candidate devices and plans with a cost model, shared by the search planners (neuroshard, search,
ilp): each shard's marginal cost, a device's fixed overhead, and batched plan costs that price every distinct
device content once."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from autoshard.costs.base import CostModel
from autoshard.costs.step import VOLUMES, device_volumes, step_cost
from autoshard.planners.column_split import Layout, device_contents
from autoshard.shards import ShardRef
from autoshard.tasks import Task

OVERHEAD_PAIRS = 16
"""Table pairs priced together to estimate a device's fixed cost (the median over the pairs is used)."""


def device_overhead_ms(task: Task, model: CostModel) -> float:
    """The fixed part of a device's predicted cost (kernel launches, all-to-all latency): what two tables save
    by sharing a device, cost(a) + cost(b) - cost(a and b), the median over a few pairs; 0 for one table."""
    n = min(task.num_tables - 1, OVERHEAD_PAIRS)
    if n <= 0:
        return 0.0
    shards = [ShardRef(i, t.dim) for i, t in enumerate(task.tables[:n + 1])]
    totals = model.device_costs(task, [[s] for s in shards] + [[shards[i], shards[i + 1]] for i in range(n)])
    totals = totals.sum(axis=1)
    shared = totals[:n] + totals[1:n + 1] - totals[n + 1:]
    return float(np.clip(np.median(shared), 0.0, totals[:n + 1].min()))


class ShardCosts:
    """Each shard's marginal predicted cost on a device (its standalone fwd + bwd + comm minus the device's
    fixed overhead, which all its shards share) and its memory, priced in batches and cached."""

    def __init__(self, task: Task, model: CostModel) -> None:
        self.task = task
        self.model = model
        self.overhead_ms = device_overhead_ms(task, model)
        self._load: dict[ShardRef, float] = {}
        self._memory: dict[ShardRef, int] = {}

    def prime(self, shards: Iterable[ShardRef]) -> None:
        new = sorted({s for s in shards if s not in self._load})
        if not new:
            return
        totals = self.model.device_costs(self.task, [[s] for s in new]).sum(axis=1)
        for s, total in zip(new, totals.tolist()):
            self._load[s] = max(total - self.overhead_ms, 0.0)
            self._memory[s] = self.task.shard_memory(s)

    def load(self, layout: Layout) -> np.ndarray:
        try:
            return np.array([self._load[s] for s in layout])
        except KeyError:
            self.prime(layout)
            return np.array([self._load[s] for s in layout])

    def memory(self, layout: Layout) -> np.ndarray:
        try:
            return np.array([self._memory[s] for s in layout], dtype=np.int64)
        except KeyError:
            self.prime(layout)
            return np.array([self._memory[s] for s in layout], dtype=np.int64)


def price_devices(task: Task, model: CostModel, devices: Sequence[Sequence[ShardRef]]) -> np.ndarray:
    """(len(devices), 3) predicted fwd, bwd, comm of each device, in one batched call that prices every
    distinct device content once (candidate plans share most of their devices)."""
    index: dict[tuple[ShardRef, ...], int] = {}
    unique: list[Sequence[ShardRef]] = []
    slots = np.empty(len(devices), dtype=np.int64)
    for j, dev in enumerate(devices):
        key = tuple(dev)
        slot = index.get(key)
        if slot is None:
            slot = index[key] = len(unique)
            unique.append(dev)
        slots[j] = slot
    if not unique:
        return np.zeros((0, 3))
    return np.asarray(model.device_costs(task, unique), dtype=np.float64)[slots]


def step_ms(task: Task, model: CostModel, costs: np.ndarray, volumes: np.ndarray) -> np.ndarray:
    """(...,) the training step's cost (``autoshard.costs.step``) of plans whose devices have predicted
    (..., D, 3) costs and (..., D, 3) traffic volumes: the objective every search planner minimises."""
    return step_cost(task, model.comm, costs[..., 0], costs[..., 1], volumes).total_ms


def plan_costs(task: Task, model: CostModel, candidates: Sequence[tuple[Layout, np.ndarray]]) -> np.ndarray:
    """Predicted step cost of each (layout, ranks), in one batched call."""
    if not candidates:
        return np.zeros(0)
    d = task.num_devices
    devices: list[list[ShardRef]] = []
    for layout, ranks in candidates:
        devices.extend(device_contents(layout, ranks, d))
    costs = price_devices(task, model, devices).reshape(len(candidates), d, 3)
    volumes = device_volumes(task, devices).reshape(len(candidates), d, len(VOLUMES))
    return step_ms(task, model, costs, volumes)
