"""Scoring a cost model on measured records: MAPE, RMSE and Spearman per head, on held-out data.

Heads scored: per-device forward, backward, and fwd + bwd (what the target refers to); the plan cost of random
4-device groupings of the records, both as the max over devices of the per-device predictions and from the
plan head. Comm is the measured alpha-beta fit itself (exact by construction), so it is not scored here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from autoshard.costs.learned.training import (
    _random_groups,
    predict_plans,
    predict_records,
    record_tensors,
)
from autoshard.costs.metrics import score
from autoshard.errors import AutoshardError
from autoshard.tables.table import Precision, TablePool

EVAL_PLAN_DEVICES = 4
"""Devices per synthetic plan when scoring plan costs (the papers' common 4-GPU set-up)."""


def held_out_records(model: Any, records: Sequence[Any]) -> list[Any]:
    """Records touching a table the model never trained on (the test split when it is the training dataset and
    the model was not refit on all of it)."""
    seen = model.info.get("refit") or model.info.get("split", {})
    train = set(seen.get("train_tables", []))
    bs = int(model.trained_on.get("batch_size", 0))
    return [r for r in records if any(n not in train for n in r.tables) and int(r.batch_size) == bs]


def evaluate(model: Any, pool: TablePool, records: Sequence[Any], seed: int = 0) -> dict[str, Any]:
    """Metrics (JSON-ready) and the (pred, measured) arrays per head for ``records``."""
    if not records:
        raise AutoshardError("no held-out records to evaluate; "
                             "use a dataset with tables the model did not train on")
    data = record_tensors(pool, records, model.normalizer)
    pred = predict_records(model.net, model.scaler, data)
    pairs: dict[str, tuple[np.ndarray, np.ndarray]] = {
        "fwd": (pred[:, 0], data.ms[:, 0]),
        "bwd": (pred[:, 1], data.ms[:, 1]),
        "fwd+bwd": (pred.sum(axis=1), data.ms.sum(axis=1)),
    }
    bs = int(model.trained_on["batch_size"])
    eb = Precision(model.trained_on["precision"]).bytes
    groups = _random_groups(np.random.default_rng(seed), np.arange(len(records)), EVAL_PLAN_DEVICES)
    c = model.comm.device_comm_ms(data.dim_sum[groups], bs, EVAL_PLAN_DEVICES, eb)
    measured_plan = (data.ms[groups].sum(axis=-1) + c).max(axis=1)
    if len(groups) >= 2:
        pairs["plan(max of devices)"] = ((pred[groups].sum(axis=-1) + c).max(axis=1), measured_plan)
        pairs["plan(plan head)"] = (predict_plans(model.net, model.scaler, data, groups, c), measured_plan)
    return {"metrics": {k: score(p, t) for k, (p, t) in pairs.items()}, "pairs": pairs}
