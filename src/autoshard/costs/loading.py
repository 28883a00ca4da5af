"""Load a cost model by name or path: ``analytical`` or a learned checkpoint."""

from __future__ import annotations

from autoshard.costs.analytical import AnalyticalCostModel
from autoshard.costs.base import CostModel


def load_cost_model(spec: str) -> CostModel:
    """``'analytical'`` gives the roofline estimator; anything else is a learned checkpoint path."""
    if spec == "analytical":
        return AnalyticalCostModel()
    from autoshard.costs.learned import LearnedCostModel

    return LearnedCostModel.load(spec)


def default_cost_model() -> CostModel:
    """The model planners use when none is given: the roofline estimator (until a calibrated one ships)."""
    return AnalyticalCostModel()


def resolve_cost_model(model: CostModel | None) -> CostModel:
    return model if model is not None else default_cost_model()
