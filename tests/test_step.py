"""The training step's cost (autoshard.costs.step): traffic from the plan, composition, and its bounds."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import make_tables
from hypothesis import given, settings
from hypothesis import strategies as st

from autoshard.costs.analytical import AnalyticalCostModel
from autoshard.costs.base import plan_cost
from autoshard.costs.comm import AlphaBeta
from autoshard.costs.step import (
    INDEX_BYTES,
    LENGTH_BYTES,
    OUTPUT_BYTES,
    collective_bytes,
    collective_matrices,
    device_volumes,
    plan_collectives,
)
from autoshard.plan import Plan, TablePlacement, validate
from autoshard.shards import ShardRef
from autoshard.tasks import Task

MODEL = AnalyticalCostModel(comm=AlphaBeta(0.3, 2.0e5, "test"))


def _task(n: int = 6, devices: int = 4, seed: int = 1) -> Task:
    return Task(tuple(make_tables(n, seed=seed, dims=(16, 32))), (10**10,) * devices, batch_size=256,
                name="step")


def _ids_received(task: Task, plan: Plan) -> float:
    """Id bytes ranks 1.. receive (rank 0 holds the other tables)."""
    c = {c.name: c for c in plan_collectives(task, MODEL.comm, plan.device_shards(task))}
    return sum(c["input_ids"].received_bytes[1:])


def test_a_column_split_multiplies_the_tables_id_bytes_by_its_shard_count():
    task = _task()
    t = task.tables[0]
    others = [TablePlacement.table_wise(x.name, 0, x.dim) for x in task.tables[1:]]
    whole = Plan((TablePlacement.table_wise(t.name, 1, t.dim), *others), 4)
    split = Plan((TablePlacement.column_wise(t.name, [1, 2, 3], [4, 4, t.dim - 8]), *others), 4)
    validate(whole, task)
    validate(split, task)
    per_sample = t.pooling_factor * INDEX_BYTES + LENGTH_BYTES
    # rank 0's own tables send it nothing; table t's ids come to its holders from the 3 other ranks' samples
    assert _ids_received(task, whole) == pytest.approx(3 * task.batch_size / 4 * per_sample)
    assert _ids_received(task, split) == pytest.approx(3 * _ids_received(task, whole))


def test_matrices_add_up_to_each_ranks_sent_and_received_bytes():
    task = _task(8, 3)
    plan = Plan.from_ranks(task, [i % 3 for i in range(8)], "rr")
    volumes = device_volumes(task, plan.device_shards(task))
    matrices = collective_matrices(task, volumes)
    traffic = collective_bytes(task, volumes)
    for name, m in matrices.items():
        sent, received = traffic[name]
        np.testing.assert_allclose(m.sum(axis=1), sent)
        np.testing.assert_allclose(m.sum(axis=0), received)
        assert np.all(np.diag(m) == 0)


def test_one_device_has_no_collectives():
    task = Task(tuple(make_tables(3, seed=2)), (10**10,), batch_size=128)
    cost = plan_cost(MODEL, task, Plan.from_ranks(task, [0, 0, 0], "one"))
    assert cost.collectives_ms == 0.0 and cost.plan_ms == pytest.approx(cost.max_fwd_ms + cost.max_bwd_ms)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10**6), devices=st.integers(1, 6), splits=st.integers(0, 3))
def test_the_step_is_never_below_max_fwd_plus_max_bwd_nor_any_devices_total(seed, devices, splits):
    rng = np.random.default_rng(seed)
    task = Task(tuple(make_tables(7, seed=seed % 97, dims=(16, 32, 64))), (10**10,) * devices, batch_size=512)
    placements = []
    for i, t in enumerate(task.tables):
        if i < splits and devices > 1:
            ranks = rng.choice(devices, size=2, replace=False)
            placements.append(TablePlacement.column_wise(t.name, ranks, [8, t.dim - 8]))
        elif i == splits and devices > 1:
            cut = int(rng.integers(1, t.rows))
            placements.append(TablePlacement.row_wise(t.name, rng.choice(devices, 2, replace=False),
                                                      [cut, t.rows - cut], t.dim))
        else:
            placements.append(TablePlacement.table_wise(t.name, int(rng.integers(devices)), t.dim))
    plan = Plan(tuple(placements), devices)
    validate(plan, task)
    cost = plan_cost(MODEL, task, plan)
    assert cost.plan_ms >= (cost.max_fwd_ms + cost.max_bwd_ms) * (1 - 1e-12)
    assert cost.plan_ms >= max(d.total_ms for d in cost.devices) * (1 - 1e-12)


def test_replicas_all_reduce_their_gradient_and_keep_their_ids_local():
    task = _task(3, 4)
    t = task.tables[0]
    plan = Plan((TablePlacement.data_parallel(t.name, [0, 1, 2, 3], t.dim),
                 *(TablePlacement.table_wise(x.name, 0, x.dim) for x in task.tables[1:])), 4)
    validate(plan, task)
    cols = {c.name: c for c in plan_cost(MODEL, task, plan).collectives}
    grad = t.rows * t.dim * 4
    assert cols["replica_grads"].sent_bytes == pytest.approx((2 * 3 / 4 * grad,) * 4)
    replica = [s for s in plan.device_shards(task)[2] if s.table == 0]
    assert replica == [ShardRef(0, t.dim, replica=True)]
    # ranks 1-3 hold only the replica: they receive no ids
    assert cols["input_ids"].received_bytes[1:] == (0.0, 0.0, 0.0)


def test_inter_host_bytes_go_at_the_slower_link():
    from autoshard.topology import Topology

    one = _task(8, 8)
    two = Task(one.tables, one.device_memory, batch_size=one.batch_size, name="2x4",
               topology=Topology(hosts=2, inter_bytes_per_ms=MODEL.comm.bytes_per_ms / 10))
    plan = Plan.from_ranks(one, list(range(8)), "spread")
    flat = plan_cost(MODEL, one, plan)
    hosts = plan_cost(MODEL, two, plan)
    for a, b in zip(flat.collectives, hosts.collectives):
        assert a.sent_bytes == b.sent_bytes  # the same bytes move
        if a.ms > 0 and a.name != "replica_grads":
            assert b.ms > a.ms  # but half of them cross the 10x slower link
    # inter-host bytes: rank 0's ids go to the 4 ranks of the other host
    from autoshard.costs.step import inter_host_bytes

    volumes = device_volumes(two, plan.device_shards(two))
    sent, _ = inter_host_bytes(two, volumes)["input_ids"]
    local = two.batch_size / 8
    np.testing.assert_allclose(sent[0], local * volumes[4:, 0].sum())


def _row_split_plan(task: Task) -> Plan:
    """Table 0 row-split evenly over every device, the rest table-wise on rank 0."""
    t, d = task.tables[0], task.num_devices
    rows = [t.rows // d] * (d - 1) + [t.rows - (d - 1) * (t.rows // d)]
    plan = Plan((TablePlacement.row_wise(t.name, list(range(d)), rows, t.dim),
                 *(TablePlacement.table_wise(x.name, 0, x.dim) for x in task.tables[1:])), d)
    validate(plan, task)
    return plan


def test_row_shards_outputs_go_by_reduce_scatter_and_all_gather_priced_at_the_measured_factors():
    task = _task(4, 4)
    t = task.tables[0]
    plan = _row_split_plan(task)
    plain = AlphaBeta(0.3, 2.0e5, "test")
    slow = AlphaBeta(0.3, 2.0e5, "test", reduce_scatter_factor=2.0, all_gather_factor=1.5)
    a = {c.name: c for c in plan_collectives(task, plain, plan.device_shards(task))}
    b = {c.name: c for c in plan_collectives(task, slow, plan.device_shards(task))}
    local = task.batch_size / 4
    # every rank sends the other 3 ranks' samples' partial sums of its row shard, and receives its own
    assert a["row_outputs"].sent_bytes == pytest.approx((3 * local * t.dim * OUTPUT_BYTES,) * 4)
    assert a["row_outputs"].received_bytes == pytest.approx((3 * local * t.dim * OUTPUT_BYTES,) * 4)
    assert a["row_grads"].sent_bytes == a["row_outputs"].received_bytes
    # the table-wise tables' all-to-all carries none of the row shards' outputs: rank 0 sends only its own
    others = sum(x.dim for x in task.tables[1:]) * OUTPUT_BYTES
    assert a["pooled_outputs"].sent_bytes == pytest.approx((3 * local * others, 0.0, 0.0, 0.0))
    term = 3 * local * t.dim * OUTPUT_BYTES / 2.0e5
    assert a["row_outputs"].ms == pytest.approx(0.3 + term)
    assert b["row_outputs"].ms == pytest.approx(0.3 + 2.0 * term)
    assert b["row_grads"].ms == pytest.approx(0.3 + 1.5 * term)
    for name in ("input_ids", "pooled_outputs", "output_grads"):  # all-to-alls keep their price
        assert b[name].ms == pytest.approx(a[name].ms)


def test_every_rank_bucketises_its_samples_ids_of_row_split_tables():
    task = _task(4, 4)
    t = task.tables[0]
    per_id = AlphaBeta(0.3, 2.0e5, "test", bucketize_ns_per_id=10.0)
    row = {c.name: c for c in plan_collectives(task, per_id, _row_split_plan(task).device_shards(task))}
    # the shards' lookup shares add up to one: each of B / D samples brings the table's pooling ids
    assert row["row_bucketize"].ms == pytest.approx(task.batch_size / 4 * t.pooling_factor * 10.0e-6)
    assert row["row_bucketize"].stage == "fwd" and row["row_bucketize"].busiest_bytes == 0.0
    whole = Plan.from_ranks(task, [0, 1, 2, 3], "spread")
    cols = {c.name: c for c in plan_collectives(task, per_id, whole.device_shards(task))}
    assert cols["row_bucketize"].ms == cols["row_outputs"].ms == cols["row_grads"].ms == 0.0
    # a plan without row shards is priced the same whatever the row-wise terms
    assert plan_cost(MODEL.with_comm(per_id), task, whole).plan_ms == pytest.approx(
        plan_cost(MODEL, task, whole).plan_ms)
