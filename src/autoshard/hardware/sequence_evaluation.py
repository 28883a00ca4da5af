"""What a sequence plan's step communication costs: every collective modelled, and timed on D processes.

A step of sequence tables has four collectives (``costs.sequence_traffic``): the ids, embeddings and
gradients all-to-alls and the replicas' gradient all-reduce (``replica_sync``). Each is reported with its
modelled bytes (total and between hosts) and modelled time on the plan's DECLARED topology, and, unless only
the model is asked for, its MEASURED time: the three all-to-alls with the plan's own expected byte matrices
(``hardware.collectives.measure_all_to_alls``), the all-reduce with the plan's replica buckets
(``hardware.sequence_runtime.measure_replica_sync``), on D local gloo processes.

What a measurement here is and is not: the processes run on this machine, labelled as the plan's hosts, so no
byte crosses a slow link; with more processes than cores they take turns on the cores, and the times include
that contention (``measurement_note`` says which applies). Each collective's time is the median over timed
runs of the slowest rank's; a step's ROUND k is the sum of every collective's k-th run, which the sequence
bench resamples for its intervals.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from autoshard.costs.sequence_traffic import A2A_COLLECTIVES, COLLECTIVES, SequenceTraffic
from autoshard.errors import AutoshardError
from autoshard.hardware.collectives import measure_all_to_alls
from autoshard.hardware.multiprocess import DEFAULT_TIMEOUT_S
from autoshard.hardware.sequence_runtime import measure_replica_sync
from autoshard.tables.sequence import SequenceTable

log = logging.getLogger(__name__)

MEASURE, MODEL = "measure", "model"


@dataclass(frozen=True)
class MeasuredComm:
    """One plan's collectives timed on D processes: ms per collective (median of the slowest rank's runs)
    and the step's rounds (sum over collectives of their k-th run)."""

    ms: dict[str, float]
    rounds_ms: tuple[float, ...]

    @property
    def total_ms(self) -> float:
        return float(sum(self.ms.values()))


def measurement_note(num_devices: int) -> str:
    """What a measured time on ``num_devices`` local gloo processes stands for on this machine."""
    cores = os.cpu_count() or 1
    shared = (f"{num_devices} processes on {cores} cores share them, so times include contention"
              if num_devices > cores else f"{num_devices} processes on {cores} cores")
    return f"MEASURED on {num_devices} local gloo processes ({shared}; the hosts are a label, no slow link)"


def measure_plans_comm(plans: Sequence[tuple[SequenceTraffic, Sequence[tuple[int, Any]]]], *, warmup: int = 2,
                       repeats: int = 10, timeout_s: float = DEFAULT_TIMEOUT_S) -> list[MeasuredComm]:
    """Time several plans' collectives: ``plans`` are (modelled traffic, (dim, placement) of every table)
    on the same D ranks. One process start times every plan's three all-to-alls (their own matrices), and
    one more per plan with replicas its all-reduce; a plan without replicas syncs nothing (0 ms)."""
    if not plans:
        return []
    if warmup < 0 or repeats < 1:
        raise AutoshardError(f"warmup {warmup} must be >= 0 and repeats {repeats} >= 1")
    mats = [tr.get(n).matrix for tr, _ in plans for n in A2A_COLLECTIVES]
    log.info("timing %d plans' all-to-alls (%d matrices) on %d processes", len(plans), len(mats),
             mats[0].shape[0])
    timings = measure_all_to_alls(mats, backend="gloo", warmup=warmup, repeats=repeats, timeout_s=timeout_s)
    out = []
    for k, (traffic, items) in enumerate(plans):
        ms: dict[str, float] = {}
        rounds = [0.0] * repeats
        for j, name in enumerate(A2A_COLLECTIVES):
            t = timings[3 * k + j]
            ms[name] = t.ms
            rounds = [r + x for r, x in zip(rounds, t.runs_ms)]
        if traffic.sync_bytes > 0:
            sync = measure_replica_sync(list(items), warmup=warmup, repeats=repeats, timeout_s=timeout_s)
            ms["replica_sync"] = sync.ms
            rounds = [r + x for r, x in zip(rounds, sync.runs_ms)]
        else:
            ms["replica_sync"] = 0.0
        out.append(MeasuredComm(ms, tuple(rounds)))
    return out


@dataclass(frozen=True)
class CollectiveCost:
    """One collective of a sequence plan's step: bytes (modelled), modelled ms, measured ms (or None)."""

    name: str
    bytes: float
    inter_bytes: float
    modelled_ms: float
    measured_ms: float | None = None


@dataclass(frozen=True)
class SequenceEvaluation:
    """A sequence plan's step communication, collective by collective."""

    algorithm: str
    devices: str
    batch_per_rank: float
    collectives: tuple[CollectiveCost, ...]
    peak_memory_bytes: float
    device_memory_bytes: float
    mode: str
    """'measure' (times taken on D processes) or 'model' (modelled only)."""
    note: str
    """What the measured times are (``measurement_note``), or why none were taken."""
    topology_source: str
    rounds_ms: tuple[float, ...] = ()

    @property
    def modelled_ms(self) -> float:
        return float(sum(c.modelled_ms for c in self.collectives))

    @property
    def measured_ms(self) -> float | None:
        if self.mode != MEASURE:
            return None
        return float(sum(c.measured_ms or 0.0 for c in self.collectives))

    def to_json(self) -> dict[str, Any]:
        return {"algorithm": self.algorithm, "devices": self.devices, "batch_per_rank": self.batch_per_rank,
                "collectives_mode": self.mode, "note": self.note, "topology": self.topology_source,
                "peak_memory_bytes": self.peak_memory_bytes, "device_memory_bytes": self.device_memory_bytes,
                "collectives": [dict(c.__dict__) for c in self.collectives],
                "modelled_ms": self.modelled_ms, "measured_ms": self.measured_ms,
                "rounds_ms": list(self.rounds_ms)}

    def format(self) -> str:
        """The table ``autoshard evaluate`` prints, each time labelled MODELLED or MEASURED."""
        lines = [(f"sequence plan {self.algorithm} on {self.devices} devices, {self.batch_per_rank:g} "
                  f"samples per rank per step; fullest device {self.peak_memory_bytes / 1e6:.1f} MB of "
                  f"{self.device_memory_bytes / 1e6:.1f} MB"),
                 f"{'collective':<13} {'MB':>10} {'inter MB':>10} {'modelled ms':>12} {'measured ms':>12}"]
        for c in self.collectives:
            m = "-" if c.measured_ms is None else f"{c.measured_ms:.3f}"
            lines.append(f"{c.name:<13} {c.bytes / 1e6:>10.2f} {c.inter_bytes / 1e6:>10.2f} "
                         f"{c.modelled_ms:>12.3f} {m:>12}")
        total = "-" if self.measured_ms is None else f"{self.measured_ms:.3f}"
        lines.append(f"{'step comm':<13} {sum(c.bytes for c in self.collectives) / 1e6:>10.2f} "
                     f"{sum(c.inter_bytes for c in self.collectives) / 1e6:>10.2f} {self.modelled_ms:>12.3f} "
                     f"{total:>12}")
        lines.append(f"bytes and modelled ms: MODELLED on the plan's topology, {self.topology_source}")
        lines.append(f"measured ms: {self.note}" if self.mode == MEASURE else
                     f"measured ms: none ({self.note})")
        return "\n".join(lines)


def evaluate_sequence_plan(plan: Any, tables: Sequence[SequenceTable], *, collectives: str = MEASURE,
                           batch_per_rank: float | None = None, warmup: int = 2, repeats: int = 10,
                           timeout_s: float = DEFAULT_TIMEOUT_S) -> SequenceEvaluation:
    """Every collective of ``plan``'s step on ``tables`` (checked against the plan), modelled and, with
    ``collectives='measure'``, timed on D local gloo processes (module docstring)."""
    if collectives not in (MEASURE, MODEL):
        raise AutoshardError(f"collectives {collectives!r}: choose measure or model")
    traffic = plan.traffic(tables, batch_per_rank)
    b = plan.batch_per_rank if batch_per_rank is None else batch_per_rank
    measured: MeasuredComm | None = None
    if collectives == MEASURE:
        items = [(t.dim, p) for t, p in zip(tables, plan.placements)]
        measured = measure_plans_comm([(traffic, items)], warmup=warmup, repeats=repeats,
                                      timeout_s=timeout_s)[0]
        note = measurement_note(plan.num_devices)
    else:
        note = "--collectives model: only the model's figures"
    rows = tuple(CollectiveCost(n, traffic.get(n).bytes, traffic.get(n).inter_bytes, traffic.get(n).ms,
                                None if measured is None else measured.ms[n]) for n in COLLECTIVES)
    return SequenceEvaluation(plan.algorithm, plan.devices, float(b), rows, traffic.peak_memory_bytes,
                              plan.device_memory_bytes, collectives, note, plan.topology.source,
                              () if measured is None else measured.rounds_ms)
