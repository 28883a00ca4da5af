"""Load a cost model by name or path, and the default one planners use when none is given.

The package ships a learned cost model (``autoshard/data/default_cost_model.pt``) trained on real kernel
timings of this project's CPU machine kind (see ``autoshard/data/DEFAULTS.md`` for the command and hardware);
``default_cost_model`` returns it, labelled with the hardware it describes, so ``autoshard plan`` works before
any profiling. For other hardware, batch size or precision, profile and train your own.

``resolve_cost_model`` is the model planners plan with: a model that reports a spread (a learned ensemble,
``LearnedCostModel.device_costs_spread``) is priced at mean + risk_k x spread (``costs.learned.risk``); any
other model (a single network, the analytical model) is returned as it is.
"""

from __future__ import annotations

import functools
import logging
from pathlib import Path

from autoshard.costs.analytical import AnalyticalCostModel
from autoshard.costs.base import CostModel

log = logging.getLogger(__name__)

SHIPPED_DIR = Path(__file__).resolve().parent.parent / "data"
SHIPPED_COST_MODEL = SHIPPED_DIR / "default_cost_model.pt"
"""Learned cost model (an ensemble of 5) trained on the committed AMD EPYC profiles (``profiles/amd-epyc``:
the broad, row-cut and wide-table ones; the command is in DEFAULTS.md)."""
SHIPPED_POLICY = SHIPPED_DIR / "default_policy.pt"
"""RL policy trained against SHIPPED_COST_MODEL on DLRM-20 (4) and production-40-8 train tasks
(DEFAULTS.md)."""


def load_cost_model(spec: str, allow_other_hardware: bool = False) -> CostModel:
    """``'analytical'`` gives the roofline estimator; anything else is a learned checkpoint path, refused when
    trained on other hardware unless allowed (where nothing is timed on this host, e.g. re-pricing archived
    runs). The real kernels (``'measured'``) are ``autoshard.pipeline.models.load_cost_model``'s."""
    if spec == "analytical":
        return AnalyticalCostModel()
    from autoshard.costs.learned import LearnedCostModel

    return LearnedCostModel.load(spec, allow_other_hardware=allow_other_hardware)


def load_recorded_model(spec: str | None) -> CostModel | None:
    """The cost model a checkpoint records it was trained against (a policy's ``cost_model.spec``), if that
    file is still there: the shipped model as ``default_cost_model`` loads it, on any host, since the user
    named no model and the shipped one is the default everywhere; any other checkpoint as
    ``load_cost_model`` does, refused on other hardware. None for ``'analytical'``, no spec or a missing
    file (the caller falls back to the default)."""
    if not spec or spec == "analytical" or not Path(spec).is_file():
        return None
    if Path(spec).resolve() == SHIPPED_COST_MODEL.resolve():  # spec is a file, so the shipped one is there
        return default_cost_model()
    return load_cost_model(spec)


@functools.lru_cache(maxsize=1)
def default_cost_model() -> CostModel:
    """The shipped learned model if the package carries it (on any host: it says which hardware it describes),
    else the roofline estimator."""
    if not SHIPPED_COST_MODEL.is_file():
        return AnalyticalCostModel()
    from autoshard.costs.learned import LearnedCostModel

    model = LearnedCostModel.load(SHIPPED_COST_MODEL, allow_other_hardware=True)
    log.info("using the shipped cost model, which describes %s", model.describe_hardware())
    return model


def describe_cost_model(model: CostModel) -> str:
    """One line naming a model and, for a learned one, the hardware and settings it was trained on (and the
    risk its devices are priced at, if any)."""
    describe = getattr(model, "describe_hardware", None)
    return f"{model.name} ({describe()})" if callable(describe) else model.name


def resolve_cost_model(model: CostModel | None, risk: object = None) -> CostModel:
    """The model to plan with: ``model`` (default: ``default_cost_model``), priced at mean + k x spread when
    it reports a spread (k: ``risk``, else its ``risk_k``; ``costs.learned.risk.risk_priced``)."""
    model = model if model is not None else default_cost_model()
    if risk is None and not callable(getattr(model, "device_costs_spread", None)):
        return model  # no spread: the model itself (the analytical model never imports the learned one)
    from autoshard.costs.learned.risk import risk_priced

    return risk_priced(model, risk)
