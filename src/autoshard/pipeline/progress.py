"""How the pipeline reports to its caller: one-line messages and counters (the CLI prints and draws them)."""

from __future__ import annotations

import logging
from collections.abc import Callable

log = logging.getLogger(__name__)

Say = Callable[[str], None]
"""say(line): a progress message for the user (the CLI prints it)."""

Progress = Callable[[str, int, int], None]
"""progress(what, done, total): called as work completes; the CLI turns it into a progress bar."""


def log_line(line: str) -> None:
    """The default ``Say``: to the log, for callers that print nothing."""
    log.info(line)


def no_progress(what: str, done: int, total: int) -> None:
    """The default ``Progress``: nothing to draw."""
