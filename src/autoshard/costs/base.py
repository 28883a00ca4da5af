"""The cost-model interface: what a device's shards cost, batched and incrementally, and what a plan costs.

Every model (the real evaluator in ``autoshard.hardware``, the learned model, the analytical estimator)
implements ``CostModel``, so a planner cannot tell which it is using and the benchmark can swap them. The
cluster's all-to-all model (``comm``) is a declared part of every model; ``with_comm`` prices another cluster.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from autoshard.breakdown import PlanCost
from autoshard.costs.comm import AlphaBeta
from autoshard.costs.step import compose, plan_collectives
from autoshard.plan import Plan
from autoshard.shards import ShardRef
from autoshard.tasks import Task


@runtime_checkable
class DeviceAccumulator(Protocol):
    """Devices filled one shard at a time, in ``num_envs`` parallel episodes of ``task.num_devices`` devices
    each (the incremental API: the RL environment and greedy planners ask "what if this shard joined each
    device?" once per step for every episode and device)."""

    def costs_if_added(self, shard: ShardRef) -> np.ndarray:
        """(num_envs, D, 3) fwd, bwd, comm ms of every device if ``shard`` were added to it."""
        ...

    def add(self, env: int, device: int, shard: ShardRef) -> None:
        """Put ``shard`` on ``device`` in episode ``env``."""
        ...


@runtime_checkable
class CostModel(Protocol):
    """Predicts (or measures) per-device costs."""

    name: str
    comm: AlphaBeta
    """The all-to-all model of the cluster this model prices."""

    def device_costs(self, task: Task, devices: Sequence[Sequence[ShardRef]]) -> np.ndarray:
        """Costs of candidate device contents in ``task``'s world (its D and batch size).

        ``devices`` may hold any number of candidates (not only ``task.num_devices``), each a list of shards;
        the result is a (len(devices), 3) float array of fwd, bwd, comm milliseconds. An empty device costs
        0.
        """
        ...

    def accumulator(self, task: Task, num_envs: int) -> DeviceAccumulator:
        """Empty devices to fill shard by shard; its costs equal ``device_costs`` of the same contents."""
        ...

    def with_comm(self, comm: AlphaBeta) -> CostModel:
        """A copy pricing the all-to-all with ``comm`` (e.g. the fit of the cluster being planned)."""
        ...


class ContentsAccumulator:
    """The accumulator any model can use: keeps each device's shard list and asks ``device_costs`` for every
    candidate in one batched call (exact for any model, fused or not)."""

    def __init__(self, model: CostModel, task: Task, num_envs: int) -> None:
        self.model, self.task = model, task
        self.contents: list[list[list[ShardRef]]] = [[[] for _ in range(task.num_devices)]
                                                     for _ in range(num_envs)]

    def costs_if_added(self, shard: ShardRef) -> np.ndarray:
        flat = [dev + [shard] for env in self.contents for dev in env]
        out = np.asarray(self.model.device_costs(self.task, flat), dtype=np.float64)
        return out.reshape(len(self.contents), self.task.num_devices, 3)

    def add(self, env: int, device: int, shard: ShardRef) -> None:
        self.contents[env][device].append(shard)


def plan_cost(model: CostModel, task: Task, plan: Plan) -> PlanCost:
    """The step cost of ``plan`` as ``model`` sees it: every device's breakdown and the step's collectives
    priced with the model's comm (``autoshard.costs.step``)."""
    devices = plan.device_shards(task)
    return compose(model.device_costs(task, devices), plan_collectives(task, model.comm, devices), model.name)


class DelegatesToBase:
    """What a model wrapping a ``base`` model (risk pricing, a calibration) passes through unchanged: the
    base's compatibility check and the lines saying which devices it priced outside its support."""

    base: Any

    def check_compatible(self, *args: Any, **kwargs: Any) -> None:
        check = getattr(self.base, "check_compatible", None)
        if callable(check):
            check(*args, **kwargs)

    def describe_fallback(self, task: Task, devices: Sequence[Sequence[ShardRef]]) -> str:
        describe = getattr(self.base, "describe_fallback", None)
        return describe(task, devices) if callable(describe) else ""

    def out_of_support(self, task: Task, devices: Sequence[Sequence[ShardRef]]) -> list[tuple[int, str]]:
        oos = getattr(self.base, "out_of_support", None)
        return oos(task, devices) if callable(oos) else []
