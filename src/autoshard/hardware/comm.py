"""Measure the all-to-all of pooled embeddings for real, fit an alpha-beta model,
or derive one from a topology.

Measurement: D processes on this host (``autoshard.hardware.multiprocess``: gloo over 127.0.0.1 on a free port
chosen at run time; NCCL, one GPU per rank, when CUDA devices are there), each holding the pooled embeddings
of its shards for the global batch (``batch_size x dim_sum``) and sending ``batch_size / D`` rows to every
rank with ``dist.all_to_all_single``; the backward is the reverse all-to-all of the gradients (what the
autograd of TorchRec's all-to-all runs), timed separately. Before each step the ranks meet at a barrier; a
step's time is the slowest rank's (a collective ends when the last rank ends). The sweep runs ``passes`` times
over its sizes (``DEFAULT_PASSES``); each timing of a point is the least of its passes' medians over repeats,
as the bench keeps each device's least round of kernel timings (contention only adds time).

Why passes: on a host with fewer cores than ranks one repeat of a small all-to-all spreads 30-100% (its
coefficient of variation) and a busy moment slows a whole pass, so fits of one 4- or 8-rank sweep on this
project's 2-vCPU host ranged 1.3-3.6 ms (D = 4) and 3.7-9.5 ms (D = 8) in latency between bench runs, and the
bench's modelled collectives (half or more of a step there) moved with them. Refitting the same 8-rank
timings (8 fits, 4 with busy loops beside; ``benchmarks/comm_fit_spread.py estimators``) the first pass alone
spread 0.145 (latency) and 0.138 (bandwidth, coefficients of variation over the fits), the least of three
passes' medians 0.088 and 0.027 (docs/benchmarks.md, "Stop 71").

Row-wise shards move their pooled outputs by other collectives (TorchRec: a reduce-scatter of the partial
sums forward, an all-gather of the gradients backward) and bucketise ids before the id all-to-all. At every
point the ranks also time ``reduce_scatter_tensor`` and ``all_gather_into_tensor`` of the same bytes and
bucketise ``BUCKETIZE_IDS_PER_SAMPLE`` ids a local sample (FBGEMM's ``block_bucketize_sparse_features`` where
fbgemm_gpu is installed, else the same sort in plain torch); the fit turns them into the factors and the
per-id cost of :class:`AlphaBeta` (``fit_row_wise``).

Topology file (for hardware you don't have; JSON, ``kind: autoshard.topology``, ``version: 1``)::

    {"kind": "autoshard.topology", "version": 1,
     "devices_per_host": 8,                                      # GPUs in one host
     "intra_host": {"bandwidth_gbps": 300.0, "latency_us": 10},  # per-device all-to-all bandwidth (NVLink)
     "inter_host": {"bandwidth_gbps": 25.0,  "latency_us": 30}}  # per-device share of the network (NIC)

Bandwidths are GB/s (10^9 bytes per second) each device can send over that kind of link. In an all-to-all
over D devices a device sends (h-1)/(D-1) of its bytes inside its host (h = min(devices_per_host, D)) and the
rest between hosts, over both kinds of link at once, so the time per byte is the slower share:
``max(f_intra / bw_intra, f_inter / bw_inter)``; the latency is that of the slowest link used. The result
is an :class:`AlphaBeta` valid for that D.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing
from dataclasses import asdict, dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from autoshard.costs.comm import AlphaBeta, all_to_all_bytes
from autoshard.errors import AutoshardError
from autoshard.hardware.jsonl import append_jsonl, read_jsonl, repair_tail
from autoshard.hardware.multiprocess import (
    RankContext,
    check_world,
    one_tensor_collectives,
    resolve_backend,
    stream_from_ranks,
)
from autoshard.io import ARTEFACT_VERSION, check_finite, read_json

log = logging.getLogger(__name__)

DEFAULT_DIM_SUMS = (16, 64, 256, 1024, 4096)
"""Per-device dim sums swept by default: from one small table to ~40 tables of dim 128 (bytes span 256x)."""

COMM_RECORDS_FILE = "comm.jsonl"
"""Measured all-to-all points in a profile directory, one CommRecord a line."""
COMM_MODEL_FILE = "comm_model.json"
"""The fitted (or topology-derived) AlphaBeta in a profile directory."""

DEFAULT_PASSES = 3
"""Sweeps over the sizes a comm fit takes each point's least median from (module docstring: why)."""

PROCESS_TIMEOUT_S = 300.0
"""Longest a sweep may go without a result before its processes are killed (a hung collective)."""


@dataclass(frozen=True)
class CommRecord:
    """One measured all-to-all point: every rank sends ``bytes_sent`` bytes per direction."""

    num_devices: int
    dim_sum: int
    batch_size: int
    elem_bytes: int
    bytes_sent: float
    fwd_ms: float
    """Median forward all-to-all time (slowest rank)."""
    bwd_ms: float
    """Median backward (gradient) all-to-all time (slowest rank)."""
    fwd_cv: float
    bwd_cv: float
    backend: str
    host: dict[str, Any]
    reduce_scatter_ms: float | None = None
    """Median reduce-scatter time (slowest rank) moving the same bytes a rank; None in records made before
    the row-wise terms (stop 44)."""
    all_gather_ms: float | None = None
    """Median all-gather time (slowest rank) of the same bytes."""
    bucketize_ns_per_id: float | None = None
    """Median time to bucketise one id by row block (slowest rank, all ranks at once)."""
    bucketize_op: str = ""
    """'fbgemm' (``block_bucketize_sparse_features``) or 'torch' (the same sort in plain torch)."""
    passes: int = 1
    """Passes of the sweep the timings are the least of (each pass's median over repeats); 1 in records made
    before passes (stop 71)."""
    pass_ms: tuple[tuple[float, float], ...] = ()
    """Each pass's median forward and backward all-to-all (the spread the least was taken from)."""

    @property
    def has_row_wise(self) -> bool:
        return self.reduce_scatter_ms is not None and self.all_gather_ms is not None

    def key(self) -> tuple[int, int, int, int, str]:
        return (self.num_devices, self.dim_sum, self.batch_size, self.elem_bytes, self.backend)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_json(d: dict[str, Any]) -> CommRecord:
        def optional(name: str) -> float | None:
            return None if d.get(name) is None else float(d[name])

        try:
            return CommRecord(int(d["num_devices"]), int(d["dim_sum"]), int(d["batch_size"]),
                              int(d["elem_bytes"]), float(d["bytes_sent"]), float(d["fwd_ms"]),
                              float(d["bwd_ms"]), float(d["fwd_cv"]), float(d["bwd_cv"]),
                              str(d["backend"]), dict(d.get("host", {})), optional("reduce_scatter_ms"),
                              optional("all_gather_ms"), optional("bucketize_ns_per_id"),
                              str(d.get("bucketize_op", "")), int(d.get("passes", 1)),
                              tuple((float(f), float(b)) for f, b in d.get("pass_ms", ())))
        except (KeyError, TypeError, ValueError) as e:
            raise AutoshardError(f"comm record lacks or has a bad field ({e}); re-run profile-comm") from None


def _cv(x: np.ndarray) -> float:
    m = float(np.mean(x))
    return float(np.std(x) / m) if m > 0 else 0.0


BUCKETIZE_FEATURES = 4
BUCKETIZE_BAG = 16
BUCKETIZE_IDS_PER_SAMPLE = BUCKETIZE_FEATURES * BUCKETIZE_BAG
"""Ids of one local sample each rank bucketises at a sweep point: 4 row-wise features with bags of 16."""
BUCKETIZE_ROWS = 100_000
"""Rows of each bucketised feature's table (the cost is per id; the row count only sets the blocks)."""


def bucketizer(use_fbgemm: bool = True) -> tuple[str, Any]:
    """('fbgemm' or 'torch', f(lengths, ids, block_sizes, world) -> (new lengths, new ids)): FBGEMM's
    row-block bucketisation where fbgemm_gpu is installed and ``use_fbgemm`` (what TorchRec's row-wise input
    distribution runs), else the same in plain torch: each id goes to block ``id // block size`` (the last
    block takes the rest), a stable sort groups ids by (block, bag), and ids become offsets in their block.
    Lengths are feature-major, as in a KeyedJaggedTensor; the new ones block-major."""
    import torch

    if use_fbgemm:
        try:
            import fbgemm_gpu  # noqa: F401  (registers torch.ops.fbgemm)

            op = torch.ops.fbgemm.block_bucketize_sparse_features

            def fbgemm(lengths: Any, ids: Any, blocks: Any, world: int) -> Any:
                new_lengths, new_ids, *_ = op(lengths, ids, False, False, blocks, world, None)
                return new_lengths, new_ids

            return "fbgemm", fbgemm
        except (ImportError, AttributeError, RuntimeError):
            pass

    def plain(lengths: Any, ids: Any, blocks: Any, world: int) -> Any:
        bags = lengths.numel()
        bag = torch.repeat_interleave(torch.arange(bags, device=ids.device), lengths)
        size = blocks[bag // (bags // blocks.numel())]  # each id's feature's block size
        block = torch.clamp(ids // size, max=world - 1)
        order = torch.argsort(block * bags + bag, stable=True)
        new_lengths = torch.bincount(block * bags + bag, minlength=world * bags)
        return new_lengths, (ids - block * size)[order]

    return "torch", plain


def _worker(ctx: RankContext, dim_sums: Sequence[int], batch_size: int, elem_bytes: int, warmup: int,
            repeats: int, passes: int) -> None:
    """One rank: ``passes`` times over the dim sums, time forward and backward all-to-all, a reduce-scatter
    and an all-gather of the same bytes, and id bucketisation at each; rank 0 sends the slowest rank's times
    of every pass and point."""
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    device, world = ctx.device, ctx.world_size
    cuda = device.type == "cuda"
    dtype = {4: torch.float32, 2: torch.float16}[elem_bytes]
    per_rank = batch_size // world
    op_name, bucketize = bucketizer()
    reduce_scatter, all_gather = one_tensor_collectives()
    gen = torch.Generator().manual_seed(ctx.rank)
    bags = per_rank * BUCKETIZE_FEATURES  # one bag a local sample and feature, feature-major as in a KJT
    lengths = torch.full((bags,), BUCKETIZE_BAG, dtype=torch.int64)
    ids = torch.randint(0, BUCKETIZE_ROWS, (bags * BUCKETIZE_BAG,), dtype=torch.int64, generator=gen)
    blocks = torch.full((BUCKETIZE_FEATURES,), -(-BUCKETIZE_ROWS // world), dtype=torch.int64)
    if cuda:
        lengths, ids, blocks = lengths.to(device), ids.to(device), blocks.to(device)

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize(device)

    def timed(fn: Any) -> float:
        dist.barrier()
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        return (time.perf_counter() - t0) * 1e3

    for sweep, dim_sum in ((p, s) for p in range(passes) for s in dim_sums):
        n = per_rank * world * dim_sum
        x = torch.randn(n, device=device).to(dtype)  # pooled embeddings of this rank's shards
        out = torch.empty_like(x)
        g = torch.randn(n, device=device).to(dtype)  # gradients of the pooled embeddings it received
        grad_in = torch.empty_like(g)
        kept = torch.empty(n // world, device=device, dtype=dtype)  # this rank's samples' summed rows
        times = np.zeros((warmup + repeats, 5))
        for k in range(warmup + repeats):
            times[k] = (timed(partial(dist.all_to_all_single, out, x)),
                        timed(partial(dist.all_to_all_single, grad_in, g)),  # backward: the reverse
                        timed(partial(reduce_scatter, kept, x)),  # row shards' partial sums
                        timed(partial(all_gather, grad_in, kept)),  # their gradients
                        timed(partial(bucketize, lengths, ids, blocks, world)) * 1e6 / ids.numel())
        slowest = torch.tensor(times[warmup:], dtype=torch.float64, device=device)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        if ctx.rank == 0:
            ctx.send((sweep, dim_sum, slowest.cpu().numpy().tolist(), op_name))
    dist.barrier()  # no rank leaves while another is still in the last collective


def measure_all_to_all(
    num_devices: int,
    dim_sums: Sequence[int] = DEFAULT_DIM_SUMS,
    batch_size: int = 2048,
    elem_bytes: int = 4,
    warmup: int = 3,
    repeats: int = 10,
    backend: str = "auto",
    timeout_s: float = PROCESS_TIMEOUT_S,
    pin_cpus: bool = False,
    passes: int = 1,
    on_point: Callable[[int, int], None] | None = None,
) -> Iterator[CommRecord]:
    """Yield one CommRecord per dim sum as its last pass is measured by ``num_devices`` processes on this
    host: each timing the least over ``passes`` sweeps of that sweep's median over ``repeats``.

    The processes are always stopped on return, on error, on Ctrl-C and after ``timeout_s`` without progress.
    ``pin_cpus``: every rank on a physical core of its own (``multiprocess.rank_cpus``). ``on_point(done,
    total)`` after every point of every pass (progress: records come only with the last pass).
    """
    from autoshard.host import host_info

    if num_devices < 2:
        raise AutoshardError(f"an all-to-all needs at least 2 devices, got {num_devices}")
    if batch_size < num_devices:
        raise AutoshardError(f"batch size {batch_size} must be at least the number of devices {num_devices}")
    if elem_bytes not in (2, 4):
        raise AutoshardError(f"element bytes {elem_bytes} unsupported; use 4 (fp32) or 2 (fp16)")
    if not dim_sums or any(int(s) <= 0 for s in dim_sums):
        raise AutoshardError(f"dim sums {list(dim_sums)} must be positive integers")
    if passes < 1:
        raise AutoshardError(f"passes {passes} must be at least 1")
    backend = resolve_backend(backend)
    check_world(backend, num_devices)
    host = dict(host_info("cuda" if backend == "nccl" else "cpu"), comm_backend=backend)
    points = stream_from_ranks(_worker, num_devices,
                               (list(map(int, dim_sums)), batch_size, elem_bytes, warmup, repeats, passes),
                               backend=backend, idle_timeout_s=timeout_s, what="all-to-all",
                               timeout_hint="re-run profile-comm, or try --backend gloo", pin_cpus=pin_cpus)
    seen: dict[int, list[np.ndarray]] = {}
    with closing(points):
        for done, (_, (sweep, dim_sum, runs, op_name)) in enumerate(points, start=1):
            seen.setdefault(int(dim_sum), []).append(np.asarray(runs))
            if on_point is not None:
                on_point(done, passes * len(dim_sums))
            if sweep == passes - 1:
                yield _record(num_devices, int(dim_sum), batch_size, elem_bytes, seen.pop(int(dim_sum)),
                              backend, host, str(op_name))


def _record(num_devices: int, dim_sum: int, batch_size: int, elem_bytes: int, sweeps: list[np.ndarray],
            backend: str, host: dict[str, Any], op_name: str) -> CommRecord:
    """One point's record from its passes' (repeats, 5) timings: each column the least of the passes'
    medians; the coefficients of variation those of the pass whose forward median was least."""
    medians = np.array([np.median(a, axis=0) for a in sweeps])
    least = medians.min(axis=0)
    quiet = sweeps[int(np.argmin(medians[:, 0]))]
    return CommRecord(num_devices, dim_sum, batch_size, elem_bytes,
                      all_to_all_bytes(dim_sum, batch_size // num_devices * num_devices, num_devices,
                                       elem_bytes),
                      float(least[0]), float(least[1]), _cv(quiet[:, 0]), _cv(quiet[:, 1]), backend, host,
                      float(least[2]), float(least[3]), float(least[4]), op_name, len(sweeps),
                      tuple((float(m[0]), float(m[1])) for m in medians))


def fit_alpha_beta(records: Sequence[CommRecord], source: str | None = None) -> AlphaBeta:
    """Least-squares latency (>= 0) and bandwidth over every record's forward and backward time vs bytes
    sent."""
    if len({r.bytes_sent for r in records}) < 2:
        raise AutoshardError("fitting the comm model needs at least 2 distinct message sizes; "
                             "sweep more dim sums")
    x = np.array([r.bytes_sent for r in records for _ in (0, 1)], dtype=np.float64)
    y = np.array([t for r in records for t in (r.fwd_ms, r.bwd_ms)], dtype=np.float64)
    if source is None:
        backends = sorted({r.backend for r in records})
        ds = sorted({r.num_devices for r in records})
        host = records[0].host.get("hostname", "?")
        passes = min(r.passes for r in records)
        each = f", each the least of {passes} passes' medians" if passes > 1 else ""
        source = f"measured: {'/'.join(backends)} D={ds} on {host}, {len(records)} points{each}"
    fit = fit_points(x, y, source)
    if fit.bytes_per_ms >= FLAT_BYTES_PER_MS:
        raise AutoshardError("measured all-to-all times do not grow with message size; sweep larger dim sums")
    return fit_row_wise(fit, records)


MIN_FACTOR = 0.25
"""Least reduce-scatter or all-gather factor a fit may give (a collective cannot beat an all-to-all of the
same bytes by more than the noise of a few points; below this the points are not trusted)."""


def fit_row_wise(fit: AlphaBeta, records: Sequence[CommRecord]) -> AlphaBeta:
    """``fit`` with the row-wise terms from the records that timed them: each factor the least-squares slope
    of (time - alpha) against the all-to-all model's bytes term (``alpha + factor x bytes / bandwidth``, so
    small latency-bound points do not decide it), at least ``MIN_FACTOR``; bucketisation the median ns an id.
    ``fit`` unchanged (and said so in its source) when no record has them."""
    rows = [r for r in records if r.has_row_wise]
    if not rows:
        return replace(fit, source=f"{fit.source}; row-wise terms not measured (reduce-scatter and "
                                   "all-gather priced as all-to-alls, bucketisation free)")
    term = np.array([r.bytes_sent / fit.bytes_per_ms for r in rows])

    def factor(ms: Sequence[float]) -> float:
        y = np.asarray(ms, dtype=np.float64) - fit.alpha_ms
        return max(MIN_FACTOR, float(term @ y / (term @ term))) if term @ term > 0 else 1.0

    rs = factor([r.reduce_scatter_ms for r in rows])  # type: ignore[misc]
    ag = factor([r.all_gather_ms for r in rows])  # type: ignore[misc]
    ns = [r.bucketize_ns_per_id for r in rows if r.bucketize_ns_per_id is not None]
    per_id = float(np.median(ns)) if ns else 0.0
    ops = "/".join(sorted({r.bucketize_op for r in rows if r.bucketize_op})) or "?"
    return replace(fit, reduce_scatter_factor=rs, all_gather_factor=ag, bucketize_ns_per_id=per_id,
                   source=f"{fit.source}; row-wise: reduce-scatter x{rs:.2f}, all-gather x{ag:.2f}, "
                          f"bucketise {per_id:.1f} ns an id ({ops})")


FLAT_BYTES_PER_MS = 1e12
"""The bandwidth ``fit_points`` gives times that do not grow with bytes (a flat or falling cloud)."""


def fit_points(bytes_moved: np.ndarray, ms: np.ndarray, source: str) -> AlphaBeta:
    """Least-squares latency (>= 0) and bandwidth of all-to-all times ``ms`` against the busiest rank's bytes;
    ``FLAT_BYTES_PER_MS`` where the times do not grow with bytes."""
    x, y = np.asarray(bytes_moved, dtype=np.float64), np.asarray(ms, dtype=np.float64)
    # plain least squares in ms: a plan's cost adds comm ms to compute ms, and its slowest devices are the
    # ones sending the most, so the large messages matter most (gloo on a loaded host is not quite linear)
    a = np.stack([np.ones_like(x), x], axis=1)
    (alpha, slope), *_ = np.linalg.lstsq(a, y, rcond=None)
    if alpha < 0:  # latency cannot be negative: the constrained optimum then has alpha = 0
        alpha, slope = 0.0, float(x @ y / (x @ x))
    bandwidth = float(1.0 / slope) if slope > 1.0 / FLAT_BYTES_PER_MS else FLAT_BYTES_PER_MS
    return AlphaBeta(max(float(alpha), 0.0), bandwidth, source)


def load_comm_records(out_dir: str | Path) -> list[CommRecord]:
    """The CommRecords of a profile directory (empty when none were measured); of records of one point the
    last (a point re-measured for the row-wise terms replaces its older record)."""
    path = Path(out_dir) / COMM_RECORDS_FILE
    if not path.is_file():
        return []
    latest = {}
    for d in read_jsonl(path):
        rec = CommRecord.from_json(d)
        latest.pop(rec.key(), None)
        latest[rec.key()] = rec
    return list(latest.values())


def profile_comm(out_dir: str | Path, num_devices: int, dim_sums: Sequence[int] = DEFAULT_DIM_SUMS,
                 batch_size: int = 2048, elem_bytes: int = 4, warmup: int = 3, repeats: int = 10,
                 backend: str = "auto", passes: int = DEFAULT_PASSES,
                 on_point: Callable[[int, int], None] | None = None) -> Iterator[CommRecord]:
    """Measure the sweep points not yet in ``out_dir/comm.jsonl`` with at least ``passes`` passes, appending
    (fsynced) each as it arrives (after its last pass); ``on_point(done, total)`` counts the points of every
    pass still to measure.

    Call :func:`fit_alpha_beta` on :func:`load_comm_records` afterwards (the CLI does, writing
    comm_model.json).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / COMM_RECORDS_FILE
    repair_tail(path)
    backend = resolve_backend(backend)
    done = {r.key() for r in load_comm_records(out) if r.has_row_wise and r.passes >= passes}
    todo = [int(s) for s in dim_sums if (num_devices, int(s), batch_size, elem_bytes, backend) not in done]
    if not todo:
        return
    for rec in measure_all_to_all(num_devices, todo, batch_size, elem_bytes, warmup, repeats, backend,
                                  passes=passes, on_point=on_point):
        append_jsonl(path, rec.to_json())
        yield rec


@dataclass(frozen=True)
class Link:
    """One kind of link as a device sees it."""

    bandwidth_gbps: float
    """GB/s (10^9 bytes/s) one device can send over it."""
    latency_us: float
    """Per-collective start-up latency in microseconds."""


@dataclass(frozen=True)
class Topology:
    """Hosts of ``devices_per_host`` devices, a fast link inside a host and a slower one between hosts."""

    devices_per_host: int
    intra_host: Link
    inter_host: Link

    def alpha_beta(self, num_devices: int) -> AlphaBeta:
        """The all-to-all model for ``num_devices`` devices (see the module docstring for the rule); a
        reduce-scatter or all-gather as fast as an all-to-all of the same bytes and free bucketisation (NCCL
        on GPUs, where the declared links are), which its source says."""
        if num_devices < 2:
            raise AutoshardError(f"a topology comm model needs at least 2 devices, got {num_devices}")
        h = min(self.devices_per_host, num_devices)
        f_intra = (h - 1) / (num_devices - 1)
        f_inter = 1.0 - f_intra
        ms_per_byte = max(f_intra / (self.intra_host.bandwidth_gbps * 1e6),
                          f_inter / (self.inter_host.bandwidth_gbps * 1e6))
        latency_us = self.inter_host.latency_us if f_inter > 0 else self.intra_host.latency_us
        return AlphaBeta(latency_us / 1e3, 1.0 / ms_per_byte,
                         f"topology: {num_devices} devices, {self.devices_per_host}/host, "
                         f"intra {self.intra_host.bandwidth_gbps} GB/s, "
                         f"inter {self.inter_host.bandwidth_gbps} GB/s; row-wise collectives as all-to-alls, "
                         "bucketisation free (declared, not measured)")


def load_topology(path: str) -> Topology:
    """Read a topology file (schema in the module docstring); one-line AutoshardError on anything wrong."""
    d = read_json(path, kind="autoshard.topology")

    def link(name: str) -> Link:
        x = d.get(name)
        if not isinstance(x, dict) or "bandwidth_gbps" not in x:
            raise AutoshardError(f"{path}: '{name}' needs {{'bandwidth_gbps': GB/s, 'latency_us': us}}")
        bw = check_finite(x["bandwidth_gbps"], f"{path}: {name}.bandwidth_gbps")
        lat = check_finite(x.get("latency_us", 0.0), f"{path}: {name}.latency_us")
        if bw <= 0 or lat < 0:
            raise AutoshardError(f"{path}: {name} needs bandwidth_gbps > 0 and latency_us >= 0")
        return Link(bw, lat)

    try:
        per_host = int(d["devices_per_host"])
    except (KeyError, TypeError, ValueError):
        raise AutoshardError(f"{path}: needs an integer 'devices_per_host'") from None
    if per_host < 1:
        raise AutoshardError(f"{path}: devices_per_host {per_host} must be at least 1")
    return Topology(per_host, link("intra_host"), link("inter_host"))


def topology_json(topology: Topology) -> dict[str, Any]:
    """The file form of ``topology`` (for writing examples)."""
    return {"kind": "autoshard.topology", "version": ARTEFACT_VERSION, **asdict(topology)}

