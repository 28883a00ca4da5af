"""The placement policy: a permutation-equivariant scorer of devices, its checkpoint, and episode decoding.

Every device is encoded by the same MLP from its observation; a context of the mean and max of all device
encodings (symmetric in the devices) and an encoding of the table being placed join each device's encoding,
and a shared head scores it. A softmax over the unmasked devices gives the action distribution. Permuting the
devices permutes the scores, so one network serves any number of devices and tables.
"""

from __future__ import annotations

import io
import logging
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from autoshard.errors import AutoshardError
from autoshard.io import ARTEFACT_VERSION, atomic_write_bytes
from autoshard.planners.rl.env import DEVICE_FEATURES, TABLE_FEATURES, Observation, PlacementEnv
from autoshard.tables.table import FeatureNormalizer

logger = logging.getLogger(__name__)

CHECKPOINT_KIND = "autoshard.policy"

MASKED_LOGIT = -1e9
"""Logit of a masked device: exp() underflows to exactly 0, and unlike -inf it keeps entropy terms finite."""


@dataclass(frozen=True)
class PolicyConfig:
    """Shape of the network (stored in the checkpoint so it can be rebuilt)."""

    hidden: int = 64
    """Width of every hidden layer."""
    device_features: int = DEVICE_FEATURES
    """Length of a device's observation (checked against the environment on load)."""
    table_features: int = TABLE_FEATURES
    """Length of the table observation."""


class PlacementPolicy(nn.Module):
    """Scores devices: logits (..., D) from device obs (..., D, Fd), table obs (..., Ft) and mask (..., D)."""

    def __init__(self, config: PolicyConfig = PolicyConfig()) -> None:
        super().__init__()
        h = config.hidden
        self.config = config
        self.device_encoder = nn.Sequential(nn.Linear(config.device_features, h), nn.ReLU(),
                                            nn.Linear(h, h), nn.ReLU())
        self.table_encoder = nn.Sequential(nn.Linear(config.table_features, h), nn.ReLU())
        self.head = nn.Sequential(nn.Linear(4 * h, h), nn.ReLU(), nn.Linear(h, 1))

    def forward(self, devices: torch.Tensor, table: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        enc = self.device_encoder(devices)
        ctx = torch.cat([enc.mean(dim=-2), enc.amax(dim=-2), self.table_encoder(table)], dim=-1)
        # head[0] applied to [enc, mean, max, table] per device, with the shared part computed once per state
        # instead of once per device (the same function as concatenating, ~2x faster for 128 devices).
        first: nn.Linear = self.head[0]
        h = enc.shape[-1]
        w = first.weight
        hidden = enc @ w[:, :h].T + (ctx @ w[:, h:].T + first.bias).unsqueeze(-2)
        logits = self.head[2](self.head[1](hidden)).squeeze(-1)
        return logits.masked_fill(~mask, MASKED_LOGIT)


class PolicyScorer:
    """``PlacementPolicy.forward`` on a snapshot of a network's weights, for decoding episodes: the same
    tensor ops in the same order (bit-identical logits), without the nn.Module calls around them. Why: an
    episode runs the policy once per table on tensors of a few hundred rows, where the modules' call overhead
    was a third of its time (rl on 856 tables x 128 devices, AMD EPYC: the policy's share of a greedy episode
    0.31-0.41 s as modules, 0.21-0.23 s as this; docs/benchmarks.md, "Stop 50"). Build it after training:
    later weight updates do not reach it."""

    def __init__(self, net: PlacementPolicy) -> None:
        p = {k: v.detach() for k, v in net.named_parameters()}
        h = net.config.hidden
        self._device = [(p["device_encoder.0.weight"], p["device_encoder.0.bias"]),
                        (p["device_encoder.2.weight"], p["device_encoder.2.bias"])]
        self._table = (p["table_encoder.0.weight"], p["table_encoder.0.bias"])
        w = p["head.0.weight"]
        # the same views of head[0]'s weight that ``forward`` takes
        self._own, self._shared, self._bias = w[:, :h].T, w[:, h:].T, p["head.0.bias"]
        self._out = (p["head.2.weight"], p["head.2.bias"])

    @torch.no_grad()
    def __call__(self, devices: torch.Tensor, table: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        # ReLUs in place: every input is a fresh result of the op before
        linear = nn.functional.linear
        enc = devices
        for w, b in self._device:
            enc = linear(enc, w, b).relu_()
        ctx = torch.cat([enc.mean(dim=-2), enc.amax(dim=-2), linear(table, *self._table).relu_()], dim=-1)
        hidden = enc @ self._own + (ctx @ self._shared + self._bias).unsqueeze(-2)
        logits = linear(hidden.relu_(), *self._out).squeeze(-1)
        return logits.masked_fill(~mask, MASKED_LOGIT)


def obs_tensors(obs: Observation) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return torch.from_numpy(obs.devices), torch.from_numpy(obs.table), torch.from_numpy(obs.mask)


@dataclass
class Rollout:
    """A finished batch of episodes of one task, with what the loss needs to replay them."""

    env: PlacementEnv
    devices: np.ndarray
    """(T, B, D, Fd) device observations per step."""
    tables: np.ndarray
    """(T, B, Ft)"""
    masks: np.ndarray
    """(T, B, D)"""
    actions: np.ndarray
    """(T, B)"""
    forced: np.ndarray
    """(T, B) steps of failed episodes (excluded from the loss)."""

    @property
    def plan_ms(self) -> np.ndarray:
        return self.env.plan_costs()


@torch.no_grad()
def run_episodes(net: PlacementPolicy, env: PlacementEnv, rng: np.random.Generator | None,
                 greedy_first: int = 0, record: bool = False) -> Rollout:
    """Run every episode of ``env`` to the end. Episodes ``< greedy_first`` take the most probable device,
    the others sample (Gumbel-max with ``rng``); ``record`` keeps the observations for a training loss."""
    obs: Observation | None = env.reset()
    score = PolicyScorer(net)
    b = env.num_envs
    if greedy_first < b and rng is None:
        raise AutoshardError("sampling episodes need a random generator")
    keep: dict[str, list[np.ndarray]] = {"devices": [], "tables": [], "masks": [], "actions": [],
                                         "forced": []}
    while obs is not None:
        logits = score(*obs_tensors(obs)).numpy().astype(np.float64)
        if greedy_first < b:
            logits[greedy_first:] += rng.gumbel(size=logits[greedy_first:].shape)
        actions = logits.argmax(axis=1)
        if record:
            for k, v in (("devices", obs.devices), ("tables", obs.table), ("masks", obs.mask),
                         ("actions", actions), ("forced", obs.forced)):
                keep[k].append(v)
        obs = env.step(actions)
    if not record:
        return Rollout(env, *(np.empty(0) for _ in range(5)))
    return Rollout(env, *(np.stack(keep[k]) for k in ("devices", "tables", "masks", "actions", "forced")))


@dataclass
class TrainedPolicy:
    """A network with everything needed to use it on new tasks: the normaliser its features were made with,
    the cost model it was trained against, its training settings and metrics."""

    net: PlacementPolicy
    normalizer: FeatureNormalizer
    cost_model: dict[str, Any] = field(default_factory=dict)
    """What it was trained against: name, spec (path or 'analytical'), hardware if the model records it."""
    train_config: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    """Training history (per evaluation: iteration, train cost, eval ratio to the best heuristic)."""
    state: dict[str, Any] = field(default_factory=dict)
    """Resume state: iteration reached and optimizer state."""

    def to_checkpoint(self) -> dict[str, Any]:
        return {
            "kind": CHECKPOINT_KIND,
            "version": ARTEFACT_VERSION,
            "torch_version": str(torch.__version__),
            "policy_config": asdict(self.net.config),
            "state_dict": self.net.state_dict(),
            "normalizer": self.normalizer.to_json(),
            "cost_model": dict(self.cost_model),
            "train_config": dict(self.train_config),
            "metrics": dict(self.metrics),
            "state": dict(self.state),
        }

    def save(self, path: str) -> None:
        """Atomically write the checkpoint (readers see the old file or the whole new one)."""
        buf = io.BytesIO()
        torch.save(self.to_checkpoint(), buf)
        atomic_write_bytes(path, buf.getvalue())

    @staticmethod
    def load(path: str) -> TrainedPolicy:
        try:
            ck = torch.load(path, map_location="cpu", weights_only=True)
        except FileNotFoundError:
            raise AutoshardError(f"{path}: no such policy file; train one with 'autoshard train-policy'") \
                from None
        except Exception as e:  # noqa: BLE001 -- torch raises many types for a non-checkpoint file
            raise AutoshardError(f"{path}: not a readable policy checkpoint ({type(e).__name__}); "
                                 "train one with 'autoshard train-policy'") from None
        if not isinstance(ck, dict) or ck.get("kind") != CHECKPOINT_KIND:
            raise AutoshardError(f"{path}: not a policy checkpoint; train one with 'autoshard train-policy'")
        if ck.get("version") != ARTEFACT_VERSION:
            raise AutoshardError(f"{path}: policy version {ck.get('version')!r} is not supported "
                                 f"(expected {ARTEFACT_VERSION}); retrain it")
        try:
            config = PolicyConfig(**ck["policy_config"])
            if (config.device_features, config.table_features) != (DEVICE_FEATURES, TABLE_FEATURES):
                raise AutoshardError(f"{path}: policy was trained on other observation features; retrain it")
            net = PlacementPolicy(config)
            net.load_state_dict(ck["state_dict"])
            normalizer = FeatureNormalizer.from_json(ck["normalizer"])
        except (KeyError, TypeError, ValueError, RuntimeError) as e:  # a field missing, of another shape
            raise AutoshardError(f"{path}: a broken policy checkpoint ({type(e).__name__}); retrain it with "
                                 "'autoshard train-policy'") from None
        net.eval()
        return TrainedPolicy(net, normalizer, ck.get("cost_model", {}),
                             ck.get("train_config", {}), ck.get("metrics", {}), ck.get("state", {}))
