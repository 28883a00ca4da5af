"""Sequence plans: ``autoshard plan`` for sequence (unpooled) tables, and the plan file it writes.

A pooled plan (``autoshard.plan.Plan``) places whole tables or column/row shards; a sequence table is placed
by TIERS of frequency ranks (``costs.sequence_traffic.SequencePlacement``), which a pooled plan cannot say.
So sequence tables get their own planners and their own artefact:

- planners (``SEQUENCE_PLANNERS``): ``flexshard`` (``planners.flexshard.FlexShardPlanner``) and the
  baselines ``table_wise``, ``row_wise``, ``table_row_wise``, built by the same functions that
  ``compare_at_same_memory`` uses (``baseline_placements``), so a plan made here is the plan the comparison
  and the sequence bench price;
- memory is a hard constraint, as for pooled plans: one budget for every device (default: row_wise's
  footprint + 5%, as ``autoshard flexshard``); a plan whose fullest device is over it is refused in one line
  (table_wise and table_row_wise concentrate the same bytes on fewer devices, so they often are);
- the file (kind ``autoshard.sequence_plan``) records the devices (HOSTSxLOCAL), the declared topology the
  modelled times use, the budget, the batch per rank, and per table its name, rows, dim and placement; it
  holds no access statistics, so it is evaluated against the sequence-tables file it was made from
  (``SequencePlan.check_tables`` says which table does not match).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from autoshard.costs.sequence_traffic import (
    ELEM_BYTES,
    SequencePlacement,
    SequenceTraffic,
    sequence_traffic,
)
from autoshard.errors import AutoshardError, InfeasibleError
from autoshard.io import ARTEFACT_VERSION, parse_bytes, read_json, write_json
from autoshard.planners.flexshard import FlexShardPlanner, baseline_placements, within_budget
from autoshard.tables.sequence import SequenceTable
from autoshard.topology import Topology, parse_devices

log = logging.getLogger(__name__)

SEQUENCE_TABLES_KIND = "autoshard.sequence_tables"
"""Kind of a file of sequence tables (``autoshard flexshard --synth`` writes one)."""
SEQUENCE_PLAN_KIND = "autoshard.sequence_plan"
"""Kind of a sequence plan file (``autoshard plan --algo flexshard -o``)."""

DEFAULT_HEADROOM = 0.05
"""Default budget: row_wise's footprint x (1 + this), the comparison's (``autoshard flexshard``)."""
DEFAULT_BATCH_PER_RANK = 64
"""Samples per rank per step when none is given."""

SEQUENCE_PLANNERS: dict[str, str] = {
    "flexshard": "FlexShard: hottest rows on every device, the next once per host, the rest row-wise "
                 "(default for sequence tables)",
    "table_wise": "each table whole on the least-loaded device, largest first",
    "row_wise": "each table's rows dealt over all devices (the reference of the comparison)",
    "table_row_wise": "each table's rows dealt over the least-loaded host's devices, largest first",
}
"""Planners of sequence tables, name -> one-line description (``autoshard plan --list-algos``)."""

SEQUENCE_HINT = f"a --tables file of kind '{SEQUENCE_TABLES_KIND}', e.g. from 'autoshard flexshard --synth'"


# ------------------------------------------------------------------------------------------ files
def file_kind(path: str | Path) -> str | None:
    """The ``kind`` a JSON artefact declares (None if it declares none); one-line errors for a missing or
    malformed file. Lets a command tell sequence-table files from pooled ones before loading either."""
    obj = read_json(path)
    kind = obj.get("kind") if isinstance(obj, dict) else None
    return kind if isinstance(kind, str) else None


def is_sequence_tables(path: str | Path) -> bool:
    return file_kind(path) == SEQUENCE_TABLES_KIND


def is_sequence_plan(path: str | Path) -> bool:
    return file_kind(path) == SEQUENCE_PLAN_KIND


def write_sequence_tables(path: str | Path, tables: Sequence[SequenceTable]) -> None:
    """Write ``tables`` as a sequence-tables file (atomic)."""
    write_json(path, {"kind": SEQUENCE_TABLES_KIND, "version": ARTEFACT_VERSION,
                      "tables": [t.to_json() for t in tables]})


def sequence_tables_from_json(data: Any, where: str) -> list[SequenceTable]:
    """The tables of a sequence-tables file's JSON; one-line errors for none, a bad table, or a name twice
    (plans refer to tables by name)."""
    items = data.get("tables") if isinstance(data, dict) else None
    if not isinstance(items, list) or not items:
        raise AutoshardError(f"{where}: no sequence tables in the file (a 'tables' list is expected)")
    tables = []
    for i, item in enumerate(items):
        try:
            tables.append(SequenceTable.from_json(item))
        except AutoshardError as e:
            raise AutoshardError(f"{where}: table {i}: {e}") from None
    names = [t.name for t in tables]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise AutoshardError(f"{where}: table name {twice[0]!r} appears twice; names must be distinct")
    return tables


def load_sequence_tables(path: str | Path) -> list[SequenceTable]:
    """Read a sequence-tables file (kind ``autoshard.sequence_tables``)."""
    return sequence_tables_from_json(read_json(path, kind=SEQUENCE_TABLES_KIND), str(path))


# ------------------------------------------------------------------------------------------ budget
def row_wise_footprint(tables: Sequence[SequenceTable], num_devices: int) -> float:
    """Bytes row_wise puts on its fullest device: ceil(rows / D) rows of every table (fp32, SGD)."""
    return float(sum(-(-t.rows // num_devices) * t.dim * ELEM_BYTES for t in tables))


def device_budget(memory: str | None, tables: Sequence[SequenceTable], num_devices: int) -> float:
    """Bytes per device from ``--memory`` (one size for every device), or the default, row_wise's footprint
    + 5%. One line if the text is not a size, lists several sizes, or is below row_wise's footprint (no
    sequence plan holds less on its fullest device than row_wise)."""
    footprint = row_wise_footprint(tables, num_devices)
    if memory is None:
        return footprint * (1.0 + DEFAULT_HEADROOM)
    if "," in memory:
        raise AutoshardError(f"--memory {memory}: sequence tables take one size for every device, e.g. 2GB")
    budget = float(parse_bytes(memory))
    if budget < footprint:
        raise InfeasibleError(f"--memory {memory}: row_wise alone needs {footprint / 1e9:.4g} GB a device "
                              f"for these {len(tables)} tables; give at least that")
    return budget


# ------------------------------------------------------------------------------------------ the plan
@dataclass(frozen=True)
class SequencePlan:
    """Placements of named sequence tables on ``topology.hosts`` hosts x (num_devices / hosts) devices of
    ``device_memory_bytes`` each, made for ``batch_per_rank`` samples per rank per step."""

    algorithm: str
    table_names: tuple[str, ...]
    table_dims: tuple[int, ...]
    placements: tuple[SequencePlacement, ...]
    topology: Topology
    num_devices: int
    device_memory_bytes: float
    batch_per_rank: float
    planning_time_s: float = 0.0

    def __post_init__(self) -> None:
        n = len(self.table_names)
        if not n or len(self.table_dims) != n or len(self.placements) != n:
            raise AutoshardError("sequence plan: give every table a name, a dim and a placement")
        if len(set(self.table_names)) != n:
            raise AutoshardError("sequence plan: table names must be distinct")
        if any(p.num_devices != self.num_devices or p.hosts != self.topology.hosts for p in self.placements):
            raise AutoshardError(f"sequence plan: every placement must be on the plan's {self.devices} "
                                 "devices")
        if any(d < 1 for d in self.table_dims):
            raise AutoshardError("sequence plan: dims must be positive")
        if not (self.device_memory_bytes > 0 and math.isfinite(self.device_memory_bytes)):
            raise AutoshardError("sequence plan: the memory budget must be a positive number of bytes")
        if not (self.batch_per_rank > 0 and math.isfinite(self.batch_per_rank)):
            raise AutoshardError("sequence plan: the batch per rank must be a positive number")

    @property
    def hosts(self) -> int:
        return self.topology.hosts

    @property
    def devices(self) -> str:
        """HOSTSxLOCAL, as ``--devices`` takes it."""
        return f"{self.hosts}x{self.num_devices // self.hosts}"

    def check_tables(self, tables: Sequence[SequenceTable]) -> None:
        """One line unless ``tables`` are the plan's tables: same names in the same order, rows and dims."""
        names = [t.name for t in tables]
        if names != list(self.table_names):
            missing = [n for n in self.table_names if n not in names] or [n for n in names
                                                                          if n not in self.table_names]
            what = (f"table {missing[0]!r} is in one but not the other" if missing
                    else "they are in another order")
            raise AutoshardError(f"the plan's tables are not these sequence tables: {what}; pass the tables "
                                 "file the plan was made from")
        for t, p, dim in zip(tables, self.placements, self.table_dims):
            if t.rows != p.rows or t.dim != dim:
                raise AutoshardError(f"table {t.name!r}: the plan places {p.rows} rows of dim {dim}, the "
                                     f"tables file has {t.rows} of dim {t.dim}; pass the tables file the "
                                     "plan was made from")

    def traffic(self, tables: Sequence[SequenceTable],
                batch_per_rank: float | None = None) -> SequenceTraffic:
        """The step's modelled collectives and memory (``costs.sequence_traffic``) for ``tables`` (checked
        against the plan) at the plan's batch per rank, or ``batch_per_rank``."""
        self.check_tables(tables)
        b = self.batch_per_rank if batch_per_rank is None else batch_per_rank
        return sequence_traffic(list(zip(tables, self.placements)), self.topology, b)

    def to_json(self) -> dict[str, Any]:
        return {"kind": SEQUENCE_PLAN_KIND, "version": ARTEFACT_VERSION, "algorithm": self.algorithm,
                "devices": self.devices, "topology": self.topology.to_json(),
                "device_memory_bytes": self.device_memory_bytes, "batch_per_rank": self.batch_per_rank,
                "planning_time_s": self.planning_time_s,
                "tables": [{"name": n, "rows": p.rows, "dim": d, "placement": p.to_json()}
                           for n, d, p in zip(self.table_names, self.table_dims, self.placements)]}

    @staticmethod
    def from_json(d: Any, where: str = "sequence plan") -> SequencePlan:
        """From ``to_json``; every problem is one AutoshardError line naming the field (and the table)."""
        if not isinstance(d, dict) or d.get("kind") != SEQUENCE_PLAN_KIND:
            raise AutoshardError(f"{where}: not a sequence plan (kind {SEQUENCE_PLAN_KIND!r} expected)")
        if d.get("version") != ARTEFACT_VERSION:
            raise AutoshardError(f"{where}: version {d.get('version')!r} is not supported (expected "
                                 f"{ARTEFACT_VERSION}); regenerate it")
        missing = [k for k in ("algorithm", "devices", "topology", "device_memory_bytes", "batch_per_rank",
                               "tables") if k not in d]
        if missing:
            raise AutoshardError(f"{where}: no {missing[0]!r} field; regenerate it with 'autoshard plan'")
        try:
            hosts, num_devices = parse_devices(str(d["devices"]))
        except AutoshardError as e:
            raise AutoshardError(f"{where}: {e}") from None
        if not isinstance(d["topology"], dict):
            raise AutoshardError(f"{where}: 'topology' must be an object (hosts, bandwidths)")
        topology = Topology.from_json(d["topology"])
        if topology.hosts != hosts:
            raise AutoshardError(f"{where}: devices {d['devices']} but a topology of {topology.hosts} hosts")
        if not isinstance(d["tables"], list) or not d["tables"]:
            raise AutoshardError(f"{where}: 'tables' must be a non-empty list")
        names, dims, placements = [], [], []
        for i, t in enumerate(d["tables"]):
            name = t.get("name") if isinstance(t, dict) else None
            dim = t.get("dim") if isinstance(t, dict) else None
            if not isinstance(name, str) or isinstance(dim, bool) or not isinstance(dim, int) \
                    or "placement" not in t:
                raise AutoshardError(f"{where}: table {i} needs a name, an integer dim and a placement")
            try:
                p = SequencePlacement.from_json(t["placement"])
            except AutoshardError as e:
                raise AutoshardError(f"{where}: table {name!r}: {e}") from None
            if t.get("rows", p.rows) != p.rows:
                raise AutoshardError(f"{where}: table {name!r}: {t['rows']} rows but a placement of {p.rows}")
            names.append(name)
            dims.append(int(t["dim"]))
            placements.append(p)
        try:
            memory, batch = float(d["device_memory_bytes"]), float(d["batch_per_rank"])
            planning = float(d.get("planning_time_s", 0.0))
        except (TypeError, ValueError):
            raise AutoshardError(f"{where}: device_memory_bytes and batch_per_rank must be numbers") from None
        try:
            return SequencePlan(str(d["algorithm"]), tuple(names), tuple(dims), tuple(placements), topology,
                                num_devices, memory, batch, planning)
        except AutoshardError as e:
            raise AutoshardError(f"{where}: {e}") from None

    def save(self, path: str | Path) -> None:
        write_json(path, self.to_json())

    @staticmethod
    def load(path: str | Path) -> SequencePlan:
        return SequencePlan.from_json(read_json(path, kind=SEQUENCE_PLAN_KIND), str(path))


# ------------------------------------------------------------------------------------------ planning
def check_sequence_algorithm(name: str) -> None:
    """One line if ``name`` is not a sequence planner, saying which algorithms apply to sequence tables
    (and, for a pooled planner's name, that it plans pooled tables)."""
    if name in SEQUENCE_PLANNERS:
        return
    from autoshard.planners.base import PLANNERS

    why = "plans pooled tables" if name in PLANNERS else "is not an algorithm"
    raise AutoshardError(f"--algo {name} {why}; for sequence tables choose one of: "
                         f"{', '.join(SEQUENCE_PLANNERS)}")


def check_pooled_algorithm(name: str) -> None:
    """One line if ``name`` is a sequence planner asked for pooled tables (or a task), saying which
    algorithms apply there."""
    from autoshard.planners.base import PLANNERS

    if name in SEQUENCE_PLANNERS and name not in PLANNERS:
        raise AutoshardError(f"--algo {name} plans sequence tables ({SEQUENCE_HINT}); for pooled tables "
                             f"choose one of: {', '.join(PLANNERS)}")


def plan_sequence(tables: Sequence[SequenceTable], algorithm: str, topology: Topology, num_devices: int,
                  batch_per_rank: float, device_memory_bytes: float) -> SequencePlan:
    """Plan ``tables`` with ``algorithm`` (``SEQUENCE_PLANNERS``) under ``device_memory_bytes`` per device;
    InfeasibleError (one line) when its fullest device is over the budget."""
    check_sequence_algorithm(algorithm)
    tables = tuple(tables)
    topology.local_size(num_devices)  # one line unless the hosts divide the devices
    footprint = row_wise_footprint(tables, num_devices)
    if device_memory_bytes < footprint:
        raise InfeasibleError(f"{device_memory_bytes / 1e9:.4g} GB a device cannot hold even row_wise's "
                              f"{footprint / 1e9:.4g} GB of these tables; give more memory")
    t0 = time.perf_counter()
    if algorithm == "flexshard":
        placements = FlexShardPlanner(topology, num_devices, batch_per_rank, device_memory_bytes) \
            .plan(tables).placements
    else:
        placements = baseline_placements(tables, num_devices, topology.hosts)[algorithm]
    plan = SequencePlan(algorithm, tuple(t.name for t in tables), tuple(t.dim for t in tables),
                        tuple(placements), topology, num_devices, float(device_memory_bytes),
                        float(batch_per_rank), time.perf_counter() - t0)
    peak = plan.traffic(tables).peak_memory_bytes
    if not within_budget(peak, device_memory_bytes):
        raise InfeasibleError(f"{algorithm}: its fullest device needs {peak / 1e9:.4g} GB, over the "
                              f"{device_memory_bytes / 1e9:.4g} GB budget; give --memory "
                              f"{math.ceil(peak / 1e6)}MB or plan with row_wise or flexshard")
    log.info("%s planned %d sequence tables on %s devices in %.3f s", algorithm, len(tables), plan.devices,
             plan.planning_time_s)
    return plan


def tier_rows(placement: SequencePlacement) -> tuple[int, int, int, str]:
    """(rows on every device, rows replicated in fewer copies (FlexShard: once per host), rows in one copy,
    the ranks that one copy spans, e.g. '8' or '4'): how a reader sees a placement's tiers."""
    every = fewer = single = 0
    widths = []
    for t in placement.tiers:
        n = t.stop - t.start
        if len(t.copies) == 1:
            single += n
            widths.append(str(t.width))
        elif len(t.copies) == placement.num_devices and t.width == 1:
            every += n
        else:
            fewer += n
    return every, fewer, single, "/".join(dict.fromkeys(widths)) or "-"


def format_sequence_plan(plan: SequencePlan, tables: Sequence[SequenceTable]) -> str:
    """The per-table summary ``autoshard plan`` prints for sequence tables: tiers, memory, modelled bytes
    and time (every figure MODELLED: ``costs.sequence_traffic`` on the plan's declared topology)."""
    traffic = plan.traffic(tables)
    lines = [(f"{plan.algorithm}: {len(tables)} sequence tables on {plan.hosts} hosts x "
              f"{plan.num_devices // plan.hosts} devices, {plan.batch_per_rank:g} samples per rank per step, "
              f"{plan.device_memory_bytes / 1e6:.1f} MB a device"),
             (f"{'table':<20} {'rows':>10} {'dim':>4} {'every dev':>9} {'per host':>9} {'sharded':>10} "
              f"{'over':>5} {'peak MB':>8} {'a2a MB':>8} {'inter MB':>8}")]
    for t, p in zip(tables, plan.placements):
        every, fewer, single, over = tier_rows(p)
        own = sequence_traffic([(t, p)], plan.topology, plan.batch_per_rank)
        lines.append(f"{t.name[:20]:<20} {t.rows:>10} {t.dim:>4} {every:>9} {fewer:>9} {single:>10} "
                     f"{over:>5} {own.peak_memory_bytes / 1e6:>8.1f} {own.a2a_bytes / 1e6:>8.2f} "
                     f"{own.a2a_inter_bytes / 1e6:>8.2f}")
    mem = traffic.memory_bytes
    lines.append("memory per device (MB): " + " ".join(f"{m / 1e6:.1f}" for m in mem)
                 + f"; fullest {np.max(mem) / 1e6:.1f} of {plan.device_memory_bytes / 1e6:.1f}")
    lines.append(f"all-to-all bytes per step: {traffic.a2a_bytes / 1e6:.2f} MB, of which "
                 f"{traffic.a2a_inter_bytes / 1e6:.2f} MB between hosts; replica sync "
                 f"{traffic.sync_bytes / 1e6:.2f} MB ({traffic.sync_inter_bytes / 1e6:.2f} MB between hosts)")
    lines.append(f"comm per step: all-to-alls {traffic.a2a_ms:.3f} ms + replica sync "
                 f"{traffic.sync_ms:.3f} ms = {traffic.comm_ms:.3f} ms, MODELLED on the plan's topology, "
                 f"{plan.topology.source}; time it with 'autoshard evaluate --plan PLAN --tables TABLES'")
    lines.append(f"planned in {plan.planning_time_s * 1000:.1f} ms")
    return "\n".join(lines)
