"""The evaluator's per-process cache of generated lookup batches (hardware.lookup_cache)."""

from __future__ import annotations

import numpy as np
import pytest

from autoshard.hardware import lookup_cache
from autoshard.hardware.lookup_cache import cached_lookups, clear_lookup_cache
from autoshard.tables.lookups import sample_lookups
from tests.conftest import make_tables


@pytest.fixture(autouse=True)
def _empty_cache():
    clear_lookup_cache()
    yield
    clear_lookup_cache()


def test_cached_batches_are_the_generated_ones_drawn_once_and_read_only() -> None:
    table = make_tables(1)[0]
    first = cached_lookups(table, 256, seed=3, rows=1000)
    want = sample_lookups(table, 256, seed=3, rows=1000)
    assert np.array_equal(first.indices, want.indices) and np.array_equal(first.offsets, want.offsets)
    assert cached_lookups(table, 256, seed=3, rows=1000) is first  # drawn once
    assert cached_lookups(table, 256, seed=4, rows=1000) is not first  # another batch
    uncapped = cached_lookups(table, 256, seed=3)  # rows=None: another key, the table's own rows
    assert np.array_equal(uncapped.indices, sample_lookups(table, 256, seed=3).indices)
    with pytest.raises(ValueError):
        first.indices[0] = 1  # a caller cannot corrupt the next measurement's batch


def test_the_cache_keeps_the_most_recently_used_bytes(monkeypatch) -> None:
    a, b, c = make_tables(3)
    sa, sb, sc = (lk.indices.nbytes + lk.offsets.nbytes for lk in (sample_lookups(t, 512, seed=0) for t in
                                                                   (a, b, c)))
    # room for a with b or with c, never all three
    monkeypatch.setattr(lookup_cache, "LOOKUP_CACHE_BYTES", max(sa + sb, sa + sc) + min(sb, sc) // 2)
    one = cached_lookups(a, 512, seed=0)
    cached_lookups(b, 512, seed=0)
    assert cached_lookups(a, 512, seed=0) is one  # a used last: b is the oldest now
    cached_lookups(c, 512, seed=0)  # over the budget: b goes
    assert cached_lookups(a, 512, seed=0) is one
    assert len(lookup_cache._cache) == 2 and (b, 512, 0, None) not in lookup_cache._cache
