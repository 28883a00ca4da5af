"""The heuristic guard: a learned planner leaves the best heuristic's plan only for a predicted gain larger
than the model's own uncertainty.

Why: a planner that optimises a cost model's predictions picks, among many candidates, the one whose error is
most favourable (the optimiser's curse). Measured: in the quickstart every learned planner was 12-37% worse
than lookup_greedy while predicting itself 5-20% better. A planner cannot beat the model's error, so its plan
must win by more than that error to be trusted.

The rule (``guard_plan``): price the planner's plan P and every deterministic heuristic's plan H with the
planning model's MEAN; let H* be the cheapest heuristic plan by that price. Keep P only if

    mean(P) + k x s(P - H*) < mean(H*)

(k = ``PlannerOptions.extra['guard']``, default ``DEFAULT_GUARD_K`` = 1: one standard deviation of the
predicted difference); otherwise return H* under the planner's name, and log why. s(P - H*), the model's
uncertainty of the difference (``difference_spread_ms``):

- *paired*, for an ensemble whose every device of both plans lies inside its training support: the standard
  deviation over the members of step_m(P) - step_m(H*). Two plans of one task share most of their tables'
  placements, and a member's error on what they share cancels in its difference; only disagreement about
  what differs remains. Measured (stop 22, docs/benchmarks.md): on the 20 test tasks of DLRM-20 (2) and
  DLRM-50 (2) this margin was 3-10x smaller than the independent one, and the 6 tasks where search's plan
  beat its margin measured 0.899-1.005 of H*'s plan side by side (5 rounds each), where the independent
  margin kept H* on all 20;
- *independent* otherwise: sqrt(s(P)^2 + s(H*)^2), s(X) the model's spread of X's step (the step priced at
  mean + 1 x spread per device, minus the step at the mean: an ensemble's disagreement, or the calibrated
  fallback's relative error on devices outside the training support, which no member's difference carries;
  ``costs.learned``), taking the two plans' errors as independent.

A model without spread (the analytical one, a single network without support) has margin 0: the guard then
only keeps whichever of P and the heuristics the model prices cheapest, which a planner's own search should
already ensure. ``guard=0`` switches the guard off. Plans that tie on the
step (one device, say a hot table alone, bounds them all) are ranked by their devices' costs from the
slowest down (leximax): the heuristics among themselves and, without a margin, the planner's plan against
them.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from autoshard.costs.base import CostModel, plan_cost
from autoshard.costs.learned.risk import RiskPricedModel, offers_spread, risk_priced
from autoshard.costs.loading import resolve_cost_model
from autoshard.errors import AutoshardError, InfeasibleError
from autoshard.plan import Plan
from autoshard.tasks import Task

log = logging.getLogger(__name__)

GUARD_OPTION = "guard"
"""``PlannerOptions.extra`` key: the margin's k (>= 0; 0 switches the guard off)."""
DEFAULT_GUARD_K = 1.0
GUARDED = ("search", "neuroshard", "ilp", "rl")
"""The learned (model-driven) planners the guard wraps."""
GUARD_HEURISTICS = ("dim_greedy", "lookup_greedy", "size_greedy", "size_lookup_greedy")
"""The deterministic heuristics whose plans every guarded planner's plan must beat."""


@dataclass(frozen=True)
class GuardDecision:
    """What the guard compared and kept (ms are the planning model's mean predictions of the step)."""

    planner: str
    planner_ms: float
    heuristic: str
    heuristic_ms: float
    margin_ms: float
    kept_planner: bool
    margin_kind: str = "independent"
    """'paired' (the ensemble members' spread of the difference) or 'independent' (``guard_plan``)."""

    def describe(self) -> str:
        gain = self.heuristic_ms - self.planner_ms
        if self.kept_planner:
            return (f"{self.planner}: kept its plan (predicted {gain:.3f} ms below {self.heuristic}'s, more "
                    f"than the model's {self.margin_kind} uncertainty {self.margin_ms:.3f} ms)")
        return (f"{self.planner}: kept {self.heuristic}'s plan (predicted gain {gain:.3f} ms of its own plan "
                f"is within the model's {self.margin_kind} uncertainty {self.margin_ms:.3f} ms)")


def parse_guard(value: Any) -> float:
    """The guard's k from a number or a command-line string: finite and >= 0."""
    try:
        k = float(value)
    except (TypeError, ValueError):
        raise AutoshardError(f"guard {value!r} is not a number; give e.g. guard=1 (0 switches it off)"
                             ) from None
    if not math.isfinite(k) or k < 0:
        raise AutoshardError(f"guard {k:g} must be a finite number >= 0 (0 switches it off)")
    return k


def mean_model(model: CostModel | None) -> CostModel:
    """The model of the means behind a planner's (possibly risk-priced) model."""
    resolved = resolve_cost_model(model)
    return resolved.base if isinstance(resolved, RiskPricedModel) else resolved


def plan_spread_ms(model: CostModel, task: Task, plan: Plan, mean_ms: float | None = None) -> float:
    """The model's spread of ``plan``'s step: the step priced at mean + 1 x spread minus the step at the mean
    (``mean_ms`` if already priced; 0 for a model without spread)."""
    if not offers_spread(model):
        return 0.0
    mean_ms = plan_cost(model, task, plan).plan_ms if mean_ms is None else mean_ms
    return max(plan_cost(risk_priced(model, 1.0), task, plan).plan_ms - mean_ms, 0.0)


def paired_spread_ms(model: CostModel, task: Task, plan: Plan, other: Plan) -> float | None:
    """The standard deviation over ``model``'s ensemble members of step(plan) - step(other); None for a model
    without members (fewer than 2) or where a device of either plan lies outside its training support (there
    the fallback's error, which no member carries, has to count: ``difference_spread_ms``)."""
    members = getattr(model, "member_models", None)
    if not callable(members) or getattr(model, "ensemble_size", 1) < 2:
        return None
    outside = getattr(model, "out_of_support", None)
    if callable(outside) and any(outside(task, p.device_shards(task)) for p in (plan, other)):
        return None
    diffs = [plan_cost(m, task, plan).plan_ms - plan_cost(m, task, other).plan_ms for m in members()]
    return float(np.std(diffs, ddof=1))


def difference_spread_ms(model: CostModel, task: Task, plan: Plan, other: Plan,
                         means: tuple[float, float] | None = None) -> tuple[float, str]:
    """The model's uncertainty of step(plan) - step(other) and its kind, 'paired' or 'independent' (module
    docstring); ``means`` the two plans' mean steps if already priced."""
    paired = paired_spread_ms(model, task, plan, other)
    if paired is not None:
        return paired, "paired"
    mine, theirs = means if means is not None else (None, None)
    independent = math.hypot(plan_spread_ms(model, task, plan, mine),
                             plan_spread_ms(model, task, other, theirs))
    return independent, "independent"


def _leximax(cost: Any) -> tuple[float, ...]:
    """A plan's step, then its devices' fwd + bwd from the slowest down (rounded to 1 ns): plans tie on the
    step whenever one device (say, a hot table alone) bounds them all, and then the one whose other devices
    are lighter has the most room for the model's errors."""
    totals = sorted((round(d.fwd_ms + d.bwd_ms, 6) for d in cost.devices), reverse=True)
    return (round(cost.plan_ms, 6), *totals)


def guard_plan(task: Task, plan: Plan, heuristics: dict[str, Plan], model: CostModel,
               k: float) -> tuple[Plan, GuardDecision | None]:
    """``plan`` or the cheapest heuristic plan (by ``model``'s mean), by the rule of the module docstring."""
    if not heuristics:
        return plan, None
    costs = {name: plan_cost(model, task, p) for name, p in heuristics.items()}
    keys = {name: _leximax(c) for name, c in costs.items()}
    best = min(keys, key=lambda n: (keys[n], n))
    own = plan_cost(model, task, plan)
    mine_key = _leximax(own)
    mine, best_ms = own.plan_ms, costs[best].plan_ms
    spread, kind = difference_spread_ms(model, task, plan, heuristics[best], (mine, best_ms))
    margin = k * spread
    # strictly cheaper by more than the margin; with no margin, a tie on the step goes to the better-balanced
    keep = mine_key[0] + margin < keys[best][0] or (margin == 0 and mine_key < keys[best])
    decision = GuardDecision(plan.algorithm, mine, best, best_ms, margin, keep, kind)
    if keep:
        return plan, decision
    return replace(heuristics[best], algorithm=plan.algorithm), decision


class GuardedPlanner:
    """A learned planner whose plan must beat the heuristics' by more than the model's uncertainty."""

    def __init__(self, inner: Any, options: Any, k: float, heuristics: dict[str, Any]) -> None:
        self.inner, self.options, self.k = inner, options, k
        self.heuristics = dict(heuristics)
        """The heuristic planners (name -> planner) whose plans the inner one's must beat."""
        self.name = inner.name
        self.plans_rows = bool(getattr(inner, "plans_rows", False))
        self.last_decision: GuardDecision | None = None
        """The decision of the latest ``plan`` call (for reports and tests)."""

    def __getattr__(self, name: str) -> Any:
        # the wrapped planner's own attributes (its cost_model, config, last_result) read through
        if "inner" not in self.__dict__:
            raise AttributeError(name)
        return getattr(self.__dict__["inner"], name)

    def plan(self, task: Task) -> Plan:
        plan = self.inner.plan(task)
        heuristics: dict[str, Plan] = {}
        for name, planner in self.heuristics.items():
            try:
                heuristics[name] = planner.plan(task)
            except InfeasibleError:
                continue
        plan = replace(plan, algorithm=plan.algorithm or self.name)
        chosen, self.last_decision = guard_plan(task, plan, heuristics, mean_model(self.options.cost_model),
                                                self.k)
        if self.last_decision is not None:
            log.info("guard: %s", self.last_decision.describe())
        return chosen
