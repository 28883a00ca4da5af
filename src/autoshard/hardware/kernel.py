"""Time one device's embedding work for real: FBGEMM's fused table-batched embedding bag,
forward and backward.

All the shards on a device run as ONE ``SplitTableBatchedEmbeddingBagsCodegen`` op, as TorchRec's fused kernel
runs them, with the optimizer update fused into the backward. Each shard is a table (or a column shard of it:
``ShardRef.dim`` columns) fed lookups drawn from that table's distribution (``autoshard.tables.lookups``).

Rows rule (recorded with every timing): a table keeps ``min(rows, cap)`` rows, where ``cap`` is
``settings.rows_cap``, lowered further for the whole shard when its weights would exceed
``settings.max_shard_bytes``. Lookups are folded into the kept rows with ``index mod rows`` (the rule of
``sample_lookups(rows=...)``), which keeps the hot rows hot and the reuse pattern intact; only the cold tail
shares rows, so very large tables time like slightly more cache-friendly ones. ``ShardTiming.rows`` says what
was used.

Timing protocol: ``warmup`` untimed steps, then ``repeats`` timed steps cycling through ``num_batches``
distinct seeded lookup batches; forward and backward are timed separately and the caches are flushed before
each (training runs the dense layers in between, which evict the embedding rows). Reported: the median and
the coefficient of variation (std / mean). A measurement whose CV is above ``max_cv`` is repeated, up to
``max_tries`` times, and the least noisy try is kept (``ShardTiming.tries`` says how many were made).
With a ``time_budget_ms``, slow steps get fewer steps: warm-up stops once it has spent half the budget (after
at least one step) and a try times ``ceil(budget / last warm-up step)`` steps, at least
``MIN_BUDGET_REPEATS`` and at most ``repeats``. A step of seconds is repeated 3 times rather than 10 (its run
to run spread is a few percent; the full protocol made the broad profile's largest samples take 30-90 s each),
while steps below budget / repeats keep the full protocol.

Backend (``settings.backend``): ``fbgemm`` times the TBE above; ``torch`` times
``autoshard.hardware.torch_backend.FusedEmbeddingBags``, the same fused op (same inputs, outputs and optimizer
semantics) in plain torch ops, for hosts with torch but no fbgemm_gpu. The protocol is identical; only the
fbgemm path imports fbgemm_gpu.
"""

from __future__ import annotations

import gc
import logging
import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

import numpy as np

from autoshard.errors import AutoshardError
from autoshard.hardware.lookup_cache import cached_lookups
from autoshard.shards import ShardRef
from autoshard.tables.table import Precision
from autoshard.tasks import Task

log = logging.getLogger(__name__)

CPU_FLUSH_BYTES = 64 * 2**20
"""Bytes written to evict the CPU caches between runs: twice this machine's 32 MiB L3 (AMD EPYC, from
/sys/devices/system/cpu/cpu0/cache/index3/size); server CPUs with a larger L3 can raise it via settings."""

MIN_BUDGET_REPEATS = 3
"""Fewest timed steps a try makes under a ``time_budget_ms`` (a median of 3 still drops one outlier)."""

GPU_FLUSH_MIN_BYTES = 256 * 2**20
"""Lower bound of the GPU L2 flush buffer; the buffer is max(this, 4 x L2 size) (H100 L2 = 50 MB)."""

FBGEMM_DIM_MULTIPLE = 4
"""FBGEMM's split TBE asserts every embedding dim is a multiple of 4 (construct_split_state)."""

LEARNING_RATE = 0.01
"""Learning rate of the fused optimizer (either backend); it changes no timing."""

WEIGHT_INIT_RANGE = 0.01
"""Weights are initialised uniform in +-this, writing every page (FBGEMM's CPU default leaves zeros, whose
untouched pages could alias one physical zero page and make lookups look cache-resident)."""

WEIGHT_INIT_TILE = 1_048_573
"""Values drawn for the weight init (a prime count, so no two rows of any dim start the tile at the same
place); ``fill_weights`` repeats them over every table. Drawing one uniform per weight cost 14% of a broad
profile sample (up to 2 GB of weights each); the kernels' time depends on which rows are touched, not on
their values (``benchmarks/weight_init.py`` re-timed devices both ways: see docs/benchmarks.md)."""


class Optimizer(str, Enum):
    """The sparse optimizer fused into the backward kernel."""

    EXACT_SGD = "exact_sgd"
    ROWWISE_ADAGRAD = "rowwise_adagrad"


class Statistic(str, Enum):
    """Which summary of a try's timed runs is reported as the cost."""

    MEDIAN = "median"
    """The typical step time: right on a dedicated machine."""
    MIN = "min"
    """The fastest run: on a shared machine contention only ever adds time, so the minimum is the stable
    estimate of the uncontended cost (the same shard re-timed under load varied 4-15x in median, <1.4x in
    min)."""


class DeviceKind(str, Enum):
    """Where the kernels run."""

    CPU = "cpu"
    CUDA = "cuda"


class KernelBackend(str, Enum):
    """Which implementation of the fused embedding-bag op is timed."""

    FBGEMM = "fbgemm"
    """FBGEMM's SplitTableBatchedEmbeddingBagsCodegen (what TorchRec runs); needs fbgemm_gpu."""
    TORCH = "torch"
    """``torch_backend.FusedEmbeddingBags``: plain torch ops, for hosts without fbgemm_gpu."""


@dataclass(frozen=True)
class MeasureSettings:
    """How a shard is timed. Batch size and precision come from the Task; everything else is here."""

    optimizer: Optimizer = Optimizer.EXACT_SGD
    """Optimizer fused into backward: exact SGD or exact row-wise Adagrad (TorchRec's common choices)."""
    threads: int = 1
    """torch intra-op threads (CPU). 1: with 2 threads FBGEMM's CPU backward adds ~70 ms/table (shared
    README)."""
    warmup: int = 3
    """Untimed steps before timing (first-call allocation, page faults)."""
    repeats: int = 10
    """Timed steps per try; ``statistic`` of them is reported."""
    statistic: Statistic = Statistic.MEDIAN
    """median (dedicated machine) or min (shared, noisy machine) of the timed runs."""
    rows_cap: int = 1_000_000
    """Most rows a table keeps for timing; lookups are folded mod the kept rows (see module docstring)."""
    max_shard_bytes: int = 2 * 2**30
    """Most weight bytes one shard may allocate; the rows cap is lowered for the whole shard to fit."""
    device: DeviceKind = DeviceKind.CPU
    """cpu (EmbeddingLocation.HOST) or cuda (EmbeddingLocation.DEVICE, timed with CUDA events)."""
    num_batches: int = 4
    """Distinct seeded lookup batches the timed steps cycle through."""
    lookup_seed: int = 0
    """Seed of the lookup batches (batch k uses seed lookup_seed * 1000 + k) and of the weight init."""
    max_cv: float = 0.10
    """A try whose fwd or bwd CV is above this is re-measured."""
    max_tries: int = 3
    """Most tries per measurement; the try with the lowest max(fwd_cv, bwd_cv) is kept."""
    flush_cache: bool = True
    """Evict caches before every timed fwd and bwd by writing a buffer larger than the last-level cache."""
    cpu_flush_bytes: int = CPU_FLUSH_BYTES
    """Size of the CPU flush buffer."""
    backend: KernelBackend = KernelBackend.FBGEMM
    """fbgemm (the TBE) or torch (torch_backend, no fbgemm_gpu needed); settings JSON without it is fbgemm."""
    time_budget_ms: float = 0.0
    """Timed milliseconds a try aims for: slow steps are warmed up and repeated fewer times (module
    docstring); 0 (default) runs ``warmup`` and ``repeats`` steps whatever they cost."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "optimizer", _enum(Optimizer, self.optimizer, "optimizer"))
        object.__setattr__(self, "device", _enum(DeviceKind, self.device, "device"))
        object.__setattr__(self, "statistic", _enum(Statistic, self.statistic, "statistic"))
        object.__setattr__(self, "backend", _enum(KernelBackend, self.backend, "backend"))
        for name in ("threads", "repeats", "rows_cap", "max_shard_bytes", "num_batches", "max_tries"):
            if int(getattr(self, name)) <= 0:
                raise AutoshardError(f"measure setting {name}={getattr(self, name)} "
                                     "must be a positive integer")
        if self.warmup < 0:
            raise AutoshardError(f"measure setting warmup={self.warmup} must be >= 0")
        if not self.max_cv > 0:
            raise AutoshardError(f"measure setting max_cv={self.max_cv} must be positive")
        if not 0 <= self.time_budget_ms < math.inf:
            raise AutoshardError(f"measure setting time_budget_ms={self.time_budget_ms} must be a finite "
                                 "number >= 0")

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        if not self.time_budget_ms:  # off: the settings JSON of profiles made before the option
            del d["time_budget_ms"]
        d["optimizer"] = self.optimizer.value
        d["device"] = self.device.value
        d["statistic"] = self.statistic.value
        d["backend"] = self.backend.value
        return d

    @staticmethod
    def from_json(d: dict[str, Any]) -> MeasureSettings:
        known = set(MeasureSettings.__dataclass_fields__)
        return MeasureSettings(**{k: v for k, v in d.items() if k in known})


def _enum(cls: type[Enum], value: Any, what: str) -> Any:
    try:
        return cls(value.value if isinstance(value, Enum) else value)
    except ValueError:
        raise AutoshardError(f"{what} {value!r} unknown; use one of {[e.value for e in cls]}") from None


@dataclass(frozen=True)
class ShardTiming:
    """The measured cost of one device's fused shard, in milliseconds."""

    fwd_ms: float
    """Forward time (the settings' statistic of the kept try: median or min)."""
    bwd_ms: float
    """Backward time (gradient + fused optimizer update), same statistic."""
    fwd_cv: float
    """Coefficient of variation (std / mean) of the kept try's forward times."""
    bwd_cv: float
    tries: int = 1
    """How many tries were made (more than 1 when a try was noisier than max_cv)."""
    rows: tuple[int, ...] = ()
    """Rows each shard actually had (after the rows rule), in the order of the shards."""
    fwd_runs_ms: tuple[float, ...] = field(default=(), repr=False)
    """Every timed forward of the kept try."""
    bwd_runs_ms: tuple[float, ...] = field(default=(), repr=False)


def effective_rows(task: Task, shards: Sequence[ShardRef], settings: MeasureSettings) -> list[int]:
    """Rows each shard keeps for timing: min(rows, cap), the cap lowered so the shard fits max_shard_bytes."""
    elem = task.precision.bytes
    cap = settings.rows_cap
    dim_sum = sum(s.dim for s in shards)
    rows = [s.num_rows(task.tables[s.table].rows) for s in shards]
    full = sum(min(r, cap) * s.dim * elem for s, r in zip(shards, rows))
    if full > settings.max_shard_bytes:
        cap = max(1, int(settings.max_shard_bytes // (dim_sum * elem)))
        log.info("shard of %d tables too large to allocate; rows capped at %d", len(shards), cap)
    return [min(r, cap) for r in rows]


def _check_shards(task: Task, shards: Sequence[ShardRef]) -> None:
    if not shards:
        raise AutoshardError("cannot time an empty shard; an empty device costs 0")
    for s in shards:
        if not 0 <= s.table < task.num_tables:
            raise AutoshardError(f"shard table index {s.table} out of range 0..{task.num_tables - 1}")
        dim, rows = task.tables[s.table].dim, task.tables[s.table].rows
        if not 0 <= s.row_start < (rows if s.row_end is None else s.row_end) <= rows:
            raise AutoshardError(f"shard of table {task.tables[s.table].name} has rows [{s.row_start}, "
                                 f"{s.row_end}); use a range within 0..{rows}")
        if not 0 < s.dim <= dim:
            raise AutoshardError(f"shard of table {task.tables[s.table].name} has dim {s.dim}; use 1..{dim}")
        if s.dim % FBGEMM_DIM_MULTIPLE:
            raise AutoshardError(f"table {task.tables[s.table].name}: dim {s.dim} is not a multiple of "
                                 f"{FBGEMM_DIM_MULTIPLE}, which FBGEMM's fused kernels require; "
                                 "round the dim")


def _fused_lookups(task: Task, shards: Sequence[ShardRef], rows: Sequence[int],
                   seed: int) -> tuple[np.ndarray, np.ndarray]:
    """One batch for the fused op: per-table index/offset arrays concatenated table-major (FBGEMM's
    layout), int64. The tables' draws are kept for the next measurement (``lookup_cache``)."""
    idx, off, base = [], [np.zeros(1, dtype=np.int64)], 0
    for s, r in zip(shards, rows):
        table = task.tables[s.table]
        if s.row_start or s.row_end is not None:
            # a row shard serves the lookups that fall in its range (skew makes row shards unequal), folded
            # into its kept rows like a whole table's
            lk = cached_lookups(table, task.batch_size, seed).in_rows(
                s.row_start, s.row_start + s.num_rows(table.rows))
            lk = type(lk)(lk.indices % r, lk.offsets)
        else:
            lk = cached_lookups(table, task.batch_size, seed, rows=r)
        if s.replica:
            # a data-parallel replica looks up its own rank's B / D samples only; the fused op needs the
            # same batch for every table, so the other samples' bags are empty
            own = -(-task.batch_size // task.num_devices)
            cut = int(lk.offsets[own])
            lk = type(lk)(lk.indices[:cut], np.minimum(lk.offsets, cut))
        idx.append(lk.indices)
        off.append(lk.offsets[1:] + base)
        base += int(lk.offsets[-1])
    return np.concatenate(idx), np.concatenate(off)


@dataclass(frozen=True)
class PreparedLookups:
    """The CPU side of timing one device's shards (``prepare_lookups``): the rows each shard keeps and the
    fused lookup batches, plain numpy arrays so they can cross a process boundary. ``autoshard profile
    --prepare-workers`` builds them for the next samples in worker processes while this one times on the
    GPU: on this project's CPU a broad GPU sample's tables and lookups took 1.6 s to draw
    (``benchmarks/gpu/prepare_time.py``), and with 4 workers an H100 host profiled 2.5x faster
    (docs/benchmarks.md, "Stop 35")."""

    rows: tuple[int, ...]
    batches: tuple[tuple[np.ndarray, np.ndarray], ...]


def prepare_lookups(task: Task, shards: Sequence[ShardRef], settings: MeasureSettings) -> PreparedLookups:
    """What ``measure_shard`` draws on the CPU before timing, for ``shards`` of ``task`` (checked here)."""
    _check_shards(task, shards)
    rows = tuple(effective_rows(task, shards, settings))
    return PreparedLookups(rows, tuple(_fused_lookups(task, shards, rows, settings.lookup_seed * 1000 + k)
                                       for k in range(settings.num_batches)))


def fill_weights(weights: Sequence[Any], low: float, high: float) -> None:
    """Write every element of each weight tensor with values uniform in [low, high): one draw of
    ``WEIGHT_INIT_TILE`` values (the torch RNG, so seeded by the caller) tiled over each table. A table that
    is not one contiguous block gets a full uniform draw."""
    import torch

    tiles: dict[Any, Any] = {}
    with torch.no_grad():
        for w in weights:
            if not w.is_contiguous():
                w.uniform_(low, high)
                continue
            key = (w.dtype, w.device)
            if key not in tiles:
                tiles[key] = torch.empty(WEIGHT_INIT_TILE, dtype=w.dtype, device=w.device).uniform_(low, high)
            tile, flat = tiles[key], w.view(-1)
            whole = flat.numel() // WEIGHT_INIT_TILE
            if whole:
                flat[:whole * WEIGHT_INIT_TILE].view(whole, WEIGHT_INIT_TILE).copy_(
                    tile.expand(whole, WEIGHT_INIT_TILE))
            rest = flat.numel() - whole * WEIGHT_INIT_TILE
            flat[whole * WEIGHT_INIT_TILE:].copy_(tile[:rest])


def _build_tbe(task: Task, shards: Sequence[ShardRef], rows: Sequence[int], settings: MeasureSettings) -> Any:
    import torch

    try:
        from fbgemm_gpu.split_embedding_configs import EmbOptimType, SparseType
        from fbgemm_gpu.split_table_batched_embeddings_ops_common import EmbeddingLocation, PoolingMode
        from fbgemm_gpu.split_table_batched_embeddings_ops_training import (
            ComputeDevice,
            SplitTableBatchedEmbeddingBagsCodegen,
        )
    except ImportError as e:
        raise AutoshardError(f"backend 'fbgemm' needs fbgemm_gpu, which does not import here ({e}); install "
                             "it, or time with backend 'torch'") from None

    cuda = settings.device is DeviceKind.CUDA
    location, compute = ((EmbeddingLocation.DEVICE, ComputeDevice.CUDA) if cuda
                         else (EmbeddingLocation.HOST, ComputeDevice.CPU))
    optimizer = {Optimizer.EXACT_SGD: EmbOptimType.EXACT_SGD,
                 Optimizer.ROWWISE_ADAGRAD: EmbOptimType.EXACT_ROWWISE_ADAGRAD}[settings.optimizer]
    precision = SparseType.FP16 if task.precision is Precision.FP16 else SparseType.FP32
    tbe = SplitTableBatchedEmbeddingBagsCodegen(
        [(int(r), int(s.dim), location, compute) for s, r in zip(shards, rows)],
        optimizer=optimizer,
        weights_precision=precision,
        output_dtype=SparseType.FP32,  # pooled outputs feed the fp32 dense layers
        pooling_mode=PoolingMode.SUM,
        learning_rate=LEARNING_RATE,
        device=torch.device("cuda") if cuda else torch.device("cpu"),
    )
    fill_weights(tbe.split_embedding_weights(), -WEIGHT_INIT_RANGE, WEIGHT_INIT_RANGE)
    return tbe


def _build_torch(task: Task, shards: Sequence[ShardRef], rows: Sequence[int],
                 settings: MeasureSettings) -> Any:
    """The torch-only equivalent of ``_build_tbe`` (same optimizer, learning rate, precision and init)."""
    import torch

    from autoshard.hardware.torch_backend import FusedEmbeddingBags

    dtype = torch.float16 if task.precision is Precision.FP16 else torch.float32
    module = FusedEmbeddingBags(rows, [s.dim for s in shards], settings.optimizer,
                                learning_rate=LEARNING_RATE, dtype=dtype, device=settings.device.value)
    fill_weights(module.split_embedding_weights(), -WEIGHT_INIT_RANGE, WEIGHT_INIT_RANGE)
    return module


def _build_kernel(task: Task, shards: Sequence[ShardRef], rows: Sequence[int],
                  settings: MeasureSettings) -> Any:
    build = _build_torch if settings.backend is KernelBackend.TORCH else _build_tbe
    return build(task, shards, rows, settings)


class _Timer:
    """Wall-clock timing on CPU; CUDA events on GPU, with a real L2 flush (a write larger than L2 on the
    GPU)."""

    def __init__(self, settings: MeasureSettings) -> None:
        import torch

        self.torch = torch
        self.cuda = settings.device is DeviceKind.CUDA
        if self.cuda:
            l2 = int(getattr(torch.cuda.get_device_properties(torch.cuda.current_device()),
                             "L2_cache_size", 0))
            self.flush_buf = torch.empty(max(GPU_FLUSH_MIN_BYTES, 4 * l2) // 4, dtype=torch.float32,
                                         device="cuda")
        else:
            self.flush_buf = torch.empty(settings.cpu_flush_bytes // 4, dtype=torch.float32)
        self.flush_enabled = settings.flush_cache
        self.counter = 0.0

    def flush(self) -> None:
        if self.flush_enabled:
            self.counter += 1.0
            self.flush_buf.fill_(self.counter)  # a write to every line evicts the embedding rows

    def time_ms(self, fn: Any) -> tuple[Any, float]:
        self.flush()
        if self.cuda:
            start = self.torch.cuda.Event(enable_timing=True)
            end = self.torch.cuda.Event(enable_timing=True)
            self.torch.cuda.synchronize()
            start.record()
            out = fn()
            end.record()
            end.synchronize()
            return out, float(start.elapsed_time(end))
        t0 = time.perf_counter()
        out = fn()
        return out, (time.perf_counter() - t0) * 1e3


def _cv(x: np.ndarray) -> float:
    m = float(np.mean(x))
    return float(np.std(x) / m) if m > 0 else 0.0


def measure_shard(task: Task, shards: Sequence[ShardRef], settings: MeasureSettings | None = None,
                  prepared: PreparedLookups | None = None) -> ShardTiming:
    """Time the fused forward and backward of the shards one device holds, at ``task``'s batch and
    precision. ``prepared``: ``prepare_lookups(task, shards, settings)`` made earlier (or elsewhere);
    default: drawn here."""
    import torch

    settings = settings or MeasureSettings()
    if prepared is None:
        prepared = prepare_lookups(task, shards, settings)
    else:
        _check_shards(task, shards)
        if (prepared.rows != tuple(effective_rows(task, shards, settings))
                or len(prepared.batches) != settings.num_batches):
            raise AutoshardError("prepared lookups were drawn for other shards or settings; prepare them "
                                 "with prepare_lookups(task, shards, settings) for this measurement")
    if settings.device is DeviceKind.CUDA and not torch.cuda.is_available():
        raise AutoshardError("device 'cuda' requested but torch sees no CUDA device; use --device cpu")
    rows = list(prepared.rows)
    old_threads = torch.get_num_threads()
    torch.set_num_threads(settings.threads)
    kernel = timer = None
    try:
        dev = torch.device(settings.device.value)
        rng_devices = [torch.cuda.current_device()] if settings.device is DeviceKind.CUDA else []
        with torch.random.fork_rng(devices=rng_devices):  # seeded init, the caller's RNG state untouched
            torch.manual_seed(settings.lookup_seed)
            kernel = _build_kernel(task, shards, rows, settings)
            # drawn where it is used: a one-thread CPU draw took 0.01-0.18 s a broad GPU sample on this
            # project's CPU (benchmarks/gpu/prepare_time.py), up to half of what the GPU then spends timing
            grad = torch.rand(task.batch_size, sum(s.dim for s in shards), device=dev)
        batches = [tuple(torch.from_numpy(a).to(dev) for a in batch) for batch in prepared.batches]
        timer = _Timer(settings)

        def step(k: int) -> tuple[float, float]:
            idx, off = batches[k % len(batches)]
            out, f = timer.time_ms(lambda: kernel(idx, off))
            _, b = timer.time_ms(lambda: out.backward(grad))
            return f, b

        budget = settings.time_budget_ms
        last = spent = 0.0
        for k in range(settings.warmup):
            last = sum(step(k))
            spent += last
            if budget and spent >= budget / 2:
                break
        repeats = settings.repeats
        if budget and last > 0:
            repeats = max(MIN_BUDGET_REPEATS, min(settings.repeats, math.ceil(budget / last)))
        best: tuple[float, np.ndarray, np.ndarray] | None = None
        tries = 0
        while tries < settings.max_tries:
            tries += 1
            runs = np.array([step(k) for k in range(repeats)])
            fwd, bwd = runs[:, 0], runs[:, 1]
            noise = max(_cv(fwd), _cv(bwd))
            if best is None or noise < best[0]:
                best = (noise, fwd, bwd)
            if noise <= settings.max_cv:
                break
            log.info("try %d: CV %.3f above %.3f; measuring again", tries, noise, settings.max_cv)
        assert best is not None
        _, fwd, bwd = best
        summary = np.min if settings.statistic is Statistic.MIN else np.median
        return ShardTiming(float(summary(fwd)), float(summary(bwd)), _cv(fwd), _cv(bwd), tries,
                           tuple(rows), tuple(float(x) for x in fwd), tuple(float(x) for x in bwd))
    finally:
        torch.set_num_threads(old_threads)
        kernel = timer = None  # drop the kernel and weights (GBs) before collecting; step() holds them too
        gc.collect()
        if settings.device is DeviceKind.CUDA:
            torch.cuda.empty_cache()
