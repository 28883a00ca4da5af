"""A planner runs with the cyclic garbage collector paused; the caller's setting comes back after, also when
the planner fails."""

from __future__ import annotations

import gc

import pytest
from conftest import make_tables

from autoshard.errors import InfeasibleError
from autoshard.plan import Plan
from autoshard.planners.base import run_planner
from autoshard.tasks import Task


class _Recording:
    """Plans round-robin and records whether the collector was on while it planned."""

    name = "recording"

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.seen: bool | None = None

    def plan(self, task: Task) -> Plan:
        self.seen = gc.isenabled()
        if self.fail:
            raise InfeasibleError("recording: asked to fail")
        return Plan.from_ranks(task, [i % task.num_devices for i in range(task.num_tables)], self.name)


@pytest.fixture
def task() -> Task:
    return Task(tuple(make_tables(6, seed=2)), (10**10,) * 2, name="gc")


@pytest.mark.parametrize("enabled", [True, False])
def test_the_collector_is_paused_while_planning_and_restored_after(task, enabled):
    before = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        planner = _Recording()
        run_planner(planner, task)
        assert planner.seen is False
        assert gc.isenabled() is enabled
        failing = _Recording(fail=True)
        with pytest.raises(InfeasibleError):
            run_planner(failing, task)
        assert failing.seen is False
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if before else gc.disable)()
