"""The measuring stages behind a trained cost model: the all-to-all fit, kernel timings of random shards."""

from __future__ import annotations

from pathlib import Path

from autoshard.errors import AutoshardError
from autoshard.hardware.comm import (
    COMM_MODEL_FILE,
    DEFAULT_PASSES,
    CommRecord,
    fit_alpha_beta,
    load_comm_records,
    profile_comm,
)
from autoshard.hardware.profiler import ProfileConfig, pending_samples, profile, record_files, recorded_hosts
from autoshard.host import hardware_difference, host_info
from autoshard.io import read_json
from autoshard.pipeline.cache import file_key
from autoshard.pipeline.context import Context
from autoshard.tables import TablePool


def stage_comm(ctx: Context) -> str:
    """``costs/comm_model.json``: the all-to-all model the evaluator (and a cost model trained here) uses,
    measured with D processes on this host (``autoshard.hardware.comm``) and fitted; or the one given.

    The processes are gloo ones on the CPU unless the kernels run on cuda with a GPU per rank (then NCCL):
    NCCL is not picked merely because CUDA is visible (``context.comm_backend``)."""
    s = ctx.suite
    if ctx.config.comm_path:
        ctx.skip("comm", f"comm model given (--comm {ctx.config.comm_path})")
        return file_key(ctx.config.comm_path)
    backend, what = ctx.comm_backend()
    # row_wise: the sweep also times reduce-scatters, all-gathers and id bucketisation (stop 44); a fit
    # cached before them priced row shards as all-to-alls, so it is re-measured
    # passes: each point the least of DEFAULT_PASSES sweeps' medians (stop 71); a 1-pass fit is re-measured
    settings: dict[str, object] = {"num_devices": s.num_devices, "batch_size": s.batch_size, "row_wise": 1,
                                   "passes": DEFAULT_PASSES}
    if backend != "gloo":  # gloo is the default: no backend in its key
        settings["backend"] = backend

    def make(resume: bool) -> None:
        costs = ctx.out / "costs"
        ctx.say(f"[comm] all-to-all over {what}, {DEFAULT_PASSES} passes over the sizes")
        for _ in profile_comm(costs, s.num_devices, batch_size=s.batch_size, backend=backend,
                              passes=DEFAULT_PASSES, on_point=lambda k, n: ctx.progress("comm points", k, n)):
            pass
        records = _own_records(costs, s.num_devices, s.batch_size, backend)
        fit_alpha_beta(records).save(str(costs / COMM_MODEL_FILE))

    return ctx.stage("comm", settings, [], [f"costs/{COMM_MODEL_FILE}"], make)


def _own_records(costs: Path, num_devices: int, batch_size: int, backend: str) -> list[CommRecord]:
    """The records of this D, batch and backend (a directory may hold others: a cuda run after a cpu one)."""
    return [r for r in load_comm_records(costs)
            if (r.num_devices, r.batch_size, r.backend) == (num_devices, batch_size, backend)]


def stage_profile(ctx: Context, k_split: str) -> str:
    """``costs/``: random shards of train-pool tables timed on the real kernels with the evaluator's settings
    (``autoshard.hardware.profiler``, resumable), the dataset the cost model is trained on."""
    s, t = ctx.suite, ctx.suite.training
    costs = ctx.out / "costs"
    measure = ctx.measure_settings()
    settings = {"samples": t.profile_samples, "max_tables": t.profile_max_tables,
                "batch_size": s.batch_size, "seed": s.seed, "measure": measure.to_json()}

    def make(resume: bool) -> None:
        config = ProfileConfig(samples=t.profile_samples, max_tables=t.profile_max_tables,
                               batch_size=s.batch_size, seed=s.seed, settings=measure)
        train_pool = TablePool.load(str(ctx.out / "train_pool.json"))
        if not resume and _profiled_otherwise(costs, train_pool, config):
            # Records made with other settings or tables: start the dataset over (comm stays). Records of the
            # same settings are kept, so changing only the number of samples continues the dataset.
            for old in [*record_files(costs), costs / "tables.json", costs / "profile.json"]:
                old.unlink(missing_ok=True)
        total = t.profile_samples
        start = total - len(pending_samples(costs, config)) if (costs / "profile.json").is_file() else 0
        for k, _ in enumerate(profile(train_pool, costs, config), start=1):
            ctx.progress("profile samples", start + k, total)

    return ctx.stage("profile", settings, [k_split], ["costs/tables.json"], make)


def _profiled_otherwise(costs: Path, pool: TablePool, config: ProfileConfig) -> bool:
    """True if ``costs`` holds a profile of other tables, other settings than ``config``, or records of other
    hardware (a cached run moved to a machine with another CPU)."""
    if not (costs / "tables.json").is_file():
        return False
    if TablePool.load(str(costs / "tables.json")).to_json()["tables"] != pool.to_json()["tables"]:
        return True
    here = host_info(config.settings.device.value)
    if any(hardware_difference(h, here) for h in recorded_hosts(costs)):
        return True
    manifest = costs / "profile.json"
    try:
        return manifest.is_file() and read_json(manifest, kind="autoshard.profile") != config.manifest()
    except AutoshardError:
        return True
