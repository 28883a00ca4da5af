"""Training the cost network on a profiled dataset, top to bottom.

1. Filter the records to one batch size and precision (a cost model is valid for one hardware set-up), or,
   for a ``context`` network (``CostNetConfig.context``), keep every batch size and precision: each shard is
   then also given its device's batch and precision.
2. Split by UNSEEN TABLES: tables are held out in a seeded order until the records that contain one of them
   are a set share of the records (``TrainOptions.test_fraction``); those are the test records, so the test
   measures generalisation to new tables, not to new combinations. When no table is in two records (the broad
   design generates every sample's tables), every table is unseen anyway: a seeded share of the RECORDS is
   held out.
3. Early-stopping validation: a seeded share of the remaining (train-table) records.
4. Mini-batch Adam on the per-device compute heads (MSE in the network's output space: log-ms or scaled ms),
   plus the plan head on random groupings of the batch's records into plans of 2, 4 or 8 devices, whose target
   is the max over the group of measured fwd + bwd + comm (comm from the dataset's measured alpha-beta fit).
   The plan head trains on detached device representations so it cannot degrade the per-device heads.
5. Keep the weights of the epoch with the lowest validation MAPE of fwd + bwd; stop after ``patience`` epochs
   without improvement.
6. ``LearnedCostModel.fit`` scores that network on the held-out tables, then (``refit``, the default) trains
   the saved network again on every record, held-out tables included: the model that plans should learn from
   all the measurements. Measured with the split of stops 10-25 (20% of the TABLES held out, which dropped
   about 2/3 of 1-8-table records) on the DLRM-20 (4) data (200 records): 63 -> 160 training records, and on
   held-out bench devices fwd+bwd Spearman 0.70 -> 0.80-0.86 over 3 seeds
   (``benchmarks/cost_model_on_plans.py --train-from``).
7. An ensemble (``TrainOptions.ensemble`` > 1) repeats 3-5 per member: member ``m`` starts from its own
   seeded weights and trains on its own bootstrap resample of the training records (same split, same
   validation records), so the members disagree where the data do not pin the cost down.
"""

from __future__ import annotations

import copy
import logging
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch

from autoshard.costs.comm import AlphaBeta
from autoshard.costs.learned.features import (
    TargetScaler,
    context_features,
    shard_features,
    task_raw_features,
)
from autoshard.costs.learned.network import CostNet, CostNetConfig, Target, segment_sum
from autoshard.costs.metrics import mape
from autoshard.errors import AutoshardError
from autoshard.tables.table import NUM_FEATURES, Precision, TablePool
from autoshard.tasks import shard_lookup_share
from autoshard.threads import torch_threads

log = logging.getLogger(__name__)

PLAN_GROUP_SIZES = (2, 4, 8)
"""Device counts of the synthetic plans the plan head trains on (records of one batch grouped at random)."""


@dataclass(frozen=True)
class TrainOptions:
    """How ``autoshard train-cost`` trains (stored in the checkpoint)."""

    seed: int = 0
    """Seeds the split, the initial weights and the batch order."""
    test_fraction: float = 0.2
    """Share of the records held out for scoring, as whole unseen tables: tables are held out in a seeded
    order until the records touching them reach this share (``split_unseen_tables``)."""
    min_test_records: int = 30
    """Hold out at least this many records where that is at most half of them: they also choose
    ``risk_k``, a percentile that a dozen records cannot pin down."""
    val_fraction: float = 0.2
    """Share of the remaining records used for early stopping."""
    refit: bool = True
    """After scoring on the held-out tables, train the saved network again on all records (see step 6)."""
    max_epochs: int = 800
    """Upper bound on passes over the training records."""
    patience: int = 100
    """Stop after this many epochs without a better validation MAPE."""
    lr: float = 1e-2
    """Adam learning rate (the linear per-table cost path converges too slowly at 2e-3)."""
    weight_decay: float = 1e-3
    """Adam L2 penalty (1e-3 measured better than 1e-5 and 1e-2 on held-out bench devices)."""
    batch_records: int = 64
    """Records (devices) per mini-batch."""
    plan_weight: float = 0.5
    """Weight of the plan-head loss relative to the compute heads."""
    batch_size: int | None = None
    """Use the records of this kernel batch size (None: the dataset's only one; a ``context`` network:
    all)."""
    config: CostNetConfig = field(default_factory=CostNetConfig)
    """The network architecture."""
    ensemble: int = 1
    """Networks trained (each on its own bootstrap of the training records, from its own seed); the model
    predicts their mean and reports their spread. 1: one network on the records themselves."""
    fallback: bool = True
    """Price devices outside the training support with the analytical model calibrated on the same records
    (False: the networks price every device; the support is still recorded, for ``out_of_support``)."""

    def __post_init__(self) -> None:
        if not 0.0 < self.test_fraction < 1.0:
            raise AutoshardError(f"test fraction {self.test_fraction} must be in (0, 1)")
        if self.min_test_records < 0:
            raise AutoshardError(f"min_test_records {self.min_test_records} must be >= 0")
        if not 0.0 <= self.val_fraction < 1.0:
            raise AutoshardError(f"validation fraction {self.val_fraction} must be in [0, 1)")
        if self.max_epochs <= 0 or self.patience <= 0 or self.batch_records <= 1:
            raise AutoshardError("max_epochs and patience must be positive, batch_records above 1")
        if self.ensemble < 1:
            raise AutoshardError(f"ensemble size {self.ensemble} must be at least 1")

    @property
    def epoch_budget(self) -> int:
        """Most epochs ``LearnedCostModel.fit`` runs in all: the scored pass, plus the refit pass if any, for
        every member."""
        return self.max_epochs * (2 if self.refit else 1) * self.ensemble

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["config"] = self.config.to_json()
        return d


# -- records -> tensors --------------------------------------------------------------------------------------
def record_precision(record: Any) -> Precision:
    """The precision a record was timed at (``CostRecord.precision``)."""
    return record.precision


@dataclass(frozen=True)
class RecordTensors:
    """The shards of a list of records, flattened; record ``r`` owns shards
    ``starts[r]:starts[r]+counts[r]``."""

    feats: torch.Tensor  # (N, F) normalised features
    dims: torch.Tensor  # (N,)
    starts: np.ndarray  # (R,)
    counts: np.ndarray  # (R,)
    ms: np.ndarray  # (R, 2) measured fwd, bwd
    dim_sum: np.ndarray  # (R,)
    table_names: tuple[tuple[str, ...], ...]
    batch: np.ndarray | None = None  # (R,) kernel batch of each record
    elem_bytes: np.ndarray | None = None  # (R,) weight element bytes of each record

    @property
    def num_records(self) -> int:
        return len(self.counts)

    def gather(self, rec: np.ndarray) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Features, dims and segment ids (0..len(rec)-1) of the shards of records ``rec``."""
        lengths = self.counts[rec]
        seg = np.repeat(np.arange(len(rec)), lengths)
        first = np.repeat(self.starts[rec] - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
        idx = torch.from_numpy(first + np.arange(int(lengths.sum())))
        return self.feats[idx], self.dims[idx], torch.from_numpy(seg)


def record_tensors(pool: TablePool, records: Sequence[Any], normalizer: Any,
                   context: bool = False, reuse: bool = False, density: bool = False) -> RecordTensors:
    """The records' shards as tensors; ``context``: each shard's features end with its record's batch and
    precision (``features.context_features``); ``reuse``: then with its working set at that batch
    (``features.reuse_features``); ``density``: then with its spread over the rows it was timed with (its
    record's rows cap; ``features.density_features``)."""
    index = {t.name: i for i, t in enumerate(pool.tables)}
    used = sorted({index[n] for rec in records for n in rec.tables if n in index})
    raw = np.zeros((len(pool.tables), NUM_FEATURES))
    if used:  # only the tables the records use (a broad dataset's pool holds every sample's tables)
        raw[used] = task_raw_features([pool.tables[i] for i in used])
    table_idx: list[int] = []
    dims: list[int] = []
    frac: list[float] = []  # row shards (the refresh loop's row-wise devices): rows and lookups held
    share: list[float] = []
    counts = np.zeros(len(records), dtype=np.int64)
    for r, rec in enumerate(records):
        if len(rec.tables) != len(rec.dims) or not rec.tables:
            raise AutoshardError(f"record {rec.sample_id}: {len(rec.tables)} tables but {len(rec.dims)} dims")
        missing = [name for name in rec.tables if name not in index]
        if missing:
            raise AutoshardError(f"record {rec.sample_id}: "
                                 f"table {missing[0]!r} is not in the dataset's tables.json")
        for ref in rec.shard_refs([index[name] for name in rec.tables]):
            table = pool.tables[ref.table]
            table_idx.append(ref.table)
            dims.append(ref.dim)
            frac.append(ref.row_fraction(table.rows))
            share.append(shard_lookup_share(table, ref, 1))
        counts[r] = len(rec.tables)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    batch = np.array([int(rec.batch_size) for rec in records], dtype=np.float64)
    elem = np.array([record_precision(rec).bytes for rec in records], dtype=np.float64)
    ctx = np.repeat(context_features(batch, elem), counts, axis=0) if context else None
    reuse_at = (np.repeat(batch, counts), np.repeat(elem, counts)) if reuse else None
    density_at = None
    if density:
        caps = np.array([float(rec.settings.get("rows_cap") or np.inf) for rec in records], dtype=np.float64)
        density_at = (np.repeat(batch, counts), np.repeat(elem, counts), np.repeat(caps, counts))
    feats = shard_features(raw, np.array(table_idx, dtype=np.int64), np.array(dims), normalizer,
                           np.array(frac), np.array(share), context=ctx, reuse_at=reuse_at,
                           density_at=density_at)
    ms = np.array([[float(rec.fwd_ms), float(rec.bwd_ms)] for rec in records],
                  dtype=np.float64).reshape(-1, 2)
    if not np.all(np.isfinite(ms)) or np.any(ms <= 0):
        raise AutoshardError("the dataset has non-positive or non-finite timings; re-profile those samples")
    dim_sum = np.array([sum(int(d) for d in rec.dims) for rec in records], dtype=np.float64)
    return RecordTensors(torch.tensor(feats, dtype=torch.float32), torch.tensor(dims, dtype=torch.float32),
                         starts, counts, ms, dim_sum, tuple(tuple(rec.tables) for rec in records), batch,
                         elem)


# -- split ---------------------------------------------------------------------------------------------------
def select_records(records: Sequence[Any], batch_size: int | None,
                   context: bool = False) -> tuple[list[Any], Any, Any]:
    """The records of one batch size and one precision (error naming the choices if ambiguous), and those.

    ``context`` (a network told each device's batch and precision): every record (of ``batch_size`` if
    given); the batch size and precision returned are then None when the records mix them."""
    if not records:
        raise AutoshardError("the dataset has no shard records; run 'autoshard profile' first")
    sizes = Counter(int(r.batch_size) for r in records)
    if context:
        chosen = [r for r in records if batch_size is None or int(r.batch_size) == batch_size]
        if not chosen:
            raise AutoshardError(f"no records at batch size {batch_size}; the dataset has {sorted(sizes)}")
        batches = {int(r.batch_size) for r in chosen}
        precisions = {record_precision(r) for r in chosen}
        return (chosen, batches.pop() if len(batches) == 1 else None,
                precisions.pop() if len(precisions) == 1 else None)
    if batch_size is None:
        if len(sizes) > 1:
            raise AutoshardError(f"the dataset mixes batch sizes {sorted(sizes)}; pick one with --batch-size")
        batch_size = next(iter(sizes))
    chosen = [r for r in records if int(r.batch_size) == batch_size]
    if not chosen:
        raise AutoshardError(f"no records at batch size {batch_size}; the dataset has {sorted(sizes)}")
    precisions = {record_precision(r) for r in chosen}
    if len(precisions) > 1:
        raise AutoshardError(f"the dataset mixes precisions {sorted(p.value for p in precisions)}; "
                             "profile one")
    return chosen, batch_size, precisions.pop()


def split_unseen_tables(records: Sequence[Any], fraction: float, seed: int,
                        min_records: int = 0) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(train record ids, test record ids, held-out table names); test = records touching a held-out table.

    Tables are held out one at a time in a seeded order until the records touching them reach ``fraction``
    of the records, or ``min_records`` where that is more and at most half the records (at least one table,
    never every table). Why records, not tables: holding out a share of the TABLES holds out every record
    that touches one, which is most records when a record holds many tables (a fifth of the tables of
    1-24-table samples left 106 of 792 records to train on, and the held-out figures and ``risk_k`` then
    describe a network far weaker than the one refit on everything).

    When no table is in two records (tables generated per sample), a seeded ``fraction`` of the records is
    held out directly: their tables are unseen all the same.

    Why ``min_records``: the held-out records also choose ``risk_k``, an 84th percentile, which 12 records
    (a fifth of a 60-record profile) pin down only to about +-11 points of coverage."""
    names = sorted({n for r in records for n in r.tables})
    if len(names) < 2:
        raise AutoshardError("the dataset covers fewer than 2 tables; profile more tables to hold some out")
    target = max(fraction * len(records), min(float(min_records), len(records) / 2))
    if sum(len(set(r.tables)) for r in records) == len(names) and len(records) >= 2:
        k = min(max(1, round(target)), len(records) - 1)
        test = np.sort(np.random.default_rng(seed).permutation(len(records))[:k])
        train = np.setdiff1d(np.arange(len(records)), test)
        if len(train) < 4:
            raise AutoshardError(f"holding out {k} of {len(records)} records leaves {len(train)} to train "
                                 "on; profile more samples or change --test-fraction")
        return train, test, sorted({n for i in test for n in records[i].tables})
    order = np.random.default_rng(seed).permutation(names).tolist()
    touches = {n: np.zeros(len(records), dtype=bool) for n in names}
    for i, r in enumerate(records):
        for n in r.tables:
            touches[n][i] = True
    held: list[str] = []
    is_test = np.zeros(len(records), dtype=bool)
    for n in order[:-1]:
        held.append(n)
        is_test |= touches[n]
        if is_test.sum() >= target:
            break
    train, test = np.flatnonzero(~is_test), np.flatnonzero(is_test)
    if len(train) < 4:
        raise AutoshardError(
            f"holding out {len(held)} of {len(names)} tables leaves {len(train)} train and {len(test)} test "
            "records; profile more samples or lower --test-fraction")
    return train, test, sorted(held)


def validation_split(ids: np.ndarray, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(validation ids, fit ids) of ``ids``: a seeded ``fraction`` for early stopping, the same for every
    ensemble member; a split that would leave no validation record validates on the fit records."""
    perm = np.random.default_rng(seed).permutation(ids)
    n_val = round(len(perm) * fraction)
    val_ids, fit_ids = np.sort(perm[:n_val]), np.sort(perm[n_val:])
    return (val_ids if len(val_ids) else fit_ids), fit_ids


# -- training ------------------------------------------------------------------------------------------------
def _plan_targets(ms: np.ndarray, dim_sum: np.ndarray, groups: np.ndarray, comm: AlphaBeta, batch_size: Any,
                  elem_bytes: Any) -> tuple[np.ndarray, np.ndarray]:
    """For (P, D) groups of record ids: per-device comm (P, D) and plan cost = max of fwd + bwd + comm
    (P,). ``batch_size`` and ``elem_bytes``: numbers, or per-record arrays (records of mixed batches)."""
    d = groups.shape[1]
    if isinstance(batch_size, np.ndarray):
        batch_size, elem_bytes = batch_size[groups], elem_bytes[groups]
    c = comm.device_comm_ms(dim_sum[groups], batch_size, d, elem_bytes)
    return c, (ms[groups].sum(axis=-1) + c).max(axis=1)


def _head_loss(out: torch.Tensor, ms: torch.Tensor, scaler: TargetScaler, heads: slice | int) -> torch.Tensor:
    if scaler.target is Target.LOG:
        loc = torch.tensor(scaler.loc, dtype=out.dtype)[heads]
        scale = torch.tensor(scaler.scale, dtype=out.dtype)[heads]
        return ((out - (torch.log(ms) - loc) / scale) ** 2).mean()
    scale = torch.tensor(scaler.scale, dtype=out.dtype)[heads]
    return ((scaler.to_ms(out, heads) - ms) ** 2 / scale**2).mean()


def device_outputs(net: CostNet, data: RecordTensors, rec: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    feats, dims, seg = data.gather(rec)
    acc = segment_sum(net.encode(feats, dims), seg, len(rec))
    return net.device_forward(acc)


def predict_records(net: CostNet, scaler: TargetScaler, data: RecordTensors,
                    rec: np.ndarray | None = None) -> np.ndarray:
    """(len(rec), 2) predicted fwd, bwd ms."""
    rec = np.arange(data.num_records) if rec is None else rec
    with torch.no_grad():
        _, out = device_outputs(net, data, rec)
        return scaler.to_ms(out, slice(0, 2)).double().numpy()


def predict_plans(net: CostNet, scaler: TargetScaler, data: RecordTensors, groups: np.ndarray,
                  comm_dev: np.ndarray) -> np.ndarray:
    """(P,) plan-head predictions for (P, D) groups of records with their (P, D) comm ms."""
    with torch.no_grad():
        rep, _ = device_outputs(net, data, groups.ravel())
        rep = rep.reshape(*groups.shape, -1)
        out = net.plan_forward(rep, torch.tensor(comm_dev, dtype=rep.dtype),
                               torch.ones(groups.shape, dtype=torch.bool))
        return scaler.to_ms(out, 2).double().numpy()


@dataclass
class TrainResult:
    net: CostNet
    scaler: TargetScaler
    train_ids: np.ndarray
    val_ids: np.ndarray
    test_ids: np.ndarray
    held_out_tables: list[str]
    history: list[dict[str, float]]
    best_epoch: int


def train(pool: TablePool, records: Sequence[Any], comm: AlphaBeta, batch_size: int | None,
          precision: Precision | None, options: TrainOptions,
          progress: Callable[[int, dict[str, float]], None] | None = None, hold_out: bool = True,
          member: int | None = None, init: tuple[CostNet, TargetScaler] | None = None,
          normalizer: Any = None) -> TrainResult:
    """Train on ``records`` (already one batch size/precision, unless the network has ``context``) and return
    the best-validation network.

    ``hold_out``: keep the unseen-table test split out of training (False: train on every record; the result's
    ``test_ids`` and ``held_out_tables`` are then empty). ``member``: train ensemble member ``m`` (its own
    weights seed and a bootstrap of the training records; the split is the same for every member); None: the
    single network of ``options.seed``. ``init``: start from this trained network and keep its target scaling
    (fine-tuning, ``fine_tune``), and stop early only on a validation error below the one it starts with;
    ``normalizer``: the feature normaliser the network was trained with (default: the pool's)."""
    with torch_threads():  # small batches: one thread (``autoshard.threads``)
        return _train(pool, records, comm, batch_size, precision, options, progress, hold_out, member, init,
                      normalizer)


def _train(pool: TablePool, records: Sequence[Any], comm: AlphaBeta, batch_size: int | None,
           precision: Precision | None, options: TrainOptions,
           progress: Callable[[int, dict[str, float]], None] | None, hold_out: bool,
           member: int | None, init: tuple[CostNet, TargetScaler] | None = None,
           normalizer: Any = None) -> TrainResult:
    rng = np.random.default_rng(options.seed if member is None else [options.seed, member])
    torch.manual_seed(options.seed if member is None else options.seed * 1000 + member + 1)
    if hold_out:
        train_ids, test_ids, held = split_unseen_tables(records, options.test_fraction, options.seed,
                                                      options.min_test_records)
    else:
        train_ids, test_ids, held = np.arange(len(records)), np.zeros(0, dtype=np.int64), []
    # the validation records are the same for every member (seeded by options.seed alone)
    if member is None:
        rng.permutation(len(train_ids))  # the draw validation_split made from this generator: same stream
    val_ids, fit_ids = validation_split(train_ids, options.val_fraction, options.seed)
    if member is not None:  # a bootstrap resample: each member sees its own draw of the training records
        fit_ids = np.sort(rng.choice(fit_ids, size=len(fit_ids), replace=True))
    data = record_tensors(pool, records, normalizer or pool.normalizer, options.config.context,
                          options.config.reuse, options.config.density)
    if options.config.context or batch_size is None or precision is None:
        bs: Any = data.batch
        eb: Any = data.elem_bytes
    else:
        bs, eb = batch_size, precision.bytes

    if init is not None:  # fine-tuning: the trained network in the output space it was trained in
        net, scaler = copy.deepcopy(init[0]), init[1]
    else:
        # target scaling from the training records and training-style plans
        groups = _random_groups(rng, fit_ids, 4)
        _, plan_ms = _plan_targets(data.ms, data.dim_sum, groups, comm, bs, eb)
        scale_ms = np.column_stack([data.ms[fit_ids], np.resize(plan_ms, len(fit_ids))])
        scaler = TargetScaler.fit(options.config.target, scale_ms)
        net = CostNet(options.config)
        if scaler.target is Target.LOG:
            net.log_scale.copy_(torch.tensor(scaler.scale[:2], dtype=torch.float32))
    opt = torch.optim.Adam(net.parameters(), lr=options.lr, weight_decay=options.weight_decay)
    ms_t = torch.tensor(data.ms, dtype=torch.float32)

    def fit_loss() -> float:
        """Compute-head loss over all training records: deterministic, unlike the mini-batch losses."""
        with torch.no_grad():
            return float(_head_loss(device_outputs(net, data, fit_ids)[1], ms_t[fit_ids], scaler,
                                    slice(0, 2)))

    start = float("inf")
    if init is not None:  # a fine-tuned network is kept only where it beats the one it started from
        net.eval()
        start = mape(predict_records(net, scaler, data, val_ids).sum(axis=1), data.ms[val_ids].sum(axis=1))
    best = (start, -1, copy.deepcopy(net.state_dict()))
    history: list[dict[str, float]] = [{"epoch": -1, "fit_loss": fit_loss()}
                                       | ({"val_mape_pct": start} if init is not None else {})]
    for epoch in range(options.max_epochs):
        net.train()
        order = rng.permutation(fit_ids)
        losses = []
        for lo in range(0, len(order), options.batch_records):
            rec = order[lo: lo + options.batch_records]
            if len(rec) < 2:
                continue
            rep, out = device_outputs(net, data, rec)
            loss = _head_loss(out, ms_t[rec], scaler, slice(0, 2))
            d = int(rng.choice([g for g in PLAN_GROUP_SIZES if g <= len(rec)]))
            local = rng.permutation(len(rec))[: len(rec) // d * d].reshape(-1, d)
            c, plan_target = _plan_targets(data.ms, data.dim_sum, rec[local], comm, bs, eb)
            plan_out = net.plan_forward(rep.detach()[torch.from_numpy(local)],
                                        torch.tensor(c, dtype=rep.dtype),
                                        torch.ones(local.shape, dtype=torch.bool))
            loss = loss + options.plan_weight * _head_loss(plan_out,
                                                          torch.tensor(plan_target, dtype=rep.dtype),
                                                          scaler, 2)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
        net.eval()
        pred = predict_records(net, scaler, data, val_ids)
        val = mape(pred.sum(axis=1), data.ms[val_ids].sum(axis=1))
        history.append({"epoch": epoch, "train_loss": float(np.mean(losses)) if losses else float("nan"),
                        "fit_loss": fit_loss(), "val_mape_pct": val})
        if val < best[0]:
            best = (val, epoch, copy.deepcopy(net.state_dict()))
        if progress is not None:
            progress(epoch, history[-1] | {"best_val_mape_pct": best[0]})
        if epoch - best[1] >= options.patience:
            log.info("early stop at epoch %d (best %d, val MAPE %.2f%%)", epoch, best[1], best[0])
            break
    net.load_state_dict(best[2])
    net.eval()
    return TrainResult(net, scaler, fit_ids, val_ids, test_ids, held, history, best[1])


def _random_groups(rng: np.random.Generator, ids: np.ndarray, d: int) -> np.ndarray:
    """Random (P, d) groups of ``ids`` (sampled with replacement when there are fewer than d)."""
    if len(ids) >= d:
        perm = rng.permutation(ids)
        return perm[: len(perm) // d * d].reshape(-1, d)
    return rng.choice(ids, size=(1, d))
