"""A profile's level: how much slower or faster its host ran than another profile's, measured in one sitting.

Why (docs/benchmarks.md, "Stop 86"): one machine kind is not one speed (stop 20: a VM of the same kind
1.6-2x slower on another day), so a profile measured today to fill a corner of the training design cannot
join the broad profile of stop 16 as it is: its records would teach the model the day's speed along with the
corner's. ``autoshard profile-level --data NEW --reference REF`` re-times REF's records here right after NEW
was profiled (``host_calibration``: records spread over REF's cost range, timed with the settings they were
recorded with) and writes ``NEW/level.json``: this host over REF's, per part. ``train-cost --data REF --data
NEW`` then divides NEW's forward and backward by it (``merge_datasets``), so the model learns NEW's records
at REF's speed; the records themselves stay as measured, and NEW trained on alone is used as measured.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from autoshard.errors import AutoshardError
from autoshard.hardware.profile_records import CostRecord
from autoshard.io import read_json, write_json

LEVEL_FILE = "level.json"
LEVEL_KIND = "autoshard.profile-level"


def profile_key(path: str | Path) -> str:
    """How a level names its reference: the profile directory's last two path parts
    (``amd-epyc/broad-seed0``), so a clone elsewhere, or a path given another way, still matches."""
    return "/".join(Path(path).resolve().parts[-2:])


@dataclass(frozen=True)
class ProfileLevel:
    """This profile's host over ``reference``'s, per part (geometric means over the re-timed records)."""

    reference: str
    """``profile_key`` of the profile whose records were re-timed."""
    fwd: float
    bwd: float
    scale: dict[str, Any]
    """How it was measured (``host_calibration.HostScale.to_json``: intervals, records, hosts)."""

    def __post_init__(self) -> None:
        if not (self.fwd > 0 and self.bwd > 0):
            raise AutoshardError(f"profile level fwd {self.fwd} / bwd {self.bwd} must be positive")

    def refers_to(self, path: str | Path) -> bool:
        return profile_key(path) == self.reference

    def to_json(self) -> dict[str, Any]:
        return {"kind": LEVEL_KIND, "version": 1, "reference": self.reference, "fwd": self.fwd,
                "bwd": self.bwd, "scale": self.scale}

    @staticmethod
    def from_json(d: dict[str, Any], where: str) -> ProfileLevel:
        try:
            return ProfileLevel(str(d["reference"]), float(d["fwd"]), float(d["bwd"]),
                                dict(d.get("scale", {})))
        except (KeyError, TypeError, ValueError) as e:
            raise AutoshardError(f"{where}: not a profile level ({e!r}); write it again with "
                                 "'autoshard profile-level'") from None


def read_level(directory: str | Path) -> ProfileLevel | None:
    """The level of the profile in ``directory``, or None where it has none."""
    path = Path(directory) / LEVEL_FILE
    if not path.is_file():
        return None
    return ProfileLevel.from_json(read_json(path, kind=LEVEL_KIND), str(path))


def write_level(directory: str | Path, level: ProfileLevel) -> Path:
    path = Path(directory) / LEVEL_FILE
    write_json(path, level.to_json())
    return path


def at_reference_level(records: Sequence[CostRecord], level: ProfileLevel) -> list[CostRecord]:
    """``records`` with forward and backward divided by ``level``: what they would have measured at the
    reference profile's speed, by one factor per part."""
    return [replace(r, fwd_ms=r.fwd_ms / level.fwd, bwd_ms=r.bwd_ms / level.bwd) for r in records]
