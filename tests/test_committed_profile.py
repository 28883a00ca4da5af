"""The committed broad profile (profiles/broad-seed0, grown over sittings): readable, and every record is the
broad design's sample of its id, so anyone can resume it and retrain from it."""

from __future__ import annotations

from pathlib import Path

import pytest

from autoshard.hardware.profile_records import sample_index
from autoshard.hardware.profiler import BroadDesign, broad_sample, load_dataset

PROFILE = Path(__file__).resolve().parents[1] / "profiles" / "broad-seed0"


@pytest.mark.skipif(not PROFILE.is_dir(), reason="no committed broad profile in this checkout")
def test_committed_profile_records_are_the_designs_samples() -> None:
    data = load_dataset(PROFILE)
    assert data.design == "broad" and data.settings["settings"]["time_budget_ms"] == 2000.0
    assert len(data.records) >= 100
    design = BroadDesign.from_json(data.settings["design"])
    for rec in data.records[:: max(1, len(data.records) // 25)]:
        seed, index = sample_index(rec.sample_id)
        sample = broad_sample(design, seed, index, bins=False)
        assert rec.dims == sample.dims and rec.batch_size == sample.batch_size
        assert [t.dim for t in rec.own_tables()] == [t.dim for t in sample.tables]
        assert [t.rows for t in rec.own_tables()] == list(rec.real_rows)
        assert rec.fwd_ms > 0 and rec.bwd_ms > 0 and rec.host.get("cpu")
