"""Run a suite: the pipeline's stages (``autoshard.pipeline``), then the summary and the report.

``autoshard bench --suite NAME`` and ``autoshard quickstart`` both call ``run_suite``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from autoshard.bench.report import write_report
from autoshard.bench.summary import summarize
from autoshard.hardware.evaluator import UNRECORDED_ROUND_STATISTIC
from autoshard.pipeline.context import PipelineConfig
from autoshard.pipeline.progress import Progress, Say, log_line, no_progress
from autoshard.pipeline.run import Pipeline


@dataclass(frozen=True)
class SuiteRun:
    """Where the outputs are, which stages ran or were skipped (and why), and the report's markdown."""

    out_dir: Path
    files: dict[str, Path]
    """What the report wrote, by role (report_md, results_json, the plots)."""
    stages: dict[str, str] = field(default_factory=dict)
    """Stage name -> 'ran', 'cached', or 'skipped: why'."""
    report: str = ""


def run_suite(config: PipelineConfig, out_dir: str | Path, say: Say = log_line,
              progress: Progress = no_progress, title: str = "") -> SuiteRun:
    """Run (or continue) every stage of ``config`` in ``out_dir``, then summarize and write the report into
    ``out_dir/bench``."""
    pipeline = Pipeline(config, out_dir, say, progress)
    evaluation = pipeline.run()
    summaries = summarize(evaluation.results, evaluation.algorithms,
                          statistic=evaluation.meta.get("round_statistic", UNRECORDED_ROUND_STATISTIC))
    suite = config.suite
    files = write_report(evaluation.out_dir, title or f"{suite.name}: {suite.description}", config.command,
                         summaries, evaluation.results, evaluation.meta)
    report = files["report_md"].read_text()
    return SuiteRun(pipeline.out, files, dict(pipeline.status), report)
