"""Time the all-to-alls of one training step as a plan has them: uneven splits, real processes.

What is measured: each collective is a (D, D) byte matrix whose entry ``[src, dst]`` is what rank ``src``
sends rank ``dst`` (the diagonal is ignored: a rank's traffic to itself is a local copy, not communication).
D processes on this host (``autoshard.hardware.multiprocess``: gloo over 127.0.0.1 on CPU, NCCL with one GPU
per rank) each allocate one uint8 send buffer and one receive buffer on their device, as large as their
largest row and column, and time every matrix's ``dist.all_to_all_single(out, inp, output_split_sizes,
input_split_sizes)`` on slices of them ``warmup + repeats`` times, *interleaved*: pass k runs every matrix
once, starting at matrix k (rotated), so a slow spell of the host slows all matrices alike instead of the
one timed in it. Before every run the ranks meet at a barrier so they start together, and each rank times
its own call with ``time.perf_counter`` (CUDA synchronized before and after). Per rank the median over the
timed runs is reported; the collective's time in a step is the slowest rank's in each run (every rank waits
for the last one), median over runs. Why interleaved: timed matrix after matrix, two identical matrices of
one call measured up to 1.4x apart (``benchmarks/collective_noise.py``; docs/benchmarks.md, "Stop 24"), a
noise the bench's measurement rounds cannot average because it times each plan's collectives once. On a
host with fewer cores than D (CPU processes under gloo) the processes share cores, so the measured times
include that contention and can be slower than D separate devices would be. A training step has three such
collectives, each one matrix: the input-id distribution (each rank sends the ids of its local batch to the
ranks owning the tables they look up), the all-to-all of pooled outputs (each rank sends every other rank,
for the shards it holds, the pooled rows of the receiver's local batch), and, in backward, the gradient
all-to-all (the pooled-output matrix transposed). A plan with row shards has two more, which TorchRec runs
as other collectives (``kinds``): the row shards' partial sums reduce-scattered forward and their gradients
all-gathered backward, over every rank with one chunk size, each rank's chunk the matrix's largest entry
(exact for TorchRec's row-wise layout, where every rank holds a block of every row-wise table; an upper bound
for row shards on some ranks only), fp32 as the outputs are.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from autoshard.errors import AutoshardError
from autoshard.hardware.multiprocess import (
    DEFAULT_TIMEOUT_S,
    RankContext,
    check_world,
    one_tensor_collectives,
    resolve_backend,
    run_on_ranks,
)

KINDS = ("all_to_all", "reduce_scatter", "all_gather")
"""The collectives ``measure_all_to_alls`` times (``kinds``)."""

DEFAULT_REPEATS = 30
"""Timed runs per matrix. Interleaved, 30 runs cut the spread between identical matrices of one call to a
coefficient of variation of ~0.04, from ~0.14 with 10 runs timed matrix after matrix (stop 24, AMD EPYC VM,
2 ranks, 64 KB-1.3 MB: ``benchmarks/collective_noise.py``); a DLRM-10 (2) task's collectives took
3.8-6.3 s where they took 3.0-5.0 s (``benchmarks/collective_noise.py --bench-run``)."""


@dataclass(frozen=True)
class CollectiveTiming:
    """The measured time of one uneven all-to-all (one byte matrix)."""

    matrix_bytes_total: int
    """Bytes moved between ranks: the sum of the matrix off the diagonal (rounded to whole bytes)."""
    per_rank_ms: tuple[float, ...]
    """Each rank's median time in the call, rank order."""
    ms: float
    """The collective's time in a step: median over runs of the slowest rank's time."""
    runs_ms: tuple[float, ...]
    """The slowest rank's time in each timed run."""


def _check_matrices(matrices: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The matrices as int64 (D, D) arrays with a zero diagonal; one-line AutoshardError on anything wrong."""
    out: list[np.ndarray] = []
    size = None
    for i, m in enumerate(matrices):
        try:
            a = np.asarray(m, dtype=np.float64)
        except (TypeError, ValueError):
            raise AutoshardError(f"collective {i}: the byte matrix is not numeric") from None
        if a.ndim != 2 or a.shape[0] != a.shape[1]:
            raise AutoshardError(f"collective {i}: the byte matrix must be square (D, D), not {a.shape}")
        if a.shape[0] < 1:
            raise AutoshardError(f"collective {i}: the byte matrix is empty; it needs at least 1 rank")
        if size is not None and a.shape[0] != size:
            raise AutoshardError(f"collective {i}: the byte matrix is {a.shape[0]}x{a.shape[0]} but "
                                 f"collective 0 is {size}x{size}; all collectives of a step need the same D")
        if not np.all(np.isfinite(a)) or np.any(a < 0):
            raise AutoshardError(f"collective {i}: byte counts must be finite and non-negative")
        size = a.shape[0]
        b = np.rint(a).astype(np.int64)
        np.fill_diagonal(b, 0)  # a rank's bytes to itself are a local copy, not communication
        out.append(b)
    return out


def _worker(ctx: RankContext, matrices: list[list[list[int]]], warmup: int,
            repeats: int, kinds: list[str]) -> list[list[float]]:
    """One rank: time every matrix's collective, interleaved (module docstring); this rank's ms of each timed
    run, per matrix."""
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    device, r, world = ctx.device, ctx.rank, ctx.world_size
    cuda = device.type == "cuda"
    reduce_scatter, all_gather = one_tensor_collectives()

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize(device)

    sends = [[int(m[r][j]) for j in range(world)] for m in matrices]  # diagonal already 0
    recvs = [[int(m[i][r]) for i in range(world)] for m in matrices]
    chunks = [-(-max(max(row) for row in m) // 4) if k != "all_to_all" else 0  # fp32 elements
              for m, k in zip(matrices, kinds)]
    # one buffer each way, sliced per matrix; zeros: pages touched before timing
    inp = torch.ones(max((sum(x) for x in sends), default=0), dtype=torch.uint8, device=device)
    out = torch.zeros(max((sum(x) for x in recvs), default=0), dtype=torch.uint8, device=device)
    whole = torch.ones(max(chunks, default=0) * world, dtype=torch.float32, device=device)  # every sample
    part = torch.zeros(max(chunks, default=0), dtype=torch.float32, device=device)  # this rank's samples

    def run(i: int) -> None:
        c = chunks[i]
        if kinds[i] == "reduce_scatter":
            reduce_scatter(part[:c], whole[:c * world])
        elif kinds[i] == "all_gather":
            all_gather(whole[:c * world], part[:c])
        else:
            send, recv = sends[i], recvs[i]
            dist.all_to_all_single(out[:sum(recv)], inp[:sum(send)], recv, send)

    times: list[list[float]] = [[] for _ in matrices]
    n = len(matrices)
    for k in range(warmup + repeats):
        for j in range(n):
            i = (j + k) % n  # every rank runs the same order: it depends on k only
            dist.barrier()
            sync()
            t0 = time.perf_counter()
            run(i)
            sync()
            t1 = time.perf_counter()
            if k >= warmup:
                times[i].append((t1 - t0) * 1e3)
    dist.barrier()  # no rank leaves while another is still in the last collective
    return times


def measure_all_to_alls(matrices: Sequence[np.ndarray], *, backend: str = "auto", warmup: int = 2,
                        repeats: int = DEFAULT_REPEATS,
                        timeout_s: float = DEFAULT_TIMEOUT_S,
                        pin_cpus: bool = False, kinds: Sequence[str] | None = None) -> list[CollectiveTiming]:
    """Time each byte matrix's collective on D local processes (one start for all); one timing per matrix.

    ``matrices[k][src, dst]`` is the bytes rank ``src`` sends rank ``dst`` in collective ``k`` (the diagonal
    is ignored; fractional bytes are rounded). All matrices must be (D, D) with the same D; on D == 1 nothing
    is communicated and every time is 0 without starting processes. ``kinds[k]`` (``KINDS``; all-to-alls by
    default) says which collective matrix k is: a reduce-scatter or all-gather moves one chunk, the
    matrix's largest entry, between every pair (module docstring). ``timeout_s`` limits the whole run;
    ``pin_cpus`` gives every rank a physical core of its own (``multiprocess.rank_cpus``).
    """
    if warmup < 0 or repeats < 1:
        raise AutoshardError(f"warmup {warmup} must be >= 0 and repeats {repeats} >= 1")
    kinds = ["all_to_all"] * len(matrices) if kinds is None else list(kinds)
    if len(kinds) != len(matrices) or any(k not in KINDS for k in kinds):
        raise AutoshardError(f"kinds {kinds}: one of {', '.join(KINDS)} for each of the {len(matrices)} "
                             "matrices")
    mats = _check_matrices(matrices)
    if not mats:
        return []
    world = mats[0].shape[0]
    if world == 1:
        return [CollectiveTiming(0, (0.0,), 0.0, (0.0,) * repeats) for _ in mats]
    backend = resolve_backend(backend)
    check_world(backend, world)
    per_rank = run_on_ranks(_worker, world, ([m.tolist() for m in mats], warmup, repeats, kinds),
                            backend=backend, timeout_s=timeout_s, what=f"uneven all-to-all on {world} ranks",
                            timeout_hint="try fewer or smaller collectives", pin_cpus=pin_cpus)
    timings = []
    for k, m in enumerate(mats):
        arr = np.array([per_rank[r][k] for r in range(world)], dtype=np.float64)  # (ranks, runs)
        slowest = arr.max(axis=0)
        timings.append(CollectiveTiming(int(m.sum()), tuple(float(x) for x in np.median(arr, axis=1)),
                                        float(np.median(slowest)), tuple(float(x) for x in slowest)))
    return timings
