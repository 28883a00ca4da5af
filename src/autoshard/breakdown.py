"""Cost value types: a device's fwd/bwd/comm breakdown and a plan's, shared by plans, every cost model and the
evaluator (value types only, so plans can carry a cost without knowing who priced it)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from autoshard.shards import ShardRef


@dataclass(frozen=True)
class CostBreakdown:
    """One device's cost of one training step's embedding work, in milliseconds."""

    fwd_ms: float
    """Forward compute: the fused embedding-bag lookup of the device's tables."""
    bwd_ms: float
    """Backward compute: gradient and fused optimizer update."""
    comm_ms: float
    """The device's own time in the step's collectives (ids in, outputs out, gradients in, replicas
    all-reduced), as if the other ranks were idle; the step's collectives are in ``PlanCost.collectives``."""

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
class CollectiveCost:
    """One collective of a training step: the bytes every rank sends and receives, and its time."""

    name: str
    """input_ids, pooled_outputs, output_grads or replica_grads (``autoshard.costs.step``)."""
    stage: str
    """fwd or bwd: where in the step it runs."""
    ms: float
    """Its time in the step (measured if ``measured_ms`` is set, else modelled)."""
    sent_bytes: tuple[float, ...]
    received_bytes: tuple[float, ...]
    modelled_ms: float
    """The network model's estimate (alpha-beta), kept beside a measurement to show how far it was."""
    measured_ms: float | None = None
    """Timed on D processes with the plan's own uneven splits; None when modelled only."""

    @property
    def source(self) -> str:
        return "measured" if self.measured_ms is not None else "modelled"

    @property
    def busiest_bytes(self) -> float:
        """The most any rank sends or receives: what the alpha-beta model prices (``costs.step``)."""
        return max(self.sent_bytes + self.received_bytes, default=0.0)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "stage": self.stage, "ms": self.ms, "source": self.source,
                "modelled_ms": self.modelled_ms, "measured_ms": self.measured_ms,
                "sent_bytes": list(self.sent_bytes), "received_bytes": list(self.received_bytes)}

    @staticmethod
    def from_json(d: dict[str, Any]) -> CollectiveCost:
        measured = d.get("measured_ms")
        return CollectiveCost(str(d["name"]), str(d["stage"]), float(d["ms"]),
                              tuple(float(x) for x in d["sent_bytes"]),
                              tuple(float(x) for x in d["received_bytes"]), float(d["modelled_ms"]),
                              None if measured is None else float(measured))


@dataclass(frozen=True)
class PlanCost:
    """Every device's breakdown and the step's collectives.

    The plan cost is the training step's: ``max fwd + forward collectives + max bwd + backward collectives``
    (``autoshard.costs.step`` says why). A cost read from a file written before the step model (no
    collectives) is the slowest device's fwd + bwd + comm, as it was then."""

    devices: tuple[CostBreakdown, ...]
    source: str
    """Who produced it: 'measured' (real kernels), or the estimator's name."""
    collectives: tuple[CollectiveCost, ...] = ()

    @property
    def max_fwd_ms(self) -> float:
        return max(d.fwd_ms for d in self.devices)

    @property
    def max_bwd_ms(self) -> float:
        return max(d.bwd_ms for d in self.devices)

    @property
    def collectives_ms(self) -> float:
        return sum(c.ms for c in self.collectives)

    @property
    def plan_ms(self) -> float:
        if not self.collectives:
            return max(d.total_ms for d in self.devices)
        return self.max_fwd_ms + self.max_bwd_ms + self.collectives_ms

    @property
    def bottleneck(self) -> int:
        """The device with the most kernel time (fwd + bwd + its own comm)."""
        return int(np.argmax([d.total_ms for d in self.devices]))

    @staticmethod
    def from_array(costs: np.ndarray, source: str, collectives: Sequence[CollectiveCost] = ()) -> PlanCost:
        """From a (devices, 3) array of fwd, bwd, comm milliseconds."""
        rows = tuple(CostBreakdown.from_array(r) for r in np.asarray(costs))
        return PlanCost(rows, source, tuple(collectives))

    def to_array(self) -> np.ndarray:
        return np.array([[d.fwd_ms, d.bwd_ms, d.comm_ms] for d in self.devices], dtype=np.float64)

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "plan_ms": self.plan_ms,
                "step": {"max_fwd_ms": self.max_fwd_ms, "max_bwd_ms": self.max_bwd_ms,
                         "collectives_ms": self.collectives_ms} if self.collectives else None,
                "devices": [d.to_json() for d in self.devices],
                "collectives": [c.to_json() for c in self.collectives]}

    @staticmethod
    def from_json(d: dict[str, Any]) -> PlanCost:
        return PlanCost(tuple(CostBreakdown.from_json(x) for x in d["devices"]), str(d.get("source", "")),
                        tuple(CollectiveCost.from_json(c) for c in d.get("collectives") or ()))


@dataclass(frozen=True)
class StageFloor:
    """The least forward and the least backward time of the device that holds a task's costliest table, or
    its widest column shard, each stage on its own: with table- and column-wise shards (no row ranges or
    replicas) no plan's slowest device is below these where adding a shard never makes a device cheaper."""

    fwd_ms: float
    bwd_ms: float
    alone: tuple[tuple[ShardRef, float, float], ...] = ()
    """(shard, fwd ms, bwd ms) of every shard of the tables that could set the floor, each timed alone as
    the floor's were: the table whole, the pieces of each even column cut, and (the bench adds them) every
    measured plan's shards of those tables, so the room can price the work a cut adds
    (``bench.room.cut_floor_terms``). Empty in runs before stop 57."""

    def alone_ms(self) -> dict[ShardRef, tuple[float, float]]:
        return {ref: (f, b) for ref, f, b in self.alone}

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"fwd_ms": self.fwd_ms, "bwd_ms": self.bwd_ms}
        if self.alone:
            out["alone"] = [[*ref, f, b] for ref, f, b in self.alone]
        return out

    @staticmethod
    def from_json(d: dict[str, Any]) -> StageFloor:
        alone = tuple((ShardRef(int(t), int(dim), int(r0), None if r1 is None else int(r1), bool(rep)),
                       float(f), float(b)) for t, dim, r0, r1, rep, f, b in d.get("alone", ()))
        return StageFloor(float(d["fwd_ms"]), float(d["bwd_ms"]), alone)
