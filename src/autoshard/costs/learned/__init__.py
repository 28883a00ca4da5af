"""The learned (neural) cost model: ``from autoshard.costs.learned import LearnedCostModel``.

The names are loaded on first use, so ``autoshard.costs.learned.risk`` and ``.support`` (numpy only, used by
the planners' pricing) import without torch."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the static view: the same names, eagerly
    from autoshard.costs.learned.model import LearnedCostModel
    from autoshard.costs.learned.network import CostNetConfig, Target
    from autoshard.costs.learned.training import TrainOptions

_EXPORTS = {
    "LearnedCostModel": "autoshard.costs.learned.model",
    "CostNetConfig": "autoshard.costs.learned.network",
    "Target": "autoshard.costs.learned.network",
    "TrainOptions": "autoshard.costs.learned.training",
}

__all__ = ["CostNetConfig", "LearnedCostModel", "Target", "TrainOptions"]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
