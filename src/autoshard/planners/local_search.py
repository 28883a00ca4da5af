"""Local search: refine the best plan of NeuroShard and the heuristics by moving and swapping shards.

Top to bottom (``planners.finish``, as ``ilp`` and ``rl`` end):

1. **Starts.** Run every planner in ``starts`` (infeasible ones are skipped).
2. **Sharding moves.** Give each start plan the sharding moves (``planners.sharding_moves``: its hottest
   tables tried as replicas and row-wise shards) and start from the moved plan the cost model scores
   cheapest (plan cost = the training step's: max fwd + max bwd + the step's collectives,
   ``autoshard.costs.step``). The moves come first because they change which start is best: a hot table
   made row-wise takes the place of the balance a descent would have built around it whole.
3. **Descent and kicks** (``planners.descent``): move and swap the start's table- and column-wise shards
   off the bottleneck device, the row-wise shards and replicas held where they are, then perturb and
   descend again, keeping the best placement the model sees; then the moves once more on what is still
   table-wise, kept where the model's step drops.

Column shards move like whole tables; the layout (which tables are split, and how) is the start plan's. The
result is never dearer by the model than any start plan with its moves. The time limit covers everything:
NeuroShard's start gets what is left of it (it stops between beam levels), then the descent and kicks (they
stop between steps); the sharding moves may run a tenth of the limit past it (they stop between tables).
With the same seed the search is deterministic as long as it finishes within ``time_limit_s``; when the
limit cuts it short, how far it got depends on the machine's speed.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from autoshard.costs.base import CostModel
from autoshard.costs.loading import resolve_cost_model
from autoshard.errors import AutoshardError, InfeasibleError
from autoshard.plan import Plan
from autoshard.planners.base import PlannerOptions, config_from_extra, make_planner
from autoshard.planners.column_split import to_plan
from autoshard.planners.descent import KICK_SIZE, SWAP_SAMPLES
from autoshard.planners.finish import Descent, finish
from autoshard.planners.neuroshard import NeuroShardConfig, NeuroShardPlanner
from autoshard.planners.pricing import planner_settings, planning_model
from autoshard.tasks import Task

log = logging.getLogger(__name__)

SEARCH_RISK = 0.0
"""search's k when ``--option risk=K`` is not given: its devices priced at the model's mean, not at the
model's ``risk_k`` (the k covering 84% of held-out device errors; neuroshard and rl too plan at the mean since
stop 60, ``planners.neuroshard.NEUROSHARD_RISK``, ilp since stop 61, ``planners.exact.ILP_RISK``). Chosen by
the measured cost of the plans each k gives on held-out tasks: on 10 train tasks of each of four suites
(DLRM-20 (4), DLRM-10 (8), DLRM-50 (4), DLRM-20 (8); none shares a table with their test tasks), guarded
search at the mean measured 0.975 [0.954, 0.996] of guarded search at risk_k, and 0.991 [0.980, 1.001] on two
other suites' test tasks (docs/benchmarks.md, "Stop 59"; ``benchmarks/risk_objective.py``). Risk is still
weighed: the guard (``planners.guard``) keeps a heuristic's plan unless the mean predicts search's cheaper by
more than the two plans' spread."""


@dataclass(frozen=True)
class LocalSearchConfig:
    """Local search settings (NeuroShard's own settings can be given alongside, for its start plan)."""

    starts: tuple[str, ...] = ("neuroshard", "size_lookup_greedy", "lookup_greedy", "dim_greedy",
                               "size_greedy")
    """Registered planners whose plans may seed the search; it starts from the one the model scores best
    after its sharding moves."""
    swap_samples: int = SWAP_SAMPLES
    """Swaps (bottleneck shard x shard elsewhere) priced per step, sampled with the seed when there are
    more."""
    kicks: int = 20
    """Perturbation rounds after the first descent (each: random moves, then descent)."""
    kick_size: int = KICK_SIZE
    """Random shard moves per perturbation."""
    sharding_moves: int = 8
    """Tables (hottest first) tried as data-parallel replicas or row-wise shards on every start plan and
    after the descent (``sharding_moves``); 0 = table- and column-wise only."""
    uneven_rows: bool = False
    """Also try row-wise ranges of equal lookup shares for skewed tables (``sharding_moves``): cheaper where
    a few rows take most lookups, but TorchRec's DMP cannot run them (it bucketises by even blocks), so off
    by default; autoshard's runtime runs them."""

    def __post_init__(self) -> None:
        if not self.starts or "search" in self.starts:
            raise AutoshardError("search setting starts must name at least one planner other than 'search'")
        if self.swap_samples < 0 or self.kicks < 0 or self.kick_size < 1:
            raise AutoshardError("search settings need swap_samples >= 0, kicks >= 0 and kick_size >= 1")


@dataclass(frozen=True)
class LocalSearchResult:
    """What the last search did."""

    start_algorithm: str
    start_ms: float
    """Model plan cost of the start plan after its sharding moves."""
    final_ms: float
    """Model plan cost of the returned plan (never above start_ms)."""
    steps: int
    """Improving moves/swaps applied."""
    kicks: int
    """Perturbation rounds run."""
    timed_out: bool
    """Whether the time limit stopped the search (the result may then depend on machine speed)."""
    sharding_moves: tuple[str, ...] = ()
    """Tables turned into replicas or row shards (``planners.sharding_moves``), with the step cost saved
    (``final_ms`` includes them)."""


class LocalSearchPlanner:
    """Move/swap descent with kicks from the best of several planners, judged by one cost model."""

    name = "search"

    def __init__(self, cost_model: CostModel | None = None, config: LocalSearchConfig | None = None,
                 neuroshard: NeuroShardConfig | None = None, seed: int = 0,
                 time_limit_s: float = 10.0) -> None:
        self.cost_model = resolve_cost_model(cost_model)
        self.config = config or LocalSearchConfig()
        self.neuroshard = neuroshard or NeuroShardConfig()
        self.seed = seed
        self.time_limit_s = time_limit_s
        self.last_result: LocalSearchResult | None = None

    def _starts(self, task: Task, deadline: float) -> list[tuple[str, Plan]]:
        """The start planners' plans (the infeasible ones skipped; none feasible: InfeasibleError)."""
        plans: list[tuple[str, Plan]] = []
        for name in self.config.starts:
            try:
                if name == "neuroshard":  # gets what is left of the budget, level by level
                    layout, ranks, _ = NeuroShardPlanner(self.cost_model, self.neuroshard).search(
                        task, deadline)
                    plans.append((name, to_plan(task, layout, ranks, name)))
                else:
                    planner = make_planner(name, PlannerOptions(seed=self.seed, cost_model=self.cost_model))
                    plans.append((name, planner.plan(task)))
            except InfeasibleError as e:
                log.info("search: start %s is infeasible (%s)", name, e)
        if not plans:
            raise InfeasibleError(f"search: none of the start planners {list(self.config.starts)} "
                                  "found a plan within the devices' memory; "
                                  "give more memory or more devices")
        return plans

    def plan(self, task: Task) -> Plan:
        deadline = time.perf_counter() + self.time_limit_s
        starts = self._starts(task, deadline)
        c = self.config
        # the moves get a tenth of the limit past it: a search cut short still tries them
        finished = finish(task, self.cost_model, starts, self.name, moves=c.sharding_moves,
                          uneven_rows=c.uneven_rows,
                          descent=Descent(deadline, self.seed, c.kicks, c.swap_samples, c.kick_size),
                          moves_deadline=deadline + 0.1 * self.time_limit_s)
        refined = finished.refined
        assert refined is not None  # finish descends when given a descent
        self.last_result = LocalSearchResult(finished.kept, finished.moved_ms, finished.final_ms,
                                             refined.steps, refined.kicks, refined.timed_out, finished.moves)
        log.info("search: from %s at %.3f ms to %.3f ms in %d steps, %d kicks%s", finished.kept,
                 finished.moved_ms, finished.final_ms, refined.steps, refined.kicks,
                 " (stopped by the time limit)" if refined.timed_out else "")
        return finished.plan


def local_search_planner(options: PlannerOptions) -> LocalSearchPlanner:
    extra = planner_settings(options.extra)
    config = config_from_extra(LocalSearchConfig, extra, shared_with=(NeuroShardConfig,))
    neuroshard = config_from_extra(NeuroShardConfig, extra, shared_with=(LocalSearchConfig,))
    return LocalSearchPlanner(planning_model(options, SEARCH_RISK), config, neuroshard,  # type: ignore[arg-type]
                              options.seed, options.time_limit_s)
