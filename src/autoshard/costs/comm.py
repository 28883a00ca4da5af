"""Communication cost of a device: the all-to-all of pooled embeddings, forward and backward.

With table-wise/column-wise sharding, the embedding kernels of a device process the global batch ``B`` for its
shards, then an all-to-all sends each other rank its ``B / D`` rows of pooled outputs; backward sends the
gradients back the same way. A device with dim sum ``s`` so sends ``B / D * (D - 1) * s * elem_bytes`` bytes
each way. Its time follows the alpha-beta model (latency + bytes / bandwidth), fitted to measured all-to-alls
by ``autoshard profile-comm``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from autoshard.errors import AutoshardError
from autoshard.io import ARTEFACT_VERSION, read_json, write_json


def all_to_all_bytes(dim_sum: float | np.ndarray, batch_size: int, num_devices: int,
                     elem_bytes: int = 4) -> float | np.ndarray:
    """Bytes one device sends in one all-to-all of its pooled embeddings."""
    if num_devices <= 1:
        return 0.0
    return batch_size / num_devices * (num_devices - 1) * dim_sum * elem_bytes


@dataclass(frozen=True)
class AlphaBeta:
    """All-to-all time = alpha + bytes / bandwidth, per direction."""

    alpha_ms: float
    bytes_per_ms: float
    source: str = "default"
    """'default' (uncalibrated), or what it was fitted on (host, backend, D)."""
    reduce_scatter_factor: float = 1.0
    """A reduce-scatter's time over an all-to-all's moving the same bytes a rank: row-wise shards' pooled
    outputs are reduce-scattered (their partial sums added up on the way). 1.0 where not measured (NCCL is
    expected to run both at about the same speed, not measured here; gloo on this project's CPU host 2.7-3.5x,
    docs/benchmarks.md "Stop 44")."""
    all_gather_factor: float = 1.0
    """An all-gather's time over an all-to-all's of the same bytes: row-wise shards' output gradients are
    all-gathered. 1.0 where not measured."""
    bucketize_ns_per_id: float = 0.0
    """Each rank's time to bucketise one id of a row-wise table by row block before the id all-to-all
    (TorchRec's input distribution), nanoseconds. 0.0 where not measured."""

    def all_to_all_ms(self, bytes_sent: float) -> float:
        return self.alpha_ms + bytes_sent / self.bytes_per_ms

    def device_comm_ms(self, dim_sum: Any, batch_size: int, num_devices: int, elem_bytes: int = 4) -> Any:
        """Forward + backward pooled-output all-to-all time of a device whose shards' dims add up to
        ``dim_sum`` (the papers' per-device comm: the learned model's plan head takes it as input; the
        training step's collectives, ids included, are ``costs.step``'s). ``dim_sum`` may be a number, a
        numpy array or a torch tensor (the result is of the same kind); 0 on one device or with nothing
        placed."""
        if num_devices <= 1:
            return dim_sum * 0.0
        per_dim_ms = all_to_all_bytes(1.0, batch_size, num_devices, elem_bytes) / self.bytes_per_ms
        ms = (dim_sum > 0) * (2.0 * self.alpha_ms + (2.0 * per_dim_ms) * dim_sum)
        return float(ms) if isinstance(dim_sum, (int, float)) else ms

    def to_json(self) -> dict[str, Any]:
        return {"kind": "autoshard.comm_model", "version": ARTEFACT_VERSION, "alpha_ms": self.alpha_ms,
                "bytes_per_ms": self.bytes_per_ms, "source": self.source,
                "reduce_scatter_factor": self.reduce_scatter_factor,
                "all_gather_factor": self.all_gather_factor,
                "bucketize_ns_per_id": self.bucketize_ns_per_id}

    def save(self, path: str) -> None:
        write_json(path, self.to_json())

    @staticmethod
    def from_json(d: dict[str, Any]) -> AlphaBeta:
        """The model of ``to_json``'s dict (a comm_model.json, a checkpoint's or a bench run's ``comm``); one
        written before the row-wise terms prices them as an all-to-all with free bucketisation, as then."""
        return AlphaBeta(float(d["alpha_ms"]), float(d["bytes_per_ms"]), str(d.get("source", "")),
                         float(d.get("reduce_scatter_factor", 1.0)), float(d.get("all_gather_factor", 1.0)),
                         float(d.get("bucketize_ns_per_id", 0.0)))

    @staticmethod
    def load(path: str) -> AlphaBeta:
        d = read_json(path, kind="autoshard.comm_model")
        try:
            model = AlphaBeta.from_json(d)
        except (KeyError, TypeError, ValueError) as e:
            raise AutoshardError(f"{path}: a comm model field is missing or not a number ({e}); re-run "
                                 "profile-comm") from None
        if not model.bytes_per_ms > 0 or model.alpha_ms < 0:
            raise AutoshardError(f"{path}: alpha_ms must be >= 0 and bytes_per_ms > 0; re-run profile-comm")
        if not (model.reduce_scatter_factor > 0 and model.all_gather_factor > 0
                and model.bucketize_ns_per_id >= 0):
            raise AutoshardError(f"{path}: reduce_scatter_factor and all_gather_factor must be > 0 and "
                                 "bucketize_ns_per_id >= 0; re-run profile-comm")
        return model


DEFAULT_COMM = AlphaBeta(alpha_ms=0.2, bytes_per_ms=1.0e6,
                         source="default: gloo on loopback, order of magnitude")
"""Uncalibrated: ~0.2 ms per collective and ~1 GB/s, the order seen for gloo between processes on one host."""
