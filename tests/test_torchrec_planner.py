"""TorchRec's planner as the ``torchrec`` baseline, and autoshard as a drop-in TorchRec planner."""

from __future__ import annotations

import pytest
import torch
import torchrec  # noqa: F401  (a core dependency: a broken install must fail, not skip)
from conftest import make_tables

from autoshard.cli.main import main
from autoshard.errors import AutoshardError
from autoshard.plan import Plan, ShardingType, validate
from autoshard.planners.base import PlannerOptions, make_planner, run_planner
from autoshard.tables import TablePool
from autoshard.tasks import Task


def _small_task(memory: int) -> Task:
    tables = make_tables(6, seed=11, dims=(16, 64, 256), max_rows=400_000)
    return Task(tuple(tables), (memory,) * 2, batch_size=512, name="small")


def test_torchrec_baseline_respects_tight_memory_and_names():
    base = _small_task(10**12)
    biggest = max(base.table_memory(t) for t in base.tables)
    total = sum(base.table_memory(t) for t in base.tables)
    # Each device holds a bit more than half of everything: the split must be balanced by memory.
    memory = max(biggest, int(total * 0.55))
    task = Task(base.tables, (memory,) * 2, batch_size=512, name="tight")
    plan = run_planner(make_planner("torchrec", PlannerOptions()), task)
    validate(plan, task)
    assert {p.table for p in plan.placements} == {t.name for t in task.tables}
    assert plan.algorithm == "torchrec"
    allowed = (ShardingType.TABLE_WISE, ShardingType.COLUMN_WISE)
    assert all(p.sharding_type in allowed for p in plan.placements)
    assert max(plan.memory_used(task)) <= memory


def test_cli_plan_algo_torchrec_writes_valid_plan(tmp_path, capsys):
    task = _small_task(10**9)
    tables_file = str(tmp_path / "tables.json")
    TablePool.from_tables(task.tables).save(tables_file)
    out = str(tmp_path / "plan.json")
    assert main(["plan", "--tables", tables_file, "--devices", "2", "--memory", "1GB", "--batch-size", "512",
                 "--algo", "torchrec", "-o", out]) == 0
    assert "plan by torchrec" in capsys.readouterr().out
    validate(Plan.load(out), Task(task.tables, (10**9,) * 2))


def test_torchrec_baseline_bad_settings():
    with pytest.raises(AutoshardError, match="row_wise"):
        make_planner("torchrec", PlannerOptions(extra={"sharding_types": "row_wise"}))
    with pytest.raises(AutoshardError, match="unknown setting"):
        make_planner("torchrec", PlannerOptions(extra={"beam": 3}))


def _two_collection_model():
    from torchrec.modules.embedding_modules import EmbeddingBagCollection

    from autoshard.torchrec.modules import ebc_configs

    task = _small_task(10**9)
    left = Task(task.tables[:4], task.device_memory)
    right = Task(task.tables[4:], task.device_memory)

    class Sparse(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.left = EmbeddingBagCollection(ebc_configs(left), device=torch.device("meta"))
            self.right = EmbeddingBagCollection(ebc_configs(right), device=torch.device("meta"))

    return task, Sparse()


def test_drop_in_planner_plans_every_collection_within_topology_memory():
    from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder
    from torchrec.distributed.types import ShardingPlan

    from autoshard.torchrec.baseline import make_topology
    from autoshard.torchrec.export import FUSED_KERNEL, from_module_sharding_plan
    from autoshard.torchrec.planner import AutoshardShardingPlanner

    task, model = _two_collection_model()
    cap = int(sum(task.table_memory(t) for t in task.tables) * 0.6)
    topology = make_topology(Task(task.tables, (cap,) * 2))
    planner = AutoshardShardingPlanner(topology, batch_size=256, algorithm="size_lookup_greedy")
    sp = planner.collective_plan(model, [EmbeddingBagCollectionSharder()])
    assert isinstance(sp, ShardingPlan) and set(sp.plan) == {"left", "right"}
    assert planner.last_task.batch_size == 512 and planner.last_task.device_memory == (cap, cap)
    merged = {**sp.plan["left"], **sp.plan["right"]}
    assert all(ps.compute_kernel == FUSED_KERNEL for ps in merged.values())
    plan = from_module_sharding_plan(merged, 2, order=[t.name for t in task.tables])
    validate(plan, Task(task.tables, (cap,) * 2))
    with pytest.raises(AutoshardError, match="sharder"):
        planner.plan(model, [])


def test_drop_in_plan_is_exactly_what_verify_hands_dmp():
    """verify (which runs DMP for real) builds its ShardingPlan with to_sharding_plan; the drop-in planner's
    output for a root EmbeddingBagCollection is the same object content."""
    from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder

    from autoshard.torchrec.baseline import make_topology
    from autoshard.torchrec.export import from_sharding_plan, to_sharding_plan
    from autoshard.torchrec.modules import build_ebc
    from autoshard.torchrec.planner import AutoshardShardingPlanner

    task = _small_task(10**9)
    planner = AutoshardShardingPlanner(make_topology(task), batch_size=256, algorithm="lookup_greedy")
    sp = planner.plan(build_ebc(task), [EmbeddingBagCollectionSharder()])
    plan = from_sharding_plan(sp, task, algorithm="lookup_greedy")
    assert plan.placements == planner.last_plan.placements
    assert dict(to_sharding_plan(plan, task).plan[""]) == dict(sp.plan[""])
