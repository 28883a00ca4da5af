"""dlrm_datasets trace reader: small files in the exact published format (.pt and .pt.gz), written here with
torch.save, read back; features checked against values computed independently in the test."""

from __future__ import annotations

import datetime
import gzip
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch

from autoshard.errors import AutoshardError
from autoshard.tables import LookupKind, TablePool
from autoshard.tables.lookups import sample_lookups
from autoshard.tables.trace import trace_pool
from autoshard.tables.trace_file import read_trace, trace_lookups

T, B = 4, 300
EMPTY_TABLE = 2


def make_trace(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(indices, offsets, lengths) as the published files hold them: lengths [T, B], flat table-major global
    offsets of length T*B+1; table 2 has no lookups; skewed indices so bins above the first are populated."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(0, 9, (T, B), generator=g)
    lengths[EMPTY_TABLE] = 0
    lengths[3] = 1  # a one-hot feature
    offsets = torch.zeros(T * B + 1, dtype=torch.int64)
    offsets[1:] = torch.cumsum(lengths.flatten(), 0)
    n = int(offsets[-1])
    u = torch.rand(n, generator=g, dtype=torch.float64)
    indices = (torch.floor(5000 * u**4)).to(torch.int64)  # hot low ids, long tail
    return indices, offsets, lengths


def write(path: Path, obj: object) -> str:
    if path.name.endswith(".gz"):
        with gzip.open(path, "wb") as f:
            torch.save(obj, f)
    else:
        torch.save(obj, path)
    return str(path)


def expected_bins(values: list[int]) -> list[float]:
    """Share of distinct values seen (0,1], (1,2], (2,4], ..., >32768 times, computed from a Counter."""
    counts = Counter(values)
    hist = [0] * 17
    for c in counts.values():
        hist[min((c - 1).bit_length(), 16)] += 1  # c in (2^(k-1), 2^k] -> k
    return [h / len(counts) for h in hist] if counts else [0.0] * 17


def table_stream(trace, t: int) -> list[list[int]]:
    """Table t's bags, walked with lengths only (independent of the offsets the reader uses)."""
    indices, _, lengths = trace
    flat = lengths.flatten().tolist()
    start = sum(flat[: t * B])
    bags = []
    for b in range(B):
        n = int(lengths[t, b])
        bags.append(indices[start:start + n].tolist())
        start += n
    return bags


@pytest.fixture(params=["trace.pt", "trace.pt.gz"])
def trace_file(request, tmp_path) -> tuple[str, tuple]:
    data = make_trace()
    return write(tmp_path / request.param, data), data


def test_features_match_independent_computation(trace_file):
    path, data = trace_file
    pool = trace_pool(path)
    assert len(pool.tables) == T
    for t, table in enumerate(pool.tables):
        flat = [i for bag in table_stream(data, t) for i in bag]
        assert table.pooling_factor == pytest.approx(len(flat) / B)
        assert table.rows == (max(flat) + 1 if flat else 1)
        assert table.access_bins == pytest.approx(expected_bins(flat), abs=1e-12)
        assert table.dim == 16
        assert table.lookups.kind is LookupKind.TRACE and table.lookups.trace_table == t
    assert sum(pool.tables[0].access_bins[1:]) > 0.1  # the skewed ids do reuse rows
    assert pool.tables[3].pooling_factor == 1.0
    assert pool.source["empty_tables"] == [pool.tables[EMPTY_TABLE].name]
    assert pool.tables[EMPTY_TABLE].pooling_factor == 0.0 and sum(pool.tables[EMPTY_TABLE].access_bins) == 0.0
    assert pool.source["batch_size"] == B and pool.source["num_tables"] == T


def test_sample_lookups_returns_the_tables_real_bags(trace_file, tmp_path):
    path, data = trace_file
    pool = TablePool.from_json(trace_pool(path).to_json())  # through JSON, as a saved pool is used
    for t in (0, 1, 3):
        bags = table_stream(data, t)
        whole = sample_lookups(pool.tables[t], B, seed=0)
        got = [whole.indices[whole.offsets[b]:whole.offsets[b + 1]].tolist() for b in range(B)]
        assert got == bags
        # seed k is the window starting at k * batch (mod B), wrapping around
        lk = sample_lookups(pool.tables[t], 100, seed=2)
        assert [lk.indices[lk.offsets[b]:lk.offsets[b + 1]].tolist() for b in range(100)] == bags[200:300]
        assert np.array_equal(sample_lookups(pool.tables[t], 100, seed=2).indices, lk.indices)
        # a batch larger than the file cycles through its bags
        big = sample_lookups(pool.tables[t], 2 * B + 10, seed=0)
        assert big.batch_size == 2 * B + 10
        got = [big.indices[big.offsets[b]:big.offsets[b + 1]].tolist() for b in range(2 * B + 10)]
        assert got == bags + bags + bags[:10]
    empty = sample_lookups(pool.tables[EMPTY_TABLE], 50, seed=0)
    assert len(empty.indices) == 0 and empty.batch_size == 50


def test_dims_single_and_seeded_choice(trace_file):
    path, _ = trace_file
    assert {t.dim for t in trace_pool(path, dims=(32,)).tables} == {32}
    a = [t.dim for t in trace_pool(path, dims=(4, 8, 16, 32, 64, 128), seed=5).tables]
    b = [t.dim for t in trace_pool(path, dims=(4, 8, 16, 32, 64, 128), seed=5).tables]
    assert a == b and set(a) <= {4, 8, 16, 32, 64, 128}
    with pytest.raises(AutoshardError):
        trace_pool(path, dims=(0,))


def test_pt_gz_and_legacy_format_read_the_same(tmp_path):
    data = make_trace(seed=3)
    a = read_trace(write(tmp_path / "x.pt", data))
    b = read_trace(write(tmp_path / "x.pt.gz", data))
    # older copies of the traces
    torch.save(data, tmp_path / "legacy.pt", _use_new_zipfile_serialization=False)
    c = read_trace(str(tmp_path / "legacy.pt"))
    for field in ("indices", "offsets", "lengths"):
        assert np.array_equal(getattr(a, field), getattr(b, field))
        assert np.array_equal(getattr(a, field), getattr(c, field))


def _bad_files(tmp_path: Path) -> list[tuple[str, str]]:
    idx, off, lens = make_trace()
    (tmp_path / "text.pt").write_text("indices offsets lengths\n")
    (tmp_path / "broken.pt.gz").write_bytes(gzip.compress(b"not a torch file")[:-6])
    (tmp_path / "random.pt").write_bytes(bytes(range(256)) * 8)
    (tmp_path / "hello.pt").write_text("hello")
    bad_offsets = off.clone()
    bad_offsets[5] += 1
    return [
        (str(tmp_path / "missing.pt"), "no such trace file"),
        (str(tmp_path / "text.pt"), "cannot load"),
        (str(tmp_path / "broken.pt.gz"), "cannot load"),
        (str(tmp_path / "random.pt"), "cannot load"),
        (str(tmp_path / "hello.pt"), "cannot load"),
        (write(tmp_path / "object.pt", (idx, off, lens, datetime.date(2021, 1, 1))),
         "objects other than tensors"),
        (write(tmp_path / "two.pt", (idx, off)), "expected a torch.save'd tuple"),
        (write(tmp_path / "dict.pt", {"indices": idx}), "expected a torch.save'd tuple"),
        (write(tmp_path / "float.pt", (idx.double(), off, lens)), "indices is a torch.float64 tensor"),
        (write(tmp_path / "flat_lengths.pt", (idx, off, lens.flatten())), "expected [T tables, B samples]"),
        (write(tmp_path / "short_offsets.pt", (idx, off[:-1], lens)), f"expected [T*B+1] = [{T * B + 1}]"),
        (write(tmp_path / "bad_offsets.pt", (idx, bad_offsets, lens)), "offsets and lengths disagree"),
        (write(tmp_path / "too_few.pt", (idx[:-3], off, lens)), "offsets and lengths disagree"),
        (write(tmp_path / "negative.pt", (-idx - 1, off, lens)), "negative"),
    ]


def test_bad_trace_files_give_one_line_errors(tmp_path):
    for path, message in _bad_files(tmp_path):
        with pytest.raises(AutoshardError) as e:
            trace_pool(path)
        assert message in str(e.value), (path, str(e.value))
        assert "\n" not in str(e.value)


def test_trace_table_whose_file_is_gone(tmp_path):
    path = write(tmp_path / "gone.pt", make_trace())
    pool = trace_pool(path)
    Path(path).unlink()
    with pytest.raises(AutoshardError, match="no such trace file"):
        sample_lookups(pool.tables[0], 10)
    with pytest.raises(AutoshardError, match="has no trace"):
        trace_lookups(TablePool.from_json({"tables": [{"name": "x", "dim": 4, "rows": 5,
                                                       "pooling_factor": 1.0}]})
                      .tables[0], 10, 0)
