"""The descent on the model's step: move and swap the shards of a fixed layout between devices, from a start
placement, keeping what lowers the step (``search``, ``ilp`` and ``rl`` after their sharding moves,
``planners.finish``).

1. **Descent.** Repeatedly take the bottleneck device ``b`` (the largest fwd + bwd + own comm) and price,
   in one batched ``device_costs`` call, every move of one of its shards to another device and a seeded
   sample of swaps of one of its shards with a shard elsewhere (memory respected; column shards of a table
   stay on distinct devices). Apply the candidate with the lowest (plan cost, sum of squared device costs)
   if it is lower than the current one; the second key lets the descent leave ties between bottleneck
   devices. Stop when no candidate improves.
2. **Kicks.** Until ``kicks`` rounds or the deadline: from the best placement, move ``kick_size`` random
   shards to random devices with room, descend again, and keep the result if the model scores it better.

Column shards move like whole tables; the layout (which tables are split, and how) stays. Shards that are
not part of the layout (``fixed``: the row-wise shards and replicas the sharding moves made) stay on their
devices and are priced with them. The result is the best placement seen, so the model never scores it
worse than the start.
"""

from __future__ import annotations

import bisect
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from autoshard.costs.base import CostModel, plan_cost
from autoshard.costs.step import device_volumes
from autoshard.plan import Plan, ShardingType, TablePlacement
from autoshard.planners.column_split import Layout, from_plan, shard_memory, to_plan
from autoshard.planners.pricing import price_devices, step_ms
from autoshard.shards import ShardRef
from autoshard.tasks import Task

log = logging.getLogger(__name__)

MOVABLE = (ShardingType.TABLE_WISE, ShardingType.COLUMN_WISE)
"""The placements the descent moves (a layout holds these; ``column_split.from_plan``)."""

SWAP_SAMPLES = 256
"""Swaps (bottleneck shard x shard elsewhere) priced per descent step by default, sampled with the seed when
there are more."""

KICK_SIZE = 3
"""Random shard moves per kick by default."""

IMPROVEMENT_RTOL = 1e-9
"""A candidate must lower the objective by this relative margin: float noise never counts as progress."""


class PlacementState:
    """A placement of a fixed layout: ranks, each device's shards (sorted positions), memory and model
    totals. ``fixed``: shards each device holds besides the layout's, which never move (row-wise shards and
    replicas the sharding moves made); they take memory and are priced with the device."""

    def __init__(self, task: Task, model: CostModel, layout: Layout, ranks: np.ndarray,
                 fixed: Sequence[Sequence[ShardRef]] | None = None) -> None:
        self.task, self.model, self.layout = task, model, layout
        self.memory = shard_memory(task, layout)
        self.fixed = [list(f) for f in fixed] if fixed is not None else [[] for _ in range(task.num_devices)]
        self.capacity = np.array(task.device_memory, dtype=np.int64) - np.array(
            [sum(task.shard_memory(s) for s in f) for f in self.fixed], dtype=np.int64)
        self.set_ranks(ranks)

    def set_ranks(self, ranks: np.ndarray) -> None:
        d = self.task.num_devices
        self.ranks = np.array(ranks, dtype=np.int64)
        self.devices: list[list[int]] = [[] for _ in range(d)]
        for p, r in enumerate(self.ranks.tolist()):
            self.devices[r].append(p)
        self.used = np.bincount(self.ranks, weights=self.memory, minlength=d).astype(np.int64)
        self.tables_on = [{self.layout[p].table for p in dev} for dev in self.devices]
        contents = [self.contents(r, dev) for r, dev in enumerate(self.devices)]
        self.costs = np.asarray(self.model.device_costs(self.task, contents), dtype=np.float64)
        self.volumes = device_volumes(self.task, contents)

    @property
    def totals(self) -> np.ndarray:
        """(D,) each device's predicted fwd + bwd + own comm."""
        return self.costs.sum(axis=1)

    def contents(self, r: int, positions: list[int]) -> list[ShardRef]:
        """What device ``r`` holds with the layout's shards ``positions``: those and its fixed shards, in
        table order (``Plan.device_shards``' order, so the model sees the plan's own input)."""
        shards = [self.layout[p] for p in positions]
        if not self.fixed[r]:
            return shards
        return sorted(shards + self.fixed[r], key=lambda s: s.table)

    def objective(self) -> tuple[float, float]:
        """(step cost, sum of squared device totals): the second key lets the search leave ties."""
        step = float(step_ms(self.task, self.model, self.costs, self.volumes))
        return step, float((self.totals**2).sum())

    def can_move(self, p: int, r: int, leaving: int | None = None) -> bool:
        """Whether shard ``p`` fits on device ``r`` (optionally after shard ``leaving`` leaves ``r``)."""
        free = self.capacity[r] - self.used[r] + (self.memory[leaving] if leaving is not None else 0)
        if self.memory[p] > free:
            return False
        return self.layout[p].table not in self.tables_on[r]  # callers never swap two shards of one table

    def apply(self, moves: list[tuple[int, int]]) -> None:
        """Move shard p to device r for each (p, r), then re-price the changed devices."""
        changed = set()
        for p, r in moves:
            old = int(self.ranks[p])
            self.devices[old].remove(p)
            bisect.insort(self.devices[r], p)
            self.ranks[p] = r
            self.used[old] -= self.memory[p]
            self.used[r] += self.memory[p]
            changed.update((old, r))
        for r in changed:
            self.tables_on[r] = {self.layout[p].table for p in self.devices[r]}
        changed_list = sorted(changed)
        contents = [self.contents(r, self.devices[r]) for r in changed_list]
        self.costs = self.costs.copy()
        self.costs[changed_list] = self.model.device_costs(self.task, contents)
        self.volumes = self.volumes.copy()
        self.volumes[changed_list] = device_volumes(self.task, contents)


def _with(positions: list[int], add: int | None = None, remove: int | None = None) -> list[int]:
    out = [x for x in positions if x != remove]
    if add is not None:
        bisect.insort(out, add)
    return out


Candidate = tuple[list[tuple[int, int]], list[int], int, list[int]]
"""A move or swap off device ``b``: ((shard, new device), ...), b's new shards, the other device, its new
shards (positions in the layout, sorted)."""


def bottleneck_candidates(state: PlacementState, b: int, rng: np.random.Generator,
                          samples: int) -> list[Candidate]:
    """Every move of one of device ``b``'s shards to another device with room, and a seeded sample of at most
    ``samples`` swaps of one of its shards with a shard elsewhere (memory respected, two shards of one table
    never on one device)."""
    d = state.task.num_devices
    on_b = state.devices[b]
    cands: list[Candidate] = []
    for p in on_b:
        without = _with(on_b, remove=p)
        for r in range(d):
            if r != b and state.can_move(p, r):
                cands.append(([(p, r)], without, r, _with(state.devices[r], add=p)))
    others = np.flatnonzero(state.ranks != b)
    pairs = len(on_b) * len(others)
    if pairs and samples:
        if pairs <= samples:
            chosen = np.arange(pairs)
        else:
            chosen = np.sort(rng.choice(pairs, size=samples, replace=False))
        for k in chosen.tolist():
            p, q = on_b[k // len(others)], int(others[k % len(others)])
            r = int(state.ranks[q])
            if state.layout[p].table == state.layout[q].table:
                continue
            if state.can_move(p, r, leaving=q) and state.can_move(q, b, leaving=p):
                cands.append(([(p, r), (q, b)], _with(on_b, add=q, remove=p), r,
                              _with(state.devices[r], add=p, remove=q)))
    return cands


def _descend(state: PlacementState, rng: np.random.Generator, samples: int,
             deadline: float) -> tuple[int, bool]:
    """Steepest descent from the bottleneck device; returns (steps applied, stopped by the deadline)."""
    steps = 0
    last = 0.0  # duration of the last step: don't start one that would end past the deadline
    while True:
        began = time.perf_counter()
        if began + last > deadline:
            return steps, True
        b = int(np.argmax(state.totals))
        cands = bottleneck_candidates(state, b, rng, samples)
        if not cands:
            return steps, False
        devices = ([state.contents(b, c[1]) for c in cands]
                   + [state.contents(c[2], c[3]) for c in cands])
        n = len(cands)
        costs = price_devices(state.task, state.model, devices).reshape(2, n, 3)
        volumes = device_volumes(state.task, devices).reshape(2, n, -1)
        other = np.array([c[2] for c in cands])
        grid = np.tile(state.costs, (n, 1, 1))
        grid[:, b], grid[np.arange(n), other] = costs[0], costs[1]
        vgrid = np.tile(state.volumes, (n, 1, 1))
        vgrid[:, b], vgrid[np.arange(n), other] = volumes[0], volumes[1]
        maxes = step_ms(state.task, state.model, grid, vgrid)
        squares = (grid.sum(axis=2)**2).sum(axis=1)
        best = int(np.lexsort((squares, maxes))[0])
        cur_max, cur_sq = state.objective()
        better = maxes[best] < cur_max * (1 - IMPROVEMENT_RTOL) or (
            maxes[best] <= cur_max and squares[best] < cur_sq * (1 - IMPROVEMENT_RTOL))
        if not better:
            return steps, False
        state.apply(cands[best][0])
        steps += 1
        last = time.perf_counter() - began


def _kick(state: PlacementState, rng: np.random.Generator, size: int) -> None:
    """Move ``size`` random shards to random devices with room (fewer if nothing can move)."""
    moves = 0
    for _ in range(size * 10):
        if moves == size:
            break
        p = int(rng.integers(len(state.layout)))
        room = [r for r in range(state.task.num_devices) if r != state.ranks[p] and state.can_move(p, r)]
        if room:
            state.apply([(p, int(rng.choice(room)))])
            moves += 1


@dataclass(frozen=True)
class Refined:
    """What ``refine_placement`` did."""

    ranks: np.ndarray
    """The best placement seen (the model never scores it above the start)."""
    steps: int
    """Improving moves/swaps applied."""
    kicks: int
    """Perturbation rounds run."""
    timed_out: bool
    """Whether the deadline stopped it (the result may then depend on machine speed)."""


def refine_placement(task: Task, model: CostModel, layout: Layout, ranks: np.ndarray, deadline: float,
                     seed: int = 0, swap_samples: int = SWAP_SAMPLES, kicks: int = 0,
                     kick_size: int = KICK_SIZE,
                     fixed: Sequence[Sequence[ShardRef]] | None = None) -> Refined:
    """Descend from ``ranks`` on the model's step cost, then up to ``kicks`` perturb-and-descend rounds from
    the best placement, all before ``deadline`` (steps 1 and 2 of the module docstring); the layout stays,
    and so do the ``fixed`` shards of each device (priced with it, never moved)."""
    if not layout:  # every table row-wise or replicated: nothing moves
        return Refined(np.zeros(0, dtype=np.int64), 0, 0, False)
    rng = np.random.default_rng(seed)
    state = PlacementState(task, model, layout, ranks, fixed)
    steps, timed_out = _descend(state, rng, swap_samples, deadline)
    best_ranks, best_obj = state.ranks.copy(), state.objective()
    done = 0
    while not timed_out and done < kicks:
        done += 1
        _kick(state, rng, kick_size)
        more, timed_out = _descend(state, rng, swap_samples, deadline)
        steps += more
        if state.objective() < best_obj:
            best_ranks, best_obj = state.ranks.copy(), state.objective()
        else:
            state.set_ranks(best_ranks)
    return Refined(best_ranks, steps, done, timed_out)


@dataclass(frozen=True)
class Movable:
    """A plan split into what a descent moves and what stays: its table- and column-wise shards as a layout
    and one rank each, and its other placements (row-wise shards, replicas) with each device's shards of
    them (priced with the device, never moved)."""

    layout: Layout
    ranks: np.ndarray
    kept: tuple[TablePlacement, ...]
    fixed: list[list[ShardRef]]

    @staticmethod
    def of(task: Task, plan: Plan) -> Movable:
        movable = replace(plan, placements=tuple(p for p in plan.placements if p.sharding_type in MOVABLE))
        kept = tuple(p for p in plan.placements if p.sharding_type not in MOVABLE)
        layout, ranks = from_plan(task, movable)
        return Movable(layout, ranks, kept, replace(plan, placements=kept).device_shards(task))

    def placements(self, task: Task, layout: Layout, ranks: np.ndarray,
                   who: str) -> tuple[TablePlacement, ...]:
        """The placements of ``layout`` at ``ranks`` (as planner ``who``'s) and the kept ones, in table
        order."""
        order = {t.name: i for i, t in enumerate(task.tables)}
        return tuple(sorted(to_plan(task, layout, ranks, who).placements + self.kept,
                            key=lambda p: order[p.table]))


def refine_plan(task: Task, model: CostModel, plan: Plan, deadline: float, seed: int, kicks: int, who: str,
                swap_samples: int = SWAP_SAMPLES, kick_size: int = KICK_SIZE) -> tuple[Plan, Refined]:
    """``plan`` after ``refine_placement`` from its placement (its layout kept), as planner ``who``'s plan;
    logs the model's step before and after (``planners.finish``: ``ilp``, ``rl`` and ``search`` after their
    sharding moves). Its table- and column-wise placements move; the others (row-wise shards, replicas) stay
    where they are and are priced with their devices."""
    parts = Movable.of(task, plan)
    before = plan_cost(model, task, plan).plan_ms
    refined = refine_placement(task, model, parts.layout, parts.ranks, deadline, seed, swap_samples, kicks,
                               kick_size, parts.fixed)
    plan = Plan(parts.placements(task, parts.layout, refined.ranks, who), task.num_devices, who, task.name)
    log.info("%s: descent on the model's step from %.3f ms to %.3f ms in %d steps, %d kicks%s", who, before,
             plan_cost(model, task, plan).plan_ms, refined.steps, refined.kicks,
             " (stopped by the time limit)" if refined.timed_out else "")
    return plan, refined
