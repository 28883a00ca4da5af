"""What a learned cost model was trained on, and whether it may price a host, task or measure settings.

A model's ``trained_on`` (``LearnedCostModel.trained_on``) records the host (``autoshard.host.host_info``),
batch size, precision and measure settings of its training data; these checks refuse, in one line, what
it does not describe. ``LearnedCostModel.describe_hardware``, ``.check_host`` and ``.check_compatible``
call them (and skip the checks when the model allows other hardware)."""

from __future__ import annotations

from typing import Any

from autoshard.errors import AutoshardError
from autoshard.host import HARDWARE_KEYS
from autoshard.tasks import Task

SETTING_KEYS = ("optimizer", "threads", "device", "backend")
"""Measurement settings that change kernel cost (rows_cap, repeats etc. only change the measurement)."""


def describe_trained_hardware(trained_on: dict[str, Any], ensemble_size: int = 1) -> str:
    """One line naming the hardware, settings, batch and precision a model was trained on."""
    t = trained_on
    host = t.get("host", {})
    hw = host.get("gpu") or host.get("cpu") or "unknown hardware"
    s = t.get("settings", {})
    batch = t.get("batch_size")
    if batch is None and t.get("batch_sizes"):
        batch = "-".join(str(b) for b in t["batch_sizes"])
    precision = t.get("precision") or "/".join(t.get("precisions", [])) or "?"
    out = (f"{hw} ({s.get('device', 'cpu')}, {s.get('threads', '?')} thread(s), optimizer "
           f"{s.get('optimizer', '?')}), batch {batch}, {precision}")
    return out if ensemble_size == 1 else f"{out}, ensemble of {ensemble_size}"


GPU_HARDWARE_KEYS = ("device", "gpu")
"""What identifies the hardware of a model timed on a GPU: the GPU prices the kernels, not the host's CPU."""


def trained_host_difference(trained_host: dict[str, Any], host: dict[str, Any]) -> str | None:
    """The first hardware field on which a model's training host and ``host`` disagree, or None. Where both
    have a GPU they are compared by the GPU alone (the GPU prices the kernels, not the host's CPU)."""
    keys = GPU_HARDWARE_KEYS if trained_host.get("gpu") and host.get("gpu") else HARDWARE_KEYS
    return next((k for k in keys if k in trained_host and k in host and trained_host[k] != host[k]), None)


def check_trained_host(trained_on: dict[str, Any], host: dict[str, Any], where: str = "cost model") -> None:
    """Refuse a model trained on another machine (CPU/GPU model, cache size, device kind). A model of GPU
    kernels is compared by its GPU alone, and a host that sees no GPU may use it: planning for a GPU cluster
    happens on machines without one (the plan output names the GPU the model prices)."""
    mine = trained_on.get("host", {})
    if mine.get("gpu") and not host.get("gpu"):
        return
    k = trained_host_difference(mine, host)
    if k is not None:
        raise AutoshardError(
            f"{where} was trained on {k}={mine[k]!r} but this machine has {host[k]!r}; "
            "profile and retrain here, or pass --allow-other-hardware to use it anyway")


def check_trained_compatible(trained_on: dict[str, Any], context: bool, ensemble_size: int,
                     task: Task | None = None, settings: Any = None) -> None:
    """Refuse a task (batch size, precision) or measure settings other than those trained on. A
    ``context`` network takes any batch size and precision: those outside its support are priced by its
    fallback (``LearnedCostModel.out_of_support``)."""
    t = trained_on
    if task is not None and not context:
        if int(t.get("batch_size") or task.batch_size) != task.batch_size:
            raise AutoshardError(
                f"cost model was trained at batch size {t['batch_size']} "
                f"({describe_trained_hardware(t, ensemble_size)}) but the task uses {task.batch_size}; "
                "profile and retrain at that batch, or allow other hardware")
        if str(t.get("precision") or task.precision.value) != task.precision.value:
            raise AutoshardError(
                f"cost model was trained on {t['precision']} tables "
                f"but the task is {task.precision.value}; "
                "profile and retrain at that precision, or allow other hardware")
    if settings is not None:
        want = settings.to_json() if hasattr(settings, "to_json") else dict(settings)
        have = t.get("settings", {})
        k = trained_settings_difference(have, want)
        if k is not None:
            raise AutoshardError(
                f"cost model was trained with {k}={have[k]!r} but {k}={want[k]!r} was asked; "
                "retrain with those settings, or allow other hardware")


def trained_settings_difference(trained: dict[str, Any], settings: dict[str, Any]) -> str | None:
    """The first measure setting that changes kernel cost (``SETTING_KEYS``) on which a model's training
    settings and ``settings`` disagree, or None."""
    return next((k for k in SETTING_KEYS if k in settings and k in trained
                 and str(settings[k]) != str(trained[k])), None)
