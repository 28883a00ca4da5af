"""The heuristic guard: a learned planner leaves the best heuristic's plan only for a predicted gain larger
than the model's own uncertainty.

Why: a planner that optimises a cost model's predictions picks, among many candidates, the one whose error is
most favourable (the optimiser's curse). Measured: in the quickstart every learned planner was 12-37% worse
than lookup_greedy while predicting itself 5-20% better. A planner cannot beat the model's error, so its plan
must win by more than that error to be trusted.

The rule (``guard_plan``): price the planner's plan P and every deterministic heuristic's plan H with the
planning model's MEAN; let H* be the cheapest heuristic plan by that price, and let s(X) be the model's spread
of plan X's step cost (the step priced at mean + 1 x spread per device, minus the step at the mean: an
ensemble's disagreement, or the calibrated fallback's relative error on devices outside the training support;
``costs.learned``). Keep P only if

    mean(P) + k x sqrt(s(P)^2 + s(H*)^2) < mean(H*)

(k = ``PlannerOptions.extra['guard']``, default ``DEFAULT_GUARD_K`` = 0.5: half the difference's standard
deviation, taking the two plans' errors as independent); otherwise return H* under the planner's name, and
log why. Why 0.5 (stop 62; until then 1): replayed exactly on every learned planner's measured candidates of
80 held-out train tasks of eight DLRM suites (``benchmarks/guard_k.py``), the plans returned at k = 0.5
measured 0.988 [0.978, 0.997] of those at k = 1 (0.955-0.991 on the 4- and 8-device suites, 0.989-1.012 on
the 2-device ones: DLRM-10 (2) 1.012 [1.000, 1.036], one task 12.5% above), and 0.994 [0.987, 0.999] of
those at k = 0.75; k = 0.25 was not resolved from 0.5 (0.997 [0.992, 1.002]) and kept twice as many plans
of the planners' own that measured > 5% above k = 1's (17 planner-tasks of 320 against 8), so the larger of
the two (docs/benchmarks.md, "Stop 62").

Why not the members' spread of the difference step_m(P) - step_m(H*), which is 3-10x smaller (two plans share
most placements): tried at stop 22, it let through plans the members agreed on and were all wrong about
(3-5-table devices priced at half their time), and DLRM-10 (2)'s learned planners went from 1.016-1.022 to
1.045-1.085 of the best heuristic (docs/benchmarks.md, "Stop 22").

A planner may make more than one finished plan (``ilp`` and ``rl`` solve whole tables and column shards and
return the one their risk-priced model prices cheaper; ``last_alternatives`` holds the other). Where the
returned plan does not clear its margin, the alternatives are weighed by the same rule, in order, and the
first that clears its own is kept. Why: the planner's pick does not weigh the guard's margin, and a column-
shard plan spreads more over the model's errors: on DLRM-10 (8) test-0 at stop 36 ilp returned its
column-shard plan (gain 1.651 ms, within its margin 1.695 ms), so the guard returned lookup_greedy's, while
its whole-table plan cleared its own margin (5.742 ms, margin 1.432 ms; docs/benchmarks.md, "Stop 36"). Why
only as a fallback, not the candidate with the largest gain beyond its margin: that rule would trade the
planner's pick (which got the descent, and measured 0.74-0.77 of the best heuristic on two DLRM-10 (8)
tasks) for a whole-table plan wherever the latter's smaller spread outweighs its smaller gain, a second
selection on the same noisy predictions (the optimiser's curse the guard exists to contain).

A model without spread (the analytical one, a single network without support) has margin 0: the guard then
only keeps whichever of P and the heuristics the model prices cheapest, which a planner's own search should
already ensure. ``guard=0`` switches the guard off. Plans that tie on the step (one device, say a hot table
alone, bounds them all) are ranked by their devices' costs from the slowest down (leximax): the heuristics
among themselves and, without a margin, the planner's plan against them.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from autoshard.costs.base import CostModel, plan_cost
from autoshard.costs.learned.risk import RiskPricedModel, offers_spread, risk_priced
from autoshard.costs.loading import resolve_cost_model
from autoshard.errors import AutoshardError, InfeasibleError
from autoshard.plan import Plan
from autoshard.planners.row_split import RowPieces
from autoshard.tasks import Task

log = logging.getLogger(__name__)

GUARD_OPTION = "guard"
"""``PlannerOptions.extra`` key: the margin's k (>= 0; 0 switches the guard off)."""
DEFAULT_GUARD_K = 0.5
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
    candidate: str = ""
    """Which of the planner's plans ``planner_ms`` and ``margin_ms`` describe: "" its returned plan, else the
    label of the one of its ``last_alternatives`` that was kept."""

    @property
    def kept(self) -> str:
        """The plan returned, in words: "kept its plan", "kept its whole-table plan", "kept X's plan"."""
        own = f"its {self.candidate} plan" if self.candidate else "its plan"
        return f"kept {own}" if self.kept_planner else f"kept {self.heuristic}'s plan"

    def describe(self) -> str:
        """``"<planner>: <kept> (<why>)"``; ``kept_in`` reads ``kept`` back from it."""
        gain = self.heuristic_ms - self.planner_ms
        if self.kept_planner:
            return (f"{self.planner}: {self.kept} (predicted {gain:.3f} ms below {self.heuristic}'s, more "
                    f"than the model's uncertainty {self.margin_ms:.3f} ms)")
        own = f"its {self.candidate} plan" if self.candidate else "its plan"
        if gain < 0:  # a "gain" below zero reads as a typo; say the planner's plan prices dearer
            return (f"{self.planner}: {self.kept} (the model prices {own} {-gain:.3f} ms above "
                    f"{self.heuristic}'s)")
        return (f"{self.planner}: {self.kept} (predicted gain {gain:.3f} ms of {own} "
                f"is within the model's uncertainty {self.margin_ms:.3f} ms)")


def kept_in(description: str) -> str:
    """``GuardDecision.kept`` of a decision stored as its ``describe()`` text (bench results)."""
    return description.split(": ", 1)[-1].split(" (", 1)[0]


_KEPT_PLANNER = re.compile(r"\w+: kept its (?:\S+ )?plan \(predicted (-?[\d.]+) ms below (\w+)'s, more than "
                           r"the model's uncertainty ([\d.]+) ms\)")


def kept_gain_margin(description: str) -> tuple[str, float, float] | None:
    """(heuristic, predicted gain ms, margin ms) of a decision stored as its ``describe()`` text where the
    planner kept a plan of its own (bench results; ``benchmarks/guard_kept.py``), None where it kept a
    heuristic's."""
    m = _KEPT_PLANNER.fullmatch(description)
    return None if m is None else (m.group(2), float(m.group(1)), float(m.group(3)))


def parse_guard(value: Any) -> float:
    """The guard's k from a number or a command-line string: finite and >= 0."""
    try:
        k = float(value)
    except (TypeError, ValueError):
        raise AutoshardError(f"guard {value!r} is not a number; give e.g. guard=0.5 (0 switches it off)"
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


def _leximax(cost: Any) -> tuple[float, ...]:
    """A plan's step, then its devices' fwd + bwd from the slowest down (rounded to 1 ns): plans tie on the
    step whenever one device (say, a hot table alone) bounds them all, and then the one whose other devices
    are lighter has the most room for the model's errors."""
    totals = sorted((round(d.fwd_ms + d.bwd_ms, 6) for d in cost.devices), reverse=True)
    return (round(cost.plan_ms, 6), *totals)


def guard_reference(task: Task, heuristics: dict[str, Plan],
                    model: CostModel) -> tuple[str, tuple[float, ...], float]:
    """H*, the heuristic plan a guarded plan must beat: its name (the cheapest by ``model``'s mean, ties by
    the devices from the slowest down, then by name), its ``_leximax`` key (the step first) and its spread
    (``plan_spread_ms``)."""
    costs = {name: plan_cost(model, task, p) for name, p in heuristics.items()}
    keys = {name: _leximax(c) for name, c in costs.items()}
    best = min(keys, key=lambda n: (keys[n], n))
    return best, keys[best], plan_spread_ms(model, task, heuristics[best], costs[best].plan_ms)


def guard_plan(task: Task, plan: Plan, heuristics: dict[str, Plan], model: CostModel, k: float,
               alternatives: tuple[tuple[str, Plan], ...] = ()) -> tuple[Plan, GuardDecision | None]:
    """``plan``, one of the planner's ``alternatives`` ((label, plan) pairs) or the cheapest heuristic plan
    (by ``model``'s mean), by the rule of the module docstring."""
    if not heuristics:
        return plan, None
    best, best_key, best_spread = guard_reference(task, heuristics, model)
    best_ms = best_key[0]
    refused: GuardDecision | None = None  # the returned plan's, reported when no candidate clears
    for label, candidate in (("", plan), *alternatives):
        own = plan_cost(model, task, candidate)
        own_key = _leximax(own)
        margin = k * math.hypot(plan_spread_ms(model, task, candidate, own.plan_ms), best_spread)
        # strictly cheaper by more than the margin; with no margin, a tie on the step goes to the better-
        # balanced
        keep = own_key[0] + margin < best_ms or (margin == 0 and own_key < best_key)
        decision = GuardDecision(plan.algorithm, own.plan_ms, best, best_ms, margin, keep, label)
        if keep:
            return replace(candidate, algorithm=plan.algorithm), decision
        refused = refused or decision
    return replace(heuristics[best], algorithm=plan.algorithm), refused


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
        return self._guarded(task, task, lambda plan: plan)

    def plan_split(self, pieces: RowPieces) -> Plan:
        """The plan of ``pieces.original``, whose tables larger than any device ``pieces`` cut into row
        pieces: the inner planner and the heuristics plan the derived task, and the guard weighs their plans
        merged (``RowPieces.merge``), priced on the original task.

        Why not the derived task's plans: a piece carries a uniform share of its table's lookups, a merged
        row range its own skew-aware share: on oversize-22-8 test-0 the heuristics' plans price 15-30%
        dearer merged, and the cheapest is another heuristic's (``benchmarks/row_pieces_prices.py``). There
        rl's plan priced 4.28 ms below the cheapest heuristic's as pieces, the guard kept it, and merged it
        priced 3.02 ms above size_lookup_greedy's and measured 6.2% slower (docs/benchmarks.md, "Stop 89",
        "Stop 90")."""
        return self._guarded(pieces.task, pieces.original, pieces.merge)

    def _guarded(self, planned: Task, task: Task, merge: Callable[[Plan], Plan]) -> Plan:
        """Plan ``planned`` with the inner planner and the heuristics, and guard their plans of ``task``
        (``merge`` maps a plan of ``planned`` to one of ``task``)."""
        plan = merge(self.inner.plan(planned))
        heuristics: dict[str, Plan] = {}
        for name, planner in self.heuristics.items():
            try:
                heuristics[name] = merge(planner.plan(planned))
            except InfeasibleError:
                continue
        plan = replace(plan, algorithm=plan.algorithm or self.name)
        alternatives = tuple((label, merge(p)) for label, p in getattr(self.inner, "last_alternatives", ()))
        chosen, self.last_decision = guard_plan(task, plan, heuristics, mean_model(self.options.cost_model),
                                                self.k, alternatives)
        if self.last_decision is not None:
            log.info("guard: %s", self.last_decision.describe())
        return chosen
