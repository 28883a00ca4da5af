"""How many torch threads the small-tensor work runs on: planning with a learned model, training the networks.

Why one: that work is thousands of calls on tensors of a few hundred rows, where a second thread buys little
arithmetic and costs a hand-off per call, and on a shared 2-vCPU host two threads spin against each other
whenever the other vCPU is busy. rl planning 856 tables onto 128 devices beside one spinning process took
6.4-7.9 s at two threads and 1.3-1.4 s at one; idle, 1.23-1.30 s at two and 1.35-1.39 s at one
(``benchmarks/plan_threads.py``; beside a bench's kernel timing 9-40 s at two: docs/benchmarks.md, "Stop 48");
20 iterations of the quick suite's policy training took 7.6 s at one and 20.2 s at two (8.3 s at two, 9.5 s
at one, on an idle host; stop 27 saw a bench's policy stage take 385 s instead of 42 s beside an analysis;
``benchmarks/policy_threads.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

SMALL_WORK_THREADS = 1
"""Torch threads for planning and for training the cost model and the policy."""


@contextmanager
def torch_threads(n: int = SMALL_WORK_THREADS) -> Iterator[None]:
    """Run the block on ``n`` torch intra-op threads, restoring the caller's setting after (also on error)."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)
