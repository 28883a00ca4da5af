"""The cost network: a shared table encoder, additive per-device pooling, per-device and plan heads.

DreamShard (NeurIPS 2022, Sec. 4.2) encodes each table with a shared MLP, sums the encodings of a device's
tables, and feeds the sum to heads for forward, backward and communication cost; the max over devices of the
device representations feeds a head for the overall cost. This module keeps that shape and makes the pooled
state an explicit additive *accumulator* so planners can update it table by table:

    table vector  v_i = [e_i, e_i**2 (interaction only), c_i (additive only), onehot(dim class) (kernel
                         groups only), 1, dim_i]
    device state  a_d = sum of v_i over the device's shards          (segment sum; empty device = 0)
    device cost   = heads(device_mlp([sum e, pairwise interaction]))  (+ log(launch + sum c_i
                    + groups x group cost), additive only)

Options (compared in ``benchmarks/cost_model_accuracy.py``):
- ``target``: "linear" predicts milliseconds (DreamShard's MSE on costs), "log" predicts log-milliseconds so
  the loss is a relative error, which is what MAPE and cost ranking weigh.
- ``interaction``: adds the factorisation-machine pairwise term ((sum e)^2 - sum e^2) / 2 per channel, a
  per-device interaction that a plain sum cannot express, still computable from additive state.
- ``additive``: (log target only) each table also emits per-head costs c_i = exp(linear(x_i) + mlp(x_i)), and
  the head predicts log(sum c_i) + a learned correction (zero at initialisation). A log-linear c_i can express
  the roofline exactly (batch x (1 + pooling) x dim is linear in the log features), so little data suffices;
  the measurements are nearly additive on CPU (fused shards cost 0.93-0.96x the sum of single tables,
  shared/README.md), and the correction learns the deviation (GPUs differ more).
"""

from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass
from enum import Enum
from typing import Any

import numpy as np
import torch
from torch import nn

from autoshard.errors import AutoshardError
from autoshard.tables.table import NUM_FEATURES

NUM_CONTEXT_FEATURES = 2
"""Per-shard context features of a ``context`` network: log10 batch size and element bytes (``features``)."""

NUM_REUSE_FEATURES = 2
"""Per-shard working-set features of a ``reuse`` network: log10 distinct rows a batch touches and their bytes
(``features.reuse_features``)."""

NUM_DENSITY_FEATURES = 2
"""Per-shard features of a ``density`` network: the share of the rows it is timed with that a batch touches,
and those rows' bytes (``features.density_features``)."""

NUM_COMPUTE_HEADS = 2
"""Per-device learned heads: forward and backward compute (comm comes from the measured alpha-beta fit)."""


LAUNCH_LOG_INIT = -2.0
"""Initial log launch cost, in units of the mean device cost: exp(-2) ~ 14%, the share of one small table's
cost on a device seen in the CPU profiles; it is learned."""


KERNEL_GROUP_CHANNELS = 64
"""Accumulator channels of a ``kernel_groups`` network: a shard of dim d adds 1 to channel
(ceil(d / 4) - 1) mod 64, so the channels above zero count a device's distinct shard dims, exactly for the
dims 4-256 in steps of 4 (the profile designs' and the suites' dims) and with a rare collision beyond."""

GROUP_LOG_INIT = -3.0
"""Initial log cost of one kernel group, in units of the mean device cost (exp(-3) ~ 5%); it is learned."""


CORRECTION_BOUND = 0.5
"""Largest |correction| of the additive head, in normalised log-ms (std units): about a factor e^(0.5 std)
either way. Enough for fused-kernel savings (0.93-0.96x on CPU) and launch effects; see ``device_forward``."""


class Target(str, Enum):
    """The space the heads predict in."""

    LINEAR = "linear"
    LOG = "log"


@dataclass(frozen=True)
class CostNetConfig:
    """Architecture of the cost network (stored in every checkpoint)."""

    hidden: int = 128
    """Width of the hidden layers of every MLP."""
    embed: int = 32
    """Width of a table encoding (the summed part of the accumulator)."""
    target: Target = Target.LOG
    """Predict milliseconds ("linear") or log-milliseconds ("log")."""
    interaction: bool = False
    """Add the pairwise (factorisation-machine) interaction term of the device's encodings."""
    additive: bool = True
    """Log target only: predict log(sum of per-table positive costs) + a learned correction."""
    correction_bound: float = CORRECTION_BOUND
    """Largest |correction| of the additive head in normalised log-ms (see ``CORRECTION_BOUND``)."""
    table_mlp: bool = True
    """Additive head only: per-table log-cost = linear(features) + an MLP term (True), or the linear term
    alone (False: a generalised roofline with ~20 parameters per head). Trained on the DLRM-20 (4) profile, 3
    seeds, scored on held-out bench devices (``benchmarks/cost_model_on_plans.py --train-from``): the linear
    term alone ranks DLRM-20 (4) devices better (Spearman 0.88-0.91 vs 0.80-0.86) but is worse on devices with
    more tables than its training records (DLRM-50 (4), 12-13 a device: fwd+bwd MAPE 16.8-22.7% vs 11.9-13.5%)
    and, unbounded in the features, can blow up on an unseen table
    (``train-cost --linear-table-cost --seed 1``: held-out MAPE 5296%)."""
    num_features: int = NUM_FEATURES
    """Table features: the pool normaliser's."""
    context: bool = False
    """Also give every shard its device's context (``features.CONTEXT_FEATURE_NAMES``: log batch size and
    element bytes), so one network prices every batch size and precision it was trained on. Off in
    networks trained on one batch size and precision (they refuse others:
    ``LearnedCostModel.check_compatible``)."""
    reuse: bool = False
    """``context`` networks only: also give every shard its batch's working set (``features.reuse_features``:
    the distinct rows the device's batch touches, estimated from the access bins, and their bytes). Off in
    checkpoints before stop 19."""
    density: bool = False
    """``reuse`` networks only: also give every shard how thinly its batch is spread over the rows it is
    timed with (``features.density_features``: the share of those rows a batch touches, and their bytes, the
    rows cap of the training records applied). Why: at dim 16 the backward of one heavily pooled table rises
    2.8x from an 8 MiB to a 64 MiB table while the shipped model's price rises 1.6x (docs/benchmarks.md,
    "Stop 93"), and the working set and the table's full rows do not say how scattered its updates are.
    Measured at stop 94: a model trained with them ranks the measured devices of 14 of 24 archived runs
    better (DLRM-100 (8): within-task rho 0.861 -> 0.896) but prices that step no better; not in the shipped
    model. Off in checkpoints before stop 94."""
    kernel_groups: bool = False
    """Additive head only: also add a learned cost per kernel group, a device's distinct shard dims
    (``KERNEL_GROUP_CHANNELS``). Why: the torch backend (``hardware.torch_backend``) runs one embedding bag,
    and one sort, segment sum and update in the backward, per distinct dim; on an H100 a model blind to
    it, trained on samples of nearly one dim a table, priced devices of 15+ tables of at most 4 dims 2x too
    high (docs/benchmarks.md, "Stop 41"), a difference no per-table feature carries. FBGEMM's TBE runs
    every dim in one kernel: off in models of its timings and in checkpoints before stop 41."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "target", Target(self.target))
        if self.hidden <= 0 or self.embed <= 0:
            raise AutoshardError("cost network widths must be positive "
                                 f"(hidden={self.hidden}, embed={self.embed})")
        if not self.correction_bound > 0:
            raise AutoshardError(f"correction bound {self.correction_bound} must be positive")
        if self.additive and self.target is not Target.LOG:
            raise AutoshardError("the additive head needs the log target; "
                                 "use --target log or drop --additive")
        if self.reuse and not self.context:
            raise AutoshardError("working-set features need the device context; use --context on")
        if self.density and not self.reuse:
            raise AutoshardError("density features need the working-set features; use --working-set on")
        if self.kernel_groups and not self.additive:
            raise AutoshardError("the kernel-group cost is a term of the additive head; "
                                 "drop --no-additive or use --kernel-groups off")

    @property
    def input_width(self) -> int:
        """Width of a shard's feature vector: table features, then the context, working-set and density
        features if any."""
        return (self.num_features + (NUM_CONTEXT_FEATURES if self.context else 0)
                + (NUM_REUSE_FEATURES if self.reuse else 0) + (NUM_DENSITY_FEATURES if self.density else 0))

    @property
    def acc_width(self) -> int:
        """Width of a table vector / device accumulator (last two channels: shard count, dim sum)."""
        return self.group_offset + (KERNEL_GROUP_CHANNELS if self.kernel_groups else 0) + 2

    @property
    def group_offset(self) -> int:
        """First kernel-group channel of an accumulator (after the encodings and the additive costs)."""
        return self.embed * (2 if self.interaction else 1) + (NUM_COMPUTE_HEADS if self.additive else 0)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["target"] = self.target.value
        return d

    @staticmethod
    def from_json(d: dict[str, Any]) -> CostNetConfig:
        try:
            return CostNetConfig(**d)
        except (TypeError, ValueError) as e:
            raise AutoshardError(f"cost model architecture not understood ({e}); "
                                 "retrain with 'autoshard train-cost'") from None


def _mlp(sizes: list[int]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class CostNet(nn.Module):
    """Outputs are in *model space*: normalised log-ms (log target) or scaled ms (linear target)."""

    def __init__(self, config: CostNetConfig) -> None:
        super().__init__()
        self.config = config
        c = config
        extra = NUM_COMPUTE_HEADS if c.additive else 0
        self.encoder = _mlp([c.input_width, c.hidden, c.hidden, c.embed + extra])
        pooled = c.embed * (2 if c.interaction else 1)
        self.device_mlp = nn.Sequential(_mlp([pooled, c.hidden, c.hidden]), nn.ReLU())
        self.compute_head = nn.Linear(c.hidden, NUM_COMPUTE_HEADS)
        if c.additive:
            self.table_cost_linear = nn.Linear(c.input_width, NUM_COMPUTE_HEADS)
            # log of a per-device launch cost added to sum c_i (the roofline's fixed kernel overhead)
            self.launch_log = nn.Parameter(torch.full((NUM_COMPUTE_HEADS,), LAUNCH_LOG_INIT))
            nn.init.zeros_(self.compute_head.weight)  # start as the pure sum of per-table costs
            nn.init.zeros_(self.compute_head.bias)
        if c.kernel_groups:
            # log of the cost one more kernel group adds (the torch backend's per-dim launches)
            self.group_log = nn.Parameter(torch.full((NUM_COMPUTE_HEADS,), GROUP_LOG_INIT))
        # std of the log-ms targets per compute head (set by the trainer): the additive term log(sum c_i) is
        # in log-ms, the outputs are normalised log-ms, so it is divided by this to keep sum c_i
        # additive in ms
        self.register_buffer("log_scale", torch.ones(NUM_COMPUTE_HEADS))
        # plan head input: max over devices of [device representation, log1p(device comm ms)]
        self.plan_head = _mlp([c.hidden + 1, c.hidden, 1])

    # -- tables -> accumulator vectors ---------------------------------------------------------------------
    def encode(self, feats: torch.Tensor, dims: torch.Tensor) -> torch.Tensor:
        """(N, F) normalised shard features and (N,) shard dims -> (N, acc_width) additive table vectors."""
        c = self.config
        out = self.encoder(feats)
        e = out[:, : c.embed]
        parts = [e]
        if c.interaction:
            parts.append(e * e)
        if c.additive:
            # positive per-table costs in units of exp(mean log-ms); clamped so exp cannot overflow
            log_c = self.table_cost_linear(feats)
            if c.table_mlp:
                log_c = log_c + out[:, c.embed:]
            parts.append(torch.exp(log_c.clamp(-30.0, 30.0)))
        if c.kernel_groups:
            channel = torch.remainder(torch.div(dims.to(torch.int64) + 3, 4, rounding_mode="floor") - 1,
                                      KERNEL_GROUP_CHANNELS)
            parts.append(nn.functional.one_hot(channel, KERNEL_GROUP_CHANNELS).to(feats.dtype))
        ones = torch.ones_like(dims, dtype=feats.dtype)
        parts += [ones[:, None], dims.to(feats.dtype)[:, None]]
        return torch.cat(parts, dim=1)

    # -- accumulator -> per-device outputs -------------------------------------------------------------------
    def device_forward(self, acc: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(..., acc_width) device accumulators -> (representation (..., hidden), compute (..., 2)
        model space)."""
        rep = self.device_mlp(device_input(self.config, acc))
        out = self.compute_head(rep)
        if self.config.additive:
            group_log = getattr(self, "group_log", None)
            out = additive_output(self.config, out, acc, torch.exp(self.launch_log),
                                  None if group_log is None else torch.exp(group_log), self.log_scale)
        return rep, out

    def plan_forward(self, rep: torch.Tensor, comm_ms: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """(P, D, hidden) representations, (P, D) comm ms, (P, D) bool non-empty -> (P,) plan cost,
        model space."""
        x = torch.cat([rep, torch.log1p(comm_ms)[..., None]], dim=-1)
        x = x.masked_fill(~mask[..., None], float("-inf"))
        pooled = x.max(dim=1).values
        pooled = torch.where(torch.isfinite(pooled), pooled, torch.zeros_like(pooled))  # all-empty plan
        return self.plan_head(pooled)[..., 0]


def device_input(config: CostNetConfig, acc: torch.Tensor) -> torch.Tensor:
    """(..., acc_width) device accumulators -> (..., pooled) the device MLP's input: the summed encodings,
    and with ``interaction`` their pairwise term."""
    s = acc[..., : config.embed]
    if not config.interaction:
        return s
    sq = acc[..., config.embed: 2 * config.embed]
    return torch.cat([s, 0.5 * (s * s - sq)], dim=-1)


def additive_output(config: CostNetConfig, out: torch.Tensor, acc: torch.Tensor, launch_cost: torch.Tensor,
                    group_cost: torch.Tensor | None, log_scale: torch.Tensor) -> torch.Tensor:
    """The additive head: the compute head's (..., 2) ``out`` bounded, plus log(launch + sum of the per-table
    costs (+ the kernel groups' cost)) of the (..., acc_width) accumulators, in model space; ``launch_cost``
    and ``group_cost`` are exp of the learned ``launch_log`` and ``group_log``. The parameters broadcast
    against (..., 2) (one network's (2,), or an ensemble's stacked (M, 1, 2))."""
    lo = config.embed * (2 if config.interaction else 1)
    total = acc[..., lo: lo + NUM_COMPUTE_HEADS] + launch_cost
    if config.kernel_groups:
        assert group_cost is not None
        # a channel above zero is a dim the device holds (a planner's scaled state stays above zero)
        g = config.group_offset
        groups = (acc[..., g: g + KERNEL_GROUP_CHANNELS] > 1e-3).sum(dim=-1, keepdim=True)
        total = total + groups.to(acc.dtype) * group_cost
    # a bounded correction: on devices with more tables than any training record, the summed encodings
    # leave the training range and an unbounded head extrapolates wildly; the additive part does not
    b = config.correction_bound
    return b * torch.tanh(out / b) + torch.log(total) / log_scale


class StackedDeviceNets:
    """The device path (device MLP, compute head, additive head) of an ensemble's M networks of one
    architecture, their weights stacked so that one batched matmul per layer prices every member: a
    planner's step prices D candidate devices with every member, and five small matmuls and their
    elementwise ops cost more in calls than in arithmetic (rl on 856 tables x 128 devices: 856 steps). The
    same arithmetic as ``CostNet.device_forward`` (``device_input``, ``additive_output``), member by member;
    a snapshot of the weights (build it after training)."""

    def __init__(self, nets: list[CostNet]) -> None:
        self.config = nets[0].config
        if any(n.config != self.config for n in nets):
            raise AutoshardError("ensemble members differ in architecture; retrain the ensemble")

        def linears(net: CostNet) -> list[nn.Linear]:
            return [m for m in net.device_mlp.modules() if isinstance(m, nn.Linear)] + [net.compute_head]

        layers = [linears(n) for n in nets]
        with torch.no_grad():
            # (M, out, in) weights and (M, out, 1) biases: the devices are columns, h (M, in, N) -> w @ h + b.
            # Why columns: the compute head's two outputs as a row layout's last matmul dimension ran 3.4x
            # slower than as its first (AMD EPYC, 5 x 128 devices: 137 vs 40 us), the whole path 1.24x.
            depth = range(len(layers[0]))
            self.weights = [torch.stack([ls[k].weight for ls in layers]).contiguous() for k in depth]
            self.biases = [torch.stack([ls[k].bias for ls in layers])[:, :, None] for k in depth]

            def stacked(name: str) -> torch.Tensor | None:
                if not hasattr(nets[0], name):
                    return None
                return torch.stack([getattr(n, name) for n in nets])[:, None, :]

            # exp of the learned log costs, taken once (``additive_output`` takes the costs)
            launch_log, group_log = stacked("launch_log"), stacked("group_log")
            assert launch_log is not None or not self.config.additive
            self.launch_cost = None if launch_log is None else torch.exp(launch_log)
            self.group_cost = None if group_log is None else torch.exp(group_log)
            self.log_scale = torch.stack([n.log_scale for n in nets])[:, None, :]

    def forward(self, acc: torch.Tensor) -> torch.Tensor:
        """(..., M x acc_width) device states (member m's in its slice) -> (M, ..., 2) model space."""
        c = self.config
        lead = acc.shape[:-1]
        m = len(self.log_scale)
        x = acc.reshape(-1, m, c.acc_width).transpose(0, 1)  # (M, N, acc_width)
        h = device_input(c, x).transpose(1, 2)  # (M, in, N)
        last = len(self.weights) - 1
        for k, (w, b) in enumerate(zip(self.weights, self.biases)):
            h = torch.baddbmm(b, w, h)
            if k < last:  # every layer of the device MLP ends in a ReLU, the compute head does not
                h = h.relu_()  # in place: h is baddbmm's fresh result
        h = h.transpose(1, 2)  # (M, N, 2)
        if c.additive:
            assert self.launch_cost is not None
            h = additive_output(c, h, x, self.launch_cost, self.group_cost, self.log_scale)
        return h.reshape((m, *lead, NUM_COMPUTE_HEADS))


def without_subnormals(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A copy of a network's ``state`` with every subnormal float (below float32's smallest normal,
    1.2e-38, not 0) set to 0. Training leaves such weights (the shipped default: 330-1935 in each member's
    encoder, up to 39 in a device MLP), and x86 CPUs take a microcode assist on each subnormal operand
    (stop 47: one member's encoder ran 2.4x faster on 128 shards with subnormals flushed, the five stacked
    device MLPs 1.17x with them zeroed). Their products (under 1e-36) fall below the last bit of any sum
    they join, so no prediction moves."""
    out = {}
    for k, v in state.items():
        if v.is_floating_point():
            tiny = torch.finfo(v.dtype).tiny
            v = torch.where((v.abs() < tiny) & (v != 0), torch.zeros_like(v), v)
        out[k] = v
    return out


def segment_sum(values: torch.Tensor, segment: torch.Tensor, num_segments: int) -> torch.Tensor:
    """Sum rows of ``values`` (N, A) into ``num_segments`` rows by ``segment`` (N,) ids; empty segments
    are 0."""
    out = torch.zeros(num_segments, values.shape[1], dtype=values.dtype, device=values.device)
    return out.index_add_(0, segment, values)


def gather_sum(values: torch.Tensor, members: np.ndarray, owner: np.ndarray,
               num_segments: int) -> torch.Tensor:
    """(num_segments, A) sums of rows of ``values`` (G, A): segment ``owner[k]`` adds row ``members[k]``;
    empty segments are 0. ``owner`` non-decreasing (each segment's rows together) is summed as a sparse
    (segments x G) matrix times ``values``, each segment's rows added in their order, as ``segment_sum`` adds
    them, without the (N, A) copy of the gathered rows (a search planner's level: ~270k rows of 180 floats,
    0.19-0.46 s as a copy and an index_add against 0.05 s; docs/benchmarks.md, "Stop 51")."""
    if len(owner) and bool(np.all(owner[1:] >= owner[:-1])):
        crow = torch.from_numpy(np.searchsorted(owner, np.arange(num_segments + 1)))
        with warnings.catch_warnings():  # "sparse CSR support is in beta": the product is what we use
            warnings.simplefilter("ignore", UserWarning)
            rows = torch.sparse_csr_tensor(crow, torch.from_numpy(np.asarray(members, dtype=np.int64)),
                                           torch.ones(len(members), dtype=values.dtype),
                                           size=(num_segments, values.shape[0]))
            return rows @ values
    return segment_sum(values[torch.from_numpy(np.asarray(members, dtype=np.int64))],
                       torch.from_numpy(np.asarray(owner, dtype=np.int64)), num_segments)
