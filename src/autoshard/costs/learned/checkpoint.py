"""A ``LearnedCostModel`` on disk: its checkpoint (plain Python types and tensors only, so
``torch.load(weights_only=True)`` reads it), written atomically, and read back with every field checked
(a bad file is a one-line error, never a traceback).

``LearnedCostModel.to_checkpoint``, ``.save`` and ``.load`` call these; ``load_checkpoint`` is given the
model class to build (``build``), so this module does not import the model."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from autoshard import __version__
from autoshard.costs.analytical import AnalyticalCostModel
from autoshard.costs.comm import AlphaBeta
from autoshard.costs.learned.features import TargetScaler
from autoshard.costs.learned.network import CostNet, CostNetConfig, without_subnormals
from autoshard.costs.learned.support import Support
from autoshard.errors import AutoshardError
from autoshard.host import host_info
from autoshard.io import ARTEFACT_VERSION, atomic_write_bytes
from autoshard.tables.table import FeatureNormalizer

CHECKPOINT_KIND = "autoshard.cost_model"

FALLBACK_KEYS = ("fwd_launch_ms", "fwd_bytes_per_ms", "bwd_launch_ms", "bwd_bytes_per_ms")
"""The calibrated analytical fallback's constants, as stored in a checkpoint."""
FALLBACK_OPTIONAL_KEYS = ("fwd_shard_ms", "fwd_lookup_ns", "bwd_shard_ms", "bwd_lookup_ns")
"""Constants added later (per shard and per lookup); a checkpoint without them had them at 0."""


def checkpoint_of(model: Any) -> dict[str, Any]:
    """The checkpoint of a ``LearnedCostModel``: plain Python types and tensors only, so
    ``torch.load(weights_only=True)`` can read it."""
    ck: dict[str, Any] = {
        "kind": CHECKPOINT_KIND,
        "version": ARTEFACT_VERSION,
        "autoshard_version": __version__,
        "architecture": model.config.to_json(),
        "state_dict": {k: v.detach().clone() for k, v in model.net.state_dict().items()},
        "normalizer": model.normalizer.to_json(),
        "target_scaler": model.scaler.to_json(),
        "comm": model.comm.to_json(),
        "trained_on": _plain(model.trained_on),
        "info": _plain(model.info),
    }
    if model.ensemble_size > 1:
        ck["members"] = [{"state_dict": {k: v.detach().clone() for k, v in net.state_dict().items()},
                          "target_scaler": scaler.to_json()} for net, scaler in model.members[1:]]
    if model.support is not None:
        ck["support"] = _plain(model.support.to_json())
    if model.fallback is not None:
        ck["fallback"] = {**{k: float(getattr(model.fallback, k))
                             for k in FALLBACK_KEYS + FALLBACK_OPTIONAL_KEYS},
                          "rel_std": model.fallback_rel_std}
    if model.risk_k or model.has_spread:
        ck["risk_k"] = model.risk_k
    return ck


def save_checkpoint(model: Any, path: str | Path) -> None:
    """Write ``model``'s checkpoint to ``path`` atomically."""
    buf = io.BytesIO()
    torch.save(model.to_checkpoint(), buf)
    atomic_write_bytes(path, buf.getvalue())


def load_checkpoint(path: str | Path, build: Callable[..., Any], allow_other_hardware: bool = False) -> Any:
    """Load a checkpoint as ``build(...)`` (the ``LearnedCostModel`` constructor); refuse (one line) if it
    was trained on other hardware, unless allowed."""
    p = Path(path)
    if not p.is_file():
        raise AutoshardError(f"{p}: no such cost model file; train one with 'autoshard train-cost'")
    try:
        ck = torch.load(p, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - any unpickling failure means the same thing to the user
        raise AutoshardError(f"{p}: not a readable cost model checkpoint ({type(e).__name__}); "
                             "pass a file written by 'autoshard train-cost' or retrain it") from None
    if not isinstance(ck, dict) or ck.get("kind") != CHECKPOINT_KIND:
        raise AutoshardError(f"{p}: not an autoshard cost model; "
                             "pass a file written by 'autoshard train-cost'")
    if ck.get("version") != ARTEFACT_VERSION:
        raise AutoshardError(f"{p}: checkpoint version {ck.get('version')!r} unsupported; retrain it")
    try:
        config = CostNetConfig.from_json(ck["architecture"])
        net = CostNet(config)
        net.load_state_dict(without_subnormals(ck["state_dict"]))
        extra = []
        for m in ck.get("members", []):
            m_net = CostNet(config)
            m_net.load_state_dict(without_subnormals(m["state_dict"]))
            extra.append((m_net, TargetScaler.from_json(m["target_scaler"])))
        comm_model = AlphaBeta.from_json(ck["comm"])
        fb = ck.get("fallback")
        fallback = None if fb is None else AnalyticalCostModel(
            **{k: float(fb[k]) for k in FALLBACK_KEYS},
            **{k: float(fb.get(k, 0.0)) for k in FALLBACK_OPTIONAL_KEYS}, comm=comm_model,
            name="analytical-fitted")
        model = build(
            net, FeatureNormalizer.from_json(ck["normalizer"]),
            TargetScaler.from_json(ck["target_scaler"]), comm_model, ck["trained_on"], ck.get("info", {}),
            allow_other_hardware, extra_members=extra,
            support=Support.from_json(ck["support"]) if ck.get("support") is not None else None,
            fallback=fallback, fallback_rel_std=float(fb.get("rel_std", 0.0)) if fb else 0.0,
            risk_k=float(ck.get("risk_k", 0.0)))
    except (KeyError, RuntimeError, TypeError, ValueError, AutoshardError) as e:
        msg = str(e).splitlines()[0][:120]
        raise AutoshardError(f"{p}: cost model checkpoint is incomplete or inconsistent ({msg}); "
                             "retrain it") from None
    if not allow_other_hardware:
        model.check_host(host_info(str(model.trained_on.get("settings", {}).get("device", "cpu"))), str(p))
    return model


def _plain(obj: Any) -> Any:
    """Only the types ``torch.load(weights_only=True)`` accepts: str subclasses (e.g. torch's TorchVersion)
    become str, numpy scalars Python numbers, tuples lists."""
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if obj is None or type(obj) in (bool, int, float, str):
        return obj
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return float(obj)
    return str(obj.value) if hasattr(obj, "value") and isinstance(obj.value, str) else str(obj)
