"""The shared multi-process harness (hardware.multiprocess): results in rank order, failures as one line."""

from __future__ import annotations

import os
import time

import pytest

from autoshard.errors import AutoshardError
from autoshard.hardware import multiprocess
from autoshard.hardware.multiprocess import (
    RankContext,
    check_world,
    free_port,
    physical_cores,
    rank_cpus,
    rank_device,
    resolve_backend,
    run_on_ranks,
    stream_from_ranks,
)

# Rank functions live at module level: spawn pickles them by name.


def _rank_sum(ctx: RankContext, base: int) -> tuple[int, int, str, int]:
    """Each rank's own value plus an all-reduce, so the process group is really up."""
    import torch
    import torch.distributed as dist

    x = torch.tensor([ctx.rank + 1])
    dist.all_reduce(x)
    return base + ctx.rank, ctx.world_size, str(ctx.device), int(x.item())


def _rank_sends(ctx: RankContext, n: int) -> None:
    for i in range(n):
        ctx.send(ctx.rank * 100 + i)


def _rank_affinity(ctx: RankContext) -> list[int]:
    return sorted(os.sched_getaffinity(0))


def _rank_one_raises(ctx: RankContext) -> int:
    if ctx.rank == 1:
        raise ValueError("bad shard on this rank\nsecond line that must not reach the user")
    return ctx.rank


def _rank_one_dies(ctx: RankContext) -> int:
    if ctx.rank == 1:
        os._exit(3)
    return ctx.rank


def _rank_one_hangs(ctx: RankContext) -> int:
    if ctx.rank == 1:
        time.sleep(120)
    return ctx.rank


@pytest.mark.slow
def test_two_gloo_ranks_return_their_values_in_rank_order() -> None:
    got = run_on_ranks(_rank_sum, 2, (10,), backend="gloo", timeout_s=120)
    assert got == [(10, 2, "cpu", 3), (11, 2, "cpu", 3)]


@pytest.mark.slow
def test_sent_values_stream_to_the_parent() -> None:
    got = list(stream_from_ranks(_rank_sends, 2, (3,), idle_timeout_s=120))
    assert sorted(got) == [(0, 0), (0, 1), (0, 2), (1, 100), (1, 101), (1, 102)]
    assert [v for r, v in got if r == 1] == [100, 101, 102]  # one rank's sends arrive in order


@pytest.mark.slow
def test_a_rank_that_raises_is_one_error_line_naming_it() -> None:
    with pytest.raises(AutoshardError) as e:
        run_on_ranks(_rank_one_raises, 2, timeout_s=120, what="demo")
    msg = str(e.value)
    assert msg == "demo failed on rank 1: ValueError: bad shard on this rank"


@pytest.mark.slow
def test_a_rank_that_dies_silently_is_named() -> None:
    with pytest.raises(AutoshardError, match="rank 1.*exited with code 3") as e:
        run_on_ranks(_rank_one_dies, 2, timeout_s=120)
    assert "\n" not in str(e.value)


@pytest.mark.slow
def test_a_hung_rank_times_out_and_is_stopped() -> None:
    t0 = time.monotonic()
    with pytest.raises(AutoshardError, match="did not finish within 5 s.*; try less") as e:
        run_on_ranks(_rank_one_hangs, 2, timeout_s=5, timeout_hint="try less")
    assert "\n" not in str(e.value)
    assert time.monotonic() - t0 < 60  # the sleeping rank was terminated, not waited for


def test_nccl_with_more_ranks_than_gpus_is_refused(monkeypatch) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(AutoshardError, match="2 ranks but 1 GPU.*gloo") as e:
        check_world("nccl", 2)
    assert "\n" not in str(e.value)
    check_world("nccl", 1)
    check_world("gloo", 8)  # gloo ranks share the CPU
    # refused before anything is spawned
    monkeypatch.setattr(multiprocess, "free_port", lambda: pytest.fail("a process was about to start"))
    with pytest.raises(AutoshardError, match="one GPU per rank"):
        run_on_ranks(_rank_sum, 2, (0,), backend="nccl")


def test_backend_choice_and_rank_devices(monkeypatch) -> None:
    import torch

    assert resolve_backend("gloo") == "gloo"
    with pytest.raises(AutoshardError, match="unknown"):
        resolve_backend("mpi")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    assert resolve_backend("auto") == "gloo"  # gloo stays the default on CPU
    with pytest.raises(AutoshardError, match="nccl needs CUDA"):
        resolve_backend("nccl")
    assert rank_device("gloo", 3) == torch.device("cpu")
    assert rank_device("nccl", 3) == torch.device("cuda", 3)


def test_free_port_is_usable() -> None:
    assert 0 < free_port() < 65536


def test_rank_cpus_are_distinct_physical_cores_and_too_many_ranks_is_one_line(monkeypatch) -> None:
    cores = physical_cores()
    assert cores and len(set(cores)) == len(cores) and set(cores) <= os.sched_getaffinity(0)
    assert rank_cpus(len(cores)) == cores and rank_cpus(1) == cores[:1]
    n = len(cores) + 1
    with pytest.raises(AutoshardError, match=f"pinning {n} ranks needs {n} physical cores.*use {n - 1}") as e:
        rank_cpus(n)
    assert "\n" not in str(e.value)
    # refused before anything is spawned
    monkeypatch.setattr(multiprocess, "free_port", lambda: pytest.fail("a process was about to start"))
    with pytest.raises(AutoshardError, match="physical cores"):
        run_on_ranks(_rank_sum, n, (0,), pin_cpus=True)


def test_hyperthread_siblings_are_one_core(tmp_path) -> None:
    """Four logical CPUs on two cores (0/2 and 1/3 siblings, as Linux numbers them): one CPU per core, so no
    two pinned ranks ever share a core; a CPU without topology counts as a core of its own."""
    for cpu, core in {0: 0, 1: 1, 2: 0, 3: 1}.items():
        topo = tmp_path / f"cpu{cpu}" / "topology"
        topo.mkdir(parents=True)
        (topo / "physical_package_id").write_text("0\n")
        (topo / "core_id").write_text(f"{core}\n")
    assert physical_cores([3, 2, 1, 0], sysfs=str(tmp_path)) == [0, 1]
    assert physical_cores([2, 3], sysfs=str(tmp_path)) == [2, 3]
    assert physical_cores([0, 2, 7], sysfs=str(tmp_path)) == [0, 7]


@pytest.mark.slow
def test_pinned_ranks_each_run_on_their_own_core() -> None:
    cores = physical_cores()
    if len(cores) < 2:
        pytest.skip("one physical core: nothing to pin two ranks to")
    got = run_on_ranks(_rank_affinity, 2, backend="gloo", timeout_s=120, pin_cpus=True)
    assert got == [[cores[0]], [cores[1]]]
    unpinned = run_on_ranks(_rank_affinity, 2, backend="gloo", timeout_s=120)
    assert unpinned == [sorted(os.sched_getaffinity(0))] * 2
