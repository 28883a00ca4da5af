"""Errors a user can act on.

Every error raised for bad input or an impossible request is an :class:`AutoshardError` whose message is one
line saying what is wrong and how to fix it. The CLI prints that line and exits non-zero, never a traceback.
"""

from __future__ import annotations


class AutoshardError(Exception):
    """Bad input or an impossible request; the message is one actionable line."""


class InfeasibleError(AutoshardError):
    """No placement fits the devices' memory."""


class PlanError(AutoshardError):
    """A plan does not satisfy its task (a table missing or twice, dims that don't add up, memory over)."""
