"""Python's cyclic garbage collector paused while a planner runs.

Why: a full collection (generation 2) walks every live object, about 170,000 once torch and a task of 856
tables are loaded, and took 83 ms on the AMD EPYC host; it comes every few plans, whenever enough objects
have survived the younger generations, so it landed inside one plan in three or four of rl's 1.3-1.8 s plans
of 856 tables onto 128 devices (docs/benchmarks.md, "Stop 50"). A plan makes little cyclic garbage (its
arrays, tensors and shard lists are freed by reference counting), and what it makes is collected after it.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused_collection() -> Iterator[None]:
    """Run the block with the cyclic garbage collector off, restoring the caller's setting after (also on
    error); reference counting frees memory as usual."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
