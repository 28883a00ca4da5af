"""The cluster's shape: hosts x local devices, and the bandwidth of the links within and between hosts.

Ranks are numbered host by host (TorchRec's convention): rank ``r`` is local device ``r % local`` of host
``r // local``, where ``local = num_devices / hosts``. Link bandwidths are per direction per rank; defaults
are TorchRec's planner defaults (intra-host 600 GB/s, inter-host 12.5 GB/s), DECLARED, not measured: where
a figure comes from a topology, reports say "modelled".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from autoshard.errors import AutoshardError

INTRA_HOST_BYTES_PER_MS = 600e9 / 1e3
"""600 GB/s, TorchRec's default intra-host bandwidth (NVLink class)."""
INTER_HOST_BYTES_PER_MS = 12.5e9 / 1e3
"""12.5 GB/s, TorchRec's default inter-host bandwidth (100 Gb/s network)."""


@dataclass(frozen=True)
class Topology:
    """``hosts`` hosts with the same number of local devices each, and their links."""

    hosts: int = 1
    intra_bytes_per_ms: float = INTRA_HOST_BYTES_PER_MS
    inter_bytes_per_ms: float = INTER_HOST_BYTES_PER_MS
    latency_ms: float = 0.0
    """Fixed cost of one collective (alpha)."""
    source: str = "declared (TorchRec's default bandwidths)"

    def __post_init__(self) -> None:
        if int(self.hosts) < 1:
            raise AutoshardError(f"topology: {self.hosts} hosts; give at least one")
        if not (self.intra_bytes_per_ms > 0 and self.inter_bytes_per_ms > 0) or self.latency_ms < 0:
            raise AutoshardError("topology: bandwidths must be positive and the latency >= 0")

    def local_size(self, num_devices: int) -> int:
        if num_devices % self.hosts:
            raise AutoshardError(f"topology: {num_devices} devices do not split evenly over {self.hosts} "
                                 "hosts; give devices as HOSTSxLOCAL, e.g. 2x4")
        return num_devices // self.hosts

    def host_of(self, rank: int, num_devices: int) -> int:
        return rank // self.local_size(num_devices)

    def to_json(self) -> dict[str, Any]:
        return {"hosts": self.hosts, "intra_bytes_per_ms": self.intra_bytes_per_ms,
                "inter_bytes_per_ms": self.inter_bytes_per_ms, "latency_ms": self.latency_ms,
                "source": self.source}

    @staticmethod
    def from_json(d: dict[str, Any]) -> Topology:
        try:
            return Topology(int(d.get("hosts", 1)),
                            float(d.get("intra_bytes_per_ms", INTRA_HOST_BYTES_PER_MS)),
                            float(d.get("inter_bytes_per_ms", INTER_HOST_BYTES_PER_MS)),
                            float(d.get("latency_ms", 0.0)), str(d.get("source", "declared")))
        except (TypeError, ValueError):
            raise AutoshardError("topology: hosts must be an integer and bandwidths numbers") from None


def parse_devices(text: str) -> tuple[int, int]:
    """``'8'`` -> (1 host, 8 devices); ``'2x4'`` -> (2 hosts, 8 devices). One-line error otherwise."""
    s = str(text).strip().lower()
    try:
        if "x" in s:
            hosts, local = (int(x) for x in s.split("x"))
        else:
            hosts, local = 1, int(s)
    except ValueError:
        raise AutoshardError(f"devices {text!r}: give a count (8) or HOSTSxLOCAL (2x4)") from None
    if hosts < 1 or local < 1:
        raise AutoshardError(f"devices {text!r}: hosts and devices per host must be positive")
    return hosts, hosts * local
