"""What every stage is given: the run's settings, its output directory and stage cache, and its progress."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from autoshard.costs.comm import DEFAULT_COMM, AlphaBeta
from autoshard.hardware.comm import COMM_MODEL_FILE
from autoshard.hardware.kernel import DeviceKind, MeasureSettings
from autoshard.pipeline.cache import StageCache
from autoshard.pipeline.progress import Progress, Say, log_line, no_progress
from autoshard.pipeline.suite import Suite


@dataclass(frozen=True)
class PipelineConfig:
    """What to run: a suite, and optionally the user's own inputs instead of generated/trained ones."""

    suite: Suite
    tables_path: str | None = None
    """A table pool file to use instead of the synthetic pool."""
    cost_model_path: str | None = None
    """A trained cost model checkpoint (or 'analytical', or 'measured': plan with the real evaluator itself);
    None = train one (profile + fit)."""
    policy_path: str | None = None
    """A trained policy checkpoint for rl; None = train one."""
    comm_path: str | None = None
    """A comm model (comm_model.json) for the evaluator, or 'default' (uncalibrated); None = measure it."""
    algorithms: tuple[str, ...] | None = None
    """Algorithms to benchmark; None = every registered planner."""
    command: str = ""
    """The command line, recorded with the results so their report can be regenerated."""
    device: str = "cpu"
    """Where the evaluator (and the profile behind a cost model trained here) runs the kernels: ``cpu``, or
    ``cuda``: one GPU, one device's shards at a time (``MeasureSettings.device``). Overrides the suite's
    ``EvalConfig``; it is in the measure settings, hence in the profile and bench keys."""
    backend: str = "fbgemm"
    """Which fused kernel is timed: ``fbgemm`` or ``torch`` (``MeasureSettings.backend``); keyed like
    ``device``."""
    allow_other_hardware: bool = False
    """Plan with a given cost model even if it was trained on other hardware or measure settings."""
    collectives: str = "auto"
    """The step's all-to-alls in the bench: ``measure`` (every plan's own splits timed on D local processes),
    ``model`` (the comm model's estimate, labelled modelled), or ``auto``: measure where every rank can have
    a core (or a GPU) of its own, else model (``Context.collectives``). Part of the bench key."""

    estimate: str = "evaluator"
    """The per-task cost estimate of the report (``planners.exact.lower_bound``, not a bound on the step):
    ``evaluator`` times every table alone on the real kernels (a device's worth of extra measurements per
    task), ``planning`` prices them with the planning cost model, ``none`` leaves it out."""
    measure_top: int = 0
    """Also bench every learned planner as ``<planner>+top<K>``: it and the heuristics plan, the K plans its
    model prices cheapest are timed here at planning time and the measured best is kept (``autoshard plan
    --measure-top K``; the measuring counts as planning time). 0: not."""
    descend: int = 0
    """With ``measure_top``: also bench every learned planner as ``<planner>+top<K>+descent<N>``, the
    measured pick balanced by at most N moves kept by timing (``autoshard plan --measure-top K --descend
    N``; ``pipeline.measured_descent``). 0: not."""

    refit: bool = False
    """With ``measure_top``: also bench every learned planner as ``<planner>+top<K>+refit`` (and
    ``+refit+descent<N>`` with ``descend``): the model corrected by the pick's timed devices, the planner's
    plan under it timed against the pick (``autoshard plan --measure-top K --refit``). False: not."""

    anchor_hot: int = 0
    """Also bench every learned planner as ``<planner>+hot<H>``: the model corrected by the H tables it prices
    dearest, whole and at each column cut, timed alone at planning time (``autoshard plan --anchor-hot H``;
    ``pipeline.anchors``; the timing counts as planning time). 0: not."""

    def measure_settings(self) -> MeasureSettings:
        """How the evaluator (and the profile a cost model is trained on) times kernels: the suite's
        ``EvalConfig`` with this run's device and backend."""
        e = self.suite.eval
        return MeasureSettings(warmup=e.warmup, repeats=e.repeats, rows_cap=e.rows_cap,
                               device=self.device, backend=self.backend)  # checked there, one line


def comm_backend(device: str, num_devices: int) -> tuple[str, str]:
    """The process-group backend that measures a ``num_devices``-rank all-to-all here, and a line saying
    what it measured. NCCL only for cuda kernels with one GPU per rank (NCCL refuses two ranks on one GPU);
    otherwise gloo over CPU processes, whose fit then stands for the GPUs' interconnect too."""
    if device != DeviceKind.CUDA.value:
        return "gloo", f"gloo: {num_devices} CPU processes"
    import torch

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if gpus >= num_devices:
        return "nccl", f"nccl: {num_devices} processes, one GPU each"
    return "gloo", (f"gloo: the CPU processes' fit ({num_devices} CPU processes; {gpus} GPU(s) visible for "
                    f"{num_devices} ranks, so no NCCL); the GPUs' interconnect is not measured, pass --comm "
                    "FILE (profile-comm on the GPUs, or --topology) for it")


class Context(StageCache):
    """A run in ``out_dir``: the stage cache plus the settings the stage functions read."""

    def __init__(self, config: PipelineConfig, out_dir: str | Path, say: Say = log_line,
                 progress: Progress = no_progress) -> None:
        super().__init__(out_dir, say)
        self.config = config
        self.suite = config.suite
        self.progress = progress

    def measure_settings(self) -> MeasureSettings:
        """How the evaluator (and the profile a cost model is trained on) times kernels."""
        return self.config.measure_settings()

    def comm_backend(self) -> tuple[str, str]:
        """The comm stage's process-group backend and what its fit is (``comm_backend``)."""
        return comm_backend(self.config.device, self.suite.num_devices)

    def collectives(self) -> tuple[str, str]:
        """'measure' or 'model' for this run, and why. ``auto`` measures only where each of the D processes
        gets a core (CPU kernels) or a GPU (cuda kernels, NCCL) of its own: with more processes than cores,
        the ranks take turns on the cores and a timed all-to-all mostly measures that contention (on this
        project's 2-vCPU machine, 8 processes timed near-identical collectives 2-9 ms apart); cuda kernels
        with fewer GPUs than ranks get the comm model (CPU processes would time another interconnect)."""
        asked = self.config.collectives
        if asked != "auto":
            return asked, f"--collectives {asked}"
        d = self.suite.num_devices
        if self.comm_backend()[0] == "nccl":
            return "measure", f"auto: one GPU per rank ({d} ranks)"
        if self.config.device == DeviceKind.CUDA.value:
            # CPU processes' gloo all-to-alls next to GPU kernels would time another interconnect than the
            # one the plan runs on; the comm model (--comm: a declared topology, or profile-comm on the
            # GPUs) stands for it, and the report says modelled
            return "model", (f"auto: fewer GPUs than the {d} ranks, so the all-to-alls are the comm model's "
                             "(modelled), not timed per plan")
        cores = os.cpu_count() or 1
        if d <= cores:
            return "measure", f"auto: {d} processes on {cores} cores"
        return "model", (f"auto: {d} processes would share {cores} cores, so the all-to-alls are the "
                         "alpha-beta model's (modelled), not timed per plan")

    def comm_description(self) -> str:
        """Where the evaluator's all-to-all model comes from, for the report."""
        given = self.config.comm_path
        if given == "default":
            return "the uncalibrated default (--comm default)"
        if given:
            return f"given (--comm {given})"
        if not (self.out / "costs" / COMM_MODEL_FILE).is_file():
            return "the uncalibrated default (no comm fit in this run)"
        return f"fitted here, {self.comm_backend()[1]}"

    def comm_model(self) -> AlphaBeta:
        """The all-to-all model of the evaluator: given, measured by the comm stage, or the default."""
        given = self.config.comm_path
        if given == "default":
            return DEFAULT_COMM
        if given:
            return AlphaBeta.load(given)
        path = self.out / "costs" / COMM_MODEL_FILE
        return AlphaBeta.load(str(path)) if path.is_file() else DEFAULT_COMM
