"""Scoring a cost model on measured records: MAPE, RMSE and Spearman per head, on held-out data, and how well
its ensemble's spread covers the measurements.

Heads scored: per-device forward, backward, and fwd + bwd (what the target refers to), priced as planners
see them (``LearnedCostModel.predict``: the ensemble's mean; outside the support, the hand-over to the
calibrated analytical model); the plan cost of random 4-device groupings of the records (records of one batch
size and precision only), both as the max over devices of the per-device predictions and (one-batch networks
only) from the plan head. Comm is the measured alpha-beta fit
itself (exact by construction), so it is not scored here.

Coverage at k: the share of held-out devices whose measured fwd + bwd is at most the predicted mean + k x the
spread of fwd + bwd. ``select_risk_k`` picks the smallest k covering ``RISK_COVERAGE`` of them (84%: mean + 1
std of a normal), the risk factor planners price devices at (``planners.pricing``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from autoshard.costs.learned.prediction import Prediction
from autoshard.costs.learned.training import (
    _random_groups,
    predict_plans,
    record_precision,
    record_tensors,
)
from autoshard.costs.metrics import score
from autoshard.errors import AutoshardError
from autoshard.tables.table import Precision, TablePool
from autoshard.tasks import Task

EVAL_PLAN_DEVICES = 4
"""Devices per synthetic plan when scoring plan costs (the papers' common 4-GPU set-up)."""

RISK_COVERAGE = 0.84
"""Share of held-out device measurements ``mean + risk_k x spread`` should cover (a normal's mean + 1 std)."""

COVERAGE_KS = (1.0, 2.0)
"""The k whose coverage ``evaluate`` reports."""

RECORD_DEVICE_MEMORY = 2**62
"""Device memory of the one-device tasks records are priced in (pricing, not planning)."""


def held_out_records(model: Any, records: Sequence[Any]) -> list[Any]:
    """Records the model never trained on (the test split when it is the training dataset and the model was
    not refit on all of it): records touching a table it never saw, or (models of per-sample tables) records
    of samples it never saw. A single-batch network only scores records of its batch size."""
    seen = model.info.get("refit") or model.info.get("split", {})
    out = list(records)
    if "train_samples" in seen:
        samples = set(seen["train_samples"])
        out = [r for r in out if r.sample_id not in samples]
    else:
        train = set(seen.get("train_tables", []))
        out = [r for r in out if any(n not in train for n in r.tables)]
    if not model.config.context:
        bs = int(model.trained_on.get("batch_size") or 0)
        out = [r for r in out if int(r.batch_size) == bs]
    return out


def predict_records(model: Any, pool: TablePool, records: Sequence[Any]) -> Any:
    """The model's ``Prediction`` of every record's device, in order: records are grouped by batch size and
    precision, each group priced in one call as the devices of a one-device task of its tables."""
    tables = pool.by_name()
    groups: dict[tuple[int, str], list[int]] = {}
    for i, r in enumerate(records):
        groups.setdefault((int(r.batch_size), record_precision(r).value), []).append(i)
    n = len(records)
    mean, std = np.zeros((n, 3)), np.zeros((n, 3))
    total_std, fallback = np.zeros(n), np.zeros(n, dtype=bool)
    for (batch, precision), ids in groups.items():
        names = list(dict.fromkeys(name for i in ids for name in records[i].tables))
        index = {name: j for j, name in enumerate(names)}
        missing = [name for name in names if name not in tables]
        if missing:
            raise AutoshardError(f"table {missing[0]!r} of the records is not in the dataset's tables")
        task = Task(tuple(tables[name] for name in names), (RECORD_DEVICE_MEMORY,),
                    precision=Precision(precision), batch_size=batch, name="records")
        devices = [records[i].shard_refs([index[name] for name in records[i].tables]) for i in ids]
        pred = model.predict(task, devices)
        mean[ids], std[ids] = pred.mean, pred.std
        total_std[ids], fallback[ids] = pred.total_std, pred.fallback
    return Prediction(mean, std, total_std, fallback)


def coverage(measured: np.ndarray, mean: np.ndarray, spread: np.ndarray, k: float) -> float:
    """Share of ``measured`` at most ``mean + k x spread``."""
    return float(np.mean(measured <= mean + k * spread))


def select_risk_k(measured: np.ndarray, mean: np.ndarray, spread: np.ndarray,
                  target: float = RISK_COVERAGE) -> float:
    """The smallest k >= 0 with ``coverage(measured, mean, spread, k) >= target`` (devices without spread are
    covered or not whatever k; if the target cannot be reached, the k covering every device with a spread)."""
    measured, mean, spread = (np.asarray(x, dtype=np.float64).ravel() for x in (measured, mean, spread))
    if not len(measured):
        return 0.0
    has = spread > 0
    covered_flat = int(np.sum(~has & (measured <= mean)))
    need = math.ceil(target * len(measured) - 1e-9) - covered_flat
    z = np.sort((measured[has] - mean[has]) / spread[has])
    if need <= 0 or not len(z):
        return 0.0
    return float(max(0.0, z[min(need, len(z)) - 1]))


def evaluate(model: Any, pool: TablePool, records: Sequence[Any], seed: int = 0) -> dict[str, Any]:
    """Metrics (JSON-ready), coverage, the chosen risk factor, the out-of-support share and the (pred,
    measured) arrays per head for ``records``."""
    if not records:
        raise AutoshardError("no held-out records to evaluate; "
                             "use a dataset with tables the model did not train on")
    pred = predict_records(model, pool, records)
    measured = np.array([[float(r.fwd_ms), float(r.bwd_ms)] for r in records])
    mean = pred.mean[:, :2]
    pairs: dict[str, tuple[np.ndarray, np.ndarray]] = {
        "fwd": (mean[:, 0], measured[:, 0]),
        "bwd": (mean[:, 1], measured[:, 1]),
        "fwd+bwd": (mean.sum(axis=1), measured.sum(axis=1)),
    }
    inside = ~pred.fallback
    if pred.fallback.any() and inside.sum() >= 2:
        pairs["fwd+bwd (in support)"] = (mean[inside].sum(axis=1), measured[inside].sum(axis=1))
    kinds = {(int(r.batch_size), record_precision(r)) for r in records}
    if len(kinds) == 1:
        bs, precision = kinds.pop()
        data = record_tensors(pool, records, model.normalizer, model.config.context,
                              model.config.reuse, model.config.density)
        groups = _random_groups(np.random.default_rng(seed), np.arange(len(records)), EVAL_PLAN_DEVICES)
        c = model.comm.device_comm_ms(data.dim_sum[groups], bs, EVAL_PLAN_DEVICES, precision.bytes)
        measured_plan = (data.ms[groups].sum(axis=-1) + c).max(axis=1)
        if len(groups) >= 2:
            pairs["plan(max of devices)"] = ((mean[groups].sum(axis=-1) + c).max(axis=1), measured_plan)
            if not model.config.context:
                # a context network's plan head learned from groups of records of different batch sizes
                # (the broad design draws a batch per sample), which no plan is: measured 91% MAPE on
                # one-batch held-out plans, so it is not scored as a plan-cost estimate (planners use the
                # max over devices above, never the head)
                head = predict_plans(model.net, model.scaler, data, groups, c)
                pairs["plan(plan head)"] = (head, measured_plan)
    total, total_mean = measured.sum(axis=1), mean.sum(axis=1)
    return {
        "metrics": {k: score(p, t) for k, (p, t) in pairs.items()},
        "pairs": pairs,
        "coverage": {f"k={k:g}": coverage(total, total_mean, pred.total_std, k) for k in COVERAGE_KS},
        "risk_k": select_risk_k(total, total_mean, pred.total_std),
        "out_of_support_share": float(np.mean(pred.fallback)),
        "n": len(records),
    }
