"""File helpers: atomic writes and versioned JSON artefacts with clear errors on bad files."""

from __future__ import annotations

import gzip
import json
import math
import os
import tempfile
import zlib
from pathlib import Path
from typing import Any

from autoshard.errors import AutoshardError

ARTEFACT_VERSION = 1
GZIP_MAGIC = b"\x1f\x8b"
"""The first two bytes of a gzip stream: how ``read_json`` tells a compressed artefact from a plain one."""


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see the old file or the whole new one, never a part."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; an artefact is meant to be shared like any written file
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_json(path: str | os.PathLike[str], obj: Any) -> None:
    """Atomically write ``obj`` as indented JSON (NaN/inf are refused: they are not JSON)."""
    atomic_write_bytes(path, (json.dumps(obj, indent=1, allow_nan=False) + "\n").encode())


def _reject_constant(name: str) -> float:
    raise ValueError(f"non-finite number {name}")


def _finite_float(text: str) -> float:
    """A JSON number as float, refused where it overflows to infinity (e.g. 1e400)."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text} (too large for a float)")
    return value


def read_json(path: str | os.PathLike[str], kind: str | None = None,
              versions: tuple[int, ...] = (ARTEFACT_VERSION,)) -> dict[str, Any]:
    """Read a JSON artefact, plain or gzip-compressed (``.json.gz``, told by its magic bytes); if ``kind`` is
    given, check the file says it is one, of one of ``versions``.

    Raises AutoshardError with one line for a missing file, malformed JSON, NaN/inf values, or the wrong kind.
    """
    p = Path(path)
    if not p.is_file():
        raise AutoshardError(f"{p}: no such file; check the path")
    raw = p.read_bytes()
    if raw[:2] == GZIP_MAGIC:
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as e:  # a truncated or corrupt gzip stream
            raise AutoshardError(f"{p}: not a readable gzip file ({e}); copy or regenerate it") from None
    try:
        obj = json.loads(raw.decode(), parse_constant=_reject_constant, parse_float=_finite_float)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise AutoshardError(f"{p}: not valid JSON ({e}); regenerate the file") from None
    except ValueError as e:
        raise AutoshardError(f"{p}: {e} is not allowed; every number must be finite") from None
    if kind is not None:
        if not isinstance(obj, dict) or obj.get("kind") != kind:
            found = obj.get("kind") if isinstance(obj, dict) else type(obj).__name__
            raise AutoshardError(f"{p}: expected a '{kind}' file, found '{found}'; pass the right file")
        if obj.get("version") not in versions:
            want = " or ".join(map(str, versions))
            raise AutoshardError(f"{p}: version {obj.get('version')!r} is not supported (expected {want}); "
                                 "regenerate it")
    return obj


def check_object(value: Any, what: str, fix: str) -> dict[str, Any]:
    """``value`` if it is a JSON object (a dict), else an AutoshardError naming ``what`` and ``fix``."""
    if not isinstance(value, dict):
        raise AutoshardError(f"{what} is {value!r}, not an object; {fix}")
    return value


def check_finite(value: float, what: str) -> float:
    """Return ``value`` as float, or raise AutoshardError naming ``what`` if it is NaN or infinite."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise AutoshardError(f"{what} is {value!r}; it must be a number") from None
    if not math.isfinite(v):
        raise AutoshardError(f"{what} is {v}; it must be a finite number")
    return v


_UNITS = {
    "": 1, "b": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}


def parse_bytes(text: str) -> int:
    """Parse '5GB', '512MiB', '1.5e9' into bytes; AutoshardError on anything else or a non-positive size."""
    s = str(text).strip().lower().replace(" ", "")
    num = s.rstrip("kmgtib")
    unit = s[len(num):]
    try:
        value = float(num)
    except ValueError:
        raise AutoshardError(f"memory size {text!r} is not understood; write e.g. 5GB, 512MiB or 1.5e9") \
            from None
    if unit not in _UNITS or not math.isfinite(value):
        raise AutoshardError(f"memory size {text!r} is not understood; write e.g. 5GB, 512MiB or 1.5e9")
    if value <= 0:
        raise AutoshardError(f"memory size {text!r} must be positive")
    return int(value * _UNITS[unit])


def format_bytes(n: float) -> str:
    """Human-readable size in decimal units (GB, MB), as memory capacities are usually given."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.2f}{unit}"
    return f"{int(n)}B"
