"""Exact baseline: min-max placement of tables (or column shards) with memory constraints, by OR-Tools CP-SAT.

The cost model is first linearised per device: a device holding tables S costs ``overhead + sum(weights[S])``
(0 when empty), where ``weights[i]`` is table i's standalone predicted cost (fwd + bwd + comm) minus the
per-device fixed part ``overhead`` (kernel launches, all-to-all latency) that a pair of tables shares. For the
roofline model this is exact (bytes and all-to-all volume add up per device); for a learned model it is the
model's own additive view of the tables (a model with fused-kernel savings, like the measured CPU costs at
0.93-0.96x the sum, makes the linear objective and bound approximate). Then, top to bottom:

    data        weights (ms), overhead (ms) -> integers (scaled, CP-SAT is integer), memory bytes, capacities
    variables   x[i, r] = table i on device r;  u[r] = device r holds anything;  z = the max device cost
    constraints every table on exactly one device; each device's memory within its capacity;
                sum_i x[i, r] <= n u[r]; z >= cost of every device; devices of equal memory ordered by cost
                (symmetry breaking)
    objective   minimise z
    solve       CP-SAT with the time limit, hinted with a greedy (LPT) placement
    extract     ranks from x; the objective, the solver's best bound (a lower bound) and the gap

With ``column_splits`` (on tasks of at most ``AUTO_SPLIT_PAIRS`` tables x devices by default), the same
problem is solved a second time over the column shards of the layout NeuroShard's split search picks (which
tables to halve, how often), each shard a table of its own and a table's shards that meet on a device merged,
as ``rl`` places them. The time limit covers both solves and the split search. Then ``planners.finish``:
each solve gets ``sharding_moves`` (replicas and row-wise shards for the hottest tables, kept only when the
model's step cost drops), the one the full cost model prices cheaper *after* the moves is kept, its placement
gets a descent (moves and swaps, then kicks) on the model's own step cost, which the linearised objective
only approximates (``refine_share`` of the time limit; ``descent.refine_placement``), and the moves
again. So the ILP's optimality is over the linearised objective and the placements of a given layout
(table-wise, or the split one); the plan returned is never dearer by the model than the moved solve. The
planner's plan is judged elsewhere with the full cost model; ``ExactPlanner.last_result`` holds the
optimality gap and lower bound of the table-wise linearised problem, ``lower_bound`` gives the benchmark
its estimate, and ``stage_floor`` the least forward and backward of the costliest table's device (the
bench's room report, ``bench.room``). The solve not kept, with its sharding moves (not the descent), is
``last_alternatives``: the heuristic guard weighs it too, by its gain beyond the model's uncertainty
(``planners.guard``).
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from autoshard.breakdown import StageFloor
from autoshard.costs.base import CostModel
from autoshard.costs.loading import resolve_cost_model
from autoshard.errors import AutoshardError, InfeasibleError
from autoshard.plan import COLUMN_SHARD_MULTIPLE, Plan
from autoshard.planners.base import PlannerOptions, config_from_extra
from autoshard.planners.column_split import column_shard_task, merge_column_shards, splits_wanted
from autoshard.planners.finish import Descent, finish, whole_and_split
from autoshard.planners.neuroshard import EVEN_SPLITS, split_layout
from autoshard.planners.pricing import device_overhead_ms, planner_settings, planning_model
from autoshard.shards import ShardRef
from autoshard.tasks import Task

log = logging.getLogger(__name__)

ILP_RISK = 0.0
"""ilp's k when ``--option risk=K`` is not given: its shards priced at the model's mean, as search's,
neuroshard's and rl's (``planners.local_search.SEARCH_RISK``), not at the model's ``risk_k``. Chosen by the
measured cost of the plans each k gives on held-out tasks (``benchmarks/risk_objective.py --planner ilp``,
docs/benchmarks.md, "Stop 61"): on 10 train tasks of each of DLRM-20 (4), DLRM-10 (8), DLRM-50 (4) and
DLRM-20 (8), its own plans at the mean measured 0.971 [0.953, 0.985] of its plans at risk_k, and behind the
guard 0.990 [0.976, 1.008] (lower, not resolved); the guard still weighs the spread."""
COST_RESOLUTION = 1_000_000
"""Integer units the costliest table is scaled to: rounding moves a device's cost by at most
(tables + 1) / 2 units, i.e. about 1e-6 of the largest table per 2 tables on the device."""

LARGE_MODEL_BOOLS = 2000
"""Above this many placement variables the solver skips presolve probing and symmetry detection: measured at
856 tables x 16 devices on this CPU, they took over 8 s before the search even started (devices of equal
memory are already ordered by cost here, which removes their symmetry)."""


@dataclass(frozen=True)
class LinearCosts:
    """The cost model's additive per-device view: a non-empty device costs overhead + the sum of its
    weights."""

    weights_ms: np.ndarray
    """Per table: its standalone predicted cost minus the overhead (ms)."""
    overhead_ms: float
    """Per non-empty device: the fixed part of its cost (launches, all-to-all latency) (ms)."""

    def device_ms(self, ranks: np.ndarray, num_devices: int) -> np.ndarray:
        ranks = np.asarray(ranks)
        load = np.bincount(ranks, weights=self.weights_ms, minlength=num_devices)
        used = np.bincount(ranks, minlength=num_devices) > 0
        return np.where(used, load + self.overhead_ms, 0.0)

    def objective(self, ranks: np.ndarray, num_devices: int) -> float:
        """The min-max objective the ILP optimises, for any table-wise placement."""
        return float(self.device_ms(ranks, num_devices).max())


def linear_costs(task: Task, model: CostModel) -> LinearCosts:
    """Price every table alone (one batched call) and split off the per-device overhead pairs of tables
    share."""
    alone = model.device_costs(task, [[ShardRef(i, t.dim)] for i, t in enumerate(task.tables)]).sum(axis=1)
    overhead = min(device_overhead_ms(task, model), float(alone.min()))
    return LinearCosts(alone - overhead, overhead)


def linear_bound(costs: LinearCosts, task: Task, split: ColumnPieces | None = None) -> float:
    """overhead + max(average load, the largest table), or, given ``split``, the average of each table's
    least summed work and the largest of each table's smallest possible largest piece."""
    w = costs.weights_ms
    work, largest = (w, w) if split is None else (split.work_ms, split.largest_ms)
    return costs.overhead_ms + max(float(work.sum()) / task.num_devices, float(largest.max()))


@dataclass(frozen=True)
class ColumnPieces:
    """Per table, what splitting it into column shards can save under the linearised costs."""

    work_ms: np.ndarray
    """The least summed weight of its shards (its whole weight if no split is cheaper in sum)."""
    largest_ms: np.ndarray
    """The least weight of its widest shard (its whole weight if no split has a cheaper widest shard)."""


def piece_widths(dim: int, num_devices: int) -> list[tuple[int, int, int]]:
    """Each way to cut a dim into column shards of multiples of ``COLUMN_SHARD_MULTIPLE`` on at most
    ``num_devices`` devices with the narrowest widest shard for its count: (shards, widest, last) widths,
    the last shard the remainder (a table whose dim is no such multiple is not split)."""
    if dim % COLUMN_SHARD_MULTIPLE:
        return []
    units = dim // COLUMN_SHARD_MULTIPLE
    out: dict[int, tuple[int, int, int]] = {}
    for c in range(2, min(num_devices, units) + 1):
        widest = COLUMN_SHARD_MULTIPLE * -(-units // c)
        count = -(-dim // widest)
        out.setdefault(widest, (count, widest, dim - (count - 1) * widest))
    return list(out.values())


def column_pieces(task: Task, model: CostModel, costs: LinearCosts) -> ColumnPieces:
    """Price the column shards of the tables heavier than the average load (only they can set the largest-
    piece term, and a split that cut a table's summed work was never seen: a 4-wide quarter of a hot dim-16
    table costs 0.43-0.99 of it alone on CPU by the measured kernels, 0.68-0.74 by the shipped model) each
    alone, as the column-shard ILP prices them: weight = standalone cost - overhead. Why not the weight /
    shards of before stop 52: it read a dim-16 table's four 4-wide shards at a quarter of its cost, which no
    measurement supports, and made the bench's estimate promise room no plan could reach (docs/benchmarks.md,
    "Stop 52")."""
    w = costs.weights_ms
    heavy = np.flatnonzero(w > w.sum() / task.num_devices)
    cuts = {int(i): piece_widths(task.tables[i].dim, task.num_devices) for i in heavy}
    refs = sorted({(i, width) for i, ways in cuts.items() for _, *widths in ways for width in widths})
    work, largest = w.copy(), w.copy()
    if refs:
        alone = model.device_costs(task, [[ShardRef(i, width)] for i, width in refs]).sum(axis=1)
        weight = {ref: max(float(ms) - costs.overhead_ms, 0.0) for ref, ms in zip(refs, alone, strict=True)}
        for i, ways in cuts.items():
            for count, widest, last in ways:
                work[i] = min(work[i], (count - 1) * weight[i, widest] + weight[i, last])
                largest[i] = min(largest[i], max(weight[i, widest], weight[i, last]))
    return ColumnPieces(work, largest)


RANKING_NOISE = 0.6
"""``stage_floor`` prices a table while its ranking time is at least this share of the floor so far: one
timing of a large table's backward varied 20-30% between passes on this CPU, so a ranking pass can put the
table that sets the floor below another."""


def stage_floor(task: Task, model: CostModel, price: CostModel | None = None,
                also: Sequence[ShardRef] = ()) -> StageFloor:
    """Every table ranked by its time alone under ``model`` (one batched call); per stage, from the costliest
    table down while its ranking time could still raise the floor (``RANKING_NOISE``), the table and each even
    cut of it into column shards (``piece_widths``) priced alone by ``price`` (default ``model``; the bench
    gives the minimum over its measurement rounds, as its devices get): the stage's floor is the largest over
    tables of the least over cuts of the widest shard's time. Why per stage: the step waits for the slowest
    forward and then the slowest backward (``costs.step``), and on this CPU a table's backward share varies
    2-3x between tables, so the two maxima are not one table's. The shards of ``also`` (the bench: its
    plans') that belong to the priced tables are priced alone too; every shard priced is kept
    (``StageFloor.alone``)."""
    price = model if price is None else price
    ranking = model.device_costs(task, [[ShardRef(i, t.dim)] for i, t in enumerate(task.tables)])[:, :2]
    priced: dict[ShardRef, list[float]] = {}
    floors = []
    for stage in (0, 1):
        floor = 0.0
        for i in np.argsort(-ranking[:, stage], kind="stable").tolist():
            if ranking[i, stage] <= RANKING_NOISE * floor:
                break
            dim = task.tables[i].dim
            ways = piece_widths(dim, task.num_devices)
            new = sorted(({ShardRef(i, w) for _, *widths in ways for w in widths} | {ShardRef(i, dim)})
                         - priced.keys())
            if new:
                priced |= dict(zip(new, price.device_costs(task, [[s] for s in new])[:, :2].tolist(),
                                   strict=True))
            least = priced[ShardRef(i, dim)][stage]
            for _, widest, last in ways:
                least = min(least, max(priced[ShardRef(i, widest)][stage], priced[ShardRef(i, last)][stage]))
            floor = max(floor, least)
        floors.append(floor)
    tables = {ref.table for ref in priced}
    more = sorted({ref for ref in also if ref.table in tables} - priced.keys(), key=_ref_order)
    if more:
        priced |= dict(zip(more, price.device_costs(task, [[s] for s in more])[:, :2].tolist(), strict=True))
    return StageFloor(*floors, alone=tuple((ref, f, b) for ref, (f, b) in
                                           sorted(priced.items(), key=lambda kv: _ref_order(kv[0]))))


def _ref_order(ref: ShardRef) -> tuple:
    """A total order on shard refs (a row range's open end, None, sorts last)."""
    return (ref.table, ref.dim, ref.row_start, ref.row_end is None, ref.row_end or 0, ref.replica)


@dataclass(frozen=True)
class ExactConfig:
    """CP-SAT settings (the time limit is PlannerOptions.time_limit_s)."""

    workers: int = 1
    """CP-SAT search workers; 1 keeps runs reproducible and leaves the shared CPU to others."""
    symmetry_breaking: bool = True
    """Order devices of equal memory by cost, which removes their permutations from the search."""
    sharding_moves: int = 8
    """After the solve, tables (hottest first) tried as data-parallel replicas or row-wise shards, kept when
    the step cost drops (``sharding_moves``: the ILP itself stays exact over table-wise placements); 0 =
    table-wise only."""
    uneven_rows: bool = False
    """Those moves also try lookup-balanced uneven row ranges (not exportable to TorchRec)."""
    column_splits: str = "auto"
    """Also solve over the column shards of NeuroShard's split layout and keep the cheaper plan: "on", "off",
    or "auto" (on for tasks of at most ``AUTO_SPLIT_PAIRS`` tables x devices). Off, ilp is table-wise, as
    before stop 32."""
    split_search_s: float = 1.0
    """The most seconds NeuroShard's split search may take (within the time limit, which it shares with the
    two solves)."""
    even_splits: bool = EVEN_SPLITS
    """That search's children also halve every shard of a split table at once
    (``NeuroShardConfig.even_splits``)."""
    refine_share: float = 0.3
    """Share of the time limit kept for a descent on the model's own step cost from the solved placement
    (``descent.refine_placement``; the solves get the rest, the descent also what they leave). Why: the
    ILP minimises the linearised per-device sum, which on production-40-8 sat 4-28% below the model's step
    for the same plan (the step waits at each collective: max fwd + max bwd + collectives). 0 = the solved
    placement as it is."""
    refine_kicks: int = 20
    """Perturb-and-descend rounds after that descent, as ``search`` runs, within the time limit (0 = descent
    only). On production-40-8's 10 test tasks (10 s limit, the shipped model; ``benchmarks/ilp_refine.py``)
    the descent alone lowered the model's step 2-20% below the solved plan, with the kicks 7-22%."""

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise AutoshardError(f"ilp setting workers={self.workers} must be at least 1")
        if self.column_splits not in ("auto", "on", "off"):
            raise AutoshardError(f"ilp setting column_splits={self.column_splits!r} must be auto, on or off")
        if self.split_search_s <= 0:
            raise AutoshardError(f"ilp setting split_search_s={self.split_search_s} must be positive")
        if not 0 <= self.refine_share < 1:
            raise AutoshardError(f"ilp setting refine_share={self.refine_share} must be in [0, 1)")
        if self.refine_kicks < 0:
            raise AutoshardError(f"ilp setting refine_kicks={self.refine_kicks} must be at least 0")


@dataclass(frozen=True)
class ExactResult:
    """The outcome of one solve, in the linearised model's milliseconds."""

    status: str
    """'optimal' (proved) or 'feasible' (stopped by the time limit)."""
    objective_ms: float
    """Min-max objective of the returned placement."""
    lower_bound_ms: float
    """No table-wise placement has a lower objective (solver's best bound, minus rounding slack)."""
    gap: float
    """(objective - lower bound) / objective; 0 when proved optimal (up to rounding)."""
    wall_s: float


def _lpt(costs: LinearCosts, task: Task) -> np.ndarray | None:
    """Largest weight first onto the least-loaded device with room; None if memory stops it."""
    free = np.array(task.device_memory, dtype=np.int64)
    load = np.zeros(task.num_devices)
    ranks = np.zeros(task.num_tables, dtype=np.int64)
    for i in np.argsort(-costs.weights_ms, kind="stable"):
        need = task.table_memory(task.tables[i])
        r = int(np.argmin(np.where(free >= need, load, np.inf)))
        if free[r] < need:
            return None
        ranks[i], free[r], load[r] = r, free[r] - need, load[r] + costs.weights_ms[i]
    return ranks


def solve(task: Task, costs: LinearCosts, time_limit_s: float, config: ExactConfig = ExactConfig(),
          seed: int = 0) -> tuple[np.ndarray, ExactResult]:
    """Solve the min-max placement; InfeasibleError when memory cannot hold the tables, AutoshardError when
    the time limit passes without a solution."""
    start = time.perf_counter()
    from ortools.sat.python import cp_model

    n, d = task.num_tables, task.num_devices
    # data
    scale = COST_RESOLUTION / max(float(costs.weights_ms.max()), costs.overhead_ms, 1e-12)
    w = np.maximum(np.rint(costs.weights_ms * scale), 0).astype(np.int64).tolist()
    overhead = round(costs.overhead_ms * scale)
    mem = [task.table_memory(t) for t in task.tables]
    # variables
    m = cp_model.CpModel()
    x = [[m.new_bool_var(f"x{i}_{r}") for r in range(d)] for i in range(n)]
    u = [m.new_bool_var(f"u{r}") for r in range(d)]
    z = m.new_int_var(0, sum(w) + overhead, "z")
    # constraints
    for i in range(n):
        m.add_exactly_one(x[i])
    loads = []
    for r in range(d):
        col = [x[i][r] for i in range(n)]
        m.add(cp_model.LinearExpr.weighted_sum(col, mem) <= task.device_memory[r])
        m.add(sum(col) <= n * u[r])  # one big-M row instead of n implications: a much smaller model
        load = cp_model.LinearExpr.weighted_sum(col, w) + overhead * u[r]
        loads.append(load)
        m.add(z >= load)
    groups: dict[int, list[int]] = {}
    for r, cap in enumerate(task.device_memory):
        groups.setdefault(cap, []).append(r)
    if config.symmetry_breaking:
        for members in groups.values():
            for a, b in itertools.pairwise(members):
                m.add(loads[a] >= loads[b])
    # objective
    m.minimize(z)
    hint = _lpt(costs, task)
    if hint is not None:
        if config.symmetry_breaking:  # relabel equal-memory devices so the hint obeys the ordering
            int_load = np.bincount(hint, weights=w, minlength=d)
            relabel = np.arange(d)
            for members in groups.values():
                by_load = sorted(members, key=lambda r: -int_load[r])
                relabel[by_load] = members
            hint = relabel[hint]
        for i in range(n):
            for r in range(d):
                m.add_hint(x[i][r], int(hint[i]) == r)
        hint_used = np.bincount(hint, minlength=d) > 0
        hint_loads = np.bincount(hint, weights=w, minlength=d) + overhead * hint_used
        for r in range(d):
            m.add_hint(u[r], bool(hint_used[r]))
        m.add_hint(z, int(hint_loads.max()))
    # solve
    solver = cp_model.CpSolver()
    # the budget covers building the model too
    solver.parameters.max_time_in_seconds = max(float(time_limit_s) - (time.perf_counter() - start), 0.01)
    solver.parameters.num_workers = config.workers
    solver.parameters.random_seed = int(seed)
    if n * d > LARGE_MODEL_BOOLS:  # presolve's probing alone can eat a 10 s budget on large models
        solver.parameters.cp_model_probing_level = 0
        solver.parameters.symmetry_level = 0
        solver.parameters.max_presolve_iterations = 1
    status = solver.solve(m)
    if status == cp_model.INFEASIBLE:
        raise InfeasibleError(f"ilp: CP-SAT proved that no table-wise placement of the {n} tables fits the "
                              f"{d} devices' memory; give more memory or more devices")
    if status == cp_model.MODEL_INVALID:
        raise AutoshardError(f"ilp: CP-SAT rejected the model ({solver.solution_info()}); please report this")
    solved = status in (cp_model.OPTIMAL, cp_model.FEASIBLE)
    if not solved and hint is None:
        raise AutoshardError(f"ilp: CP-SAT found no placement within the time limit of {time_limit_s:g} s "
                             f"({n} tables, {d} devices); raise --time-limit or use --algo search")
    # extract (the greedy hint is a valid placement too: keep it if the solver had nothing better)
    bound = linear_bound(costs, task)
    if solved:
        values = np.array([[solver.boolean_value(x[i][r]) for r in range(d)] for i in range(n)])
        ranks = values.argmax(axis=1).astype(np.int64)
        slack = (n + 1) / 2 / scale  # integer rounding of every weight on a device
        bound = max(bound, solver.best_objective_bound / scale - slack)
    if hint is not None and (not solved or costs.objective(hint, d) < costs.objective(ranks, d)):
        ranks = hint
    objective = costs.objective(ranks, d)
    bound = min(bound, objective)
    result = ExactResult("optimal" if status == cp_model.OPTIMAL else "feasible", objective, bound,
                         (objective - bound) / objective if objective > 0 else 0.0,
                         time.perf_counter() - start)
    return ranks, result


def lower_bound(task: Task, cost_model: CostModel | None = None, *, column_wise: bool = True,
                time_limit_s: float = 0.0) -> float:
    """A lower bound (ms) on the plan cost of ``task`` under ``cost_model``'s linearised per-device costs.

    Always: overhead + max(sum of weights / devices, the largest table's weight); with ``column_wise``, a
    table heavier than the average may count as its column shards instead, each priced alone by the model
    (``column_pieces``). For table-wise plans (``column_wise=False``) with ``time_limit_s > 0``, also the
    ILP's proved bound, which is usually much tighter. Row-wise shards and replicas are not considered.
    """
    model = resolve_cost_model(cost_model)
    costs = linear_costs(task, model)
    bound = linear_bound(costs, task, column_pieces(task, model, costs) if column_wise else None)
    if not column_wise and time_limit_s > 0:
        _, result = solve(task, costs, time_limit_s)
        bound = max(bound, result.lower_bound_ms)
    return bound


class ExactPlanner:
    """Min-max placement by CP-SAT over the cost model's per-table predicted costs: table-wise, and over
    NeuroShard's column shards (``ExactConfig.column_splits``), the cheaper by the model after the sharding
    moves kept (``planners.finish``)."""

    name = "ilp"

    def __init__(self, cost_model: CostModel | None = None, config: ExactConfig | None = None,
                 time_limit_s: float = 10.0, seed: int = 0) -> None:
        self.cost_model = resolve_cost_model(cost_model)
        self.config = config or ExactConfig()
        self.time_limit_s = time_limit_s
        self.seed = seed
        self.last_result: ExactResult | None = None
        self.last_alternatives: tuple[tuple[str, Plan], ...] = ()
        """The finished plan the latest ``plan`` call did not return (its other solve, labelled), which the
        heuristic guard weighs too (``planners.guard``)."""

    def plan(self, task: Task) -> Plan:
        start = time.perf_counter()
        deadline = start + self.time_limit_s
        solve_deadline = start + (1 - self.config.refine_share) * self.time_limit_s
        splits = splits_wanted(self.config.column_splits, task)
        self.last_alternatives = ()
        whole: Plan | None = None
        try:
            whole = self._solve_table_wise(task, solve_deadline, share=0.5 if splits else 1.0)
        except InfeasibleError as e:
            whole_tables_error = e  # column shards may still fit where whole tables do not
        split = self._solve_column_shards(task, solve_deadline) if splits else None
        if whole is None and split is None:
            raise whole_tables_error
        descent = (Descent(deadline, self.seed, self.config.refine_kicks)
                   if self.config.refine_share > 0 else None)
        finished = finish(task, self.cost_model, whole_and_split(whole, split), self.name,
                          moves=self.config.sharding_moves, uneven_rows=self.config.uneven_rows,
                          descent=descent)
        self.last_alternatives = finished.alternatives
        return finished.plan

    def _solve_table_wise(self, task: Task, deadline: float, share: float) -> Plan:
        """The min-max table-wise placement, solved within ``share`` of the time left before ``deadline``
        (pricing the tables counts too); ``last_result`` holds its objective, bound and gap."""
        start = time.perf_counter()
        costs = linear_costs(task, self.cost_model)
        budget = share * (deadline - start) - (time.perf_counter() - start)
        ranks, result = solve(task, costs, budget, self.config, self.seed)
        self.last_result = result
        if result.status == "optimal":
            log.info("ilp: optimal, objective %.3f ms (lower bound %.3f ms) in %.2f s", result.objective_ms,
                     result.lower_bound_ms, result.wall_s)
        else:
            log.warning("ilp: stopped at its time limit: objective %.3f ms, lower bound %.3f ms, gap %.3f%%",
                        result.objective_ms, result.lower_bound_ms, 100 * result.gap)
        return Plan.from_ranks(task, ranks.tolist(), self.name)

    def _solve_column_shards(self, task: Task, deadline: float) -> Plan | None:
        """The min-max placement of the column shards of NeuroShard's best layout, merged back into the
        task's tables (None: the search splits nothing, or the shards fit no placement in time)."""
        search_s = min(self.config.split_search_s, max(deadline - time.perf_counter(), 0.0) / 2)
        layout = split_layout(task, self.cost_model, search_s, self.config.even_splits)
        if layout is None:
            return None
        shards = column_shard_task(task, layout)
        costs = linear_costs(shards, self.cost_model)
        try:
            ranks, result = solve(shards, costs, deadline - time.perf_counter(), self.config, self.seed)
        except AutoshardError as e:  # InfeasibleError included: the table-wise plan stands
            log.info("ilp: no placement of the column shards (%s)", e)
            return None
        log.info("ilp: %d column shards of %d tables, %s, objective %.3f ms", len(layout), task.num_tables,
                 result.status, result.objective_ms)
        return merge_column_shards(task, layout, ranks, self.name)


def ilp_planner(options: PlannerOptions) -> ExactPlanner:
    config = config_from_extra(ExactConfig, planner_settings(options.extra))
    return ExactPlanner(planning_model(options, ILP_RISK), config, options.time_limit_s, options.seed)
