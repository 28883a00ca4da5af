"""Pricing candidate devices and plans with a cost model, shared by the search planners (neuroshard, search,
ilp): each shard's marginal cost, a device's fixed overhead, and batched plan costs that price every distinct
device content once.

Risk-aware pricing: a model that offers a per-device spread (``device_costs_spread``: a learned ensemble) is
priced at ``mean + k x spread`` per device, k from ``PlannerOptions.extra['risk']`` or else the model's
``risk_k`` (chosen on held-out data by ``autoshard eval-cost``; ``costs.learned.risk``). Planners that take
their model from ``planning_model(options)`` (or ``costs.loading.resolve_cost_model``) get a model whose
``device_costs`` already are ``mean + k x spread``, so every path (device_costs, accumulators, the functions
here) agrees; ``step_ms``/``plan_costs``/``ShardCosts`` also apply k themselves when handed the raw model. A
model without spread takes exactly the plain path (bit-identical prices).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from autoshard.costs.base import CostModel
from autoshard.costs.learned.risk import offers_spread, risk_factor, risk_priced
from autoshard.costs.loading import resolve_cost_model
from autoshard.costs.step import VOLUMES, device_volumes, step_cost
from autoshard.planners.column_split import Layout, device_contents
from autoshard.shards import ShardRef
from autoshard.tasks import Task

RISK_OPTION = "risk"
"""``PlannerOptions.extra`` key: price devices at mean + K x spread (K >= 0; 0: the mean alone); default the
model's ``risk_k``. Read by ``planning_model``; a planner factory hands ``planner_settings(extra)`` (without
it) to its own ``config_from_extra``."""


def planning_model(options: Any) -> CostModel:
    """The model a planner built from ``options`` (``PlannerOptions``) should plan with: its cost model (or
    the default one) priced at mean + k x spread, k from ``options.extra['risk']`` or the model's risk_k."""
    return resolve_cost_model(options.cost_model, options.extra.get(RISK_OPTION))


def planner_settings(extra: Mapping[str, Any]) -> dict[str, Any]:
    """``extra`` without the pricing keys (``risk``), for a planner's own ``config_from_extra``."""
    return {k: v for k, v in extra.items() if k != RISK_OPTION}

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
    fixed overhead, which all its shards share) and its memory, priced in batches and cached. A model with
    spread is priced at mean + k x spread (``risk``, default its risk_k)."""

    def __init__(self, task: Task, model: CostModel, risk: Any = None) -> None:
        self.task = task
        model = risk_priced(model, risk) if offers_spread(model) else model
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


def price_devices(task: Task, model: CostModel, devices: Sequence[Sequence[ShardRef]],
                  spread: bool = False) -> Any:
    """(len(devices), 3) predicted fwd, bwd, comm of each device, in one batched call that prices every
    distinct device content once (candidate plans share most of their devices). ``spread``: also their
    (len(devices), 3) spread (zeros for a model without one), as ``(costs, spread)``."""
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
    if not spread:
        if not unique:
            return np.zeros((0, 3))
        return np.asarray(model.device_costs(task, unique), dtype=np.float64)[slots]
    if not unique:
        return np.zeros((0, 3)), np.zeros((0, 3))
    predict = getattr(model, "predict", None)
    if offers_spread(model) and callable(predict):  # the learned model: mean and spread in one pass
        pred = predict(task, unique)
        mean, std = pred.mean, pred.std
    else:
        mean = np.asarray(model.device_costs(task, unique), dtype=np.float64)
        std = (np.asarray(model.device_costs_spread(task, unique), dtype=np.float64)  # type: ignore[attr-defined]
               if offers_spread(model) else np.zeros_like(mean))
    return mean[slots], std[slots]


def step_ms(task: Task, model: CostModel, costs: np.ndarray, volumes: np.ndarray,
            spread: np.ndarray | None = None, risk: Any = None) -> np.ndarray:
    """(...,) the training step's cost (``autoshard.costs.step``) of plans whose devices have predicted
    (..., D, 3) costs and (..., D, 3) traffic volumes: the objective every search planner minimises.

    With the model's (..., D, 3) ``spread`` of those costs, each device is priced at costs + k x spread
    first (k: ``risk``, else the model's risk_k; ``costs.learned.risk.risk_factor``). Without a spread, or
    with k = 0, the plain step of ``costs``."""
    if spread is not None:
        k = risk_factor(model, risk)
        if k > 0:
            costs = costs + k * spread
    return step_cost(task, model.comm, costs[..., 0], costs[..., 1], volumes).total_ms


def plan_costs(task: Task, model: CostModel, candidates: Sequence[tuple[Layout, np.ndarray]],
               risk: Any = None) -> np.ndarray:
    """Predicted step cost of each (layout, ranks), in one batched call (a model with spread: its devices at
    mean + k x spread, k ``risk`` or its risk_k)."""
    if not candidates:
        return np.zeros(0)
    d = task.num_devices
    devices: list[list[ShardRef]] = []
    for layout, ranks in candidates:
        devices.extend(device_contents(layout, ranks, d))
    volumes = device_volumes(task, devices).reshape(len(candidates), d, len(VOLUMES))
    if risk_factor(model, risk) > 0:
        costs, spread = price_devices(task, model, devices, spread=True)
        shape = (len(candidates), d, 3)
        return step_ms(task, model, costs.reshape(shape), volumes, spread.reshape(shape), risk)
    costs = price_devices(task, model, devices).reshape(len(candidates), d, 3)
    return step_ms(task, model, costs, volumes)
