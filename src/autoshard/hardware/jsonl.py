"""Append-only JSON-lines files: one record a line, each append flushed and fsynced,
a torn last line tolerated.

A crash or Ctrl-C while a line is being written leaves at most that one line incomplete. Readers skip it;
``repair_tail`` cuts it off before a writer appends again, so the next record starts on a fresh line.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from autoshard.errors import AutoshardError

log = logging.getLogger(__name__)


def append_jsonl(path: str | os.PathLike[str], obj: dict[str, Any]) -> None:
    """Append ``obj`` as one line and fsync, so a returned call means the record is on disk."""
    line = json.dumps(obj, allow_nan=False, separators=(",", ":")) + "\n"
    with open(path, "a", encoding="utf-8") as f:
        f.write(line)
        f.flush()
        os.fsync(f.fileno())


def repair_tail(path: str | os.PathLike[str]) -> bool:
    """Cut an incomplete last line (no trailing newline) off ``path``; True if something was cut."""
    p = Path(path)
    if not p.is_file() or p.stat().st_size == 0:
        return False
    data = p.read_bytes()
    if data.endswith(b"\n"):
        return False
    keep = data.rfind(b"\n") + 1
    with open(p, "r+b") as f:
        f.truncate(keep)
        f.flush()
        os.fsync(f.fileno())
    log.warning("%s: dropped an incomplete last line (a record interrupted while being written)", p)
    return True


def read_jsonl(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """All records of ``path``; an unparsable LAST line (torn write) is skipped, one elsewhere is an error."""
    p = Path(path)
    lines = p.read_text(encoding="utf-8").split("\n")
    out: list[dict[str, Any]] = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            if i == len(lines) - 1:  # no newline after it: the write was cut off
                log.warning("%s: skipping an incomplete last line", p)
                continue
            raise AutoshardError(f"{p}:{i + 1}: not a JSON record; "
                                 "delete that line and re-run to re-measure it") from None
        if not isinstance(obj, dict):
            raise AutoshardError(f"{p}:{i + 1}: expected a JSON object per line; delete that line")
        out.append(obj)
    return out
