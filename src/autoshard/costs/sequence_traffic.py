"""Traffic of sequence (unpooled) tables: expected bytes of every all-to-all, within and between hosts.

A placement of a sequence table (:class:`SequencePlacement`) is a list of TIERS, each a range of frequency
ranks (row 0 hottest, ``autoshard.tables.sequence``) held by one or more COPIES; a copy is a tuple of ranks
over which the tier's rows are dealt out in turn (row ``i`` to ``copy[(i - start) % len(copy)]``: a
row-wise split whose every rank gets an equal share of rows and nearly equal share of lookups; the
constructors take an ``offset``, the copy's rank that gets the first row, so that several tables' hottest
rows spread over the ranks). The plan types are special cases:

- ``table_wise``: one tier, one copy of one rank;
- ``row_wise``: one tier, one copy of all D ranks;
- ``table_row_wise``: one tier, one copy of one host's ranks;
- ``flexshard``: tier A (the ``k_all`` hottest rows) with one copy per rank (replicated on every device),
  tier B (the next ``k_host``) with one copy per host (replicated once per host, split over its ranks), and
  tier C (the rest) with one copy of all D ranks.

A rank looks an id up in the copy of its tier that contains the rank itself, else in the first copy with a
rank on its own host, else in copy ``host % copies``. A lookup served by the requesting rank moves nothing;
by another rank of its host, intra-host bytes; by a rank of another host, inter-host bytes.

Per step every rank looks up ``B x mean_seq_len`` ids (B samples per rank; expectation over the sequence
lengths, so their cv does not enter), drawn from the table's access distribution. Expected bytes, exact
for that distribution (the per-rank lookup shares are the table's exact strided masses):

- ``ids`` (forward): the requester sends each remote id, ``ID_BYTES`` (int64) each; no lengths are sent
  (the requester keeps the positions) and ids are not de-duplicated (TorchRec's default);
- ``embeddings`` (forward): the server sends back one ``dim x 4``-byte vector per id it served;
- ``gradients`` (backward): the requester sends the output gradient of every remote id to its server, the
  embedding volume in the other direction;
- ``replica_sync`` (backward): replicated rows' gradients are all-reduced every step, DENSE (every
  replicated row, touched or not: the runtime's rule) over each replica group (the ranks holding one row:
  for tier A all D ranks, for tier B the H ranks of one local position). Modelled as a hierarchical
  all-reduce: a group with ``l`` members on each of its ``h`` hosts reduce-scatters and all-gathers within
  hosts (``2 (l - 1) / l x S`` intra-host bytes per member) and all-reduces each member's ``S / l`` slice
  between hosts (``2 (h - 1) / h x S / l`` inter-host bytes per member), S = the group's rows x dim x 4.

Time of a collective (modelled, on the DECLARED topology): ``latency + max over ranks of (intra bytes /
intra bandwidth + inter bytes / inter bandwidth)``, a rank's bytes of a link kind being the larger of what
it sends and what it receives on it (as ``costs.step``); 0 when no bytes move. The step's communication is
the sum of the four collectives (no overlap). Memory per device: the rows it holds x dim x 4 bytes (fp32;
SGD, so no optimizer state).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from autoshard.errors import AutoshardError
from autoshard.tables.sequence import SequenceTable
from autoshard.topology import Topology

ID_BYTES = 8
"""Bytes of one id in the id all-to-all (int64)."""
ELEM_BYTES = 4
"""Bytes of one embedding or gradient element (fp32)."""

A2A_COLLECTIVES = ("ids", "embeddings", "gradients")
COLLECTIVES = (*A2A_COLLECTIVES, "replica_sync")


@dataclass(frozen=True)
class Tier:
    """Frequency ranks ``[start, stop)`` and the copies (tuples of ranks) that hold them."""

    start: int
    stop: int
    copies: tuple[tuple[int, ...], ...]

    @property
    def width(self) -> int:
        """Ranks per copy (every copy of a tier has as many)."""
        return len(self.copies[0])

    def rows_at(self, position: int) -> int:
        """Rows held by the ``position``-th rank of a copy."""
        n = self.stop - self.start - position
        return max(0, (n + self.width - 1) // self.width)

    def groups(self) -> list[tuple[int, ...]]:
        """The replica group of each position: the ranks holding the same rows (one per copy)."""
        return [tuple(c[j] for c in self.copies) for j in range(self.width)]


@dataclass(frozen=True)
class SequencePlacement:
    """Where a sequence table's rows live on ``num_devices`` ranks of ``hosts`` hosts (module docstring)."""

    kind: str
    rows: int
    num_devices: int
    hosts: int
    tiers: tuple[Tier, ...]

    def __post_init__(self) -> None:
        d = self.num_devices
        if not isinstance(self.kind, str) or not self.kind:
            raise AutoshardError("placement: its kind must be a non-empty string (e.g. 'flexshard')")
        if self.rows < 1:
            raise AutoshardError(f"placement {self.kind}: {self.rows} rows; a table has at least one")
        if d < 1 or self.hosts < 1 or d % self.hosts:
            raise AutoshardError(f"placement: {d} devices do not split evenly over {self.hosts} hosts")
        pos = 0
        for t in self.tiers:
            if t.start != pos or t.stop <= t.start or not t.copies:
                raise AutoshardError(f"placement {self.kind}: tiers must cover rows [0, {self.rows}) "
                                     "in order")
            if len({len(c) for c in t.copies}) != 1 or min(len(c) for c in t.copies) < 1:
                raise AutoshardError(f"placement {self.kind}: the copies of a tier need the same, positive "
                                     "number of ranks")
            flat = [r for c in t.copies for r in c]
            if len(set(flat)) != len(flat) or min(flat) < 0 or max(flat) >= d:
                raise AutoshardError(f"placement {self.kind}: a tier's copies need distinct ranks in "
                                     f"[0, {d})")
            pos = t.stop
        if pos != self.rows:
            raise AutoshardError(f"placement {self.kind}: tiers end at row {pos}, not {self.rows}")

    @property
    def local(self) -> int:
        return self.num_devices // self.hosts

    def host_of(self, rank: int) -> int:
        return rank // self.local

    def route(self, tier: Tier, rank: int) -> tuple[int, ...]:
        """The copy of ``tier`` that ``rank`` looks its ids up in."""
        for c in tier.copies:
            if rank in c:
                return c
        h = self.host_of(rank)
        for c in tier.copies:
            if any(self.host_of(r) == h for r in c):
                return c
        return tier.copies[h % len(tier.copies)]

    def servers(self, rank: int, ids: np.ndarray) -> np.ndarray:
        """The rank serving each id (frequency rank) that ``rank`` looks up."""
        ids = np.asarray(ids, dtype=np.int64)
        out = np.empty(ids.shape, dtype=np.int64)
        bounds = np.array([t.stop for t in self.tiers])
        which = np.searchsorted(bounds, ids, side="right")
        for k, t in enumerate(self.tiers):
            m = which == k
            if m.any():
                copy = np.asarray(self.route(t, rank), dtype=np.int64)
                out[m] = copy[(ids[m] - t.start) % len(copy)]
        return out

    def held_rows(self, rank: int) -> list[tuple[Tier, int, np.ndarray]]:
        """(tier, position, frequency ranks) of every row block ``rank`` holds, tier order."""
        out = []
        for t in self.tiers:
            for c in t.copies:
                if rank in c:
                    j = c.index(rank)
                    out.append((t, j, np.arange(t.start + j, t.stop, len(c), dtype=np.int64)))
        return out

    def rows_on(self) -> np.ndarray:
        """(D,) rows held by each rank."""
        out = np.zeros(self.num_devices, dtype=np.int64)
        for t in self.tiers:
            for c in t.copies:
                for j, r in enumerate(c):
                    out[r] += t.rows_at(j)
        return out

    def memory_bytes(self, dim: int) -> np.ndarray:
        """(D,) bytes each device holds: rows x dim x 4 (SGD: no optimizer state)."""
        return self.rows_on() * float(dim * ELEM_BYTES)

    def to_json(self) -> dict[str, Any]:
        """The placement as plain JSON (every tier's row range and copies), read back by ``from_json``."""
        return {"kind": self.kind, "rows": self.rows, "num_devices": self.num_devices, "hosts": self.hosts,
                "tiers": [{"start": t.start, "stop": t.stop, "copies": [list(c) for c in t.copies]}
                          for t in self.tiers]}

    @staticmethod
    def from_json(d: Any) -> SequencePlacement:
        """From ``to_json``; a one-line AutoshardError for a missing field, a non-integer, or tiers that do
        not cover the rows with valid copies (``__post_init__`` checks the structure)."""
        need = "a placement needs kind, rows, num_devices, hosts and tiers (each start, stop, copies)"
        if not isinstance(d, dict) or not isinstance(d.get("tiers"), list):
            raise AutoshardError(f"{need}; regenerate the plan")
        try:
            tiers = []
            for t in d["tiers"]:
                if not isinstance(t, dict) or not isinstance(t.get("copies"), list) \
                        or not all(isinstance(c, list) for c in t["copies"]):
                    raise TypeError
                tiers.append(Tier(_whole(t["start"]), _whole(t["stop"]),
                                  tuple(tuple(_whole(r) for r in c) for c in t["copies"])))
            return SequencePlacement(d["kind"], _whole(d["rows"]), _whole(d["num_devices"]),
                                     _whole(d["hosts"]), tuple(tiers))
        except (KeyError, TypeError):
            raise AutoshardError(f"{need}, all whole numbers; regenerate the plan") from None


def _whole(x: Any) -> int:
    """``x`` if it is a JSON integer (not a bool, not a float); TypeError otherwise."""
    if isinstance(x, bool) or not isinstance(x, int):
        raise TypeError(x)
    return x


# ------------------------------------------------------------------------------------------ constructors
def _rotate(ranks: Sequence[int], offset: int) -> tuple[int, ...]:
    k = offset % len(ranks)
    return tuple(ranks[k:]) + tuple(ranks[:k])


def _hosts_ranks(num_devices: int, hosts: int, offset: int = 0) -> list[tuple[int, ...]]:
    local = num_devices // hosts
    return [_rotate(range(h * local, (h + 1) * local), offset) for h in range(hosts)]


def table_wise(rows: int, num_devices: int, hosts: int, rank: int = 0) -> SequencePlacement:
    return SequencePlacement("table_wise", rows, num_devices, hosts, (Tier(0, rows, ((rank,),)),))


def row_wise(rows: int, num_devices: int, hosts: int, offset: int = 0) -> SequencePlacement:
    """Rows dealt over all ranks starting at rank ``offset`` (give tables different offsets, so that their
    hottest rows do not all land on rank 0)."""
    return SequencePlacement("row_wise", rows, num_devices, hosts,
                             (Tier(0, rows, (_rotate(range(num_devices), offset),)),))


def table_row_wise(rows: int, num_devices: int, hosts: int, host: int = 0,
                   offset: int = 0) -> SequencePlacement:
    ranks = _hosts_ranks(num_devices, hosts, offset)[host]
    return SequencePlacement("table_row_wise", rows, num_devices, hosts, (Tier(0, rows, (ranks,)),))


def flexshard(rows: int, num_devices: int, hosts: int, k_all: int, k_host: int,
              offset: int = 0) -> SequencePlacement:
    """Tier A: rows [0, k_all) on every rank; tier B: [k_all, k_all + k_host) once per host, split over its
    ranks; tier C: the rest split over all ranks (both dealt from local rank / rank ``offset`` on). Empty
    tiers are left out."""
    k_all, k_host = int(k_all), int(k_host)
    if k_all < 0 or k_host < 0 or k_all + k_host > rows:
        raise AutoshardError(f"flexshard: tiers of {k_all} and {k_host} rows do not fit in {rows} rows")
    tiers = []
    if k_all:
        tiers.append(Tier(0, k_all, tuple((r,) for r in range(num_devices))))
    if k_host:
        tiers.append(Tier(k_all, k_all + k_host, tuple(_hosts_ranks(num_devices, hosts, offset))))
    if k_all + k_host < rows:
        tiers.append(Tier(k_all + k_host, rows, (_rotate(range(num_devices), offset),)))
    return SequencePlacement("flexshard", rows, num_devices, hosts, tuple(tiers))


# ------------------------------------------------------------------------------------------ traffic
def expected_id_matrix(table: SequenceTable, placement: SequencePlacement,
                       batch_per_rank: float) -> np.ndarray:
    """(D, D) expected ids rank ``src`` sends rank ``dst`` per step (entry [src, dst]; diagonal 0)."""
    if placement.rows != table.rows:
        raise AutoshardError(f"placement of {placement.rows} rows for table {table.name} of {table.rows}")
    d = placement.num_devices
    n = float(batch_per_rank) * table.mean_seq_len
    out = np.zeros((d, d))
    for t in placement.tiers:
        masses = table.strided_mass(t.start, t.stop, t.width)
        for src in range(d):
            copy = placement.route(t, src)
            for j, dst in enumerate(copy):
                if dst != src:
                    out[src, dst] += n * masses[j]
    return out


def a2a_matrices(table: SequenceTable, placement: SequencePlacement,
                 batch_per_rank: float) -> dict[str, np.ndarray]:
    """(D, D) expected bytes [src, dst] of the ids, embeddings and gradients all-to-alls of one step."""
    e = expected_id_matrix(table, placement, batch_per_rank)
    vec = float(table.dim * ELEM_BYTES)
    return {"ids": e * ID_BYTES, "embeddings": e.T * vec, "gradients": e * vec}


def sync_bytes(table: SequenceTable, placement: SequencePlacement) -> tuple[np.ndarray, np.ndarray]:
    """(intra, inter) (D,) bytes each rank sends (= receives) in the replicas' gradient all-reduce."""
    d = placement.num_devices
    intra, inter = np.zeros(d), np.zeros(d)
    row = float(table.dim * ELEM_BYTES)
    for t in placement.tiers:
        if len(t.copies) < 2:
            continue
        for j, group in enumerate(t.groups()):
            size = t.rows_at(j) * row
            per_host: dict[int, int] = {}
            for r in group:
                per_host[placement.host_of(r)] = per_host.get(placement.host_of(r), 0) + 1
            h, loc = len(per_host), max(per_host.values())
            for r in group:
                intra[r] += 2.0 * (loc - 1) / loc * size
                inter[r] += 2.0 * (h - 1) / h * size / loc
    return intra, inter


@dataclass(frozen=True)
class CollectiveTraffic:
    """One collective of a step: every rank's intra- and inter-host bytes sent and received, and its time."""

    name: str
    intra_sent: np.ndarray
    intra_recv: np.ndarray
    inter_sent: np.ndarray
    inter_recv: np.ndarray
    ms: float
    matrix: np.ndarray | None = None
    """(D, D) bytes [src, dst] of an all-to-all (None for the all-reduce)."""

    @property
    def bytes(self) -> float:
        """Bytes that cross a link, summed over ranks (each byte counted once, at its sender)."""
        return float(self.intra_sent.sum() + self.inter_sent.sum())

    @property
    def inter_bytes(self) -> float:
        return float(self.inter_sent.sum())


def collective_ms(topology: Topology, intra_sent: np.ndarray, intra_recv: np.ndarray, inter_sent: np.ndarray,
                  inter_recv: np.ndarray) -> float:
    """latency + max over ranks of intra / intra bandwidth + inter / inter bandwidth (module docstring)."""
    per_rank = (np.maximum(intra_sent, intra_recv) / topology.intra_bytes_per_ms
                + np.maximum(inter_sent, inter_recv) / topology.inter_bytes_per_ms)
    busiest = float(per_rank.max()) if len(per_rank) else 0.0
    return topology.latency_ms + busiest if busiest > 0 else 0.0


def split_matrix(matrix: np.ndarray, hosts: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(intra sent, intra received, inter sent, inter received) (D,) of a (D, D) byte matrix."""
    d = matrix.shape[0]
    host = np.arange(d) // (d // hosts)
    same = host[:, None] == host[None, :]
    m = matrix * (1.0 - np.eye(d))
    intra, inter = m * same, m * ~same
    return intra.sum(axis=1), intra.sum(axis=0), inter.sum(axis=1), inter.sum(axis=0)


@dataclass(frozen=True)
class SequenceTraffic:
    """A step's communication for sequence tables on one topology (modelled; module docstring)."""

    collectives: tuple[CollectiveTraffic, ...]
    memory_bytes: np.ndarray
    """(D,) bytes every device holds."""

    def get(self, name: str) -> CollectiveTraffic:
        return next(c for c in self.collectives if c.name == name)

    @property
    def a2a_bytes(self) -> float:
        """Bytes of the step's three all-to-alls (ids, embeddings, gradients)."""
        return sum(self.get(n).bytes for n in A2A_COLLECTIVES)

    @property
    def a2a_inter_bytes(self) -> float:
        return sum(self.get(n).inter_bytes for n in A2A_COLLECTIVES)

    @property
    def a2a_ms(self) -> float:
        return sum(self.get(n).ms for n in A2A_COLLECTIVES)

    @property
    def sync_bytes(self) -> float:
        return self.get("replica_sync").bytes

    @property
    def sync_inter_bytes(self) -> float:
        return self.get("replica_sync").inter_bytes

    @property
    def sync_ms(self) -> float:
        return self.get("replica_sync").ms

    @property
    def comm_ms(self) -> float:
        return self.a2a_ms + self.sync_ms

    @property
    def peak_memory_bytes(self) -> float:
        return float(self.memory_bytes.max())


def sequence_traffic(items: Sequence[tuple[SequenceTable, SequencePlacement]], topology: Topology,
                     batch_per_rank: float) -> SequenceTraffic:
    """The step's collectives for the tables and their placements together (every collective carries all
    tables, so their per-rank bytes add before the max over ranks)."""
    if not items:
        raise AutoshardError("sequence traffic: no tables")
    d, hosts = items[0][1].num_devices, items[0][1].hosts
    if any(p.num_devices != d or p.hosts != hosts for _, p in items):
        raise AutoshardError("sequence traffic: every placement needs the same devices and hosts")
    if hosts != topology.hosts:
        raise AutoshardError(f"sequence traffic: placements on {hosts} hosts, topology of {topology.hosts}")
    mats = {n: np.zeros((d, d)) for n in A2A_COLLECTIVES}
    s_intra, s_inter = np.zeros(d), np.zeros(d)
    memory = np.zeros(d)
    for table, placement in items:
        for n, m in a2a_matrices(table, placement, batch_per_rank).items():
            mats[n] += m
        i, e = sync_bytes(table, placement)
        s_intra += i
        s_inter += e
        memory += placement.memory_bytes(table.dim)
    out = []
    for n in A2A_COLLECTIVES:
        parts = split_matrix(mats[n], hosts)
        out.append(CollectiveTraffic(n, *parts, collective_ms(topology, *parts), mats[n]))
    out.append(CollectiveTraffic("replica_sync", s_intra, s_intra, s_inter, s_inter,
                                 collective_ms(topology, s_intra, s_intra, s_inter, s_inter)))
    return SequenceTraffic(tuple(out), memory)
