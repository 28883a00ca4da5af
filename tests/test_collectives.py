"""Uneven all-to-alls timed on real processes (hardware.collectives): checked inputs, rank and step times."""

from __future__ import annotations

import math

import numpy as np
import pytest

from autoshard.errors import AutoshardError
from autoshard.hardware.collectives import CollectiveTiming, measure_all_to_alls

MB = 1 << 20
KB = 1 << 10


@pytest.mark.parametrize(("matrices", "match"), [
    ([np.zeros((2, 3))], "square"),
    ([np.zeros(4)], "square"),
    ([np.zeros((2, 2, 2))], "square"),
    ([np.zeros((0, 0))], "at least 1 rank"),
    ([np.array([[0, -1], [2, 0]])], "non-negative"),
    ([np.array([[0, np.nan], [2, 0]])], "finite"),
    ([np.array([[0, np.inf], [2, 0]])], "finite"),
    ([np.zeros((2, 2)), np.zeros((3, 3))], "same D"),
    ([[["a", "b"], ["c", "d"]]], "not numeric"),
])
def test_bad_matrices_are_one_line_errors(matrices: list, match: str) -> None:
    with pytest.raises(AutoshardError, match=match) as e:
        measure_all_to_alls(matrices, backend="gloo")
    assert "\n" not in str(e.value)


def test_bad_repeats_backend_and_empty_input() -> None:
    with pytest.raises(AutoshardError, match="repeats"):
        measure_all_to_alls([np.zeros((2, 2))], repeats=0)
    with pytest.raises(AutoshardError, match="warmup"):
        measure_all_to_alls([np.zeros((2, 2))], warmup=-1)
    with pytest.raises(AutoshardError, match="unknown"):
        measure_all_to_alls([np.zeros((2, 2))], backend="mpi")
    assert measure_all_to_alls([]) == []
    with pytest.raises(AutoshardError, match="kinds") as e:
        measure_all_to_alls([np.zeros((2, 2))], kinds=["broadcast"])
    assert "\n" not in str(e.value)
    with pytest.raises(AutoshardError, match="kinds"):
        measure_all_to_alls([np.zeros((2, 2))] * 2, kinds=["reduce_scatter"])


def test_one_rank_is_zero_without_processes() -> None:
    got = measure_all_to_alls([np.array([[5 * MB]]), np.zeros((1, 1))], backend="nccl", repeats=3)
    # no process and no backend check (nccl needs a GPU): one rank talks to nobody
    assert got == [CollectiveTiming(0, (0.0,), 0.0, (0.0, 0.0, 0.0))] * 2


@pytest.fixture(scope="module")
def two_rank_timings() -> list[CollectiveTiming]:
    """One gloo run on 2 ranks (processes start once) over an uneven, a zero, a tiny and a large matrix."""
    uneven = np.array([[1 * MB, 3 * MB], [512 * KB, 7]])  # diagonal: local copies, not sent
    zero = np.zeros((2, 2))
    tiny = np.full((2, 2), 8 * KB)
    large = np.full((2, 2), 8 * MB)
    return measure_all_to_alls([uneven, zero, tiny, large], backend="gloo", warmup=2, repeats=7,
                               timeout_s=120)


@pytest.mark.slow
def test_two_ranks_time_uneven_and_zero_collectives(two_rank_timings: list[CollectiveTiming]) -> None:
    zero = two_rank_timings[1]
    assert [t.matrix_bytes_total for t in two_rank_timings] == [3 * MB + 512 * KB, 0, 16 * KB, 16 * MB]
    for t in two_rank_timings:
        assert len(t.per_rank_ms) == 2 and len(t.runs_ms) == 7
        assert all(math.isfinite(x) and x > 0 for x in (t.ms, *t.per_rank_ms, *t.runs_ms))
        # the step waits for the slowest rank in every run
        assert t.ms == pytest.approx(float(np.median(t.runs_ms)))
        assert t.ms >= min(t.per_rank_ms) - 1e-9
    assert zero.ms > 0  # an empty collective still costs its latency


@pytest.mark.slow
def test_more_bytes_take_longer(two_rank_timings: list[CollectiveTiming]) -> None:
    _, _, tiny, large = two_rank_timings
    assert large.ms > tiny.ms


@pytest.mark.slow
def test_reduce_scatter_and_all_gather_move_one_chunk_a_pair() -> None:
    """A row-wise plan's collectives: every rank sends each other rank the matrix's largest entry."""
    chunk = np.full((2, 2), 1 * MB)
    got = measure_all_to_alls([chunk, chunk, chunk], backend="gloo", warmup=1, repeats=3, timeout_s=120,
                              kinds=["reduce_scatter", "all_gather", "all_to_all"])
    assert [t.matrix_bytes_total for t in got] == [2 * MB] * 3
    assert all(math.isfinite(t.ms) and t.ms > 0 and len(t.runs_ms) == 3 for t in got)
