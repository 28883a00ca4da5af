"""``--algo rl``: place tables with a trained policy, greedy, or best of k samples picked by the cost
model; and the column shards of NeuroShard's split search the same way (or, on tasks too large for it,
NeuroShard's capped greedy beside the policy); then the sharding moves on each, the cheapest kept, and a
short descent on the model's step (``planners.finish``)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import numpy as np

from autoshard.costs.base import CostModel
from autoshard.costs.loading import SHIPPED_POLICY, load_recorded_model, resolve_cost_model
from autoshard.errors import AutoshardError, InfeasibleError
from autoshard.plan import Plan
from autoshard.planners.base import PlannerOptions, config_from_extra
from autoshard.planners.column_split import (
    beyond_split_search,
    column_shard_task,
    merge_column_shards,
    splits_wanted,
)
from autoshard.planners.finish import Descent, finish, whole_and_split
from autoshard.planners.neuroshard import EVEN_SPLITS, capped_greedy_plan, split_layout
from autoshard.planners.pricing import RISK_OPTION, planner_settings
from autoshard.planners.rl.env import PlacementEnv, TaskContext
from autoshard.planners.rl.policy import TrainedPolicy, run_episodes
from autoshard.tasks import Task

logger = logging.getLogger(__name__)

RL_RISK = 0.0
"""rl's k when ``--option risk=K`` is not given: the decoded placements and their finishing priced at the
model's mean, as search's and neuroshard's (``planners.local_search.SEARCH_RISK``), not at the model's
``risk_k`` (ilp too, ``planners.exact.ILP_RISK``). Chosen by the measured cost of the plans each k gives on
held-out tasks (``benchmarks/risk_objective.py --planner rl``, docs/benchmarks.md, "Stop 60"): on 10 train
tasks of each of DLRM-10 (8) and DLRM-20 (4), guarded rl at the mean measured 0.960 [0.921, 0.992] of guarded
rl at risk_k. The policy is unchanged; it was trained against the model as loaded (``planners.rl.train``: the
mean, not risk-priced), so it now also plans on the prices it learned on."""

CAPPED_GREEDY = "capped-greedy"
"""The label of the capped greedy's placement among rl's solves (``greedy_start``), as the guard reports
it."""


class RLPlanner:
    """Greedy decoding of a trained policy; with ``samples`` = k > 0, also k sampled placements, and the one
    the cost model predicts cheapest wins (the greedy one included, so sampling never makes it worse).

    The policy places whole tables (DreamShard's MDP). With ``column_splits`` ("on", or "auto" on tasks of at
    most ``AUTO_SPLIT_PAIRS`` tables x devices), it also places the column shards of the layout NeuroShard's
    beam search picks (``planners.neuroshard``: which tables to halve, how often), each shard a table of its
    own, a table's shards that meet on a device merged; the shards' plan stands alone where whole tables do
    not fit. Then, as ``ilp`` does (``planners.finish``): each placement's ``sharding_moves`` hottest tables
    are tried as row-wise shards or replicas and kept where the model's step cost drops
    (``planners.sharding_moves``), and the placement whose moved plan the model prices cheaper is kept (so
    the splits never make it worse by the model). With ``refine`` ("on", or "auto" on the same tasks as the
    splits), the kept placement then gets the bottleneck moves, swaps and kicks ``search`` runs, on the
    model's step, for up to ``refine_s`` seconds from the start of planning
    (``descent.refine_placement``), and the sharding moves again, kept where the model prices the
    result cheaper: the policy proposes, the descent fixes what its greedy decoding leaves. With
    ``greedy_start`` ("on", or "auto" on the tasks too large for the splits), NeuroShard's capped greedy
    places the whole tables too and is weighed as the column shards are. The placements not kept, with
    their sharding moves, are ``last_alternatives``, which the heuristic guard weighs too."""

    name = "rl"

    def __init__(self, policy: TrainedPolicy, cost_model: CostModel, samples: int = 0, seed: int = 0,
                 sharding_moves: int = 0, column_splits: str = "off", split_search_s: float = 1.0,
                 refine: str = "off", refine_s: float = 3.0, refine_kicks: int = 20,
                 greedy_start: str = "off", even_splits: bool = EVEN_SPLITS) -> None:
        if samples < 0:
            raise AutoshardError(f"samples {samples} must be >= 0")
        if sharding_moves < 0:
            raise AutoshardError(f"sharding_moves {sharding_moves} must be >= 0")
        self.policy, self.cost_model, self.samples, self.seed = policy, cost_model, samples, seed
        self.sharding_moves = sharding_moves
        self.column_splits, self.split_search_s = column_splits, split_search_s
        self.refine, self.refine_s, self.refine_kicks = refine, refine_s, refine_kicks
        self.greedy_start, self.even_splits = greedy_start, even_splits
        self.last_alternatives: tuple[tuple[str, Plan], ...] = ()
        """The finished plans the latest ``plan`` call did not return (whole tables, column shards or the
        capped greedy's, labelled), which the heuristic guard weighs too (``planners.guard``)."""

    def plan(self, task: Task) -> Plan:
        start = time.perf_counter()
        self.last_alternatives = ()
        whole: Plan | None = None
        try:
            whole = self._place(task)
        except InfeasibleError as e:
            whole_tables_error = e  # column shards may still fit where whole tables do not
        split = self._place_column_shards(task) if splits_wanted(self.column_splits, task) else None
        greedy = None
        if self.greedy_start == "on" or (self.greedy_start == "auto" and beyond_split_search(task)):
            greedy = capped_greedy_plan(task, self.cost_model, self.name)
        if whole is None and split is None and greedy is None:
            raise whole_tables_error
        descent = (Descent(start + self.refine_s, self.seed, self.refine_kicks)
                   if splits_wanted(self.refine, task) else None)
        solves = whole_and_split(whole, split) + ([(CAPPED_GREEDY, greedy)] if greedy is not None else [])
        finished = finish(task, self.cost_model, solves, self.name, moves=self.sharding_moves,
                          descent=descent)
        self.last_alternatives = finished.alternatives
        return finished.plan

    def _place_column_shards(self, task: Task) -> Plan | None:
        """The policy's placement of the column shards of NeuroShard's best layout (None: it splits nothing
        or no layout fits memory)."""
        layout = split_layout(task, self.cost_model, self.split_search_s, self.even_splits)
        if layout is None:
            return None
        shards = column_shard_task(task, layout)
        try:
            placed = self._place(shards)
        except InfeasibleError:
            return None
        index = {t.name: i for i, t in enumerate(shards.tables)}
        ranks = np.empty(len(layout), dtype=np.int64)
        for p in placed.placements:
            ranks[index[p.table]] = p.shards[0].rank
        return merge_column_shards(task, layout, ranks, self.name)

    def _place(self, task: Task) -> Plan:
        ctx = TaskContext.build(task, self.cost_model, self.policy.normalizer)
        env = PlacementEnv(ctx, self.cost_model, num_envs=1 + self.samples)
        rng = np.random.default_rng(self.seed) if self.samples else None
        run_episodes(self.policy.net, env, rng, greedy_first=1)
        costs = np.where(env.failed, np.inf, env.plan_costs())
        best = int(np.argmin(costs))
        if not np.isfinite(costs[best]):
            raise InfeasibleError(f"{self.name}: {env.failure[0]}; give more memory or more devices")
        logger.info("rl: greedy %.3f ms, best of %d samples %.3f ms (%s)", costs[0], self.samples,
                    costs[best], self.cost_model.name)
        return env.to_plan(best, self.name)


@dataclass(frozen=True)
class RLPlanConfig:
    """Decoding settings of ``--algo rl`` (``PlannerOptions.extra`` / ``--option``)."""

    samples: int = 0
    """Sampled plans besides the greedy one; the cost model picks the best (0 = greedy only)."""
    sharding_moves: int = 8
    """Hottest tables tried as row-wise shards or replicas after the policy's placement, kept where the
    model's step cost drops (``planners.sharding_moves``; ``ilp``'s default); 0 = the policy's table-wise
    plan as it is."""
    column_splits: str = "auto"
    """"on": also place the column shards of NeuroShard's split search with the policy and keep the plan
    the model prices cheaper; "off": whole tables only (DreamShard's MDP as it is); "auto": on for tasks of
    at most ``AUTO_SPLIT_PAIRS`` tables x devices, where the search and the second placement add well under
    a second here (856 tables on 128 devices: 1.3 s without, 3.8 s with; docs/benchmarks.md, stop 19)."""
    split_search_s: float = 1.0
    """Seconds the split search may take (its table-wise level always runs; ``neuroshard``'s deadline)."""
    even_splits: bool = EVEN_SPLITS
    """That search's children also halve every shard of a split table at once
    (``NeuroShardConfig.even_splits``)."""
    refine: str = "auto"
    """"on": descend on the model's step from the policy's placement (moves, swaps, kicks: what ``search``
    runs after its start, ``descent.refine_placement``) and keep the result, never dearer by the model;
    "off": the policy's placement as it is; "auto": on for the tasks ``column_splits="auto"`` splits, so 856
    tables on 128 devices keep the policy's speed. Why: on production-40-8 at stop 33 the policy's plans
    were the one learned planner not resolved below the best heuristic (0.977 [0.943, 1.013]), while ``ilp``'s
    solve gained 10% from the same descent; with it, rl measured 0.865 [0.832, 0.901] there (stop 34,
    docs/benchmarks.md)."""
    refine_s: float = 3.0
    """Seconds from the start of planning by which the descent and its kicks stop (it starts after the
    policy's placements and the split search, whatever they took)."""
    refine_kicks: int = 20
    """Perturb-and-descend rounds after the first descent, within ``refine_s`` (0 = descent only)."""
    greedy_start: str = "auto"
    """"on": also place the whole tables by NeuroShard's capped greedy on the model's marginal costs (its
    table-wise level, ``neuroshard.capped_greedy_plan``) and keep, after the sharding moves, whichever
    placement the model prices cheapest (the other goes to the guard); "off": the policy's placements only;
    "auto": on for the tasks ``column_splits="auto"`` leaves unsplit (more than ``AUTO_SPLIT_PAIRS`` tables x
    devices). Why: the shipped policy, trained on tasks of 20 and 40 tables on 4 and 8 devices, places 856
    tables on 128 devices worse than that greedy (the model's step at its risk quantile: 98.8 against 92.5
    ms, 72.9 against 64.7 after the sharding moves), so the guard returned dim_greedy's plan at 96.0 ms; the
    greedy costs 0.06-0.10 s there (docs/benchmarks.md, "Stop 51")."""

    def __post_init__(self) -> None:
        for key in ("samples", "sharding_moves", "refine_kicks"):
            value = getattr(self, key)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise AutoshardError(f"rl setting {key}={value!r} must be a non-negative integer")
        for key in ("column_splits", "refine", "greedy_start"):
            if getattr(self, key) not in ("auto", "on", "off"):
                raise AutoshardError(f"rl setting {key}={getattr(self, key)!r} must be auto, on or off")
        for key in ("split_search_s", "refine_s"):
            value = getattr(self, key)
            if isinstance(value, bool) or not (isinstance(value, (int, float)) and value > 0):
                raise AutoshardError(f"rl setting {key}={value!r} must be a positive number of seconds")


def rl_planner(options: PlannerOptions) -> RLPlanner:
    policy_path = options.policy_path
    if not policy_path:
        if not SHIPPED_POLICY.is_file():
            raise AutoshardError("--algo rl needs a trained policy: pass --policy policy.pt "
                                 "(train one with 'autoshard train-policy')")
        policy_path = str(SHIPPED_POLICY)
        logger.info("using the shipped policy (%s)", SHIPPED_POLICY)
    policy = TrainedPolicy.load(policy_path)
    model = options.cost_model
    if model is None:
        # no model given: plan with the one the policy was trained against, if it is still there
        model = load_recorded_model(policy.cost_model.get("spec"))
    model = resolve_cost_model(model, options.extra.get(RISK_OPTION, RL_RISK))
    trained_on = policy.cost_model.get("name")
    if trained_on and trained_on != model.name:
        logger.warning("policy was trained against cost model %r but plans with %r", trained_on, model.name)
    config = config_from_extra(RLPlanConfig, planner_settings(options.extra))
    return RLPlanner(policy, model, samples=config.samples, seed=options.seed,
                     sharding_moves=config.sharding_moves, column_splits=config.column_splits,
                     split_search_s=float(config.split_search_s), refine=config.refine,
                     refine_s=float(config.refine_s), refine_kicks=config.refine_kicks,
                     greedy_start=config.greedy_start, even_splits=config.even_splits)
