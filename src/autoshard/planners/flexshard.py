"""FlexShard for sequence tables: replicate the hottest rows, match the rest to the network's tiers.

FlexShard (Sethi et al., 2023) is public only as an abstract: hot rows replicated by access probability,
the rest placed in tiers matched to the network (fast links within a host, slow between hosts), > 85% less
global all-to-all traffic and ~6x lower communication latency than the prior state of the art at no extra
memory. Everything below (tiers, objective, search, memory rules) is OUR design from that description.

Tiers (``costs.sequence_traffic.flexshard``), by frequency rank (row 0 hottest) of each table:

- A, rows ``[0, k_all)``: a replica on every device; looked up locally; gradients all-reduced over all D;
- B, rows ``[k_all, k_all + k_host)``: one replica per host, dealt over its L devices; looked up within the
  host (intra-host bytes only); gradients all-reduced over the H ranks holding the same rows (inter-host);
- C, the rest: dealt over all D devices (row-wise); a lookup crosses hosts with probability (D - L) / D.

OBJECTIVE (per table; n = B x mean sequence length ids per rank per step, w = 8 + 2 x 4 x dim bytes per
remote lookup: its id, its vector and its gradient; F(k) = hot_mass(k); bandwidths of the declared
topology): the MEAN over ranks of the modelled communication time of a step,

    J(k_all, K) = n w [a_C - a_B F(k_all) - (a_C - a_B) F(K)] + (s_A - s_B) k_all + s_B K,
    K = k_all + k_host,

with a_B = (L-1)/(L bw_intra) (tier B lookups), a_C = (L-1)/(D bw_intra) + (D-L)/(D bw_inter) (tier C), and
the replica gradient sync of ``costs.sequence_traffic`` (dense, hierarchical all-reduce) per replicated row
and rank: s_A = row [2 (L-1)/L / bw_intra + 2 (H-1)/(H L) / bw_inter], s_B = row 2 (H-1)/(H L) / bw_inter.
Latencies are constants per collective: added when comparing a candidate with row_wise, not in the search.

MEMORY (per device, bytes; rows x dim x 4, SGD without state): the worst device holds k_all +
ceil(k_host / L) + ceil((rows - K) / D) rows; the search uses the sufficient linear form (ceil(x/g) <=
(x + g - 1) / g), conservative by under 2 rows per device, and every plan is then checked exactly per rank.

SEARCH, and why it is exact: probabilities are non-increasing, so F is concave and J = g1(k_all) + g2(K) is
separable with g1, g2 convex. For a fixed k_all the best K is g2's unconstrained minimiser K_u (the rows whose
probability exceeds s_B / (n w (a_C - a_B)), by ``SequenceTable.count_above``) clamped to [k_all, cap(k_all)],
cap being the memory bound (affine, decreasing in k_all). h(k_all) = g1(k_all) + g2(clamp(...)) is convex
in the continuous relaxation (g2 is only ever evaluated on the side of K_u where it is monotone, through an
affine map), so a ternary search over k_all finds the minimum; the floor of cap() can break convexity on
integers by a row, which a scan of +-``window`` rows around the ternary result absorbs (tests compare with
exhaustive search on small tables). The chosen tiers are then priced by the exact model (max over ranks,
latencies included); if that is above row_wise's, row_wise (k_all = k_host = 0) is kept, so FlexShard is
never modelled slower than row_wise.

SEVERAL TABLES share each device's budget M. Every table first gets its row_wise footprint
(ceil(rows / D) rows per device; M below their sum is an InfeasibleError). What row_wise leaves free,
M - sum of those, is cut into ``quanta`` equal parts; each table's best J at 0..quanta parts is found by the
search above, and parts go greedily to the table with the largest communication saved per byte (J drop per
part, looking ahead over plateaus). J is additive over tables (per-rank bytes add), and a table's best J is
convex in its memory (the optimal value of a convex program in its constraint's right-hand side), for which
this greedy allocation is optimal on the quantised budget. If the combined exact model is above all-row_wise,
all-row_wise is kept. Table i's tiers B and C are dealt out from local rank / rank i (as the row_wise and
table_row_wise baselines), so the hottest rows of different tables do not all land on the same rank.

COMPARISON AT THE SAME MEMORY (``compare_at_same_memory``): every plan is charged against the same per-device
budget M (so the same total D x M). row_wise holds ceil(rows / D) rows per device; FlexShard's replicas must
fit in what row_wise leaves free on each device (its tier C is smaller than row_wise's, so the replicas cost
their rows minus the tier C rows they replace). table_wise (each table whole on the least-loaded device,
largest first) and table_row_wise (each table split over the least-loaded host) use the same total bytes as
row_wise but concentrate them; a plan whose fullest device exceeds M is reported with ``fits = False``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from autoshard.costs.sequence_traffic import (
    ELEM_BYTES,
    ID_BYTES,
    SequencePlacement,
    SequenceTraffic,
    flexshard,
    row_wise,
    sequence_traffic,
    table_row_wise,
    table_wise,
)
from autoshard.errors import AutoshardError, InfeasibleError
from autoshard.tables.sequence import SequenceTable
from autoshard.topology import Topology

DEFAULT_QUANTA = 64
DEFAULT_WINDOW = 8
_EPS = 1e-9
"""Slack of the floors of memory bounds in rows against rounding (far below a row)."""
MEMORY_RTOL = 1e-12
"""Float round-off a device's bytes may exceed the budget by, relative (``memory_bytes / row`` of a budget
that is an exact multiple of the row comes out a hair below it); the one tolerance of every fit check here,
so the planner never places what the checks then call over budget."""


def within_budget(peak_bytes: float, budget_bytes: float) -> bool:
    """Whether a fullest device of ``peak_bytes`` fits ``budget_bytes`` (up to ``MEMORY_RTOL``)."""
    return peak_bytes <= budget_bytes * (1 + MEMORY_RTOL)


@dataclass(frozen=True)
class TierChoice:
    """The tiers of one table and what the search saw."""

    k_all: int
    k_host: int
    mean_ms: float
    """Mean-over-ranks modelled communication time of this table alone (J, without latencies)."""
    memory_bytes: float
    """Bytes on the table's fullest device."""


@dataclass(frozen=True)
class _Coefficients:
    nw: float
    a_b: float
    a_c: float
    s_a: float
    s_b: float


def _coefficients(table: SequenceTable, topology: Topology, num_devices: int,
                  batch_per_rank: float) -> _Coefficients:
    d, h = num_devices, topology.hosts
    loc = topology.local_size(d)
    bi, be = topology.intra_bytes_per_ms, topology.inter_bytes_per_ms
    row = float(table.dim * ELEM_BYTES)
    nw = batch_per_rank * table.mean_seq_len * (ID_BYTES + 2.0 * row)
    a_b = (loc - 1) / (loc * bi)
    a_c = (loc - 1) / (d * bi) + (d - loc) / (d * be)
    s_b = row * 2.0 * (h - 1) / (h * loc) / be
    s_a = row * 2.0 * (loc - 1) / loc / bi + s_b
    return _Coefficients(nw, a_b, a_c, s_a, s_b)


def objective_ms(table: SequenceTable, topology: Topology, num_devices: int, batch_per_rank: float,
                 k_all: int, k_host: int) -> float:
    """J: the mean-over-ranks modelled communication time of one table with these tiers (no latencies)."""
    if num_devices <= 1:
        return 0.0
    c = _coefficients(table, topology, num_devices, batch_per_rank)
    f = table.hot_mass
    k2 = k_all + k_host
    return (c.nw * (c.a_c - c.a_b * f(k_all) - (c.a_c - c.a_b) * f(k2))
            + (c.s_a - c.s_b) * k_all + c.s_b * k2)


def _latency_ms(table: SequenceTable, topology: Topology, num_devices: int, k_all: int, k_host: int) -> float:
    """The latencies a plan pays: 3 all-to-alls while any lookup is remote, 1 all-reduce with replicas."""
    if num_devices <= 1 or topology.latency_ms == 0:
        return 0.0
    loc = topology.local_size(num_devices)
    fa, fk = table.hot_mass(k_all), table.hot_mass(k_all + k_host)
    remote = (fk - fa) * (loc - 1) / loc + (1.0 - fk) * (num_devices - 1) / num_devices
    replicas = (k_all > 0) or (k_host > 0 and topology.hosts > 1)
    return topology.latency_ms * (3 * (remote > 0) + replicas)


def worst_rows(rows: int, num_devices: int, local: int, k_all: int, k_host: int) -> int:
    """Rows on the fullest device of a flexshard placement (exact)."""
    return k_all + -(-k_host // local) + -(-(rows - k_all - k_host) // num_devices)


def _search(table: SequenceTable, topology: Topology, num_devices: int, batch_per_rank: float,
            memory_bytes: float, window: int) -> TierChoice:
    """The tiers minimising J under ``memory_bytes`` per device for this table (module docstring)."""
    d, n = num_devices, table.rows
    hosts = topology.hosts
    loc = topology.local_size(d)
    row = float(table.dim * ELEM_BYTES)
    budget = math.floor(memory_bytes / row * (1 + MEMORY_RTOL))
    if -(-n // d) > budget:
        raise InfeasibleError(f"table {table.name}: {memory_bytes:.4g} bytes per device cannot hold even its "
                              f"row_wise share ({-(-n // d)} rows of {row:.0f} bytes)")

    def choice(k_all: int, k2: int) -> TierChoice:
        k_host = k2 - k_all
        return TierChoice(k_all, k_host, objective_ms(table, topology, d, batch_per_rank, k_all, k_host),
                          worst_rows(n, d, loc, k_all, k_host) * row)

    if d <= 1:
        return choice(0, 0)
    c = _coefficients(table, topology, d, batch_per_rank)
    f = table.hot_mass

    def g1(k: int) -> float:
        return -c.nw * c.a_b * f(k) + (c.s_a - c.s_b) * k

    def g2(k: int) -> float:
        return -c.nw * (c.a_c - c.a_b) * f(k) + c.s_b * k

    cap: Callable[[int], int]
    if hosts == 1:  # tier B would be tier C again: only A and C
        spare = budget - (n + d - 1) / d
        k_max = min(n, math.floor(spare / (1.0 - 1.0 / d) + _EPS)) if spare >= 0 else -1

        def cap(k: int) -> int:
            return k
    else:
        c1, c2 = 1.0 - 1.0 / loc, 1.0 / loc - 1.0 / d
        spare = budget - (loc - 1) / loc - (n + d - 1) / d
        k_max = -1 if spare < 0 else (0 if loc == 1 else min(n, math.floor(spare / (c1 + c2) + _EPS)))

        def cap(k: int) -> int:
            return min(n, math.floor((spare - c1 * k) / c2 + _EPS))
    if k_max < 0:
        return choice(0, 0)
    k_u = 0
    if hosts > 1 and c.a_c > c.a_b:
        k_u = table.count_above(c.s_b / (c.nw * (c.a_c - c.a_b))) if c.nw > 0 else 0

    def k2_of(k: int) -> int:
        return min(max(k_u, k), cap(k))

    def h(k: int) -> float:
        return g1(k) + g2(k2_of(k))

    lo, hi = 0, k_max
    while hi - lo > 2:
        m1, m2 = lo + (hi - lo) // 3, hi - (hi - lo) // 3
        if h(m1) <= h(m2):
            hi = m2
        else:
            lo = m1
    cands = range(max(0, lo - window), min(k_max, hi + window) + 1)
    best = min(cands, key=lambda k: (h(k), k))
    found = choice(best, k2_of(best))
    if found.k_all == 0 and found.k_host == 0:
        return found
    zero = choice(0, 0)
    lat = _latency_ms(table, topology, d, found.k_all, found.k_host) - _latency_ms(table, topology, d, 0, 0)
    return found if found.mean_ms + lat < zero.mean_ms else zero


def best_tiers(table: SequenceTable, topology: Topology, num_devices: int, batch_per_rank: float,
               memory_bytes: float, window: int = DEFAULT_WINDOW) -> TierChoice:
    """FlexShard's tiers for one table given ``memory_bytes`` per device for it: the search, then row_wise
    kept if the exact (max-over-ranks) model prices the tiers above it."""
    found = _search(table, topology, num_devices, batch_per_rank, memory_bytes, window)
    if found.k_all == 0 and found.k_host == 0:
        return found
    hosts = topology.hosts
    mine = sequence_traffic([(table, flexshard(table.rows, num_devices, hosts, found.k_all, found.k_host))],
                            topology, batch_per_rank)
    base = sequence_traffic([(table, row_wise(table.rows, num_devices, hosts))], topology, batch_per_rank)
    if mine.comm_ms <= base.comm_ms:
        return found
    return TierChoice(0, 0, objective_ms(table, topology, num_devices, batch_per_rank, 0, 0),
                      float(base.peak_memory_bytes))


# ------------------------------------------------------------------------------------------ several tables
@dataclass(frozen=True)
class FlexShardPlan:
    """FlexShard's placement of several sequence tables under one per-device budget."""

    tables: tuple[SequenceTable, ...]
    placements: tuple[SequencePlacement, ...]
    choices: tuple[TierChoice, ...]
    device_memory_bytes: float
    topology: Topology
    batch_per_rank: float

    def traffic(self) -> SequenceTraffic:
        return sequence_traffic(list(zip(self.tables, self.placements, strict=True)), self.topology,
                                self.batch_per_rank)


def _row_wise_bytes(table: SequenceTable, num_devices: int) -> float:
    return -(-table.rows // num_devices) * float(table.dim * ELEM_BYTES)


class FlexShardPlanner:
    """FlexShard for sequence tables on ``topology`` with ``num_devices`` devices of ``device_memory_bytes``
    each, ``batch_per_rank`` samples per rank per step (module docstring)."""

    name = "flexshard"

    def __init__(self, topology: Topology, num_devices: int, batch_per_rank: float,
                 device_memory_bytes: float, quanta: int = DEFAULT_QUANTA,
                 window: int = DEFAULT_WINDOW) -> None:
        topology.local_size(num_devices)  # raises unless hosts divide the devices
        if quanta < 1 or window < 0 or batch_per_rank <= 0:
            raise AutoshardError("flexshard: quanta >= 1, window >= 0 and a positive batch per rank, please")
        self.topology, self.num_devices = topology, int(num_devices)
        self.batch_per_rank, self.memory = float(batch_per_rank), float(device_memory_bytes)
        self.quanta, self.window = int(quanta), int(window)

    def plan(self, tables: Sequence[SequenceTable]) -> FlexShardPlan:
        tables = tuple(tables)
        if not tables:
            raise AutoshardError("flexshard: no tables to place")
        d, topo, b = self.num_devices, self.topology, self.batch_per_rank
        base = [_row_wise_bytes(t, d) for t in tables]
        free = self.memory - sum(base)
        if free < 0:
            raise InfeasibleError(f"flexshard: {self.memory:.4g} bytes per device cannot hold even the "
                                  f"row_wise shares of the tables ({sum(base):.4g} bytes); "
                                  f"{-free:.4g} bytes short")
        q = free / self.quanta
        curves = [[_search(t, topo, d, b, base[i] + j * q, self.window) for j in range(self.quanta + 1)]
                  for i, t in enumerate(tables)]
        level = [0] * len(tables)
        left = self.quanta
        while left > 0:
            best, pick = 0.0, None
            for i, curve in enumerate(curves):
                now = curve[level[i]].mean_ms
                for j in range(level[i] + 1, level[i] + left + 1):
                    gain = (now - curve[j].mean_ms) / (j - level[i])  # saved per part (per q bytes)
                    if gain > best * (1 + 1e-12) + 1e-300:
                        best, pick = gain, (i, j)
            if pick is None:
                break
            left -= pick[1] - level[pick[0]]
            level[pick[0]] = pick[1]
        choices = [curves[i][level[i]] for i in range(len(tables))]
        hosts = topo.hosts
        placements = tuple(flexshard(t.rows, d, hosts, c.k_all, c.k_host, offset=i)
                           for i, (t, c) in enumerate(zip(tables, choices)))
        plan = FlexShardPlan(tables, placements, tuple(choices), self.memory, topo, b)
        traffic = plan.traffic()
        rw = tuple(row_wise(t.rows, d, hosts, offset=i) for i, t in enumerate(tables))
        rw_traffic = sequence_traffic(list(zip(tables, rw)), topo, b)
        if traffic.comm_ms > rw_traffic.comm_ms:
            zero = tuple(TierChoice(0, 0, objective_ms(t, topo, d, b, 0, 0), base[i])
                         for i, t in enumerate(tables))
            plan, traffic = FlexShardPlan(tables, rw, zero, self.memory, topo, b), rw_traffic
        if not within_budget(traffic.peak_memory_bytes, self.memory):
            raise AutoshardError(f"flexshard: internal error, a device holds {traffic.peak_memory_bytes:.6g} "
                                 f"bytes over the budget {self.memory:.6g}")
        return plan


# ------------------------------------------------------------------------------------------ comparison
@dataclass(frozen=True)
class PlanComparison:
    """One plan type for all the tables, priced by the exact model, against the common budget."""

    name: str
    placements: tuple[SequencePlacement, ...]
    traffic: SequenceTraffic
    fits: bool
    """Its fullest device is within the per-device budget."""


def _least_loaded(tables: Sequence[SequenceTable], bins: int, weight: Callable[[SequenceTable], float]
                  ) -> list[int]:
    """Largest table first onto the bin with the fewest bytes so far (ties: lowest bin)."""
    load = np.zeros(bins)
    out = [0] * len(tables)
    for i in sorted(range(len(tables)), key=lambda i: (-weight(tables[i]), i)):
        k = int(np.argmin(load))
        out[i] = k
        load[k] += weight(tables[i])
    return out


def baseline_placements(tables: Sequence[SequenceTable], num_devices: int, hosts: int
                        ) -> dict[str, tuple[SequencePlacement, ...]]:
    """table_wise, row_wise and table_row_wise placements of the tables (module docstring)."""
    def size(t: SequenceTable) -> float:
        return float(t.rows * t.dim)

    tw = _least_loaded(tables, num_devices, size)
    trw = _least_loaded(tables, hosts, size)
    return {
        "table_wise": tuple(table_wise(t.rows, num_devices, hosts, r) for t, r in zip(tables, tw)),
        "row_wise": tuple(row_wise(t.rows, num_devices, hosts, offset=i) for i, t in enumerate(tables)),
        "table_row_wise": tuple(table_row_wise(t.rows, num_devices, hosts, h, offset=i)
                                for i, (t, h) in enumerate(zip(tables, trw))),
    }


def compare_at_same_memory(tables: Sequence[SequenceTable], topology: Topology, num_devices: int,
                           batch_per_rank: float, device_memory_bytes: float, quanta: int = DEFAULT_QUANTA,
                           window: int = DEFAULT_WINDOW) -> dict[str, PlanComparison]:
    """table_wise, row_wise, table_row_wise and flexshard for the same tables under the same per-device
    budget, each priced by ``costs.sequence_traffic`` (rules in the module docstring)."""
    tables = tuple(tables)
    out: dict[str, PlanComparison] = {}
    for name, placements in baseline_placements(tables, num_devices, topology.hosts).items():
        tr = sequence_traffic(list(zip(tables, placements)), topology, batch_per_rank)
        fits = within_budget(tr.peak_memory_bytes, device_memory_bytes)
        out[name] = PlanComparison(name, placements, tr, fits)
    planner = FlexShardPlanner(topology, num_devices, batch_per_rank, device_memory_bytes, quanta, window)
    plan = planner.plan(tables)
    tr = plan.traffic()
    out["flexshard"] = PlanComparison("flexshard", plan.placements, tr,
                                      within_budget(tr.peak_memory_bytes, device_memory_bytes))
    return out
