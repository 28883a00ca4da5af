"""The broad profiling design (``autoshard profile --design broad``): space-filling, stratified samples of
tables generated per sample; records with real and kept rows; resume; old datasets still load."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
import pytest

from autoshard.cli.main import main
from autoshard.errors import AutoshardError
from autoshard.hardware import profile_design as profiler
from autoshard.hardware.kernel import MeasureSettings
from autoshard.hardware.profiler import (
    BroadDesign,
    CostRecord,
    ProfileConfig,
    broad_sample,
    load_dataset,
    profile,
    tables_strata,
)
from autoshard.plan import COLUMN_SHARD_MULTIPLE

QUICK = MeasureSettings(warmup=0, repeats=2, max_tries=1, max_cv=100.0, flush_cache=False)
"""Timing settings of the tests: a few ms a sample."""

TINY = BroadDesign(dims=(4, 16), rows=(100, 3000), pooling=(0.0, 6.0), tables_per_device=(1, 5),
                   batch_sizes=(16, 48), stats_batch=32)
"""A design small enough to profile in a test (the default one is the real campaign's)."""

TINY_ARGS = ["--design", "broad", "--dims", "4:16", "--rows", "100:3000", "--pooling", "0:6",
             "--tables-per-device", "1:5", "--batch-sizes", "16:48", "--stats-batch", "32", "--repeats", "2",
             "--warmup", "0", "--max-cv", "100", "--max-tries", "1", "--no-flush"]


def _ids(costs: Path) -> list[str]:
    return [json.loads(line)["sample_id"] for p in sorted(costs.glob("shards-*.jsonl"))
            for line in p.read_text().splitlines() if line.strip()]


def test_strata_cut_to_the_range():
    assert tables_strata(1, 40) == ((1, 1), (2, 3), (4, 6), (7, 10), (11, 16), (17, 24), (25, 32), (33, 40))
    assert tables_strata(3, 12) == ((3, 3), (4, 6), (7, 10), (11, 12))
    assert tables_strata(5, 5) == ((5, 5),)
    assert tables_strata(40, 50)[-1] == (49, 50)


def test_default_design_covers_every_stratum_and_spans_dims_4_to_256():
    design = BroadDesign()
    strata = design.strata
    samples = [broad_sample(design, 0, i, bins=False) for i in range(16 * len(strata))]
    # every window of len(strata) consecutive samples holds one sample of each stratum
    for lo in range(0, len(samples), len(strata)):
        assert sorted(s.stratum for s in samples[lo:lo + len(strata)]) == list(range(len(strata)))
    for s in samples:
        first, last = strata[s.stratum]
        assert first <= len(s.tables) <= last and len(s.dims) == len(s.tables)
        assert 512 <= s.batch_size <= 65536
        for t, d in zip(s.tables, s.dims):
            assert t.dim % COLUMN_SHARD_MULTIPLE == 0 and d % COLUMN_SHARD_MULTIPLE == 0 and 0 < d <= t.dim
            assert 100 <= t.rows <= 10**8 and 0.0 <= t.pooling_factor <= 200.0
            assert t.lookups is not None and 0.0 <= t.lookups.alpha <= 2.0
    dims = [t.dim for s in samples for t in s.tables]
    assert min(dims) == 4 and max(dims) == 256
    assert len({t.dim for s in samples for t in s.tables}) > 40  # many dims, not a few values
    assert sum(d < t.dim for s in samples for t, d in zip(s.tables, s.dims)) > 0  # column shards
    assert {s.precision.value for s in samples} == {"fp32", "fp16"}
    rows = np.log10([t.rows for s in samples for t in s.tables])
    assert rows.min() < 2.5 and rows.max() > 7.5
    # space-filling: every decade of rows and every octave of dims is well populated
    assert np.histogram(rows, bins=6, range=(2, 8))[0].min() > 0.1 * len(rows) / 6
    assert np.histogram(np.log2(dims), bins=6, range=(2, 8))[0].min() > 0.1 * len(dims) / 6
    # names are unique across samples: the tables are generated per sample
    names = [t.name for s in samples for t in s.tables]
    assert len(names) == len(set(names))


def test_samples_are_deterministic_and_do_not_depend_on_the_profile_size():
    a = broad_sample(TINY, 3, 41, bins=False)
    profiler._SAMPLERS.clear()  # a fresh process: sample 41 alone, no earlier samples generated
    assert broad_sample(TINY, 3, 41, bins=False) == a
    assert broad_sample(TINY, 4, 41, bins=False) != a
    with_bins = broad_sample(TINY, 3, 41)
    assert [t.name for t in with_bins.tables] == [t.name for t in a.tables]
    assert all(abs(sum(t.access_bins) - 1.0) < 1e-9 for t in with_bins.tables if t.pooling_factor > 0.5)


def test_bad_designs_are_one_line_errors():
    for kw, match in [({"dims": (3, 16)}, "multiples of 4"), ({"rows": (10, 5)}, "low <= high"),
                      ({"precisions": ("fp8",)}, "precision"), ({"column_share": 2.0}, "column share"),
                      ({"vocab_log_fraction": (-1.0, 1.0)}, "vocab")]:
        with pytest.raises(AutoshardError, match=match):
            BroadDesign(**kw)
    assert BroadDesign.from_json(TINY.to_json()) == TINY


def test_broad_records_hold_real_and_kept_rows_and_their_own_tables(tmp_path: Path):
    costs = tmp_path / "costs"
    settings = MeasureSettings(**{**QUICK.to_json(), "rows_cap": 500})
    config = ProfileConfig(samples=6, seed=0, settings=settings, design=TINY)
    recs = list(profile(None, costs, config))
    assert not (costs / "tables.json").exists()
    data = load_dataset(costs)
    assert data.design == "broad" and [r.sample_id for r in data.records] == [f"0-{i}" for i in range(6)]
    pool = data.pool.by_name()
    capped = 0
    for r, sample in zip(data.records, (broad_sample(TINY, 0, i) for i in range(6))):
        assert r == next(x for x in recs if x.sample_id == r.sample_id)
        assert list(r.tables) == [t.name for t in sample.tables] and r.dims == sample.dims
        assert r.real_rows == tuple(t.rows for t in sample.tables)
        assert r.rows == tuple(min(n, 500) for n in r.real_rows)  # kept for timing: min(rows, rows_cap)
        capped += sum(k < n for k, n in zip(r.rows, r.real_rows))
        assert r.batch_size == sample.batch_size and r.settings["precision"] == sample.precision.value
        assert r.own_tables() == sample.tables and all(pool[t.name] == t for t in sample.tables)
        assert CostRecord.from_json(r.to_json()) == r
        task, shards = data.task_of(r)
        assert task.batch_size == r.batch_size and task.precision.value == r.settings["precision"]
        assert [task.tables[s.table].rows for s in shards] == list(r.real_rows)  # the model sees real rows
    assert capped > 0
    with pytest.raises(AutoshardError, match="generates its own tables"):
        list(profile(data.pool, costs, config))


def test_broad_profile_resumes_after_an_interruption_without_duplicates(tmp_path: Path):
    costs = tmp_path / "costs"
    config = ProfileConfig(samples=9, seed=5, settings=QUICK, design=TINY)
    first = []
    for rec in profile(None, costs, config):  # interrupted after 4 samples (each record is on disk first)
        first.append(rec.sample_id)
        if len(first) == 4:
            break
    with open(costs / "shards-rank0.jsonl", "a") as f:  # and a torn line from the crash
        f.write('{"sample_id":"5-99","tab')
    again = [rec.sample_id for rec in profile(None, costs, config)]
    assert again == [f"5-{i}" for i in range(4, 9)]  # only the missing ones are measured
    ids = _ids(costs)
    assert ids == first + again and len(set(ids)) == 9
    data = load_dataset(costs)
    assert [r.sample_id for r in data.records] == [f"5-{i}" for i in range(9)]
    for i, r in enumerate(data.records):  # the resumed samples are the design's, not shifted
        assert list(r.tables) == [t.name for t in broad_sample(TINY, 5, i, bins=False).tables]


def test_cli_broad_profile_resume_and_errors(tmp_path: Path, capsys):
    costs = tmp_path / "costs"
    assert main(["profile", "--samples", "3", "-o", str(costs), *TINY_ARGS]) == 0
    assert main(["profile", "--samples", "5", "-o", str(costs), *TINY_ARGS]) == 0  # grow: resume
    assert sorted(_ids(costs)) == [f"0-{i}" for i in range(5)]
    manifest = json.loads((costs / "profile.json").read_text())
    assert manifest["design"] == TINY.to_json()
    capsys.readouterr()
    cases = [
        (["--samples", "6", "-o", str(costs), *TINY_ARGS, "--dims", "4:32"], "other settings (design.dims)"),
        # a profile of the aligned axes (every one before stop 95) resumes only with them, and the error
        # names the key
        (["--samples", "6", "-o", str(costs), *TINY_ARGS, "--sobol-axes", "aligned"], "design.sobol_axes"),
        (["--samples", "1", "-o", str(tmp_path / "b"), *TINY_ARGS, "--batch-size", "64"], "--batch-size"),
        (["--samples", "1", "-o", str(tmp_path / "c"), *TINY_ARGS, "--dims", "4:x"], "--dims"),
        (["--samples", "1", "-o", str(tmp_path / "d")], "--tables is required"),
    ]
    for argv, match in cases:
        assert main(["profile", *argv]) == 2
        err = capsys.readouterr().err.strip()
        assert match in err and "\n" not in err


def test_records_without_the_new_fields_still_load(tmp_path: Path):
    """A dataset written before real_rows/table_specs (pool design): same records, same pool."""
    from autoshard.tables import LookupKind, LookupSpec, Table, TablePool

    pool = TablePool.from_tables([Table(f"t{i}", 8, 300 + i, 2.0, lookups=LookupSpec(LookupKind.POWER_LAW))
                                  for i in range(3)])
    costs = tmp_path / "costs"
    config = ProfileConfig(samples=3, max_tables=2, batch_size=16, settings=QUICK)
    new = list(profile(pool, costs, config))
    assert all(r.real_rows and not r.table_specs for r in new)
    path = costs / "shards-rank0.jsonl"
    old_lines = []
    for line in path.read_text().splitlines():
        d = json.loads(line)
        d.pop("real_rows")
        old_lines.append(json.dumps(d))
    path.write_text("\n".join(old_lines) + "\n")
    data = load_dataset(costs)
    assert [r.real_rows for r in data.records] == [(), (), ()]
    assert [(r.tables, r.dims, r.fwd_ms) for r in data.records] == [(r.tables, r.dims, r.fwd_ms) for r in new]
    assert data.pool == pool and data.design == "pool"


def _rewrite_hosts(costs: Path, cpu: str, every: int = 1) -> None:
    """Pretend every ``every``-th record of ``costs`` was measured on a machine with CPU ``cpu``."""
    for p in costs.glob("shards-*.jsonl"):
        rows = [json.loads(line) for line in p.read_text().splitlines() if line.strip()]
        for i, r in enumerate(rows):
            if i % every == 0:
                r["host"]["cpu"] = cpu
        p.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_a_profile_of_other_hardware_is_not_resumed_here(tmp_path: Path, capsys):
    """Two CPUs of one machine kind time a shard 0.6-2.3x apart: a profile holds one machine's costs."""
    costs = tmp_path / "costs"
    assert main(["profile", "--samples", "2", "-o", str(costs), *TINY_ARGS]) == 0
    _rewrite_hosts(costs, "Another CPU")
    capsys.readouterr()
    assert main(["profile", "--samples", "4", "-o", str(costs), *TINY_ARGS]) == 2
    err = capsys.readouterr().err.strip()
    assert "must not mix hardware" in err and "'Another CPU'" in err and "\n" not in err
    assert sorted(_ids(costs)) == ["0-0", "0-1"]  # nothing measured, nothing appended


def test_train_cost_refuses_a_dataset_of_two_machines(tmp_path: Path, capsys):
    costs = tmp_path / "costs"
    assert main(["profile", "--samples", "6", "-o", str(costs), *TINY_ARGS]) == 0
    _rewrite_hosts(costs, "Another CPU", every=2)
    capsys.readouterr()
    out = tmp_path / "model.pt"
    assert main(["train-cost", "--data", str(costs), "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "mixes machines" in err and "\n" not in err and not out.exists()


def test_hardware_names_and_differences():
    from autoshard.hardware.profile_records import check_same_hardware
    from autoshard.host import hardware_difference, hardware_slug

    assert hardware_slug({"cpu": "Intel(R) Xeon(R) Processor"}) == "intel-xeon"
    assert hardware_slug({"cpu": "AMD EPYC"}) == "amd-epyc"
    assert hardware_slug({"cpu": "AMD EPYC", "gpu": "NVIDIA H100 80GB HBM3"}) == "nvidia-h100-80gb-hbm3"
    here = {"cpu": "AMD EPYC", "device": "cpu", "hostname": "a", "llc_bytes": 2**25}
    assert hardware_difference(here, {**here, "hostname": "b", "torch": "2.11"}) is None
    assert hardware_difference(here, {"cpu": "AMD EPYC"}) is None  # a field one side lacks is no difference
    assert hardware_difference(here, {**here, "llc_bytes": 2**24}) == "llc_bytes"
    check_same_hardware("d", [here, {"cpu": "AMD EPYC"}], here)
    with pytest.raises(AutoshardError, match="cpu='Intel"):
        check_same_hardware("d", [here, {"cpu": "Intel(R) Xeon(R) Processor"}], here)


def test_row_cuts_leave_row_share_0_profiles_as_they_were_and_cut_within_the_table():
    assert "row_share" not in TINY.to_json()  # the manifests of profiles made before row cuts
    cut = BroadDesign(**{**{k: getattr(TINY, k) for k in TINY.__dataclass_fields__}, "row_share": 0.6,
                         "row_parts": (2, 8)})
    assert BroadDesign.from_json(cut.to_json()) == cut
    ranges = []
    for i in range(30):
        whole, rows_cut = broad_sample(TINY, 3, i, bins=False), broad_sample(cut, 3, i, bins=False)
        assert whole.row_ranges == ()
        # the same tables, dims and composition: the cut draws from its own generator
        assert (rows_cut.tables, rows_cut.dims, rows_cut.batch_size) == (whole.tables, whole.dims,
                                                                         whole.batch_size)
        for t, (r0, r1) in zip(rows_cut.tables, rows_cut.row_ranges or ((0, None),) * len(whole.tables)):
            end = t.rows if r1 is None else r1
            assert 0 <= r0 < end <= t.rows and (r1 is None or r1 < t.rows)
            ranges.append((r0, r1) != (0, None))
    assert 0.4 < np.mean(ranges) < 0.8
    for kw, match in [({"row_share": 1.5}, "row share"), ({"row_parts": (1, 4)}, "row parts")]:
        with pytest.raises(AutoshardError, match=match):
            BroadDesign(**kw)


def test_row_cut_samples_are_timed_as_row_shards_and_recorded_with_their_ranges(tmp_path: Path):
    cut = BroadDesign(**{**{k: getattr(TINY, k) for k in TINY.__dataclass_fields__}, "row_share": 0.7})
    recs = list(profile(None, tmp_path / "costs", ProfileConfig(samples=6, seed=1, settings=QUICK,
                                                                 design=cut)))
    data = load_dataset(tmp_path / "costs")
    assert data.settings["design"]["row_share"] == 0.7
    held = 0
    for r in recs:
        sample = broad_sample(cut, 1, int(r.sample_id.split("-")[1]))
        assert r.row_ranges == sample.row_ranges
        task, shards = data.task_of(r)
        for s, (r0, r1), kept in zip(shards, r.row_ranges or ((0, None),) * len(r.tables), r.rows):
            assert (s.row_start, s.row_end) == (r0, r1)
            assert kept == s.num_rows(task.tables[s.table].rows)  # timed on its range's rows only
            held += (r0, r1) != (0, None)
    assert held > 0


def test_train_cost_on_two_profiles_trains_on_both_and_refuses_a_sample_in_both(tmp_path: Path, capsys):
    whole, rows = tmp_path / "whole", tmp_path / "rows"
    assert main(["profile", "--samples", "8", "-o", str(whole), *TINY_ARGS]) == 0
    assert main(["profile", "--samples", "6", "--seed", "2", "--row-share", "0.5", "--row-parts", "2:8",
                 "-o", str(rows), *TINY_ARGS]) == 0
    assert any(r.row_ranges for r in load_dataset(rows).records)
    out = tmp_path / "model.pt"
    assert main(["train-cost", "--data", str(whole), "--data", str(rows), "--epochs", "3",
                 "-o", str(out)]) == 0
    from autoshard.costs.learned import LearnedCostModel

    model = LearnedCostModel.load(str(out))
    split = model.info["split"]
    assert split["train_records"] + split["val_records"] + split["test_records"] == 14
    # pre-trained on row shards: the planners' row moves need no margin
    assert "row" in model.info["split_kinds_trained"] and model.row_move_margin == 0.0
    capsys.readouterr()
    again = tmp_path / "again.pt"
    assert main(["train-cost", "--data", str(whole), "--data", str(whole), "-o", str(again)]) == 2
    err = capsys.readouterr().err.strip()
    assert "both hold sample 0-0" in err and "--seed" in err and "\n" not in err and not again.exists()


def test_prepare_workers_record_what_the_inline_profile_records(tmp_path: Path, capsys):
    """Samples drawn in worker processes (the GPU host's prefetch) are the design's samples, in order, with
    the same tables, rows and row ranges as drawn in the timing process; only the timings may differ."""
    inline, ahead = tmp_path / "inline", tmp_path / "ahead"
    argv = ["profile", "--samples", "7", "--row-share", "0.3", *TINY_ARGS]
    assert main([*argv, "-o", str(inline)]) == 0
    assert main([*argv, "-o", str(ahead), "--prepare-workers", "2"]) == 0
    timing = {"fwd_ms", "bwd_ms", "fwd_cv", "bwd_cv", "tries", "host"}

    def drawn(d: Path) -> list[dict]:
        lines = (d / "shards-rank0.jsonl").read_text().splitlines()
        return [{k: v for k, v in json.loads(line).items() if k not in timing} for line in lines]

    assert drawn(ahead) == drawn(inline) and len(drawn(inline)) == 7
    assert not list(Path(tempfile.gettempdir()).glob("autoshard-profile-*"))  # the spilled lookups are gone
    assert any(r.get("row_ranges") for r in drawn(inline))  # row shards went through the workers too
    hosts = [json.loads(line)["host"] for line in (ahead / "shards-rank0.jsonl").read_text().splitlines()]
    assert not any("gpu_state" in h for h in hosts)  # read on CUDA only
    capsys.readouterr()
    assert main([*argv, "-o", str(tmp_path / "bad"), "--prepare-workers", "-1"]) == 2
    err = capsys.readouterr().err.strip()
    assert "prepare workers -1" in err and "\n" not in err


def test_gpu_state_reads_nvidia_smi_and_is_none_where_it_cannot(monkeypatch):
    from autoshard.host import GPU_STATE_QUERY, gpu_state, without_state

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-abc,GPU-def")  # nvidia-smi ignores it: the id is mapped
    # a stand-in for nvidia-smi that answers only for the mapped id ($0..$2: query, format, id)
    smi = ("sh", "-c", 'test "$2" = "--id=GPU-def" && echo "1980, 2619, 45, 310.52"')
    assert gpu_state(1, smi) == dict(zip(GPU_STATE_QUERY, (1980.0, 2619.0, 45.0, 310.52)))
    assert gpu_state(0, smi) is None  # another GPU's id: the command fails
    assert gpu_state(0, ("/nonexistent/nvidia-smi",)) is None
    assert gpu_state(0, ("sh", "-c", 'echo "[N/A], 2619"')) is None  # unparsable output
    # a model keeps the machine of its records, not one record's moment
    assert without_state({"gpu": "H100", "gpu_state": gpu_state(1, smi)}) == {"gpu": "H100"}


def test_dim_choices_draw_few_dims_and_leave_range_profiles_as_they_were(tmp_path: Path, capsys):
    assert "dim_choices" not in TINY.to_json()  # the manifests of profiles made before the option
    chosen = BroadDesign(**{**{k: getattr(TINY, k) for k in TINY.__dataclass_fields__},
                            "dim_choices": (16, 8, 4)})
    assert chosen.dims == (4, 16) and chosen.dim_choices == (4, 8, 16)
    assert BroadDesign.from_json(chosen.to_json()) == chosen
    drawn = [t.dim for i in range(40) for t in broad_sample(chosen, 0, i, bins=False).tables]
    assert set(drawn) == {4, 8, 16}  # each choice drawn, nothing else
    # a device of several tables holds at most as many dims as there are choices
    many = [broad_sample(chosen, 0, i, bins=False) for i in range(40)]
    assert max(len(s.tables) - len({t.dim for t in s.tables}) for s in many) >= 2
    for kw, match in [({"dim_choices": (4, 4)}, "distinct"), ({"dim_choices": (4, 30)}, "multiples of 4")]:
        with pytest.raises(AutoshardError, match=match):
            BroadDesign(**kw)
    costs = tmp_path / "costs"
    assert main(["profile", "--samples", "3", "-o", str(costs), *TINY_ARGS, "--dims", "4,16"]) == 0
    manifest = json.loads((costs / "profile.json").read_text())
    assert manifest["design"]["dim_choices"] == [4, 16]
    dims = {d["dim"] for line in next(costs.glob("shards-*.jsonl")).read_text().splitlines()
            for d in json.loads(line)["table_specs"]}
    assert dims <= {4, 16}
    capsys.readouterr()
    for bad in ("4,x", ","):
        assert main(["profile", "--samples", "1", "-o", str(tmp_path / "e"), *TINY_ARGS, "--dims", bad]) == 2
        err = capsys.readouterr().err.strip()
        assert "comma-separated list" in err and "\n" not in err


def _cells(samples: list, design: BroadDesign) -> tuple[dict, dict]:
    """Counts of one-table samples in the cells of (precision, pooling half) and (batch half, rows half), as
    ``benchmarks/design_cells.py`` counts a profile's records."""
    from collections import Counter

    from tests.conftest import load_script

    script = load_script(Path(__file__).resolve().parents[1] / "benchmarks" / "design_cells.py")
    keys = [script.cell_keys(design, s.precision.value, s.tables[0].pooling_factor, s.batch_size,
                             s.tables[0].rows) for s in samples]
    return dict(Counter(k[0] for k in keys)), dict(Counter(k[1] for k in keys))


@pytest.mark.parametrize("seed", [0, 4])
def test_one_table_samples_do_not_couple_composition_to_the_table(seed: int):
    """The k-th one-table sample took the k-th point of the composition's and of the tables' Sobol
    sequences, whose same dimensions differ only in their scrambling: its precision was a function of its
    table's pooling and its batch of its rows, so every profile before stop 95 left 2 of the 4 cells of each
    pair empty (fp32 tables pooled heavily never alone on a device). The joint axes fill all four, each
    near a quarter; the aligned ones, kept for the old profiles' samples, still show the coupling."""
    strata = len(BroadDesign().strata)
    for axes, cells in (("joint", 4), ("aligned", 2)):
        design = BroadDesign(sobol_axes=axes)
        samples = [broad_sample(design, seed, i * strata, bins=False) for i in range(128)]
        assert all(len(s.tables) == 1 for s in samples)
        for counts in _cells(samples, design):
            assert len(counts) == cells, (axes, counts)
            if axes == "joint":
                assert min(counts.values()) >= 20, counts  # of 128: near 32 each


def test_sobol_axes_in_the_manifest():
    """New designs write their axes; a manifest without the key (every profile before stop 95) reads as the
    aligned axes, whose samples are those it recorded (``test_committed_profile`` checks them)."""
    assert BroadDesign().sobol_axes == "joint"
    assert BroadDesign.from_json(BroadDesign().to_json()) == BroadDesign()
    old = {k: v for k, v in TINY.to_json().items() if k != "sobol_axes"}
    assert BroadDesign.from_json(old).sobol_axes == "aligned"
    assert "sobol_axes" not in BroadDesign.from_json(old).to_json()  # an old manifest stays as it was
    with pytest.raises(AutoshardError, match="sobol axes 'x' unknown"):
        BroadDesign(sobol_axes="x")
