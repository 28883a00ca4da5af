"""The DreamShard loop on real kernels: the policy's own plans are measured, added to the dataset, and the
cost model is refitted (tiny tables, a tiny batch and few repeats, so the real measurements take seconds)."""

from __future__ import annotations

import numpy as np
import pytest

from autoshard.costs.learned.model import LearnedCostModel
from autoshard.costs.learned.network import CostNetConfig
from autoshard.costs.learned.training import TrainOptions
from autoshard.hardware.jsonl import read_jsonl
from autoshard.hardware.kernel import MeasureSettings
from autoshard.hardware.profiler import ProfileConfig, load_dataset, profile
from autoshard.pipeline.refresh import REFRESH_FILE, RefreshConfig, refresh_with_real
from autoshard.planners.rl.policy import TrainedPolicy
from autoshard.planners.rl.train import TrainConfig
from autoshard.tables import LookupKind, LookupSpec, Table, TablePool
from autoshard.tasks import sample_tasks

BATCH = 32
FAST = MeasureSettings(warmup=1, repeats=3, rows_cap=2000, num_batches=1, max_tries=1, flush_cache=False)
FIT = TrainOptions(max_epochs=3, patience=2, batch_records=8, config=CostNetConfig(hidden=16, embed=8))


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.slow
def test_refresh_loop_measures_policy_plans_and_refits(tmp_path):
    rng = np.random.default_rng(0)
    pool = TablePool.from_tables([
        Table(f"r{i}", int(rng.choice([4, 8, 16])), int(rng.integers(200, 2000)), float(rng.uniform(1, 10)),
              lookups=LookupSpec(LookupKind.POWER_LAW, seed=i)) for i in range(12)])
    data = tmp_path / "costs"
    list(profile(pool, data, ProfileConfig(samples=24, max_tables=4, batch_size=BATCH, settings=FAST)))
    model = LearnedCostModel.fit(load_dataset(data), FIT)
    tasks = sample_tasks(pool, 3, 6, (10**9,) * 2, seed=1, batch_size=BATCH)
    policy_path, model_path = str(tmp_path / "p.pt"), str(tmp_path / "cm.pt")
    result = refresh_with_real(model, data, tasks,
                               TrainConfig(iterations=2, tasks_per_iteration=2, samples_per_task=2, hidden=8),
                               RefreshConfig(rounds=1, tasks_per_round=1, fit_options=FIT),
                               checkpoint_path=policy_path, cost_model_path=model_path)
    added = read_jsonl(data / REFRESH_FILE)
    (round0,) = result.rounds
    assert round0["records_added"] == len(added) >= 1 and round0["records_total"] == 24 + len(added)
    assert all(r["sample_id"].startswith("900000-") and r["fwd_ms"] > 0 for r in added)
    # the measured devices are the policy's plan: one task's tables, split over its 2 devices
    measured_tables = [t for r in added for t in r["tables"]]
    assert sorted(measured_tables) == sorted({t for r in added for t in r["tables"]})
    assert any(sorted(measured_tables) == sorted(t.name for t in task.tables) for task in tasks)
    saved = TrainedPolicy.load(policy_path)
    assert saved.state["iteration"] == 4 and saved.cost_model["spec"] == model_path
    assert saved.metrics["refresh"][0]["measured_plan_ms"][0] > 0
    LearnedCostModel.load(model_path)
