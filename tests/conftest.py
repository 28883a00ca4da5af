"""Shared fixtures: small deterministic tables and tasks built through the public API."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import settings

# Property tests draw the same examples on every run (the suite is deterministic; a failure reproduces from
# the test alone, not from a local example database). Counterexamples found while developing are pinned
# with @example where they test.
settings.register_profile("deterministic", derandomize=True, database=None)
settings.load_profile("deterministic")

from pathlib import Path

from autoshard.hardware.kernel import MeasureSettings
from autoshard.hardware.profiler import BroadDesign, ProfileConfig, profile
from autoshard.tables import LookupKind, LookupSpec, Table, TablePool
from autoshard.tasks import Task

QUICK_MEASURE = MeasureSettings(warmup=1, repeats=3, max_tries=1, flush_cache=False)
"""Fast real timings for tests that profile (a few seconds for a few dozen small samples)."""
SMALL_BROAD_DESIGN = BroadDesign(dims=(4, 32), rows=(100, 5000), pooling=(0.5, 20.0),
                                 tables_per_device=(1, 6), batch_sizes=(32, 128), stats_batch=64)
"""A broad design of small tables: 1-6 a device, so a device of 7+ tables is outside a model's support."""


def profile_small(out: Path, samples: int, seed: int) -> Path:
    """A REAL broad profile of ``samples`` small samples timed on this machine, in ``out``."""
    for _ in profile(None, out, ProfileConfig(samples=samples, seed=seed, settings=QUICK_MEASURE,
                                              design=SMALL_BROAD_DESIGN)):
        pass
    return out


def make_tables(n: int, seed: int = 0, dims: tuple[int, ...] = (16,), max_rows: int = 10**6) -> list[Table]:
    """``n`` DLRM-like tables with a power-law lookup distribution (small enough to measure)."""
    rng = np.random.default_rng(seed)
    tables = []
    for i in range(n):
        tables.append(Table(
            name=f"t{i}",
            dim=int(rng.choice(dims)),
            rows=int(rng.integers(100, max_rows)),
            pooling_factor=float(rng.uniform(0.5, 40.0)),
            lookups=LookupSpec(LookupKind.POWER_LAW, seed=int(seed * 1000 + i),
                               alpha=float(rng.uniform(0.6, 1.4))),
        ))
    return tables


@pytest.fixture
def one_thread():
    """Run a test at one torch thread (small networks run fastest so, and the machine is shared), then
    restore."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def tables() -> list[Table]:
    return make_tables(20)


@pytest.fixture
def task(tables: list[Table]) -> Task:
    return Task(tables=tuple(tables), device_memory=(10**9,) * 4, name="fixture")


@pytest.fixture
def tables_file(tmp_path, tables) -> str:
    path = str(tmp_path / "tables.json")
    TablePool.from_tables(tables).save(path)
    return path


def load_script(path: Path):
    """A benchmarks/ script as a module (they are scripts, not a package)."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location(f"_{path.stem}_under_test", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(spec.name, None)
    return module
