"""The estimated MDP: place a task's tables one by one onto devices, with costs predicted by a cost model.

Tables are placed in a fixed order, largest predicted single-table cost first (as the greedy heuristics do,
and as DreamShard's environment does). At every step the environment asks the cost model, in ONE call, what
each device would cost with the current table added, and the observation gives the policy, per device: its
current and candidate costs (fwd/bwd/comm), the rise of the plan cost it would cause, its memory left before
and after, and a summary of the shards it holds; plus the features of the table being placed (which the
DreamShard prototype's policy never sees). Devices without memory room are masked out. The reward is minus
the predicted step cost at the end (max fwd + max bwd + the step's collectives, ``autoshard.costs.step``);
``step_rewards`` gives the shaped per-step version (minus the rise of the running step cost), which
telescopes to it.

``num_envs`` episodes of the same task run side by side (samples for a baseline, or best-of-k decoding): each
step costs one batched cost-model query over num_envs x D candidate devices.

Costs are divided by the task's scale ``S`` = (sum of single-table costs) / D, the cost of one device under a
perfect split of an additive cost, so that one policy sees comparable numbers for any T, D and batch size.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from autoshard.costs.base import CostModel
from autoshard.costs.step import VOLUMES, shard_volumes, step_cost
from autoshard.errors import AutoshardError, InfeasibleError
from autoshard.io import format_bytes
from autoshard.plan import Plan
from autoshard.shards import ShardRef
from autoshard.tables.table import NUM_FEATURES, FeatureNormalizer
from autoshard.tasks import Task

DEVICE_FEATURES = 4 + 4 + 2 + 2 + 1 + NUM_FEATURES + 2 + 2
"""Per-device observation: current cost (fwd, bwd, comm, total), candidate cost with the table added (same
four), plan-max rise and slack, memory left before/after (fractions of capacity), shard count, mean features
of its shards, progress and remaining work (the same for every device), and two comparisons in units of the
table's own cost (candidate cost above the cheapest allowed candidate; plan cost minus candidate cost), which
keep their scale when T changes (the costs / S shrink with T as S grows)."""

RELATIVE_CLIP = 10.0
"""Comparisons in units of the table's cost are clipped to +-10: beyond that a device is simply far off."""

TABLE_FEATURES = NUM_FEATURES + 2
"""Table observation: its normalised features, its single-table cost / S, its memory / mean device
capacity."""


@dataclass(frozen=True)
class TaskContext:
    """What the MDP needs from a task that does not change during an episode (computed once per task)."""

    task: Task
    order: np.ndarray
    """Table indices in placement order (largest predicted single-table cost first, ties by index)."""
    single_costs: np.ndarray
    """(T, 3) predicted fwd/bwd/comm of each table alone on a device."""
    scale: float
    """S = sum of single-table total costs / D (ms); every cost in an observation is divided by it."""
    table_features: np.ndarray
    """(T, NUM_FEATURES) normalised features, by table index."""
    memory: np.ndarray
    """(T,) bytes each table needs on a device."""
    capacity: np.ndarray
    """(D,) device memory in bytes."""
    remaining: np.ndarray
    """(T,) sum of the single-table total costs of the tables from step t on (ms)."""
    volumes: np.ndarray
    """(T, 3) each table's traffic volumes (``autoshard.costs.step``), for the step's collectives."""

    @staticmethod
    def build(task: Task, cost_model: CostModel, normalizer: FeatureNormalizer) -> TaskContext:
        single = np.asarray(cost_model.device_costs(task, [[ShardRef(i, t.dim)] for i, t in
                                                           enumerate(task.tables)]), dtype=np.float64)
        if single.shape != (task.num_tables, 3) or not np.all(np.isfinite(single)):
            raise AutoshardError(f"cost model {cost_model.name} returned bad single-table costs for task "
                                 f"{task.name} (shape {single.shape}); check the cost model")
        total = single.sum(axis=1)
        order = np.lexsort((np.arange(task.num_tables), -total))
        scale = max(float(total.sum()) / task.num_devices, 1e-9)
        feats = np.stack([normalizer.features(t) for t in task.tables])
        memory = np.array([task.table_memory(t) for t in task.tables], dtype=np.int64)
        remaining = np.cumsum(total[order][::-1])[::-1].copy()
        volumes = shard_volumes(task, [ShardRef(i, t.dim) for i, t in enumerate(task.tables)])
        return TaskContext(task, order, single, scale, feats, memory,
                           np.array(task.device_memory, dtype=np.int64), remaining, volumes)


@dataclass(frozen=True)
class Observation:
    """What the policy sees at one step, for every parallel episode."""

    devices: np.ndarray
    """(B, D, DEVICE_FEATURES) float32."""
    table: np.ndarray
    """(B, TABLE_FEATURES) float32 (the same table in every episode)."""
    mask: np.ndarray
    """(B, D) bool: the devices the table may go to."""
    forced: np.ndarray
    """(B,) bool: the episode has already failed (no device had room) and the only unmasked device is a
    forced overflow placement, to be ignored by the loss."""


class PlacementEnv:
    """``num_envs`` parallel episodes of placing ``ctx.task``'s tables; see the module docstring."""

    def __init__(self, ctx: TaskContext, cost_model: CostModel, num_envs: int = 1) -> None:
        if num_envs <= 0:
            raise AutoshardError(f"num_envs {num_envs} must be positive")
        self.ctx, self.cost_model, self.num_envs = ctx, cost_model, num_envs
        # every table's observation (its features, single-table cost / S, memory / mean capacity), made once
        single = ctx.single_costs.sum(axis=1) / ctx.scale
        memory = ctx.memory / ctx.capacity.mean()
        self._table_obs = np.concatenate([ctx.table_features, single[:, None], memory[:, None]],
                                         axis=1).astype(np.float32)
        self.reset()

    # -- episode state -------------------------------------------------------------------------------------
    def reset(self) -> Observation:
        b, d = self.num_envs, self.ctx.task.num_devices
        self.devices = self.cost_model.accumulator(self.ctx.task, b)
        self.t = 0
        self.costs = np.zeros((b, d, 3))
        self.volumes = np.zeros((b, d, len(VOLUMES)))
        self.free = np.tile(self.ctx.capacity, (b, 1))
        self.feature_sum = np.zeros((b, d, NUM_FEATURES))
        self.count = np.zeros((b, d))
        self.ranks = np.full((b, self.ctx.task.num_tables), -1, dtype=np.int64)
        self.failed = np.zeros(b, dtype=bool)
        self.failure: list[str | None] = [None] * b
        self._candidates = self.devices.costs_if_added(self._shard(int(self.ctx.order[0])))
        return self._observe()

    def _shard(self, table: int) -> ShardRef:
        return ShardRef(table, self.ctx.task.tables[table].dim)

    @property
    def done(self) -> bool:
        return self.t >= self.ctx.task.num_tables

    @property
    def table(self) -> int:
        """Index (into task.tables) of the table placed at this step."""
        return int(self.ctx.order[self.t])

    def plan_costs(self) -> np.ndarray:
        """(B,) predicted step cost in ms (max fwd + max bwd + the step's collectives, ``costs.step``) of
        the placements so far."""
        task = self.ctx.task
        return step_cost(task, self.cost_model.comm, self.costs[..., 0], self.costs[..., 1],
                         self.volumes).total_ms

    def step(self, actions: Sequence[int] | np.ndarray) -> Observation | None:
        """Place the current table on ``actions[b]`` in episode b; the next observation, or None when done.

        An action outside the mask is a caller bug and raises (the env never silently overflows memory, except
        for the forced placement of an already failed episode)."""
        actions = np.asarray(actions, dtype=np.int64)
        if actions.shape != (self.num_envs,):
            raise AutoshardError(f"expected {self.num_envs} actions, got shape {actions.shape}")
        i = self.table
        for b, a in enumerate(actions):
            if not self._mask[b, a]:
                raise AutoshardError(f"episode {b}: device {a} is masked "
                                     f"for table {self.ctx.task.tables[i].name}")
            self.costs[b, a] = self._candidates[b, a]
            self.volumes[b, a] += self.ctx.volumes[i]
            self.free[b, a] -= self.ctx.memory[i]
            self.feature_sum[b, a] += self.ctx.table_features[i]
            self.count[b, a] += 1
            self.ranks[b, i] = a
            self.devices.add(b, int(a), self._shard(i))
        self.t += 1
        if self.done:
            return None
        self._candidates = self.devices.costs_if_added(self._shard(self.table))
        return self._observe()

    def _observe(self) -> Observation:
        ctx, i = self.ctx, self.table
        task = ctx.task
        need = ctx.memory[i]
        mask = self.free >= need
        forced = self.failed.copy()
        room = mask.any(axis=1)
        # the episodes with no device of room or already failed: usually none, so that is checked first
        stuck = np.flatnonzero(~room | forced) if forced.any() or not room.all() else ()
        for b in stuck:
            if not self.failed[b]:
                best = int(self.free[b].max())
                self.failure[b] = (f"table {task.tables[i].name} needs {format_bytes(need)} "
                                   f"but the device with most room has {format_bytes(best)} free "
                                   f"(short by {format_bytes(need - best)})")
                self.failed[b] = forced[b] = True
            mask[b] = False
            mask[b, int(np.argmax(self.free[b]))] = True
        self._mask = mask

        s = ctx.scale
        b, d = mask.shape
        dev = np.empty((b, d, DEVICE_FEATURES), dtype=np.float32)  # filled slice by slice (no concatenation)
        dev[..., 0:3] = self.costs / s
        dev[..., 3] = dev[..., 0:3].sum(2)
        dev[..., 4:7] = self._candidates / s
        dev[..., 7] = dev[..., 4:7].sum(2)
        run_max = dev[..., 3].max(axis=1, keepdims=True)
        dev[..., 8] = np.maximum(dev[..., 7], run_max) - run_max  # rise of the plan cost if placed here
        dev[..., 9] = run_max - dev[..., 3]  # slack below the current plan cost
        cap = ctx.capacity[None, :].astype(np.float64)
        dev[..., 10] = self.free / cap
        dev[..., 11] = (self.free - need) / cap
        dev[..., 12] = self.count * (task.num_devices / task.num_tables)
        dev[..., 13:13 + NUM_FEATURES] = self.feature_sum / np.maximum(self.count, 1.0)[..., None]
        dev[..., 13 + NUM_FEATURES] = self.t / task.num_tables
        dev[..., 14 + NUM_FEATURES] = ctx.remaining[self.t] / (s * task.num_devices)
        unit = max(float(ctx.single_costs[i].sum()) / s, 1e-6)  # this table's cost / S
        best = np.where(mask, dev[..., 7], np.inf).min(axis=1, keepdims=True)
        dev[..., 15 + NUM_FEATURES] = np.clip((dev[..., 7] - best) / unit, -RELATIVE_CLIP, RELATIVE_CLIP)
        dev[..., 16 + NUM_FEATURES] = np.clip((run_max - dev[..., 7]) / unit, -RELATIVE_CLIP, RELATIVE_CLIP)
        return Observation(dev, np.tile(self._table_obs[i], (b, 1)), mask, forced)

    def step_rewards(self, previous_plan_costs: np.ndarray) -> np.ndarray:
        """Shaped reward of the last step: minus the rise of the running plan cost, in units of S. Summed over
        an episode it is minus the final plan cost / S."""
        return -(self.plan_costs() - previous_plan_costs) / self.ctx.scale

    def to_plan(self, env: int, algorithm: str = "rl") -> Plan:
        """The finished placement of episode ``env`` as a Plan (InfeasibleError if it overflowed memory)."""
        if not self.done:
            raise AutoshardError("the episode is not finished; step until every table is placed")
        if self.failed[env]:
            raise InfeasibleError(f"{algorithm}: {self.failure[env]}; give more memory or more devices")
        return Plan.from_ranks(self.ctx.task, [int(r) for r in self.ranks[env]], algorithm)
