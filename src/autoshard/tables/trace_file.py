"""Reader for the public dlrm_datasets embedding-lookup trace files, and real lookup batches read from them.

File format (shared/data/dlrm_datasets/feature_stats.json, "trace_format"): ``torch.save((indices, offsets,
lengths))``, plain (``.pt``) or gzipped (``.pt.gz``), for T tables and a batch of B samples:

- ``lengths``: integer tensor [T, B], the bag size of every (table, sample);
- ``offsets``: flat, length T*B + 1, table-major and global: table t's bags are offsets[t*B:(t+1)*B+1],
  bag (t, b) is indices[offsets[t*B+b]:offsets[t*B+b+1]];
- ``indices``: flat; table t's indices are indices[offsets[t*B]:offsets[(t+1)*B]].

A table derived from a trace (``tables.trace``) keeps a ``LookupSpec(kind=TRACE, trace_path,
trace_table)``, so the kernels can later be timed on its real index stream (``trace_lookups``). Files are
loaded with ``torch.load(weights_only=True)``, memory-mapped where the format allows (a ``.pt.gz`` is first
decompressed to a temporary file, which needs that much free space in the temp directory), and the last
one loaded is cached per process (a real file holds ~900M indices, several GB).
"""

from __future__ import annotations

import gzip
import shutil
import tempfile
import threading
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from autoshard.errors import AutoshardError
from autoshard.tables.lookup_batch import Lookups
from autoshard.tables.table import LookupKind, Table

TRACE_SUFFIXES = (".pt.gz", ".pt")
"""Names the published files use (newer ones gzipped, older copies plain)."""
_EXPECTED = "a torch.save'd tuple (indices, offsets, lengths) of integer tensors"
_COPY_CHUNK = 1 << 24
"""Bytes per read when decompressing a .pt.gz trace to a temporary file."""


@dataclass(frozen=True)
class Trace:
    """One trace file in memory (numpy views of the loaded tensors)."""

    path: str
    indices: np.ndarray
    """int64, flat."""
    offsets: np.ndarray
    """int64, length T*B + 1, global offsets into ``indices``."""
    lengths: np.ndarray
    """int64, [T, B]."""

    @property
    def num_tables(self) -> int:
        return int(self.lengths.shape[0])

    @property
    def batch_size(self) -> int:
        return int(self.lengths.shape[1])

    def table_indices(self, t: int) -> np.ndarray:
        """All indices of table ``t`` over the file's batch."""
        b = self.batch_size
        return self.indices[self.offsets[t * b]:self.offsets[(t + 1) * b]]

    def bags(self, t: int, samples: np.ndarray) -> Lookups:
        """The bags of table ``t`` for the given sample positions (in that order), re-based to start at 0."""
        b = self.batch_size
        lens = self.lengths[t, samples]
        starts = self.offsets[t * b + samples]
        offsets = np.zeros(len(samples) + 1, dtype=np.int64)
        np.cumsum(lens, out=offsets[1:])
        pos = np.repeat(starts - offsets[:-1], lens) + np.arange(int(offsets[-1]), dtype=np.int64)
        return Lookups(self.indices[pos], offsets)


def _as_int_array(x: object, what: str, path: Path) -> np.ndarray:
    import torch

    if (not isinstance(x, torch.Tensor) or x.dtype.is_floating_point or x.dtype.is_complex
            or x.dtype == torch.bool):
        found = f"a {x.dtype} tensor" if isinstance(x, torch.Tensor) else type(x).__name__
        raise AutoshardError(f"{path}: {what} is {found}; expected {_EXPECTED}")
    return x.detach().cpu().numpy().astype(np.int64, copy=False)


def _check_structure(obj: object, path: Path) -> Trace:
    if not isinstance(obj, (tuple, list)) or len(obj) != 3:
        found = (f"a {type(obj).__name__} of {len(obj)}" if isinstance(obj, (tuple, list))
                 else type(obj).__name__)
        raise AutoshardError(f"{path}: holds {found}; expected {_EXPECTED}")
    indices, offsets, lengths = (_as_int_array(x, n, path)
                                 for x, n in zip(obj, ("indices", "offsets", "lengths")))
    if lengths.ndim != 2 or lengths.shape[0] == 0 or lengths.shape[1] == 0:
        raise AutoshardError(f"{path}: lengths has shape {list(lengths.shape)}; "
                             "expected [T tables, B samples]")
    t, b = lengths.shape
    if offsets.ndim != 1 or len(offsets) != t * b + 1:
        raise AutoshardError(
            f"{path}: offsets has shape {list(offsets.shape)}; "
            f"expected [T*B+1] = [{t * b + 1}] for lengths [{t}, {b}]"
        )
    if indices.ndim != 1:
        raise AutoshardError(f"{path}: indices has shape {list(indices.shape)}; expected a flat tensor")
    if (lengths < 0).any():
        raise AutoshardError(f"{path}: lengths has negative bag sizes; expected counts >= 0")
    if offsets[0] < 0 or offsets[-1] > len(indices) or not np.array_equal(np.diff(offsets), lengths.ravel()):
        raise AutoshardError(
            f"{path}: offsets and lengths disagree; "
            "expected offsets[k+1] - offsets[k] == lengths.flatten()[k] "
            f"within the {len(indices)} indices"
        )
    if len(indices) and indices.min() < 0:
        raise AutoshardError(f"{path}: indices has negative values; expected row ids >= 0")
    return Trace(str(path), indices, offsets, lengths)


def read_trace(path: str) -> Trace:
    """Load and check a trace file (no caching); AutoshardError with one line on any problem."""
    p = Path(path)
    if not p.is_file():
        raise AutoshardError(f"{p}: no such trace file; give a dlrm_datasets .pt or .pt.gz file")
    try:
        if p.name.endswith(".gz"):
            # torch.load seeks around the zip archive, which a gzip stream does only by re-reading from the
            # start (measured 7.5x slower on a 160 MB trace); so decompress to a temporary file, map it, and
            # unlink it (the mapping stays valid).
            with tempfile.NamedTemporaryFile(prefix="autoshard-trace-", suffix=".pt") as tmp:
                with gzip.open(p, "rb") as f:
                    shutil.copyfileobj(f, tmp, _COPY_CHUNK)
                tmp.flush()
                obj = _torch_load(tmp.name)
        else:
            obj = _torch_load(str(p))
    except MemoryError:
        raise
    except Exception as e:  # noqa: BLE001 - a malformed file makes the unpickler raise almost anything
        # (UnpicklingError, KeyError, EOFError, RuntimeError, zlib.error, ...); all mean "not a trace file"
        if "Unsupported global" in str(e) or "Unsupported operand" in str(e):
            reason = "it holds objects other than tensors, which weights_only loading refuses"
        elif p.name.endswith(".gz") and isinstance(e, (gzip.BadGzipFile, zlib.error, EOFError)):
            reason = f"broken or truncated gzip data: {type(e).__name__}"
        elif isinstance(e, OSError) and e.errno is not None:
            reason = f"{e.strerror} while reading or decompressing it"
        else:
            reason = "not a torch.save file"
        raise AutoshardError(f"{p}: cannot load the trace ({reason}); expected {_EXPECTED}") from None
    return _check_structure(obj, p)


def _torch_load(path: str) -> object:
    """Tensors-only load, memory-mapped when the file is in torch's zip format (a real trace is several
    GB)."""
    import torch

    try:
        return torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except RuntimeError as e:
        if "mmap" not in str(e):
            raise
        return torch.load(path, map_location="cpu", weights_only=True)  # legacy (pre-zip) format


_CACHE: dict[tuple[str, int, int], Trace] = {}
_CACHE_LOCK = threading.Lock()


def load_trace(path: str) -> Trace:
    """``read_trace`` with a one-file cache per process (keyed by resolved path, size and mtime)."""
    p = Path(path).resolve()
    try:
        st = p.stat()
    except OSError:
        raise AutoshardError(f"{path}: no such trace file; give a dlrm_datasets .pt or .pt.gz file") from None
    key = (str(p), st.st_size, st.st_mtime_ns)
    with _CACHE_LOCK:
        if key in _CACHE:
            return _CACHE[key]
    trace = read_trace(str(p))
    with _CACHE_LOCK:
        _CACHE.clear()  # one file at a time: a real trace is several GB
        _CACHE[key] = trace
    return trace


def trace_lookups(table: Table, batch_size: int, seed: int) -> Lookups:
    """A batch of ``batch_size`` real bags of ``table`` from its trace.

    Batch ``seed`` is the window of consecutive samples starting at (seed * batch_size) mod B, wrapping around
    (cycling) when it runs past the file's B samples, so it is deterministic and successive seeds see
    successive parts of the trace.
    """
    spec = table.lookups
    if (spec is None or spec.kind is not LookupKind.TRACE or spec.trace_path is None
            or spec.trace_table is None):
        raise AutoshardError(f"table {table.name} has no trace; "
                             "regenerate it with 'autoshard tables from-trace'")
    if batch_size <= 0:
        raise AutoshardError(f"batch size {batch_size} must be positive")
    trace = load_trace(spec.trace_path)
    t = int(spec.trace_table)
    if not 0 <= t < trace.num_tables:
        raise AutoshardError(
            f"table {table.name}: trace table {t} not in {spec.trace_path} ({trace.num_tables} tables); "
            "regenerate the tables file from this trace"
        )
    start = (int(seed) * batch_size) % trace.batch_size
    samples = (start + np.arange(batch_size, dtype=np.int64)) % trace.batch_size
    return trace.bags(t, samples)
