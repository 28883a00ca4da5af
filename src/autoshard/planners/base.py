"""The planner interface and the registry behind ``autoshard plan --algo NAME``.

A planner is a class with a ``name`` and ``plan(task) -> Plan``. Every planner is built from the same
``PlannerOptions`` by a factory registered under its name, so the CLI and the benchmark treat them alike.
"""

from __future__ import annotations

import importlib
import math
import time
from collections.abc import Iterable, Mapping
from dataclasses import MISSING, dataclass, field, fields, replace
from typing import Any, Protocol, runtime_checkable

from autoshard.costs.base import CostModel
from autoshard.errors import AutoshardError
from autoshard.gc_pause import paused_collection
from autoshard.plan import Plan, validate
from autoshard.planners.guard import (
    DEFAULT_GUARD_K,
    GUARD_HEURISTICS,
    GUARD_OPTION,
    GUARDED,
    GuardedPlanner,
    parse_guard,
)
from autoshard.planners.row_split import split_oversize
from autoshard.tasks import Task
from autoshard.threads import torch_threads


@runtime_checkable
class Planner(Protocol):
    name: str

    def plan(self, task: Task) -> Plan:
        """A valid plan for ``task``, or InfeasibleError naming what does not fit."""
        ...


@dataclass(frozen=True)
class PlannerOptions:
    """What any planner may need; each factory takes what it uses."""

    seed: int = 0
    """Seed for every random choice, so a planner is deterministic."""
    cost_model: CostModel | None = None
    """Cost model for planners that score candidates (search, ilp, rl); None = the default model."""
    policy_path: str | None = None
    """Trained policy checkpoint for ``rl``."""
    time_limit_s: float = 10.0
    """Wall-time budget for planners that search (local search, ilp, neuroshard's beam search)."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Planner-specific settings (e.g. beam width), by name."""
    algorithm_extra: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Settings for one algorithm only, by algorithm name, added to ``extra`` when that planner is built (a
    benchmark that runs every planner from one options object, e.g. TorchRec's compute device)."""

    def __post_init__(self) -> None:
        # NaN or a negative budget would reach the planners' deadline arithmetic (neuroshard's beam search
        # cannot count layouts in NaN seconds); 0 leaves a search planner its first step only
        if not (math.isfinite(self.time_limit_s) and self.time_limit_s >= 0):
            raise AutoshardError(f"time limit {self.time_limit_s} s must be a finite number of seconds, 0 or "
                                 "more (--time-limit)")


PLANNERS: dict[str, tuple[str, str]] = {
    # name: ("module:factory(options) -> Planner", one-line description). Entries are import paths, loaded
    # only when built, so a planner living higher up the pipeline (TorchRec's, in autoshard.torchrec) is
    # registered here without this module importing it (and TorchRec is imported only when it is asked for).
    "random": ("autoshard.planners.heuristics:random_planner",
               "uniformly random device among those with memory room"),
    "round_robin": ("autoshard.planners.heuristics:round_robin_planner",
                    "tables in order to devices in turn, skipping full devices"),
    "dim_greedy": ("autoshard.planners.heuristics:dim_greedy_planner",
                   "largest dim first onto the least-loaded device (load = sum of dims)"),
    "lookup_greedy": ("autoshard.planners.heuristics:lookup_greedy_planner",
                      "largest dim x pooling first onto the least-loaded device"),
    "size_greedy": ("autoshard.planners.heuristics:size_greedy_planner",
                    "largest table size first onto the least-loaded device"),
    "size_lookup_greedy": ("autoshard.planners.heuristics:size_lookup_greedy_planner",
                           "largest dim x pooling x log10(rows) first onto the least-loaded device"),
    "rl": ("autoshard.planners.rl.planner:rl_planner",
           ("trained RL policy (--policy), greedy or best of extra['samples'] by the cost model; also "
            "places NeuroShard's column shards (extra['column_splits']), then a descent on the model's "
            "step (extra['refine']); above the split search's size also NeuroShard's capped greedy "
            "(extra['greedy_start'])")),
    "neuroshard": ("autoshard.planners.neuroshard:neuroshard_planner",
                   "NeuroShard: beam search over column splits x capped greedy, scored by the cost model"),
    "search": ("autoshard.planners.local_search:local_search_planner",
               "local search (moves/swaps off the bottleneck) from the best of neuroshard and heuristics"),
    "ilp": ("autoshard.planners.exact:ilp_planner",
            ("exact min-max placement (CP-SAT) over per-table predicted costs, table-wise and over "
             "NeuroShard's column shards (extra['column_splits']), then a descent on the model's step "
             "(extra['refine_share']); reports the gap")),
    "torchrec": ("autoshard.torchrec.baseline:torchrec_planner",
                 ("TorchRec's EmbeddingShardingPlanner (table/column/row-wise, data-parallel) on the task's "
                  "memory, read back")),
}


HEURISTICS_MODULE = "autoshard.planners.heuristics"
"""Planners whose factory lives here are the papers' heuristic baselines (the 'best heuristic' reference)."""


def is_heuristic(name: str) -> bool:
    """True for the papers' heuristic baselines, the reference every other algorithm is compared with."""
    return name in PLANNERS and PLANNERS[name][0].split(":")[0] == HEURISTICS_MODULE


def available_planners() -> dict[str, str]:
    """Name -> description of every registered planner."""
    return {name: desc for name, (_, desc) in PLANNERS.items()}


def make_planner(name: str, options: PlannerOptions | None = None) -> Planner:
    if name not in PLANNERS:
        raise AutoshardError(f"unknown algorithm {name!r}; choose one of: {', '.join(PLANNERS)}")
    module, factory = PLANNERS[name][0].split(":")
    options = options or PlannerOptions()
    own = options.algorithm_extra.get(name)
    if own:
        options = replace(options, extra={**options.extra, **own}, algorithm_extra={})
    k = parse_guard(options.extra.get(GUARD_OPTION, DEFAULT_GUARD_K))
    if GUARD_OPTION in options.extra:  # the guard's key, not the planner's own setting
        options = replace(options, extra={key: v for key, v in options.extra.items() if key != GUARD_OPTION})
    planner = getattr(importlib.import_module(module), factory)(options)
    if name not in GUARDED or k <= 0:
        return planner
    plain = replace(options, extra={}, algorithm_extra={})
    return GuardedPlanner(planner, options, k, {h: make_planner(h, plain) for h in GUARD_HEURISTICS})


def config_from_extra(cls: type, extra: Mapping[str, object], shared_with: Iterable[type] = ()) -> object:
    """Build the frozen config dataclass ``cls`` from ``PlannerOptions.extra``: keys naming its fields are
    used (strings from a command line are converted), keys of the configs in ``shared_with`` are left to
    them, and any other key is a one-line error listing the known settings."""
    own = {f.name: f for f in fields(cls)}
    known = set(own).union(*({f.name for f in fields(c)} for c in shared_with))
    unknown = sorted(set(extra) - known)
    if unknown:
        raise AutoshardError(f"unknown planner setting(s) {unknown}; "
                             f"known settings: {', '.join(sorted(known))}")
    kwargs = {}
    for name, value in extra.items():
        if name not in own:
            continue
        default = own[name].default
        if default is not MISSING and isinstance(value, str):
            value = parse_setting(name, value, type(default))
        kwargs[name] = value
    return cls(**kwargs)


def parse_setting(name: str, text: str, kind: type) -> object:
    """A planner setting given as text (a command line's ``--option``) as ``kind`` (bool: true/false, 1/0,
    yes/no; tuple: comma-separated); a one-line AutoshardError if it is not one."""
    try:
        if kind is bool:
            if text.lower() not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError(text)
            return text.lower() in ("true", "1", "yes")
        if kind is tuple:
            return tuple(x.strip() for x in text.split(",") if x.strip())
        return kind(text)
    except ValueError:
        raise AutoshardError(f"planner setting {name}={text!r} is not a valid {kind.__name__}") from None


def run_planner(planner: Planner, task: Task, torchrec_rows: bool = False) -> Plan:
    """Plan ``task``, record the wall time, and validate the result (a planner bug never yields a bad
    plan). Tables larger than any device are cut into row pieces for the planner and merged into row-wise
    shards after (``row_split``), unless the planner plans rows itself (``plans_rows = True``);
    ``torchrec_rows``: placed in TorchRec's even row_wise over every rank instead, so the plan exports.
    The planner runs on one torch thread (``autoshard.threads``) with the cyclic garbage collector paused
    (``autoshard.gc_pause``); the caller's settings are restored after."""
    task.check_fits()
    start = time.perf_counter()
    # a learned model prices thousands of small batches (``autoshard.threads``); a full collection in the
    # middle of a plan cost 83 ms (``autoshard.gc_pause``)
    with torch_threads(), paused_collection():
        pieces = None if getattr(planner, "plans_rows", False) else split_oversize(task, torchrec_rows)
        if pieces is None:
            plan = planner.plan(task)
        elif pieces.left_to_plan and isinstance(planner, GuardedPlanner):
            plan = planner.plan_split(pieces)  # the guard weighs the merged plans
        else:
            plan = pieces.merge(planner.plan(pieces.task) if pieces.left_to_plan else None)
            plan = replace(plan, algorithm=plan.algorithm or planner.name)
    elapsed = time.perf_counter() - start
    validate(plan, task)
    return replace(plan, planning_time_s=elapsed, task_name=task.name)
