"""A roofline-style estimator: bytes moved / bandwidth + launch overhead, as TorchRec's planner estimates.

It needs no profiling, so planning works on a fresh machine, and it is the yardstick the learned model is
compared against. ``fit`` calibrates its few constants to measured shard costs by least squares.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from autoshard.costs.breakdown import ShardRef
from autoshard.costs.comm import DEFAULT_COMM, AlphaBeta
from autoshard.tasks import Task


@dataclass(frozen=True)
class AnalyticalCostModel:
    """fwd = launch + lookup bytes / fwd bandwidth; bwd = launch + lookup bytes / bwd bandwidth; comm alpha-beta.

    Lookup bytes of a shard = batch x pooling factor x dim x element bytes (each looked-up row is read, and in
    backward read and written) plus the pooled output batch x dim x element bytes.
    """

    fwd_launch_ms: float = 0.05
    fwd_bytes_per_ms: float = 4.0e6
    bwd_launch_ms: float = 0.1
    bwd_bytes_per_ms: float = 1.5e6
    comm: AlphaBeta = DEFAULT_COMM
    name: str = "analytical"
    """Defaults are order-of-magnitude CPU values from shared/README.md's reference timing (one 100k x 64
    table, pooling 20, batch 2048: ~8 ms fwd+bwd at one thread); calibrate with ``fit`` for real use."""

    @staticmethod
    def shard_bytes(task: Task, shard: ShardRef) -> float:
        t = task.tables[shard.table]
        return task.batch_size * (t.pooling_factor + 1.0) * shard.dim * task.precision.bytes

    def device_costs(self, task: Task, devices: Sequence[Sequence[ShardRef]]) -> np.ndarray:
        out = np.zeros((len(devices), 3))
        for g, shards in enumerate(devices):
            if not shards:
                continue
            nbytes = sum(self.shard_bytes(task, s) for s in shards)
            dim_sum = sum(s.dim for s in shards)
            out[g, 0] = self.fwd_launch_ms + nbytes / self.fwd_bytes_per_ms
            out[g, 1] = self.bwd_launch_ms + nbytes / self.bwd_bytes_per_ms
            out[g, 2] = self.comm.device_comm_ms(dim_sum, task.batch_size, task.num_devices,
                                                 task.precision.bytes)
        return out

    def fit(self, lookup_bytes: np.ndarray, fwd_ms: np.ndarray, bwd_ms: np.ndarray) -> AnalyticalCostModel:
        """Least-squares launch and bandwidth for fwd and bwd from measured shards (their lookup bytes)."""
        a = np.stack([np.ones_like(lookup_bytes), lookup_bytes], axis=1)
        (f0, f1), *_ = np.linalg.lstsq(a, fwd_ms, rcond=None)
        (b0, b1), *_ = np.linalg.lstsq(a, bwd_ms, rcond=None)
        return replace(self, fwd_launch_ms=max(float(f0), 0.0), fwd_bytes_per_ms=1.0 / max(float(f1), 1e-12),
                       bwd_launch_ms=max(float(b0), 0.0), bwd_bytes_per_ms=1.0 / max(float(b1), 1e-12),
                       name="analytical-fitted")
