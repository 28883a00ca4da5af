"""The TorchRec bridge: plans as TorchRec ShardingPlans, models read into tables, TorchRec's planner as a
baseline, autoshard as a drop-in TorchRec planner, and plans verified in DistributedModelParallel.

Modules (torch/torchrec are imported inside functions, so importing this package is cheap):

- ``export``: ``to_sharding_plan(plan, task)`` / ``from_sharding_plan(sharding_plan, task)``.
- ``model_import``: ``tables_from_model(ebc_or_configs, sample_kjts)`` / ``pool_from_model``.
- ``planner``: ``AutoshardShardingPlanner(topology, batch_size, algorithm).plan(model, sharders)``.
- ``baseline``: ``TorchRecPlanner`` (``--algo torchrec``) and ``make_topology(task)``.
- ``verify``: ``verify_plan(plan, task, VerifySettings(...)) -> VerifyResult`` (``autoshard verify``).
- ``modules``: the task's EmbeddingBagCollection and KeyedJaggedTensors of its generated lookups.
"""

from autoshard.torchrec.baseline import TorchRecBaselineConfig, TorchRecPlanner, make_topology
from autoshard.torchrec.export import from_sharding_plan, to_sharding_plan
from autoshard.torchrec.model_import import pool_from_model, tables_from_model
from autoshard.torchrec.planner import AutoshardShardingPlanner
from autoshard.torchrec.verify import VerifyResult, VerifySettings, verify_plan

__all__ = [
    "AutoshardShardingPlanner", "TorchRecBaselineConfig", "TorchRecPlanner", "VerifyResult", "VerifySettings",
    "from_sharding_plan", "make_topology", "pool_from_model", "tables_from_model", "to_sharding_plan",
    "verify_plan",
]
