"""A drop-in TorchRec planner that plans with an autoshard algorithm.

``AutoshardShardingPlanner(topology, batch_size, algorithm="search").plan(model, sharders)`` has
the call shape of TorchRec's ``EmbeddingShardingPlanner.plan`` and returns a ``ShardingPlan`` for every
EmbeddingBagCollection in ``model``, ready for ``DistributedModelParallel(model, plan=..., sharders=...)``.

- Tables: every EmbeddingBagCollection in the model (``autoshard.torchrec.model_import``; pooling factors and
  access patterns from ``sample_batches`` if given). Table names must be unique across the model's
  collections.
- Memory: each device's capacity is the Topology's storage in the tier the fused kernel uses (HBM for
  cuda/mtia, DDR for cpu), minus ``reserve_fraction`` of it.
- Batch: TorchRec's ``batch_size`` is per rank; the task's kernel batch is ``batch_size x world_size``.
- Optimizer state: ``optimizer_bytes_per_element`` (0 for SGD, 4 for fp32 Adagrad) counts in the memory check.

The default algorithm is ``search`` behind the heuristic guard, as ``autoshard plan``'s (since stop 80;
``benchmarks/default_algo.py``). A searching planner stops at a wall-clock limit, so two ranks planning alone
could disagree: ``collective_plan`` plans on the group's first rank and broadcasts the result, as TorchRec's
own planner does (an error planning there is raised on every rank).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from autoshard.errors import AutoshardError
from autoshard.plan import Plan
from autoshard.planners.base import PlannerOptions, make_planner, run_planner
from autoshard.tables.table import Precision
from autoshard.tasks import DEFAULT_BATCH_SIZE, Task

logger = logging.getLogger(__name__)

DEFAULT_ALGORITHM = "search"
"""As ``autoshard plan``'s default: local search on the shipped model behind the heuristic guard."""


def _collections(model: Any) -> list[tuple[str, Any]]:
    from torchrec.modules.embedding_modules import EmbeddingBagCollection

    found = [(path, m) for path, m in model.named_modules() if isinstance(m, EmbeddingBagCollection)]
    if not found:
        raise AutoshardError("the model has no EmbeddingBagCollection; "
                             "autoshard plans EmbeddingBagCollections")
    return found


def device_capacities(topology: Any) -> tuple[int, ...]:
    """Per-device bytes in the tier the fused kernel stores shards in (HBM on GPUs, DDR on CPU)."""
    gpu = topology.compute_device in ("cuda", "mtia")
    return tuple(int(d.storage.hbm if gpu else d.storage.ddr) for d in topology.devices)


class AutoshardShardingPlanner:
    """TorchRec planner interface (``plan``, ``collective_plan``) backed by an autoshard algorithm."""

    def __init__(
        self,
        topology: Any,
        batch_size: int | None = None,
        algorithm: str = DEFAULT_ALGORITHM,
        options: PlannerOptions | None = None,
        sample_batches: Sequence[Any] = (),
        optimizer_bytes_per_element: float = 0.0,
        reserve_fraction: float = 0.0,
    ) -> None:
        if not 0.0 <= reserve_fraction < 1.0:
            raise AutoshardError(f"reserve fraction {reserve_fraction} must be in [0, 1)")
        self.topology = topology
        self.batch_size = batch_size or max(1, DEFAULT_BATCH_SIZE // topology.world_size)
        self.algorithm = algorithm
        self.options = options or PlannerOptions()
        self.sample_batches = list(sample_batches)
        self.optimizer_bytes_per_element = optimizer_bytes_per_element
        self.reserve_fraction = reserve_fraction
        self.last_plan: Plan | None = None
        """The autoshard Plan behind the last ShardingPlan returned (for reports)."""
        self.last_task: Task | None = None

    def task_for(self, model: Any) -> tuple[Task, list[tuple[str, list[str]]]]:
        """The autoshard task of ``model`` on this topology, and each collection's path and table names."""
        from torchrec.modules.embedding_configs import DataType

        from autoshard.torchrec.model_import import tables_from_model

        tables, owners = [], []
        precisions = set()
        for path, ebc in _collections(model):
            ts = tables_from_model(ebc, self.sample_batches, seed=self.options.seed + len(tables))
            tables.extend(ts)
            owners.append((path, [t.name for t in ts]))
            precisions |= {c.data_type for c in ebc.embedding_bag_configs()}
        if precisions - {DataType.FP32, DataType.FP16}:
            raise AutoshardError(f"table data types {sorted(str(p) for p in precisions)}: "
                                 "autoshard plans fp32 and fp16 tables")
        precision = Precision.FP16 if precisions == {DataType.FP16} else Precision.FP32
        caps = tuple(int(c * (1.0 - self.reserve_fraction)) for c in device_capacities(self.topology))
        if min(caps) <= 0:
            raise AutoshardError("the topology gives a device no memory in the tier the fused kernel uses; "
                                 "set hbm_cap (cuda) or ddr_cap (cpu)")
        task = Task(tuple(tables), caps, precision=precision,
                    optimizer_bytes_per_element=self.optimizer_bytes_per_element,
                    batch_size=self.batch_size * self.topology.world_size, name="torchrec-model")
        return task, owners

    def plan(self, module: Any, sharders: Sequence[Any]) -> Any:
        """A ShardingPlan for every EmbeddingBagCollection of ``module`` (the ``sharders`` must include one
        for EmbeddingBagCollection)."""
        from torchrec.distributed.types import ShardingPlan
        from torchrec.modules.embedding_modules import EmbeddingBagCollection

        from autoshard.torchrec.export import module_sharding_plan

        if not any(getattr(s, "module_type", None) is EmbeddingBagCollection for s in sharders):
            raise AutoshardError("no EmbeddingBagCollection sharder given; "
                                 "pass EmbeddingBagCollectionSharder()")
        task, owners = self.task_for(module)
        plan = run_planner(make_planner(self.algorithm, self.options), task, torchrec_rows=True)
        self.last_plan, self.last_task = plan, task
        rows = {t.name: t.rows for t in task.tables}
        local = self.topology.local_world_size
        plans = {}
        for path, names in owners:
            sub = Plan(tuple(p for p in plan.placements if p.table in set(names)), plan.num_devices,
                       plan.algorithm, plan.task_name)
            plans[path] = module_sharding_plan(sub, {n: rows[n] for n in names},
                                               device_type=self.topology.compute_device, local_size=local)
        logger.info("autoshard %s planned %d tables on %d ranks in %.3f s", plan.algorithm, task.num_tables,
                    task.num_devices, plan.planning_time_s or 0.0)
        return ShardingPlan(plans)

    def collective_plan(self, module: Any, sharders: Sequence[Any], pg: Any = None) -> Any:
        """The same ShardingPlan on every rank of ``pg`` (default: the world group where torch.distributed is
        initialised): its first rank plans and broadcasts the plan (and ``last_plan``/``last_task``), since a
        searching planner's result depends on the wall clock; without a process group, planned here."""
        import torch.distributed as dist

        if pg is None:
            if not (dist.is_available() and dist.is_initialized()):
                return self.plan(module, sharders)
            pg = dist.group.WORLD
        if dist.get_world_size(pg) == 1:
            return self.plan(module, sharders)
        source = dist.get_global_rank(pg, 0)
        box: list[Any] = [None]
        if dist.get_rank() == source:
            try:
                box = [(self.plan(module, sharders), self.last_plan, self.last_task)]
            except Exception as e:  # noqa: BLE001 - re-raised on every rank: none waits for a plan that never comes
                box = [e]
        dist.broadcast_object_list(box, src=source, group=pg)
        if isinstance(box[0], Exception):
            raise box[0]
        sharding_plan, self.last_plan, self.last_task = box[0]
        return sharding_plan
