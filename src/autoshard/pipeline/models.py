"""Cost models by name or path, including the real evaluator itself (``measured``).

The plain specs (``analytical``, a learned checkpoint) are ``autoshard.costs.loading``'s; ``measured`` times
every cost on this machine's kernels (``autoshard.hardware``), which the cost layer below does not reach.
"""

from __future__ import annotations

from autoshard.costs import loading
from autoshard.costs.base import CostModel
from autoshard.costs.comm import DEFAULT_COMM, AlphaBeta
from autoshard.hardware.evaluator import MeasuredCostModel
from autoshard.hardware.kernel import MeasureSettings

MEASURED_SPEC = "measured"
"""Plan with the real evaluator itself: every cost a planner asks for is timed on this machine's kernels, so
planning takes minutes: on 50 tables and 4 devices with ``--time-limit 2`` search took 51 s and ilp 118 s
(timing each table alone and in pairs), stop 81. ``measured:PATH`` adds a comm model file."""


def is_measured(spec: str) -> bool:
    """True for ``measured`` and ``measured:PATH``."""
    return spec == MEASURED_SPEC or spec.startswith(MEASURED_SPEC + ":")


def load_cost_model(spec: str) -> CostModel:
    """``'measured'`` (or ``'measured:comm_model.json'``) gives the real kernels with default measure
    settings; anything else goes to ``autoshard.costs.loading.load_cost_model`` (analytical, checkpoints)."""
    if is_measured(spec):
        comm_path = spec.partition(":")[2]
        return MeasuredCostModel(MeasureSettings(), AlphaBeta.load(comm_path) if comm_path else DEFAULT_COMM)
    return loading.load_cost_model(spec)
