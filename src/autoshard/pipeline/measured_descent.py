"""Balance a plan by its measured devices: a descent whose moves are kept only when the kernels timed here say
so (``autoshard plan --measure-top K --descend N``).

Why: the planners balance the cost model's predictions, and its per-device error (10-19% on the DLRM suites)
is as large as the room perfect balancing would win (docs/benchmarks.md, "Stop 53": the best heuristic's
slowest device sits 8-68% above the mean, as far in another round as in the one that found it). On the
hardware one trains on, the devices themselves can be timed: per device, the least of 3 rounds moves 2-5%
(``hardware.evaluator.DEFAULT_ROUND_STATISTIC``), well inside that room.

Reads top to bottom (row-wise shards and replicas stay on their devices; tables are column-split only by
step 2's halving):
1. **Time the start**: every device of the start plan, the least of ``rounds`` fresh evaluators per
   component (``hardware.evaluator.RoundsMinimum``). These timings are the descent's frame of reference.
2. **Propose**: the measured bottleneck device's moves and swaps (``planners.descent.bottleneck_candidates``)
   and, with ``splits``, each of its shards halved by columns, one half left and the other moved to another
   device (``planners.column_split.split_shard``: a hot table alone on a device can only get cheaper so);
   each changed device estimated as the planning model's price of its new content times how its current
   content measured over the model's price of it, per stage (the model's error on a device is mostly
   common to contents that share most tables; an empty device takes the others' geometric mean); the step
   of each candidate from those, collectives from the comm model.
3. **Time and keep**: the ``proposals`` candidates estimated cheapest (those estimated below the current
   step) have their new devices timed in the same rounds as the devices they replace, and scaled into the
   descent's frame by how those timed then and now (geometric mean): on this shared host the noise comes in
   episodes seconds long that slow everything timed in them (``DEFAULT_ROUND_STATISTIC``), so a content
   timed minutes after the start is not comparable with the start's timing as it is (stop 54: a start timed
   16% slow made one move look like a 9% gain). The measured cheapest candidate is kept if it lowers the
   step by more than ``margin``, else the descent stops. At most ``steps`` moves.
4. **Confirm**: the start and the result timed again side by side in fresh interleaved rounds
   (``hardware.evaluator.evaluate_plans``); the result is returned only if it is cheaper by more than
   ``margin``: picking the least of several timings favours lucky ones, and a fresh timing is not picked.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from autoshard.costs.base import CostModel
from autoshard.costs.comm import AlphaBeta
from autoshard.costs.step import device_volumes, step_cost
from autoshard.errors import AutoshardError
from autoshard.hardware.evaluator import MeasuredCostModel, RoundsMinimum, evaluate_plans
from autoshard.hardware.kernel import MeasureSettings
from autoshard.plan import Plan
from autoshard.planners.column_split import Layout, can_halve, halve, split_shard
from autoshard.planners.descent import SWAP_SAMPLES, Movable, PlacementState, bottleneck_candidates
from autoshard.planners.pricing import price_devices
from autoshard.shards import ShardRef
from autoshard.tasks import Task

log = logging.getLogger(__name__)


NO_MOVE, KEPT_DESCENT, KEPT_START = "no move kept", "kept the descent", "kept the start"
OUTCOMES = (KEPT_DESCENT, KEPT_START, NO_MOVE)
"""How a descent ended, as ``MeasuredDescent.describe`` says it: moved and confirmed, moved but the
side-by-side timing kept the start, or nothing moved."""


@dataclass(frozen=True)
class DescentConfig:
    """How the measured descent searches and times."""

    steps: int
    """Most moves (swaps, halvings) kept."""
    proposals: int = 3
    """Candidates whose new devices are timed per step, the cheapest by the scaled estimate (step 2)."""
    rounds: int = 3
    """Fresh evaluators each new device content is timed with; the least per component is kept."""
    margin: float = 0.01
    """A move is kept, and the result returned, only if it lowers the measured step by more than this
    fraction (the step is a maximum over devices: a lucky bottleneck would otherwise count as progress)."""
    splits: bool = True
    """Also propose halving a bottleneck shard by columns, one half to another device (step 2)."""
    swap_samples: int = SWAP_SAMPLES
    """Swaps of a bottleneck shard with a shard elsewhere considered per step (sampled with ``seed``)."""
    seed: int = 0
    """Seed of the swap sample."""

    def __post_init__(self) -> None:
        if self.steps < 1 or self.proposals < 1 or self.rounds < 1:
            raise AutoshardError(f"measured descent: steps ({self.steps}), proposals ({self.proposals}) and "
                                 f"rounds ({self.rounds}) must be at least 1")
        if not 0 <= self.margin < 1:
            raise AutoshardError(f"measured descent: margin {self.margin} must be in [0, 1)")


@dataclass(frozen=True)
class MeasuredDescent:
    """What ``measured_descent`` did."""

    plan: Plan
    """The returned plan, its cost the confirming measurement's (the start as it came where nothing moved)."""
    steps_ms: tuple[float, ...]
    """The measured step of the start and after each kept move (the descent's own timings)."""
    timed_contents: int
    """Device contents timed by the descent (each ``rounds`` times), the start's and the replaced ones'
    included."""
    confirmed_ms: tuple[float, float]
    """(start, result) as the confirmation timed them side by side."""
    kept: bool
    """Whether the confirmation kept the descended plan (False: the start returned)."""
    measuring_s: float

    @property
    def moves(self) -> int:
        return len(self.steps_ms) - 1

    def describe(self) -> str:
        """One line: moves kept, the step as the descent timed it, the confirmation's verdict (one of
        ``OUTCOMES``)."""
        if not self.moves:
            return f"{NO_MOVE} ({self.timed_contents} contents timed, {self.measuring_s:.1f} s)"
        verdict = KEPT_DESCENT if self.kept else KEPT_START
        return (f"{self.moves} move(s) kept, {self.steps_ms[0]:.3f} -> {self.steps_ms[-1]:.3f} ms as timed; "
                f"side by side {self.confirmed_ms[0]:.3f} -> {self.confirmed_ms[1]:.3f} ms, {verdict} "
                f"({self.timed_contents} contents timed, {self.measuring_s:.1f} s)")


class _Counted:
    """``timer`` that counts the non-empty device contents it was asked to time."""

    def __init__(self, timer: RoundsMinimum) -> None:
        self.timer, self.timed = timer, 0

    def device_costs(self, task: Task, devices: Sequence[Sequence[ShardRef]]) -> np.ndarray:
        self.timed += sum(1 for d in devices if d)
        return self.timer.device_costs(task, devices)


@dataclass(frozen=True)
class _Candidate:
    """A placement one change away from the current one: its layout and ranks, and the two devices that
    change (the bottleneck's new contents, the other device and its new contents)."""

    layout: Layout
    ranks: np.ndarray
    bottleneck: list[ShardRef]
    other: int
    others: list[ShardRef]


def _candidates(state: PlacementState, b: int, rng: np.random.Generator,
                config: DescentConfig) -> list[_Candidate]:
    """Step 2's candidates off device ``b``: moves and swaps, then (``config.splits``) halvings."""
    out = []
    for moves, on_b, r, on_r in bottleneck_candidates(state, b, rng, config.swap_samples):
        ranks = state.ranks.copy()
        for p, to in moves:
            ranks[p] = to
        out.append(_Candidate(state.layout, ranks, state.contents(b, on_b), r, state.contents(r, on_r)))
    if not config.splits:
        return out
    held = state.contents(b, state.devices[b])
    for p in state.devices[b]:
        shard = state.layout[p]
        if not can_halve(shard.dim):
            continue
        kept, moved = halve(shard.dim)  # the smaller half stays, at position p; the other follows it
        layout = split_shard(state.layout, p)
        on_b = [ShardRef(shard.table, kept) if s == shard else s for s in held]
        given = ShardRef(shard.table, moved)
        need = state.task.shard_memory(given)
        for r in range(state.task.num_devices):
            if r == b or shard.table in state.tables_on[r] or need > state.capacity[r] - state.used[r]:
                continue
            on_r = sorted([*state.contents(r, state.devices[r]), given], key=lambda s: s.table)
            out.append(_Candidate(layout, np.insert(state.ranks, p + 1, r), on_b, r, on_r))
    return out


def _scales(measured: np.ndarray, predicted: np.ndarray) -> np.ndarray:
    """(D, 3) what turns the model's price of a device's new content into an estimate of its timing: per
    device and stage, how its current content timed over how the model priced it (for an empty device, the
    geometric mean of the others'); 1 for the comm column, which both take from the comm model."""
    out = np.ones_like(measured)
    for c in (0, 1):
        held = (measured[:, c] > 0) & (predicted[:, c] > 0)
        ratios = measured[held, c] / predicted[held, c]
        out[:, c] = float(np.exp(np.mean(np.log(ratios)))) if held.any() else 1.0
        out[held, c] = ratios
    return out


def _step_ms(task: Task, comm: AlphaBeta, costs: np.ndarray, volumes: np.ndarray) -> np.ndarray:
    """(...,) the step of plans with (..., D, 3) device costs and volumes: kernels as given, collectives
    from ``comm`` (as ``evaluate_plans`` composes a measured plan)."""
    return step_cost(task, comm, costs[..., 0], costs[..., 1], volumes).total_ms


def measured_descent(task: Task, plan: Plan, model: CostModel, config: DescentConfig,
                     settings: MeasureSettings | None = None,
                     comm: AlphaBeta | None = None) -> MeasuredDescent:
    """Steps 1-4 of the module docstring from ``plan``: ``model`` proposes, this machine's kernels (timed
    with ``settings``) decide; collectives by ``comm`` (default: the model's)."""
    comm = comm or model.comm
    start_time = time.perf_counter()
    parts = Movable.of(task, plan)
    state = PlacementState(task, model, parts.layout, parts.ranks, parts.fixed)
    timer = _Counted(RoundsMinimum(lambda: MeasuredCostModel(settings, comm), config.rounds))
    rng = np.random.default_rng(config.seed)

    # 1. the start, every device timed (each distinct content once a call: price_devices)
    measured = price_devices(task, timer, [state.contents(r, dev) for r, dev in enumerate(state.devices)])
    steps = [float(_step_ms(task, comm, measured, state.volumes))]
    while len(steps) <= config.steps and state.layout:
        # 2. propose off the measured bottleneck, each changed device anchored on its measurement
        b = int(np.argmax(measured.sum(axis=1)))
        cands = _candidates(state, b, rng, config)
        if not cands:
            break
        n = len(cands)
        new = [c.bottleneck for c in cands] + [c.others for c in cands]
        other = np.array([c.other for c in cands])
        predicted = price_devices(task, model, new).reshape(2, n, 3)
        volumes = device_volumes(task, new).reshape(2, n, -1)
        scale = _scales(measured, state.costs)
        grid = np.tile(measured, (n, 1, 1))
        grid[:, b] = predicted[0] * scale[b]
        grid[np.arange(n), other] = predicted[1] * scale[other]
        vgrid = np.tile(state.volumes, (n, 1, 1))
        vgrid[:, b], vgrid[np.arange(n), other] = volumes[0], volumes[1]
        estimated = _step_ms(task, comm, grid, vgrid)
        squares = (grid.sum(axis=2) ** 2).sum(axis=1)
        order = [int(i) for i in np.lexsort((squares, estimated)) if estimated[i] < steps[-1]]
        chosen = order[:config.proposals]
        if not chosen:
            break
        # 3. time the chosen candidates' new devices beside the ones they replace; keep the measured best
        # if it clears the margin
        k = len(chosen)
        olds = sorted({b, *other[chosen].tolist()})
        timed = price_devices(task, timer, [new[i] for i in chosen] + [new[n + i] for i in chosen]
                              + [state.contents(r, state.devices[r]) for r in olds])
        # the episode this call ran in, relative to the frame: how the replaced devices timed now vs then
        then = measured[olds, :2].sum(axis=1)
        now = timed[2 * k:, :2].sum(axis=1)
        held = (then > 0) & (now > 0)
        frame = float(np.exp(np.mean(np.log(then[held] / now[held])))) if held.any() else 1.0
        scaled = timed[:2 * k].copy()
        scaled[:, :2] *= frame
        real = grid[chosen].copy()
        real[:, b], real[np.arange(k), other[chosen]] = scaled[:k], scaled[k:]
        real_steps = _step_ms(task, comm, real, vgrid[chosen])
        best = int(np.argmin(real_steps))
        log.debug("%s: from %.3f ms, proposals estimated %s ms, timed %s ms", task.name, steps[-1],
                  np.round(estimated[chosen], 3).tolist(), np.round(real_steps, 3).tolist())
        if real_steps[best] >= steps[-1] * (1 - config.margin):
            break
        kept = cands[chosen[best]]
        state = PlacementState(task, model, kept.layout, kept.ranks, parts.fixed)
        measured = real[best]
        steps.append(float(real_steps[best]))
        log.info("%s: measured descent step %d: %.3f ms", task.name, len(steps) - 1, steps[-1])

    # 4. confirm: the start and the result timed again side by side
    if len(steps) == 1:  # nothing moved: the start as it came
        return MeasuredDescent(plan, tuple(steps), timer.timed, (steps[0], steps[0]), False,
                               time.perf_counter() - start_time)
    result = replace(plan, placements=parts.placements(task, state.layout, state.ranks, plan.algorithm))
    before, after = evaluate_plans(task, [plan, result], settings, comm, config.rounds)
    keep = after.plan_ms < before.plan_ms * (1 - config.margin)
    chosen_plan = result.with_cost(after) if keep else plan.with_cost(before)
    seconds = time.perf_counter() - start_time
    log.info("%s: measured descent %.3f -> %.3f ms in %d moves (%d contents timed, %.1f s); confirmed "
             "%.3f -> %.3f ms, %s", task.name, steps[0], steps[-1], len(steps) - 1, timer.timed,
             seconds, before.plan_ms, after.plan_ms, "kept" if keep else "start kept")
    return MeasuredDescent(chosen_plan, tuple(steps), timer.timed, (before.plan_ms, after.plan_ms),
                           keep, seconds)
