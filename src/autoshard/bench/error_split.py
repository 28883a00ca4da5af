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


def device_errors(results: Sequence[TaskResult]) -> np.ndarray:
    """(devices, R + 1): log measured / predicted fwd + bwd of every distinct device with all its R rounds
    recorded, then of its minimum over the rounds (per component, as the bench reduces), each column centred
    per task on the median over the task's devices. Raises AutoshardError without two such devices in any
    task, or where tasks recorded different numbers of rounds."""
    blocks = []
    for task in results:
        seen: dict[tuple, list[float]] = {}
        for r in task.results:
            if not (r.ok and r.plan is not None and r.predicted is not None and r.device_rounds_ms):
                continue
            placements = sorted(r.plan.placements, key=lambda p: p.table)
            for rank, device in enumerate(r.predicted.devices):
                key = _device_key(placements, rank)
                predicted_ms = device.fwd_ms + device.bwd_ms
                per_round = [rnd[rank] for rnd in r.device_rounds_ms]
                if not key or key in seen or predicted_ms <= 0 or any(f + b <= 0 for f, b in per_round):
                    continue
                least = min(f for f, _ in per_round) + min(b for _, b in per_round)
                seen[key] = [math.log((f + b) / predicted_ms) for f, b in per_round]
                seen[key].append(math.log(least / predicted_ms))
        widths = {len(v) for v in seen.values()}
        if len(seen) >= 2 and len(widths) == 1:
            block = np.array(list(seen.values()))
            blocks.append(block - np.median(block, axis=0))
    if not blocks:
        raise AutoshardError("no task has two or more devices timed in rounds with predictions to compare")
    widths = {b.shape[1] for b in blocks}
    if len(widths) != 1:
        raise AutoshardError(f"tasks recorded different numbers of rounds {sorted(w - 1 for w in widths)}")
    return np.vstack(blocks)


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
