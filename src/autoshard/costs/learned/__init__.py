"""The learned (neural) cost model: ``from autoshard.costs.learned import LearnedCostModel``."""

from autoshard.costs.learned.model import LearnedCostModel
from autoshard.costs.learned.network import CostNetConfig, Target
from autoshard.costs.learned.training import TrainOptions

__all__ = ["CostNetConfig", "LearnedCostModel", "Target", "TrainOptions"]
