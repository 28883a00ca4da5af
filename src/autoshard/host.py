"""A description of the machine a measurement was taken on, stored with every record and model."""

from __future__ import annotations

import os
import platform
import re
import socket
import subprocess
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

HARDWARE_KEYS = ("device", "cpu", "gpu", "llc_bytes")
"""Host fields that identify the hardware a cost refers to; hostname and library versions are recorded but do
not change what a kernel costs. Two records or a record and a model whose fields differ here measure different
machines (an Intel Xeon and an AMD EPYC VM of this project's machine kind time one shard 0.6-2.3x apart:
docs/benchmarks.md, "One machine kind, two CPUs")."""


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _llc_bytes() -> int | None:
    """Size of the last-level cache of CPU 0 (Linux sysfs), or None when unknown."""
    base = "/sys/devices/system/cpu/cpu0/cache"
    best = None
    try:
        for entry in sorted(os.listdir(base)):
            try:
                with open(os.path.join(base, entry, "size")) as f:
                    text = f.read().strip().upper()
            except OSError:
                continue
            scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:], 1)
            value = int(text.rstrip("KMG")) * scale
            best = value if best is None else max(best, value)
    except (OSError, ValueError):
        return best
    return best


@lru_cache(maxsize=4)
def _host_info(device: str) -> tuple[tuple[str, Any], ...]:
    import torch

    info: dict[str, Any] = {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "llc_bytes": _llc_bytes(),
        "torch": torch.__version__,
        "device": device,
    }
    try:
        from importlib.metadata import version

        info["fbgemm_gpu"] = next((version(p) for p in ("fbgemm-gpu-cpu", "fbgemm-gpu")
                                   if _has_dist(p)), None)
    except Exception:  # noqa: BLE001 - metadata is informative only
        info["fbgemm_gpu"] = None
    if device == "cuda" and torch.cuda.is_available():
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        info["gpu"] = props.name
        info["gpu_memory_bytes"] = int(props.total_memory)
        info["cuda"] = torch.version.cuda
    return tuple(info.items())


def package_installed(package: str) -> bool:
    """Whether ``import package`` would find it here (without importing it)."""
    import importlib.util

    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):
        return False


def _has_dist(name: str) -> bool:
    from importlib.metadata import PackageNotFoundError, version

    try:
        version(name)
        return True
    except PackageNotFoundError:
        return False


def host_info(device: str = "cpu") -> dict[str, Any]:
    """Hostname, CPU model, cache size, library versions and (on CUDA) the GPU: what a cost refers to."""
    return dict(_host_info(device))


def hardware_of(host: dict[str, Any]) -> dict[str, Any]:
    """The fields of ``host`` (a ``host_info`` dict) that identify its hardware (``HARDWARE_KEYS``)."""
    return {k: host[k] for k in HARDWARE_KEYS if host.get(k) is not None}


def hardware_difference(a: dict[str, Any], b: dict[str, Any]) -> str | None:
    """The first hardware field (``HARDWARE_KEYS``) both hosts state and disagree on, or None: the same
    hardware as far as both say."""
    ha, hb = hardware_of(a), hardware_of(b)
    return next((k for k in ha if k in hb and ha[k] != hb[k]), None)


def hardware_slug(host: dict[str, Any] | None = None) -> str:
    """A directory name for the hardware of ``host`` (default: this machine's CPU): its GPU or CPU model in
    lower case, vendor marks and 'processor'/'cpu' dropped, e.g. 'Intel(R) Xeon(R) Processor' ->
    'intel-xeon', 'AMD EPYC' -> 'amd-epyc'. What ``make profile-broad`` profiles into."""
    host = host_info() if host is None else host
    name = str(host.get("gpu") or host.get("cpu") or "unknown").lower()
    name = re.sub(r"\((r|tm)\)|\b(processor|cpu)\b", " ", name)
    return re.sub(r"[^a-z0-9]+", "-", name).strip("-") or "unknown"


GPU_STATE_QUERY = {"sm_clock_mhz": "clocks.sm", "mem_clock_mhz": "clocks.mem",
                   "temperature_c": "temperature.gpu", "power_w": "power.draw"}
"""What ``gpu_state`` reads, by the name it is recorded under (nvidia-smi's query fields)."""


def gpu_state(index: int, smi: Sequence[str] = ("nvidia-smi",)) -> dict[str, float] | None:
    """CUDA device ``index``'s SM and memory clocks, temperature and power draw now (``smi``: nvidia-smi),
    or None where they cannot be read (no nvidia-smi, a GPU it does not report, output it cannot parse).

    Why: at stop 35 an H100's profile records came out ~20% slower in backward (~10% forward) after its
    first minutes of sustained profiling, relative to the same design's earlier samples, with nothing in the
    design to explain it (docs/benchmarks.md, "Stop 35"). A clock or thermal drift is the suspect; GPU
    records carry this state so the next profile can tell (``autoshard profile`` on CUDA)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").strip()
    ids = [v.strip() for v in visible.split(",") if v.strip()] if visible else []
    ident = ids[index] if index < len(ids) else str(index)  # nvidia-smi ignores CUDA_VISIBLE_DEVICES
    try:
        out = subprocess.run([*smi, f"--query-gpu={','.join(GPU_STATE_QUERY.values())}",
                              "--format=csv,noheader,nounits", f"--id={ident}"],
                             capture_output=True, text=True, timeout=5, check=True).stdout
        values = [float(v) for v in out.strip().split(",")]
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    return dict(zip(GPU_STATE_QUERY, values)) if len(values) == len(GPU_STATE_QUERY) else None


def without_state(host: dict[str, Any]) -> dict[str, Any]:
    """``host`` less what was true only at one record's moment (``gpu_state``): what a model trained on its
    records keeps as the machine it was trained on."""
    return {k: v for k, v in host.items() if k != "gpu_state"}
