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
2. **Propose**: the moves and swaps (``planners.descent.bottleneck_candidates``) of the measured slow devices
   (``slow_devices``: the slowest forward, the slowest backward and the slowest of both, which can be two
   devices) and, with ``splits``, each of their shards halved by columns, one half left and the other
   moved to another device (``planners.column_split.split_shard``: a hot table alone on a device can only
   get cheaper so); a swap that only exchanges two devices' contents is left out. Each changed device is
   estimated as what it measured plus the model's change of its price, at the slow device's
   measured/predicted ratio per stage (what moved was measured there; a light device's own ratio is mostly
   its fixed overhead's, and priced a hot half landing on it several times too high in
   ``tests/test_measured_descent.py``'s twins); the step from those, collectives
   from the comm model. The ``proposals`` best (lowest estimated step, then sum of squared device totals)
   are each **chained** on the estimates: the best next move while it lowers the estimated step, or raises
   it by at most ``margin`` and lowers the squares, up to ``steps`` moves in all (stop 55: two devices
   holding the same two halved tables, or three one-table devices a few percent apart, only lower the
   step when each is lightened; on DLRM-20 (8) task 0, two such twins, no single move was estimated below
   the step).
3. **Time and keep**: each chain estimated below the current step has its changed devices timed in one call
   with the devices they replace, all scaled into the start's frame by how the replaced ones timed then and
   now (geometric mean), and compared with the current placement as that same call timed it: on this
   shared host the noise comes in episodes seconds long that slow everything timed in them
   (``DEFAULT_ROUND_STATISTIC``), so a content timed minutes apart is not comparable as it is (stop 54: a
   start timed 16% slow made one move look like a 9% gain; stop 55: a swap of two devices' whole contents
   timed as a 5% gain against the start's older timing). The cheapest chain is kept if it lowers that step
   by more than ``margin``, else the descent stops. At most ``steps`` moves.
4. **Confirm**: the start and the result timed again side by side in fresh interleaved rounds
   (``hardware.evaluator.evaluate_plans``); the result is returned only if it is cheaper by more than
   ``margin``: picking the least of several timings favours lucky ones, and a fresh timing is not picked.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
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
    """Most moves (moves, swaps, halvings) kept in all."""
    proposals: int = 3
    """Chains whose changed devices are timed per step, from the first moves estimated best (step 2)."""
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
    """The measured step of the start and after each kept step of one or more moves (the descent's own
    timings, each in the call that timed it)."""
    moves: int
    """Moves (moves, swaps, halvings) kept in all."""
    gains: tuple[float, ...]
    """Each kept step's timed step over the placement before it as timed in the same call (each below
    1 - margin)."""
    timed_contents: int
    """Device contents timed by the descent (each ``rounds`` times), the start's and the replaced ones'
    included."""
    confirmed_ms: tuple[float, float]
    """(start, result) as the confirmation timed them side by side."""
    kept: bool
    """Whether the confirmation kept the descended plan (False: the start returned)."""
    measuring_s: float

    def describe(self) -> str:
        """One line: moves kept, the step as the descent timed it, the confirmation's verdict (one of
        ``OUTCOMES``)."""
        if not self.moves:
            return f"{NO_MOVE} ({self.timed_contents} contents timed, {self.measuring_s:.1f} s)"
        verdict = KEPT_DESCENT if self.kept else KEPT_START
        return (f"{self.moves} move(s) kept in {len(self.steps_ms) - 1} timed step(s), "
                f"{self.steps_ms[0]:.3f} -> {self.steps_ms[-1]:.3f} ms as timed; "
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
    change (the slow device it lightens and its new contents, the other device and its new contents)."""

    layout: Layout
    ranks: np.ndarray
    source: int
    bottleneck: list[ShardRef]
    other: int
    others: list[ShardRef]


def _candidates(state: PlacementState, b: int, rng: np.random.Generator,
                config: DescentConfig) -> list[_Candidate]:
    """Step 2's candidates off device ``b``: moves and swaps, then (``config.splits``) halvings; a swap that
    only exchanges two devices' whole contents (they time alike wherever they sit) is left out."""
    out = []
    for moves, on_b, r, on_r in bottleneck_candidates(state, b, rng, config.swap_samples):
        ranks = state.ranks.copy()
        for p, to in moves:
            ranks[p] = to
        new_b, new_r = state.contents(b, on_b), state.contents(r, on_r)
        if Counter((tuple(new_b), tuple(new_r))) == Counter((tuple(state.contents(b, state.devices[b])),
                                                            tuple(state.contents(r, state.devices[r])))):
            continue
        out.append(_Candidate(state.layout, ranks, b, new_b, r, new_r))
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
            out.append(_Candidate(layout, np.insert(state.ranks, p + 1, r), b, on_b, r, on_r))
    return out


def slow_devices(measured: np.ndarray) -> list[int]:
    """The devices a move can lower the step from: the slowest in the forward, in the backward, and in
    both together (the step adds the slowest forward to the slowest backward, which two devices can set;
    the devices' own comm column is not in the step)."""
    kernels = measured[:, :2]
    return list(dict.fromkeys(int(np.argmax(c)) for c in (kernels[:, 0], kernels[:, 1], kernels.sum(axis=1))))


def _scales(measured: np.ndarray, predicted: np.ndarray) -> np.ndarray:
    """(D, 3) what turns the model's change of a device's price into a change of its timing: per device and
    stage, how its current content timed over how the model priced it (for an empty device, the geometric
    mean of the others'); 1 for the comm column, which both take from the comm model."""
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


@dataclass(frozen=True)
class _Proposal:
    """Where a chain of estimated moves leads: the placement, each device's estimate (measured where the
    device did not change) and the estimated step."""

    state: PlacementState
    estimate: np.ndarray
    step: float
    moves: int

    @property
    def squares(self) -> float:
        return float((self.estimate[:, :2].sum(axis=1) ** 2).sum())


def _next_moves(here: _Proposal, model: CostModel, comm: AlphaBeta, rng: np.random.Generator,
                config: DescentConfig, fixed: Sequence[Sequence[ShardRef]], limit: int) -> list[_Proposal]:
    """One change from ``here`` off its slow devices, each estimated (step 2), the ``limit`` best; only those
    that lower the estimated step, or raise it by at most the margin and lower the sum of squared device
    totals (a move off one of two equally slow devices lowers the step only with the next one, and can add
    a little to a collective's busiest rank meanwhile)."""
    state, task = here.state, here.state.task
    unique: dict[tuple, _Candidate] = {}  # a swap between two slow devices is proposed from both
    for b in slow_devices(here.estimate):
        for c in _candidates(state, b, rng, config):
            unique.setdefault((c.layout, tuple(c.ranks.tolist())), c)
    cands = list(unique.values())
    if not cands:
        return []
    n = len(cands)
    new = [c.bottleneck for c in cands] + [c.others for c in cands]
    source = np.array([c.source for c in cands])
    other = np.array([c.other for c in cands])
    predicted = price_devices(task, model, new).reshape(2, n, 3)
    volumes = device_volumes(task, new).reshape(2, n, -1)
    # what moved was measured on the slow device: the model's change of each device, at that device's
    # measured/predicted ratio, added to what the device measured (a light device's own ratio says
    # little about a hot table landing on it)
    scale = _scales(here.estimate, state.costs)[source]
    grid = np.tile(here.estimate, (n, 1, 1))
    for end, device in ((0, source), (1, other)):
        was = here.estimate[device]
        grid[np.arange(n), device] = np.maximum(was + (predicted[end] - state.costs[device]) * scale, 0.0)
        grid[np.arange(n), device, 2] = predicted[end, :, 2]
    vgrid = np.tile(state.volumes, (n, 1, 1))
    vgrid[np.arange(n), source], vgrid[np.arange(n), other] = volumes[0], volumes[1]
    estimated = _step_ms(task, comm, grid, vgrid)
    squares = (grid[:, :, :2].sum(axis=2) ** 2).sum(axis=1)
    sideways = (estimated <= here.step * (1 + config.margin)) & (squares < here.squares)
    better = (estimated < here.step) | sideways
    chosen = [int(i) for i in np.lexsort((squares, estimated)) if better[i]][:limit]
    # a PlacementState prices every device with the model: built only for the ones returned
    return [_Proposal(PlacementState(task, model, cands[i].layout, cands[i].ranks, fixed), grid[i],
                      float(estimated[i]), here.moves + 1) for i in chosen]


def _chain(first: _Proposal, model: CostModel, comm: AlphaBeta, rng: np.random.Generator,
           config: DescentConfig, fixed: Sequence[Sequence[ShardRef]], most: int) -> _Proposal:
    """``first`` followed by the best next move while the estimate improves, at most ``most`` moves in all;
    cut where its estimated step was least (stop 55: chains that ran to the end of the moves spent all 8
    on DLRM-20 (8) tasks 8 and 9 for 0.5-4% as timed)."""
    here = best = first
    while here.moves < most:
        following = _next_moves(here, model, comm, rng, config, fixed, limit=1)
        if not following:
            break
        here = following[0]
        if (here.step, here.squares) < (best.step, best.squares):
            best = here
    return best


def _changed(before: PlacementState, after: PlacementState) -> list[int]:
    """The devices whose contents differ between two placements."""
    return [r for r in range(before.task.num_devices)
            if Counter(before.contents(r, before.devices[r])) != Counter(after.contents(r, after.devices[r]))]


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
    moves, gains = 0, []
    while moves < config.steps and state.layout:
        # 2. propose off the measured slow devices, each changed device anchored on its measurement; each
        # proposal chained on the estimates while they improve
        here = _Proposal(state, measured, steps[-1], moves)
        chains = [_chain(p, model, comm, rng, config, parts.fixed, config.steps)
                  for p in _next_moves(here, model, comm, rng, config, parts.fixed, config.proposals)]
        chains = [c for c in chains if c.step < steps[-1]]
        if not chains:
            break
        # 3. time the chains' changed devices beside the ones they replace, in the same rounds; compare each
        # with the current placement as timed in that call (a content timed minutes apart is not
        # comparable as it is on this host), kept if it clears the margin
        changed = [_changed(state, c.state) for c in chains]
        olds = sorted({r for ch in changed for r in ch})
        fresh = [c.state.contents(r, c.state.devices[r]) for c, ch in zip(chains, changed) for r in ch]
        timed = price_devices(task, timer, fresh + [state.contents(r, state.devices[r]) for r in olds])
        then, now = measured[olds, :2].sum(axis=1), timed[len(fresh):, :2].sum(axis=1)
        held = (then > 0) & (now > 0)
        frame = float(np.exp(np.mean(np.log(then[held] / now[held])))) if held.any() else 1.0
        timed[:, :2] *= frame  # into the start's frame: the episode this call ran in, relative to it
        current = measured.copy()
        current[olds] = timed[len(fresh):]
        current_step = float(_step_ms(task, comm, current, state.volumes))
        reals, at = [], 0
        for c, ch in zip(chains, changed):
            real = current.copy()
            real[ch] = timed[at:at + len(ch)]
            at += len(ch)
            reals.append(real)
        real_steps = np.array([float(_step_ms(task, comm, real, c.state.volumes))
                               for real, c in zip(reals, chains)])
        best = int(np.argmin(real_steps))
        log.debug("%s: from %.3f ms (%.3f ms in this call), chains of %s moves estimated %s ms, timed %s ms",
                  task.name, steps[-1], current_step, [c.moves - moves for c in chains],
                  [round(c.step, 3) for c in chains], np.round(real_steps, 3).tolist())
        if real_steps[best] >= current_step * (1 - config.margin):
            break
        state, measured, moves = chains[best].state, reals[best], chains[best].moves
        steps.append(float(real_steps[best]))
        gains.append(float(real_steps[best]) / current_step)
        log.info("%s: measured descent step %d (%d moves): %.3f ms", task.name, len(steps) - 1, moves,
                 steps[-1])

    # 4. confirm: the start and the result timed again side by side
    if len(steps) == 1:  # nothing moved: the start as it came
        return MeasuredDescent(plan, tuple(steps), 0, (), timer.timed, (steps[0], steps[0]), False,
                               time.perf_counter() - start_time)
    result = replace(plan, placements=parts.placements(task, state.layout, state.ranks, plan.algorithm))
    before, after = evaluate_plans(task, [plan, result], settings, comm, config.rounds)
    keep = after.plan_ms < before.plan_ms * (1 - config.margin)
    chosen_plan = result.with_cost(after) if keep else plan.with_cost(before)
    seconds = time.perf_counter() - start_time
    log.info("%s: measured descent %.3f -> %.3f ms in %d moves (%d contents timed, %.1f s); confirmed "
             "%.3f -> %.3f ms, %s", task.name, steps[0], steps[-1], moves, timer.timed,
             seconds, before.plan_ms, after.plan_ms, "kept" if keep else "start kept")
    return MeasuredDescent(chosen_plan, tuple(steps), moves, tuple(gains), timer.timed,
                           (before.plan_ms, after.plan_ms), keep, seconds)
