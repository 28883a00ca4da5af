"""A cost model corrected by shards timed alone on this host: each anchored shard adds what it timed, not
what the model thought.

Why (docs/benchmarks.md, "Stop 74"): on DLRM-50 (8)'s roomy tasks the shipped model prices the two hottest
tables (pooling 92-106, dim 16) too flat in their width: whole, 7.6-9.7 ms backward where they time 10.2-12.9
ms alone; a quarter, 5.3-6.7 ms where it times 3.9-4.8. So every planner keeps them whole, and the device that
holds one sets the step. Timing a few tables and their even column cuts alone takes seconds
(``pipeline.anchors``) and corrects exactly the shards the planners weigh most.

The correction, per stage (fwd, bwd), for a device d:

    corrected_d = base_d + sum over the anchored shards s on d of (timed_alone(s) - base_alone(s))

Additive, not a factor: a device fuses its tables into one kernel, so a shard adds about its own work to a
device's time, and the difference cancels the kernel's fixed cost that both sides of it carry. A shard is
anchored by its table and width (every column shard of that width shares it) with the table's whole rows and
no replica; row shards and replicas keep the base's price. The comm column and the spread are the base's.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence

import numpy as np

from autoshard.costs.base import ContentsAccumulator, CostModel, DeviceAccumulator
from autoshard.costs.comm import AlphaBeta
from autoshard.costs.learned.risk import offers_spread
from autoshard.errors import AutoshardError
from autoshard.shards import ShardRef
from autoshard.tasks import Task


def anchor_deltas(task: Task, model: CostModel, timed: Mapping[ShardRef, tuple[float, float]]
                  ) -> dict[ShardRef, tuple[float, float]]:
    """Per timed shard (whole rows, no replica): its timed (fwd, bwd) ms alone less ``model``'s price of it
    alone. An error for a row shard, a replica or a negative timing (what the correction cannot hold)."""
    refs = sorted(timed)
    for ref in refs:
        if ref.row_start != 0 or ref.row_end is not None or ref.replica:
            raise AutoshardError(f"anchor {ref}: only whole-row, non-replicated shards can be anchored")
        if min(timed[ref]) < 0:
            raise AutoshardError(f"anchor {ref}: timing {timed[ref]} is negative; time it again")
    if not refs:
        return {}
    priced = np.asarray(model.device_costs(task, [[r] for r in refs]), dtype=np.float64)[:, :2]
    return {r: (float(timed[r][0] - p[0]), float(timed[r][1] - p[1])) for r, p in zip(refs, priced)}


class AnchoredCostModel:
    """``base`` with each anchored shard's price replaced by its timing alone (module docstring). For the task
    the anchors were timed on only: their table indices are that task's."""

    def __init__(self, base: CostModel, deltas: Mapping[ShardRef, tuple[float, float]]) -> None:
        self.base, self.deltas = base, dict(deltas)
        self.name = f"{base.name} + {len(self.deltas)} anchors"
        self.comm: AlphaBeta = base.comm
        self.risk_k = float(getattr(base, "risk_k", 0.0))
        # the learned model's caution about its own row-wise prices still holds for the shards it prices
        self.row_move_margin = float(getattr(base, "row_move_margin", 0.0))
        if callable(getattr(base, "device_costs_gathered", None)):  # the planners' batched path, where it is
            self.device_costs_gathered = self._gathered

    @property
    def has_spread(self) -> bool:
        return offers_spread(self.base)

    def corrections(self, devices: Sequence[Sequence[ShardRef]]) -> np.ndarray:
        """(n, 2) what each device's fwd and bwd gain from its anchored shards (0 where it holds none)."""
        out = np.zeros((len(devices), 2))
        for n, device in enumerate(devices):
            for s in device:
                d = self.deltas.get(s)
                if d is not None:
                    out[n] += d
        return out

    def _corrected(self, devices: Sequence[Sequence[ShardRef]], costs: np.ndarray) -> np.ndarray:
        out = np.array(costs, dtype=np.float64)
        if len(devices):
            # a device never prices below nothing, whatever a shard's timing took off the model's price
            out[:, :2] = np.maximum(out[:, :2] + self.corrections(devices), 0.0)
        return out

    def device_costs(self, task: Task, devices: Sequence[Sequence[ShardRef]]) -> np.ndarray:
        return self._corrected(devices, self.base.device_costs(task, devices))

    def device_costs_spread(self, task: Task, devices: Sequence[Sequence[ShardRef]]) -> np.ndarray:
        """The base's spread: a timed shard is not less certain for being timed (it is more), and the
        guard's margin stays the base model's."""
        return self.base.device_costs_spread(task, devices)  # type: ignore[attr-defined]

    def device_costs_risk(self, task: Task, devices: Sequence[Sequence[ShardRef]], risk: float) -> np.ndarray:
        """The corrected mean + ``risk`` x the base's spread."""
        both = getattr(self.base, "device_costs_risk", None)
        if callable(both):
            return self._corrected(devices, both(task, devices, risk))
        return self.device_costs(task, devices) + risk * self.device_costs_spread(task, devices)

    def _gathered(self, task: Task, shards: Sequence[ShardRef], members: np.ndarray, owner: np.ndarray,
                  n: int, risk: float = 0.0) -> np.ndarray:
        """The base's ``device_costs_gathered`` (``planners.pricing``: devices as ids into ``shards``, each
        member shard's device in ``owner``) corrected as ``device_costs``."""
        out = np.array(self.base.device_costs_gathered(task, shards, members, owner, n, risk=risk),  # type: ignore
                       dtype=np.float64)
        delta = np.array([self.deltas.get(s, (0.0, 0.0)) for s in shards], dtype=np.float64).reshape(-1, 2)
        members, owner = np.asarray(members, dtype=np.int64), np.asarray(owner, dtype=np.int64)
        if len(members) and np.any(delta):
            for k in (0, 1):
                out[:, k] = np.maximum(out[:, k] + np.bincount(owner, weights=delta[members, k], minlength=n),
                                       0.0)
        return out

    def accumulator(self, task: Task, num_envs: int, risk: float = 0.0) -> DeviceAccumulator:
        """The base's own accumulator (at ``risk`` where it takes one: the learned model's, fast) with each
        device's anchored shards' corrections carried beside it."""
        make = self.base.accumulator
        if "risk" in inspect.signature(make).parameters:
            return _AnchoredAccumulator(self.deltas, make(task, num_envs, risk=risk),  # type: ignore[call-arg]
                                        num_envs, task.num_devices)
        if risk:
            return ContentsAccumulator(_AtRisk(self, risk), task, num_envs)
        return _AnchoredAccumulator(self.deltas, make(task, num_envs), num_envs, task.num_devices)

    def with_comm(self, comm: AlphaBeta) -> AnchoredCostModel:
        return AnchoredCostModel(self.base.with_comm(comm), self.deltas)


class _AtRisk:
    """``model.device_costs_risk`` at a fixed ``risk`` as a plain model (for the generic accumulator)."""

    def __init__(self, model: AnchoredCostModel, risk: float) -> None:
        self.model, self.risk = model, risk

    def device_costs(self, task: Task, devices: Sequence[Sequence[ShardRef]]) -> np.ndarray:
        return self.model.device_costs_risk(task, devices, self.risk)


class _AnchoredAccumulator:
    """A base accumulator with each device's sum of anchor corrections kept beside it: its costs are the
    base's plus that sum (and the added shard's), floored at 0, as ``AnchoredCostModel.device_costs``."""

    def __init__(self, deltas: Mapping[ShardRef, tuple[float, float]], base: DeviceAccumulator, num_envs: int,
                 num_devices: int) -> None:
        self.deltas, self.base = deltas, base
        self.sums = np.zeros((num_envs, num_devices, 2))

    def costs_if_added(self, shard: ShardRef) -> np.ndarray:
        out = np.array(self.base.costs_if_added(shard), dtype=np.float64)
        added = np.asarray(self.deltas.get(shard, (0.0, 0.0)))
        out[..., :2] = np.maximum(out[..., :2] + self.sums + added, 0.0)
        return out

    def add(self, env: int, device: int, shard: ShardRef) -> None:
        self.base.add(env, device, shard)
        d = self.deltas.get(shard)
        if d is not None:
            self.sums[env, device] += d
