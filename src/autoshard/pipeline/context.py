"""What every stage is given: the run's settings, its output directory and stage cache, and its progress."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from autoshard.costs.comm import DEFAULT_COMM, AlphaBeta
from autoshard.hardware.comm import COMM_MODEL_FILE
from autoshard.hardware.kernel import MeasureSettings
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
        e = self.suite.eval
        return MeasureSettings(warmup=e.warmup, repeats=e.repeats, rows_cap=e.rows_cap)

    def comm_model(self) -> AlphaBeta:
        """The all-to-all model of the evaluator: given, measured by the comm stage, or the default."""
        given = self.config.comm_path
        if given == "default":
            return DEFAULT_COMM
        if given:
            return AlphaBeta.load(given)
        path = self.out / "costs" / COMM_MODEL_FILE
        return AlphaBeta.load(str(path)) if path.is_file() else DEFAULT_COMM
