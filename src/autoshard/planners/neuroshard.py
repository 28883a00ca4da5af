"""NeuroShard (Zha et al., MLSys 2023): a pre-trained cost model plus search over column splits
and placements.

The search, top to bottom:

1. **Beam search over column splits.** A state is a layout (``column_split``): every table whole, or some
   halved into column shards (dims multiples of 4). A state's children each halve one more shard, chosen among
   its ``candidates`` largest shards by memory and its ``candidates`` costliest by predicted cost (with
   ``even_splits``, not the paper's, also every shard of one split table halved at once). Each level keeps
   the ``beam_width`` cheapest layouts; the search stops after ``max_depth`` levels or when nothing splits.
2. **Greedy placement under a grid of caps.** Each layout is placed by a greedy: shards in descending
   predicted cost, each onto the device with the lowest load among those that have memory room, hold no other
   shard of the same table (TorchRec column shards sit on distinct ranks), and stay under a per-device cap on
   the dim sum. A device's all-to-all volume is linear in its dim sum, so the cap bounds communication while
   the load balances the predicted cost; it is ``scale x`` the balanced dim sum (total dim / devices), swept
   over a grid (the paper's 1.0 .. 1.5 in 11 steps) plus, optionally, no cap at all.
3. **Scoring.** Every complete placement is scored with the cost model: the max over devices of the predicted
   fwd + bwd + comm of the device's fused shards (one batched ``device_costs`` call per beam level). A layout
   scores its best placement; the planner returns the best placement seen at any level.

Differences to the reference implementation: during the greedy a device's load is the sum of its shards'
marginal costs predicted by the model (standalone fwd + bwd + comm minus the per-device fixed overhead; all
shards priced in one batched call), where the reference re-predicts the device's fused *compute* cost after
every placement. Counting communication in the load balances it directly (the cap alone left a 0.4% worse
plan at 856 tables with the roofline model), and an additive load makes a greedy step model-free, so all
greedy runs of a beam level (layouts x grid) advance in lockstep as numpy arrays; the model's fused device
costs still decide which placement wins. With a strongly non-additive model the additive load misjudges
devices; ``search`` then corrects the placement with the model's real device costs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from autoshard.costs.base import CostModel
from autoshard.costs.loading import resolve_cost_model
from autoshard.errors import AutoshardError, InfeasibleError
from autoshard.plan import Plan
from autoshard.planners.base import PlannerOptions, config_from_extra
from autoshard.planners.column_split import (
    Layout,
    can_halve,
    layout_key,
    shards_per_table,
    split_shard,
    split_table,
    table_wise_layout,
    to_plan,
)
from autoshard.planners.pricing import ShardCosts, plan_costs, planner_settings, planning_model
from autoshard.planners.row_split import is_piece
from autoshard.planners.sharding_moves import improve
from autoshard.tasks import Task

log = logging.getLogger(__name__)

NEUROSHARD_RISK = 0.0
"""neuroshard's k when ``--option risk=K`` is not given: its devices priced at the model's mean, as search's
(``planners.local_search.SEARCH_RISK``) and ilp's (``planners.exact.ILP_RISK``), not at the model's
``risk_k``. Chosen by the measured cost of the plans each k gives on held-out tasks
(``benchmarks/risk_objective.py --planner neuroshard``, docs/benchmarks.md, "Stop 60"): on 10 train tasks of
each of DLRM-20 (4), DLRM-10 (8), DLRM-50 (4) and DLRM-20 (8), its own plans at the mean measured 0.977
[0.956, 0.998] of its plans at risk_k, and behind the guard 0.989 [0.969, 1.009] (lower, not resolved); the
guard still weighs the spread."""


EVEN_SPLITS = True
"""Whether the column-split beam's children also halve every shard of a split table at once
(``NeuroShardConfig.even_splits``; ``ilp``'s and ``rl``'s split search too). On since stop 90, with the
shipped model it was chosen with (the seed-1 wide model, ``autoshard/data/DEFAULTS.md``). The stop-30 model,
shipped until then, planned better without it: on DLRM-10 (8)
(stop 71's tasks, the same day, docs/benchmarks.md "Stop 88") the stop-30 model planning with it measured
0.992 [0.982, 0.999] of itself without for search (rl 0.994, neuroshard 0.994, ilp 1.001), the 4-way splits
it reaches priced 2-3% cheaper and measured 2-4% dearer (the model under-prices the backward of devices
holding 3-4 shards); the seed-1 wide candidate needs it (without, it missed the 4-way split of the hot table
on 2 of 10 tasks and measured 0.964-0.975 of the default; with it, level: 1.002 for rl, neuroshard and
search, 1.020 [0.998, 1.044] for ilp)."""


@dataclass(frozen=True)
class NeuroShardConfig:
    """NeuroShard's search settings; defaults are the reference implementation's (``shard(k=3, n=10,
    max_length=10, search_steps=11)`` with caps 1.0 .. 1.5)."""

    beam_width: int = 3
    """Layouts kept per beam level (the paper's k)."""
    max_depth: int = 10
    """Beam levels after the table-wise one (the paper's max_length): the most column splits in a plan (more
    with ``even_splits``, whose children may halve several shards in one level)."""
    candidates: int = 10
    """A state's children halve one of its this-many largest shards by memory or costliest by cost (n)."""
    cap_start: float = 1.0
    """Smallest per-device dim-sum cap, as a multiple of the balanced dim sum (total dim / devices)."""
    cap_end: float = 1.5
    """Largest per-device dim-sum cap, same unit."""
    cap_steps: int = 11
    """Number of caps on the grid from cap_start to cap_end (inclusive)."""
    sharding_moves: int = 8
    """Tables (hottest first) then tried as data-parallel replicas or row-wise shards
    (``sharding_moves``); 0 = table- and column-wise only."""
    uneven_rows: bool = False
    """Also try row-wise ranges of equal lookup shares for skewed tables (``sharding_moves``): cheaper where
    a few rows take most lookups, but TorchRec's DMP cannot run them (it bucketises by even blocks), so off
    by default; autoshard's runtime runs them."""
    uncapped: bool = True
    """Also run the greedy with no dim-sum cap (memory only), so a tight grid never hides a feasible plan."""
    even_splits: bool = EVEN_SPLITS
    """A state's children also halve every shard of one already split table at once (8 + 8 -> 4 x 4), so the
    next even split is one level away, not behind an uneven layout (8 + 4 + 4) the beam may drop; default
    ``EVEN_SPLITS``."""

    def __post_init__(self) -> None:
        for name in ("beam_width", "candidates", "cap_steps"):
            if int(getattr(self, name)) < 1:
                raise AutoshardError(f"neuroshard setting {name}={getattr(self, name)} must be at least 1")
        if self.max_depth < 0:
            raise AutoshardError(f"neuroshard setting max_depth={self.max_depth} must be 0 or more")
        if not 0.0 < self.cap_start <= self.cap_end:
            raise AutoshardError(
                f"neuroshard caps {self.cap_start}..{self.cap_end}: need 0 < cap_start <= cap_end"
            )

    def cap_scales(self) -> np.ndarray:
        grid = np.linspace(self.cap_start, self.cap_end, self.cap_steps)
        return np.append(grid, np.inf) if self.uncapped else grid


def greedy_place(task: Task, layouts: Sequence[Layout], shard_load: np.ndarray, memory: np.ndarray,
                 scales: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Run the capped greedy for every layout x cap scale in lockstep.

    ``layouts`` all have S shards; ``shard_load`` (predicted marginal cost) and ``memory`` are (L, S). Returns
    ranks (L*G, S), -1 for shards a run could not place, and how many shards each run placed (a run stops at
    its first unplaceable shard). Run ``l * G + g`` is layout ``l`` under cap ``scales[g]``.
    """
    num_layouts, num_shards = shard_load.shape
    g, d = len(scales), task.num_devices
    tables = np.array([[s.table for s in lay] for lay in layouts], dtype=np.int64)
    dims = np.array([[s.dim for s in lay] for lay in layouts], dtype=np.float64)
    # only split tables can clash (two shards on one device): number them per layout, -1 for whole tables
    split = np.full_like(tables, -1)
    for lay in range(num_layouts):
        counts = np.bincount(tables[lay], minlength=task.num_tables)
        ids = np.cumsum(counts > 1) - 1
        split[lay] = np.where(counts[tables[lay]] > 1, ids[tables[lay]], -1)
    order = np.argsort(-shard_load, axis=1, kind="stable")  # costliest first, ties in layout order
    split_o, dims_o = np.take_along_axis(split, order, 1), np.take_along_axis(dims, order, 1)
    load_o, memory_o = np.take_along_axis(shard_load, order, 1), np.take_along_axis(memory, order, 1)

    runs = num_layouts * g
    run = np.arange(runs)  # the run each row of the state arrays belongs to (rows of dead runs are dropped)
    run_layout = np.repeat(np.arange(num_layouts), g)
    room = np.tile(scales, num_layouts) * (sum(tb.dim for tb in task.tables) / d)  # dim-sum room left
    room = np.tile(room[:, None], (1, d))
    free = np.tile(np.array(task.device_memory, dtype=np.int64), (runs, 1))
    load = np.zeros((runs, d))
    holds = np.zeros((runs, max(int(split.max()) + 1, 1), d), dtype=bool)
    placed = np.zeros(runs, dtype=np.int64)
    ranks_o = np.full((runs, num_shards), -1, dtype=np.int64)
    for k in range(num_shards):
        lay = run_layout[run]
        sk, dk = split_o[lay, k], dims_o[lay, k]
        mk, ck = memory_o[lay, k], load_o[lay, k]
        ok = (free >= mk[:, None]) & (room >= dk[:, None])
        clash = np.flatnonzero(sk >= 0)
        if len(clash):
            ok[clash] &= ~holds[clash, sk[clash]]
        r = np.where(ok, load, np.inf).argmin(axis=1)
        rows = np.arange(len(run))
        good = ok[rows, r]
        if not good.all():  # drop the runs that could not place this shard
            keep = np.flatnonzero(good)
            if len(keep) == 0:
                break
            run, r, sk, dk, mk, ck = run[keep], r[keep], sk[keep], dk[keep], mk[keep], ck[keep]
            room, free, load, holds = room[keep], free[keep], load[keep], holds[keep]
            rows = np.arange(len(run))
        free[rows, r] -= mk
        room[rows, r] -= dk
        load[rows, r] += ck
        hit = np.flatnonzero(sk >= 0)
        holds[hit, sk[hit], r[hit]] = True
        ranks_o[run, k] = r
        placed[run] += 1
    ranks = np.empty_like(ranks_o)
    np.put_along_axis(ranks, order[run_layout], ranks_o, axis=1)
    return ranks, placed


class NeuroShardPlanner:
    """Beam search over column splits x greedy placement under a cap grid, scored by a cost model."""

    name = "neuroshard"

    def __init__(self, cost_model: CostModel | None = None, config: NeuroShardConfig | None = None,
                 time_limit_s: float | None = None) -> None:
        self.cost_model = resolve_cost_model(cost_model)
        self.config = config or NeuroShardConfig()
        # seconds the beam search may take (``search``'s deadline: the table-wise level always runs; None: no
        # limit). Why: unbounded, it took 22-24 s on 856 tables x 128 devices where the options said 3
        # (docs/benchmarks.md, "Stop 50")
        self.time_limit_s = time_limit_s

    def _split_candidates(self, task: Task, layout: Layout, costs: ShardCosts) -> list[int]:
        """Positions of the shards a child may halve: splittable, table not yet on every device, and among the
        ``candidates`` largest by memory or costliest by predicted cost."""
        counts = shards_per_table(layout, task.num_tables)
        # row pieces of a table larger than a device (``row_split``) stay whole: a row range is never
        # column-split too
        ok = [p for p, s in enumerate(layout) if can_halve(s.dim) and counts[s.table] < task.num_devices
              and not is_piece(task, task.tables[s.table].name)]
        if len(ok) <= self.config.candidates:
            return ok
        load, memory = costs.load(layout)[ok], costs.memory(layout)[ok]
        n = self.config.candidates
        top = set(np.argsort(-memory, kind="stable")[:n]) | set(np.argsort(-load, kind="stable")[:n])
        return sorted(ok[i] for i in top)

    def _children(self, task: Task, layout: Layout, costs: ShardCosts) -> list[Layout]:
        """The layouts one beam step away: one candidate shard halved (``_split_candidates``), then (with
        ``even_splits``) every shard of one split table halved, where they all halve and fit the devices."""
        children = [split_shard(layout, pos) for pos in self._split_candidates(task, layout, costs)]
        if self.config.even_splits:
            counts = shards_per_table(layout, task.num_tables)
            for t in np.flatnonzero(counts > 1).tolist():
                mine = [s.dim for s in layout if s.table == t]
                if 2 * len(mine) <= task.num_devices and all(map(can_halve, mine)):
                    children.append(split_table(layout, t))
        return children

    def _evaluate(self, task: Task, layouts: list[Layout], costs: ShardCosts,
                  scales: np.ndarray) -> tuple[np.ndarray, list[np.ndarray | None], np.ndarray]:
        """Best plan cost, its ranks and the greedy's progress (most shards placed) of each layout."""
        costs.prime(s for lay in layouts for s in lay)
        g = len(scales)
        ranks: list[np.ndarray] = [np.zeros(0, dtype=np.int64)] * (len(layouts) * g)
        placed = np.zeros(len(layouts) * g, dtype=np.int64)
        # the greedy runs layouts of one shard count in lockstep (an even split's child has more shards)
        for size in sorted({len(lay) for lay in layouts}):
            group = [i for i, lay in enumerate(layouts) if len(lay) == size]
            load = np.stack([costs.load(layouts[i]) for i in group])
            memory = np.stack([costs.memory(layouts[i]) for i in group])
            group_ranks, group_placed = greedy_place(task, [layouts[i] for i in group], load, memory, scales)
            runs = (np.asarray(group)[:, None] * g + np.arange(g)).ravel()
            placed[runs] = group_placed
            for run, r in zip(runs.tolist(), group_ranks):
                ranks[run] = r
        unique: dict[tuple[int, bytes], int] = {}  # many caps give the same placement: score it once
        candidates: list[tuple[Layout, np.ndarray]] = []
        run_of: list[tuple[int, int]] = []
        for run in range(len(placed)):
            if placed[run] < len(layouts[run // g]):
                continue
            key = (run // g, ranks[run].tobytes())
            if key not in unique:
                unique[key] = len(candidates)
                candidates.append((layouts[key[0]], ranks[run]))
            run_of.append((run, unique[key]))
        scored = plan_costs(task, self.cost_model, candidates)
        best = np.full(len(layouts), np.inf)
        best_ranks: list[np.ndarray | None] = [None] * len(layouts)
        for run, c in run_of:
            lay = run // g
            if scored[c] < best[lay]:
                best[lay], best_ranks[lay] = scored[c], ranks[run]
        progress = placed.reshape(len(layouts), g).max(axis=1)
        return best, best_ranks, progress

    def _evaluate_until(self, task: Task, layouts: list[Layout], costs: ShardCosts, scales: np.ndarray,
                        deadline: float, per_layout: float
                        ) -> tuple[np.ndarray, list[np.ndarray | None], np.ndarray, float]:
        """``_evaluate`` of as many of ``layouts`` (in order) as fit before ``deadline``, in chunks each sized
        by the seconds per layout the chunk before took (``per_layout`` to start), and that estimate.

        Why chunks: a level's time is a fixed part (the greedy's steps, the pricing's calls) plus a part per
        layout, so the level before, divided by its layouts, overstates the next level's per layout; the
        table-wise level's one layout overstated it ~5x, and the first column-split level evaluated 11 of its
        19 layouts within a 1 s budget on 856 tables x 128 devices (docs/benchmarks.md, "Stop 51")."""
        parts: list[tuple[np.ndarray, list[np.ndarray | None], np.ndarray]] = []
        done = 0
        while done < len(layouts):
            room = deadline - time.perf_counter()
            fits = len(layouts) - done if per_layout <= 0 else int(max(room, 0.0) / per_layout)
            if fits < 1:
                break
            chunk = layouts[done:done + fits]
            began = time.perf_counter()
            parts.append(self._evaluate(task, chunk, costs, scales))
            per_layout = (time.perf_counter() - began) / len(chunk)
            done += len(chunk)
        if not parts:
            return np.zeros(0), [], np.zeros(0, dtype=np.int64), per_layout
        return (np.concatenate([p[0] for p in parts]), [r for p in parts for r in p[1]],
                np.concatenate([p[2] for p in parts]), per_layout)

    def search(self, task: Task, deadline: float | None = None) -> tuple[Layout, np.ndarray, float]:
        """The best (layout, ranks, model plan cost) found; InfeasibleError if no greedy run fits memory.

        With a ``deadline`` (``time.perf_counter()`` value), a column-split level evaluates only as many of
        its layouts (in beam order: the cheapest parent's splits first) as fit before it, in chunks sized by
        the time per layout measured last (``_evaluate_until``), none when not one does; the table-wise level
        always runs. (Per layout, not per level: a level can hold beam-width times the layouts of the one
        before.)"""
        cfg = self.config
        costs = ShardCosts(task, self.cost_model)
        scales = cfg.cap_scales()
        level = [table_wise_layout(task)]
        beam: list[Layout] = []  # the layouts kept from the previous level, split further in the next
        seen = {layout_key(level[0])}
        best: tuple[Layout, np.ndarray, float] | None = None
        most_placed, evaluated = 0, 0
        per_layout = 0.0  # seconds per layout evaluated at the last level
        for depth in range(cfg.max_depth + 1):
            if depth > 0:
                if deadline is not None and per_layout > 0 and deadline - time.perf_counter() < per_layout:
                    # not one more layout fits: skip building the level's children at all
                    log.info("neuroshard: time budget reached after %d column-split level(s)", depth - 1)
                    break
                children = []
                for state in beam:
                    for child in self._children(task, state, costs):
                        key = layout_key(child)
                        if key not in seen:
                            seen.add(key)
                            children.append(child)
                if not children:
                    break
                level = children
            began = time.perf_counter()
            if deadline is None or depth == 0:
                scores, ranks, progress = self._evaluate(task, level, costs, scales)
                per_layout = (time.perf_counter() - began) / len(level)
            else:
                scores, ranks, progress, per_layout = self._evaluate_until(task, level, costs, scales,
                                                                           deadline, per_layout)
                if len(scores) < len(level):
                    log.info("neuroshard: time budget: %d of %d layouts at column-split level %d",
                             len(scores), len(level), depth)
                    level = level[:len(scores)]
                if not level:
                    log.info("neuroshard: time budget reached after %d column-split level(s)", depth - 1)
                    break
            evaluated += len(level)
            most_placed = max(most_placed, int(progress.max()))
            i = int(np.argmin(scores))
            if np.isfinite(scores[i]) and (best is None or scores[i] < best[2]):
                best = (level[i], ranks[i], float(scores[i]))
            # cheapest first; among infeasible layouts, those whose greedy got furthest (splits free memory)
            keep = sorted(range(len(level)), key=lambda j: (scores[j], -progress[j]))[:cfg.beam_width]
            beam = [level[j] for j in keep]
        if best is None:
            raise InfeasibleError(
                f"neuroshard: no greedy placement of {evaluated} layouts "
                f"(column splits up to {cfg.max_depth}) "
                f"fits the devices' memory, at best {most_placed} of {task.num_tables}+ shards placed; "
                "give more memory or more devices"
            )
        splits = len(best[0]) - task.num_tables
        log.info("neuroshard: %d layouts evaluated, best has %d column split(s), model cost %.3f ms",
                 evaluated, splits, best[2])
        return best

    def plan(self, task: Task) -> Plan:
        deadline = None if self.time_limit_s is None else time.perf_counter() + self.time_limit_s
        layout, ranks, _ = self.search(task, deadline)
        plan, _ = improve(task, to_plan(task, layout, ranks, self.name), self.cost_model,
                          self.config.sharding_moves, uneven_rows=self.config.uneven_rows, who=self.name)
        return plan


def split_layout(task: Task, model: CostModel, seconds: float,
                 even_splits: bool = EVEN_SPLITS) -> Layout | None:
    """The column-split layout NeuroShard's search picks within ``seconds`` (no sharding moves; with or
    without ``NeuroShardConfig.even_splits``), for a planner that places its shards itself (``rl``, ``ilp``);
    None when it splits nothing or no layout fits memory."""
    searcher = NeuroShardPlanner(model, NeuroShardConfig(sharding_moves=0, even_splits=even_splits))
    try:
        layout, _, _ = searcher.search(task, deadline=time.perf_counter() + seconds)
    except InfeasibleError:
        return None
    return None if len(layout) == task.num_tables else layout


def capped_greedy_plan(task: Task, model: CostModel, algorithm: str) -> Plan | None:
    """NeuroShard's table-wise level alone (no column split, no sharding moves): every table whole, placed by
    the greedy on the model's marginal costs under each cap of the grid, the placement the model prices
    cheapest; for a planner that weighs it against its own (``rl`` on large tasks). None when no cap's
    greedy fits memory."""
    searcher = NeuroShardPlanner(model, NeuroShardConfig(max_depth=0, sharding_moves=0))
    try:
        layout, ranks, _ = searcher.search(task)
    except InfeasibleError:
        return None
    return to_plan(task, layout, ranks, algorithm)


def neuroshard_planner(options: PlannerOptions) -> NeuroShardPlanner:
    config = config_from_extra(NeuroShardConfig, planner_settings(options.extra))
    return NeuroShardPlanner(planning_model(options, NEUROSHARD_RISK), config,  # type: ignore[arg-type]
                             time_limit_s=options.time_limit_s)
