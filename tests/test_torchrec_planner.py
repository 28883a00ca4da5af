"""TorchRec's planner as the ``torchrec`` baseline, and autoshard as a drop-in TorchRec planner."""

from __future__ import annotations

import pytest
import torch
import torchrec  # noqa: F401  (a core dependency: a broken install must fail, not skip)
from conftest import make_tables

from autoshard.cli.main import main
from autoshard.errors import AutoshardError, InfeasibleError
from autoshard.plan import COLUMN_SHARD_MULTIPLE, Plan, ShardingType, validate
from autoshard.planners.base import PlannerOptions, make_planner, run_planner
from autoshard.tables import LookupKind, LookupSpec, Table, TablePool
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
    # what the baseline offers on a cpu topology (row_wise too: baseline_sharder)
    allowed = (ShardingType.TABLE_WISE, ShardingType.COLUMN_WISE, ShardingType.ROW_WISE,
               ShardingType.DATA_PARALLEL)
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
    # TorchRec's own sharder proposes row_wise on cuda topologies only (it leaves row-based types out on cpu)
    own_cpu_sharder = {"sharding_types": "row_wise", "cpu_row_wise": "false"}
    with pytest.raises(AutoshardError, match="proposes none of.*row_wise.*cuda or cpu_row_wise"):
        make_planner("torchrec", PlannerOptions(extra=own_cpu_sharder))
    make_planner("torchrec", PlannerOptions(extra={"sharding_types": "row_wise", "compute_device": "cuda"}))
    make_planner("torchrec", PlannerOptions(extra={"sharding_types": "row_wise"}))  # the baseline's sharder
    with pytest.raises(AutoshardError, match="cpu_row_wise='maybe': give auto"):
        make_planner("torchrec", PlannerOptions(extra={"cpu_row_wise": "maybe"}))
    with pytest.raises(AutoshardError, match="table_row_wise: a task has no host grouping"):
        make_planner("torchrec", PlannerOptions(extra={"sharding_types": "table_wise,table_row_wise",
                                                       "compute_device": "cuda"}))
    with pytest.raises(AutoshardError, match="unknown setting"):
        make_planner("torchrec", PlannerOptions(extra={"beam": 3}))
    with pytest.raises(AutoshardError, match="min_partition"):
        make_planner("torchrec", PlannerOptions(extra={"min_partition": "wide"}))
    with pytest.raises(AutoshardError, match="min_partition"):
        make_planner("torchrec", PlannerOptions(extra={"min_partition": "0"}))


def test_torchrec_baseline_offers_what_torchrec_proposes_per_device():
    from autoshard.torchrec.baseline import (
        ALLOWED_SHARDING_TYPES,
        TorchRecBaselineConfig,
        offered_sharding_types,
    )

    default = make_planner("torchrec", PlannerOptions()).config
    assert default.min_partition == COLUMN_SHARD_MULTIPLE
    assert set(default.sharding_types) == set(ALLOWED_SHARDING_TYPES) == {
        "table_wise", "column_wise", "row_wise", "data_parallel"}
    own = make_planner("torchrec", PlannerOptions(extra={"min_partition": "none"}))
    assert own.config.min_partition is None
    assert set(offered_sharding_types(TorchRecBaselineConfig(compute_device="cpu"))) == set(
        ALLOWED_SHARDING_TYPES)
    assert set(offered_sharding_types(TorchRecBaselineConfig(compute_device="cpu", cpu_row_wise=False))) == {
        "table_wise", "column_wise", "data_parallel"}
    assert set(offered_sharding_types(TorchRecBaselineConfig(compute_device="cuda"))) == set(
        ALLOWED_SHARDING_TYPES)


def _table(i: int, rows: int, pooling: float, dim: int = 16) -> Table:
    return Table(name=f"t{i}", dim=dim, rows=rows, pooling_factor=pooling,
                 lookups=LookupSpec(LookupKind.POWER_LAW, seed=i, alpha=1.0))


def _hot_task() -> Task:
    """8 devices, 16 dim-16 tables; t0 is looked up 100x as often per row of the batch as the rest."""
    tables = [_table(0, 1_000_000, 200.0)] + [_table(i, 100_000, 2.0) for i in range(1, 16)]
    return Task(tuple(tables), (10**9,) * 8, name="hot")


NO_ROWS = {"sharding_types": "table_wise,column_wise,data_parallel"}
"""The baseline without row_wise: TorchRec's choices among column splits."""


def test_default_torchrec_baseline_column_splits_the_hot_table():
    """min_partition 4 lets TorchRec cut a dim-16 table's columns (its own default of 128 never would); with
    row_wise offered too (the default) it splits the hot table one way or the other."""
    task = _hot_task()
    plan = run_planner(make_planner("torchrec", PlannerOptions(extra=NO_ROWS)), task)
    validate(plan, task)
    hot = plan.placements[0]
    assert hot.table == "t0" and hot.sharding_type is ShardingType.COLUMN_WISE and len(hot.shards) > 1
    assert all(s.cols % COLUMN_SHARD_MULTIPLE == 0 for s in hot.shards)
    plan = run_planner(make_planner("torchrec", PlannerOptions()), task)
    validate(plan, task)
    assert len(plan.placements[0].shards) > 1


def test_torchrec_baseline_replans_column_shards_it_scatters_on_one_rank(caplog):
    """On 6 devices TorchRec 1.8 cuts the cold dim-16 tables into 4-column blocks and puts two non-adjacent
    ones on one rank; those tables are planned again without column_wise."""
    task = _hot_task()
    task = Task(task.tables, (10**9,) * 6, name="hot6")
    with caplog.at_level("INFO", logger="autoshard.torchrec.baseline"):
        plan = run_planner(make_planner("torchrec", PlannerOptions(extra=NO_ROWS)), task)
    validate(plan, task)
    assert "re-planning them without column_wise" in caplog.text
    assert plan.placements[0].sharding_type is ShardingType.COLUMN_WISE and len(plan.placements[0].shards) > 1


def test_torchrec_baseline_with_torchrecs_min_partition_does_not_split_dim_16():
    task = _hot_task()
    options = PlannerOptions(extra={**NO_ROWS, "min_partition": "128"})
    plan = run_planner(make_planner("torchrec", options), task)
    validate(plan, task)
    assert all(len(p.shards) == 1 for p in plan.placements)


def _oversize_task() -> Task:
    """t0 (128 MB) fits no 50 MB device alone; all tables (138 MB) fit the four."""
    tables = [_table(0, 2_000_000, 10.0)] + [_table(i, 50_000, 5.0) for i in range(1, 4)]
    task = Task(tuple(tables), (50 * 10**6,) * 4, name="oversize")
    assert task.table_memory(task.tables[0]) > 50 * 10**6
    return task


def test_torchrec_baseline_offers_row_wise_on_cpu_only_where_a_table_fits_no_device():
    """TorchRec's perf model prices row_wise for NCCL; on cpu the baseline offers it by default only to a
    table larger than every device (docs/benchmarks.md, stop 45); true offers it to all, cuda is unchanged."""
    from autoshard.torchrec.baseline import TorchRecBaselineConfig, torchrec_constraints

    def row_wise_tables(task: Task, **config) -> set[str]:
        constraints = torchrec_constraints(task, TorchRecBaselineConfig(**config), set())
        return {name for name, c in constraints.items() if "row_wise" in c.sharding_types}

    oversize, hot = _oversize_task(), _hot_task()
    assert make_planner("torchrec", PlannerOptions()).config.cpu_row_wise == "auto"
    assert row_wise_tables(oversize) == {"t0"} and row_wise_tables(hot) == set()
    assert row_wise_tables(hot, cpu_row_wise=True) == {t.name for t in hot.tables}
    assert row_wise_tables(hot, compute_device="cuda") == {t.name for t in hot.tables}
    assert row_wise_tables(oversize, cpu_row_wise=False) == set()
    plan = run_planner(make_planner("torchrec", PlannerOptions()), hot)
    assert all(p.sharding_type is not ShardingType.ROW_WISE for p in plan.placements)


def test_torchrec_baseline_row_splits_a_table_larger_than_a_device_on_cuda():
    """Planning only (meta tensors), so a cuda topology needs no GPU; TorchRec proposes row_wise there."""
    task = _oversize_task()
    plan = run_planner(make_planner("torchrec", PlannerOptions(extra={"compute_device": "cuda"})), task)
    validate(plan, task)
    big = plan.placements[0]
    assert big.sharding_type is ShardingType.ROW_WISE and len(big.shards) > 1
    assert all(s.cols == 16 and s.splits_rows for s in big.shards)
    assert max(plan.memory_used(task)) <= 50 * 10**6


def test_torchrec_baseline_column_splits_a_table_larger_than_a_device_with_torchrecs_cpu_sharder():
    """TorchRec's own sharder proposes no row_wise on cpu; it places the table by splitting its columns."""
    task = _oversize_task()
    plan = run_planner(make_planner("torchrec", PlannerOptions(extra={"cpu_row_wise": "false"})), task)
    validate(plan, task)
    big = plan.placements[0]
    assert big.sharding_type is ShardingType.COLUMN_WISE and len(big.shards) > 1


def test_torchrec_baseline_row_splits_on_cpu_a_table_no_column_split_fits():
    """A dim-4 table larger than a device has no column split: TorchRec's cpu sharder finds no plan, the
    baseline's (row_wise proposed on cpu too) splits it by rows."""
    tables = [_table(0, 4_000_000, 10.0, dim=4)] + [_table(i, 50_000, 5.0) for i in range(1, 4)]
    task = Task(tuple(tables), (50 * 10**6,) * 4, name="oversize-dim4")
    assert task.table_memory(task.tables[0]) > 50 * 10**6
    with pytest.raises(InfeasibleError, match="torchrec planner found no plan"):
        run_planner(make_planner("torchrec", PlannerOptions(extra={"cpu_row_wise": "false"})), task)
    plan = run_planner(make_planner("torchrec", PlannerOptions()), task)
    validate(plan, task)
    big = plan.placements[0]
    assert big.sharding_type is ShardingType.ROW_WISE and len(big.shards) > 1
    assert max(plan.memory_used(task)) <= 50 * 10**6


def test_torchrec_baseline_offers_every_table_row_wise_when_it_finds_no_plan_without():
    """Three dim-4 tables of 30 MB on two 50 MB devices: each fits a device, no two fit one, none splits
    its columns. With row_wise only where a table fits no device (none here) TorchRec finds no plan; the
    default baseline then offers row_wise to every table, as a TorchRec user would."""
    tables = [_table(i, 1_875_000, 5.0, dim=4) for i in range(3)]
    task = Task(tuple(tables), (50 * 10**6,) * 2, name="packed-dim4")
    assert all(task.table_memory(t) < 50 * 10**6 for t in tables)
    with pytest.raises(InfeasibleError, match="torchrec planner found no plan"):
        run_planner(make_planner("torchrec", PlannerOptions(extra={"cpu_row_wise": "false"})), task)
    plan = run_planner(make_planner("torchrec", PlannerOptions()), task)
    validate(plan, task)
    assert any(p.sharding_type is ShardingType.ROW_WISE for p in plan.placements)
    assert max(plan.memory_used(task)) <= 50 * 10**6


def test_torchrec_baseline_data_parallel_comes_back_as_replicas():
    task = _small_task(10**9)
    plan = run_planner(make_planner("torchrec", PlannerOptions(extra={"sharding_types": "data_parallel"})),
                       task)
    validate(plan, task)
    assert all(p.sharding_type is ShardingType.DATA_PARALLEL and p.ranks == (0, 1) for p in plan.placements)
    whole = sum(task.table_memory(t) for t in task.tables)
    assert plan.memory_used(task) == [whole, whole]


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


def test_drop_in_planner_row_splits_a_table_larger_than_a_rank_as_torchrec_runs_it():
    from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder
    from torchrec.distributed.types import ShardingType as TorchRecShardingType
    from torchrec.modules.embedding_modules import EmbeddingBagCollection

    from autoshard.torchrec.baseline import make_topology
    from autoshard.torchrec.modules import ebc_configs
    from autoshard.torchrec.planner import AutoshardShardingPlanner

    spec = LookupSpec(LookupKind.POWER_LAW, seed=1, alpha=1.1)
    tables = (Table("big", 128, 40_000_000, 30.0, lookups=spec),
              *(Table(f"t{i}", 64, 2_000_000 * (i + 1), 5.0 + i, lookups=spec) for i in range(8)))
    task = Task(tables, (20 * 10**9,) * 4)  # big: 20.48 GB, more than any rank
    ebc = EmbeddingBagCollection(ebc_configs(task), device=torch.device("meta"))
    # random places free row pieces two to a rank (tests/test_row_split.py): the drop-in planner must not
    planner = AutoshardShardingPlanner(make_topology(task), batch_size=256, algorithm="random")
    sp = planner.plan(ebc, [EmbeddingBagCollectionSharder()])
    big = sp.plan[""]["big"]
    assert big.sharding_type == TorchRecShardingType.ROW_WISE.value
    assert [m.placement.rank() for m in big.sharding_spec.shards] == [0, 1, 2, 3]
    assert [m.shard_sizes[0] for m in big.sharding_spec.shards] == [10_000_000] * 4


HASH_DRIVER = """
import json, sys
from autoshard.tasks import Task
from autoshard.torchrec import baseline
if sys.argv[2] == "torchrec-order":  # TorchRec's own enumerator: options in set order
    from torchrec.distributed.planner.enumerators import EmbeddingEnumerator
    baseline.sharder_order_enumerator = lambda **kwargs: EmbeddingEnumerator(**kwargs)
with open(sys.argv[1]) as f:
    task = Task.from_json(json.load(f))
print(json.dumps(baseline.TorchRecPlanner().plan(task).to_json(), sort_keys=True))
"""


@pytest.mark.slow
def test_torchrec_baseline_plans_alike_whatever_the_string_hashing(tmp_path):
    """TorchRec's enumerator orders a table's sharding types by Python's string hashing, so its planner gave
    DLRM-10 (4)'s test-1 one plan under PYTHONHASHSEED 0 and another under 1 (docs/benchmarks.md, "Stop
    72"); the baseline's enumerator keeps the sharder's order, one plan under both."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    from autoshard.pipeline.results import read_task_results

    run = Path(__file__).parent.parent / "benchmarks/runs/s71-amd-dlrm-10-4-torchrec.json.gz"
    task_file = tmp_path / "task.json"
    task_file.write_text(json.dumps(read_task_results(str(run))[1].task.to_json()))

    def plan(seed: int, order: str) -> str:
        env = {**os.environ, "PYTHONHASHSEED": str(seed)}
        done = subprocess.run([sys.executable, "-c", HASH_DRIVER, str(task_file), order], env=env,
                              capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout.strip().splitlines()[-1]

    assert plan(0, "torchrec-order") != plan(1, "torchrec-order")  # the premise: TorchRec's order varies
    assert plan(0, "sharder-order") == plan(1, "sharder-order")


COLLECTIVE_DRIVER = """
import json, os, sys
import torch
import torch.distributed as dist
from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder
from torchrec.modules.embedding_modules import EmbeddingBagCollection
from autoshard.errors import AutoshardError
from autoshard.planners.base import PlannerOptions
from autoshard.tasks import Task
from autoshard.torchrec.baseline import make_topology
from autoshard.torchrec.modules import ebc_configs
from autoshard.torchrec.planner import AutoshardShardingPlanner
with open(sys.argv[1]) as f:
    task = Task.from_json(json.load(f))
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD"])
members = [int(r) for r in os.environ["GROUP"].split(",")]
dist.init_process_group("gloo", rank=rank, world_size=world)
pg = dist.new_group(members) if len(members) < world else None  # every rank takes part in new_group
if rank not in members:
    dist.barrier()
    dist.destroy_process_group()
    sys.exit(0)
ebc = EmbeddingBagCollection(ebc_configs(task), device=torch.device("meta"))
# each rank asks another algorithm: what every rank returns must be the group's first rank's plan
algorithm = "lookup_greedy" if rank == members[0] else "random"
planner = AutoshardShardingPlanner(make_topology(task), batch_size=256, algorithm=algorithm,
                                   options=PlannerOptions(seed=7))
def ranks_of(sp):
    return {name: [m.placement.rank() for m in ps.sharding_spec.shards] if ps.sharding_spec else ps.ranks
            for name, ps in sorted(sp.plan[""].items())}
alone = ranks_of(planner.plan(ebc, [EmbeddingBagCollectionSharder()]))  # no process group: its own plan
ranks = ranks_of(planner.collective_plan(ebc, [EmbeddingBagCollectionSharder()], pg))
print(json.dumps({"ranks": ranks, "alone": alone, "algorithm": planner.last_plan.algorithm}, sort_keys=True))
try:
    planner.collective_plan(ebc, [], pg)
except AutoshardError as e:
    print("error:", e, flush=True)
dist.barrier()  # neither rank tears gloo down while the other still talks to it
dist.destroy_process_group()
"""


@pytest.mark.slow  # two or three gloo processes that import torchrec (~20-30 s)
@pytest.mark.parametrize(("world", "group"), [(2, (0, 1)), (3, (1, 2))])
def test_collective_plan_gives_every_rank_the_first_ranks_plan(tmp_path, world, group):
    """A searching planner stops at a wall-clock limit, so ranks planning alone could disagree:
    collective_plan plans on the group's first rank and broadcasts (as TorchRec's planner does). Here the
    group's ranks ask different algorithms and all return its first rank's (lookup_greedy's) plan; a planning
    error there is raised on all, none hangs. The world group, and a sub-group whose first rank is global
    rank 1 (the broadcast's source is the group's first rank, not global rank 0)."""
    import json
    import os
    import socket
    import subprocess
    import sys

    task = _small_task(10**9)
    task_file = tmp_path / "task.json"
    task_file.write_text(json.dumps(task.to_json()))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "WORLD": str(world), "GROUP": ",".join(map(str, group)), "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": str(port)}
    procs = [subprocess.Popen([sys.executable, "-c", COLLECTIVE_DRIVER, str(task_file)],
                              env={**env, "RANK": str(rank)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for rank in range(world)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0] * world, [err[-2000:] for _, err in outs]
    results = [outs[rank][0].strip().splitlines() for rank in group]
    assert all(not outs[rank][0].strip() for rank in range(world) if rank not in group)  # outside: no plan
    plans = [json.loads(lines[-2]) for lines in results]
    first, second = plans
    assert first["ranks"] == second["ranks"]
    assert first["algorithm"] == second["algorithm"] == "lookup_greedy"
    assert len(first["ranks"]) == task.num_tables
    assert second["alone"] != second["ranks"]  # the second rank alone (no process group) plans otherwise
    for lines in results:
        assert lines[-1].startswith("error:") and "sharder" in lines[-1]
