from __future__ import annotations

import pytest
from conftest import make_tables

from autoshard.errors import AutoshardError
from autoshard.tables import TablePool
from autoshard.tasks import Task, load_tasks, sample_tasks, save_tasks, split_pool


def test_split_is_disjoint_and_keeps_normaliser():
    pool = TablePool.from_tables(make_tables(40))
    train, test = split_pool(pool, seed=0)
    assert not {t.name for t in train.tables} & {t.name for t in test.tables}
    assert len(train.tables) + len(test.tables) == 40
    assert train.normalizer == pool.normalizer == test.normalizer


def test_sample_tasks_round_trip(tmp_path):
    pool = TablePool.from_tables(make_tables(30))
    tasks = sample_tasks(pool, num_tasks=5, num_tables=10, device_memory=[10**9] * 4, seed=3)
    assert len(tasks) == 5 and all(t.num_tables == 10 and t.num_devices == 4 for t in tasks)
    assert all(len({x.name for x in t.tables}) == 10 for t in tasks)
    assert tasks == sample_tasks(pool, num_tasks=5, num_tables=10, device_memory=[10**9] * 4, seed=3)
    path = str(tmp_path / "tasks.json")
    save_tasks(path, tasks, {"seed": 3})
    assert load_tasks(path) == tasks


@pytest.mark.parametrize("kwargs", [{"num_tasks": 0}, {"num_tables": 0}, {"num_tables": 31}])
def test_bad_sampling_arguments(kwargs):
    pool = TablePool.from_tables(make_tables(30))
    args = {"num_tasks": 2, "num_tables": 5, "device_memory": [10**9]} | kwargs
    with pytest.raises(AutoshardError):
        sample_tasks(pool, **args)


def test_task_validation():
    tables = tuple(make_tables(3))
    with pytest.raises(AutoshardError, match="zero devices"):
        Task(tables=tables, device_memory=())
    with pytest.raises(AutoshardError, match="positive"):
        Task(tables=tables, device_memory=(0,))
    with pytest.raises(AutoshardError, match="need .*short by"):
        Task(tables=tables, device_memory=(10,)).check_fits()
