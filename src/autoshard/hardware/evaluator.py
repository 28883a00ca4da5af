"""Ground truth: a plan's cost measured on the real kernels.

Every device's shards are timed as one fused FBGEMM op (``hardware.kernel.measure_shard``) in this process,
one device after another (on a shared 2-vCPU host, D processes at once would each run ~D/2 times slower; see
shared/README.md), and the all-to-all comes from an alpha-beta model fitted to measured collectives
(``autoshard profile-comm``) or derived from a topology file. The plan cost is the slowest device's
fwd + bwd + comm: the embedding bottleneck of a training step.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import numpy as np

from autoshard.breakdown import PlanCost
from autoshard.costs.base import ContentsAccumulator
from autoshard.costs.comm import DEFAULT_COMM, AlphaBeta
from autoshard.hardware.kernel import MeasureSettings, measure_shard
from autoshard.plan import Plan, validate
from autoshard.shards import ShardRef
from autoshard.tasks import Task

log = logging.getLogger(__name__)

SOURCE = "measured"

Progress = Callable[[int, int], None]
"""Called with (devices done, devices in all) after each device is measured."""


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
        contents = tuple(sorted((task.tables[s.table].name, s.dim, s.row_start, -1 if s.row_end is None
                                 else s.row_end) for s in shards))
        return (task.batch_size, task.precision.value, contents)

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
                out[g, 2] = self.comm.device_comm_ms(sum(s.dim for s in shards), task.batch_size,
                                                     task.num_devices, task.precision.bytes)
            if progress is not None:
                progress(g + 1, len(devices))
        return out


def evaluate_plan(task: Task, plan: Plan, settings: MeasureSettings | None = None,
                  comm: AlphaBeta = DEFAULT_COMM, progress: Progress | None = None) -> PlanCost:
    """Validate ``plan`` against ``task`` (PlanError if it does not fit), then measure every device."""
    validate(plan, task)
    model = MeasuredCostModel(settings, comm)
    return PlanCost.from_array(model.device_costs(task, plan.device_shards(task), progress), SOURCE)
