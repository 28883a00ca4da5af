"""Row shards are priced by the lookups in their range (skew-aware, ``Task.lookup_share``), and search may cut
a skewed table into ranges of equal lookups (``uneven_rows``)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from autoshard.costs.analytical import AnalyticalCostModel
from autoshard.costs.base import plan_cost
from autoshard.costs.comm import AlphaBeta
from autoshard.plan import Plan, ShardingType, TablePlacement, validate
from autoshard.planners.sharding_moves import improve, lookup_balanced_row_wise, torchrec_row_wise
from autoshard.shards import Shard, ShardRef
from autoshard.tables import LookupKind, LookupSpec, Table
from autoshard.tables.lookups import lookup_balanced_bounds, row_range_share
from autoshard.tasks import Task

SORTED = Table("hot", 64, 400_000, 60.0, lookups=LookupSpec(LookupKind.POWER_LAW, seed=1, alpha=1.1,
                                                              sorted_ids=True))
"""Frequency-ordered ids (row 0 the hottest), as in datasets whose ids were assigned by frequency."""
SCATTERED = Table("scattered", 64, 400_000, 60.0, lookups=LookupSpec(LookupKind.POWER_LAW, seed=1, alpha=1.1))
PLAIN = Table("plain", 64, 400_000, 60.0)


def test_row_range_shares_follow_the_distribution_and_add_up():
    quarters = [(i * 100_000, (i + 1) * 100_000) for i in range(4)]
    hot = [row_range_share(SORTED, a, b) for a, b in quarters]
    assert sum(hot) == pytest.approx(1.0) and hot[0] > 0.8 and hot == sorted(hot, reverse=True)
    scattered = [row_range_share(SCATTERED, a, b) for a, b in quarters]
    assert sum(scattered) == pytest.approx(1.0) and max(scattered) < 0.5  # hot rows spread over the table
    assert [row_range_share(PLAIN, a, b) for a, b in quarters] == [0.25] * 4  # no distribution: uniform


def test_the_hot_range_costs_more_than_a_cold_range_of_the_same_size():
    task = Task((SORTED,), (10**12,) * 2, batch_size=2048)
    hot, cold = ShardRef(0, 64, 0, 200_000), ShardRef(0, 64, 200_000, None)
    assert task.lookup_share(hot) > 0.9 and task.lookup_share(cold) < 0.1
    costs = AnalyticalCostModel().device_costs(task, [[hot], [cold]])
    assert costs[0, 0] > 5 * costs[1, 0] and costs[0, 1] > 5 * costs[1, 1]
    assert task.lookup_share(ShardRef(0, 64, replica=True)) == 0.5 and task.lookup_share(ShardRef(0, 32)) == 1


@pytest.mark.parametrize("parts", [2, 4, 8])
def test_lookup_balanced_bounds_balance_lookups_not_rows(parts):
    bounds = lookup_balanced_bounds(SORTED, parts)
    assert bounds[0] == 0 and bounds[-1] == SORTED.rows and all(a < b for a, b in itertools.pairwise(bounds))
    shares = [row_range_share(SORTED, a, b) for a, b in itertools.pairwise(bounds)]
    # the hottest rows cannot be cut below one row, so a part holding row 0 alone may exceed 1 / parts
    assert max(shares[1:]) < 1.6 / parts and min(shares) > 0.4 / parts
    even = lookup_balanced_bounds(PLAIN, parts)
    assert even == [min(i * -(-PLAIN.rows // parts), PLAIN.rows) for i in range(parts + 1)]


def test_search_moves_can_cut_a_skewed_table_by_lookups_when_that_pays():
    task = Task((SORTED, Table("small", 16, 1000, 2.0)), (10**12,) * 4, batch_size=4096)
    slow = AlphaBeta(alpha_ms=0.01, bytes_per_ms=1e7)  # replicas' whole-table all-reduce does not pay
    model = AnalyticalCostModel(fwd_lookup_ns=5.0, bwd_lookup_ns=10.0, comm=slow)
    plan = Plan((TablePlacement("hot", ShardingType.TABLE_WISE, (Shard(0, 0, 64),)),
                 TablePlacement("small", ShardingType.TABLE_WISE, (Shard(1, 0, 16),))), 4, "test")
    balanced = lookup_balanced_row_wise(SORTED, 4)
    even = torchrec_row_wise("hot", SORTED.rows, 64, 4)
    assert balanced is not None and balanced.shards != even.shards
    priced = {n: plan_cost(model, task, Plan((p, plan.placements[1]), 4, "x")).plan_ms
              for n, p in (("balanced", balanced), ("even", even))}
    assert priced["balanced"] < priced["even"]  # even blocks leave the hot block's rank with the work
    moved, changes = improve(task, plan, model, uneven_rows=True)
    validate(moved, task)
    assert moved.placement("hot").shards == balanced.shards and "lookup-balanced" in changes[0]
    kept, changes = improve(task, plan, model)  # off by default: only TorchRec-exportable moves
    assert kept.placement("hot").shards != balanced.shards
    assert np.isfinite(plan_cost(model, task, kept).plan_ms)

    # a model that prices row-wise devices low asks a row move for more than its margin (the learned one)
    gain = 1 - priced["balanced"] / plan_cost(model, task, plan).plan_ms  # the hot table's move alone
    assert gain > 0.05

    class Strict(AnalyticalCostModel):
        row_move_margin = gain + 0.01

    class Loose(AnalyticalCostModel):
        row_move_margin = gain - 0.01

    strict, loose = (cls(fwd_lookup_ns=5.0, bwd_lookup_ns=10.0, comm=slow) for cls in (Strict, Loose))
    assert improve(task, plan, strict, uneven_rows=True)[0].placement("hot").sharding_type \
        is not ShardingType.ROW_WISE
    assert improve(task, plan, loose, uneven_rows=True)[0].placement("hot").shards == balanced.shards
    from autoshard.costs.learned import LearnedCostModel
    from autoshard.costs.learned.risk import RiskPricedModel, risk_priced
    from autoshard.costs.loading import SHIPPED_COST_MODEL

    # ...through the risk pricing the planners put around it too
    shipped = LearnedCostModel.load(SHIPPED_COST_MODEL, allow_other_hardware=True)
    priced = risk_priced(shipped)
    assert isinstance(priced, RiskPricedModel) and priced.row_move_margin == shipped.row_move_margin
    # the untrained margin unless the model was pre-trained on profiles holding row shards
    from autoshard.costs.learned.splits import UNTRAINED_ROW_MOVE_MARGIN

    assert UNTRAINED_ROW_MOVE_MARGIN > 0  # so the untrained and the trained cases below differ
    trained = {k: v for k, v in shipped.info.items() if k != "split_kinds_trained"}
    for kinds, margin in (([], UNTRAINED_ROW_MOVE_MARGIN), (["column"], UNTRAINED_ROW_MOVE_MARGIN),
                          (["column", "row"], 0.0)):
        model_k = shipped._replace(info={**trained, "split_kinds_trained": kinds})
        assert model_k.row_move_margin == margin == risk_priced(model_k).row_move_margin
    assert shipped._replace(info=trained).row_move_margin == UNTRAINED_ROW_MOVE_MARGIN  # older checkpoints
