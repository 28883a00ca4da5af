"""What a learned cost model says of devices: the ensemble's mean and spread, and which devices the
were outside the training support (shared by the model and its evaluation)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Prediction:
    """What the model says of N devices: fwd/bwd/comm mean and spread, the spread of fwd + bwd, and which
    devices the fallback priced."""

    mean: np.ndarray
    """(..., 3) ms."""
    std: np.ndarray
    """(..., 3) ms; comm's is 0 (a closed form, not learned)."""
    total_std: np.ndarray
    """(...) ms: the members' spread of fwd + bwd (not the sum of the two spreads: they are correlated)."""
    fallback: np.ndarray
    """(...) bool: outside the training support, so priced by the model's hand-over
    (``LearnedCostModel.handover``)."""
