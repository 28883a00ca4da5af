"""The bench's measure stage with the step's collectives timed on D processes (one process group a task)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from conftest import make_tables

from autoshard.costs.analytical import AnalyticalCostModel
from autoshard.pipeline.measure import measure_task, plan_task
from autoshard.planners.base import PlannerOptions
from autoshard.tasks import Task


@pytest.mark.slow
def test_measured_collectives_replace_the_model_and_keep_its_estimate():
    task = Task(tuple(make_tables(6, seed=4, dims=(16, 32), max_rows=4000)), (10**9,) * 2, batch_size=256)
    planned = plan_task(task, ["round_robin", "size_greedy"], PlannerOptions(), None)
    planned.append(replace(planned[0], algorithm="copy"))  # a planner that returned round_robin's plan
    measured = measure_task(task, planned, AnalyticalCostModel, rounds=2, collectives="measure")
    # identical plans share their timings (kernels and collectives): no noise between them
    assert measured[0].measured.collectives == measured[-1].measured.collectives
    assert measured[0].rounds_ms == measured[-1].rounds_ms
    for r in measured:
        cols = {c.name: c for c in r.measured.collectives}
        for name in ("input_ids", "pooled_outputs", "output_grads"):
            assert cols[name].source == "measured" and cols[name].ms == cols[name].measured_ms > 0
            assert cols[name].modelled_ms > 0
        assert cols["replica_grads"].source == "modelled"
        step = r.measured.max_fwd_ms + r.measured.max_bwd_ms + r.measured.collectives_ms
        assert r.measured.plan_ms == pytest.approx(step)
        assert len(r.rounds_ms) == 2


def test_unknown_collectives_mode_is_one_line():
    task = Task(tuple(make_tables(2, seed=1)), (10**9,) * 2, batch_size=64)
    from autoshard.errors import AutoshardError

    with pytest.raises(AutoshardError, match="use 'model' or 'measure'"):
        measure_task(task, [], AnalyticalCostModel, rounds=1, collectives="guess")
