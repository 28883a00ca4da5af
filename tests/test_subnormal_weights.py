"""A loaded cost model carries no subnormal weights (``network.without_subnormals``): x86 CPUs slow down on
them, and zeroing them moves no prediction."""

from __future__ import annotations

import numpy as np
import torch

from autoshard.costs.learned import LearnedCostModel
from autoshard.costs.learned.network import without_subnormals
from autoshard.costs.loading import SHIPPED_COST_MODEL
from autoshard.shards import ShardRef
from autoshard.tables.lookups import LookupKind, LookupSpec
from autoshard.tables.table import Table
from autoshard.tasks import Task

TINY = torch.finfo(torch.float32).tiny


def _subnormals(t: torch.Tensor) -> int:
    return int(((t.abs() < TINY) & (t != 0)).sum()) if t.is_floating_point() else 0


def test_only_subnormal_floats_are_zeroed_and_the_state_is_not_changed_in_place():
    w = torch.tensor([1e-40, -3e-39, 0.0, TINY, -TINY, 1e-3, 2.5])
    steps = torch.tensor([7, 0, -1])
    state = {"w": w, "steps": steps, "d": torch.tensor([1e-310, 1.0], dtype=torch.float64)}
    out = without_subnormals(state)
    assert out["w"].tolist() == [0.0, 0.0, 0.0, TINY, -TINY, w[5].item(), 2.5]
    assert out["steps"] is steps
    assert out["d"].tolist() == [0.0, 1.0]
    assert _subnormals(w) == 2  # the caller's tensor is untouched


def test_the_shipped_model_loads_without_subnormals_and_predicts_as_with_them():
    raw = torch.load(SHIPPED_COST_MODEL, weights_only=True)
    states = [raw["state_dict"]] + [m["state_dict"] for m in raw.get("members", [])]
    assert sum(_subnormals(t) for s in states for t in s.values()) > 0  # what this test is about
    model = LearnedCostModel.load(SHIPPED_COST_MODEL, allow_other_hardware=True)
    nets = [net for net, _ in model.members]
    assert len(nets) == len(states)
    assert all(_subnormals(p) == 0 for net in nets for p in net.state_dict().values())

    tables = tuple(Table(f"t{i}", d, r, p, lookups=LookupSpec(LookupKind.POWER_LAW, seed=i))
                   for i, (d, r, p) in enumerate([(16, 10**5, 4.0), (64, 10**6, 20.0), (128, 10**7, 60.0),
                                                  (32, 2000, 1.0), (8, 5 * 10**6, 30.0)]))
    task = Task(tables, (10**12,) * 3, batch_size=4096)
    devices = [[ShardRef(0, 16), ShardRef(2, 64)], [ShardRef(2, 64), ShardRef(1, 64)],
               [ShardRef(3, 32), ShardRef(4, 8, 0, 10**6), ShardRef(4, 8, 10**6)]]
    cleaned = model.predict(task, devices)
    with_them = LearnedCostModel.load(SHIPPED_COST_MODEL, allow_other_hardware=True)
    for (net, _), state in zip(with_them.members, states, strict=True):
        net.load_state_dict(state)
    kept = with_them.predict(task, devices)
    assert sum(_subnormals(p) for net, _ in with_them.members for p in net.state_dict().values()) > 0
    np.testing.assert_array_equal(cleaned.mean, kept.mean)
    np.testing.assert_array_equal(cleaned.std, kept.std)
