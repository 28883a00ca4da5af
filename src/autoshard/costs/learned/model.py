"""``LearnedCostModel``: the trained cost network (or an ensemble of them) as a ``CostModel``, with a batched
and an incremental API, that knows the limits of its training data.

Per-device fwd and bwd come from the network; comm comes from the alpha-beta model fitted to the dataset's
MEASURED all-to-alls (``dataset.comm``), evaluated at the device's dim sum and the task's D and batch size. A
learned comm head could only approximate that closed form (and would have to be told D), so there is none.

Knowing its limits (models trained since the broad profiling design; older checkpoints load as an ensemble
of one with no support, i.e. exactly the model they were):

- **ensemble**: ``M`` networks (seeds and bootstraps of the records, ``TrainOptions.ensemble``). A device's
  cost is the MEAN of the members' millisecond predictions (``device_costs``) and its SPREAD their standard
  deviation (``device_costs_spread``).
- **support** (``support.Support``): the trained range of every shard feature (dim, rows, pooling), of tables
  per device, batch size and precision. ``out_of_support(task, devices)`` names the devices outside it and
  why.
- **fallback**: an ``AnalyticalCostModel`` calibrated on the same records (``fit_from_dataset``). A device
  outside the support is priced by the GRADED HAND-OVER (``handover="graded"``): the networks at
  the nearest device inside the support (every shard's dim, rows and pooling, the tables per device, the batch
  and the precision moved to the nearest trained value; ``Support.nearest*``) times the fallback's ratio
  cost(device) / cost(that device), per head. Just outside, that is the network's own price; far outside, the
  fallback's scaling anchored at the network's edge. Measured: on held-out devices just outside (pooling 230
  > 200) the bare fallback was 64% off where the network was 10% (docs/benchmarks.md, stop 17).
  ``handover="fallback"`` prices them by the bare fallback instead. The default, ``"auto"``, takes the graded
  hand-over when the networks' held-out fwd+bwd error (train-cost's split) is at most the fallback's relative
  error on its records, else the bare fallback: graded builds on the networks' price at the edge, which is
  only worth more than the calibrated roofline where the networks beat it (a 60-record quickstart model,
  21-27% held out against the roofline's 12-13%, priced 9-table devices 42% high by the graded hand-over,
  15% low by the bare fallback; the shipped default, 19.8% against 68%, is the other way: stop 17 in
  docs/benchmarks.md). The spread of a graded device: the networks' spread times the ratio, with the
  fallback's relative error on its records times the part the ratio added (in quadrature).
  ``describe_fallback`` says which devices were priced so and why.
- **risk_k**: the k whose ``mean + k x spread`` covered ~84% of held-out device measurements
  (``evaluation.select_risk_k``); risk-aware planners price devices at that (``planners.pricing``).
- **split shards unseen on adapted hardware** (``unverified_split_kinds``, ``splits``): a model adapted to
  another machine records which kinds of split shard (column, row) its records of that machine held; a
  device holding a kind it never saw there gets a spread of at least ``UNVERIFIED_SPLIT_REL`` x its cost,
  which its ensemble's members, all continuing from the old machine's weights, cannot show.

Planner API (all vectorised in torch; no Python loop over tables at prediction time):
- ``device_costs(task, devices)``: the ``CostModel`` call; (len(devices), 3) ms.
- ``plan_costs(task, ranks)``: (P, T) table-wise assignments -> (P, D, 3) ms for P candidate plans at once.
- ``encode_task(task)`` -> (T, A) additive table vectors (cached per task object; the members' vectors side by
  side); a device's state is the sum of the vectors of its tables (``zeros(D, A)`` when empty), so after
  placing table t on device d, ``acc[d] += enc[t]``. ``costs_from_acc(task, acc, volumes)`` turns any (..., A)
  states with their traffic volumes (``costs.step``) into (..., 3) ms (the networks' mean, no fallback);
  ``accumulator(task, n)`` does that bookkeeping for planners, fallback included.
- ``plan_head_costs(task, ranks)``: the DreamShard plan-cost head (max over device representations) of the
  first member; the max over devices of ``plan_costs`` is usually the better estimate (see the benchmark),
  and a ``context`` network's head is no estimate at all (it trained on groups of records of different
  batch sizes; ``evaluation.evaluate`` does not score it).

Next to it: ``fit`` (training a model from a dataset), ``checkpoint`` (save/load), ``compat`` (the hardware,
task and settings checks) and ``accumulator`` (``LearnedAccumulator``, the incremental API).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from autoshard.costs.analytical import AnalyticalCostModel
from autoshard.costs.comm import AlphaBeta
from autoshard.costs.learned.accumulator import LearnedAccumulator
from autoshard.costs.learned.checkpoint import checkpoint_of, load_checkpoint, save_checkpoint
from autoshard.costs.learned.compat import (
    check_trained_compatible,
    check_trained_host,
    describe_trained_hardware,
)
from autoshard.costs.learned.features import (
    TargetScaler,
    context_features,
    model_space_to_ms,
    shard_features,
    task_raw_features,
)
from autoshard.costs.learned.fit import fit_model
from autoshard.costs.learned.network import CostNet, CostNetConfig, StackedDeviceNets, gather_sum
from autoshard.costs.learned.prediction import Prediction
from autoshard.costs.learned.splits import (
    SPLIT_KINDS,
    UNTRAINED_ROW_MOVE_MARGIN,
    UNVERIFIED_SPLIT_REL,
    shard_split_kinds,
)
from autoshard.costs.learned.support import (
    STATS,
    Support,
    device_stats,
    gather_stats,
    plan_stats,
    shard_stats,
    shard_values,
)
from autoshard.costs.learned.swaps import DeviceStates, PlanSwaps
from autoshard.costs.step import device_comm_ms, gather_volumes, shard_volumes
from autoshard.errors import AutoshardError
from autoshard.plan import Plan
from autoshard.shards import ShardRef
from autoshard.tables.table import FeatureNormalizer
from autoshard.tasks import Task

HANDOVERS = ("auto", "graded", "fallback", "networks")
"""How a model with a support and a fallback prices the devices outside the support (``handover``): 'auto'
(the default: graded or fallback, whichever the model's own errors favour), 'graded', 'fallback' (the bare
calibrated fallback) or 'networks' (the networks extrapolating on their own; for comparison:
benchmarks/handover.py)."""


class LearnedCostModel:
    """The trained cost network(s); build with ``fit`` or ``load``."""

    name = "learned"
    def __init__(self, net: CostNet, normalizer: FeatureNormalizer, scaler: TargetScaler, comm: AlphaBeta,
                 trained_on: dict[str, Any], info: dict[str, Any] | None = None,
                 allow_other_hardware: bool = False, *,
                 extra_members: Sequence[tuple[CostNet, TargetScaler]] = (), support: Support | None = None,
                 fallback: AnalyticalCostModel | None = None, fallback_rel_std: float = 0.0,
                 risk_k: float = 0.0, handover: str = "auto") -> None:
        self.net = net.eval()
        self.config: CostNetConfig = net.config
        self.normalizer = normalizer
        self.scaler = scaler
        self.comm = comm
        self.trained_on = dict(trained_on)
        """host (host_info dict), batch_size, precision, settings (MeasureSettings JSON) of the training
        data (a ``context`` network trained on several: batch_size/precision None, and batch_sizes
        [min, max], precisions)."""
        self.info = dict(info or {})
        """Training options, split, metrics, history: whatever describes how the model was made."""
        self.allow_other_hardware = allow_other_hardware
        self.members: list[tuple[CostNet, TargetScaler]] = [(self.net, scaler)]
        for m_net, m_scaler in extra_members:
            if m_net.config != self.config:
                raise AutoshardError("ensemble members differ in architecture; retrain the ensemble")
            self.members.append((m_net.eval(), m_scaler))
        self.support = support
        """Trained ranges (None: a model from before supports were recorded; everything is in support)."""
        self.fallback = None if fallback is None else replace(fallback, comm=comm)
        """The calibrated analytical model that prices devices outside the support."""
        self.fallback_rel_std = float(fallback_rel_std)
        """The fallback's relative error on the training records: its devices' spread is this x their cost."""
        self.risk_k = float(risk_k)
        """Risk factor chosen on held-out data (``evaluation.select_risk_k``); planners price devices at
        mean + risk_k x spread (``planners.pricing``)."""
        if handover not in HANDOVERS:
            raise AutoshardError(f"unknown hand-over {handover!r}; use one of {', '.join(HANDOVERS)}")
        self.handover_setting = handover
        """How devices outside the support are to be priced (``HANDOVERS``; ``handover`` resolves 'auto')."""
        self._cache: dict[str, Any] | None = None
        self._stacked: tuple[StackedDeviceNets, torch.Tensor, torch.Tensor] | None = None
        """The members' device path stacked for batched pricing (built on first use)."""

    @property
    def ensemble_size(self) -> int:
        return len(self.members)

    @property
    def prices_fallback(self) -> bool:
        """Whether devices outside the support are priced by the fallback (models with both recorded)."""
        return self.support is not None and self.fallback is not None

    @property
    def has_spread(self) -> bool:
        """Whether ``device_costs_spread`` can be non-zero (an ensemble, a fallback with an error, or split
        shards it has not seen on the machine it was adapted to)."""
        return (self.ensemble_size > 1 or (self.prices_fallback and self.fallback_rel_std > 0)
                or bool(self.unverified_split_kinds))

    @property
    def row_move_margin(self) -> float:
        """Least predicted step gain for which a planner turns a table into row-wise shards
        (``planners.sharding_moves.improve``): 0 for a model pre-trained on profiles holding row shards
        (``info["split_kinds_trained"]``, written by ``fit``), else ``splits.UNTRAINED_ROW_MOVE_MARGIN``.
        Only the pre-training counts: a fine-tuning's few row-wise devices (the refresh loop's) do not teach
        the networks row shards across tables."""
        return 0.0 if "row" in self.info.get("split_kinds_trained", ()) else UNTRAINED_ROW_MOVE_MARGIN

    @property
    def unverified_split_kinds(self) -> frozenset[str]:
        """The ``SPLIT_KINDS`` this model has not seen on the machine it was adapted to
        (``info["split_kinds_seen"]``, written by ``fine_tune`` when it adapts a model); none for a model
        that was not adapted to another machine."""
        seen = self.info.get("split_kinds_seen")
        if seen is None:
            return frozenset()
        return frozenset(SPLIT_KINDS) - frozenset(seen)

    def unverified_devices(self, task: Task, devices: Sequence[Sequence[ShardRef]]) -> np.ndarray | None:
        """(len(devices),) whether each device holds a split shard of an ``unverified_split_kinds`` kind (None
        when the model has none)."""
        per = self.unverified_shards(task, [s for d in devices for s in d])
        if per is None:
            return None
        owner = np.repeat(np.arange(len(devices)), [len(d) for d in devices])
        return np.bincount(owner, weights=per, minlength=len(devices)) > 0

    def unverified_shards(self, task: Task, shards: Sequence[ShardRef]) -> np.ndarray | None:
        """(len(shards),) whether each shard is a split of an ``unverified_split_kinds`` kind (None when the
        model has none)."""
        kinds = self.unverified_split_kinds
        if not kinds:
            return None
        return np.array([any(k in kinds for k in shard_split_kinds(task, s)) for s in shards], dtype=bool)

    @property
    def _plain(self) -> bool:
        """One network, no support: the original single-network arithmetic, bit for bit."""
        return self.ensemble_size == 1 and not self.prices_fallback

    def _replace(self, **changes: Any) -> LearnedCostModel:
        kw: dict[str, Any] = {
            "extra_members": self.members[1:], "support": self.support, "fallback": self.fallback,
            "fallback_rel_std": self.fallback_rel_std, "risk_k": self.risk_k,
            "handover": self.handover_setting}
        kw.update({k: v for k, v in changes.items() if k in kw})
        comm = changes.get("comm", self.comm)
        return LearnedCostModel(self.net, self.normalizer, self.scaler, comm, self.trained_on,
                                changes.get("info", self.info), self.allow_other_hardware, **kw)

    def with_comm(self, comm: AlphaBeta) -> LearnedCostModel:
        """The same network pricing the all-to-all with ``comm``: the alpha-beta fit of the cluster planned
        (comm is that closed form, not learned, and its fit at one device count does not carry to another)."""
        return self._replace(comm=comm, info={**self.info, "comm_replaced_by": comm.source})

    def with_risk_k(self, risk_k: float) -> LearnedCostModel:
        """The same model with another default risk factor (``risk_k``)."""
        return self._replace(risk_k=float(risk_k))

    def with_handover(self, handover: str) -> LearnedCostModel:
        """The same model pricing devices outside its support by ``handover`` (``HANDOVERS``)."""
        return self._replace(handover=handover)

    def with_fallback(self, fallback: AnalyticalCostModel, rel_std: float | None = None) -> LearnedCostModel:
        """The same model handing the devices outside its support to ``fallback`` (e.g. an analytical model
        calibrated on the target machine's own timings, ``AnalyticalCostModel.fit``), its spread ``rel_std`` x
        the devices' cost (default: the current fallback's relative error). Its comm is the model's."""
        if self.support is None:
            raise AutoshardError("this model records no training support, so no device is handed to a "
                                 "fallback; retrain it with a current autoshard")
        rel = self.fallback_rel_std if rel_std is None else float(rel_std)
        if rel < 0:
            raise AutoshardError(f"the fallback's relative error must be >= 0, got {rel}")
        return self._replace(fallback=fallback, fallback_rel_std=rel)

    def with_host_scale(self, fwd: float, bwd: float, calibration: dict[str, Any]) -> LearnedCostModel:
        """The same model with its forward and backward predictions (every member, the spread and the
        fallback alike) multiplied by ``fwd`` and ``bwd``: a host calibration (``hardware.host_calibration``)
        for a machine of the kind the model was trained on that times the same shards faster or slower. The
        factors are relative to the model as trained: a model already calibrated is re-scaled from its
        trained level, not compounded. ``calibration`` (how the factors were measured) is kept in ``info``.
        The plan head (a diagnostic no planner uses) is left as trained."""
        before = self.info.get("host_calibration") or {}
        rel_fwd = float(fwd) / float(before.get("fwd", 1.0))
        rel_bwd = float(bwd) / float(before.get("bwd", 1.0))
        members = [(net, scaler.scaled(rel_fwd, rel_bwd)) for net, scaler in self.members]
        info = {**self.info, "host_calibration": {**calibration, "fwd": float(fwd), "bwd": float(bwd)}}
        return LearnedCostModel(
            self.net, self.normalizer, members[0][1], self.comm, self.trained_on, info,
            self.allow_other_hardware, extra_members=members[1:], support=self.support,
            fallback=None if self.fallback is None else self.fallback.scaled(rel_fwd, rel_bwd),
            fallback_rel_std=self.fallback_rel_std, risk_k=self.risk_k, handover=self.handover_setting)

    @property
    def handover(self) -> str:
        """The hand-over in use: ``handover_setting``, with 'auto' resolved (the module docstring): 'graded'
        when the networks' held-out fwd+bwd MAPE is at most the fallback's relative error (or either is not
        recorded), else 'fallback'."""
        if self.handover_setting != "auto":
            return self.handover_setting
        held = (self.info.get("metrics") or {}).get("fwd+bwd") or {}
        mape = held.get("mape_pct")
        if mape is None or not self.fallback_rel_std:
            return "graded"
        return "graded" if float(mape) / 100.0 <= self.fallback_rel_std else "fallback"

    @property
    def _graded(self) -> bool:
        """Whether shards are encoded at their nearest values inside the support (the graded hand-over)."""
        return self.prices_fallback and self.handover == "graded"

    def member_models(self) -> list[LearnedCostModel]:
        """Each ensemble member alone, as a single-network model (no support, no fallback)."""
        return [LearnedCostModel(net, self.normalizer, scaler, self.comm, self.trained_on, self.info,
                                 self.allow_other_hardware) for net, scaler in self.members]

    # -- construction ----------------------------------------------------------------------------------------
    @staticmethod
    def fit(dataset: Any, options: Any = None, progress: Any = None) -> LearnedCostModel:
        """Train on a profiling dataset (``autoshard.hardware.profiler.load_dataset``); see
        ``fit.fit_model`` and ``training``."""
        return fit_model(LearnedCostModel, dataset, options, progress)

    # -- persistence (``checkpoint``) ------------------------------------------------------------------------
    def to_checkpoint(self) -> dict[str, Any]:
        """Plain Python types and tensors only, so ``torch.load(weights_only=True)`` can read it."""
        return checkpoint_of(self)

    def save(self, path: str | Path) -> None:
        save_checkpoint(self, path)

    @staticmethod
    def load(path: str | Path, allow_other_hardware: bool = False) -> LearnedCostModel:
        """Load a checkpoint; refuse (one line) if it was trained on other hardware, unless allowed."""
        return load_checkpoint(path, LearnedCostModel, allow_other_hardware)

    # -- compatibility (``compat``) --------------------------------------------------------------------------
    def describe_hardware(self) -> str:
        return describe_trained_hardware(self.trained_on, self.ensemble_size)

    def check_host(self, host: dict[str, Any], where: str = "cost model") -> None:
        """Refuse a model trained on another machine (CPU/GPU model, cache size, device kind)."""
        if self.allow_other_hardware:
            return
        check_trained_host(self.trained_on, host, where)

    def check_compatible(self, task: Task | None = None, settings: Any = None) -> None:
        """Refuse a task (batch size, precision) or measure settings other than those trained on, unless
        allowed. A ``context`` network takes any batch size and precision: those outside its support are
        priced by its fallback (``out_of_support``)."""
        if self.allow_other_hardware:
            return
        check_trained_compatible(self.trained_on, self.config.context, self.ensemble_size, task, settings)

    # -- support ---------------------------------------------------------------------------------------------
    def out_of_support(self, task: Task, devices: Sequence[Sequence[ShardRef]]) -> list[tuple[int, str]]:
        """(device index, reason) of every device outside the training support ([] without a support)."""
        if self.support is None:
            return []
        stats = device_stats(task, devices, self.support)
        outside = self.support.outside(task, stats)
        if not outside.any():
            return []
        reasons = self.support.reasons(task, stats)
        return [(int(i), reasons[int(i)]) for i in np.flatnonzero(outside)]

    def describe_fallback(self, task: Task, devices: Sequence[Sequence[ShardRef]]) -> str:
        """One line naming the devices where the model guesses: those the analytical fallback priced and why,
        and those holding split shards it has not seen on the machine it was adapted to ('' when none)."""
        parts = []
        out = self.out_of_support(task, devices) if self.prices_fallback else []
        if out:
            shown = "; ".join(f"device {i}: {why}" for i, why in out[:8])
            more = f"; and {len(out) - 8} more" if len(out) > 8 else ""
            how = {"graded": "the network at the nearest device inside x the calibrated analytical model's "
                             "ratio",
                   "fallback": "the calibrated analytical fallback",
                   "networks": "the networks extrapolating"}[self.handover]
            parts.append(f"{len(out)} of {len(devices)} devices outside the learned model's training "
                         f"support, priced by {how} ({shown}{more})")
        unverified = self.unverified_devices(task, devices)
        if unverified is not None and unverified.any():
            ids = ", ".join(str(int(i)) for i in np.flatnonzero(unverified))
            kinds = " or ".join(sorted(self.unverified_split_kinds))
            parts.append(f"device(s) {ids} hold {kinds} shards, which this model has not seen on the machine "
                         f"it was adapted to: priced with a spread of at least {UNVERIFIED_SPLIT_REL:.0%} of "
                         "their cost (fine-tune it on such devices to lift that)")
        return "; ".join(parts)

    @property
    def timed_rows_cap(self) -> float | None:
        """The most rows a table kept when the training records were timed (their ``rows_cap``; None: no
        cap): what a ``density`` network's features assume a table is timed with."""
        cap = self.trained_on.get("settings", {}).get("rows_cap")
        return None if cap is None else float(cap)

    # -- prediction ------------------------------------------------------------------------------------------
    def _device_context(self, task: Task) -> tuple[float, float] | None:
        """(batch size, element bytes) the networks are given for ``task``'s devices (None: no context)."""
        if not self.config.context:
            return None
        if self._graded:
            assert self.support is not None
            return self.support.nearest_context(task)
        return float(task.batch_size), float(task.precision.bytes)

    def _task_cache(self, task: Task) -> dict[str, Any]:
        if self._cache is None or self._cache["task"] is not task:
            raw = task_raw_features(task.tables)
            idx = np.arange(task.num_tables)
            dims = np.array([t.dim for t in task.tables])
            with torch.no_grad():
                enc = self._encode(task, raw, idx, dims)
            self._cache = {"task": task, "raw": raw, "enc": enc, "stats": None}
        return self._cache

    def _task_raw(self, task: Task) -> np.ndarray:
        return self._task_cache(task)["raw"]

    def _table_stats(self, task: Task) -> np.ndarray:
        """(T, len(STATS)) support statistics of every table at its full dim (cached with the task)."""
        cache = self._task_cache(task)
        if cache["stats"] is None:
            whole = [ShardRef(i, t.dim) for i, t in enumerate(task.tables)]
            cache["stats"] = shard_stats(shard_values(task, whole, self.support))
        return cache["stats"]

    def _encode(self, task: Task, raw: np.ndarray, table_idx: np.ndarray, dims: np.ndarray,
                row_fraction: np.ndarray | None = None,
                lookup_share: np.ndarray | None = None) -> torch.Tensor:
        adjust = self.support.nearest_features if self._graded and self.support is not None else None
        device = self._device_context(task)
        density_at = (*device, self.timed_rows_cap) if device is not None and self.config.density else None
        x = shard_features(raw, table_idx, dims, self.normalizer, row_fraction, lookup_share,
                           None if device is None else context_features(*device), adjust,
                           device if self.config.reuse else None, density_at)
        feats = torch.tensor(x, dtype=torch.float32)
        if adjust is not None and self.support is not None:
            dims = self.support.nearest("dim", np.asarray(dims, dtype=np.float64))
        d = torch.tensor(dims, dtype=torch.float32)
        if self.ensemble_size == 1:
            return self.net.encode(feats, d)
        return torch.cat([net.encode(feats, d) for net, _ in self.members], dim=1)

    def encode_task(self, task: Task) -> torch.Tensor:
        """(T, A) additive vectors of every table at its full dim (cached for the last task object)."""
        self.check_compatible(task)
        return self._task_cache(task)["enc"]

    def encode_shards(self, task: Task, table_idx: Sequence[int] | np.ndarray,
                      dims: Sequence[int] | np.ndarray,
                      row_fraction: Sequence[float] | np.ndarray | None = None,
                      lookup_share: Sequence[float] | np.ndarray | None = None) -> torch.Tensor:
        """(N, A) additive vectors of arbitrary shards (column shards at their dim, row shards at their share
        of the rows, replicas at their share of the lookups)."""
        self.check_compatible(task)
        table_idx = np.asarray(table_idx, dtype=np.int64)
        dims = np.asarray(dims, dtype=np.int64)
        if len(table_idx) and (table_idx.min() < 0 or table_idx.max() >= task.num_tables):
            raise AutoshardError(f"shard table index out of range 0..{task.num_tables - 1}")
        raw = self._task_raw(task)
        bad = np.flatnonzero((dims <= 0) | (dims > raw[table_idx, 0]))
        if len(bad):
            t = task.tables[int(table_idx[bad[0]])]
            raise AutoshardError(f"shard of table {t.name} has dim {int(dims[bad[0]])}; use 1..{t.dim}")
        frac = None if row_fraction is None else np.asarray(row_fraction, dtype=np.float64)
        share = None if lookup_share is None else np.asarray(lookup_share, dtype=np.float64)
        with torch.no_grad():
            return self._encode(task, raw, table_idx, dims, frac, share)

    def encode_refs(self, task: Task, shards: Sequence[ShardRef]) -> torch.Tensor:
        """(N, A) additive vectors of ``shards``. Whole tables at their full dim are taken from the task's
        cached encodings (``encode_task``), the rest encoded: a planner prices plan after plan of mostly the
        same whole tables (856 tables: the encoder was 0.47 of rl's 0.68 s of sharding moves)."""
        idx = np.fromiter((s.table for s in shards), dtype=np.int64, count=len(shards))
        dims = np.fromiter((s.dim for s in shards), dtype=np.int64, count=len(shards))
        whole = np.fromiter((s.is_whole for s in shards), dtype=bool, count=len(shards))
        if not len(idx) or idx.min() < 0 or idx.max() >= task.num_tables:  # encode_shards says what is wrong
            return self._encode_refs(task, shards, idx, dims, whole)
        cached = whole & (dims == self._task_raw(task)[idx, 0])  # raw feature 0: the table's dim
        if not cached.any():
            return self._encode_refs(task, shards, idx, dims, whole)
        out = self.encode_task(task)[torch.from_numpy(idx)]
        rest = np.flatnonzero(~cached)
        if len(rest):
            out[torch.from_numpy(rest)] = self._encode_refs(task, [shards[i] for i in rest], idx[rest],
                                                            dims[rest], whole[rest])
        return out

    def _encode_refs(self, task: Task, shards: Sequence[ShardRef], idx: np.ndarray, dims: np.ndarray,
                     whole: np.ndarray) -> torch.Tensor:
        frac = share = None
        if not whole.all():
            frac = np.array([s.row_fraction(task.tables[s.table].rows) for s in shards])
            share = np.array([task.lookup_share(s) for s in shards])
        return self.encode_shards(task, idx, dims, frac, share)

    def _member_ms(self, acc: torch.Tensor) -> torch.Tensor:
        """(M, ..., 2) every member's fwd, bwd ms of (..., A) device states, all members in one batched
        call (``StackedDeviceNets``)."""
        if self._stacked is None:
            nets, scalers = zip(*self.members)
            pairs = [s.tensors(slice(0, 2)) for s in scalers]
            self._stacked = (StackedDeviceNets(list(nets)), torch.stack([p[0] for p in pairs]),
                             torch.stack([p[1] for p in pairs]))
        stacked, loc, scale = self._stacked
        out = stacked.forward(acc)
        shape = (len(loc),) + (1,) * (out.dim() - 2) + (2,)
        return model_space_to_ms(self.scaler.target, out, loc.view(shape), scale.view(shape))

    def costs_from_acc(self, task: Task, acc: torch.Tensor, volumes: torch.Tensor) -> torch.Tensor:
        """(..., A) device states and their (..., 3) traffic volumes (``costs.step``) -> (..., 3) fwd, bwd,
        comm ms (the networks' mean; no fallback); an empty device (count 0) costs 0."""
        with torch.no_grad():
            if self.ensemble_size == 1:
                _, out = self.net.device_forward(acc)
                ms = self.scaler.to_ms(out, slice(0, 2))
            else:
                ms = self._member_ms(acc).mean(dim=0)
            comm = device_comm_ms(task, self.comm, volumes.to(ms.dtype))
            res = torch.cat([ms, comm[..., None]], dim=-1)
            return torch.where(acc[..., -2:-1] > 0.5, res, torch.zeros_like(res))

    def _price(self, task: Task, acc: torch.Tensor, volumes: torch.Tensor,
               stats: np.ndarray | None, unverified: np.ndarray | None = None) -> Prediction:
        """Mean and spread of (..., A) device states with their volumes and (with a fallback) support
        statistics (..., len(STATS)); ``unverified`` (...): the devices holding split shards the model has not
        seen on its machine (``unverified_devices``), whose spread is at least ``UNVERIFIED_SPLIT_REL`` x
        their cost."""
        lead = acc.shape[:-1]
        used = (acc[..., -2] > 0.5).numpy()
        outside = np.zeros(used.shape, dtype=bool)
        if stats is not None and self.prices_fallback:
            assert self.support is not None
            outside = self.support.outside(task, stats) & used
        sel = np.nonzero(outside)
        states, vols = acc.reshape(-1, acc.shape[-1]), volumes.reshape(-1, volumes.shape[-1])
        n = len(states)
        count_in = scale = near = None
        if outside.any():
            assert stats is not None
            count_in, scale, near = self._nearest_inside(acc, stats, sel)
        if near is not None:
            # the graded hand-over's nearest states inside go in the same network call as the devices (a
            # planner's step: 128 candidates and 1-2 such states; a second call cost as much as 40 rows)
            rows = tuple(torch.from_numpy(i) for i in sel)
            states, vols = torch.cat([states, near]), torch.cat([vols, volumes[rows]])
        with torch.no_grad():
            members = self._member_ms(states).double()
        moments = self._members_moments(task, members, vols)
        mean, std, total_std = (x[:n].reshape(lead + x.shape[1:]) for x in moments)
        if outside.any():
            assert stats is not None and count_in is not None and scale is not None
            near_price = None if near is None else tuple(x[n:] for x in moments)
            mean, std, total_std = self._price_outside(stats, sel, (mean, std, total_std), count_in, scale,
                                                       near_price)
        if unverified is not None and unverified.any():
            floor = UNVERIFIED_SPLIT_REL * mean[..., :2]
            std = np.array(std)
            std[..., :2] = np.where(unverified[..., None], np.maximum(std[..., :2], floor), std[..., :2])
            total_std = np.where(unverified, np.maximum(total_std, floor.sum(axis=-1)), total_std)
        if not used.all():  # an empty device costs 0 (a planner's candidates all hold the shard priced)
            mean = np.where(used[..., None], mean, 0.0)
            std = np.where(used[..., None], std, 0.0)
            total_std = np.where(used, total_std, 0.0)
        return Prediction(mean, std, total_std, outside)

    def _members_moments(self, task: Task, members: torch.Tensor,
                         volumes: torch.Tensor) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(mean (..., 3) with comm, std (..., 3), std of fwd + bwd (...)) of the members' (M, ..., 2) ms."""
        # fwd, bwd and their sum side by side, so one mean and one std give every moment; in numpy (a
        # planner's step prices 128 candidates: torch's std over the members took 65 us of it, numpy's 15),
        # the std written out as ``np.std(ddof=1)`` computes it (the same operations, half its call
        # overhead: 38 -> 21 us for 5 x 128 devices, AMD EPYC)
        ms = members.numpy()
        m = len(ms)
        both = np.empty(ms.shape[:-1] + (3,))
        both[..., :2] = ms
        np.add(ms[..., 0], ms[..., 1], out=both[..., 2])
        mean = np.add.reduce(both, axis=0) / m  # ``both.mean(axis=0)``'s operations, less its call overhead
        if m > 1:
            dev = both - mean
            dev *= dev
            std = np.sqrt(dev.sum(axis=0) / (m - 1))
            total_std = std[..., 2].copy()
            std[..., 2] = 0.0  # comm's spread: it comes from the measured fit, not the members
        else:
            std, total_std = np.zeros_like(mean), np.zeros(mean.shape[:-1])
        mean[..., 2] = device_comm_ms(task, self.comm, volumes.double().numpy())
        return mean, std, total_std

    def _nearest_inside(self, acc: torch.Tensor, stats: np.ndarray, sel: tuple[np.ndarray, ...]
                        ) -> tuple[np.ndarray, np.ndarray, torch.Tensor | None]:
        """For the devices ``sel`` outside the support: their tables per device moved to the nearest trained
        count (K,), the factor that moves them (K,), and their states so scaled for the graded hand-over
        (None when it is not the graded one or no count moves). ``acc`` holds shards already encoded at
        their nearest values inside (``_encode``), so only the tables per device are left to move in, by
        scaling the additive state."""
        assert self.support is not None
        count = stats[sel + (STATS.index("count"),)]
        count_in = self.support.nearest_count(count)
        scale = np.where(count > 0, count_in / np.maximum(count, 1.0), 1.0)
        if self.handover != "graded" or not (scale != 1.0).any():
            return count_in, scale, None
        rows = tuple(torch.from_numpy(i) for i in sel)
        return count_in, scale, acc[rows] * torch.from_numpy(scale).to(acc.dtype)[:, None]

    def _price_outside(self, stats: np.ndarray, sel: tuple[np.ndarray, ...],
                       inside_price: tuple[np.ndarray, np.ndarray, np.ndarray], count_in: np.ndarray,
                       scale: np.ndarray, near_price: tuple[np.ndarray, np.ndarray, np.ndarray] | None
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``inside_price`` (mean, std, total std) with the devices ``sel`` outside the support re-priced by
        the hand-over (the module docstring). ``count_in``, ``scale`` and ``near_price``: their tables per
        device inside, the factor to it, and the networks' moments at their nearest states inside
        (``_nearest_inside``; None: the states are their own)."""
        assert self.support is not None and self.fallback is not None
        handover = self.handover
        if handover == "networks":
            return inside_price
        mean, std, total_std = (np.array(x) for x in inside_price)
        # only the devices outside are re-priced (a planner's step has 1-2 of its 128 candidates there)
        out_mean, out_std = mean[sel], std[sel]  # (K, 3) copies
        rows = stats[sel]  # (K, len(STATS))
        col = {k: rows[:, STATS.index(k)] for k in ("count", "lookups", "nbytes", "lookups_in", "nbytes_in")}
        rel = self.fallback_rel_std
        if handover == "fallback":
            fwd, bwd = self.fallback.compute_ms(col["count"], col["lookups"], col["nbytes"])
            out_mean[:, 0], out_mean[:, 1] = fwd, bwd
            out_std[:, :2] = rel * out_mean[:, :2]
            mean[sel], std[sel], total_std[sel] = out_mean, out_std, rel * (fwd + bwd)
            return mean, std, total_std
        if near_price is None:
            near_mean, near_std, near_total = out_mean, out_std, total_std[sel]
        else:
            near_mean, near_std, near_total = near_price
        # the fallback's price of the devices and of their nearest states inside, in one call (of K + K)
        k = len(rows)
        counts = np.concatenate([col["count"], count_in])
        lookups = np.concatenate([col["lookups"], scale * col["lookups_in"]])
        nbytes = np.concatenate([col["nbytes"], scale * col["nbytes_in"]])
        both_fwd, both_bwd = self.fallback.compute_ms(counts, lookups, nbytes)
        both = np.stack([both_fwd, both_bwd], axis=-1)
        fwd, fwd_in, bwd, bwd_in = both_fwd[:k], both_fwd[k:], both_bwd[:k], both_bwd[k:]
        real, near = both[:k], both[k:]
        ratio = real / np.where(near > 0, near, 1.0)
        graded = near_mean[:, :2] * ratio
        added = graded - near_mean[:, :2]
        total_ratio = (fwd + bwd) / np.where(fwd_in + bwd_in > 0, fwd_in + bwd_in, 1.0)
        out_std[:, :2] = np.hypot(near_std[:, :2] * ratio, rel * added)
        out_mean[:, :2] = graded
        mean[sel], std[sel] = out_mean, out_std
        total_std[sel] = np.hypot(near_total * total_ratio, rel * added.sum(axis=-1))
        return mean, std, total_std

    def task_volumes(self, task: Task) -> torch.Tensor:
        """(T, 3) traffic volumes of every table at its full dim."""
        whole = [ShardRef(i, t.dim) for i, t in enumerate(task.tables)]
        return torch.from_numpy(shard_volumes(task, whole))

    def device_states(self, task: Task, devices: Sequence[Sequence[ShardRef]]) -> DeviceStates:
        """What the pricing of ``devices`` starts from: their additive states, traffic volumes, support
        statistics (with a fallback) and unverified flags (``DeviceStates``)."""
        n = len(devices)
        counts = np.array([len(d) for d in devices], dtype=np.int64)
        flat = [s for d in devices for s in d]
        return self.gathered_states(task, flat, np.arange(len(flat)), np.repeat(np.arange(n), counts), n)

    def gathered_states(self, task: Task, shards: Sequence[ShardRef], members: np.ndarray, owner: np.ndarray,
                        n: int) -> DeviceStates:
        """``device_states`` of ``n`` devices where device ``owner[k]`` holds ``shards[members[k]]`` (each
        device's shards in the order of ``owner``): each of ``shards`` encoded and valued once, however many
        devices hold it (a search planner's candidate plans share nearly all their shards)."""
        self.check_compatible(task)
        members = np.asarray(members, dtype=np.int64)
        owner = np.asarray(owner, dtype=np.int64)
        if len(members):
            acc = gather_sum(self.encode_refs(task, shards), members, owner, n)
        else:
            acc = torch.zeros((n, self.config.acc_width * self.ensemble_size), dtype=torch.float32)
        stats = None
        if self.prices_fallback:
            stats = gather_stats(shard_stats(shard_values(task, shards, self.support)), members, owner, n)
        unverified = self.unverified_shards(task, shards)
        if unverified is not None:
            unverified = np.bincount(owner, weights=unverified[members], minlength=n) > 0
        return DeviceStates(acc, gather_volumes(shard_volumes(task, shards), members, owner, n), stats,
                            unverified)

    def predict(self, task: Task, devices: Sequence[Sequence[ShardRef]]) -> Prediction:
        """Mean, spread and fallback of every device (``device_costs`` is its mean)."""
        n = len(devices)
        if not any(devices):
            self.check_compatible(task)
            return Prediction(np.zeros((n, 3)), np.zeros((n, 3)), np.zeros(n), np.zeros(n, dtype=bool))
        return self.predict_states(task, self.device_states(task, devices))

    def predict_states(self, task: Task, states: DeviceStates) -> Prediction:
        """``predict`` of devices given by their ``device_states``."""
        return self._price(task, states.acc, torch.from_numpy(states.volumes), states.stats,
                           states.unverified)

    def state_costs(self, task: Task, states: DeviceStates, risk: float = 0.0) -> np.ndarray:
        """(D, 3) fwd, bwd, comm ms of devices given by their ``device_states``, at mean + ``risk`` x spread:
        ``device_costs_risk`` (``device_costs`` at 0), the one place of the choice between the plain
        network's arithmetic and the ensemble's."""
        if self.has_spread and risk:
            pred = self.predict_states(task, states)
            return pred.mean + risk * pred.std
        if not self._plain:
            return self.predict_states(task, states).mean
        volumes = torch.from_numpy(states.volumes)
        return self.costs_from_acc(task, states.acc, volumes).double().numpy()

    def device_costs(self, task: Task, devices: Sequence[Sequence[ShardRef]]) -> np.ndarray:
        """The ``CostModel`` call: (len(devices), 3) fwd, bwd, comm ms (the ensemble's mean; the fallback's
        for devices outside the support)."""
        return self.device_costs_risk(task, devices, 0.0)

    def device_costs_spread(self, task: Task, devices: Sequence[Sequence[ShardRef]]) -> np.ndarray:
        """(len(devices), 3) spread (std) of fwd, bwd, comm ms: the members' std (0 for one network; comm's is
        0), the fallback's relative error x its cost for devices outside the support."""
        if not self.has_spread:
            self.check_compatible(task)
            return np.zeros((len(devices), 3))
        return self.predict(task, devices).std

    def device_costs_risk(self, task: Task, devices: Sequence[Sequence[ShardRef]],
                          risk: float) -> np.ndarray:
        """(len(devices), 3) mean + ``risk`` x spread, in one pass."""
        if not any(devices):
            self.check_compatible(task)
            return np.zeros((len(devices), 3))
        return self.state_costs(task, self.device_states(task, devices), risk)

    def device_costs_gathered(self, task: Task, shards: Sequence[ShardRef], members: np.ndarray,
                              owner: np.ndarray, n: int, risk: float = 0.0) -> np.ndarray:
        """(n, 3) ``device_costs_risk`` of the devices of ``gathered_states`` (``planners.pricing``'s
        batched plan costs)."""
        if not len(members):
            self.check_compatible(task)
            return np.zeros((n, 3))
        return self.state_costs(task, self.gathered_states(task, shards, members, owner, n), risk)

    def placement_swaps(self, task: Task, plan: Plan, risk: float = 0.0) -> PlanSwaps:
        """``plan``'s device states, to price plans that differ from it in one table's placement
        (``PlanSwaps``; the sharding moves' candidates), at mean + ``risk`` x spread."""
        return PlanSwaps(self, task, plan, risk)

    def accumulator(self, task: Task, num_envs: int, risk: float = 0.0) -> LearnedAccumulator:
        """Empty devices to fill shard by shard, priced at mean + ``risk`` x spread (0: the mean)."""
        return LearnedAccumulator(self, task, num_envs, risk)

    def plan_acc(self, task: Task, ranks: np.ndarray | torch.Tensor) -> torch.Tensor:
        """(P, T) device index per table (table-wise plans) -> (P, D, A) device states."""
        enc = self.encode_task(task)
        r = torch.as_tensor(np.asarray(ranks), dtype=torch.int64)
        if r.ndim == 1:
            r = r[None]
        if r.shape[-1] != task.num_tables:
            raise AutoshardError(f"ranks have {r.shape[-1]} columns "
                                 f"but the task has {task.num_tables} tables")
        if r.numel() and (int(r.min()) < 0 or int(r.max()) >= task.num_devices):
            raise AutoshardError(f"a rank is out of range 0..{task.num_devices - 1}")
        onehot = torch.nn.functional.one_hot(r, task.num_devices).to(enc.dtype)  # (P, T, D)
        return torch.einsum("ptd,ta->pda", onehot, enc)

    def plan_costs(self, task: Task, ranks: np.ndarray | torch.Tensor) -> np.ndarray:
        """(P, T) table-wise assignments -> (P, D, 3) per-device fwd, bwd, comm ms (plan cost = max of
        sums)."""
        r = torch.as_tensor(np.asarray(ranks), dtype=torch.int64)
        onehot = torch.nn.functional.one_hot(r if r.ndim == 2 else r[None], task.num_devices).double()
        volumes = torch.einsum("ptd,tv->pdv", onehot, self.task_volumes(task))
        acc = self.plan_acc(task, ranks)
        if self._plain:
            return self.costs_from_acc(task, acc, volumes).double().numpy()
        stats = plan_stats(self._table_stats(task), onehot.numpy()) if self.prices_fallback else None
        return self._price(task, acc, volumes, stats).mean

    def plan_head_costs(self, task: Task, ranks: np.ndarray | torch.Tensor) -> np.ndarray:
        """(P,) plan cost from DreamShard's plan head (max over the device representations) of the first
        member."""
        acc = self.plan_acc(task, ranks)[..., : self.config.acc_width]
        with torch.no_grad():
            rep, _ = self.net.device_forward(acc)
            # the plan head was trained with the pooled-output all-to-all as its comm input
            head_comm = self.comm.device_comm_ms(acc[..., -1], task.batch_size, task.num_devices,
                                                 task.precision.bytes)
            out = self.net.plan_forward(rep, head_comm, acc[..., -2] > 0.5)
            return self.scaler.to_ms(out, 2).double().numpy()
