"""Plan with the hottest tables timed here: ``autoshard plan --anchor-hot H`` and the bench's
``<planner>+hot<H>`` rows.

Top to bottom: rank the tables by the planning model's price of each alone (fwd + bwd); take the ``H``
dearest; for each, the shards a planner may cut it into (the table whole and every width its column halving
reaches on at most D devices, ``column_split.halve``: what search, NeuroShard's split and the column-shard
ILP make of it); time each alone on this host in interleaved rounds, the least per stage kept (as the bench
times its devices); correct the model by them (``costs.anchors``); plan with the corrected model. The
timing counts as planning time.

Why these shards: the planners' largest errors at measurement are on the device that holds the hottest
table (docs/benchmarks.md, "Stop 74": the shipped model prices the hottest tables of DLRM-50 (8) too flat in
their width, so no planner cut them), and a plan's step waits for that device; a few dozen shards timed
alone cost seconds, where timing whole candidate plans (``--measure-top``) costs minutes and corrects only
the layouts it timed.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import numpy as np

from autoshard.costs.anchors import AnchoredCostModel, anchor_deltas
from autoshard.costs.base import CostModel
from autoshard.costs.comm import AlphaBeta
from autoshard.costs.learned.risk import RiskPricedModel
from autoshard.errors import AutoshardError
from autoshard.hardware.evaluator import time_in_rounds
from autoshard.hardware.kernel import MeasureSettings
from autoshard.planners.column_split import can_halve, halve
from autoshard.shards import ShardRef
from autoshard.tasks import Task

log = logging.getLogger(__name__)

ANCHOR_ROUNDS = 3
"""Rounds each anchored shard is timed in (the least per stage kept): the bench's own."""


def cut_widths(dim: int, num_devices: int) -> list[int]:
    """The table whole and every width repeated halving (``column_split.halve``) reaches while the pieces
    number at most ``num_devices``, widest first."""
    widths = {dim}
    level = [dim]
    pieces = 1
    while pieces * 2 <= num_devices:
        level = [w for d in level if can_halve(d) for w in halve(d)]
        if not level:
            break
        widths |= set(level)
        pieces *= 2
    return sorted(widths, reverse=True)


def hot_shards(task: Task, model: CostModel, tables: int) -> list[ShardRef]:
    """The shards of the ``tables`` tables ``model`` prices dearest alone (fwd + bwd): each whole and at
    every width of its cuts (``cut_widths``); tables first by price, each widest first."""
    if tables < 1:
        raise AutoshardError(f"--anchor-hot {tables}: anchor at least 1 table")
    alone = np.asarray(model.device_costs(task, [[ShardRef(i, t.dim)] for i, t in enumerate(task.tables)]),
                       dtype=np.float64)[:, :2].sum(axis=1)
    hottest = np.argsort(-alone, kind="stable")[:tables].tolist()
    return [ShardRef(i, w) for i in hottest for w in cut_widths(task.tables[i].dim, task.num_devices)]


@dataclass(frozen=True)
class Anchors:
    """Shards timed alone on this host for one task, and how long the timing took."""

    timed: dict[ShardRef, tuple[float, float]]
    """Per shard, its least (fwd, bwd) ms over the rounds."""
    seconds: float

    def describe(self, task: Task) -> str:
        tables = sorted({r.table for r in self.timed})
        names = ", ".join(task.tables[t].name for t in tables)
        return (f"anchors: {len(self.timed)} shards of {len(tables)} tables ({names}) timed in "
                f"{self.seconds:.1f} s")


def time_anchors(task: Task, shards: list[ShardRef], settings: MeasureSettings | None, comm: AlphaBeta,
                 rounds: int = ANCHOR_ROUNDS) -> Anchors:
    """``shards`` each timed alone in ``rounds`` interleaved rounds, the least per stage kept."""
    start = time.perf_counter()
    per_round = time_in_rounds(task, [[s] for s in shards], settings, comm, rounds)  # (R, n, 2)
    least = per_round.min(axis=0)
    timed = {s: (float(f), float(b)) for s, (f, b) in zip(shards, least)}
    return Anchors(timed, time.perf_counter() - start)


def anchored_model(task: Task, model: CostModel, anchors: Anchors) -> AnchoredCostModel:
    """``model``'s mean corrected by ``anchors`` (a risk-priced model's base: the planner prices the risk
    itself from the corrected model, as ``--refit`` does)."""
    base = model.base if isinstance(model, RiskPricedModel) else model
    anchored = AnchoredCostModel(base, anchor_deltas(task, base, anchors.timed))
    for ref, (df, db) in sorted(anchored.deltas.items()):
        log.info("%s: %s at width %d timed %+.2f / %+.2f ms fwd / bwd against the model", task.name,
                 task.tables[ref.table].name, ref.dim, df, db)
    return anchored
