"""autoshard's own pooled-table runtime: any plan (uneven row splits, data_parallel, ...) run on 2-3 gloo
processes equals the unsharded EmbeddingBag + SGD; ``autoshard verify --runtime autoshard``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from autoshard.cli.main import build_parser, main
from autoshard.errors import AutoshardError
from autoshard.hardware import pooled_runtime as pr
from autoshard.plan import Plan, ShardingType, TablePlacement
from autoshard.shards import Shard
from autoshard.tables import Table, TablePool
from autoshard.tasks import Task

LR = 0.05
STEPS = 2
BATCH = 16


def _task(devices: int, rows: tuple[int, ...] = (120, 80, 100, 150, 60), dims=(8, 12, 16, 8, 12)) -> Task:
    tables = tuple(Table(f"t{i}", d, r, 3.0) for i, (r, d) in enumerate(zip(rows, dims)))
    return Task(tables, (10**9,) * devices, batch_size=BATCH, name=f"small-{devices}")


def _weights(rows, dims, seed=1) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.uniform(-0.1, 0.1, (r, d)).astype(np.float32) for r, d in zip(rows, dims)]


def _batches(rows, steps: int = STEPS, seed: int = 2) -> list[list[tuple[np.ndarray, np.ndarray]]]:
    """Per step, per table: bags of 0-5 ids (duplicates included) for the global batch."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(steps):
        batch = []
        for r in rows:
            lengths = rng.integers(0, 6, BATCH)
            offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
            batch.append((rng.integers(0, r, int(offsets[-1])).astype(np.int64), offsets))
        out.append(batch)
    return out


def _check(task, plans, weights, batches, atol=1e-5):
    grads = pr.default_out_grads([t.dim for t in task.tables], BATCH, seed=3)
    ref = pr.reference_run(weights, batches, LR, STEPS, grads)
    results = pr.run_plans(task, plans, weights, batches, LR, STEPS, grads, timeout_s=120)
    for plan, res in zip(plans, results):
        checks = pr.compare(res, ref, atol=atol, rtol=1e-5)
        assert all(c.ok for c in checks), (plan.algorithm, checks)
        assert [c.sharding_type for c in checks] == [plan.placement(t.name).sharding_type.value
                                                     for t in task.tables]
        d = task.num_devices
        for s in range(STEPS):
            assert [o[0].shape[0] for o in res.rank_outputs[s]] == \
                [(r + 1) * BATCH // d - r * BATCH // d for r in range(d)]
        _, spread = res.table_weights()
        assert max(spread) == 0.0  # replicas stayed identical
    # training changed the weights (the check is not vacuous)
    assert all(not np.allclose(w, w0) for w, w0 in zip(ref.weights, weights))
    return results


# --------------------------------------------------------------------------------------------- fast
def test_scale_rows_keeps_uneven_ranges_contiguous():
    a, b = Shard(2, 0, 8, 0, 70), Shard(0, 0, 8, 70, 1000)
    assert pr.scale_rows(a, 1000, 100) == Shard(2, 0, 8, 0, 7)
    assert pr.scale_rows(b, 1000, 100) == Shard(0, 0, 8, 7, 100)
    col = Shard(1, 4, 8)
    assert pr.scale_rows(col, 1000, 100) is col


def test_restrict_rebases_row_shard_ids_and_keeps_empty_bags():
    ids = np.array([5, 1, 9, 7, 2, 8], np.int64)
    offsets = np.array([0, 2, 2, 5, 6], np.int64)
    seg = pr._Segment(0, 1, 0, 5, 9, 0, 8)
    got_ids, lengths = pr._restrict((ids, offsets), 1, 4, seg)  # samples 1..3: [], [9, 7, 2], [8]
    assert got_ids.tolist() == [2, 3] and lengths.tolist() == [0, 1, 1]
    whole = pr._Segment(0, 0, 0, 0, None, 0, 8)
    got_ids, lengths = pr._restrict((ids, offsets), 0, 2, whole)
    assert got_ids.tolist() == [5, 1] and lengths.tolist() == [2, 0]


def test_segments_route_replicas_locally_or_to_a_replica():
    task = _task(3)
    plan = _plan_d3(task)
    tables = pr._tables(task, plan, _weights([t.rows for t in task.tables], [t.dim for t in task.tables]))
    for rank, server in ((0, 0), (1, 2), (2, 2)):  # t3 replicas on ranks [0, 2]; rank 1 asks 1 % 2 -> 2
        seg = [s for s in pr._segments(tables, rank) if s.table == 3]
        assert [(s.server, s.row_end) for s in seg] == [(server, None)]
    rw = [s for s in pr._segments(tables, 1) if s.table == 1]
    assert [(s.server, s.row_start, s.row_end) for s in rw] == [(2, 0, 7), (0, 7, 80)]


def test_reference_matches_numpy_sum_pooling_and_sgd():
    w = _weights([10], [4])
    ids, offsets = np.array([3, 3, 1, 7], np.int64), np.array([0, 3, 3, 4], np.int64)
    g = np.arange(12, dtype=np.float32).reshape(3, 4)
    ref = pr.reference_run(w, [(ids, offsets)], 0.5, 1, [g])
    want = np.stack([w[0][3] * 2 + w[0][1], np.zeros(4), w[0][7]])
    np.testing.assert_allclose(ref.outputs[0][0], want, atol=1e-6)
    trained = w[0].copy()
    trained[3] -= 0.5 * 2 * g[0]
    trained[1] -= 0.5 * g[0]
    trained[7] -= 0.5 * g[2]
    np.testing.assert_allclose(ref.weights[0], trained, atol=1e-6)


def test_compare_flags_a_wrong_shard():
    w = _weights([10], [4])
    ids, offsets = np.array([3, 1], np.int64), np.array([0, 1, 2], np.int64)
    g = np.ones((2, 4), np.float32)
    ref = pr.reference_run(w, [(ids, offsets)], 0.1, 1, [g])
    good = pr.PooledRunResult(("t0",), ("table_wise",), (10,), (4,), ((tuple(ref.outputs[0]),),),
                              (pr.ShardWeight("t0", Shard(0, 0, 4), ref.weights[0]),))
    assert [c.ok for c in pr.compare(good, ref)] == [True]
    bad_w = ref.weights[0].copy()
    bad_w[1, 0] += 1e-3
    bad = pr.PooledRunResult(("t0",), ("table_wise",), (10,), (4,), ((tuple(ref.outputs[0]),),),
                             (pr.ShardWeight("t0", Shard(0, 0, 4), bad_w),))
    check = pr.compare(bad, ref)[0]
    assert not check.ok and check.max_weight_diff == pytest.approx(1e-3, rel=1e-3)


def test_inputs_are_checked():
    task = _task(2)
    rows, dims = [t.rows for t in task.tables], [t.dim for t in task.tables]
    plan = _plan_d2(task)
    w = _weights(rows, dims)
    bad = _batches(rows)[0]
    bad[0] = (np.array([rows[0]], np.int64), np.concatenate([[0, 1], np.ones(BATCH - 1, np.int64)]))
    with pytest.raises(AutoshardError, match="outside"):
        pr.run_plan(task, plan, w, bad, LR, 1)
    with pytest.raises(AutoshardError, match="weights of table t1"):
        pr.run_plan(task, plan, [w[0], w[0], *w[2:]], _batches(rows)[0], LR, 1)


def test_verify_runtime_flag_parses():
    parser = build_parser()
    args = parser.parse_args(["verify", "--plan", "p.json", "--tables", "t.json"])
    assert args.runtime == "torchrec"
    args = parser.parse_args(["verify", "--plan", "p.json", "--tables", "t.json", "--runtime", "autoshard"])
    assert args.runtime == "autoshard"
    with pytest.raises(SystemExit) as e:
        parser.parse_args(["verify", "--plan", "p.json", "--tables", "t.json", "--runtime", "dmp"])
    assert e.value.code == 2


def _files(tmp_path, task: Task, plan: Plan) -> tuple[str, str]:
    tables_file, plan_file = str(tmp_path / "tables.json"), str(tmp_path / "plan.json")
    TablePool.from_tables(list(task.tables)).save(tables_file)
    plan.save(plan_file)
    return tables_file, plan_file


def test_verify_autoshard_runtime_exits_1_on_a_mismatch(tmp_path, monkeypatch, capsys):
    task = _task(2)
    tables_file, plan_file = _files(tmp_path, task, _plan_d2(task))
    checks = tuple(pr.TableCheck(t.name, "table_wise", 0.0 if i else 0.5, 0.0, bool(i))
                   for i, t in enumerate(task.tables))
    fake = pr.PooledVerifyResult("manual", "x", 2, 16, 2, 1000, {}, checks)
    monkeypatch.setattr(pr, "verify_pooled", lambda *a, **k: fake)
    code = main(["verify", "--runtime", "autoshard", "--plan", plan_file, "--tables", tables_file])
    out = capsys.readouterr()
    assert code == 1
    assert "t0 " in out.out and "MISMATCH" in out.out and out.out.count(" OK ") == len(task.tables) - 1
    assert "differ from the unsharded computation, e.g. t0" in out.err
    assert main(["verify", "--runtime", "autoshard", "--plan", plan_file, "--tables", tables_file,
                 "--optimizer", "exact_adagrad"]) == 2


# --------------------------------------------------------------------------------------------- plans
def _plan_d2(task: Task) -> Plan:
    t = task.tables
    return Plan((
        TablePlacement.table_wise(t[0].name, 1, t[0].dim),
        TablePlacement.column_wise(t[1].name, [1, 0], [4, 8]),
        TablePlacement.row_wise(t[2].name, [1, 0], [7, 93], t[2].dim),  # uneven, ranks out of order
        TablePlacement.row_wise(t[3].name, [0, 1], [120, 30], t[3].dim, ShardingType.TABLE_ROW_WISE),
        TablePlacement.data_parallel(t[4].name, [0, 1], t[4].dim),
    ), 2, "mixed-d2", task.name)


def _plan_d2_subsets(task: Task) -> Plan:
    """Replicas on one rank only (the other asks it), a row split on one rank, table_row_wise on one."""
    t = task.tables
    return Plan((
        TablePlacement.data_parallel(t[0].name, [1], t[0].dim),
        TablePlacement.table_wise(t[1].name, 0, t[1].dim),
        TablePlacement.row_wise(t[2].name, [0], [100], t[2].dim),
        TablePlacement.row_wise(t[3].name, [1, 0], [1, 149], t[3].dim, ShardingType.TABLE_ROW_WISE),
        TablePlacement.column_wise(t[4].name, [0, 1], [8, 4]),
    ), 2, "subsets-d2", task.name)


def _plan_d3(task: Task) -> Plan:
    t = task.tables
    return Plan((
        TablePlacement.column_wise(t[0].name, [2, 0], [4, 4]),
        TablePlacement.row_wise(t[1].name, [2, 0], [7, 73], t[1].dim),  # 2 of 3 ranks, uneven
        TablePlacement.row_wise(t[2].name, [1, 2, 0], [60, 15, 25], t[2].dim, ShardingType.TABLE_ROW_WISE),
        TablePlacement.data_parallel(t[3].name, [0, 2], t[3].dim),
        TablePlacement(t[4].name, ShardingType.COLUMN_WISE, (Shard(1, 4, 12), Shard(2, 0, 4))),
    ), 3, "mixed-d3", task.name)


# --------------------------------------------------------------------------------------------- slow
@pytest.mark.slow
def test_two_ranks_mixed_plans_equal_unsharded():
    task = _task(2)
    rows, dims = [t.rows for t in task.tables], [t.dim for t in task.tables]
    _check(task, [_plan_d2(task), _plan_d2_subsets(task)], _weights(rows, dims), _batches(rows))


@pytest.mark.slow
def test_three_ranks_uneven_rows_and_capped_weights_equal_unsharded():
    """t1's plan row ranges (70 / 730 of 800 rows) are scaled onto its 80-row capped copy (7 / 73)."""
    task = _task(3, rows=(120, 800, 100, 150, 60))
    plan = _plan_d3(_task(3))
    plan = Plan(tuple(TablePlacement.row_wise("t1", [2, 0], [70, 730], 12) if p.table == "t1" else p
                      for p in plan.placements), 3, "mixed-d3-capped", task.name)
    rows = [120, 80, 100, 150, 60]
    (res,) = _check(task, [plan], _weights(rows, [t.dim for t in task.tables]), _batches(rows))
    t1 = sorted((sw.shard.rank, sw.shard.row_start, sw.shard.row_end) for sw in res.shard_weights
                if sw.table == "t1")
    assert t1 == [(0, 7, 80), (2, 0, 7)]


@pytest.mark.slow
def test_verify_cli_autoshard_runtime_end_to_end(tmp_path, capsys):
    task = _task(2)
    tables_file, plan_file = _files(tmp_path, task, _plan_d2(task))
    out = str(tmp_path / "verify.json")
    code = main(["verify", "--runtime", "autoshard", "--plan", plan_file, "--tables", tables_file,
                 "--batch-size", "16", "--steps", "2", "--rows-cap", "100", "--timeout", "120",
                 "--json", out])
    text = capsys.readouterr().out
    assert code == 0, text
    lines = [ln for ln in text.splitlines() if ln.startswith("t")]
    assert len(lines) == len(task.tables) and all(" OK " in ln for ln in lines)
    assert "row_wise" in text and "data_parallel" in text
    result = json.loads(Path(out).read_text())
    assert result["matches"] is True and result["runtime"] == "autoshard" and result["devices"] == 2
    assert result["rows_used"]["t3"] == 100 and result["global_batch"] == 16
