"""Registry entry ``torchrec``: TorchRec's EmbeddingShardingPlanner as a baseline (see
autoshard.torchrec.baseline).

TorchRec is imported only when the planner is built, so ``autoshard plan --list-algos`` stays light.
"""

from __future__ import annotations

from autoshard.planners.base import PlannerOptions


def torchrec_planner(options: PlannerOptions):
    from autoshard.torchrec.baseline import torchrec_planner as factory

    return factory(options)
