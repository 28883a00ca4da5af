"""Run a plan for real: D processes shard an EmbeddingBagCollection with TorchRec's DistributedModelParallel.

Each rank (a process started by ``autoshard.hardware.multiprocess``: gloo on 127.0.0.1 on CPU, NCCL with one
GPU per rank, on a free port picked at run time):

1. builds the task's EmbeddingBagCollection on ``meta`` and shards it with DMP under the exported plan
   (``fused`` kernel, optimizer fused into backward);
2. copies identical, seeded weights into its shards (DMP initialises shards itself, so without the copy the
   sharded and unsharded modules would differ) and checks that the sharded forward of its slice of a batch
   equals an unsharded EmbeddingBagCollection's forward on the same weights and the whole batch, key by key;
3. runs ``warmup`` + ``steps`` training steps (forward, backward with the fused optimizer update) and times
   each (and its forward part). In timing mode (``VerifySettings.sync_steps``) the ranks meet at a barrier
   before every step, so a step's time is its slowest rank's (``VerifyResult.slowest_step_ms``).

Batch: ``task.batch_size`` is the batch every device's embedding kernels process. Under DMP each table's
kernel sees the global batch (every rank's local batch after the input all-to-all), so each rank feeds a local
batch of ``ceil(batch_size / D)`` bags and the kernels see ``D * ceil(batch_size / D)``.

Rows: real tables can be far too large to allocate; every table is capped at ``rows_cap`` rows (default
``DEFAULT_ROWS_CAP``) and lookups are folded ``mod rows_cap`` by ``sample_lookups`` (hot rows keep their
reuse). The cap and each table's rows used are recorded in the result.

Weights are fp32 whatever the task's precision, and the optimizer is ``VerifySettings.optimizer`` (exact SGD
by default, no state), so memory use in the run is not the task's; the plan's memory is checked by
``validate``.

On a CPU-only host every rank shares the same cores, so step times prove the plan runs, not how fast it is.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

from autoshard.errors import AutoshardError, PlanError
from autoshard.hardware.multiprocess import RankContext, check_world, run_on_ranks
from autoshard.plan import Plan, validate
from autoshard.tasks import Task
from autoshard.torchrec.export import to_sharding_plan

logger = logging.getLogger(__name__)

DEFAULT_ROWS_CAP = 100_000
"""Rows per table in verification: 100k x 128 fp32 = 51 MB per table, so dozens of tables fit in every rank
(each rank also holds the unsharded reference). Larger tables are folded onto this many rows."""

NUM_BATCHES = 4
"""Distinct generated batches the steps cycle through (generated before timing, so timing is the step
only)."""


class Optimizer(str, Enum):
    """FBGEMM fused optimizers the verify steps use (names of ``EmbOptimType``)."""

    EXACT_SGD = "exact_sgd"
    EXACT_ROWWISE_ADAGRAD = "exact_rowwise_adagrad"
    EXACT_ADAGRAD = "exact_adagrad"


@dataclass(frozen=True)
class VerifySettings:
    """How a plan is verified."""

    steps: int = 10
    """Timed training steps per rank."""
    warmup: int = 3
    """Untimed steps before timing (first calls allocate and warm caches)."""
    timeout_s: float = 600.0
    """Wall-time limit for the whole run; processes are terminated after it."""
    rows_cap: int | None = DEFAULT_ROWS_CAP
    """Rows per table in the sharded module (None: the tables' real rows)."""
    device: str = "cpu"
    """'cpu' (gloo) or 'cuda' (NCCL, one GPU per rank)."""
    optimizer: Optimizer = Optimizer.EXACT_SGD
    """Fused optimizer of the training steps."""
    learning_rate: float = 0.01
    threads: int = 1
    """torch threads per rank (1: FBGEMM's CPU backward is pathological with 2; see shared/README.md)."""
    seed: int = 0
    """Seed of the weights and of the generated batches."""
    atol: float = 1e-4
    """Absolute tolerance of the sharded vs unsharded forward comparison (fp32 sums in a different order)."""
    rtol: float = 1e-5
    sync_steps: bool = False
    """Timing mode: a barrier before every step (warm-up and timed; CUDA synchronized before the forward's
    end is read), so every step starts together on all ranks; off, only the loop is between barriers."""
    pin_cpus: bool = False
    """Pin every rank to a physical core of its own (``multiprocess.rank_cpus``): on a host with a core per
    rank, each rank then computes alone, as on a device of its own (CPU ranks only)."""
    profile_steps: int = 0
    """After the timed steps, this many more under ``torch.profiler`` (CPU activity), each rank reporting
    its ops' self time per step (``RankResult.profile``): where a DMP step's time goes. 0: none. The
    profiled steps are not among the timed ones (the profiler slows them)."""
    profile_top: int = 15
    """Ops a rank reports, by self time."""


@dataclass(frozen=True)
class OpTime:
    """One op of a profiled DMP step (``torch.profiler``'s key averages, CPU self time)."""

    name: str
    self_ms: float
    """Self CPU time per profiled step, ms (time in the op itself, not in the ops it called)."""
    calls: float
    """Calls per profiled step."""


def top_ops(key_averages: Any, steps: int, top: int) -> tuple[OpTime, ...]:
    """The ``top`` ops of a profiler's ``key_averages()`` by self CPU time, per step of ``steps``; the
    profiler's own step markers left out."""
    ops = [OpTime(e.key, e.self_cpu_time_total / 1000.0 / steps, e.count / steps) for e in key_averages
           if not e.key.startswith("ProfilerStep")]
    return tuple(sorted(ops, key=lambda o: -o.self_ms)[:top])


@dataclass(frozen=True)
class RankResult:
    """What one rank measured."""

    rank: int
    step_ms: tuple[float, ...]
    max_abs_diff: float
    """Largest |sharded - unsharded| over the rank's output keys (before training)."""
    keys_checked: int
    shards: int
    """Shards (table or column blocks) this rank holds."""
    fwd_ms: tuple[float, ...] = ()
    """The forward part of each timed step (input dist, lookups, output dist, loss), in step order."""
    profile: tuple[OpTime, ...] = ()
    """The rank's ops with the most self time over the profiled steps (``VerifySettings.profile_steps``)."""

    @property
    def mean_ms(self) -> float:
        return sum(self.step_ms) / len(self.step_ms)

    @property
    def median_ms(self) -> float:
        s = sorted(self.step_ms)
        n = len(s)
        return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


@dataclass(frozen=True)
class VerifyResult:
    """The outcome of one verify run."""

    plan_algorithm: str
    task_name: str
    num_devices: int
    local_batch: int
    global_batch: int
    rows_used: dict[str, int]
    ranks: tuple[RankResult, ...]
    settings: VerifySettings
    matches: bool
    """True when every rank holds the shards the plan gives it and its sharded forward equals the unsharded
    forward within tolerance."""
    host: dict[str, Any] = field(default_factory=dict)

    @property
    def max_step_ms(self) -> float:
        """The slowest rank's median step time (the plan's step time)."""
        return max(r.median_ms for r in self.ranks)

    @property
    def slowest_step_ms(self) -> tuple[float, ...]:
        """Each timed step's slowest rank's time: the step's time when the ranks start it together
        (``VerifySettings.sync_steps``)."""
        return tuple(max(r.step_ms[k] for r in self.ranks) for k in range(len(self.ranks[0].step_ms)))

    @property
    def max_abs_diff(self) -> float:
        return max(r.max_abs_diff for r in self.ranks)

    def to_json(self) -> dict[str, Any]:
        s = asdict(self.settings)
        s["optimizer"] = self.settings.optimizer.value
        return {
            "kind": "autoshard.verify",
            "version": 1,
            "plan_algorithm": self.plan_algorithm,
            "task": self.task_name,
            "devices": self.num_devices,
            "local_batch": self.local_batch,
            "global_batch": self.global_batch,
            "rows_cap": self.settings.rows_cap,
            "rows_used": self.rows_used,
            "matches": self.matches,
            "max_abs_diff": self.max_abs_diff,
            "max_step_ms": self.max_step_ms,
            "ranks": [{"rank": r.rank, "median_ms": r.median_ms, "mean_ms": r.mean_ms,
                       "step_ms": list(r.step_ms), "fwd_ms": list(r.fwd_ms),
                       "max_abs_diff": r.max_abs_diff, "keys_checked": r.keys_checked, "shards": r.shards,
                       "profile": [asdict(o) for o in r.profile]}
                      for r in self.ranks],
            "settings": s,
            "host": self.host,
        }


def _reference_weights(task: Task, rows: dict[str, int], seed: int) -> dict[str, Any]:
    """Identical weights in every rank: table i uniform in [-0.1, 0.1) from generator (seed, i)."""
    import torch

    out = {}
    for i, t in enumerate(task.tables):
        g = torch.Generator().manual_seed(seed * 1_000_003 + i)
        out[t.name] = (torch.rand(rows[t.name], t.dim, generator=g) - 0.5) * 0.2
    return out


def _planned_shards(plan: Plan, rank: int) -> set[tuple[str, int, int]]:
    """(table, first column, columns) of every shard the plan puts on ``rank`` (a row shard spans its
    table's columns)."""
    return {(p.table, s.col_start, s.cols) for p in plan.placements for s in p.shards if s.rank == rank}


def _run_rank(ctx: RankContext, task_json: dict, plan_json: dict, settings: VerifySettings) -> dict[str, Any]:
    """One rank (its process group already up): shard, check against the unsharded module, time the steps."""
    import torch
    import torch.distributed as dist
    from fbgemm_gpu.split_embedding_configs import EmbOptimType
    from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder
    from torchrec.distributed.model_parallel import DistributedModelParallel
    from torchrec.distributed.types import ShardingEnv

    from autoshard.torchrec.export import table_rows, to_sharding_plan
    from autoshard.torchrec.modules import build_ebc, make_kjt, sample_batch

    torch.set_num_threads(settings.threads)
    # torchrec's sharded modules call torch.fx's deprecated is_fx_tracing: one warning per rank, not ours.
    logging.getLogger("torch.fx._symbolic_trace").setLevel(logging.ERROR)
    task, plan = Task.from_json(task_json), Plan.from_json(plan_json)
    rank, world, device = ctx.rank, ctx.world_size, ctx.device
    cuda = device.type == "cuda"
    rows = table_rows(task, settings.rows_cap)
    sharder = EmbeddingBagCollectionSharder(fused_params={
        "optimizer": EmbOptimType(settings.optimizer.value), "learning_rate": settings.learning_rate})
    sharding_plan = to_sharding_plan(plan, task, device_type=settings.device, local_size=world,
                                     rows_cap=settings.rows_cap)
    model = DistributedModelParallel(build_ebc(task, settings.rows_cap, "meta"),
                                     env=ShardingEnv.from_process_group(dist.group.WORLD), device=device,
                                     plan=sharding_plan, sharders=[sharder])
    weights = _reference_weights(task, rows, settings.seed)
    held: set[tuple[str, int, int]] = set()
    with torch.no_grad():
        for key, value in model.state_dict().items():
            name = key.split(".")[-2]  # embedding_bags.<table>.weight
            if name not in weights or not hasattr(value, "local_shards"):
                continue
            for shard in value.local_shards():
                r0, c0 = shard.metadata.shard_offsets
                nr, nc = shard.metadata.shard_sizes
                shard.tensor.copy_(weights[name][r0:r0 + nr, c0:c0 + nc].to(device))
                held.add((name, int(c0), int(nc)))
    reference = build_ebc(task, settings.rows_cap, "cpu")
    with torch.no_grad():
        for name, bag in reference.embedding_bags.items():
            bag.weight.copy_(weights[name])

    global_batch_size = world * math.ceil(task.batch_size / world)
    local = global_batch_size // world
    lo, hi = rank * local, (rank + 1) * local
    batches = [sample_batch(task, global_batch_size, settings.seed + i, settings.rows_cap)
               for i in range(NUM_BATCHES)]
    inputs = [make_kjt(task, b, lo, hi).to(device) for b in batches]

    with torch.no_grad():
        sharded = model(inputs[0]).to_dict()
        expected = reference(make_kjt(task, batches[0])).to_dict()
    max_diff, ok = 0.0, True
    for key, want in expected.items():
        got = sharded[key].detach().cpu()
        part = want[lo:hi]
        max_diff = max(max_diff, float((got - part).abs().max()) if got.numel() else 0.0)
        ok = ok and bool(torch.allclose(got, part, atol=settings.atol, rtol=settings.rtol))
    del reference

    times, fwd_times = [], []
    dist.barrier()
    for step in range(settings.warmup + settings.steps):
        if settings.sync_steps and step:
            dist.barrier()  # the first step starts at the barrier above
        t0 = time.perf_counter()
        loss = _forward_loss(model, inputs[step % NUM_BATCHES])
        if cuda and settings.sync_steps:
            torch.cuda.synchronize()
        t1 = time.perf_counter()
        loss.backward()  # the fused optimizer updates the shards inside backward
        if cuda:
            torch.cuda.synchronize()
        elapsed = (time.perf_counter() - t0) * 1000.0
        if step >= settings.warmup:
            times.append(elapsed)
            fwd_times.append((t1 - t0) * 1000.0)
    dist.barrier()
    profile: tuple[OpTime, ...] = ()
    if settings.profile_steps:
        from torch.profiler import ProfilerActivity
        from torch.profiler import profile as torch_profile

        with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
            for step in range(settings.profile_steps):
                dist.barrier()
                _forward_loss(model, inputs[step % NUM_BATCHES]).backward()
        profile = top_ops(prof.key_averages(), settings.profile_steps, settings.profile_top)
        dist.barrier()
    # The shards DMP built on this rank must be the column blocks the plan puts here.
    ok = ok and held == _planned_shards(plan, rank)
    return {"step_ms": times, "fwd_ms": fwd_times, "max_abs_diff": max_diff, "matches": ok,
            "keys_checked": len(expected), "shards": len(held), "rows": rows,
            "profile": [asdict(o) for o in profile]}


def _forward_loss(model: Any, kjt: Any) -> Any:
    """A training step's forward: the sharded module's pooled outputs and a loss on them (mean square; the
    fused optimizer updates the shards inside its backward)."""
    return model(kjt).values().float().square().mean()


def verify_plan(plan: Plan, task: Task, settings: VerifySettings | None = None) -> VerifyResult:
    """Run ``plan`` on ``task.num_devices`` processes under DMP; see the module docstring."""
    import platform

    import torch

    s = settings or VerifySettings()
    validate(plan, task)
    if s.steps <= 0 or s.warmup < 0:
        raise AutoshardError(f"steps={s.steps} warmup={s.warmup}; need steps >= 1 and warmup >= 0")
    if s.rows_cap is not None and s.rows_cap <= 0:
        raise AutoshardError(f"rows cap {s.rows_cap} must be positive")
    if s.device not in ("cpu", "cuda"):
        raise AutoshardError(f"device {s.device!r} unknown; use cpu or cuda")
    if s.profile_steps < 0 or s.profile_top < 1:
        raise AutoshardError(f"profile_steps={s.profile_steps} profile_top={s.profile_top}; need "
                             "profile_steps >= 0 and profile_top >= 1")
    if s.pin_cpus and s.device == "cuda":
        raise AutoshardError("pin_cpus pins CPU ranks to cores; GPU ranks each have a device of their own")
    backend = "nccl" if s.device == "cuda" else "gloo"
    check_world(backend, task.num_devices)  # NCCL: one GPU per rank, checked before tables are sampled
    # a plan TorchRec's kernels would run wrongly (e.g. an uneven row split) is refused here, before any
    # process starts: one line, with the pointer to autoshard's own runtime
    try:
        to_sharding_plan(plan, task, device_type=s.device, local_size=task.num_devices, rows_cap=s.rows_cap)
    except PlanError as e:
        raise PlanError(f"{e}; verify it with --runtime autoshard") from None
    # tables without a lookup distribution get the documented default (tables.lookups.default_lookup_spec)

    world = task.num_devices
    per_rank = run_on_ranks(_run_rank, world, (task.to_json(), plan.to_json(), s), backend=backend,
                            timeout_s=s.timeout_s, what="verify",
                            timeout_hint="raise --timeout or use fewer steps / a lower --rows-cap",
                            pin_cpus=s.pin_cpus)
    got = dict(enumerate(per_rank))

    ranks = tuple(RankResult(r, tuple(got[r]["step_ms"]), got[r]["max_abs_diff"], got[r]["keys_checked"],
                             got[r]["shards"], tuple(got[r]["fwd_ms"]),
                             tuple(OpTime(**o) for o in got[r]["profile"])) for r in range(world))
    local = math.ceil(task.batch_size / world)
    return VerifyResult(
        plan_algorithm=plan.algorithm, task_name=task.name, num_devices=world, local_batch=local,
        global_batch=local * world, rows_used=got[0]["rows"], ranks=ranks, settings=s,
        matches=all(got[r]["matches"] for r in range(world)),
        host={"platform": platform.platform(), "torch": torch.__version__, "device": s.device,
              "cpu_count": __import__("os").cpu_count()},
    )
