"""One batch of lookups of one table (index bags in flat CSR form): what the lookup generators and the trace
reader produce and the kernels are timed on."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Lookups:
    """One batch of bags for one table: ``indices`` flat, bag ``b`` is indices[offsets[b]:offsets[b+1]]."""

    indices: np.ndarray  # int64
    offsets: np.ndarray  # int64, length batch_size + 1

    @property
    def batch_size(self) -> int:
        return len(self.offsets) - 1

    def in_rows(self, start: int, end: int) -> Lookups:
        """The lookups a row shard ``[start, end)`` serves: each bag keeps its indices in the range, shifted
        to the shard's own row numbers (a bag may become empty: that sample has no row on this shard)."""
        keep = (self.indices >= start) & (self.indices < end)
        kept_before = np.concatenate([[0], np.cumsum(keep)])
        return Lookups((self.indices[keep] - start).astype(np.int64),
                       kept_before[self.offsets].astype(np.int64))

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)
