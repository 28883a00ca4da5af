"""A table calibration fitted on a directory of measured devices (``autoshard calibrate-tables``; ``autoshard
adapt-cost`` writes one beside its adapted model), and its error on devices it did not see.

The devices are a profile-format directory whose tables are a fixed pool (``tables.json``): ``adapt-cost``'s
``OUT/devices``, the bench's refresh devices, or ``autoshard profile`` of your own tables. A ``broad``
profile generates its tables per sample, so its table names say nothing about another task's: refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from autoshard.costs.base import CostModel
from autoshard.costs.metrics import mape, spearman
from autoshard.costs.table_calibration import (
    CalibratedCostModel,
    MeasuredDevices,
    TableCalibration,
    fit_calibration,
)
from autoshard.costs.task_fit import DEFAULT_RIDGE
from autoshard.errors import AutoshardError
from autoshard.hardware.profile_dataset import CostDataset
from autoshard.pipeline.cache import file_key

HELD_OUT_FOLDS = 5
"""Folds of the held-out check: each fifth of the devices priced by a calibration fitted on the rest."""


def record_devices(data: CostDataset) -> list[MeasuredDevices]:
    """Every record of ``data`` as a one-device task and its timing (a record is one measured device)."""
    if data.design == "broad":
        raise AutoshardError("a broad profile generates its tables per sample, so a table's name there says "
                             "nothing about your tasks; calibrate on devices of your own tables (the "
                             "OUT/devices of 'autoshard adapt-cost')")
    out = []
    for record in data.records:
        task, shards = data.task_of(record)
        out.append((task, [shards], np.array([[record.fwd_ms, record.bwd_ms]])))
    if not out:
        raise AutoshardError("the devices directory holds no measured device; time some first "
                             "('autoshard adapt-cost')")
    return out


def calibrate(model: CostModel, data: CostDataset, ridge: float = DEFAULT_RIDGE,
              samples: Sequence[MeasuredDevices] | None = None, **about: Any) -> TableCalibration:
    """``model``'s calibration on every device of ``data`` (``samples``: its ``record_devices`` when the
    caller has them already; ``about``: what to record, as ``fit_calibration`` takes it; the host defaults to
    the first record's)."""
    about.setdefault("host", dict(data.records[0].host) if data.records else {})
    return fit_calibration(model, record_devices(data) if samples is None else samples, ridge, **about)


def load_calibration(path: str, checkpoint: str) -> TableCalibration:
    """The table calibration at ``path``, refused (one line) unless it was fitted against the learned
    checkpoint file ``checkpoint``: its factors correct that model's prices, no other's."""
    calibration = TableCalibration.load(path)
    if not Path(checkpoint).is_file():
        raise AutoshardError(f"a table calibration corrects a learned checkpoint; {checkpoint} is not one")
    if calibration.model_key != file_key(checkpoint):
        raise AutoshardError(f"{path} corrects {calibration.model_path or 'another model'}, not "
                             f"{checkpoint}; plan with that model, or calibrate this one (autoshard "
                             f"calibrate-tables --model {checkpoint})")
    return calibration


def held_out_error(model: CostModel, samples: Sequence[MeasuredDevices], ridge: float = DEFAULT_RIDGE,
                   folds: int = HELD_OUT_FOLDS, seed: int = 0) -> dict[str, float]:
    """fwd + bwd MAPE (%) and Spearman of ``model`` alone and calibrated, each fold of ``samples`` priced by a
    calibration fitted on the other folds (one-device samples: the records of ``record_devices``)."""
    if len(samples) < 2 * folds:
        raise AutoshardError(f"{len(samples)} measured devices are too few to check a calibration on "
                             f"{folds} folds; time at least {2 * folds}")
    fold = np.random.default_rng(seed).permutation(len(samples)) % folds
    before, after, timed = [], [], []
    for k in range(folds):
        fitted = fit_calibration(model, [s for s, f in zip(samples, fold) if f != k], ridge)
        corrected = CalibratedCostModel(model, fitted)
        for (task, devices, measured), f in zip(samples, fold):
            if f == k:
                before.append(float(np.asarray(model.device_costs(task, devices))[0, :2].sum()))
                after.append(float(np.asarray(corrected.device_costs(task, devices))[0, :2].sum()))
                timed.append(float(np.asarray(measured)[0, :2].sum()))
    return {"mape_before_pct": mape(before, timed), "mape_after_pct": mape(after, timed),
            "spearman_before": spearman(before, timed), "spearman_after": spearman(after, timed),
            "devices": len(timed)}
