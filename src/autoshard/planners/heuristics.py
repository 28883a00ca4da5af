"""The heuristic baselines of the AutoShard and DreamShard papers.

Greedy ones sort tables by a cost proxy, largest first, and put each on the least-loaded device (load = the
sum of the proxy) that still has memory room. When no device has room they raise InfeasibleError naming the
table and the memory it is short of, never placing it anyway (the reference prototypes silently overflow the
last device, and their ``random`` ignores memory).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from autoshard.errors import InfeasibleError
from autoshard.io import format_bytes
from autoshard.plan import Plan
from autoshard.planners.base import PlannerOptions
from autoshard.tables.table import Table
from autoshard.tasks import Task

CostProxy = Callable[[Table], float]


def dim_proxy(t: Table) -> float:
    return float(t.dim)


def lookup_proxy(t: Table) -> float:
    return t.dim * t.pooling_factor


def size_proxy(t: Table) -> float:
    return float(t.rows * t.dim)


def size_lookup_proxy(t: Table) -> float:
    return t.dim * t.pooling_factor * math.log10(max(t.rows, 2))


def _no_room(task: Task, table: Table, free: np.ndarray, algorithm: str) -> InfeasibleError:
    need = task.table_memory(table)
    best = int(free.max())
    return InfeasibleError(
        f"{algorithm}: table {table.name} needs {format_bytes(need)} but the device with most room has "
        f"{format_bytes(best)} free (short by {format_bytes(need - best)}); give more memory or more devices"
    )


class GreedyPlanner:
    """Largest proxy first onto the least-loaded device with room (ties to the lowest rank)."""

    def __init__(self, name: str, proxy: CostProxy) -> None:
        self.name = name
        self.proxy = proxy

    def plan(self, task: Task) -> Plan:
        proxies = np.array([self.proxy(t) for t in task.tables])
        order = np.argsort(-proxies, kind="stable")
        free = np.array(task.device_memory, dtype=np.int64)
        load = np.zeros(task.num_devices)
        ranks = [0] * task.num_tables
        for i in order:
            need = task.table_memory(task.tables[i])
            candidates = np.where(free >= need, load, np.inf)
            r = int(np.argmin(candidates))
            if not np.isfinite(candidates[r]):
                raise _no_room(task, task.tables[i], free, self.name)
            ranks[i] = r
            free[r] -= need
            load[r] += proxies[i]
        return Plan.from_ranks(task, ranks, self.name)


class RandomPlanner:
    """Each table onto a uniformly random device among those with room (seeded)."""

    name = "random"

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def plan(self, task: Task) -> Plan:
        rng = np.random.default_rng(self.seed)
        free = np.array(task.device_memory, dtype=np.int64)
        ranks = []
        for t in task.tables:
            need = task.table_memory(t)
            fits = np.flatnonzero(free >= need)
            if len(fits) == 0:
                raise _no_room(task, t, free, self.name)
            r = int(rng.choice(fits))
            free[r] -= need
            ranks.append(r)
        return Plan.from_ranks(task, ranks, self.name)


class RoundRobinPlanner:
    """Tables in task order onto devices in turn, skipping a device without room."""

    name = "round_robin"

    def plan(self, task: Task) -> Plan:
        free = np.array(task.device_memory, dtype=np.int64)
        ranks = []
        nxt = 0
        for t in task.tables:
            need = task.table_memory(t)
            for k in range(task.num_devices):
                r = (nxt + k) % task.num_devices
                if free[r] >= need:
                    break
            else:
                raise _no_room(task, t, free, self.name)
            free[r] -= need
            ranks.append(r)
            nxt = (r + 1) % task.num_devices
        return Plan.from_ranks(task, ranks, self.name)


def random_planner(options: PlannerOptions) -> RandomPlanner:
    return RandomPlanner(options.seed)


def round_robin_planner(options: PlannerOptions) -> RoundRobinPlanner:
    return RoundRobinPlanner()


def dim_greedy_planner(options: PlannerOptions) -> GreedyPlanner:
    return GreedyPlanner("dim_greedy", dim_proxy)


def lookup_greedy_planner(options: PlannerOptions) -> GreedyPlanner:
    return GreedyPlanner("lookup_greedy", lookup_proxy)


def size_greedy_planner(options: PlannerOptions) -> GreedyPlanner:
    return GreedyPlanner("size_greedy", size_proxy)


def size_lookup_greedy_planner(options: PlannerOptions) -> GreedyPlanner:
    return GreedyPlanner("size_lookup_greedy", size_lookup_proxy)
