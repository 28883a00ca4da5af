"""Cost value types: a device's fwd/bwd/comm breakdown and a plan's, shared by plans, every cost model and the
evaluator (value types only, so plans can carry a cost without knowing who priced it)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class CostBreakdown:
    """One device's cost of one training step's embedding work, in milliseconds."""

    fwd_ms: float
    """Forward compute: the fused embedding-bag lookup of the device's tables."""
    bwd_ms: float
    """Backward compute: gradient and fused optimizer update."""
    comm_ms: float
    """All-to-all of the pooled embeddings, forward and backward."""

    @property
    def total_ms(self) -> float:
        return self.fwd_ms + self.bwd_ms + self.comm_ms

    @staticmethod
    def from_array(row: Sequence[float]) -> CostBreakdown:
        return CostBreakdown(float(row[0]), float(row[1]), float(row[2]))

    def to_json(self) -> dict[str, float]:
        return {"fwd_ms": self.fwd_ms, "bwd_ms": self.bwd_ms, "comm_ms": self.comm_ms,
                "total_ms": self.total_ms}

    @staticmethod
    def from_json(d: dict[str, Any]) -> CostBreakdown:
        return CostBreakdown(float(d["fwd_ms"]), float(d["bwd_ms"]), float(d["comm_ms"]))


@dataclass(frozen=True)
class PlanCost:
    """Every device's breakdown; the plan cost is the slowest device's total (the step's embedding
    bottleneck)."""

    devices: tuple[CostBreakdown, ...]
    source: str
    """Who produced it: 'measured' (real kernels), or the estimator's name."""

    @property
    def plan_ms(self) -> float:
        return max(d.total_ms for d in self.devices)

    @property
    def bottleneck(self) -> int:
        return int(np.argmax([d.total_ms for d in self.devices]))

    @staticmethod
    def from_array(costs: np.ndarray, source: str) -> PlanCost:
        """From a (devices, 3) array of fwd, bwd, comm milliseconds."""
        return PlanCost(tuple(CostBreakdown.from_array(r) for r in np.asarray(costs)), source)

    def to_array(self) -> np.ndarray:
        return np.array([[d.fwd_ms, d.bwd_ms, d.comm_ms] for d in self.devices], dtype=np.float64)

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "plan_ms": self.plan_ms,
                "devices": [d.to_json() for d in self.devices]}

    @staticmethod
    def from_json(d: dict[str, Any]) -> PlanCost:
        return PlanCost(tuple(CostBreakdown.from_json(x) for x in d["devices"]), str(d.get("source", "")))
