"""How much of the planning model's per-device error on a bench run is the model's and how much the
instrument's, from the measurement rounds the run stores.

Every distinct device of every task (its shards; a device that several plans share counts once) has the
planning model's predicted fwd + bwd and its measured fwd + bwd in each of the run's R rounds. Its error in
round r is e_r = log(measured_r / predicted), centred per task and round on the median over the task's
devices: a plan comparison sees devices against each other, so the model's level on a task and a round that
is slow for every device cancel there. The rounds are rotated, each with a fresh evaluator, and contention
arrives in episodes of seconds (docs/benchmarks.md, "Stop 22"), so the round-to-round noise is taken as
independent between rounds; then the covariance of two rounds' errors over the devices is the variance of
the part they share, the model's own error, and the rest of a round's variance is the instrument's. The
bench keeps each device's minimum over the rounds per component; the instrument's part of that is its
error's variance minus the shared part.

Why: a planner can only gain what the model sees beyond its error, and the bench only resolves a gain larger
than its own noise. Where the instrument's part of the kept minimum is as large as the model's error (the
4-device DLRM suites on the AMD EPYC VM with 3 rounds, docs/benchmarks.md "Stop 66"), more rounds sharpen the
verdicts more than a better model would.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from autoshard.errors import AutoshardError
from autoshard.pipeline.results import TaskResult


@dataclass(frozen=True)
class ErrorSplit:
    """A run's per-device error (log measured / predicted fwd + bwd, centred per task and round), split."""

    devices: int
    """Distinct devices with every round recorded, over the tasks that have two or more."""
    rounds: int
    round_sd: float
    """sd over the devices of one round's error (the mean variance over the rounds, square-rooted)."""
    correlation: float
    """Mean over the pairs of rounds of the correlation of their errors over the devices."""
    model_sd: float
    """sd of the part the rounds share: the model's own error."""
    round_noise_sd: float
    """sd of one round's remaining part: the instrument's."""
    min_noise_sd: float
    """sd of the instrument's part of the minimum over the rounds (what the bench keeps)."""


def _device_key(placements: Sequence, rank: int) -> tuple:
    """What a device holds: every shard on ``rank`` with its table and sharding type."""
    return tuple((p.table, p.sharding_type.value, s.col_start, s.col_end, s.row_start, s.row_end)
                 for p in placements for s in p.shards if s.rank == rank)


def _task_blocks(results: Sequence[TaskResult]) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per task with two or more such devices: (predicted fwd + bwd (n,), measured fwd (n, R), measured bwd
    (n, R)) of every distinct device with all its R rounds recorded and positive."""
    blocks = []
    for task in results:
        seen: dict[tuple, tuple[float, list[tuple[float, float]]]] = {}
        for r in task.results:
            if not (r.ok and r.plan is not None and r.predicted is not None and r.device_rounds_ms):
                continue
            placements = sorted(r.plan.placements, key=lambda p: p.table)
            for rank, device in enumerate(r.predicted.devices):
                key = _device_key(placements, rank)
                predicted_ms = device.fwd_ms + device.bwd_ms
                per_round = [tuple(rnd[rank]) for rnd in r.device_rounds_ms]
                if not key or key in seen or predicted_ms <= 0 or any(f + b <= 0 for f, b in per_round):
                    continue
                seen[key] = (predicted_ms, per_round)
        widths = {len(rounds) for _, rounds in seen.values()}
        if len(seen) >= 2 and len(widths) == 1:
            timed = np.array([rounds for _, rounds in seen.values()], dtype=np.float64)  # (n, R, 2)
            blocks.append((np.array([p for p, _ in seen.values()]), timed[:, :, 0], timed[:, :, 1]))
    if not blocks:
        raise AutoshardError("no task has two or more devices timed in rounds with predictions to compare")
    widths = {b[1].shape[1] for b in blocks}
    if len(widths) != 1:
        raise AutoshardError(f"tasks recorded different numbers of rounds {sorted(widths)}")
    return blocks


def _round_errors(blocks: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> np.ndarray:
    """(devices, R): each round's log measured / predicted fwd + bwd, centred per task on the median."""
    out = []
    for predicted, fwd, bwd in blocks:
        block = np.log((fwd + bwd) / predicted[:, None])
        out.append(block - np.median(block, axis=0))
    return np.vstack(out)


def _least_errors(blocks: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]],
                  kept: Sequence[int]) -> np.ndarray:
    """(devices,): log of the minimum over the rounds ``kept`` (per component) / predicted, centred per task
    on the median."""
    out = []
    for predicted, fwd, bwd in blocks:
        least = np.log((fwd[:, kept].min(axis=1) + bwd[:, kept].min(axis=1)) / predicted)
        out.append(least - np.median(least))
    return np.concatenate(out)


def device_errors(results: Sequence[TaskResult]) -> np.ndarray:
    """(devices, R + 1): log measured / predicted fwd + bwd of every distinct device with all its R rounds
    recorded, then of its minimum over the rounds (per component, as the bench reduces), each column centred
    per task on the median over the task's devices. Raises AutoshardError without two such devices in any
    task, or where tasks recorded different numbers of rounds."""
    return _device_errors(_task_blocks(results))


def _device_errors(blocks: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> np.ndarray:
    """``device_errors`` of ``_task_blocks``' blocks."""
    return np.column_stack([_round_errors(blocks), _least_errors(blocks, range(blocks[0][1].shape[1]))])


def split_by_rounds(results: Sequence[TaskResult]) -> tuple[ErrorSplit, tuple[float, ...]]:
    """``split(device_errors(results))`` and the instrument's sd in a device's kept minimum of k rounds, for
    k = 1 .. R (the run's rounds): its variance averaged over every k of the R rounds, less the model's part.
    What a run with fewer rounds would have kept, and, read against the model's part, how many rounds this
    suite needs on this host (``rounds_needed``); the last entry is the split's ``min_noise_sd``. It can rise
    with k where the rounds' noise is small: a device's minimum falls further the noisier its rounds, and that
    spread between devices counts here as the instrument's (the Intel VM's DLRM-20 (2), docs/benchmarks.md
    "Stop 67"). Raises as ``device_errors`` and ``split``."""
    blocks = _task_blocks(results)
    rounds = blocks[0][1].shape[1]
    s = split(_device_errors(blocks))
    curve = []
    for k in range(1, rounds + 1):
        variances = []
        for kept in _subsets(rounds, k):
            least = _least_errors(blocks, kept)
            variances.append(float(np.mean((least - least.mean()) ** 2)))
        curve.append(math.sqrt(max(float(np.mean(variances)) - s.model_sd ** 2, 0.0)))
    return s, tuple(curve)


def min_noise_by_rounds(results: Sequence[TaskResult]) -> tuple[float, ...]:
    """The curve of ``split_by_rounds``: the instrument's sd in a kept minimum of k = 1 .. R rounds."""
    return split_by_rounds(results)[1]


SUBSETS = 256
"""At most this many subsets of k rounds averaged per k (all of them where there are no more; else a
fixed-seed draw, so a report is deterministic)."""


def _subsets(rounds: int, k: int) -> list[tuple[int, ...]]:
    """The subsets of k of ``rounds`` rounds ``min_noise_by_rounds`` averages over."""
    if math.comb(rounds, k) <= SUBSETS:
        return list(itertools.combinations(range(rounds), k))
    rng = np.random.default_rng(k)
    return [tuple(sorted(rng.choice(rounds, size=k, replace=False).tolist())) for _ in range(SUBSETS)]


def rounds_needed(curve: Sequence[float], model_sd: float) -> int | None:
    """The fewest rounds whose kept minimum carries less instrument noise than the model's own error
    (``min_noise_by_rounds``), None where not even all the run's rounds do."""
    return next((k for k, sd in enumerate(curve, start=1) if sd < model_sd), None)


def split(errors: np.ndarray) -> ErrorSplit:
    """The shared (model) and round-to-round (instrument) parts of ``device_errors``' columns."""
    rounds = errors[:, :-1]
    if rounds.shape[1] < 2:
        raise AutoshardError("one round per device: the rounds cannot split the error (bench with --rounds 2 "
                             "or more)")
    centred = rounds - rounds.mean(axis=0)
    pairs = list(itertools.combinations(range(rounds.shape[1]), 2))
    covariances = [float(np.mean(centred[:, i] * centred[:, j])) for i, j in pairs]
    shared = float(np.mean(covariances))
    sds = centred.std(axis=0)
    correlation = float(np.mean([c / (sds[i] * sds[j]) if sds[i] > 0 and sds[j] > 0 else 1.0
                                 for c, (i, j) in zip(covariances, pairs)]))
    round_var = float(np.mean(centred ** 2))
    least = errors[:, -1] - errors[:, -1].mean()
    return ErrorSplit(devices=len(errors), rounds=rounds.shape[1], round_sd=math.sqrt(round_var),
                      correlation=correlation, model_sd=math.sqrt(max(shared, 0.0)),
                      round_noise_sd=math.sqrt(max(round_var - shared, 0.0)),
                      min_noise_sd=math.sqrt(max(float(np.mean(least ** 2)) - shared, 0.0)))


def error_split(results: Sequence[TaskResult]) -> ErrorSplit | None:
    """``split(device_errors(results))``, None where the run has too few devices or rounds to split."""
    try:
        return split(device_errors(results))
    except AutoshardError:
        return None
