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
from autoshard.costs.learned.risk import RiskPricedModel, offers_spread, risk_factor, risk_priced
from autoshard.costs.loading import resolve_cost_model
from autoshard.costs.step import VOLUMES, device_volumes, gather_volumes, shard_volumes, step_cost
from autoshard.errors import PlanError
from autoshard.planners.column_split import Layout, check_ranks, device_contents
from autoshard.shards import ShardRef
from autoshard.tasks import Task

RISK_OPTION = "risk"
"""``PlannerOptions.extra`` key: price devices at mean + K x spread (K >= 0; 0: the mean alone); default the
model's ``risk_k``. Read by ``planning_model``; a planner factory hands ``planner_settings(extra)`` (without
it) to its own ``config_from_extra``."""


def planning_model(options: Any, default_risk: float | None = None) -> CostModel:
    """The model a planner built from ``options`` (``PlannerOptions``) should plan with: its cost model (or
    the default one) priced at mean + k x spread, k from ``options.extra['risk']``, else the planner's own
    ``default_risk`` (search's, neuroshard's and ilp's: the mean), else the model's risk_k."""
    return resolve_cost_model(options.cost_model, options.extra.get(RISK_OPTION, default_risk))


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
    if gathers(model):
        return _gathered_plan_costs(task, model, candidates, risk_factor(model, risk))
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


def gathers(model: CostModel) -> bool:
    """Whether ``model`` prices devices given as indices into one list of shards (``device_costs_gathered``:
    the learned model, risk-priced or not)."""
    base = model.base if isinstance(model, RiskPricedModel) else model
    return callable(getattr(base, "device_costs_gathered", None))


HASH_SEED = 0x5EED
"""Seed of the random shard keys that identify a device's content (``_gathered_plan_costs``)."""
HASH_KEYS = 3
"""Random keys per shard whose sums over a device identify its content."""


def _gathered_plan_costs(task: Task, model: CostModel, candidates: Sequence[tuple[Layout, np.ndarray]],
                         k: float) -> np.ndarray:
    """``plan_costs`` without a Python object per placed shard: each candidate's shards as ids into one list
    of the distinct shards, every device a slot ``candidate x D + rank``, identical devices priced once.

    Why: neuroshard prices hundreds of candidate plans of ~860 shards a level; building, hashing and
    flattening their device lists took most of its time on 856 tables x 128 devices (docs/benchmarks.md,
    "Stop 51"). Prices are the generic path's (the same devices in the same order, each device's shards in
    layout order); only a column shard's encoding comes from a batch of another size."""
    d = task.num_devices
    shard_id: dict[ShardRef, int] = {}
    of_layout: dict[int, np.ndarray] = {}  # id(layout) -> its shards' ids (the candidates hold the layouts)
    ids, ranks = [], []
    for layout, r in candidates:
        r = check_ranks(layout, r).astype(np.int64, copy=False)
        if len(r) and (r.min() < 0 or r.max() >= d):
            raise PlanError(f"a rank is out of range 0..{d - 1}")
        got = of_layout.get(id(layout))
        if got is None:
            got = of_layout[id(layout)] = np.fromiter((shard_id.setdefault(s, len(shard_id)) for s in layout),
                                                      dtype=np.int64, count=len(layout))
        ids.append(got)
        ranks.append(r)
    shards = list(shard_id)
    gid = np.concatenate(ids)
    slot = np.repeat(np.arange(len(candidates)) * d, [len(i) for i in ids]) + np.concatenate(ranks)
    slots = len(candidates) * d
    volumes = gather_volumes(shard_volumes(task, shards), gid, slot, slots).reshape(len(candidates), d, -1)

    # a device's content as three sums of random 31-bit keys of its shards, exact in float64 (under 2^52 for
    # up to 2^21 shards a device; a false match of two different contents: about 2^-90 a pair); the distinct
    # contents kept in order of first appearance, as the generic path orders them
    keys = np.random.default_rng(HASH_SEED).integers(0, 2**31, size=(len(shards), HASH_KEYS))
    keys = keys.astype(np.float64)
    content = np.stack([np.bincount(slot, weights=keys[gid, j], minlength=slots) for j in range(HASH_KEYS)],
                       axis=1)
    _, first, inverse = np.unique(content, axis=0, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank_of = np.empty_like(order)
    rank_of[order] = np.arange(len(order))
    device_of = rank_of[inverse.reshape(-1)]  # slot -> distinct device, numbered by first appearance
    rep = np.full(slots, -1, dtype=np.int64)
    rep[first[order]] = np.arange(len(order))
    owner = rep[slot]
    held = np.flatnonzero(owner >= 0)  # the shards of each distinct device's first slot
    keep = held[np.argsort(owner[held], kind="stable")]  # grouped by device, each in layout order
    at_risk = {"risk": k} if k > 0 else {}  # a bare model with spread at k; a risk-priced one at its own
    costs = model.device_costs_gathered(task, shards, gid[keep], owner[keep], len(order),  # type: ignore
                                        **at_risk)
    costs = np.asarray(costs, dtype=np.float64)[device_of].reshape(len(candidates), d, 3)
    return step_ms(task, model, costs, volumes)
