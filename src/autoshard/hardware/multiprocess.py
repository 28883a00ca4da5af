"""Run one function on D local processes joined by torch.distributed and bring each rank's result back.

The one place that spawns ranks (the all-to-all sweep and TorchRec verification both use it):

- a free TCP port on 127.0.0.1 picked at run time, so parallel runs never collide on 29500;
- ``spawn`` processes (CUDA cannot be forked), each running ``init_process_group`` with the backend;
- the backend choice (:func:`resolve_backend`: gloo on CPU, NCCL on GPUs) and the rank -> device mapping
  (:func:`rank_device`: rank r on ``cuda:r`` under NCCL, the CPU under gloo). NCCL refuses two ranks on one
  GPU, so more ranks than visible GPUs is an error before anything starts, never a silent wrap-around;
- ``pin_cpus=True`` pins rank r to one logical CPU of the r-th physical core this process may use
  (:func:`rank_cpus`), so on a host with a core per rank every rank computes on its own core, as on a device
  of its own; off by default (the 2-vCPU hosts this project benches on have fewer cores than ranks);
- every failure (a rank raising, a rank dying, no progress before a timeout, Ctrl-C) stops every process
  this run started and surfaces in the parent as one :class:`AutoshardError` line; a rank's traceback goes to
  the log (``-v``), never to the terminal.

The function runs in the child as ``fn(ctx, *args)`` with a :class:`RankContext`; it must be defined at
module level (spawn pickles it by name), and its arguments and results must pickle.
"""

from __future__ import annotations

import logging
import os
import queue as queue_mod
import socket
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from autoshard.errors import AutoshardError

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)

BACKENDS = ("gloo", "nccl")

DEFAULT_TIMEOUT_S = 600.0
"""Wall-time limit of a run when the caller gives none (also the collectives' timeout in the ranks)."""

JOIN_GRACE_S = 10.0
"""Seconds the ranks get to exit on their own after all reported, before they are terminated."""

DEATH_GRACE_S = 2.0
"""Seconds a rank that exited is given for its last message to arrive before it counts as dead silent."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 free right now (the OS picks it), so parallel runs never collide on 29500."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def resolve_backend(backend: str) -> str:
    """'auto' -> nccl when CUDA devices are visible, else gloo; 'gloo' and 'nccl' are checked and kept."""
    import torch

    if backend == "auto":
        return "nccl" if torch.cuda.is_available() else "gloo"
    if backend not in BACKENDS:
        raise AutoshardError(f"backend {backend!r} unknown; use auto, gloo or nccl")
    if backend == "nccl" and torch.cuda.device_count() < 1:
        raise AutoshardError("backend nccl needs CUDA devices; use --backend gloo")
    return backend


def check_world(backend: str, world_size: int) -> None:
    """Raise if ``world_size`` ranks cannot run under ``backend`` on this host (NCCL: one GPU per rank)."""
    if world_size < 1:
        raise AutoshardError(f"a multi-process run needs at least 1 rank, got {world_size}")
    if backend not in BACKENDS:
        raise AutoshardError(f"backend {backend!r} unknown; use gloo or nccl")
    if backend == "nccl":
        import torch

        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if world_size > gpus:
            # NCCL refuses two ranks on one GPU, so r -> r mod gpus would only fail later and less clearly
            raise AutoshardError(f"backend nccl needs one GPU per rank: {world_size} ranks but {gpus} GPU(s) "
                                 "visible; use fewer ranks, or gloo (CPU processes) instead")


SYSFS_CPU = "/sys/devices/system/cpu"
"""Where Linux describes each logical CPU's core (``cpuN/topology/{physical_package_id,core_id}``)."""


def physical_cores(cpus: Iterable[int] | None = None, sysfs: str = SYSFS_CPU) -> list[int]:
    """One logical CPU per physical core among ``cpus`` (default: the CPUs this process may run on): the
    lowest-numbered sibling of each core, from sysfs; a CPU of unreadable topology is a core of its own."""
    seen: dict[tuple[str, str], int] = {}
    for cpu in sorted(os.sched_getaffinity(0) if cpus is None else cpus):
        topo = f"{sysfs}/cpu{cpu}/topology"
        try:
            with open(f"{topo}/physical_package_id") as pkg, open(f"{topo}/core_id") as core:
                key = (pkg.read().strip(), core.read().strip())
        except OSError:
            key = ("cpu", str(cpu))
        seen.setdefault(key, cpu)
    return sorted(seen.values())


def rank_cpus(world_size: int) -> list[int]:
    """The logical CPU each of ``world_size`` ranks is pinned to: one physical core each, never shared (a
    rank on a hyperthread sibling of another's core would time the two's contention, not its own work)."""
    cores = physical_cores()
    if world_size > len(cores):
        raise AutoshardError(f"pinning {world_size} ranks needs {world_size} physical cores, this process "
                             f"may use {len(cores)}; run fewer ranks or leave the ranks unpinned")
    return cores[:world_size]


def rank_device(backend: str, rank: int) -> torch.device:
    """The device rank ``rank`` works on: ``cuda:rank`` under NCCL (see :func:`check_world`), else the CPU."""
    import torch

    return torch.device("cuda", rank) if backend == "nccl" else torch.device("cpu")


@dataclass(frozen=True)
class RankContext:
    """What the function run on a rank gets: who it is, where it runs, and a channel to the parent."""

    rank: int
    world_size: int
    backend: str
    device: torch.device
    _results: Any = field(repr=False)

    def send(self, value: Any) -> None:
        """Stream ``value`` to the parent now (:func:`stream_from_ranks` yields it as ``(rank, value)``)."""
        self._results.put(("sent", self.rank, value))


def one_tensor_collectives() -> tuple[Callable[..., Any], Callable[..., Any]]:
    """(reduce_scatter(output, input), all_gather(output, input)) into and out of one tensor each, for a
    rank's process: torch 2.13's ``*_single`` names (the old ones warn), torch 2.11's
    ``reduce_scatter_tensor`` and ``all_gather_into_tensor`` where those are absent (the GPU hosts' torch)."""
    import torch.distributed as dist

    return (getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor,
            getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor)


def run_on_ranks(fn: Callable[..., Any], world_size: int, args: Sequence[Any] = (), *, backend: str = "gloo",
                 timeout_s: float | None = DEFAULT_TIMEOUT_S, idle_timeout_s: float | None = None,
                 what: str = "multi-process run", timeout_hint: str = "",
                 pin_cpus: bool = False) -> list[Any]:
    """Run ``fn(ctx, *args)`` on ``world_size`` ranks; the value each rank returned, in rank order.

    ``timeout_s`` limits the whole run, ``idle_timeout_s`` the wait for any message from a rank (None: no
    limit). Values a rank sends with ``ctx.send`` are dropped here; use :func:`stream_from_ranks` for them.
    Any failure is one AutoshardError line starting with ``what`` (``timeout_hint`` is added to timeouts).
    ``pin_cpus``: each rank on a physical core of its own (:func:`rank_cpus`).
    """
    done: dict[int, Any] = {}
    with closing(_events(fn, world_size, args, backend, timeout_s, idle_timeout_s, what, timeout_hint,
                         pin_cpus)) as ev:
        for kind, rank, value in ev:
            if kind == "done":
                done[rank] = value
    return [done[r] for r in range(world_size)]


def stream_from_ranks(fn: Callable[..., Any], world_size: int, args: Sequence[Any] = (), *,
                      backend: str = "gloo", timeout_s: float | None = None,
                      idle_timeout_s: float | None = DEFAULT_TIMEOUT_S, what: str = "multi-process run",
                      timeout_hint: str = "", pin_cpus: bool = False) -> Iterator[tuple[int, Any]]:
    """Like :func:`run_on_ranks`, but yield ``(rank, value)`` for each ``ctx.send`` as it arrives.

    The generator ends once every rank has returned (return values are dropped). Closing it early, an
    error, or Ctrl-C stops the processes; by default only progress is timed (``idle_timeout_s``), so a long
    stream of sends can run as long as it keeps sending.
    """
    with closing(_events(fn, world_size, args, backend, timeout_s, idle_timeout_s, what, timeout_hint,
                         pin_cpus)) as ev:
        for kind, rank, value in ev:
            if kind == "sent":
                yield rank, value


def _events(fn: Callable[..., Any], world: int, args: Sequence[Any], backend: str, timeout_s: float | None,
            idle_timeout_s: float | None, what: str, timeout_hint: str,
            pin_cpus: bool = False) -> Iterator[tuple[str, int, Any]]:
    """Start the ranks and yield ("sent" | "done", rank, value) until all are done; stop them on any exit."""
    import torch.multiprocessing as mp

    check_world(backend, world)
    cpus: list[int | None] = [*rank_cpus(world)] if pin_cpus else [None] * world
    if pin_cpus:
        log.info("%s: ranks pinned to CPUs %s, one physical core each", what, cpus)
    limits = [t for t in (timeout_s, idle_timeout_s) if t is not None]
    pg_timeout_s = min(limits) if limits else DEFAULT_TIMEOUT_S  # a hung collective must not outlive the run
    hint = f"; {timeout_hint}" if timeout_hint else ""
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=_rank_main, daemon=True,
                         args=(fn, r, world, port, backend, pg_timeout_s, tuple(args), results, cpus[r]))
             for r in range(world)]
    finished: set[int] = set()
    exited_at: dict[int, float] = {}
    try:
        for p in procs:
            p.start()
        start = last = time.monotonic()
        while len(finished) < world:
            now = time.monotonic()
            if timeout_s is not None and now - start > timeout_s:
                raise AutoshardError(f"{what} did not finish within {timeout_s:.0f} s; the processes were "
                                     f"stopped{hint}")
            if idle_timeout_s is not None and now - last > idle_timeout_s:
                raise AutoshardError(f"{what}: no result from the ranks within {idle_timeout_s:.0f} s; the "
                                     f"processes were stopped{hint}")
            try:
                msg = results.get(timeout=0.5)
            except queue_mod.Empty:
                _check_alive(procs, finished, exited_at, what)
                continue
            last = time.monotonic()
            kind, rank = msg[0], msg[1]
            if kind == "error":
                log.info("%s: rank %d failed:\n%s", what, rank, msg[3])
                raise AutoshardError(f"{what} failed on rank {rank}: {msg[2]}")
            if kind == "done":
                finished.add(rank)
            yield kind, rank, msg[2]
        _join(procs, JOIN_GRACE_S)
    finally:
        _stop(procs)
        results.close()


def _check_alive(procs: Sequence[Any], finished: set[int], exited_at: dict[int, float], what: str) -> None:
    """Raise once a rank that has not reported has been gone for DEATH_GRACE_S (its last message may lag)."""
    now = time.monotonic()
    for r, p in enumerate(procs):
        if r in finished or p.exitcode is None:
            continue
        if now - exited_at.setdefault(r, now) >= DEATH_GRACE_S:
            raise AutoshardError(f"{what} failed on rank {r}: the process exited with code {p.exitcode} "
                                 "before reporting (killed, or out of memory?)")


def _join(procs: Sequence[Any], grace_s: float) -> None:
    deadline = time.monotonic() + grace_s
    for p in procs:
        if p.pid is not None:
            p.join(max(0.0, deadline - time.monotonic()))


def _stop(procs: Sequence[Any]) -> None:
    """Terminate (then kill) every process of this run still alive; only the ones it started."""
    started = [p for p in procs if p.pid is not None]
    for p in started:
        if p.is_alive():
            p.terminate()
    for p in started:
        p.join(timeout=5)
        if p.is_alive():
            p.kill()
            p.join(timeout=5)


def _rank_main(fn: Callable[..., Any], rank: int, world: int, port: int, backend: str, pg_timeout_s: float,
               args: tuple[Any, ...], results: Any, cpu: int | None = None) -> None:
    """A child: join the group, run ``fn``; put ("done", rank, value) or ("error", rank, line, traceback).
    ``cpu``: the logical CPU this rank is pinned to (None: wherever the OS puts it)."""
    import torch.distributed as dist

    try:
        if cpu is not None:
            # the calling thread only: first, so every thread started after it (the parent watch, gloo's,
            # torch's pool) inherits the mask
            os.sched_setaffinity(0, {cpu})
        _exit_with_parent()
        import torch

        device = rank_device(backend, rank)
        if device.type == "cuda":
            torch.cuda.set_device(device)  # before init, so NCCL binds this rank to its own GPU
        dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                                timeout=timedelta(seconds=pg_timeout_s))
        value = fn(RankContext(rank, world, backend, device, results), *args)
        results.put(("done", rank, value))
    except BaseException as e:  # noqa: BLE001 - the parent must hear of every failure, as one line
        lines = f"{type(e).__name__}: {e}".strip().splitlines()
        results.put(("error", rank, lines[0] if lines else type(e).__name__, traceback.format_exc()))
        # no re-raise: the parent reports it; a re-raise would print the traceback on the user's terminal
    finally:
        if dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()


def _exit_with_parent() -> None:
    """Exit if the parent dies (killed without clean-up), instead of waiting out the collective timeout."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(1.0)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, daemon=True, name="parent-watch").start()
