"""``LearnedCostModel``: the trained cost network as a ``CostModel``, with a batched and an incremental API.

Per-device fwd and bwd come from the network; comm comes from the alpha-beta model fitted to the dataset's
MEASURED all-to-alls (``dataset.comm``), evaluated at the device's dim sum and the task's D and batch size. A
learned comm head could only approximate that closed form (and would have to be told D), so there is none.

Planner API (all vectorised in torch; no Python loop over tables at prediction time):
- ``device_costs(task, devices)``: the ``CostModel`` call; (len(devices), 3) ms.
- ``plan_costs(task, ranks)``: (P, T) table-wise assignments -> (P, D, 3) ms for P candidate plans at once.
- ``encode_task(task)`` -> (T, A) additive table vectors (cached per task object); a device's state is the sum
  of the vectors of its tables (``zeros(D, A)`` when empty), so after placing table t on device d, ``acc[d] +=
  enc[t]``. ``costs_from_acc(task, acc, volumes)`` turns any (..., A) states with their traffic volumes
  (``costs.step``) into (..., 3) ms; ``accumulator(task, n)`` does that bookkeeping for planners.
- ``plan_head_costs(task, ranks)``: the DreamShard plan-cost head (max over device representations); the max
  over devices of ``plan_costs`` is usually the better estimate (see the benchmark).
"""

from __future__ import annotations

import io
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from autoshard import __version__
from autoshard.costs.comm import AlphaBeta
from autoshard.costs.learned.features import TargetScaler, shard_features, task_raw_features
from autoshard.costs.learned.network import CostNet, CostNetConfig, segment_sum
from autoshard.costs.step import VOLUMES, device_comm_ms, device_volumes, shard_volumes
from autoshard.errors import AutoshardError
from autoshard.host import host_info
from autoshard.io import ARTEFACT_VERSION, atomic_write_bytes
from autoshard.shards import ShardRef
from autoshard.tables.table import FeatureNormalizer
from autoshard.tasks import Task

log = logging.getLogger(__name__)

CHECKPOINT_KIND = "autoshard.cost_model"

HARDWARE_KEYS = ("device", "cpu", "gpu", "llc_bytes")
"""Host fields (``autoshard.host.host_info``) that identify the hardware a cost refers to; hostname
and library versions are recorded but don't make a model invalid."""

SETTING_KEYS = ("optimizer", "threads", "device", "backend")
"""Measurement settings that change kernel cost (rows_cap, repeats etc. only change the measurement)."""


class LearnedCostModel:
    """The trained cost network; build with ``fit`` or ``load``."""

    name = "learned"

    def __init__(self, net: CostNet, normalizer: FeatureNormalizer, scaler: TargetScaler, comm: AlphaBeta,
                 trained_on: dict[str, Any], info: dict[str, Any] | None = None,
                 allow_other_hardware: bool = False) -> None:
        self.net = net.eval()
        self.config: CostNetConfig = net.config
        self.normalizer = normalizer
        self.scaler = scaler
        self.comm = comm
        self.trained_on = dict(trained_on)
        """host (host_info dict), batch_size, precision, settings (MeasureSettings JSON) of the training
        data."""
        self.info = dict(info or {})
        """Training options, split, metrics, history: whatever describes how the model was made."""
        self.allow_other_hardware = allow_other_hardware
        self._cache: tuple[Any, np.ndarray, torch.Tensor] | None = None

    def with_comm(self, comm: AlphaBeta) -> LearnedCostModel:
        """The same network pricing the all-to-all with ``comm``: the alpha-beta fit of the cluster planned
        (comm is that closed form, not learned, and its fit at one device count does not carry to another)."""
        return LearnedCostModel(self.net, self.normalizer, self.scaler, comm, self.trained_on,
                                {**self.info, "comm_replaced_by": comm.source}, self.allow_other_hardware)

    # -- construction ----------------------------------------------------------------------------------------
    @staticmethod
    def fit(dataset: Any, options: Any = None, progress: Any = None) -> LearnedCostModel:
        """Train on a profiling dataset (``autoshard.hardware.profiler.load_dataset``); see ``training``."""
        from autoshard.costs.comm import DEFAULT_COMM
        from autoshard.costs.learned.evaluation import evaluate
        from autoshard.costs.learned.training import TrainOptions, select_records, train

        options = options or TrainOptions()
        records, batch_size, precision = select_records(dataset.records, options.batch_size)
        comm = dataset.comm
        if comm is None:
            log.warning("the dataset has no comm_model.json; "
                        "comm uses the uncalibrated default (run profile-comm)")
            comm = DEFAULT_COMM
        result = train(dataset.pool, records, comm, batch_size, precision, options, progress)
        first = records[0]
        trained_on = {"host": dict(first.host), "batch_size": batch_size, "precision": precision.value,
                      "settings": dict(first.settings)}
        all_tables = sorted({n for r in records for n in r.tables})
        info: dict[str, Any] = {
            "options": options.to_json(),
            "num_records": len(records),
            "split": {"train_tables": sorted(set(all_tables) - set(result.held_out_tables)),
                      "held_out_tables": result.held_out_tables, "train_records": len(result.train_ids),
                      "val_records": len(result.val_ids), "test_records": len(result.test_ids)},
            "best_epoch": result.best_epoch,
            "epochs": len(result.history),
            "history": [dict(h) for h in result.history],
        }
        model = LearnedCostModel(result.net, dataset.pool.normalizer, result.scaler, comm, trained_on, info)
        test = [records[i] for i in result.test_ids]
        # scored before any refit: these are the errors on tables the scored network never saw
        model.info["metrics"] = evaluate(model, dataset.pool, test, seed=options.seed)["metrics"]
        if not options.refit:
            return model
        final = train(dataset.pool, records, comm, batch_size, precision, options, progress, hold_out=False)
        info = dict(model.info)
        info["metrics_note"] = ("metrics: of the network trained without the held-out tables; "
                                "the saved network was then refit on all records (see refit)")
        info["refit"] = {"train_tables": all_tables, "train_records": len(final.train_ids),
                         "val_records": len(final.val_ids), "best_epoch": final.best_epoch,
                         "epochs": len(final.history)}
        return LearnedCostModel(final.net, dataset.pool.normalizer, final.scaler, comm, trained_on, info)

    # -- persistence -----------------------------------------------------------------------------------------
    def to_checkpoint(self) -> dict[str, Any]:
        """Plain Python types and tensors only, so ``torch.load(weights_only=True)`` can read it."""
        return {
            "kind": CHECKPOINT_KIND,
            "version": ARTEFACT_VERSION,
            "autoshard_version": __version__,
            "architecture": self.config.to_json(),
            "state_dict": {k: v.detach().clone() for k, v in self.net.state_dict().items()},
            "normalizer": self.normalizer.to_json(),
            "target_scaler": self.scaler.to_json(),
            "comm": self.comm.to_json(),
            "trained_on": _plain(self.trained_on),
            "info": _plain(self.info),
        }

    def save(self, path: str | Path) -> None:
        buf = io.BytesIO()
        torch.save(self.to_checkpoint(), buf)
        atomic_write_bytes(path, buf.getvalue())

    @staticmethod
    def load(path: str | Path, allow_other_hardware: bool = False) -> LearnedCostModel:
        """Load a checkpoint; refuse (one line) if it was trained on other hardware, unless allowed."""
        p = Path(path)
        if not p.is_file():
            raise AutoshardError(f"{p}: no such cost model file; train one with 'autoshard train-cost'")
        try:
            ck = torch.load(p, map_location="cpu", weights_only=True)
        except Exception as e:  # noqa: BLE001 - any unpickling failure means the same thing to the user
            raise AutoshardError(f"{p}: not a readable cost model checkpoint ({type(e).__name__}); "
                                 "pass a file written by 'autoshard train-cost' or retrain it") from None
        if not isinstance(ck, dict) or ck.get("kind") != CHECKPOINT_KIND:
            raise AutoshardError(f"{p}: not an autoshard cost model; "
                                 "pass a file written by 'autoshard train-cost'")
        if ck.get("version") != ARTEFACT_VERSION:
            raise AutoshardError(f"{p}: checkpoint version {ck.get('version')!r} unsupported; retrain it")
        try:
            net = CostNet(CostNetConfig.from_json(ck["architecture"]))
            net.load_state_dict(ck["state_dict"])
            comm = ck["comm"]
            model = LearnedCostModel(
                net, FeatureNormalizer.from_json(ck["normalizer"]),
                TargetScaler.from_json(ck["target_scaler"]),
                AlphaBeta(float(comm["alpha_ms"]), float(comm["bytes_per_ms"]), str(comm.get("source", ""))),
                ck["trained_on"], ck.get("info", {}), allow_other_hardware)
        except (KeyError, RuntimeError, TypeError, ValueError) as e:
            msg = str(e).splitlines()[0][:120]
            raise AutoshardError(f"{p}: cost model checkpoint is incomplete or inconsistent ({msg}); "
                                 "retrain it") from None
        if not allow_other_hardware:
            model.check_host(host_info(str(model.trained_on.get("settings", {}).get("device", "cpu"))),
                             str(p))
        return model

    # -- compatibility ---------------------------------------------------------------------------------------
    def describe_hardware(self) -> str:
        t = self.trained_on
        host = t.get("host", {})
        hw = host.get("gpu") or host.get("cpu") or "unknown hardware"
        s = t.get("settings", {})
        return (f"{hw} ({s.get('device', 'cpu')}, {s.get('threads', '?')} thread(s), optimizer "
                f"{s.get('optimizer', '?')}), batch {t.get('batch_size')}, {t.get('precision')}")

    def check_host(self, host: dict[str, Any], where: str = "cost model") -> None:
        """Refuse a model trained on another machine (CPU/GPU model, cache size, device kind)."""
        if self.allow_other_hardware:
            return
        mine = self.trained_on.get("host", {})
        diff = [k for k in HARDWARE_KEYS if k in mine and k in host and mine[k] != host[k]]
        if diff:
            k = diff[0]
            raise AutoshardError(
                f"{where} was trained on {k}={mine[k]!r} but this machine has {host[k]!r}; "
                "profile and retrain here, or pass --allow-other-hardware to use it anyway")

    def check_compatible(self, task: Task | None = None, settings: Any = None) -> None:
        """Refuse a task (batch size, precision) or measure settings other than those trained on, unless
        allowed."""
        if self.allow_other_hardware:
            return
        t = self.trained_on
        if task is not None:
            if int(t.get("batch_size", task.batch_size)) != task.batch_size:
                raise AutoshardError(
                    f"cost model was trained at batch size {t['batch_size']} ({self.describe_hardware()}) "
                    f"but the task uses {task.batch_size}; "
                    "profile and retrain at that batch, or allow other hardware")
            if str(t.get("precision", task.precision.value)) != task.precision.value:
                raise AutoshardError(
                    f"cost model was trained on {t['precision']} tables "
                    f"but the task is {task.precision.value}; "
                    "profile and retrain at that precision, or allow other hardware")
        if settings is not None:
            want = settings.to_json() if hasattr(settings, "to_json") else dict(settings)
            have = t.get("settings", {})
            for k in SETTING_KEYS:
                if k in want and k in have and str(want[k]) != str(have[k]):
                    raise AutoshardError(
                        f"cost model was trained with {k}={have[k]!r} but {k}={want[k]!r} was asked; "
                        "retrain with those settings, or allow other hardware")

    # -- prediction ------------------------------------------------------------------------------------------
    def _task_raw(self, task: Task) -> np.ndarray:
        if self._cache is None or self._cache[0] is not task:
            raw = task_raw_features(task.tables)
            idx = np.arange(task.num_tables)
            dims = np.array([t.dim for t in task.tables])
            with torch.no_grad():
                enc = self._encode(raw, idx, dims)
            self._cache = (task, raw, enc)
        return self._cache[1]

    def _encode(self, raw: np.ndarray, table_idx: np.ndarray, dims: np.ndarray,
                row_fraction: np.ndarray | None = None,
                lookup_share: np.ndarray | None = None) -> torch.Tensor:
        x = shard_features(raw, table_idx, dims, self.normalizer, row_fraction, lookup_share)
        return self.net.encode(torch.tensor(x, dtype=torch.float32), torch.tensor(dims, dtype=torch.float32))

    def encode_task(self, task: Task) -> torch.Tensor:
        """(T, A) additive vectors of every table at its full dim (cached for the last task object)."""
        self.check_compatible(task)
        self._task_raw(task)
        assert self._cache is not None
        return self._cache[2]

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
            return self._encode(raw, table_idx, dims, frac, share)

    def encode_refs(self, task: Task, shards: Sequence[ShardRef]) -> torch.Tensor:
        """(N, A) additive vectors of ``shards``."""
        idx = np.fromiter((s.table for s in shards), dtype=np.int64, count=len(shards))
        dims = np.fromiter((s.dim for s in shards), dtype=np.int64, count=len(shards))
        frac = share = None
        if not all(s.is_whole for s in shards):
            frac = np.array([s.row_fraction(task.tables[s.table].rows) for s in shards])
            share = np.array([s.lookup_share(task.tables[s.table].rows, task.num_devices) for s in shards])
        return self.encode_shards(task, idx, dims, frac, share)

    def costs_from_acc(self, task: Task, acc: torch.Tensor, volumes: torch.Tensor) -> torch.Tensor:
        """(..., A) device states and their (..., 3) traffic volumes (``costs.step``) -> (..., 3) fwd, bwd,
        comm ms; an empty device (count 0) costs 0."""
        with torch.no_grad():
            _, out = self.net.device_forward(acc)
            ms = self.scaler.to_ms(out, slice(0, 2))
            comm = device_comm_ms(task, self.comm, volumes.to(ms.dtype))
            res = torch.cat([ms, comm[..., None]], dim=-1)
            return torch.where(acc[..., -2:-1] > 0.5, res, torch.zeros_like(res))

    def task_volumes(self, task: Task) -> torch.Tensor:
        """(T, 3) traffic volumes of every table at its full dim."""
        whole = [ShardRef(i, t.dim) for i, t in enumerate(task.tables)]
        return torch.from_numpy(shard_volumes(task, whole))

    def device_costs(self, task: Task, devices: Sequence[Sequence[ShardRef]]) -> np.ndarray:
        """The ``CostModel`` call: (len(devices), 3) fwd, bwd, comm ms."""
        self.check_compatible(task)
        counts = np.array([len(d) for d in devices], dtype=np.int64)
        flat = [s for d in devices for s in d]
        if not flat:
            return np.zeros((len(devices), 3))
        vec = self.encode_refs(task, flat)
        seg = torch.from_numpy(np.repeat(np.arange(len(devices)), counts))
        acc = segment_sum(vec, seg, len(devices))
        volumes = torch.from_numpy(device_volumes(task, devices))
        return self.costs_from_acc(task, acc, volumes).double().numpy()

    def accumulator(self, task: Task, num_envs: int) -> LearnedAccumulator:
        return LearnedAccumulator(self, task, num_envs)

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
        return self.costs_from_acc(task, self.plan_acc(task, ranks), volumes).double().numpy()

    def plan_head_costs(self, task: Task, ranks: np.ndarray | torch.Tensor) -> np.ndarray:
        """(P,) plan cost from DreamShard's plan head (max over the device representations)."""
        acc = self.plan_acc(task, ranks)
        with torch.no_grad():
            rep, _ = self.net.device_forward(acc)
            # the plan head was trained with the pooled-output all-to-all as its comm input
            head_comm = self.comm.device_comm_ms(acc[..., -1], task.batch_size, task.num_devices,
                                                 task.precision.bytes)
            out = self.net.plan_forward(rep, head_comm, acc[..., -2] > 0.5)
            return self.scaler.to_ms(out, 2).double().numpy()


class LearnedAccumulator:
    """A device's state is the sum of its shards' vectors (and of their traffic volumes), so adding a shard
    is one addition and every candidate of every episode is priced in one batched network call."""

    def __init__(self, model: LearnedCostModel, task: Task, num_envs: int) -> None:
        self.model, self.task = model, task
        self.enc = model.encode_task(task)
        self.acc = torch.zeros((num_envs, task.num_devices, self.enc.shape[-1]), dtype=self.enc.dtype)
        self.volumes = torch.zeros((num_envs, task.num_devices, len(VOLUMES)), dtype=torch.float64)

    def _vector(self, shard: ShardRef) -> torch.Tensor:
        if shard.is_whole and shard.dim == self.task.tables[shard.table].dim:
            return self.enc[shard.table]
        return self.model.encode_refs(self.task, [shard])[0]

    def costs_if_added(self, shard: ShardRef) -> np.ndarray:
        volumes = self.volumes + torch.from_numpy(shard_volumes(self.task, [shard])[0])
        return self.model.costs_from_acc(self.task, self.acc + self._vector(shard), volumes).double().numpy()

    def add(self, env: int, device: int, shard: ShardRef) -> None:
        self.acc[env, device] += self._vector(shard)
        self.volumes[env, device] += torch.from_numpy(shard_volumes(self.task, [shard])[0])


def _plain(obj: Any) -> Any:
    """Only the types ``torch.load(weights_only=True)`` accepts: str subclasses (e.g. torch's TorchVersion)
    become str, numpy scalars Python numbers, tuples lists."""
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if obj is None or type(obj) in (bool, int, float, str):
        return obj
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return float(obj)
    return str(obj.value) if hasattr(obj, "value") and isinstance(obj.value, str) else str(obj)
