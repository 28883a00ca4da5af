"""Tables larger than any device: every planner splits them by rows (autoshard.planners.row_split)."""

from __future__ import annotations

import pytest

from autoshard.costs.analytical import AnalyticalCostModel
from autoshard.errors import InfeasibleError
from autoshard.plan import Plan, ShardingType, TablePlacement, validate
from autoshard.planners.base import PlannerOptions, available_planners, make_planner, run_planner
from autoshard.planners.row_split import split_oversize
from autoshard.tables import LookupKind, LookupSpec, Table
from autoshard.tasks import Task

MODEL = AnalyticalCostModel()
GB = 10**9


def _task(devices: int = 8, memory: int = 16 * GB) -> Task:
    """Two 40M-row dim-128 tables (20.48 GB each) beside smaller ones, on 16 GB devices: production sizes."""
    spec = LookupSpec(LookupKind.POWER_LAW, seed=1, alpha=1.1)
    big = [Table(f"big{i}", 128, 40_000_000, 30.0 + i, lookups=spec) for i in range(2)]
    small = [Table(f"t{i}", 64, 2_000_000 * (i + 1), 5.0 + i, lookups=spec) for i in range(8)]
    return Task(tuple(big + small), (memory,) * devices, name="oversize")


@pytest.mark.parametrize("algo", [a for a in available_planners() if a != "torchrec"])
def test_every_planner_row_splits_tables_larger_than_any_device(algo):
    task = _task()
    options = PlannerOptions(cost_model=MODEL, time_limit_s=2, seed=0)
    plan = run_planner(make_planner(algo, options), task)
    validate(plan, task)
    for name in ("big0", "big1"):
        p = plan.placement(name)
        assert p.sharding_type is ShardingType.ROW_WISE and len(p.shards) >= 2
        assert all(s.cols == 128 for s in p.shards)
    assert all(u <= c for u, c in zip(plan.memory_used(task), task.device_memory))


def test_pieces_on_one_rank_merge_into_one_contiguous_range():
    task = _task(devices=4)
    pieces = split_oversize(task)
    assert pieces is not None
    names = [n for n in pieces.pieces if pieces.pieces[n][0] == "big0"]
    assert len(names) >= 2
    ranks = [3, 1] + [3] * (len(names) - 2)  # pieces 0 and 2.. on rank 3, piece 1 on rank 1
    placements = [TablePlacement.table_wise(n, r, 128) for n, r in zip(names, ranks)]
    placements += [TablePlacement.table_wise(t.name, 0, t.dim) for t in pieces.task.tables
                   if t.name not in names]
    merged = pieces.merge(Plan(tuple(placements), 4, "hand"))
    p = merged.placement("big0")
    assert p.sharding_type is ShardingType.ROW_WISE
    assert [s.rank for s in p.shards] == [1, 3]
    rows = [s.row_end - s.row_start for s in p.shards]
    assert sum(rows) == 40_000_000 and p.shards[0].row_start == 0
    assert p.shards[0].row_end == p.shards[1].row_start


def test_no_split_when_every_table_fits_a_device():
    assert split_oversize(_task(memory=16 * GB)) is not None
    assert split_oversize(_task(memory=60 * GB)) is None


def test_short_total_memory_names_the_bytes_missing():
    task = _task(devices=2)
    with pytest.raises(InfeasibleError, match=r"short by [\d.]+GB"):
        run_planner(make_planner("size_lookup_greedy", PlannerOptions()), task)


@pytest.mark.parametrize("algo", [a for a in available_planners() if a != "torchrec"])
def test_torchrec_rows_plans_export_whatever_the_planner(algo):
    from autoshard.torchrec.export import check_torchrec_row_split

    # 4 x 20 GB: the big tables (20.48 GB) would be cut into 3 pieces each, on 3 of the 4 ranks at most
    task = _task(devices=4, memory=20 * GB)
    options = PlannerOptions(cost_model=MODEL, time_limit_s=2, seed=0)
    plan = run_planner(make_planner(algo, options), task, torchrec_rows=True)
    validate(plan, task)
    assert plan.algorithm
    for name in ("big0", "big1"):
        p = plan.placement(name)
        assert [s.rank for s in p.shards] == [0, 1, 2, 3]
        check_torchrec_row_split(p, 40_000_000, 4, 4)  # what TorchRec's kernels run: no PlanError
    assert all(u <= c for u, c in zip(plan.memory_used(task), task.device_memory))


def test_free_row_pieces_can_share_a_rank_which_torchrec_cannot_run():
    from autoshard.errors import PlanError
    from autoshard.torchrec.export import check_torchrec_row_split

    task = _task(devices=4, memory=20 * GB)
    plan = run_planner(make_planner("random", PlannerOptions(seed=0)), task)
    shared = [p for p in (plan.placement("big0"), plan.placement("big1")) if len(p.shards) != 4]
    assert shared  # 4 pieces, 2 on a rank: uneven ranges; the drop-in planner and --torchrec-rows avoid this
    with pytest.raises(PlanError, match="TorchRec"):
        check_torchrec_row_split(shared[0], 40_000_000, 4, 4)


def test_torchrec_rows_refuses_blocks_larger_than_a_rank_and_plans_all_oversize_tasks():
    spec = LookupSpec(LookupKind.POWER_LAW, seed=1, alpha=1.1)
    # 20.48 GB over ranks of 16, 16 and 4 GB: even blocks of 6.83 GB do not fit the last one
    big = Task((Table("big", 128, 40_000_000, 30.0, lookups=spec),), (16 * GB, 16 * GB, 4 * GB),
               name="three")
    with pytest.raises(InfeasibleError, match=r"row_wise puts 6.83GB on every rank, more than rank 2 has"):
        run_planner(make_planner("size_greedy", PlannerOptions()), big, torchrec_rows=True)
    run_planner(make_planner("size_greedy", PlannerOptions()), big)  # uneven pieces fit
    only = Task(big.tables, (16 * GB,) * 4, name="four")  # nothing left to plan once the blocks are placed
    plan = run_planner(make_planner("size_greedy", PlannerOptions()), only, torchrec_rows=True)
    validate(plan, only)
    assert plan.algorithm == "size_greedy" and len(plan.placement("big").shards) == 4


def test_plan_cli_torchrec_rows(tmp_path, capsys):
    from autoshard.cli.main import main
    from autoshard.tables import TablePool

    tables = tmp_path / "tables.json"
    TablePool.from_tables(_task().tables).save(str(tables))
    out = tmp_path / "plan.json"
    assert main(["plan", "--tables", str(tables), "--devices", "4", "--memory", "16GB", "--algo",
                 "size_lookup_greedy", "--torchrec-rows", "-o", str(out)]) == 0
    plan = Plan.load(str(out))
    assert [s.rank for s in plan.placement("big0").shards] == [0, 1, 2, 3]


def test_the_guard_weighs_the_merged_plans_priced_on_the_original_task():
    """A piece carries a uniform share of its table's lookups, a merged row range its skew-aware share: the
    guard compares the plans the planner returns (merged), not their derived-task forms."""
    from autoshard.costs.base import plan_cost
    from autoshard.planners.guard import GUARD_HEURISTICS, GuardedPlanner

    task = _task()
    pieces = split_oversize(task)
    options = PlannerOptions(cost_model=MODEL, time_limit_s=1, seed=0)
    merged = {h: run_planner(make_planner(h, options), task) for h in GUARD_HEURISTICS}
    priced = {h: plan_cost(MODEL, task, p).plan_ms for h, p in merged.items()}
    on_pieces = {h: plan_cost(MODEL, pieces.task, make_planner(h, options).plan(pieces.task)).plan_ms
                 for h in GUARD_HEURISTICS}
    assert all(abs(priced[h] - on_pieces[h]) > 1e-3 * priced[h] for h in priced)  # the two prices part
    # a planner the guard must hold back: round_robin's plans ignore the costs
    guarded = GuardedPlanner(make_planner("round_robin", options), options, 0.5,
                             {h: make_planner(h, options) for h in GUARD_HEURISTICS})
    plan = run_planner(guarded, task)
    decision = guarded.last_decision
    assert decision.heuristic_ms == pytest.approx(min(priced.values()))
    assert plan_cost(MODEL, task, plan).plan_ms <= min(priced.values()) + 1e-9
    for algo in ("search", "ilp"):
        planner = make_planner(algo, options)
        plan = run_planner(planner, task)
        decision = planner.last_decision
        assert decision.heuristic_ms == pytest.approx(min(priced.values()))
        returned_ms = decision.planner_ms if decision.kept_planner else decision.heuristic_ms
        assert plan_cost(MODEL, task, plan).plan_ms == pytest.approx(returned_ms)
