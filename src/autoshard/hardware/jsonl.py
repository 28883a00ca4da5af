"""Append-only JSON-lines files: one record a line, each append flushed and fsynced,
a torn last line tolerated; and packed (gzip) JSON-lines files, written whole and atomically.

A crash or Ctrl-C while a line is being written leaves at most that one line incomplete. Readers skip it;
``repair_tail`` cuts it off before a writer appends again, so the next record starts on a fresh line.
"""

from __future__ import annotations

import gzip
import json
import logging
import os
from pathlib import Path
from typing import Any

from autoshard.errors import AutoshardError

log = logging.getLogger(__name__)


def _line(obj: dict[str, Any]) -> str:
    """One record as its line (compact JSON, no NaN)."""
    return json.dumps(obj, allow_nan=False, separators=(",", ":")) + "\n"


def append_jsonl(path: str | os.PathLike[str], obj: dict[str, Any]) -> None:
    """Append ``obj`` as one line and fsync, so a returned call means the record is on disk."""
    line = _line(obj)
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
    if p.suffix == ".gz":
        try:
            with gzip.open(p, "rt", encoding="utf-8") as f:
                lines = f.read().split("\n")
        except (OSError, EOFError, UnicodeDecodeError) as e:  # a truncated or foreign file
            raise AutoshardError(f"{p}: not a readable gzip JSON-lines file ({e}); restore it from "
                                 "version control or delete it") from None
    else:
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


def write_jsonl_gz(path: str | os.PathLike[str], objs: list[dict[str, Any]]) -> None:
    """Write ``objs`` as a gzip JSON-lines file atomically (temporary file, fsync, rename). The gzip header
    carries no time stamp, so the same records give the same bytes (a stable file under version control)."""
    p = Path(path)
    tmp = p.with_name(p.name + ".tmp")
    with open(tmp, "wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as gz:
            for obj in objs:
                gz.write(_line(obj).encode("utf-8"))
        raw.flush()
        os.fsync(raw.fileno())
    os.replace(tmp, p)
