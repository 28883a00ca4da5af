"""A profile's level (``hardware.profile_level``, ``autoshard profile-level``): its host's speed over another
profile's, measured by re-timing that profile's records here, and divided out when ``train-cost`` merges the
two (``merge_datasets``).

The profiles are REAL: small tables of the broad design timed on this machine's kernels (a few seconds).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from conftest import QUICK_MEASURE, SMALL_BROAD_DESIGN, profile_small

from autoshard.cli.main import main
from autoshard.errors import AutoshardError
from autoshard.hardware.profile_dataset import load_dataset, merge_datasets
from autoshard.hardware.profile_level import LEVEL_FILE, ProfileLevel, profile_key, read_level, write_level
from autoshard.hardware.profiler import ProfileConfig, profile

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def profiles(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("level") / "cpu"
    return profile_small(root / "reference", 8, 0), profile_small(root / "corner", 8, 1)


def _copy(src: Path, dst: Path) -> Path:
    dst.mkdir(parents=True)
    for f in src.iterdir():
        if f.is_file() and f.name != LEVEL_FILE:
            (dst / f.name).write_bytes(f.read_bytes())
    return dst


def test_profile_level_cli_retimes_the_reference_and_writes_the_level(profiles, capsys):
    reference, corner = profiles
    argv = ["profile-level", "--data", str(corner), "--reference", str(reference), "--records", "3"]
    assert main(argv) == 0
    printed = capsys.readouterr()
    assert "this host / the profile's" in printed.out and "3 records" in printed.out
    assert "divides" in printed.err
    level = read_level(corner)
    assert level is not None and level.reference == "cpu/reference" == profile_key(reference)
    assert level.fwd > 0 and level.bwd > 0 and level.scale["records"] == 3
    assert level.refers_to(str(reference) + "/") and not level.refers_to(corner)
    assert read_level(reference) is None  # the reference is only read


def test_a_merge_divides_the_leveled_profile_by_its_level_and_leaves_the_rest(profiles, tmp_path, caplog):
    reference, corner = profiles
    leveled = _copy(corner, tmp_path / "cpu" / "corner")
    twin = _copy(reference, tmp_path / "cpu" / "reference")  # the same profile elsewhere: the key matches
    write_level(leveled, ProfileLevel(profile_key(reference), 2.0, 0.5, {"why": "test"}))
    raw = load_dataset(leveled)
    assert raw.level is not None and raw.level.fwd == 2.0
    assert load_dataset(reference).level is None
    merged = merge_datasets([load_dataset(twin), raw], [str(twin), str(leveled)])
    by_id = {r.sample_id: r for r in merged.records}
    ref_records = load_dataset(reference).records
    assert len(merged.records) == len(ref_records) + len(raw.records)
    for r in ref_records:  # the reference as measured
        assert (by_id[r.sample_id].fwd_ms, by_id[r.sample_id].bwd_ms) == (r.fwd_ms, r.bwd_ms)
    for r in raw.records:  # the leveled profile at the reference's speed
        assert by_id[r.sample_id].fwd_ms == pytest.approx(r.fwd_ms / 2.0)
        assert by_id[r.sample_id].bwd_ms == pytest.approx(r.bwd_ms * 2.0)
        assert by_id[r.sample_id].tables == r.tables
    # alone, or merged without its reference, it is used as measured (the latter said)
    assert [r.fwd_ms for r in load_dataset(leveled).records] == [r.fwd_ms for r in raw.records]
    stranger = _copy(reference, tmp_path / "other" / "place")
    with caplog.at_level(logging.WARNING):
        alone = merge_datasets([load_dataset(stranger), raw], [str(stranger), str(leveled)])
    assert "not merged with it" in caplog.text
    assert sorted(r.fwd_ms for r in alone.records if r.sample_id in {x.sample_id for x in raw.records}) == \
        sorted(r.fwd_ms for r in raw.records)


def test_growing_a_leveled_profile_warns_that_its_level_predates_the_new_records(profiles, tmp_path, caplog):
    reference, corner = profiles
    grown = _copy(corner, tmp_path / "cpu" / "grown")
    write_level(grown, ProfileLevel(profile_key(reference), 1.2, 1.1, {"why": "test"}))

    def grow(samples: int) -> list:
        config = ProfileConfig(samples=samples, seed=1, settings=QUICK_MEASURE, design=SMALL_BROAD_DESIGN)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="autoshard.hardware.profiler"):
            return list(profile(None, grown, config))

    assert grow(8) == [] and "profile-level" not in caplog.text  # nothing to add: the level still holds
    assert len(grow(10)) == 2
    assert "measured before these 2 samples" in caplog.text and "<cpu/reference>" in caplog.text
    assert "re-run `autoshard profile-level" in caplog.text
    assert len(load_dataset(grown).records) == 10 and read_level(grown).fwd == 1.2  # warned, not changed


def test_profile_level_refuses_bad_input_in_one_line(profiles, tmp_path, capsys):
    reference, corner = profiles
    other_cpu = _copy(corner, tmp_path / "cpu" / "elsewhere")
    from autoshard.host import host_info

    here = json.dumps(str(host_info()["cpu"]))
    for f in other_cpu.glob("shards-*.jsonl"):
        f.write_text(f.read_text().replace(here, json.dumps("Another CPU")))
    for argv, needle in (
            (["--data", str(corner), "--reference", str(corner)], "the same profile"),
            (["--data", str(tmp_path / "none"), "--reference", str(reference)], "no such dataset directory"),
            (["--data", str(corner), "--reference", str(tmp_path)], "no shards-*.jsonl or packed records"),
            (["--data", str(corner), "--reference", str(reference), "--records", "1"], "at least 2"),
            (["--data", str(other_cpu), "--reference", str(reference)], "Another CPU"),
    ):
        rc = main(["profile-level", *argv])
        err = capsys.readouterr().err
        assert rc != 0 and needle in err and "Traceback" not in err, err
        assert len(err.strip().splitlines()) == 1, err
    assert not (other_cpu / LEVEL_FILE).exists() and not (reference / LEVEL_FILE).exists()
    broken = _copy(corner, tmp_path / "cpu" / "broken")
    half = {"kind": "autoshard.profile-level", "version": 1, "fwd": 1.0}  # no reference, no bwd
    (broken / LEVEL_FILE).write_text(json.dumps(half))
    with pytest.raises(AutoshardError, match="not a profile level"):
        load_dataset(broken)
    with pytest.raises(AutoshardError, match="must be positive"):
        ProfileLevel("a/b", 0.0, 1.0, {})
