"""All-to-all timing over real processes, the alpha-beta fit, and topology files (hardware.comm)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autoshard.cli.main import main
from autoshard.costs.comm import AlphaBeta, all_to_all_bytes
from autoshard.errors import AutoshardError
from autoshard.hardware.comm import (
    DEFAULT_PASSES,
    CommRecord,
    Link,
    Topology,
    fit_alpha_beta,
    load_comm_records,
)


@pytest.mark.slow
def test_two_process_all_to_all_timing_fit_and_resume(tmp_path: Path) -> None:
    """autoshard profile-comm: 2 gloo processes time each point, the model is fitted, a re-run adds
    nothing."""
    # batch 256: the large point sends 8 MB, far above the small one's noise (at batch 64, 2 MB against
    # 512 B, one CI run on a 2-vCPU host timed them inverted and the fit refused, as it should)
    args = ["profile-comm", "-o", str(tmp_path), "--devices", "2", "--dim-sums", "4,16384",
            "--batch-size", "256", "--warmup", "1", "--repeats", "5", "--backend", "gloo"]
    assert main(args) == 0
    model = AlphaBeta.load(str(tmp_path / "comm_model.json"))
    assert model.bytes_per_ms > 0 and model.alpha_ms >= 0 and "gloo" in model.source
    lines = (tmp_path / "comm.jsonl").read_text().splitlines()
    assert len(lines) == 2
    assert main(args) == 0  # every point is there: nothing is measured again
    assert main([*args, "--passes", "1"]) == 0  # nor with fewer passes than the records have
    assert (tmp_path / "comm.jsonl").read_text().splitlines() == lines
    recs = load_comm_records(tmp_path)
    assert [r.dim_sum for r in recs] == [4, 16384]
    for r in recs:
        assert r.num_devices == 2 and r.backend == "gloo" and r.host["comm_backend"] == "gloo"
        assert r.bytes_sent == all_to_all_bytes(r.dim_sum, 256, 2, 4)
        assert r.fwd_ms > 0 and r.bwd_ms > 0 and r.fwd_cv >= 0 and r.bwd_cv >= 0
        assert r.has_row_wise and r.reduce_scatter_ms > 0 and r.all_gather_ms > 0
        assert r.bucketize_ns_per_id > 0 and r.bucketize_op in ("fbgemm", "torch")
        # each point timed in every pass; its times the least of the passes' medians
        assert r.passes == DEFAULT_PASSES and len(r.pass_ms) == DEFAULT_PASSES
        assert r.fwd_ms == min(f for f, _ in r.pass_ms) and r.bwd_ms == min(b for _, b in r.pass_ms)
        assert CommRecord.from_json(json.loads(json.dumps(r.to_json()))) == r
    assert model.reduce_scatter_factor > 0 and model.all_gather_factor > 0 and model.bucketize_ns_per_id > 0
    assert "row-wise: reduce-scatter x" in model.source
    assert f"each the least of {DEFAULT_PASSES} passes' medians" in model.source
    # a directory of single-pass records (made before passes) is measured again, and the new records win
    one_pass = tmp_path / "one"
    assert main([*args[:2], str(one_pass), *args[3:], "--passes", "1"]) == 0
    assert [r.passes for r in load_comm_records(one_pass)] == [1, 1]
    assert main([*args[:2], str(one_pass), *args[3:]]) == 0
    assert [r.passes for r in load_comm_records(one_pass)] == [DEFAULT_PASSES] * 2
    assert len((one_pass / "comm.jsonl").read_text().splitlines()) == 4


def _rec(dim_sum: int, ms: float, rs_ms: float | None = None, ag_ms: float | None = None,
         ns: float | None = None) -> CommRecord:
    return CommRecord(2, dim_sum, 1024, 4, all_to_all_bytes(dim_sum, 1024, 2, 4), ms, ms, 0.0, 0.0, "gloo",
                      {"hostname": "h"}, rs_ms, ag_ms, ns, "torch" if ns is not None else "")


def test_fit_recovers_the_row_wise_factors_and_the_per_id_cost() -> None:
    alpha, bw = 0.3, 2.0e6

    def at(s: int, factor: float) -> float:
        return alpha + factor * all_to_all_bytes(s, 1024, 2, 4) / bw

    recs = [_rec(s, at(s, 1.0), at(s, 2.0), at(s, 1.5), ns) for s, ns in ((16, 9.0), (64, 10.0), (256, 30.0))]
    model = fit_alpha_beta(recs)
    assert model.reduce_scatter_factor == pytest.approx(2.0) and model.all_gather_factor == pytest.approx(1.5)
    assert model.bucketize_ns_per_id == pytest.approx(10.0)  # the median: one slow point does not decide
    assert AlphaBeta.from_json(model.to_json()) == model
    # records from before the row-wise terms: priced as all-to-alls, free bucketisation, and said so
    old = fit_alpha_beta([_rec(s, at(s, 1.0)) for s in (16, 64, 256)])
    assert (old.reduce_scatter_factor, old.all_gather_factor, old.bucketize_ns_per_id) == (1.0, 1.0, 0.0)
    assert "row-wise terms not measured" in old.source
    # a comm_model.json written before them loads with those defaults
    legacy = {k: v for k, v in old.to_json().items() if k in ("kind", "version", "alpha_ms", "bytes_per_ms")}
    assert AlphaBeta.from_json(legacy) == AlphaBeta(old.alpha_ms, old.bytes_per_ms, "")


@pytest.mark.parametrize(("field", "value", "match"), [
    ("reduce_scatter_factor", "fast", "not a number"), ("bytes_per_ms", None, "not a number"),
    ("all_gather_factor", 0.0, "must be > 0"), ("bucketize_ns_per_id", -1.0, "bucketize_ns_per_id >= 0"),
    ("alpha_ms", -1.0, "alpha_ms must be >= 0")])
def test_a_bad_comm_model_file_is_a_one_line_error(tmp_path: Path, field: str, value: object,
                                                   match: str) -> None:
    d = AlphaBeta(0.1, 1.0e6, "test").to_json()
    d[field] = value
    path = tmp_path / "comm_model.json"
    path.write_text(json.dumps(d))
    with pytest.raises(AutoshardError, match=match) as e:
        AlphaBeta.load(str(path))
    assert "\n" not in str(e.value) and "re-run profile-comm" in str(e.value)


def test_a_points_record_takes_each_timing_from_its_quietest_pass() -> None:
    """The least of the passes' medians, column by column (a pass beside other work does not count); the
    CVs of the pass with the least forward median; a record written before passes reads as one pass."""
    import numpy as np

    from autoshard.hardware.comm import _record

    quiet = np.array([[1.0, 2.0, 5.0, 4.0, 20.0], [1.2, 2.2, 5.0, 4.0, 22.0], [1.1, 2.1, 5.0, 4.0, 21.0]])
    busy = quiet * 3.0  # the same point in a pass beside other work
    mixed = quiet.copy()
    mixed[:, 1] *= 0.5  # backward faster in this pass only
    rec = _record(4, 64, 2048, 4, [busy, quiet, mixed], "gloo", {"hostname": "h"}, "torch")
    least = (rec.fwd_ms, rec.bwd_ms, rec.reduce_scatter_ms, rec.all_gather_ms)
    assert least == pytest.approx((1.1, 1.05, 5, 4))
    assert rec.bucketize_ns_per_id == 21.0 and rec.passes == 3
    assert np.allclose(rec.pass_ms, [(3.3, 6.3), (1.1, 2.1), (1.1, 1.05)])
    assert rec.fwd_cv == pytest.approx(np.std(quiet[:, 0]) / np.mean(quiet[:, 0]))  # the first least: quiet
    legacy = {k: v for k, v in rec.to_json().items() if k not in ("passes", "pass_ms")}
    assert CommRecord.from_json(legacy).passes == 1 and CommRecord.from_json(legacy).pass_ms == ()


def test_the_cli_names_the_default_passes() -> None:
    """profile-comm's help says the default the library takes (the CLI does not import it at startup)."""
    import argparse

    from autoshard.cli.main import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    passes = next(a for a in sub.choices["profile-comm"]._actions if a.dest == "passes")
    assert passes.default is None and f"(default {DEFAULT_PASSES}:" in passes.help


def test_a_point_re_measured_for_the_row_wise_terms_replaces_its_old_record(tmp_path: Path) -> None:
    from autoshard.hardware.jsonl import append_jsonl

    for rec in (_rec(16, 1.0), _rec(64, 2.0), _rec(16, 1.1, 2.0, 1.5, 9.0)):
        append_jsonl(tmp_path / "comm.jsonl", rec.to_json())
    recs = load_comm_records(tmp_path)
    assert [(r.dim_sum, r.has_row_wise) for r in recs] == [(64, False), (16, True)]


@pytest.mark.parametrize("world", [2, 3, 4])
def test_the_torch_bucketiser_matches_fbgemms(world: int) -> None:
    """The plain-torch row-block bucketisation (hosts without fbgemm_gpu) returns FBGEMM's lengths and ids."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("fbgemm_gpu")
    from autoshard.hardware.comm import bucketizer

    gen = torch.Generator().manual_seed(world)
    for rows in (7, 10, 1000):
        lengths = torch.randint(0, 6, (3 * 8,), dtype=torch.int64, generator=gen)  # 3 features, 8 bags each
        ids = torch.randint(0, rows, (int(lengths.sum()),), dtype=torch.int64, generator=gen)
        blocks = torch.full((3,), -(-rows // world), dtype=torch.int64)
        (name_a, fb), (name_b, plain) = bucketizer(True), bucketizer(False)
        assert (name_a, name_b) == ("fbgemm", "torch")
        for x, y in zip(fb(lengths, ids, blocks, world), plain(lengths, ids, blocks, world)):
            assert torch.equal(x, y)


def test_fit_recovers_latency_and_bandwidth() -> None:
    alpha, bw = 0.3, 2.0e6  # 0.3 ms, 2 GB/s
    recs = [_rec(s, alpha + all_to_all_bytes(s, 1024, 2, 4) / bw) for s in (16, 64, 256)]
    model = fit_alpha_beta(recs)
    assert model.alpha_ms == pytest.approx(alpha) and model.bytes_per_ms == pytest.approx(bw)
    with pytest.raises(AutoshardError, match="2 distinct"):
        fit_alpha_beta(recs[:1])
    with pytest.raises(AutoshardError, match="do not grow"):
        fit_alpha_beta([_rec(16, 5.0), _rec(256, 1.0)])


def test_topology_gives_the_slower_link_share() -> None:
    topo = Topology(8, Link(300.0, 10.0), Link(25.0, 30.0))
    one_host = topo.alpha_beta(8)
    assert one_host.bytes_per_ms == pytest.approx(300.0e6) and one_host.alpha_ms == pytest.approx(0.010)
    two_hosts = topo.alpha_beta(16)  # 8 of 15 chunks cross hosts at 25 GB/s
    assert (two_hosts.bytes_per_ms == pytest.approx(25.0e6 * 15 / 8)
            and two_hosts.alpha_ms == pytest.approx(0.030))


def test_topology_file_through_the_cli(tmp_path: Path, capsys) -> None:
    topo = tmp_path / "topo.json"
    topo.write_text(json.dumps({"kind": "autoshard.topology", "version": 1, "devices_per_host": 8,
                                "intra_host": {"bandwidth_gbps": 300, "latency_us": 10},
                                "inter_host": {"bandwidth_gbps": 25, "latency_us": 30}}))
    assert main(["profile-comm", "-o", str(tmp_path / "c"), "--topology", str(topo), "--devices", "16"]) == 0
    loaded = AlphaBeta.load(str(tmp_path / "c" / "comm_model.json"))
    assert loaded.bytes_per_ms == pytest.approx(25.0e6 * 15 / 8)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"kind": "autoshard.topology", "version": 1, "devices_per_host": 8,
                               "intra_host": {"bandwidth_gbps": -1}, "inter_host": {"bandwidth_gbps": 25}}))
    capsys.readouterr()
    assert main(["profile-comm", "-o", str(tmp_path / "c"), "--topology", str(bad), "--devices", "16"]) == 2
    err = capsys.readouterr().err.strip()
    assert "intra_host" in err and "\n" not in err


@pytest.mark.parametrize("extra, match", [(["--dim-sums", "8,x"], "dim-sums"),
                                          (["--devices", "1"], "at least 2"),
                                          (["--devices", "2", "--passes", "0"], "--passes: 0 must be")])
def test_bad_comm_arguments_exit_2(tmp_path: Path, capsys, extra, match) -> None:
    try:
        code = main(["profile-comm", "-o", str(tmp_path), *extra])
    except SystemExit as e:  # a usage error: argparse exits
        code = e.code
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert match in err and "\n" not in err

