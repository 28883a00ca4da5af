"""``verify_plan``'s timing mode (``VerifySettings.sync_steps``): a barrier before every step, each rank's
forward part timed, the slowest rank per step; and the planned-shard check for row-wise tables."""

from __future__ import annotations

import math

import pytest
from conftest import make_tables

from autoshard.plan import Plan, TablePlacement
from autoshard.tasks import Task
from autoshard.torchrec.verify import VerifySettings, _planned_shards, verify_plan


def _plan(tables) -> Plan:
    t = tables
    first = math.ceil(t[1].rows / 2)  # TorchRec's training input dist bucketises ids by ceil(rows / D)
    return Plan((
        TablePlacement.table_wise(t[0].name, 0, t[0].dim),
        TablePlacement.row_wise(t[1].name, [0, 1], [first, t[1].rows - first], t[1].dim),
        TablePlacement.column_wise(t[2].name, [1, 0], [8, t[2].dim - 8]),
        TablePlacement.table_wise(t[3].name, 1, t[3].dim),
    ), 2, "manual", "timing")


def test_planned_shards_of_row_and_column_shards():
    tables = make_tables(4, seed=5, dims=(16,), max_rows=5000)
    plan = _plan(tables)
    t = [x.name for x in tables]
    assert _planned_shards(plan, 0) == {(t[0], 0, 16), (t[1], 0, 16), (t[2], 8, 8)}
    assert _planned_shards(plan, 1) == {(t[1], 0, 16), (t[2], 0, 8), (t[3], 0, 16)}


@pytest.mark.slow
def test_sync_steps_times_every_step_and_row_wise_runs_on_gloo():
    tables = make_tables(4, seed=5, dims=(16,), max_rows=5000)
    task = Task(tuple(tables), (10**9,) * 2, batch_size=64, name="timing")
    res = verify_plan(_plan(tables), task, VerifySettings(steps=3, warmup=1, rows_cap=None, sync_steps=True,
                                                         timeout_s=240))
    assert res.matches, res.to_json()
    assert res.settings.sync_steps
    for r in res.ranks:
        assert len(r.step_ms) == len(r.fwd_ms) == 3
        assert all(0 < f <= s for f, s in zip(r.fwd_ms, r.step_ms))
    assert res.slowest_step_ms == tuple(max(r.step_ms[k] for r in res.ranks) for k in range(3))
    assert [r.shards for r in res.ranks] == [3, 3]
    out = res.to_json()
    assert out["settings"]["sync_steps"] is True
    assert all(len(r["fwd_ms"]) == 3 for r in out["ranks"])
