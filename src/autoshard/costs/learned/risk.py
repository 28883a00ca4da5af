"""Risk-aware pricing: a cost model that prices every device at its mean + k x its spread.

A planner that balances a model's mean predictions is drawn to the plans whose devices the model
UNDER-predicts most (the optimiser's curse: among many candidates, the one that looks best is the one whose
error is most favourable). Pricing each device at ``mean + k x spread`` (the spread: an ensemble's
disagreement, ``LearnedCostModel.device_costs_spread``) makes devices the model is unsure of look costlier, so
the planner prefers plans it can predict. ``k`` defaults to the model's ``risk_k`` (chosen on held-out data so
that mean + k x spread covers ~84% of measured devices: ``evaluation.select_risk_k``).

``risk_priced(model, risk)`` is what planners plan with (``costs.loading.resolve_cost_model``,
``planners.pricing``); a model without spread (the analytical one, a single network without support) is
returned unchanged, so its plans are bit-identical to before.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from autoshard.costs.base import ContentsAccumulator, CostModel, DelegatesToBase, DeviceAccumulator
from autoshard.costs.comm import AlphaBeta
from autoshard.errors import AutoshardError
from autoshard.plan import Plan
from autoshard.shards import ShardRef
from autoshard.tasks import Task


def offers_spread(model: Any) -> bool:
    """Whether ``model`` reports a per-device spread that can be non-zero (``device_costs_spread``)."""
    if isinstance(model, RiskPricedModel) or not callable(getattr(model, "device_costs_spread", None)):
        return False
    return bool(getattr(model, "has_spread", True))


def parse_risk(risk: Any) -> float:
    """A risk factor from a number or a command-line string (``--option risk=1.5``): finite and >= 0."""
    try:
        k = float(risk)
    except (TypeError, ValueError):
        raise AutoshardError(f"risk {risk!r} is not a number; give e.g. risk=1 (mean + 1 x spread)") from None
    if not math.isfinite(k) or k < 0:
        raise AutoshardError(f"risk {k:g} must be a finite number >= 0")
    return k


def risk_factor(model: Any, risk: Any = None) -> float:
    """The k a planner prices ``model``'s devices at: ``risk`` if given, else the model's ``risk_k``; 0 for a
    model without spread (and for one already risk-priced)."""
    if not offers_spread(model):
        return 0.0
    return parse_risk(getattr(model, "risk_k", 0.0) if risk is None else risk)


class RiskPricedModel(DelegatesToBase):
    """``base`` with every device priced at mean + ``risk`` x spread (fwd and bwd; comm has no spread). Its
    accumulator agrees with its ``device_costs``; ``base`` is the model of the means."""

    def __init__(self, base: CostModel, risk: float) -> None:
        self.base = base
        self.risk = parse_risk(risk)
        self.name = base.name
        self.comm: AlphaBeta = base.comm

    def device_costs(self, task: Task, devices: Sequence[Sequence[ShardRef]]) -> np.ndarray:
        both = getattr(self.base, "device_costs_risk", None)
        if callable(both):
            return np.asarray(both(task, devices, self.risk), dtype=np.float64)
        spread = self.base.device_costs_spread(task, devices)  # type: ignore[attr-defined]
        return np.asarray(self.base.device_costs(task, devices), dtype=np.float64) + self.risk * spread

    def device_costs_gathered(self, task: Task, shards: Sequence[ShardRef], members: np.ndarray,
                              owner: np.ndarray, n: int) -> np.ndarray:
        """The base model's ``device_costs_gathered`` at this risk (``planners.pricing``; only where the base
        has one)."""
        return np.asarray(self.base.device_costs_gathered(task, shards, members, owner, n,  # type: ignore
                                                          risk=self.risk), dtype=np.float64)

    def accumulator(self, task: Task, num_envs: int) -> DeviceAccumulator:
        make = self.base.accumulator
        if "risk" in inspect.signature(make).parameters:  # the learned model's own, fast and risk-aware
            return make(task, num_envs, risk=self.risk)  # type: ignore[call-arg]
        return ContentsAccumulator(self, task, num_envs)

    def with_comm(self, comm: AlphaBeta) -> RiskPricedModel:
        return RiskPricedModel(self.base.with_comm(comm), self.risk)

    def placement_swaps(self, task: Task, plan: Plan) -> Any:
        """The base model's ``placement_swaps`` at this risk (None where it has none)."""
        swaps = getattr(self.base, "placement_swaps", None)
        return swaps(task, plan, risk=self.risk) if callable(swaps) else None

    # what planners and reports ask a learned model besides the CostModel calls
    @property
    def trained_on(self) -> dict[str, Any]:
        return dict(getattr(self.base, "trained_on", {}))

    @property
    def row_move_margin(self) -> float:
        """The base model's (``planners.sharding_moves``; 0 for a model without one)."""
        return float(getattr(self.base, "row_move_margin", 0.0))

    def describe_hardware(self) -> str:
        describe = getattr(self.base, "describe_hardware", None)
        what = describe() if callable(describe) else self.base.name
        return f"{what}; devices priced at mean + {self.risk:g} x spread"



def risk_priced(model: CostModel, risk: Any = None) -> CostModel:
    """``model`` priced at mean + k x spread (k: ``risk``, else the model's ``risk_k``), or ``model`` itself
    when k is 0 and so is its risk_k, or it has no spread. A risk-priced model given a new ``risk`` is
    re-priced from its base."""
    if isinstance(model, RiskPricedModel):
        if risk is None or parse_risk(risk) == model.risk:
            return model
        model = model.base
    k = risk_factor(model, risk)
    if k > 0:
        return RiskPricedModel(model, k)
    # k = 0 asked of a model whose own risk_k is above 0: wrapped, because the pricing paths handed a bare
    # model apply its risk_k themselves (planners.pricing); until stop 37 ``--option risk=0`` was lost there
    return RiskPricedModel(model, 0.0) if risk_factor(model) > 0 else model
