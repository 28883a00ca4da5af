"""The committed broad profiles (profiles/<cpu>/broad-seed0, one per CPU this machine kind comes with, grown
over sittings, and the others of the broad design: a held-out seed, stop 30's row-cut samples, stop 31's
samples timed on a lent GPU): readable, every record is the broad design's sample of its id (so anyone can
resume it and retrain from it), and every record was measured on the machine its directory names."""

from __future__ import annotations

from pathlib import Path

import pytest

from autoshard.hardware.profile_records import sample_index
from autoshard.hardware.profiler import BroadDesign, broad_sample, load_dataset
from autoshard.host import hardware_slug

PROFILES = sorted((Path(__file__).resolve().parents[1] / "profiles").glob("*/broad-*"))


@pytest.mark.skipif(not PROFILES, reason="no committed broad profile in this checkout")
@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_committed_profile_records_are_the_designs_samples(profile: Path) -> None:
    data = load_dataset(profile)
    settings = data.settings["settings"]
    # 2 s a sample on a CPU; the GPU's kernels take a fraction of a millisecond (stop 31: 0.3 s)
    budget_ms = 2000.0 if settings["device"] == "cpu" else 300.0
    assert data.design == "broad" and settings["time_budget_ms"] == budget_ms
    assert len(data.records) >= 100
    design = BroadDesign.from_json(data.settings["design"])
    for rec in data.records[:: max(1, len(data.records) // 25)]:
        seed, index = sample_index(rec.sample_id)
        sample = broad_sample(design, seed, index, bins=False)
        assert rec.dims == sample.dims and rec.batch_size == sample.batch_size
        assert rec.row_ranges == sample.row_ranges  # a row-cut sample's shards are the design's
        assert [t.dim for t in rec.own_tables()] == [t.dim for t in sample.tables]
        assert [t.rows for t in rec.own_tables()] == list(rec.real_rows)
        assert rec.fwd_ms > 0 and rec.bwd_ms > 0 and rec.host.get("cpu")
    slugs = {hardware_slug(r.host) for r in data.records}
    if settings["device"] == "cpu":  # the directory is the CPU's slug
        assert slugs == {profile.parent.name}
    else:  # the GPU's model (nvidia-h100 for nvidia-h100-80gb-hbm3)
        assert len(slugs) == 1 and slugs.pop().startswith(profile.parent.name + "-")
