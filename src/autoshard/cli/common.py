"""Argument helpers shared by command modules."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from autoshard.errors import AutoshardError
from autoshard.io import parse_bytes


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{value} must be a positive integer")
    return value


def device_memory(text: str, num_devices: int) -> tuple[int, ...]:
    """'5GB' for every device, or a comma list with one size per device ('8GB,8GB,4GB,4GB')."""
    parts = [p for p in text.split(",") if p.strip()]
    if len(parts) == 1:
        return (parse_bytes(parts[0]),) * num_devices
    if len(parts) != num_devices:
        raise AutoshardError(f"--memory lists {len(parts)} sizes for {num_devices} devices; "
                             "give one or one per device")
    return tuple(parse_bytes(p) for p in parts)


DEVICES = ("cpu", "cuda")
"""``--device``: where the embedding kernels run."""
KERNEL_BACKENDS = ("fbgemm", "torch")
"""``--backend``: FBGEMM's fused TBE, or the torch-only equivalent (no fbgemm_gpu needed)."""


def add_device_args(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """``--device`` and ``--backend``, the same for profile, evaluate, bench and quickstart."""
    p.add_argument("--device", choices=DEVICES, default="cpu",
                   help="where kernels run: cpu, or cuda (one GPU, one device's shards at a time) "
                        "(default cpu)")
    p.add_argument("--backend", choices=KERNEL_BACKENDS, default="fbgemm",
                   help="kernel timed: fbgemm (FBGEMM's fused TBE, what TorchRec runs) or torch (the same "
                        "fused op in plain torch, for hosts without fbgemm-gpu) (default fbgemm)")


def check_device(device: str) -> None:
    """Refuse ``--device cuda`` in one line when torch sees no CUDA device, before anything runs."""
    if device != "cuda":
        return
    import torch

    if not torch.cuda.is_available():
        raise AutoshardError("--device cuda but torch sees no CUDA device (CPU-only torch, no GPU or no "
                             "driver); use --device cpu")


def check_backend(backend: str) -> None:
    """Refuse ``--backend fbgemm`` in one line when fbgemm_gpu is not installed, before anything runs (the
    kernel would say so only at the first measurement, after the stages before it)."""
    if backend != "fbgemm":
        return
    from autoshard.host import package_installed

    if not package_installed("fbgemm_gpu"):
        raise AutoshardError("--backend fbgemm needs fbgemm_gpu, which is not installed here; install "
                             "fbgemm-gpu (or fbgemm-gpu-cpu), or time with --backend torch")


@contextmanager
def record_bar(total: int, desc: str) -> Iterator[Callable[[int, int], None]]:
    """A tqdm bar of ``total`` records on stderr, and the ``progress(done, total)`` callback that moves it."""
    from tqdm import tqdm

    with tqdm(total=total, desc=desc, unit="record", file=sys.stderr) as bar:
        def progress(done: int, _total: int) -> None:
            bar.n = done
            bar.refresh()
        yield progress


class ProgressBars:
    """progress(what, done, total) -> tqdm bars on stderr, one per ``what`` (closed when done); a
    ``measure...`` counter shows as the postfix of the ``tasks`` bar."""

    def __init__(self) -> None:
        from tqdm import tqdm

        self.tqdm = tqdm
        self.bars: dict[str, Any] = {}

    def __call__(self, what: str, done: int, total: int) -> None:
        if what.startswith("measure"):
            bar = self.bars.get("tasks")
            if bar is not None:
                bar.set_postfix_str(f"{what}: round {done}/{total}")
            return
        bar = self.bars.get(what)
        if bar is None:
            bar = self.bars[what] = self.tqdm(total=total, initial=done, desc=what, unit=what.split()[-1],
                                              file=sys.stderr)
        bar.n = done
        bar.refresh()
        if done >= total:
            bar.close()
            del self.bars[what]

    def close(self) -> None:
        for bar in self.bars.values():
            bar.close()
        self.bars.clear()
