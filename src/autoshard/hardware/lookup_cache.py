"""Generated lookup batches, kept for the next measurement of the same table in this process.

The evaluator times every plan of a task R rounds, device by device, and every plan holds the same tables:
without a cache each measurement draws its tables' lookups again (``sample_lookups`` is deterministic, so
the draws are identical). On a GPU the draw, on the CPU, is most of a measurement: a batch of 65536 samples
of a dozen tables holds millions of ids to draw, against a kernel of a millisecond or so. The
cache is bounded in bytes (least recently used batches go first) and its arrays are read-only, so a caller
that wanted to modify one fails loudly instead of corrupting the next measurement.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from autoshard.tables.lookup_batch import Lookups
from autoshard.tables.lookups import sample_lookups
from autoshard.tables.table import Table

LOOKUP_CACHE_BYTES = 2 * 2**30
"""Most bytes of index and offset arrays kept: a DLRM-50 task's tables at batch 65536 and 4 seeds (~2 GB)
fit; at the CPU suites' batch 2048 a whole suite's tables do."""

_cache: OrderedDict[tuple, Lookups] = OrderedDict()
_bytes = 0
_lock = threading.Lock()


def _size(lk: Lookups) -> int:
    return int(lk.indices.nbytes + lk.offsets.nbytes)


def cached_lookups(table: Table, batch_size: int, seed: int, rows: int | None = None) -> Lookups:
    """``sample_lookups(table, batch_size, seed=seed, rows=rows)``, drawn once per process while it stays
    among the most recently used ``LOOKUP_CACHE_BYTES``; the returned arrays are read-only."""
    global _bytes
    key = (table, int(batch_size), int(seed), None if rows is None else int(rows))
    with _lock:
        hit = _cache.get(key)
        if hit is not None:
            _cache.move_to_end(key)
            return hit
    lk = sample_lookups(table, batch_size, seed=seed, rows=rows)  # fresh arrays: safe to freeze
    for a in (lk.indices, lk.offsets):
        a.flags.writeable = False
    size = _size(lk)
    if size > LOOKUP_CACHE_BYTES:
        return lk
    with _lock:
        if key not in _cache:
            _cache[key] = lk
            _bytes += size
        while _bytes > LOOKUP_CACHE_BYTES and _cache:
            _, old = _cache.popitem(last=False)
            _bytes -= _size(old)
    return lk


def clear_lookup_cache() -> None:
    """Drop every kept batch (tests; or to free the memory)."""
    global _bytes
    with _lock:
        _cache.clear()
        _bytes = 0
