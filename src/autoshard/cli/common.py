"""Argument helpers shared by command modules."""

from __future__ import annotations

import argparse

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
