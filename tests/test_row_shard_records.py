"""Row-wise devices in the cost model's data: a record can hold row shards (``CostRecord.row_ranges``), the
refresh loop's recorder keeps the row-wise devices it times, and the networks train on a row shard with the
features they price it by. Until stop 28 a row-wise device was timed but not recorded, so the model never
learned one (the quickstart's model priced them 18% low while it priced table-wise devices right)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch
from conftest import QUICK_MEASURE, make_tables

from autoshard.costs.learned import LearnedCostModel
from autoshard.costs.learned.training import record_tensors
from autoshard.errors import AutoshardError
from autoshard.hardware.profile_records import CostRecord
from autoshard.hardware.profiler import load_dataset
from autoshard.pipeline.refresh import REFRESH_FILE, DeviceRecorder
from autoshard.shards import ShardRef
from autoshard.tables import TablePool
from autoshard.tasks import Task

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A pool profile directory whose only records are devices a recorder timed: a row-wise one, a table-wise
    one and one holding a data-parallel replica (REAL kernels, a few seconds)."""
    out = tmp_path_factory.mktemp("rows") / "costs"
    out.mkdir()
    pool = TablePool.from_tables(make_tables(6, dims=(8, 16), max_rows=4000))
    pool.save(str(out / "tables.json"))
    task = Task(tuple(pool.tables), (10**9, 10**9), batch_size=64, name="rows")
    recorder = DeviceRecorder(load_dataset(out), out, QUICK_MEASURE)
    half = task.tables[0].rows // 2
    row_wise = [ShardRef(0, task.tables[0].dim, 0, half), ShardRef(1, task.tables[1].dim)]
    recorder.measure(task, row_wise, "900-0")
    recorder.measure(task, [ShardRef(2, task.tables[2].dim)], "900-1")
    recorder.measure(task, [ShardRef(3, task.tables[3].dim, replica=True)], "900-2")
    return out, task, row_wise, recorder


def test_the_recorder_keeps_row_wise_devices_but_not_replicas(recorded):
    out, task, row_wise, recorder = recorded
    assert recorder.added == 2 and (out / REFRESH_FILE).is_file()
    records = {r.sample_id: r for r in load_dataset(out).records}
    assert set(records) == {"900-0", "900-1"}
    rec = records["900-0"]
    assert rec.row_ranges == ((0, task.tables[0].rows // 2), (0, None))
    assert rec.shard_refs() == [ShardRef(0, row_wise[0].dim, 0, row_wise[0].row_end),
                                ShardRef(1, row_wise[1].dim)]
    assert records["900-1"].row_ranges == ()  # a device of whole tables is recorded as before
    # a recorder over the grown profile reads the row-wise device back instead of timing it again
    again = DeviceRecorder(load_dataset(out), out, QUICK_MEASURE)
    assert again.measure(task, row_wise, "900-0") == (rec.fwd_ms, rec.bwd_ms) and again.added == 0


def test_a_record_round_trips_its_row_ranges_and_refuses_bad_ones(recorded):
    out, *_ = recorded
    rec = next(r for r in load_dataset(out).records if r.row_ranges)
    assert CostRecord.from_json(rec.to_json()) == rec
    assert "row_ranges" not in replace(rec, row_ranges=()).to_json()
    for bad in ([[0, 10]], [[5, 5], [0, None]], [[-1, 4], [0, None]]):
        with pytest.raises(AutoshardError, match="row_ranges must give every table a non-empty"):
            CostRecord.from_json({**rec.to_json(), "row_ranges": bad})


def test_a_row_shard_record_is_trained_on_with_the_features_it_is_priced_by(recorded):
    from autoshard.costs.loading import SHIPPED_COST_MODEL

    out, *_ = recorded
    data = load_dataset(out)
    model = LearnedCostModel.load(SHIPPED_COST_MODEL, allow_other_hardware=True)  # context + working set
    member = model.member_models()[0]  # the bare network: no support, no fallback
    rec = next(r for r in data.records if r.row_ranges)
    tensors = record_tensors(data.pool, [rec], model.normalizer, context=True, reuse=True)
    with torch.no_grad():
        trained_on = member.net.encode(tensors.feats, tensors.dims)
    device_task, shards = data.task_of(rec)
    torch.testing.assert_close(trained_on, member.encode_refs(device_task, shards))
    whole = record_tensors(data.pool, [replace(rec, row_ranges=())], model.normalizer, context=True,
                           reuse=True)
    assert not np.allclose(whole.feats.numpy(), tensors.feats.numpy())  # the row shard is not its table
