"""Host calibration: re-time a few of a profile's records here and scale a learned model to this machine.

Why: one machine kind is not one speed. The same record of the AMD EPYC profile re-timed on another day's VM
of the same kind came out 1.6-2x slower (docs/benchmarks.md, stop 20), and a model trained on the profile then
prices every kernel at the profile's speed while the step's collectives (fitted here, ``profile-comm``) are
at this machine's: the planners weigh kernels against traffic at the wrong rate, and every predicted step
reads low. Re-timing records of the model's own training profile with the settings they were recorded with
gives the ratio of this machine to the one the model learned (per part, forward and backward: they need not
move alike); ``LearnedCostModel.with_host_scale`` multiplies the model's predictions by it.

What it cannot do: a uniform factor per part. Devices that move differently (the re-timed records' spread,
printed as the median change and the range) are the fine-tuning's job (``autoshard fine-tune-cost`` on
devices measured here).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from autoshard.costs.learned import LearnedCostModel
from autoshard.costs.metrics import geomean_interval
from autoshard.errors import AutoshardError
from autoshard.hardware.kernel import MeasureSettings, measure_shard
from autoshard.hardware.profile_dataset import CostDataset
from autoshard.hardware.profile_records import CostRecord
from autoshard.host import host_info

DEFAULT_RECORDS = 16
"""Records re-timed by default: spread over the profile's cost range, about half a minute here."""

DEFAULT_MAX_MS = 200.0
"""Records whose recorded fwd+bwd is above this are left out by default (a 2 s step, repeated, costs more
than its information)."""


@dataclass(frozen=True)
class Retiming:
    """One record timed again here with the settings it was recorded with."""

    sample_id: str
    tables: int
    batch_size: int
    precision: str
    recorded_host: str
    host: str
    recorded_fwd_ms: float
    recorded_bwd_ms: float
    fwd_ms: float
    bwd_ms: float
    seconds: float


@dataclass(frozen=True)
class HostScale:
    """This machine over the profile's: geometric-mean ratios (new / recorded) of the re-timed records."""

    fwd: float
    bwd: float
    fwd_interval: tuple[float, float]
    """95% bootstrap interval of ``fwd`` over the records."""
    bwd_interval: tuple[float, float]
    median_change_pct: float
    """Median |new / recorded - 1| of fwd+bwd after dividing by its own geometric mean: what one factor
    leaves unexplained per record."""
    records: int
    profile: str
    recorded_host: str
    host: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        return (f"this host / the profile's ({self.recorded_host}, {self.records} records of "
                f"{self.profile}): "
                f"fwd x{self.fwd:.3f} [{self.fwd_interval[0]:.3f}, {self.fwd_interval[1]:.3f}], "
                f"bwd x{self.bwd:.3f} [{self.bwd_interval[0]:.3f}, {self.bwd_interval[1]:.3f}]; "
                f"per record {self.median_change_pct:.1f}% (median) beside the factor")


def retime(data: CostDataset, records: Sequence[CostRecord],
           progress: Callable[[int, int], None] | None = None) -> list[Retiming]:
    """Time every record of ``data`` in ``records`` again, as it was recorded (tables, batch, precision,
    seeds and measuring settings)."""
    here = str(host_info("cpu").get("cpu"))
    out = []
    for i, rec in enumerate(records):
        task, refs = data.task_of(rec)
        settings = MeasureSettings.from_json({k: v for k, v in rec.settings.items() if k != "precision"})
        start = time.perf_counter()
        timing = measure_shard(task, refs, settings)
        out.append(Retiming(rec.sample_id, len(rec.tables), rec.batch_size, task.precision.value,
                            str(rec.host.get("cpu")), here, rec.fwd_ms, rec.bwd_ms, timing.fwd_ms,
                            timing.bwd_ms, time.perf_counter() - start))
        if progress is not None:
            progress(i + 1, len(records))
    return out


def host_scale(timings: Sequence[Retiming], profile: str) -> HostScale:
    """The per-part factors of ``timings`` (at least 2, all positive)."""
    usable = [t for t in timings if min(t.recorded_fwd_ms, t.recorded_bwd_ms, t.fwd_ms, t.bwd_ms) > 0]
    if len(usable) < 2:
        raise AutoshardError(f"only {len(usable)} re-timed records with positive times; calibrating needs "
                             "at least 2 (raise --records or --max-ms)")
    fwd = np.array([t.fwd_ms / t.recorded_fwd_ms for t in usable])
    bwd = np.array([t.bwd_ms / t.recorded_bwd_ms for t in usable])
    total = np.array([(t.fwd_ms + t.bwd_ms) / (t.recorded_fwd_ms + t.recorded_bwd_ms) for t in usable])
    leftover = np.log(total) - np.log(total).mean()
    return HostScale(
        fwd=float(np.exp(np.log(fwd).mean())), bwd=float(np.exp(np.log(bwd).mean())),
        fwd_interval=geomean_interval(list(fwd)), bwd_interval=geomean_interval(list(bwd)),
        median_change_pct=float(math.expm1(np.median(np.abs(leftover))) * 100.0), records=len(usable),
        profile=profile, recorded_host=usable[0].recorded_host, host=usable[0].host)


def pick_records(data: CostDataset, profile: str, records: int = DEFAULT_RECORDS,
                 max_ms: float = DEFAULT_MAX_MS) -> list[CostRecord]:
    """``records`` records of ``data`` (the profile at path ``profile``) spread over its cost range up to
    ``max_ms``; AutoshardError (one line) where fewer than 2 qualify."""
    if records < 2:
        raise AutoshardError(f"--records {records}: calibrating needs at least 2")
    if not max_ms > 0:
        raise AutoshardError(f"--max-ms {max_ms} must be positive")
    picked = data.spread(records, max_ms)
    if len(picked) < 2:
        raise AutoshardError(f"{profile} has {len(picked)} records of at most {max_ms:g} ms fwd+bwd; "
                             "calibrating needs at least 2 (raise --max-ms)")
    return picked


def calibrate(model: LearnedCostModel, data: CostDataset, profile: str, records: Sequence[CostRecord],
              progress: Callable[[int, int], None] | None = None
              ) -> tuple[LearnedCostModel, HostScale, list[Retiming]]:
    """``model`` scaled to this host by re-timing ``records`` of ``data`` (the profile it was trained on,
    at path ``profile``; ``pick_records``). Refuses records of another CPU than the model's: their ratio
    would not be the model's."""
    trained_cpu = (model.trained_on.get("host") or {}).get("cpu")
    profile_cpus = {str(r.host.get("cpu")) for r in records}
    if trained_cpu and profile_cpus != {str(trained_cpu)}:
        raise AutoshardError(f"{profile} holds records of {', '.join(sorted(profile_cpus))} but the model "
                             f"was trained on {trained_cpu}; give the profile the model was trained on")
    timings = retime(data, records, progress)
    scale = host_scale(timings, profile)
    calibration = {"profile": profile, "records": scale.records, "host": scale.host,
                   "recorded_host": scale.recorded_host, "fwd_interval": list(scale.fwd_interval),
                   "bwd_interval": list(scale.bwd_interval), "median_change_pct": scale.median_change_pct}
    return model.with_host_scale(scale.fwd, scale.bwd, calibration), scale, timings
