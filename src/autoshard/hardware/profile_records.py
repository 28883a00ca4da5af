"""The profiling dataset's record format: one measured sample (:class:`CostRecord`) a JSON line, in
``shards-rank<R>.jsonl`` (rank R appends its own file; ``hardware.profiler`` writes them) and, once packed
(``pack_records``), in ``shards-packed.jsonl.gz``; and the sample ids that name records (``sample_id``:
'<seed>-<index>').

Packing exists so a profile can be kept under version control and grown over several sittings: the packed
file is compressed (3.6x smaller than the plain lines on the broad profile), byte-stable, and a later
``autoshard profile`` run in the same directory appends new samples to plain rank files beside it, skipping
every sample it holds."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autoshard.errors import AutoshardError
from autoshard.hardware.jsonl import read_jsonl, write_jsonl_gz
from autoshard.host import hardware_difference
from autoshard.shards import ShardRef
from autoshard.tables.table import Precision, Table

TABLES_FILE = "tables.json"
MANIFEST_FILE = "profile.json"
SHARDS_GLOB = "shards-*.jsonl"
PACKED_FILE = "shards-packed.jsonl.gz"


@dataclass(frozen=True)
class CostRecord:
    """One measured shard: a set of tables (at ``dims``) fused on one device, and what it cost."""

    sample_id: str
    """'<seed>-<index>': which sample of the profile this is (unique in a dataset)."""
    tables: tuple[str, ...]
    """Names of the tables in the pool (tables.json)."""
    dims: tuple[int, ...]
    """Columns of each table on the device (below the table's dim for a column shard)."""
    batch_size: int
    fwd_ms: float
    bwd_ms: float
    fwd_cv: float
    bwd_cv: float
    settings: dict[str, Any]
    """MeasureSettings as JSON plus 'precision': the same MeasureSettings for every record of a dataset; the
    precision too in the ``pool`` design, the sample's own in the ``broad`` one."""
    host: dict[str, Any]
    """Where it was measured (hostname, CPU/GPU, versions, rank); a GPU profile's records since stop 35 also
    carry ``gpu_state`` (clocks, temperature, power: ``autoshard.host.gpu_state``) read when it was timed."""
    rows: tuple[int, ...] = ()
    """Rows each table KEPT for timing (the rows rule of hardware.kernel: min(rows, cap))."""
    tries: int = 1
    """Measurement tries (more than 1 when a try was noisier than settings.max_cv)."""
    real_rows: tuple[int, ...] = ()
    """Rows each table really has (what the cost model is given); empty in records made before it was
    recorded (the pool's tables say it)."""
    table_specs: tuple[dict[str, Any], ...] = ()
    """The sample's own tables (``Table.to_json``), in the order of ``tables``: the ``broad`` design
    generates them per sample; empty when the tables are the dataset's tables.json."""

    row_ranges: tuple[tuple[int, int | None], ...] = ()
    """Each table's row range [start, end) (end None: to its last row) where the device held row shards:
    DreamShard's loop records the planners' devices, row-wise ones included; empty: whole tables (every
    profiled sample)."""

    def shard_refs(self, positions: Sequence[int] | None = None) -> list[ShardRef]:
        """The record's shards as cost models see them, table i at index ``positions[i]`` of the task they
        are priced in (default i): the one place a record becomes shards."""
        pos = range(len(self.tables)) if positions is None else positions
        ranges = self.row_ranges or ((0, None),) * len(self.tables)
        return [ShardRef(int(p), int(d), int(r0), None if r1 is None else int(r1))
                for p, d, (r0, r1) in zip(pos, self.dims, ranges)]

    @property
    def precision(self) -> Precision:
        """The weights' precision the device was timed at (``settings['precision']``, fp32 when absent)."""
        try:
            return Precision(str(self.settings.get("precision", "fp32")))
        except ValueError:
            raise AutoshardError(f"record {self.sample_id}: "
                                 f"precision {self.settings.get('precision')!r} unknown") from None

    @property
    def timed_bytes(self) -> int:
        """Bytes of the tables the device was timed with: each table's kept ``rows`` x its dim x the record's
        element bytes (0 for a record made before ``rows`` was recorded)."""
        return sum(int(r) * int(d) for r, d in zip(self.rows, self.dims)) * self.precision.bytes

    def to_json(self) -> dict[str, Any]:
        d = {"sample_id": self.sample_id, "tables": list(self.tables), "dims": list(self.dims),
             "batch_size": self.batch_size, "fwd_ms": self.fwd_ms, "bwd_ms": self.bwd_ms,
             "fwd_cv": self.fwd_cv, "bwd_cv": self.bwd_cv, "settings": self.settings, "host": self.host,
             "rows": list(self.rows), "tries": self.tries}
        if self.real_rows:
            d["real_rows"] = list(self.real_rows)
        if self.table_specs:
            d["table_specs"] = [dict(t) for t in self.table_specs]
        if self.row_ranges:
            d["row_ranges"] = [[r0, r1] for r0, r1 in self.row_ranges]
        return d

    @staticmethod
    def from_json(d: dict[str, Any]) -> CostRecord:
        try:
            rec = CostRecord(str(d["sample_id"]), tuple(map(str, d["tables"])),
                             tuple(int(x) for x in d["dims"]), int(d["batch_size"]), float(d["fwd_ms"]),
                             float(d["bwd_ms"]), float(d["fwd_cv"]), float(d["bwd_cv"]),
                             dict(d["settings"]), dict(d["host"]),
                             tuple(int(x) for x in d.get("rows", ())), int(d.get("tries", 1)),
                             tuple(int(x) for x in d.get("real_rows", ())),
                             tuple(dict(t) for t in d.get("table_specs", ())),
                             tuple((int(r0), None if r1 is None else int(r1))
                                   for r0, r1 in d.get("row_ranges", ())))
        except (KeyError, TypeError, ValueError) as e:
            raise AutoshardError(f"cost record {d.get('sample_id')!r} lacks or has a bad field ({e})") \
                from None
        if len(rec.tables) != len(rec.dims) or not rec.tables:
            raise AutoshardError(f"cost record {rec.sample_id}: "
                                 "tables and dims must be non-empty, same length")
        if rec.table_specs and [str(t.get("name")) for t in rec.table_specs] != list(rec.tables):
            raise AutoshardError(f"cost record {rec.sample_id}: its table_specs do not name its tables")
        if rec.row_ranges and (len(rec.row_ranges) != len(rec.tables) or any(
                r0 < 0 or (r1 is not None and r1 <= r0) for r0, r1 in rec.row_ranges)):
            raise AutoshardError(f"cost record {rec.sample_id}: row_ranges must give every table a non-empty "
                                 "[start, end) range")
        return rec

    def own_tables(self) -> tuple[Table, ...]:
        """The record's own tables (``table_specs``; empty when they are the dataset's tables.json)."""
        return tuple(Table.from_json(t) for t in self.table_specs)


def sample_id(seed: int, index: int) -> str:
    return f"{seed}-{index}"


def sample_index(sid: str) -> tuple[int, int]:
    """(seed, index) of a sample id; (0, -1) for an id not of the form '<seed>-<index>'."""
    m = re.fullmatch(r"(-?\d+)-(\d+)", sid)
    return (int(m.group(1)), int(m.group(2))) if m else (0, -1)


def shard_file(out_dir: str | Path, rank: int) -> Path:
    return Path(out_dir) / f"shards-rank{rank}.jsonl"


def record_files(out_dir: str | Path) -> list[Path]:
    """The files holding a profile directory's records: the packed file first, then the rank files."""
    d = Path(out_dir)
    packed = d / PACKED_FILE
    return ([packed] if packed.is_file() else []) + sorted(d.glob(SHARDS_GLOB))


def done_sample_ids(out_dir: str | Path) -> set[str]:
    """Sample ids already recorded by any rank in ``out_dir``."""
    done: set[str] = set()
    for p in record_files(out_dir):
        done.update(str(d.get("sample_id")) for d in read_jsonl(p))
    return done


def recorded_hosts(out_dir: str | Path) -> Iterator[dict[str, Any]]:
    """The host of every record in ``out_dir`` (packed file and rank files)."""
    for p in record_files(out_dir):
        for raw in read_jsonl(p):
            yield raw.get("host") or {}


def check_same_hardware(where: str | Path, hosts: Iterable[dict[str, Any]], host: dict[str, Any]) -> None:
    """Refuse to add records measured on ``host`` to a dataset (``where``) whose records (of ``hosts``) were
    measured on other hardware (``autoshard.host.HARDWARE_KEYS``): one profile is one machine's costs, and a
    model trained on a mix is calibrated for neither (two CPUs of this project's machine kind time one shard
    0.6-2.3x apart)."""
    for other in hosts:
        k = hardware_difference(other, host)
        if k is not None:
            raise AutoshardError(
                f"{where} holds samples measured with {k}={other[k]!r} but this machine has {host[k]!r}; "
                "one profile must not mix hardware: profile into another directory "
                "(make profile-broad uses profiles/<this machine's CPU>/)")


def pack_records(out_dir: str | Path) -> tuple[int, int]:
    """Merge every record of ``out_dir`` (packed file and rank files) into the packed file, in sample
    order, then delete the rank files; returns (records packed, rank files removed). A sample recorded
    twice keeps its first record, as ``load_dataset`` does. Not while a profiler writes to the directory:
    its rank file would be removed under it."""
    files = record_files(out_dir)
    if not files:
        raise AutoshardError(f"{out_dir}: no records to pack; run 'autoshard profile -o {out_dir}' first")
    seen: dict[str, dict[str, Any]] = {}
    for p in files:
        for raw in read_jsonl(p):
            seen.setdefault(str(raw.get("sample_id")), raw)
    records = sorted(seen.values(), key=lambda r: sample_index(str(r.get("sample_id"))))
    write_jsonl_gz(Path(out_dir) / PACKED_FILE, records)  # complete and renamed before anything is deleted
    plain = [p for p in files if p.name != PACKED_FILE]
    for p in plain:
        p.unlink()
    return len(records), len(plain)
