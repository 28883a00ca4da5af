"""Making a ``LearnedCostModel`` from a profiling dataset: train the members (``training``), score them on
the held-out records (``evaluation``: metrics, coverage, ``risk_k``), record the training support and
calibrate the analytical fallback on the records trained on, then (``refit``) train the saved members again
on every record.

``LearnedCostModel.fit`` calls ``fit_model`` with the model class to build (``build``), so this module does
not import the model."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from autoshard.costs.analytical import AnalyticalCostModel
from autoshard.costs.comm import AlphaBeta
from autoshard.costs.learned.checkpoint import FALLBACK_KEYS, FALLBACK_OPTIONAL_KEYS
from autoshard.costs.learned.support import STATS, Support, device_stats
from autoshard.errors import AutoshardError
from autoshard.host import hardware_difference, without_state
from autoshard.tasks import Task

log = logging.getLogger(__name__)


def check_one_machine(records: Sequence[Any]) -> None:
    """Refuse records of more than one machine: a model is calibrated for the hardware it was trained on
    (``trained_on`` names one host), and two CPUs of one machine kind time a shard 0.6-2.3x apart."""
    first = records[0].host
    for rec in records[1:]:
        k = hardware_difference(first, rec.host)
        if k is not None:
            raise AutoshardError(
                f"the dataset mixes machines: record {records[0].sample_id} has {k}={first[k]!r}, record "
                f"{rec.sample_id} {rec.host[k]!r}; train one cost model per machine (one profile directory "
                "each)")


def fit_model(build: Callable[..., Any], dataset: Any, options: Any = None, progress: Any = None) -> Any:
    """Train on a profiling dataset (``autoshard.hardware.profiler.load_dataset``); see ``training``.

    The scored model (trained without the held-out records) is evaluated on them: metrics, the ensemble's
    coverage, its out-of-support share, and ``risk_k`` chosen there. With ``refit`` (default) the saved
    members are then trained again on every record, keeping that ``risk_k``. ``build``: the
    ``LearnedCostModel`` constructor."""
    from autoshard.costs.comm import DEFAULT_COMM
    from autoshard.costs.learned.evaluation import evaluate
    from autoshard.costs.learned.splits import record_split_kinds
    from autoshard.costs.learned.training import TrainOptions, select_records, train

    options = options or TrainOptions()
    context = options.config.context
    records, batch_size, precision = select_records(dataset.records, options.batch_size, context)
    check_one_machine(records)
    comm = dataset.comm
    if comm is None:
        log.warning("the dataset has no comm_model.json; "
                    "comm uses the uncalibrated default (run profile-comm)")
        comm = DEFAULT_COMM
    members = options.ensemble

    def train_all(hold_out: bool) -> list[Any]:
        return [train(dataset.pool, records, comm, batch_size, precision, options, progress,
                      hold_out=hold_out, member=None if members == 1 else m) for m in range(members)]

    scored = train_all(True)
    result = scored[0]
    first = records[0]
    trained_on: dict[str, Any] = {
        "host": without_state(first.host), "batch_size": batch_size,
        "precision": None if precision is None else precision.value, "settings": dict(first.settings)}
    if context:
        batches = sorted({int(r.batch_size) for r in records})
        trained_on["batch_sizes"] = [batches[0], batches[-1]]
        trained_on["precisions"] = sorted({str(r.settings.get("precision", "fp32")) for r in records})
    per_sample = _tables_per_sample(records)
    train_recs = [records[i] for i in np.setdiff1d(np.arange(len(records)), result.test_ids)]
    info: dict[str, Any] = {
        "options": options.to_json(),
        "num_records": len(records),
        # which split shards the networks learned from (LearnedCostModel.row_move_margin reads it)
        "split_kinds_trained": sorted(record_split_kinds(dataset.pool, records)),
        "split": {**_seen(train_recs, per_sample),
                  "held_out_tables": [] if per_sample else result.held_out_tables,
                  "held_out_records": len(result.test_ids), "train_records": len(result.train_ids),
                  "val_records": len(result.val_ids), "test_records": len(result.test_ids)},
        "best_epoch": result.best_epoch,
        "epochs": len(result.history),
        "history": [dict(h) for h in result.history],
    }
    if members > 1:
        info["members"] = [{"best_epoch": r.best_epoch, "epochs": len(r.history)} for r in scored]
    model = _assemble(build, dataset, scored, train_recs, comm, trained_on, info, options.fallback)
    test = [records[i] for i in result.test_ids]
    # scored before any refit: these are the errors on tables the scored networks never saw
    ev = evaluate(model, dataset.pool, test, seed=options.seed)
    model.info["metrics"] = ev["metrics"]
    model.info["held_out"] = {k: ev[k] for k in ("coverage", "risk_k", "out_of_support_share", "n")}
    model.risk_k = ev["risk_k"]
    if not options.refit:
        return model
    final = train_all(False)
    info = dict(model.info)
    info["metrics_note"] = ("metrics: of the networks trained without the held-out records; "
                            "the saved networks were then refit on all records (see refit)")
    info["refit"] = {**_seen(records, per_sample), "train_records": len(final[0].train_ids),
                     "val_records": len(final[0].val_ids), "best_epoch": final[0].best_epoch,
                     "epochs": len(final[0].history)}
    out = _assemble(build, dataset, final, records, comm, trained_on, info, options.fallback)
    out.risk_k = model.risk_k
    return out


def _tables_per_sample(records: Sequence[Any]) -> bool:
    """True when no table is in two records (the broad design's tables, generated per sample)."""
    names = [n for r in records for n in set(r.tables)]
    return len(names) == len(set(names))


def _seen(records: Sequence[Any], per_sample: bool) -> dict[str, Any]:
    """What a model trained on ``records`` has seen: its tables, or (tables generated per sample, one record
    each) its sample ids, which name the same thing in far fewer entries."""
    if per_sample:
        return {"train_samples": sorted(r.sample_id for r in records)}
    return {"train_tables": sorted({n for r in records for n in r.tables})}


def _assemble(build: Callable[..., Any], dataset: Any, results: Sequence[Any], records: Sequence[Any],
              comm: AlphaBeta, trained_on: dict[str, Any], info: dict[str, Any], use_fallback: bool) -> Any:
    """The model of trained ``results`` (members), with the support of and a fallback fitted on ``records``
    (those the members trained on); ``use_fallback`` False: recorded in info, not used to price."""
    from autoshard.costs.learned.training import record_precision

    stats, batches, precisions = [], [], []
    tables = dataset.pool.by_name()
    for r in records:
        prec = record_precision(r)
        task = Task(tuple(tables[n] for n in r.tables), (2**62,), precision=prec,
                    batch_size=int(r.batch_size), name="record")
        stats.append(device_stats(task, [r.shard_refs()])[0])
        batches.append(int(r.batch_size))
        precisions.append(prec.value)
    support = Support.from_devices(np.array(stats), batches, precisions)
    # the records' shards, lookups and bytes (record_terms) are in their support statistics already
    terms = np.array(stats)[:, [STATS.index(k) for k in ("count", "lookups", "nbytes")]]
    fallback = AnalyticalCostModel().fit_from_dataset(dataset, records, terms)
    predicted = np.add(*fallback.compute_ms(terms[:, 0], terms[:, 1], terms[:, 2]))
    measured = np.array([float(r.fwd_ms) + float(r.bwd_ms) for r in records])
    ratio = np.log(np.maximum(np.array(measured), 1e-9) / np.maximum(predicted, 1e-9))
    rel_std = float(np.sqrt(np.mean(ratio ** 2)))
    info = {**info, "support": support.to_json(),
            "fallback": {**{k: float(getattr(fallback, k)) for k in FALLBACK_KEYS + FALLBACK_OPTIONAL_KEYS},
                         "rel_std": rel_std, "records": len(records)}}
    first = results[0]
    return build(first.net, dataset.pool.normalizer, first.scaler, comm, trained_on, info,
                 extra_members=[(r.net, r.scaler) for r in results[1:]], support=support,
                 fallback=fallback if use_fallback else None,
                 fallback_rel_std=rel_std if use_fallback else 0.0)
