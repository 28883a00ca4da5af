"""The cost-model interface: what a device's shard costs, and what a plan costs.

The real evaluator (``autoshard.hardware``), the learned model and the analytical estimator all implement
``CostModel``, so a planner cannot tell which it is using and the benchmark can swap them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from autoshard.costs.breakdown import PlanCost, ShardRef
from autoshard.plan import Plan
from autoshard.tasks import Task


@runtime_checkable
class CostModel(Protocol):
    """Predicts (or measures) per-device costs."""

    name: str

    def device_costs(self, task: Task, devices: Sequence[Sequence[ShardRef]]) -> np.ndarray:
        """Costs of candidate device contents in ``task``'s world (its D and batch size).

        ``devices`` may hold any number of candidates (not only ``task.num_devices``), each a list of shards; the
        result is a (len(devices), 3) float array of fwd, bwd, comm milliseconds. An empty device costs 0.
        """
        ...


def plan_cost(model: CostModel, task: Task, plan: Plan) -> PlanCost:
    """The breakdown of every device of ``plan`` as ``model`` sees it."""
    return PlanCost.from_array(model.device_costs(task, plan.device_shards(task)), model.name)
