"""Sequence tables: an id SEQUENCE per sample, one vector per id (TorchRec's EmbeddingCollection, unpooled).

A sequence-based recommender looks up every id of a sample's history and keeps every vector, so each id's
vector crosses the embedding all-to-all (a pooled table sends one vector per sample). What decides the
traffic of a plan is then the access distribution: which share of the lookups each row gets.

The distribution is stored compactly, in FREQUENCY-RANK space (row 0 is the hottest, ids numbered by
frequency):

- ``head``: the exact probabilities of the hottest K rows, non-increasing;
- the remaining ``rows - K`` rows share the rest of the mass (``tail_mass = 1 - sum(head)``) by a discrete
  power law: row ``i >= K`` has probability ``tail_mass * (i + 1) ** -tail_alpha / Z`` with
  ``Z = sum_{n=K+1}^{rows} n ** -tail_alpha``.

``hot_mass(k)``, the share of lookups that go to the k hottest rows, is the head's prefix sum for k <= K and
beyond adds the tail's partial power sums; those are summed term by term for the first
``DIRECT_TERMS`` terms and by Euler-Maclaurin (three Bernoulli corrections) after, which is exact to double
precision (the first dropped term is below 1e-13 of the last summed one); tested against direct sums.

Tables built from real ids (``from_ids``) keep the original ids of the K hottest rows (``hot_ids``):
``to_ranks`` maps original ids to frequency ranks (head ids to 0..K-1, every other id to K.. in increasing
id order, a bijection) and ``to_ids`` back. Plans, the traffic model and the runtime work in rank space.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from autoshard.errors import AutoshardError

DIRECT_TERMS = 64
"""Terms of a power sum added one by one before Euler-Maclaurin takes over."""

_TOL = 1e-9
"""Tolerance on probabilities summing to one and on the distribution being non-increasing."""

SEQUENCE_TABLE_KIND = "autoshard.sequence_table"


def power_sum(s: float, q: float, count: int) -> float:
    """``sum_{t=0}^{count-1} (q + t) ** -s`` for ``q > 0``, ``s >= 0``: the first ``DIRECT_TERMS`` terms
    directly, the rest by Euler-Maclaurin (integral, end points, B2, B4 and B6 corrections)."""
    if count <= 0:
        return 0.0
    m = min(int(count), DIRECT_TERMS)
    direct = float(np.sum((q + np.arange(m, dtype=np.float64)) ** -s))
    if count == m:
        return direct
    a, b = q + m, q + count - 1  # the remaining terms are x = a, a + 1, ..., b
    if s == 1.0:
        integral = math.log(b / a)
    else:
        integral = a ** (1.0 - s) * math.expm1((1.0 - s) * math.log(b / a)) / (1.0 - s)

    def deriv(x: float, order: int) -> float:  # d^order/dx^order of x^-s
        c = 1.0
        for j in range(order):
            c *= -(s + j)
        return c * x ** (-s - order)

    corr = (deriv(b, 1) - deriv(a, 1)) / 12.0 - (deriv(b, 3) - deriv(a, 3)) / 720.0 \
        + (deriv(b, 5) - deriv(a, 5)) / 30240.0
    return direct + integral + 0.5 * (a ** -s + b ** -s) + corr


def _cell_integral(n: np.ndarray, s: float) -> np.ndarray:
    """``integral_n^{n+1} x ** -s dx`` (n >= 1), computed without cancellation."""
    if s == 1.0:
        return np.log1p(1.0 / n)
    return n ** (1.0 - s) * np.expm1((1.0 - s) * np.log1p(1.0 / n)) / (1.0 - s)


def _seq_lengths(rng: np.random.Generator, batch_size: int, mean: float, cv: float) -> np.ndarray:
    """Gamma-Poisson (negative binomial) sequence lengths with the given mean and coefficient of variation
    (Poisson when cv is 0), as the pooled tables' bag sizes."""
    if mean <= 0:
        return np.zeros(batch_size, dtype=np.int64)
    if cv <= 0:
        return rng.poisson(mean, batch_size).astype(np.int64)
    shape = 1.0 / (cv * cv)
    return rng.poisson(rng.gamma(shape, mean / shape, batch_size)).astype(np.int64)


@dataclass(frozen=True)
class SequenceTable:
    """A sequence feature's table: ``rows`` x ``dim``, ``mean_seq_len`` ids per sample (coefficient of
    variation ``seq_len_cv``), and its access distribution over frequency ranks (module docstring)."""

    name: str
    rows: int
    dim: int
    mean_seq_len: float
    seq_len_cv: float
    head: tuple[float, ...]
    """Exact probabilities of the hottest ``len(head)`` rows, row 0 first (non-increasing)."""
    tail_alpha: float
    """Power-law exponent of the rows after the head."""
    hot_ids: tuple[int, ...] | None = None
    """Original ids of the head rows (``from_ids``); None when ids already are frequency ranks."""
    seed: int = 0
    """Seed of the sampler (with the batch's own seed)."""

    def __post_init__(self) -> None:
        where = f"sequence table {self.name!r}"
        if int(self.rows) < 1 or int(self.dim) < 1:
            raise AutoshardError(f"{where}: rows ({self.rows}) and dim ({self.dim}) must be positive")
        if not (self.mean_seq_len >= 0 and self.seq_len_cv >= 0):
            raise AutoshardError(f"{where}: mean sequence length and its cv must be >= 0")
        if not (math.isfinite(self.tail_alpha) and self.tail_alpha >= 0):
            raise AutoshardError(f"{where}: tail exponent {self.tail_alpha} must be a number >= 0")
        h = np.asarray(self.head, dtype=np.float64)
        if len(h) > self.rows:
            raise AutoshardError(f"{where}: {len(h)} head probabilities for {self.rows} rows")
        if len(h) and (not np.all(np.isfinite(h)) or h.min() < 0 or np.any(np.diff(h) > _TOL)):
            raise AutoshardError(f"{where}: head probabilities must be >= 0 and non-increasing "
                                 "(row 0 hottest)")
        total = math.fsum(self.head)
        if total > 1 + _TOL or (len(h) == self.rows and abs(total - 1) > _TOL):
            raise AutoshardError(f"{where}: probabilities sum to {total:.12g}, not 1")
        if len(h) and len(h) < self.rows and self._tail_prob(len(h)) > h[-1] * (1 + 1e-6) + _TOL:
            raise AutoshardError(f"{where}: the tail's first row is hotter than the head's last; "
                                 "rows must be numbered by frequency")
        if self.hot_ids is not None:
            ids = np.asarray(self.hot_ids, dtype=np.int64)
            if len(ids) != len(h) or len(np.unique(ids)) != len(ids) or (len(ids) and (
                    ids.min() < 0 or ids.max() >= self.rows)):
                raise AutoshardError(f"{where}: hot_ids must be {len(h)} distinct ids in [0, {self.rows})")

    # ----------------------------------------------------------------------------- the distribution
    @property
    def head_rows(self) -> int:
        """K, the rows whose probability is stored exactly."""
        return len(self.head)

    @cached_property
    def tail_mass(self) -> float:
        """Share of lookups beyond the head."""
        return 0.0 if self.head_rows >= self.rows else max(0.0, 1.0 - math.fsum(self.head))

    @cached_property
    def _tail_norm(self) -> float:
        """Z = sum_{n=K+1}^{rows} n ** -alpha."""
        return power_sum(self.tail_alpha, self.head_rows + 1.0, self.rows - self.head_rows)

    @cached_property
    def _head_cum(self) -> np.ndarray:
        out = np.zeros(self.head_rows + 1)
        np.cumsum(np.asarray(self.head, dtype=np.float64), out=out[1:])
        return out

    @cached_property
    def _head_arr(self) -> np.ndarray:
        return np.asarray(self.head, dtype=np.float64)

    def _tail_prob(self, i: Any) -> Any:
        z = self._tail_norm
        return self.tail_mass * (np.asarray(i, dtype=np.float64) + 1.0) ** -self.tail_alpha / z if z else 0.0

    def probabilities(self, rows: Any) -> np.ndarray:
        """Probability of each row (frequency rank) in ``rows``."""
        r = np.asarray(rows, dtype=np.int64)
        out = np.zeros(r.shape)
        head = r < self.head_rows
        out[head] = self._head_arr[r[head]]
        out[~head] = self._tail_prob(r[~head])
        return out

    def hot_mass(self, k: int) -> float:
        """Share of lookups that go to the ``k`` hottest rows (0 for k <= 0, 1 for k >= rows)."""
        k = int(min(max(k, 0), self.rows))
        if k <= self.head_rows:
            return float(min(self._head_cum[k], 1.0))
        extra = power_sum(self.tail_alpha, self.head_rows + 1.0, k - self.head_rows)
        return float(min(self._head_cum[-1] + self.tail_mass * extra / self._tail_norm, 1.0))

    def count_above(self, threshold: float) -> int:
        """How many rows have probability strictly above ``threshold`` (the hottest ones, as the
        distribution is non-increasing)."""
        if threshold < 0:
            return self.rows
        n = int(np.sum(self._head_arr > threshold))
        if n < self.head_rows or self.head_rows >= self.rows or self.tail_mass <= 0:
            return n
        if self.tail_alpha == 0:
            return self.rows if self._tail_prob(self.head_rows) > threshold else n
        if threshold == 0:
            return self.rows
        # tail_mass (i+1)^-alpha / Z > t  <=>  i + 1 < (tail_mass / (Z t)) ** (1 / alpha)
        log_bound = (math.log(self.tail_mass) - math.log(self._tail_norm * threshold)) / self.tail_alpha
        if log_bound >= math.log(self.rows + 1.0):
            return self.rows
        i = int(min(math.ceil(math.exp(log_bound)) - 1, self.rows))  # i < bound - 1 qualify; fix rounding
        i = max(i, self.head_rows)
        while i > self.head_rows and self._tail_prob(i - 1) <= threshold:
            i -= 1
        while i < self.rows and self._tail_prob(i) > threshold:
            i += 1
        return max(i, self.head_rows)

    def strided_mass(self, start: int, stop: int, stride: int) -> np.ndarray:
        """(stride,) share of lookups of the rows ``start + j + t * stride < stop`` for each ``j``: what the
        j-th rank of a row-wise split that deals rows out in turn (``j = (row - start) % stride``) serves."""
        stride = int(stride)
        out = np.zeros(stride)
        start, stop = max(int(start), 0), min(int(stop), self.rows)
        if stop <= start:
            return out
        k = self.head_rows
        if start < k:
            idx = np.arange(start, min(stop, k))
            out += np.bincount((idx - start) % stride, weights=self._head_arr[idx], minlength=stride)
        first = max(start, k)
        if first < stop and self.tail_mass > 0:
            scale = self.tail_mass / self._tail_norm * stride ** -self.tail_alpha
            for j in range(stride):
                i0 = first + (j - (first - start)) % stride  # first tail row of residue j
                if i0 < stop:
                    count = (stop - i0 + stride - 1) // stride
                    out[j] += scale * power_sum(self.tail_alpha, (i0 + 1.0) / stride, count)
        return out

    # ----------------------------------------------------------------------------- id relabelling
    @cached_property
    def _sorted_hot(self) -> tuple[np.ndarray, np.ndarray]:
        ids = np.asarray(self.hot_ids, dtype=np.int64)
        order = np.argsort(ids, kind="stable")
        return ids[order], order

    def to_ranks(self, ids: Any) -> np.ndarray:
        """Original ids -> frequency ranks (identity when ``hot_ids`` is None)."""
        x = np.asarray(ids, dtype=np.int64)
        if self.hot_ids is None:
            return x.copy()
        hot, order = self._sorted_hot
        pos = np.searchsorted(hot, x)
        found = (pos < len(hot)) & (hot[np.minimum(pos, len(hot) - 1)] == x) if len(hot) else \
            np.zeros(x.shape, dtype=bool)
        out = self.head_rows + x - pos  # a cold id: K + (ids below it that are not hot)
        out[found] = order[pos[found]]
        return out

    def to_ids(self, ranks: Any) -> np.ndarray:
        """Frequency ranks -> original ids (inverse of ``to_ranks``)."""
        r = np.asarray(ranks, dtype=np.int64)
        if self.hot_ids is None:
            return r.copy()
        hot, _ = self._sorted_hot
        out = np.empty_like(r)
        is_hot = r < self.head_rows
        out[is_hot] = np.asarray(self.hot_ids, dtype=np.int64)[r[is_hot]]
        c = r[~is_hot] - self.head_rows  # the c-th id (0-based) that is not hot
        # smallest x with x - (#hot <= x) == c: fixed point over the sorted hot ids
        x = c.copy()
        for _ in range(len(hot) + 1):
            nx = c + np.searchsorted(hot, x, side="right")
            if np.array_equal(nx, x):
                break
            x = nx
        out[~is_hot] = x
        return out

    # ----------------------------------------------------------------------------- sampling
    def sample_rows(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` frequency ranks drawn from the access distribution (exact: the head by inverse CDF, the
        tail by rejection from the continuous power law on cells [n, n + 1))."""
        n = int(n)
        u = rng.random(n)
        head_total = self._head_cum[-1]
        out = np.searchsorted(self._head_cum[1:], u, side="right").astype(np.int64)
        tail = (u >= head_total) if self.tail_mass > 0 else np.zeros(n, dtype=bool)
        out[~tail] = np.minimum(out[~tail], max(self.head_rows - 1, 0))
        need = int(tail.sum())
        if need:
            out[tail] = self._sample_tail(need, rng)
        return out

    def _sample_tail(self, n: int, rng: np.random.Generator) -> np.ndarray:
        s, lo, hi = self.tail_alpha, float(self.head_rows + 1), float(self.rows + 1)  # 1-based n in [lo, hi)
        ratio_max = float(lo ** -s / _cell_integral(np.array([lo]), s)[0])
        got: list[np.ndarray] = []
        left = n
        while left > 0:
            m = max(2 * left, 64)
            u = rng.random(m)
            if s == 1.0:
                x = lo * np.exp(u * math.log(hi / lo))
            else:
                a, b = lo ** (1.0 - s), hi ** (1.0 - s)
                x = (a + u * (b - a)) ** (1.0 / (1.0 - s))
            k = np.clip(np.floor(x), lo, hi - 1.0)
            accept = rng.random(m) * ratio_max * _cell_integral(k, s) <= k ** -s
            take = k[accept][:left]
            got.append(take.astype(np.int64) - 1)
            left -= len(take)
        return np.concatenate(got)

    def sample(self, batch_size: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """A deterministic batch: (lengths (batch_size,), ids (sum of lengths,)) in frequency-rank space,
        the ids of sample b being ``ids[offsets[b]:offsets[b + 1]]`` (a KeyedJaggedTensor's values and
        lengths for this feature)."""
        if batch_size < 0:
            raise AutoshardError(f"batch size {batch_size} must be >= 0")
        rng = np.random.default_rng([int(self.seed), int(seed)])
        lengths = _seq_lengths(rng, int(batch_size), self.mean_seq_len, self.seq_len_cv)
        return lengths, self.sample_rows(int(lengths.sum()), rng)

    # ----------------------------------------------------------------------------- constructors
    @staticmethod
    def from_power_law(name: str, rows: int, dim: int, alpha: float, mean_seq_len: float,
                       seq_len_cv: float = 0.0, head_rows: int = 1024, seed: int = 0) -> SequenceTable:
        """Row ``i`` looked up with probability proportional to ``(i + 1) ** -alpha``; the first
        ``head_rows`` probabilities stored exactly, the rest by the same law."""
        rows, k = int(rows), int(min(max(head_rows, 0), rows))
        if rows < 1 or not alpha >= 0:
            raise AutoshardError(f"sequence table {name!r}: rows must be >= 1 and alpha >= 0")
        z = power_sum(alpha, 1.0, rows)
        head = tuple(float(p) for p in np.arange(1, k + 1, dtype=np.float64) ** -alpha / z)
        return SequenceTable(name, rows, int(dim), float(mean_seq_len), float(seq_len_cv), head, float(alpha),
                             None, int(seed))

    @staticmethod
    def from_ids(name: str, rows: int, dim: int, ids_batches: Iterable[Any], head_rows: int = 65536,
                 lengths_batches: Iterable[Any] | None = None, seed: int = 0) -> SequenceTable:
        """From observed ids (e.g. a KeyedJaggedTensor's values per batch; optionally its lengths, for the
        sequence-length mean and cv; without lengths each batch counts as one sample).

        The ``head_rows`` most frequent ids get their empirical probabilities. The tail exponent is the
        least-squares slope of log count on log rank over the observed ids seen at least twice (singletons
        flatten the curve; 1.0 when fewer than two such ranks). The tail's mass is the empirical mass of the
        observed ids beyond the head or, when the head holds every observed id, the Good-Turing estimate of
        the unseen mass (ids seen once / lookups); it is capped so that the tail's first row is not hotter
        than the head's last."""
        parts: list[np.ndarray] = []
        for ids in ids_batches:
            x = np.asarray(ids.numpy() if hasattr(ids, "numpy") else ids, dtype=np.int64).ravel()
            if len(x) and (x.min() < 0 or x.max() >= rows):
                raise AutoshardError(f"sequence table {name!r}: ids must lie in [0, {rows})")
            parts.append(x)
        lengths: list[np.ndarray] = []
        if lengths_batches is not None:
            lengths = [np.asarray(v.numpy() if hasattr(v, "numpy") else v, dtype=np.float64).ravel()
                       for v in lengths_batches]
        all_ids = np.concatenate(parts) if parts else np.zeros(0, np.int64)
        seen, counts = np.unique(all_ids, return_counts=True)
        total = int(counts.sum())
        if total == 0:
            raise AutoshardError(f"sequence table {name!r}: no ids to count")
        by_count = np.argsort(-counts, kind="stable")  # ids by decreasing count, ties by id
        order = seen[by_count]
        c = counts[by_count].astype(np.float64)
        k = int(min(max(head_rows, 1), len(order), rows))
        two = c >= 2
        if two.sum() >= 2:
            ranks = np.arange(1, len(c) + 1, dtype=np.float64)[two]
            slope = np.polyfit(np.log(ranks), np.log(c[two]), 1)[0]
            alpha = float(min(max(-slope, 0.0), 8.0))
        else:
            alpha = 1.0
        if k < len(order):
            tail = float(c[k:].sum()) / total
        elif k < rows:
            tail = float(np.sum(c == 1)) / total
        else:
            tail = 0.0
        if tail > 0 and k < rows:
            x = (k + 1.0) ** -alpha / power_sum(alpha, k + 1.0, rows - k)  # tail's first row per unit mass
            y = c[k - 1] / float(c[:k].sum())  # head's last row per unit head mass
            tail = min(tail, y / (x + y))
        head = c[:k] / float(c[:k].sum()) * (1.0 - tail)
        if lengths:
            all_len = np.concatenate(lengths)
            mean = float(all_len.mean()) if len(all_len) else 0.0
            cv = float(all_len.std() / mean) if mean > 0 else 0.0
        else:
            mean, cv = total / max(len(parts), 1), 0.0
        return SequenceTable(name, int(rows), int(dim), mean, cv, tuple(float(p) for p in head), alpha,
                             tuple(int(i) for i in order[:k]), int(seed))

    # ----------------------------------------------------------------------------- JSON
    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"kind": SEQUENCE_TABLE_KIND, "name": self.name, "rows": self.rows,
                             "dim": self.dim, "mean_seq_len": self.mean_seq_len,
                             "seq_len_cv": self.seq_len_cv, "head": list(self.head),
                             "tail_alpha": self.tail_alpha, "seed": self.seed}
        if self.hot_ids is not None:
            d["hot_ids"] = list(self.hot_ids)
        return d

    @staticmethod
    def from_json(d: dict[str, Any]) -> SequenceTable:
        if not isinstance(d, dict) or d.get("kind", SEQUENCE_TABLE_KIND) != SEQUENCE_TABLE_KIND:
            raise AutoshardError(f"not a sequence table (kind {SEQUENCE_TABLE_KIND!r} expected)")
        try:
            hot = d.get("hot_ids")
            return SequenceTable(str(d["name"]), int(d["rows"]), int(d["dim"]), float(d["mean_seq_len"]),
                                 float(d.get("seq_len_cv", 0.0)), tuple(float(p) for p in d["head"]),
                                 float(d["tail_alpha"]), None if hot is None else tuple(int(i) for i in hot),
                                 int(d.get("seed", 0)))
        except (KeyError, TypeError, ValueError):
            raise AutoshardError("sequence table: needs name, rows, dim, mean_seq_len, head (a list of "
                                 "probabilities) and tail_alpha") from None
