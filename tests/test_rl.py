"""The RL placement policy: the estimated MDP, the equivariant network, training, checkpoints, the planner."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from autoshard.costs.analytical import AnalyticalCostModel
from autoshard.costs.base import ContentsAccumulator, plan_cost
from autoshard.errors import AutoshardError, InfeasibleError
from autoshard.plan import validate
from autoshard.planners.base import PlannerOptions, make_planner, run_planner
from autoshard.planners.heuristics import RandomPlanner
from autoshard.planners.rl.env import (
    DEVICE_FEATURES,
    TABLE_FEATURES,
    PlacementEnv,
    TaskContext,
)
from autoshard.planners.rl.planner import RLPlanner
from autoshard.planners.rl.policy import (
    PlacementPolicy,
    PolicyConfig,
    PolicyScorer,
    TrainedPolicy,
    obs_tensors,
    run_episodes,
)
from autoshard.planners.rl.train import TrainConfig, train
from autoshard.shards import ShardRef
from autoshard.tables import FeatureNormalizer, Table
from autoshard.tasks import Task

MODEL = AnalyticalCostModel()


pytestmark = pytest.mark.usefixtures("one_thread")


def make_tables(n: int, seed: int) -> list[Table]:
    """Tables of mixed dims, sizes and pooling, so that placement matters."""
    rng = np.random.default_rng(seed)
    return [Table(f"s{seed}t{i}", int(rng.choice([8, 16, 32, 64, 128])), int(10 ** rng.uniform(3, 6)),
                  float(rng.lognormal(2.0, 1.0)), tuple(rng.dirichlet(np.ones(17)))) for i in range(n)]


def make_task(n: int = 10, d: int = 3, seed: int = 0, memory: int = 10**10) -> Task:
    return Task(tables=tuple(make_tables(n, seed)), device_memory=(memory,) * d, name=f"task{seed}")


def normalizer_for(*tasks: Task) -> FeatureNormalizer:
    return FeatureNormalizer.fit([t for task in tasks for t in task.tables])


def untrained(seed: int = 0) -> PlacementPolicy:
    torch.manual_seed(seed)
    return PlacementPolicy(PolicyConfig(hidden=16)).eval()


def tight_task() -> Task:
    """Memory so tight that most devices are masked most of the time (total need ~ 1.1x of the capacity)."""
    tables = make_tables(12, 7)
    need = [Task(tables=(t,), device_memory=(1,)).table_memory(t) for t in tables]
    per_device = max(int(sum(need) / 4 * 1.1), max(need))
    return Task(tables=tuple(tables), device_memory=(per_device,) * 4, name="tight")


def test_the_decoding_scorer_gives_the_networks_logits_bit_for_bit():
    # episodes decode with ``PolicyScorer`` (a weight snapshot without module calls); training's loss runs
    # the modules: they must agree exactly, for one episode and for many side by side, masks included
    task = tight_task()
    ctx = TaskContext.build(task, MODEL, normalizer_for(task))
    net = untrained(3)
    for envs in (1, 16):
        ro = run_episodes(net, PlacementEnv(ctx, MODEL, num_envs=envs), np.random.default_rng(1), record=True)
        score = PolicyScorer(net)
        for t in range(0, task.num_tables, 3):
            args = tuple(torch.from_numpy(x[t]) for x in (ro.devices, ro.tables, ro.masks))
            with torch.no_grad():
                assert torch.equal(score(*args), net(*args))
    env = PlacementEnv(ctx, MODEL, num_envs=1)
    obs = env.reset()
    with torch.no_grad():
        assert torch.equal(PolicyScorer(net)(*obs_tensors(obs)), net(*obs_tensors(obs)))


def test_masked_devices_are_never_taken_under_tight_memory():
    task = tight_task()
    ctx = TaskContext.build(task, MODEL, normalizer_for(task))
    env = PlacementEnv(ctx, MODEL, num_envs=64)
    ro = run_episodes(untrained(), env, np.random.default_rng(0), greedy_first=1, record=True)
    masked_somewhere = ~ro.masks.all(axis=2) & ~ro.forced
    assert masked_somewhere.any(), "the task must actually mask devices for this test to mean anything"
    taken = np.take_along_axis(ro.masks, ro.actions[..., None], axis=2)[..., 0]
    assert taken.all()
    ok = [b for b in range(64) if not env.failed[b]]
    assert ok, "some sampled episode must succeed"
    for b in ok:
        validate(env.to_plan(b), task)  # memory within capacity on every device


def test_masked_action_is_refused_by_the_env():
    task = Task(tables=tuple(make_tables(3, 1)), device_memory=(10**10, 1), name="one-small")
    env = PlacementEnv(TaskContext.build(task, MODEL, normalizer_for(task)), MODEL)
    with pytest.raises(AutoshardError, match="masked"):
        env.step([1])


def test_policy_is_equivariant_to_device_order():
    net = untrained(3)
    rng = np.random.default_rng(0)
    dev = torch.tensor(rng.normal(size=(5, 7, DEVICE_FEATURES)), dtype=torch.float32)
    tab = torch.tensor(rng.normal(size=(5, TABLE_FEATURES)), dtype=torch.float32)
    mask = torch.tensor(rng.random((5, 7)) < 0.7)
    mask[:, 0] = True
    perm = torch.tensor(rng.permutation(7))
    with torch.no_grad():
        p = torch.softmax(net(dev, tab, mask), -1)
        p_perm = torch.softmax(net(dev[:, perm], tab, mask[:, perm]), -1)
    torch.testing.assert_close(p_perm, p[:, perm], rtol=1e-5, atol=1e-6)
    assert (p[~mask] == 0).all()


def test_permuting_device_memories_permutes_the_greedy_plan():
    base = make_task(12, 4, seed=2)
    mem = (4 * 10**7, 10**10, 6 * 10**7, 2 * 10**10)  # distinct, so no two devices tie
    perm = [2, 0, 3, 1]
    a = Task(tables=base.tables, device_memory=mem, name="a")
    b = Task(tables=base.tables, device_memory=tuple(mem[p] for p in perm), name="b")
    policy = TrainedPolicy(untrained(1), normalizer_for(base))
    ra = [p.ranks[0] for p in RLPlanner(policy, MODEL).plan(a).placements]
    rb = [p.ranks[0] for p in RLPlanner(policy, MODEL).plan(b).placements]
    # device perm[j] of task a is device j of task b
    assert [perm[r] for r in rb] == ra


def test_fast_cost_paths_equal_device_costs():
    task = make_task(9, 3, seed=4)
    rng = np.random.default_rng(1)
    models = [MODEL]
    # the learned model's incremental API, with an untrained network (only the bookkeeping is tested)
    from autoshard.costs.comm import DEFAULT_COMM
    from autoshard.costs.learned.features import TargetScaler
    from autoshard.costs.learned.model import LearnedCostModel
    from autoshard.costs.learned.network import CostNet, CostNetConfig, Target

    torch.manual_seed(0)
    models.append(LearnedCostModel(CostNet(CostNetConfig(hidden=16, embed=8)), normalizer_for(task),
                                   TargetScaler(Target.LOG, (0.0, 0.0, 0.0), (1.0, 1.0, 1.0)),
                                   DEFAULT_COMM, {}))
    for model in models:
        fast, generic = model.accumulator(task, 2), ContentsAccumulator(model, task, 2)
        assert type(fast) is not ContentsAccumulator
        for i in range(task.num_tables):
            # whole tables, column shards and row shards alike
            t = task.tables[i]
            shard = [ShardRef(i, t.dim), ShardRef(i, t.dim // 2), ShardRef(i, t.dim, 0, t.rows // 3)][i % 3]
            np.testing.assert_allclose(fast.costs_if_added(shard), generic.costs_if_added(shard), rtol=1e-5,
                                       atol=1e-6)
            for e in range(2):
                d = int(rng.integers(3))
                fast.add(e, d, shard)
                generic.add(e, d, shard)


def test_env_final_cost_is_the_cost_models_plan_cost_and_shaped_rewards_telescope():
    task = make_task(10, 3, seed=5)
    ctx = TaskContext.build(task, MODEL, normalizer_for(task))
    env = PlacementEnv(ctx, MODEL, num_envs=3)
    env.reset()
    rng = np.random.default_rng(0)
    total = np.zeros(3)
    while not env.done:
        before = env.plan_costs().copy()
        env.step(rng.integers(0, 3, size=3))
        total += env.step_rewards(before)
    for b in range(3):
        want = plan_cost(MODEL, task, env.to_plan(b)).plan_ms
        assert env.plan_costs()[b] == pytest.approx(want)
        assert total[b] == pytest.approx(-want / ctx.scale)
    first = [int(ctx.order[k]) for k in range(2)]
    single = [ctx.single_costs[i].sum() for i in first]
    assert single[0] >= single[1]  # largest predicted single-table cost first


def _mean_cost(planner_or_net, tasks, norm) -> float:
    out = []
    for t in tasks:
        if isinstance(planner_or_net, PlacementPolicy):
            plan = RLPlanner(TrainedPolicy(planner_or_net, norm), MODEL).plan(t)
        else:
            plan = planner_or_net.plan(t)
        out.append(plan_cost(MODEL, t, plan).plan_ms)
    return float(np.mean(out))


def test_short_training_lowers_predicted_cost_against_random_policies():
    tasks = [make_task(10, 3, seed=s) for s in range(4)]
    config = TrainConfig(iterations=80, tasks_per_iteration=2, samples_per_task=8, hidden=16, eval_every=40,
                         learning_rate=3e-3, seed=0)
    policy = train(MODEL, tasks, config, eval_tasks=tasks[:2])
    trained = _mean_cost(policy.net, tasks, policy.normalizer)
    torch.manual_seed(config.seed)
    before = _mean_cost(PlacementPolicy(PolicyConfig(hidden=16)).eval(), tasks, policy.normalizer)
    random = np.mean([_mean_cost(RandomPlanner(s), tasks, None) for s in range(5)])
    assert trained < 0.97 * before
    assert trained < 0.9 * random
    hist = policy.metrics["history"]
    assert [h["iteration"] for h in hist] == [40, 80] and "eval_ratio_to_best_heuristic" in hist[-1]


def test_checkpoint_round_trip_and_exact_resume(tmp_path):
    tasks = [make_task(6, 2, seed=s) for s in range(2)]
    cfg = {"tasks_per_iteration": 2, "samples_per_task": 4, "hidden": 8, "eval_every": 2, "seed": 3}
    path = str(tmp_path / "p.pt")
    full = train(MODEL, tasks, TrainConfig(iterations=4, **cfg))
    train(MODEL, tasks, TrainConfig(iterations=2, **cfg), checkpoint_path=path)
    resumed = train(MODEL, tasks, TrainConfig(iterations=4, **cfg), resume=TrainedPolicy.load(path),
                    checkpoint_path=path)
    for k, v in full.net.state_dict().items():
        torch.testing.assert_close(resumed.net.state_dict()[k], v)
    loaded = TrainedPolicy.load(path)
    assert loaded.normalizer == full.normalizer
    assert loaded.cost_model["name"] == "analytical" and loaded.train_config["seed"] == 3
    assert loaded.state["iteration"] == 4 and len(loaded.metrics["history"]) == 2
    obs = PlacementEnv(TaskContext.build(tasks[0], MODEL, loaded.normalizer), MODEL).reset()
    args = (torch.from_numpy(obs.devices), torch.from_numpy(obs.table), torch.from_numpy(obs.mask))
    torch.testing.assert_close(loaded.net(*args), full.net(*args))
    with pytest.raises(AutoshardError, match="resume with the same settings"):
        train(MODEL, tasks, TrainConfig(iterations=4, **{**cfg, "hidden": 16}), resume=loaded)


def test_training_runs_on_one_thread_and_restores_the_callers():
    """Two torch threads on a shared 2-vCPU host spin against each other (2.8x slower beside one busy
    process): the policy trains on SMALL_WORK_THREADS, inside the bench's stage too, and leaves the
    caller's."""
    from autoshard.threads import SMALL_WORK_THREADS

    seen: list[int] = []
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        train(MODEL, [make_task(4, 2)], TrainConfig(iterations=2, tasks_per_iteration=1, samples_per_task=2,
                                                    hidden=8, eval_every=2),
              progress=lambda it, m: seen.append(torch.get_num_threads()))
        assert seen == [SMALL_WORK_THREADS, SMALL_WORK_THREADS] and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


class _RecordsThreads:
    """A user's planner (the ``Planner`` protocol): lookup_greedy's plan, noting its torch threads."""

    name = "records_threads"

    def __init__(self) -> None:
        self.seen: list[int] = []
        self.inner = make_planner("lookup_greedy")

    def plan(self, task: Task):
        self.seen.append(torch.get_num_threads())
        return self.inner.plan(task)


def test_planning_runs_on_one_thread_and_restores_the_callers():
    """A learned planner prices thousands of small batches, where two threads on a busy 2-vCPU host spin
    against each other (rl on 856 tables: 9-40 s at two threads, 1.6 s at one): ``run_planner`` plans on
    SMALL_WORK_THREADS and leaves the caller's setting."""
    from autoshard.threads import SMALL_WORK_THREADS

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        planner = _RecordsThreads()
        validate(run_planner(planner, make_task(6, 2)), make_task(6, 2))
        assert planner.seen == [SMALL_WORK_THREADS] and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_bad_policy_files(tmp_path):
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(AutoshardError, match="not a readable policy"):
        TrainedPolicy.load(str(bad))
    with pytest.raises(AutoshardError, match="no such policy"):
        TrainedPolicy.load(str(tmp_path / "missing.pt"))
    other = tmp_path / "other.pt"
    torch.save({"kind": "autoshard.cost_model"}, str(other))
    with pytest.raises(AutoshardError, match="not a policy checkpoint"):
        TrainedPolicy.load(str(other))


def test_rl_without_policy_uses_the_shipped_one():
    from autoshard.costs.loading import SHIPPED_POLICY

    task = make_task(10, 3, seed=6)
    planner = make_planner("rl", PlannerOptions())
    shipped = TrainedPolicy.load(str(SHIPPED_POLICY)).net.state_dict()
    held = planner.policy.net.state_dict()
    assert held.keys() == shipped.keys() and all(torch.equal(held[k], shipped[k]) for k in shipped)
    plan = run_planner(planner, task)
    assert plan.algorithm == "rl" and len(plan.placements) == 10


def test_shipped_policy_plans_on_other_hardware(monkeypatch):
    """With no model given, rl plans with the shipped model its policy was trained against on any host, as
    every other planner does, while that model named explicitly is still refused there."""
    from autoshard.costs.learned import LearnedCostModel, checkpoint
    from autoshard.costs.loading import SHIPPED_COST_MODEL, SHIPPED_POLICY

    trained_on = LearnedCostModel.load(SHIPPED_COST_MODEL, allow_other_hardware=True).trained_on["host"]
    other = {**trained_on, "cpu": f"not {trained_on.get('cpu')}"}  # a host the shipped model never saw
    monkeypatch.setattr(checkpoint, "host_info", lambda device="cpu": other)
    with pytest.raises(AutoshardError, match="allow-other-hardware"):
        LearnedCostModel.load(SHIPPED_COST_MODEL)
    monkeypatch.chdir(Path(__file__).resolve().parent.parent)  # the policy names its model relative to here
    assert TrainedPolicy.load(str(SHIPPED_POLICY)).cost_model.get("spec")
    plan = run_planner(make_planner("rl", PlannerOptions()), make_task(10, 3, seed=6))
    assert plan.algorithm == "rl" and len(plan.placements) == 10


def test_planner_best_of_k_and_infeasible(tmp_path):
    task = make_task(10, 3, seed=6)
    path = str(tmp_path / "p.pt")
    TrainedPolicy(untrained(2), normalizer_for(task), {"name": "analytical"}).save(path)
    # best of k is judged by the planning model: the same one that prices the plans below
    greedy = run_planner(make_planner("rl", PlannerOptions(policy_path=path, cost_model=MODEL,
                                                           extra={"refine": "off"})), task)
    sampled = run_planner(make_planner("rl", PlannerOptions(policy_path=path, cost_model=MODEL,
                                                            extra={"samples": 16, "refine": "off"})), task)
    assert greedy.algorithm == "rl"
    assert plan_cost(MODEL, task, sampled).plan_ms <= plan_cost(MODEL, task, greedy).plan_ms + 1e-9
    # a task in which the last table finds no device with room: InfeasibleError names the table
    tables = tuple(Table(f"big{i}", 16, 10_000, 5.0) for i in range(3))  # 3 equal tables, room for 1 a device
    room = tables[0].memory_bytes(Task(tables=tables, device_memory=(1,)).precision, 0.0)
    tiny = Task(tables=tables, device_memory=(room,) * 2, name="tiny")
    planner = make_planner("rl", PlannerOptions(policy_path=path, extra={"samples": 4}))
    with pytest.raises(InfeasibleError, match=r"table big\d needs .*short by"):
        planner.plan(tiny)
    with pytest.raises(AutoshardError, match="samples"):
        make_planner("rl", PlannerOptions(policy_path=path, extra={"samples": "many"}))


def test_column_shard_refs_are_not_used_by_the_table_wise_env():
    # the env places whole tables: every candidate it asks about is a table at its full dim
    task = make_task(4, 2, seed=9)
    seen = []

    class Spy:
        name = "spy"
        comm = MODEL.comm

        def device_costs(self, t, devices):
            seen.extend(s for d in devices for s in d)
            return MODEL.device_costs(t, devices)

        def accumulator(self, t, num_envs):
            return ContentsAccumulator(self, t, num_envs)

        def with_comm(self, comm):
            return self

    env = PlacementEnv(TaskContext.build(task, Spy(), normalizer_for(task)), Spy(), num_envs=2)
    run_episodes(untrained(), env, np.random.default_rng(0))
    assert seen and all(s == ShardRef(s.table, task.tables[s.table].dim) for s in seen)


def test_rl_tries_row_and_replica_moves_after_its_placement_and_never_raises_the_cost(tmp_path):
    from conftest import make_tables as pool_tables

    from autoshard.costs.comm import AlphaBeta
    from autoshard.plan import ShardingType

    # one small, very hot table on a fast network: as a replica or row shards it leaves the bottleneck
    model = AnalyticalCostModel(comm=AlphaBeta(0.001, 1.0e9, "fast"))
    tables = (Table("hot", 16, 200, 400.0), *pool_tables(7, seed=3, dims=(16,), max_rows=20000))
    task = Task(tables, (10**9,) * 4, batch_size=4096, name="moves")
    path = str(tmp_path / "p.pt")
    TrainedPolicy(untrained(2), normalizer_for(task), {"name": "analytical"}).save(path)
    plain = run_planner(make_planner("rl", PlannerOptions(policy_path=path, cost_model=model, extra={
        "sharding_moves": 0, "column_splits": "off", "refine": "off"})), task)
    moved = run_planner(make_planner("rl", PlannerOptions(policy_path=path, cost_model=model, extra={
        "column_splits": "off", "refine": "off"})), task)
    validate(moved, task)
    assert all(p.sharding_type is ShardingType.TABLE_WISE for p in plain.placements)
    assert moved.placement("hot").sharding_type in (ShardingType.DATA_PARALLEL, ShardingType.ROW_WISE)
    assert plan_cost(model, task, moved).plan_ms < plan_cost(model, task, plain).plan_ms
    with pytest.raises(AutoshardError, match="sharding_moves"):
        make_planner("rl", PlannerOptions(policy_path=path, extra={"sharding_moves": -1}))


def test_column_shard_task_prices_each_shard_as_its_own_table_and_merging_keeps_ranks_distinct():
    from autoshard.planners.column_split import column_shard_task, merge_column_shards

    task = make_task(3, 3, seed=4)
    wide = task.tables[0]
    layout = [ShardRef(0, wide.dim // 2), ShardRef(0, wide.dim // 2), ShardRef(1, task.tables[1].dim),
              ShardRef(2, task.tables[2].dim)]
    derived = column_shard_task(task, layout)
    assert [t.name for t in derived.tables] == [f"{wide.name}#col0", f"{wide.name}#col1", *[
        t.name for t in task.tables[1:]]]
    assert derived.tables[0].dim == wide.dim // 2 and derived.tables[0].rows == wide.rows
    assert derived.table_memory(derived.tables[0]) == task.table_memory(wide, wide.dim // 2)
    # the shards' traffic is the column shards': each gets the table's ids, sends its own columns
    np.testing.assert_allclose(MODEL.device_costs(derived, [[ShardRef(0, wide.dim // 2)]]),
                               MODEL.device_costs(task, [[ShardRef(0, wide.dim // 2)]]))
    apart = merge_column_shards(task, layout, np.array([0, 1, 2, 2]), "rl")
    validate(apart, task)
    assert [s.rank for s in apart.placement(wide.name).shards] == [0, 1]
    together = merge_column_shards(task, layout, np.array([1, 1, 0, 2]), "rl")  # both halves on rank 1
    validate(together, task)
    assert together.placement(wide.name).sharding_type.value == "table_wise"
    assert together.placement(wide.name).shards[0].rank == 1


def test_rl_places_neuroshards_column_shards_where_the_model_prices_them_cheaper(tmp_path):
    from autoshard.costs.comm import AlphaBeta
    from autoshard.plan import ShardingType

    # one wide, hot table dominates a device unless it is split by columns over the others
    model = AnalyticalCostModel(comm=AlphaBeta(0.001, 1.0e9, "fast"))
    tables = (Table("wide", 256, 100_000, 60.0), *make_tables(7, 11))
    task = Task(tables, (10**10,) * 4, batch_size=4096, name="wide")
    path = str(tmp_path / "p.pt")
    TrainedPolicy(untrained(3), normalizer_for(task), {"name": "analytical"}).save(path)

    planners = []

    def rl(**extra):
        # the split search's default second is a time budget; this test is about what it finds
        options = PlannerOptions(policy_path=path, cost_model=model,
                                 extra={"sharding_moves": 0, "split_search_s": 30, "refine": "off", **extra})
        planners.append(make_planner("rl", options))
        return run_planner(planners[-1], task)

    whole, split = rl(column_splits="off"), rl()
    validate(split, task)
    assert all(p.sharding_type is ShardingType.TABLE_WISE for p in whole.placements)
    assert split.placement("wide").sharding_type is ShardingType.COLUMN_WISE
    assert plan_cost(model, task, split).plan_ms < plan_cost(model, task, whole).plan_ms
    # the placement not kept goes to the guard, which weighs it where the kept one does not clear its margin
    assert planners[0].last_alternatives == ()
    (label, other), = planners[1].last_alternatives
    validate(other, task)
    assert label == "whole-table"
    assert all(p.sharding_type is ShardingType.TABLE_WISE for p in other.placements)
    for bad in ({"column_splits": "maybe"}, {"split_search_s": "0"}):
        with pytest.raises(AutoshardError, match="column_splits|split_search_s"):
            make_planner("rl", PlannerOptions(policy_path=path, extra=bad))


def test_rl_plans_column_shards_where_whole_tables_do_not_fit(tmp_path):
    # three tables of 0.6 of a device each: no two fit together whole, halves pack 0.9 a device
    tables = tuple(Table(f"w{i}", 64, 10_000, 5.0 + i) for i in range(3))
    need = Task(tables=tables[:1], device_memory=(1,)).table_memory(tables[0])
    task = Task(tables, (int(need / 0.6),) * 2, batch_size=512, name="tight-wide")
    path = str(tmp_path / "p.pt")
    TrainedPolicy(untrained(4), normalizer_for(task), {"name": "analytical"}).save(path)
    with pytest.raises(InfeasibleError):
        run_planner(make_planner("rl", PlannerOptions(policy_path=path, cost_model=MODEL,
                                                      extra={"column_splits": "off"})), task)
    plan = run_planner(make_planner("rl", PlannerOptions(policy_path=path, cost_model=MODEL,
                                                         extra={"split_search_s": 30})), task)
    validate(plan, task)
    assert any(p.sharding_type.value == "column_wise" for p in plan.placements)


def test_descent_after_the_policys_placement_never_makes_the_step_dearer(tmp_path):
    # an untrained policy places 24 tables on 4 devices badly: the descent on the model's step has room
    task = make_task(24, 4, seed=12)
    path = str(tmp_path / "p.pt")
    TrainedPolicy(untrained(5), normalizer_for(task), {"name": "analytical"}).save(path)
    costs = {}
    for refine in ("off", "on"):
        options = PlannerOptions(policy_path=path, cost_model=MODEL, extra={
            "refine": refine, "refine_s": 30, "sharding_moves": 0, "column_splits": "off"})
        plan = run_planner(make_planner("rl", options), task)
        validate(plan, task)
        assert plan.algorithm == "rl"
        costs[refine] = plan_cost(MODEL, task, plan).plan_ms
    assert costs["on"] < costs["off"]


def test_rl_weighs_the_capped_greedy_against_the_policy_and_keeps_the_cheaper(tmp_path, monkeypatch):
    """``greedy_start``: NeuroShard's capped greedy places the whole tables too; after the sharding moves the
    cheaper placement by the model is kept and the other handed to the guard. "auto" leaves it out on tasks
    the splits search (at most AUTO_SPLIT_PAIRS tables x devices)."""
    from autoshard.planners.neuroshard import capped_greedy_plan

    task = make_task(24, 4, seed=12)
    path = str(tmp_path / "p.pt")
    TrainedPolicy(untrained(5), normalizer_for(task), {"name": "analytical"}).save(path)
    planners, costs = {}, {}
    for mode in ("off", "on", "auto"):
        planners[mode] = make_planner("rl", PlannerOptions(policy_path=path, cost_model=MODEL, extra={
            "greedy_start": mode, "refine": "off", "column_splits": "off", "sharding_moves": 0, "guard": 0}))
        plan = run_planner(planners[mode], task)
        validate(plan, task)
        costs[mode] = plan_cost(MODEL, task, plan).plan_ms
    greedy = capped_greedy_plan(task, MODEL, "rl")
    validate(greedy, task)
    greedy_ms = plan_cost(MODEL, task, greedy).plan_ms
    assert greedy_ms < costs["off"]  # an untrained policy: the greedy has room to win
    assert costs["on"] == min(costs["off"], greedy_ms) == greedy_ms
    (label, other), = planners["on"].last_alternatives
    assert label == "whole-table" and plan_cost(MODEL, task, other).plan_ms == costs["off"]
    assert costs["auto"] == costs["off"] and planners["auto"].last_alternatives == ()
    # a task above the size the splits search is one "auto" places by the greedy too
    from autoshard.planners import column_split
    monkeypatch.setattr(column_split, "AUTO_SPLIT_PAIRS", task.num_tables * task.num_devices - 1)
    assert plan_cost(MODEL, task, run_planner(planners["auto"], task)).plan_ms == costs["on"]
    assert len(planners["auto"].last_alternatives) == 1
    with pytest.raises(AutoshardError, match="greedy_start='always' must be auto, on or off"):
        make_planner("rl", PlannerOptions(policy_path=path, extra={"greedy_start": "always"}))


@pytest.mark.parametrize("setting, message", [
    ("refine=sometimes", "refine='sometimes' must be auto, on or off"),
    ("refine_s=0", r"refine_s=0(\.0)? must be a positive number of seconds"),
    ("refine_kicks=-1", "refine_kicks=-1 must be a non-negative integer")])
def test_bad_refine_setting_is_one_clear_line(setting, message):
    key, value = setting.split("=")
    with pytest.raises(AutoshardError, match=message):
        make_planner("rl", PlannerOptions(extra={key: value}))
