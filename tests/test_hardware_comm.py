"""All-to-all timing over real processes, the alpha-beta fit, and topology files (hardware.comm)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autoshard.cli.main import main
from autoshard.costs.comm import AlphaBeta, all_to_all_bytes
from autoshard.errors import AutoshardError
from autoshard.hardware.comm import (
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
    assert (tmp_path / "comm.jsonl").read_text().splitlines() == lines
    recs = load_comm_records(tmp_path)
    assert [r.dim_sum for r in recs] == [4, 16384]
    for r in recs:
        assert r.num_devices == 2 and r.backend == "gloo" and r.host["comm_backend"] == "gloo"
        assert r.bytes_sent == all_to_all_bytes(r.dim_sum, 256, 2, 4)
        assert r.fwd_ms > 0 and r.bwd_ms > 0 and r.fwd_cv >= 0 and r.bwd_cv >= 0
        assert CommRecord.from_json(r.to_json()) == r


def _rec(dim_sum: int, ms: float) -> CommRecord:
    return CommRecord(2, dim_sum, 1024, 4, all_to_all_bytes(dim_sum, 1024, 2, 4), ms, ms, 0.0, 0.0, "gloo",
                      {"hostname": "h"})


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
                                          (["--devices", "1"], "at least 2")])
def test_bad_comm_arguments_exit_2(tmp_path: Path, capsys, extra, match) -> None:
    assert main(["profile-comm", "-o", str(tmp_path), *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert match in err and "\n" not in err

