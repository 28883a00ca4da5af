"""The training step's cost: every device's kernels and the step's collectives, each stage waiting for its
slowest device. The one place the step is composed; the evaluator and every planner use it.

One step of the sharded embeddings, in order (TorchRec's sparse pipeline, no overlap modelled):

1. **id bucketisation** (row-wise tables only): before sending ids, every rank sorts its local samples' ids
   of every row-split table into row blocks (TorchRec's ``block_bucketize_sparse_features``); per-rank work,
   the same on every rank, priced at the host's measured ``bucketize_ns_per_id``.
2. **input ids** (forward collective): every rank holds the ids of ``B / D`` samples for every feature; an
   all-to-all sends each shard's rank the ids and bag lengths of those samples. A column shard receives every
   id of its table (column splits multiply id traffic); a row shard the ids in its range, but every bag
   length. Data-parallel tables keep their ids local.
3. **forward kernels** on every device (measured or predicted; the ``fwd`` of a cost model).
4. **pooled outputs** (forward collective): each table- or column-wise shard's rank sends every other rank
   the pooled outputs of that rank's samples (an all-to-all).
5. **row outputs** (forward collective): row shards' partial sums, reduce-scattered so each rank gets its
   samples' sums: the same bytes as an all-to-all, times the host's measured ``reduce_scatter_factor``.
6. **output gradients** (backward collective): the reverse of 4.
7. **row gradients** (backward collective): the reverse of 5, an all-gather (``all_gather_factor``).
8. **backward kernels** with the fused optimizer update (the ``bwd`` of a cost model).
9. **replica gradients** (backward collective): data-parallel tables all-reduce their dense gradient.

A collective takes ``alpha + factor x max over ranks of max(bytes sent, bytes received) / bandwidth`` (a
rank's link carries its sends and its receives; the collective ends when the busiest rank is done;
``AlphaBeta``; the factor is 1 for all-to-alls), and costs nothing when no bytes move. So::

    step = bucketise + ids + max_d fwd_d + outputs + row outputs + gradients + row gradients + max_d bwd_d
           + replicas

which is never below ``max fwd + max bwd`` nor below any device's own ``fwd + bwd``. Bucketisation is
listed with the collectives (``row_bucketize``, no bytes on a link) because it is part of TorchRec's input
distribution and waits like one. A device's ``comm`` in a cost breakdown is its own time in the collectives
(``device_comm_ms``): what it alone would wait for.

Bytes per sample of a shard: ids ``pooling x row share x 8`` (int64) plus one 4-byte length; outputs ``cols x
4`` (fp32, the kernels' output type). A rank sends the ids of its ``B / D`` samples to every OTHER rank
holding a shard and receives ``(D - 1) x B / D`` samples' ids for each shard it holds; outputs the other
way round. So a rank's traffic follows from its own shards and the plan's totals. Why the row-wise terms
(stop 44): TorchRec's row-wise measured 1.30x a balanced plan in real DMP steps on a 2-core CPU host where a
step model without them said 1.06x; its profile showed the bucketisation and the reduce-scatter's wait
(docs/benchmarks.md, "Stop 43").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from autoshard.breakdown import CollectiveCost, PlanCost
from autoshard.costs.comm import AlphaBeta
from autoshard.shards import ShardRef
from autoshard.tasks import Task

INDEX_BYTES = 8
"""Bytes of one id in the input distribution (int64, TorchRec's KeyedJaggedTensor default)."""
LENGTH_BYTES = 4
"""Bytes of one bag length (int32)."""
OUTPUT_BYTES = 4
"""Bytes of one pooled output element (fp32: the kernels' output dtype, whatever the weights' precision)."""

COLLECTIVES: tuple[tuple[str, str], ...] = (
    ("row_bucketize", "fwd"), ("input_ids", "fwd"), ("pooled_outputs", "fwd"), ("row_outputs", "fwd"),
    ("output_grads", "bwd"), ("row_grads", "bwd"), ("replica_grads", "bwd"))
"""The step's collectives in order, with the stage each belongs to (``row_bucketize`` is per-rank work of
the input distribution, no bytes on a link)."""

VOLUMES = ("ids", "outputs", "replicas", "row_outputs", "row_ids")
"""Per-device volumes (last axis of ``device_volumes``): id bytes per sample of its sharded shards, output
bytes per sample of its table- and column-wise shards, bytes of the data-parallel replicas it holds (whole
tables), output bytes per sample of its row shards, and ids per sample of its row shards (their sum over
devices: the ids of one sample every rank bucketises)."""


def shard_volumes(task: Task, shards: Sequence[ShardRef]) -> np.ndarray:
    """(len(shards), 3) ids/sample, outputs/sample and replica bytes of each shard (``VOLUMES``)."""
    n = len(shards)
    out = np.zeros((n, len(VOLUMES)))
    if n == 0:
        return out
    table = np.fromiter((s.table for s in shards), dtype=np.int64, count=n)
    dims = np.fromiter((s.dim for s in shards), dtype=np.float64, count=n)
    pooling = np.array([task.tables[i].pooling_factor for i in table], dtype=np.float64)
    replica = np.fromiter((s.replica for s in shards), dtype=bool, count=n)
    whole = np.fromiter((s.is_whole for s in shards), dtype=bool, count=n)
    share = np.ones(n)  # a whole table's ids all go to its shard; a row shard's are bucketised by range
    for i in np.flatnonzero(~whole):
        share[i] = task.lookup_share(shards[i])
    row = ~whole & ~replica
    out[:, 0] = np.where(replica, 0.0, pooling * share * INDEX_BYTES + LENGTH_BYTES)
    out[:, 1] = np.where(whole, dims * OUTPUT_BYTES, 0.0)
    out[:, 3] = np.where(row, dims * OUTPUT_BYTES, 0.0)
    out[:, 4] = np.where(row, pooling * share, 0.0)
    if replica.any():
        rows = np.array([s.num_rows(task.tables[s.table].rows) for s in shards], dtype=np.float64)
        out[:, 2] = np.where(replica, rows * dims * OUTPUT_BYTES, 0.0)
    return out


def device_volumes(task: Task, devices: Sequence[Sequence[ShardRef]]) -> np.ndarray:
    """(len(devices), 3) volumes of each device: the sums of its shards' (``shard_volumes``)."""
    counts = np.fromiter((len(d) for d in devices), dtype=np.int64, count=len(devices))
    flat = [s for d in devices for s in d]
    if not flat:
        return np.zeros((len(devices), len(VOLUMES)))
    owner = np.repeat(np.arange(len(devices)), counts)
    return gather_volumes(shard_volumes(task, flat), np.arange(len(flat)), owner, len(devices))


def gather_volumes(per: np.ndarray, members: np.ndarray, owner: np.ndarray, n: int) -> np.ndarray:
    """(n, len(VOLUMES)) volumes of ``n`` devices where device ``owner[k]`` holds the shard whose
    ``shard_volumes`` row is ``per[members[k]]`` (each device's sums in the order of ``owner``)."""
    return np.stack([np.bincount(owner, weights=per[members, k], minlength=n) for k in range(len(VOLUMES))],
                    axis=1)


def collective_bytes(task: Task, volumes: np.ndarray) -> dict[str, tuple[Any, Any]]:
    """Bytes every rank sends and receives in each collective, from the (..., D, 3) device volumes of complete
    plans (the plan's totals are the sums over its devices): name -> (sent, received), each (..., D)."""
    b, d = task.batch_size, task.num_devices
    local = b / d
    ids, outs, reps, rows = volumes[..., 0], volumes[..., 1], volumes[..., 2], volumes[..., 3]
    ids_recv = (d - 1) * local * ids
    ids_sent = local * (ids.sum(axis=-1, keepdims=True) - ids)
    out_sent = (d - 1) * local * outs
    out_recv = local * (outs.sum(axis=-1, keepdims=True) - outs)
    # a reduce-scatter moves what an all-to-all of the partial sums would: each rank keeps its samples' rows
    row_sent = (d - 1) * local * rows
    row_recv = local * (rows.sum(axis=-1, keepdims=True) - rows)
    # ring all-reduce of the replicas' dense gradient: every replica holder sends and receives 2 (D-1)/D of it
    rep = 2.0 * (d - 1) / d * reps.max(axis=-1, keepdims=True) * (reps > 0)
    none = np.zeros_like(ids)
    return {"row_bucketize": (none, none), "input_ids": (ids_sent, ids_recv),
            "pooled_outputs": (out_sent, out_recv), "row_outputs": (row_sent, row_recv),
            "output_grads": (out_recv, out_sent), "row_grads": (row_recv, row_sent),
            "replica_grads": (rep, rep)}


def inter_host_bytes(task: Task, volumes: np.ndarray) -> dict[str, tuple[Any, Any]]:
    """The part of ``collective_bytes`` that crosses hosts (``task.topology``; zeros on one host): rank r
    exchanges with the ``D - L`` ranks of other hosts, ``L`` devices per host. The replicas' ring all-reduce
    crosses hosts whole when there is more than one (a ring over all ranks runs at its slowest link)."""
    d, hosts = task.num_devices, task.topology.hosts
    local_n = task.topology.local_size(d)
    local = task.batch_size / d
    ids, outs, rows = volumes[..., 0], volumes[..., 1], volumes[..., 3]
    zero = np.zeros_like(ids)
    if hosts <= 1:
        return {name: (zero, zero) for name, _ in COLLECTIVES}

    def others(v: np.ndarray) -> np.ndarray:  # per rank: the sum over ranks of other hosts
        per_host = v.reshape(v.shape[:-1] + (hosts, local_n)).sum(axis=-1)
        return np.repeat(v.sum(axis=-1, keepdims=True) - per_host, local_n, axis=-1)

    ids_recv = (d - local_n) * local * ids
    ids_sent = local * others(ids)
    out_sent = (d - local_n) * local * outs
    out_recv = local * others(outs)
    row_sent = (d - local_n) * local * rows
    row_recv = local * others(rows)
    rep = collective_bytes(task, volumes)["replica_grads"][0]
    return {"row_bucketize": (zero, zero), "input_ids": (ids_sent, ids_recv),
            "pooled_outputs": (out_sent, out_recv), "row_outputs": (row_sent, row_recv),
            "output_grads": (out_recv, out_sent), "row_grads": (row_recv, row_sent),
            "replica_grads": (rep, rep)}


ALL_TO_ALLS = ("input_ids", "pooled_outputs", "output_grads")
"""The collectives that are all-to-alls (measured with the plan's own splits)."""

TIMED_KINDS = {"input_ids": "all_to_all", "pooled_outputs": "all_to_all", "output_grads": "all_to_all",
               "row_outputs": "reduce_scatter", "row_grads": "all_gather"}
"""The collectives the evaluator times on D processes, each as the collective TorchRec runs
(``hardware.collectives.KINDS``); replica_grads (an all-reduce) and row_bucketize (per-rank work) stay
modelled."""


def collective_matrices(task: Task, volumes: np.ndarray) -> dict[str, np.ndarray]:
    """(D, D) bytes rank ``src`` sends rank ``dst`` (entry [src, dst]) in each timed collective of one plan
    with (D, 5) device volumes; their row and column sums are ``collective_bytes``'s sent and received."""
    d = task.num_devices
    local = task.batch_size / d
    off = 1.0 - np.eye(d)
    ids = off * (local * volumes[:, 0])[None, :]  # every rank sends the owner its samples' ids
    outs = off * (local * volumes[:, 1])[:, None]  # the owner sends every rank its samples' outputs
    rows = off * (local * volumes[:, 3])[:, None]  # each row shard's rank its partial sums of them
    return {"input_ids": ids, "pooled_outputs": outs, "row_outputs": rows, "output_grads": outs.T.copy(),
            "row_grads": rows.T.copy()}


def collective_ms(comm: AlphaBeta, sent: np.ndarray, received: np.ndarray,
                  inter: tuple[np.ndarray, np.ndarray] | None = None,
                  inter_bytes_per_ms: float = 1.0, factor: float = 1.0) -> np.ndarray:
    """(...,) time of each collective: the busiest rank's bytes over its links; 0 when nothing moves.

    Within a host the bytes go at ``comm``'s bandwidth (fitted to measured all-to-alls, or declared); the part
    that crosses hosts (``inter``: sent, received) at ``inter_bytes_per_ms`` (the topology's, declared).
    ``factor`` scales the bytes' time for a collective slower than an all-to-all of the same bytes
    (``COLLECTIVE_FACTORS``)."""
    if inter is None:
        busiest = np.maximum(sent, received).max(axis=-1)
        return np.where(busiest > 0, comm.alpha_ms + factor * busiest / comm.bytes_per_ms, 0.0)
    inter_sent, inter_recv = inter
    intra = np.maximum(sent - inter_sent, received - inter_recv) / comm.bytes_per_ms
    across = np.maximum(inter_sent, inter_recv) / inter_bytes_per_ms
    busiest = (intra + across).max(axis=-1)
    moved = np.maximum(sent, received).max(axis=-1)
    return np.where(moved > 0, comm.alpha_ms + factor * busiest, 0.0)


def collective_factor(comm: AlphaBeta, name: str) -> float:
    """How much slower than an all-to-all of the same bytes collective ``name`` runs on ``comm``'s host:
    the row outputs' reduce-scatter and the row gradients' all-gather as measured, 1 for the rest."""
    return {"row_outputs": comm.reduce_scatter_factor, "row_grads": comm.all_gather_factor}.get(name, 1.0)


def bucketize_ms(task: Task, comm: AlphaBeta, volumes: np.ndarray) -> np.ndarray:
    """(...,) each rank's time bucketising the ids of its ``B / D`` samples for every row-split table, from
    complete plans' (..., D, 5) volumes (their ``row_ids`` summed over devices: the ids of one sample)."""
    ids = task.batch_size / task.num_devices * volumes[..., 4].sum(axis=-1)
    return ids * comm.bucketize_ns_per_id * 1e-6


def device_comm_ms(task: Task, comm: AlphaBeta, volumes: Any) -> Any:
    """(...,) a device's own time in the step's collectives from its (..., 5) volumes alone: receiving its
    shards' ids, sending their outputs, receiving their gradients (row shards' at the reduce-scatter's and
    all-gather's factors), all-reducing its replicas (what it would wait for if every other rank were idle;
    the bucketisation every rank does for the whole plan is the step's, not a device's). 0 on one device or
    with nothing placed. ``volumes`` may be a numpy array or a torch tensor (the learned model's batched
    path); the result is of the same kind."""
    d = task.num_devices
    if d <= 1:
        return volumes[..., 0] * 0.0
    ids = (d - 1) * (task.batch_size / d)  # samples of the other ranks' shares of the batch
    # the six collectives a device joins, as (volume channel, its multiplier to the bytes moved, the
    # collective's time factor): ids, pooled outputs, gradients, replicas' all-reduce, row outputs'
    # reduce-scatter, row gradients' all-gather; one vectorised pass (a planner's step prices 128
    # candidates: 2.5x faster than six passes)
    channel = [0, 1, 1, 2, 3, 3]
    scale = [ids, ids, ids, 2.0 * (d - 1) / d, ids, ids]
    factor = [1.0, 1.0, 1.0, 1.0, collective_factor(comm, "row_outputs"),
              collective_factor(comm, "row_grads")]
    if isinstance(volumes, np.ndarray):
        scale, factor = np.array(scale), np.array(factor)
    else:
        scale, factor = volumes.new_tensor(scale), volumes.new_tensor(factor)
    v = volumes[..., channel] * scale
    return ((v > 0) * (comm.alpha_ms + factor * v / comm.bytes_per_ms)).sum(-1)


def _collectives_ms(task: Task, comm: AlphaBeta, volumes: np.ndarray,
                    traffic: dict[str, tuple[Any, Any]] | None = None) -> dict[str, np.ndarray]:
    traffic = collective_bytes(task, volumes) if traffic is None else traffic
    inter = inter_host_bytes(task, volumes) if task.topology.hosts > 1 else None
    bw = task.topology.inter_bytes_per_ms
    out = {name: collective_ms(comm, sent, recv, None if inter is None else inter[name], bw,
                               collective_factor(comm, name))
           for name, (sent, recv) in traffic.items() if name != "row_bucketize"}  # per-rank work, no bytes
    return {"row_bucketize": bucketize_ms(task, comm, volumes), **out}


@dataclass(frozen=True)
class StepCost:
    """A step's composition for P candidate plans (leading axis) or one plan (no leading axis)."""

    fwd_ms: np.ndarray
    """max over devices of the forward kernels."""
    bwd_ms: np.ndarray
    """max over devices of the backward kernels."""
    collectives_ms: dict[str, np.ndarray]
    """Each collective's time, by name (``COLLECTIVES``)."""

    @property
    def comm_ms(self) -> np.ndarray:
        return sum(self.collectives_ms.values())

    @property
    def total_ms(self) -> np.ndarray:
        return self.fwd_ms + self.bwd_ms + self.comm_ms


def step_cost(task: Task, comm: AlphaBeta, fwd: np.ndarray, bwd: np.ndarray, volumes: np.ndarray) -> StepCost:
    """The step cost of plans whose devices have kernel times ``fwd``/``bwd`` (..., D) and volumes
    (..., D, 3)."""
    if task.num_devices <= 1:
        zero = np.zeros(np.shape(fwd)[:-1])
        coll = {name: zero for name, _ in COLLECTIVES}
    else:
        coll = _collectives_ms(task, comm, volumes)
    return StepCost(np.max(fwd, axis=-1), np.max(bwd, axis=-1), coll)


def plan_collectives(task: Task, comm: AlphaBeta, devices: Sequence[Sequence[ShardRef]]
                     ) -> tuple[CollectiveCost, ...]:
    """The step's collectives of one plan (its devices' shards), every rank's bytes and the modelled time."""
    volumes = device_volumes(task, devices)
    if task.num_devices <= 1:
        zero = tuple(0.0 for _ in devices)
        return tuple(CollectiveCost(name, stage, 0.0, zero, zero, 0.0) for name, stage in COLLECTIVES)
    traffic = collective_bytes(task, volumes)
    times = _collectives_ms(task, comm, volumes, traffic)
    out = []
    for name, stage in COLLECTIVES:
        sent, recv = traffic[name]
        ms = float(times[name])
        out.append(CollectiveCost(name, stage, ms, tuple(map(float, sent)), tuple(map(float, recv)), ms))
    return tuple(out)


def compose(device_costs: np.ndarray, collectives: Sequence[CollectiveCost], source: str) -> PlanCost:
    """A plan's cost from its devices' (D, 3) fwd/bwd/comm and the step's collectives."""
    return PlanCost.from_array(device_costs, source, collectives)
