"""Fine-tuning a pre-trained cost model on the devices of one workload (NeuroShard's pre-train, then
DreamShard's refresh on the planners' own devices).

A model pre-trained on the broad design prices any table, but on one workload's devices it can be off by more
than the differences between the plans it ranks (stop 17: 12-17% on DLRM-10 (2)'s 5-table devices, one
device priced 9.1 ms that measured 4.9). Retraining from scratch on those few devices would forget the broad
design; so each member continues from its pre-trained weights on the workload's records, top to bottom:

1. Records of one machine (``check_one_machine``), of the model's batch size unless its network takes the
   batch as context. Records of another machine than the model's, or timed with other settings that change
   kernel cost (optimizer, threads, device, backend: ``compat.SETTING_KEYS``), are refused unless
   ``adapt_hardware``.
2. A seeded validation share of the records (the same for every member: ``training.validation_split``).
3. Adapting to another machine (or settings) only: the model's forward and backward are first scaled to
   the median measured / predicted ratio of the non-validation records (``LearnedCostModel.with_host_scale``,
   the fallback alike), so the networks start at the new machine's level and learn what differs beyond it.
4. Every member trains on its own bootstrap of the rest at a small learning rate, starting from its weights
   and target scaling, and keeps the epoch with the lowest validation fwd+bwd MAPE, where the starting weights
   count as an epoch: a member the records do not improve stays as it was.
5. ``risk_k`` becomes the larger of the pre-trained one and the one that covers ``RISK_COVERAGE`` of the
   validation devices (``evaluation.select_risk_k``): the guard then asks the fine-tuned model for a margin
   at least as wide as its error on the workload.

An adapted model also records which kinds of split shard (column, row) its records of the new machine hold
(``info["split_kinds_seen"]``; a later fine-tuning on that machine adds its records' kinds): on the kinds it
has not seen there it prices devices with a wider spread (``splits``), since its members cannot know how the
new machine scales them.

The support, the analytical fallback and the feature normaliser stay the pre-trained model's (the networks
were trained in that feature space, and the fallback is calibrated on the broad records). ``info``
records the fine-tuning: records, epochs per member, validation MAPE before and after. An adapted model is a
model of the records' machine: its ``trained_on`` names their host and settings (the pre-training's is kept
in ``info``), so it is checked against that machine from then on.

Why adapt rather than fit from scratch on another machine: the shipped model (AMD EPYC CPUs) ranks an H200's
devices with Spearman 0.855 before any adaptation, and scaled then fine-tuned on 16-64 of them it ranks
held-out ones at 0.854-0.865 where a fit from scratch on the same devices gets 0.715-0.728 (at similar
MAPE); from about 128 devices the fit from scratch is as good or better
(``benchmarks/cross_hardware_fine_tune.py``; docs/benchmarks.md, "Stop 28").
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from autoshard.costs.learned.compat import trained_host_difference, trained_settings_difference
from autoshard.costs.learned.evaluation import predict_records, select_risk_k
from autoshard.costs.learned.fit import check_one_machine
from autoshard.costs.learned.splits import record_split_kinds
from autoshard.costs.learned.training import TrainOptions, select_records, train, validation_split
from autoshard.costs.metrics import mape
from autoshard.errors import AutoshardError
from autoshard.host import without_state

log = logging.getLogger(__name__)

MIN_RECORDS = 8
"""Fewest records worth fine-tuning on (a validation share of them has to say something)."""


@dataclass(frozen=True)
class FineTuneOptions:
    """How ``fine_tune`` continues a pre-trained model's training (recorded in the model's info)."""

    seed: int = 0
    """Seeds the validation split, the members' bootstraps and the batch order."""
    val_fraction: float = 0.25
    """Share of the records held back to choose each member's epoch and the risk factor."""
    lr: float = 1e-3
    """Adam learning rate: a tenth of the pre-training's, so the members move toward the records without
    leaving what the broad design taught them."""
    weight_decay: float = 1e-3
    """Adam L2 penalty (the pre-training's)."""
    max_epochs: int = 200
    """Most passes over the records per member."""
    patience: int = 30
    """Stop a member after this many epochs without a better validation MAPE."""
    batch_records: int = 32
    """Records (devices) per mini-batch."""

    def __post_init__(self) -> None:
        if not 0.0 < self.val_fraction < 1.0:
            raise AutoshardError(f"fine-tuning validation fraction {self.val_fraction} must be in (0, 1)")
        if self.max_epochs <= 0 or self.patience <= 0 or self.batch_records <= 1 or self.lr <= 0:
            raise AutoshardError("fine-tuning epochs, patience and learning rate must be positive, "
                                 "batch_records above 1")


def fine_tune(model: Any, dataset: Any, options: FineTuneOptions = FineTuneOptions(),
              progress: Callable[[int, dict[str, float]], None] | None = None,
              adapt_hardware: bool = False) -> Any:
    """A new ``LearnedCostModel``: ``model``'s members trained further on ``dataset``'s records (module
    docstring); ``model`` is not changed. ``adapt_hardware``: the records may be of another machine than the
    model's, which it is then adapted to."""
    bs = None if model.config.context else model.trained_on.get("batch_size")
    records, batch_size, precision = select_records(dataset.records, bs, model.config.context)
    check_one_machine(records)
    host, settings = records[0].host, records[0].settings
    trained_host, trained_settings = model.trained_on.get("host", {}), model.trained_on.get("settings", {})
    other = trained_host_difference(trained_host, host)
    other_setting = trained_settings_difference(trained_settings, settings)
    if other is not None and not adapt_hardware:
        raise AutoshardError(
            f"the cost model to fine-tune was trained on {other}={trained_host[other]!r} but the records are "
            f"of {host[other]!r}; pass --adapt-hardware to adapt it to their machine, or train one there")
    if other_setting is not None and not adapt_hardware:
        k = other_setting
        raise AutoshardError(
            f"the cost model to fine-tune was trained with {k}={trained_settings[k]!r} but the records were "
            f"timed with {settings[k]!r}; pass --adapt-hardware to adapt it to those settings, or train one "
            "with them")
    if len(records) < MIN_RECORDS:
        raise AutoshardError(f"{len(records)} records are too few to fine-tune on; measure at least "
                             f"{MIN_RECORDS} devices")
    val_ids, _ = validation_split(np.arange(len(records)), options.val_fraction, options.seed)
    val = [records[i] for i in val_ids]
    measured = np.array([float(r.fwd_ms) + float(r.bwd_ms) for r in val])
    before = predict_records(model, dataset.pool, val)
    adapted: dict[str, Any] | None = None
    start, comm, trained_on = model, model.comm, model.trained_on
    if other is not None or other_setting is not None:
        fit_ids = np.setdiff1d(np.arange(len(records)), val_ids)
        fwd, bwd = level_ratios(model, dataset.pool, [records[i] for i in fit_ids])
        adapted = {"trained_on": model.trained_on, "fwd_scale": fwd, "bwd_scale": bwd,
                   "scale_records": len(fit_ids)}
        prev = model.info.get("host_calibration") or {}  # with_host_scale scales from the trained level
        start = model.with_host_scale(fwd * float(prev.get("fwd", 1.0)), bwd * float(prev.get("bwd", 1.0)),
                                      {"adapted_from": trained_host, "records": len(fit_ids)})
        comm = dataset.comm if dataset.comm is not None else model.comm
        trained_on = {**model.trained_on, "host": without_state(host), "settings": dict(settings)}
        log.info("adapting a model of %s to %s: level x%.3g forward, x%.3g backward, then fine-tuning",
                 trained_host.get("gpu") or trained_host.get("cpu"), host.get("gpu") or host.get("cpu"),
                 fwd, bwd)

    train_options = TrainOptions(seed=options.seed, val_fraction=options.val_fraction, refit=False,
                                 max_epochs=options.max_epochs, patience=options.patience, lr=options.lr,
                                 weight_decay=options.weight_decay, batch_records=options.batch_records,
                                 config=model.config, ensemble=model.ensemble_size)
    members = model.ensemble_size
    results = [train(dataset.pool, records, comm, batch_size, precision, train_options, progress,
                     hold_out=False, member=None if members == 1 else m, init=(net, scaler),
                     normalizer=model.normalizer)
               for m, (net, scaler) in enumerate(start.members)]
    info = {**start.info, "fine_tuned": {
        "options": asdict(options), "records": len(records), "val_records": len(val),
        "epochs": [r.best_epoch + 1 for r in results],
        "val_mape_pct_before": mape(before.mean[:, :2].sum(axis=1), measured)}}
    if adapted is not None:
        info["split_kinds_seen"] = sorted(record_split_kinds(dataset.pool, records))
    elif "split_kinds_seen" in info:  # fine-tuned again on the machine it was adapted to
        info["split_kinds_seen"] = sorted(set(info["split_kinds_seen"]) | record_split_kinds(dataset.pool,
                                                                                             records))
    if adapted is not None:
        info["fine_tuned"]["adapted_from"] = adapted
        scaled = predict_records(start, dataset.pool, val)
        info["fine_tuned"]["val_mape_pct_scaled"] = mape(scaled.mean[:, :2].sum(axis=1), measured)
    first = results[0]
    tuned = type(model)(first.net, model.normalizer, first.scaler, comm, trained_on, info,
                        model.allow_other_hardware and adapted is None,
                        extra_members=[(r.net, r.scaler) for r in results[1:]],
                        support=model.support, fallback=start.fallback,
                        fallback_rel_std=model.fallback_rel_std, risk_k=model.risk_k,
                        handover=model.handover_setting)
    after = predict_records(tuned, dataset.pool, val)
    mean = after.mean[:, :2].sum(axis=1)
    tuned.info["fine_tuned"]["val_mape_pct_after"] = mape(mean, measured)
    if tuned.has_spread:
        k = select_risk_k(measured, mean, after.total_std)
        tuned.info["fine_tuned"]["val_risk_k"] = k
        tuned.risk_k = max(model.risk_k, k)
    log.info("fine-tuned on %d records: validation fwd+bwd MAPE %.1f%% -> %.1f%%", len(records),
             tuned.info["fine_tuned"]["val_mape_pct_before"], tuned.info["fine_tuned"]["val_mape_pct_after"])
    return tuned


def level_ratios(model: Any, pool: Any, records: Sequence[Any]) -> tuple[float, float]:
    """Median measured / predicted forward and backward of ``model`` on ``records``: the factors that put it
    at their machine's level."""
    p = predict_records(model, pool, records)
    fwd = np.median(np.array([float(r.fwd_ms) for r in records]) / np.maximum(p.mean[:, 0], 1e-9))
    bwd = np.median(np.array([float(r.bwd_ms) for r in records]) / np.maximum(p.mean[:, 1], 1e-9))
    return float(fwd), float(bwd)


def tuned_records(model: Any) -> int:
    """How many records ``model`` was fine-tuned on (0: not fine-tuned)."""
    return int((model.info.get("fine_tuned") or {}).get("records", 0))


__all__: Sequence[str] = ("MIN_RECORDS", "FineTuneOptions", "fine_tune", "level_ratios", "tuned_records")
