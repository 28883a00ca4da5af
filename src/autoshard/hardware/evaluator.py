"""Ground truth: a plan's cost measured on the real kernels.

Every device's shards are timed as one fused op (``hardware.kernel.measure_shard``) in this process, one
device after another (on a shared 2-vCPU host, D processes at once would each run ~D/2 times slower; see
shared/README.md). The step's collectives (``autoshard.costs.step``: ids in, pooled outputs out, gradients
back, replicas all-reduced) come either from the alpha-beta model fitted to measured all-to-alls
(``autoshard profile-comm``; what planners use) or, with ``collectives='measure'``, from timing the plan's
own uneven all-to-alls on D local processes (``hardware.collectives``), the model's estimate kept beside
each. The plan cost is the training step's: max fwd + forward collectives + max bwd + backward collectives.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TypeVar

import numpy as np

from autoshard.breakdown import CollectiveCost, PlanCost
from autoshard.costs.base import ContentsAccumulator, CostModel
from autoshard.costs.comm import DEFAULT_COMM, AlphaBeta
from autoshard.costs.step import (
    ALL_TO_ALLS,
    TIMED_KINDS,
    collective_matrices,
    compose,
    device_comm_ms,
    device_volumes,
    plan_collectives,
)
from autoshard.errors import AutoshardError
from autoshard.hardware.collectives import DEFAULT_REPEATS, measure_all_to_alls
from autoshard.hardware.kernel import MeasureSettings, measure_shard
from autoshard.hardware.multiprocess import rank_cpus
from autoshard.plan import Plan, validate
from autoshard.shards import ShardRef
from autoshard.tasks import Task

log = logging.getLogger(__name__)

T = TypeVar("T")

SOURCE = "measured"

ROUND_STATISTICS = ("min", "median")
"""How a device's timings over the measurement rounds become its cost (``combine_rounds``)."""
UNRECORDED_ROUND_STATISTIC = "median"
"""The statistic of results that do not record theirs (every bench run before stop 22)."""
DEFAULT_ROUND_STATISTIC = "min"
"""The minimum over rounds, per device and component. Why not the median: on a shared host the noise is one-
sided (contention only adds time) and comes in episodes seconds long that slow every repeat of a timing, so
neither the repeats' median nor a retry removes it, and the median of 3 rounds still keeps a slow round
whenever two are slow. Measured (stop 22, AMD EPYC VM; every distinct device of a bench task timed in 9
rotated rounds, estimators compared over all 84 three-round subsets, each device relative to the subset's
mean over devices, which is what a plan comparison sees): DLRM-50 (2) task 0, 12 devices, log-sd 0.072
(median of 3), 0.048 (min of 3), 0.049 (mean of 3); DLRM-20 (2) task 1, 12 devices, 0.037, 0.022, 0.039
(``benchmarks/round_statistic.py``; docs/benchmarks.md, "Stop 22"). The minimum is the cost with the least
contention, which is also what a dedicated accelerator sees; results record the statistic and older ones
(median) are restated from their stored rounds (``pipeline.measure.restate``)."""

Progress = Callable[[int, int], None]
"""Called with (devices done, devices in all) after each device is measured."""


def contents_key(task: Task, shards: Sequence[ShardRef]) -> tuple[object, ...]:
    """What a device's kernel time depends on: the batch, the precision and its shards (table names, column
    counts, row ranges, replicas), in any order. Devices with equal keys time alike."""
    contents = tuple(sorted((task.tables[s.table].name, s.dim, s.row_start, -1 if s.row_end is None
                             else s.row_end, s.replica) for s in shards))
    return (task.batch_size, task.precision.value, contents)


class MeasuredCostModel:
    """The ``CostModel`` that measures: fwd/bwd timed on the real fused kernel, comm from ``comm``.

    A device's contents are measured once per model instance (keyed by task batch, precision and the shards'
    table names and dims), so a planner asking again for the same device gets the same number.
    """

    name = SOURCE

    def __init__(self, settings: MeasureSettings | None = None, comm: AlphaBeta = DEFAULT_COMM) -> None:
        self.settings = settings or MeasureSettings()
        self.comm = comm
        self._cache: dict[tuple[object, ...], tuple[float, float]] = {}

    def with_comm(self, comm: AlphaBeta) -> MeasuredCostModel:
        """Measuring with the same settings, the all-to-all priced by ``comm``; devices already measured are
        not measured again (the kernels' timings do not depend on the comm model)."""
        other = MeasuredCostModel(self.settings, comm)
        other._cache = self._cache
        return other

    def _key(self, task: Task, shards: Sequence[ShardRef]) -> tuple[object, ...]:
        return contents_key(task, shards)

    def compute_ms(self, task: Task, shards: Sequence[ShardRef]) -> tuple[float, float]:
        """(fwd, bwd) milliseconds of one device, measured (or from this instance's cache)."""
        if not shards:
            return (0.0, 0.0)
        key = self._key(task, shards)
        if key not in self._cache:
            t = measure_shard(task, shards, self.settings)
            log.info("measured %d shards: fwd %.3f ms (cv %.3f), bwd %.3f ms (cv %.3f), %d tries",
                     len(shards), t.fwd_ms, t.fwd_cv, t.bwd_ms, t.bwd_cv, t.tries)
            self._cache[key] = (t.fwd_ms, t.bwd_ms)
        return self._cache[key]

    def accumulator(self, task: Task, num_envs: int) -> ContentsAccumulator:
        return ContentsAccumulator(self, task, num_envs)

    def device_costs(self, task: Task, devices: Sequence[Sequence[ShardRef]],
                     progress: Progress | None = None) -> np.ndarray:
        out = np.zeros((len(devices), 3))
        for g, shards in enumerate(devices):
            if shards:
                out[g, 0], out[g, 1] = self.compute_ms(task, shards)
            if progress is not None:
                progress(g + 1, len(devices))
        out[:, 2] = device_comm_ms(task, self.comm, device_volumes(task, devices))
        return out


class RoundsMinimum:
    """Prices every device content with ``rounds`` fresh evaluators and keeps the least per component: the
    bench's default statistic for its devices (``DEFAULT_ROUND_STATISTIC``; under 'median' a floor priced so
    is only lower), for what is compared with them, the order rotated each round (``rotated_rounds``). Why:
    one timing of a hot table's backward alone varied 20-30% between passes on this CPU (docs/benchmarks.md,
    "Stop 53")."""

    def __init__(self, make_evaluator: Callable[[], CostModel], rounds: int) -> None:
        self.make_evaluator, self.rounds = make_evaluator, rounds

    def device_costs(self, task: Task, devices: Sequence[Sequence[ShardRef]]) -> np.ndarray:
        if not devices:
            return np.zeros((0, 3))
        # rotated as the bench's rounds are: the first content of a call follows whatever ran before it
        per_round = rotated_rounds(list(devices), self.rounds,
                                   lambda order: self.make_evaluator().device_costs(task, order))
        return per_round.min(axis=0)


def measure_plans_collectives(task: Task, plans: Sequence[Plan], comm: AlphaBeta, backend: str = "auto",
                               repeats: int = DEFAULT_REPEATS,
                               pin_cpus: bool = False) -> list[tuple[CollectiveCost, ...]]:
    """Each plan's collectives timed on D local processes with the plan's own uneven splits
    (``hardware.collectives``; row shards' reduce-scatter and all-gather as those collectives), all plans in
    one process group; each keeps the network model's estimate beside the measurement. The replicas'
    all-reduce and the ids' bucketisation stay modelled, and so does a row collective of a plan without row
    shards (nothing moves: 0). ``pin_cpus``: every rank on a physical core of its own."""
    devices = [plan.device_shards(task) for plan in plans]
    modelled = [plan_collectives(task, comm, devs) for devs in devices]
    if task.num_devices <= 1 or not plans:
        return modelled
    todo = []  # (plan, collective name, matrix) of every collective to time
    for p, devs in enumerate(devices):
        for name, m in collective_matrices(task, device_volumes(task, devs)).items():
            if name in ALL_TO_ALLS or m.any():
                todo.append((p, name, m))
    timings = measure_all_to_alls([m for _, _, m in todo], backend=backend, repeats=repeats,
                                  pin_cpus=pin_cpus, kinds=[TIMED_KINDS[name] for _, name, _ in todo])
    timed = {(p, name): t.ms for (p, name, _), t in zip(todo, timings)}
    return [tuple(replace(c, ms=timed[p, c.name], measured_ms=timed[p, c.name]) if (p, c.name) in timed else c
                  for c in cols) for p, cols in enumerate(modelled)]


def measure_plan_collectives(task: Task, plan: Plan, comm: AlphaBeta, backend: str = "auto",
                             repeats: int = DEFAULT_REPEATS,
                             pin_cpus: bool = False) -> tuple[CollectiveCost, ...]:
    """``measure_plans_collectives`` of one plan."""
    return measure_plans_collectives(task, [plan], comm, backend, repeats, pin_cpus)[0]


def evaluate_plan(task: Task, plan: Plan, settings: MeasureSettings | None = None,
                  comm: AlphaBeta = DEFAULT_COMM, progress: Progress | None = None,
                  collectives: str = "model", backend: str = "auto", rounds: int = 1,
                  statistic: str = DEFAULT_ROUND_STATISTIC, pin_cpus: bool = False) -> PlanCost:
    """Validate ``plan`` against ``task`` (PlanError if it does not fit), then measure every device's kernels
    (``evaluate_plan_rounds``); the step's collectives are the network model's (``collectives='model'``) or
    timed on D processes (``'measure'``, each on a physical core of its own with ``pin_cpus``)."""
    return evaluate_plan_rounds(task, plan, settings, comm, progress, collectives, backend, rounds,
                                statistic, pin_cpus)[0]


def evaluate_plan_rounds(task: Task, plan: Plan, settings: MeasureSettings | None = None,
                         comm: AlphaBeta = DEFAULT_COMM, progress: Progress | None = None,
                         collectives: str = "model", backend: str = "auto", rounds: int = 1,
                         statistic: str = DEFAULT_ROUND_STATISTIC,
                         pin_cpus: bool = False) -> tuple[PlanCost, np.ndarray]:
    """``evaluate_plan``'s cost and every round's (rounds, devices, fwd/bwd) kernel timings: each device
    with shards timed once a round, a fresh evaluator each round and the order rotated (``rotated_rounds``),
    reduced per device and component by ``statistic``. ``progress(done, total)`` counts device timings.
    ``pin_cpus``: the measured collectives' ranks each on a physical core of its own; the host's cores are
    checked before any kernel is timed."""
    validate(plan, task)
    if collectives not in ("model", "measure"):
        raise AutoshardError(f"collectives {collectives!r}: use 'model' or 'measure'")
    if pin_cpus:
        if collectives != "measure":
            raise AutoshardError("pin_cpus pins the ranks of measured collectives; use collectives='measure'")
        rank_cpus(plan.num_devices)  # too few cores: one line now, not after every kernel was timed
    if rounds < 1:
        raise AutoshardError(f"rounds {rounds} must be >= 1")
    check_round_statistic(statistic)
    devices = plan.device_shards(task)
    present = [g for g, shards in enumerate(devices) if shards]
    per_round = np.zeros((rounds, len(devices), 2))
    if present:
        per_round[:, present] = time_in_rounds(task, [devices[g] for g in present], settings, comm, rounds,
                                               progress)
    kernels = np.zeros((len(devices), 3))
    kernels[:, :2] = combine_rounds(per_round, statistic)
    kernels[:, 2] = device_comm_ms(task, comm, device_volumes(task, devices))
    steps = (measure_plan_collectives(task, plan, comm, backend, pin_cpus=pin_cpus)
             if collectives == "measure" else plan_collectives(task, comm, devices))
    return compose(kernels, steps, SOURCE), per_round


def check_round_statistic(statistic: str) -> str:
    """``statistic`` if it is one of ``ROUND_STATISTICS``, else a one-line error."""
    if statistic not in ROUND_STATISTICS:
        raise AutoshardError(f"round statistic {statistic!r}: use one of {', '.join(ROUND_STATISTICS)}")
    return statistic


def combine_rounds(per_round: np.ndarray, statistic: str = DEFAULT_ROUND_STATISTIC) -> np.ndarray:
    """``per_round`` (rounds, ...) reduced over its first axis by ``statistic`` ('min' or 'median')."""
    check_round_statistic(statistic)
    return np.min(per_round, axis=0) if statistic == "min" else np.median(per_round, axis=0)


def time_in_rounds(task: Task, devices: Sequence[Sequence[ShardRef]], settings: MeasureSettings | None,
                   comm: AlphaBeta, rounds: int, progress: Progress | None = None) -> np.ndarray:
    """(rounds, devices, fwd/bwd) ms: every one of ``devices`` (non-empty shard lists) timed once a round,
    a fresh evaluator each round, the order rotated (``rotated_rounds``); ``progress(done, total)`` after
    each timing."""
    done = 0

    def time_round(order: list[int]) -> np.ndarray:
        nonlocal done
        evaluator = MeasuredCostModel(settings, comm)
        out = []
        for i in order:
            out.append(evaluator.compute_ms(task, devices[i]))
            done += 1
            if progress is not None:
                progress(done, len(devices) * rounds)
        return np.array(out, dtype=np.float64).reshape(len(order), 2)

    return rotated_rounds(list(range(len(devices))), rounds, time_round)


def rotated_rounds(items: Sequence[T], rounds: int, time_round: Callable[[list[T]], np.ndarray],
                   after_round: Callable[[int], None] | None = None) -> np.ndarray:
    """``(rounds, len(items), ...)``: every item timed once a round by ``time_round(order)`` (which returns
    one row per item of ``order``, in that order; it makes a fresh evaluator, so nothing is cached across
    rounds), the order rotated by ``len(items) // rounds`` each round so no item is always timed first (after
    an idle gap) or last. ``after_round(r)`` is called after round r (1-based). The bench's and the measured
    picks' protocol: one place for it."""
    if rounds < 1:
        raise AutoshardError(f"rounds {rounds} must be >= 1")
    n = len(items)
    out: np.ndarray | None = None
    for rnd in range(rounds):
        shift = (rnd * max(1, n // rounds)) % max(1, n)
        rotated = list(range(n))[shift:] + list(range(n))[:shift]
        if rotated:
            rows = np.asarray(time_round([items[i] for i in rotated]), dtype=np.float64)
            if out is None:
                out = np.zeros((rounds, n, *rows.shape[1:]))
            out[rnd, rotated] = rows
        if after_round is not None:
            after_round(rnd + 1)
    return out if out is not None else np.zeros((rounds, 0))


def evaluate_plans(task: Task, plans: Sequence[Plan], settings: MeasureSettings | None = None,
                   comm: AlphaBeta = DEFAULT_COMM, rounds: int = 3,
                   statistic: str = DEFAULT_ROUND_STATISTIC) -> list[PlanCost]:
    """Measure several plans of one task side by side: the distinct device contents of all of them timed in
    ``rounds`` rounds, a fresh evaluator each round and the order rotated (so no device is always timed first
    after an idle gap), the ``statistic`` over rounds (``combine_rounds``) per device and component kept; a
    device two plans share is timed once a round and both get that timing (timing them apart would only add
    noise between them). Collectives from the network model. One timing of a device moves 4-13% on a shared
    host (docs/benchmarks.md): rounds are what let plans a few percent apart be told apart."""
    if rounds < 1:
        raise AutoshardError(f"rounds {rounds} must be >= 1")
    check_round_statistic(statistic)
    for plan in plans:
        validate(plan, task)
    layouts = [plan.device_shards(task) for plan in plans]
    keys = [[contents_key(task, d) if d else None for d in devs] for devs in layouts]
    unique: dict[tuple[object, ...], list[ShardRef]] = {}
    for devs, ks in zip(layouts, keys):
        for d, k in zip(devs, ks):
            if k is not None:
                unique.setdefault(k, list(d))
    order = list(unique)
    per_round = time_in_rounds(task, [unique[k] for k in order], settings, comm, rounds)
    combined = dict(zip(order, combine_rounds(per_round, statistic)))
    out = []
    for devs, ks in zip(layouts, keys):
        kernels = np.zeros((len(devs), 3))
        for g, k in enumerate(ks):
            if k is not None:
                kernels[g, :2] = combined[k]
        kernels[:, 2] = device_comm_ms(task, comm, device_volumes(task, devs))
        out.append(compose(kernels, plan_collectives(task, comm, devs), SOURCE))
    return out
