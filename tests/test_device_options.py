"""``--device`` and ``--backend`` through profile, evaluate, bench and quickstart; the core pipeline without
fbgemm-gpu and TorchRec installed."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from autoshard.cli.main import main
from autoshard.errors import AutoshardError
from autoshard.hardware.comm import DEFAULT_PASSES
from autoshard.hardware.kernel import DeviceKind, KernelBackend, MeasureSettings
from autoshard.pipeline import context as context_mod
from autoshard.pipeline.context import Context, PipelineConfig, comm_backend
from autoshard.pipeline.evaluation import TORCHREC, load_planning_model, planner_extras
from autoshard.pipeline.suite import Suite
from autoshard.planners.base import PlannerOptions, make_planner

ROOT = Path(__file__).resolve().parent.parent

NO_CUDA = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error of a host without CUDA")

# Runs the CLI in a fresh interpreter where `import fbgemm_gpu` and `import torchrec` fail, as on a host
# without them; records every blocked import so the test can say who tried.
DRIVER = textwrap.dedent("""
    import json, sys

    BLOCKED = ("fbgemm_gpu", "torchrec")
    tried = []

    class Block:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                tried.append(name)
                raise ImportError(f"{name} is not installed (blocked by the test)")
            return None

    sys.meta_path.insert(0, Block())
    from autoshard.cli.main import main

    codes = [main(argv) for argv in json.loads(sys.argv[1])]
    loaded = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
    print(json.dumps({"codes": codes, "tried": tried, "loaded": loaded}))
""")

TINY_MEASURE = ["--batch-size", "64", "--warmup", "0", "--repeats", "2", "--rows-cap", "1000",
                "--max-tries", "1", "--no-flush"]


def test_core_pipeline_runs_without_fbgemm_gpu_and_torchrec(tmp_path: Path) -> None:
    tables, profile, plan, result = (str(tmp_path / n) for n in ("t.json", "prof", "plan.json", "ev.json"))
    commands = [
        ["tables", "synth", "--num-tables", "6", "--stats-batch-size", "1024", "-o", tables],
        ["profile", "--tables", tables, "--samples", "2", "--max-tables", "2", "-o", profile,
         "--backend", "torch", *TINY_MEASURE],
        ["plan", "--tables", tables, "--devices", "2", "--algo", "size_greedy", "-o", plan],
        ["evaluate", "--plan", plan, "--tables", tables, "--backend", "torch", "--collectives", "model",
         "--json", result, *TINY_MEASURE],
        # the default backend needs fbgemm_gpu: one line saying so, before anything is made
        ["profile", "--tables", tables, "--samples", "1", "-o", str(tmp_path / "fbgemm"), *TINY_MEASURE],
    ]
    done = subprocess.run([sys.executable, "-c", DRIVER, json.dumps(commands)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["codes"] == [0, 0, 0, 0, 2], done.stderr[-2000:]
    last = done.stderr.strip().splitlines()[-1]
    assert "--backend fbgemm needs fbgemm_gpu" in last and "--backend torch" in last
    assert not (tmp_path / "fbgemm").exists()
    assert report["loaded"] == []  # nothing of them was (half-)imported either
    lines = (tmp_path / "prof" / "shards-rank0.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert len(records) == 2 and all(r["settings"]["backend"] == "torch" for r in records)
    evaluation = json.loads(Path(result).read_text())
    assert evaluation["settings"]["backend"] == "torch" and evaluation["cost"]["plan_ms"] > 0


@NO_CUDA
@pytest.mark.parametrize("argv", [
    ["profile", "--tables", "missing.json", "--samples", "2", "-o", "{out}"],
    ["evaluate", "--plan", "missing-plan.json", "--tables", "missing.json", "--json", "{out}"],
    ["bench", "--suite", "tiny", "-o", "{out}"],
    ["quickstart", "-o", "{out}", "--backend", "torch"],
])
def test_device_cuda_without_cuda_is_one_line_before_anything_runs(tmp_path: Path, capsys, argv) -> None:
    out = tmp_path / "out"
    assert main([a.replace("{out}", str(out)) for a in argv] + ["--device", "cuda"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--device cuda" in err and "CUDA" in err
    assert not out.exists()  # no output directory, no stage


def test_profile_and_evaluate_settings_carry_device_and_backend() -> None:
    from autoshard.cli.main import build_parser
    from autoshard.cli.profile import _settings

    for command in (["profile", "--tables", "t", "--samples", "1", "-o", "o"], ["evaluate", "--plan", "p"]):
        args = build_parser().parse_args([*command, "--device", "cuda", "--backend", "torch"])
        settings = _settings(args)
        assert settings.device is DeviceKind.CUDA and settings.backend is KernelBackend.TORCH
        defaults = _settings(build_parser().parse_args(command))
        assert defaults.device is DeviceKind.CPU and defaults.backend is KernelBackend.FBGEMM


def test_bench_passes_device_and_backend_to_the_pipeline(tmp_path: Path, monkeypatch) -> None:
    import autoshard.cli.bench as bench_cli
    from autoshard.bench import runner

    seen = []

    def fake_run_suite(config, out_dir, **kwargs):
        seen.append(config)
        raise AutoshardError("stop before any stage")

    monkeypatch.setattr(bench_cli, "check_device", lambda device: None)  # as on a host with CUDA
    monkeypatch.setattr(runner, "run_suite", fake_run_suite)
    out = str(tmp_path / "run")
    assert main(["bench", "--suite", "tiny", "-o", out, "--device", "cuda", "--backend", "torch",
                 "--allow-other-hardware"]) == 2
    (config,) = seen
    assert (config.device, config.backend, config.allow_other_hardware) == ("cuda", "torch", True)
    settings = config.measure_settings()
    assert settings.device is DeviceKind.CUDA and settings.backend is KernelBackend.TORCH
    assert settings.warmup == config.suite.eval.warmup and settings.rows_cap == config.suite.eval.rows_cap
    assert "--device cuda --backend torch --allow-other-hardware" in config.command
    assert main(["quickstart", "-o", out, "--suite", "tiny"]) == 2
    assert (seen[-1].device, seen[-1].backend) == ("cpu", "fbgemm") and "--device" not in seen[-1].command


def _capture_stage(ctx: Context, monkeypatch) -> dict:
    captured: dict = {}

    def stage(name, settings, deps, outputs, fn, usable=None):
        captured[name] = settings
        return name

    monkeypatch.setattr(ctx, "stage", stage)
    return captured


def test_device_and_backend_are_in_the_stage_keys(tmp_path: Path, monkeypatch) -> None:
    from autoshard.pipeline.profiling import stage_comm, stage_profile

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    suite = Suite(name="t", num_tables=2, num_devices=4)
    measured = {}
    for device, backend in (("cpu", "fbgemm"), ("cuda", "fbgemm"), ("cpu", "torch")):
        ctx = Context(PipelineConfig(suite, device=device, backend=backend), tmp_path)
        captured = _capture_stage(ctx, monkeypatch)
        stage_profile(ctx, "split")
        stage_comm(ctx)
        measured[device, backend] = captured["profile"]["measure"]
        # gloo for the comm fit (no GPU per rank here): no backend in the key; row_wise since stop 44's sweep,
        # passes since stop 71's
        assert captured["comm"] == {"num_devices": 4, "batch_size": suite.batch_size, "row_wise": 1,
                                    "passes": DEFAULT_PASSES}
    assert measured["cpu", "fbgemm"] == MeasureSettings(warmup=suite.eval.warmup, repeats=suite.eval.repeats,
                                                        rows_cap=suite.eval.rows_cap).to_json()
    assert measured["cuda", "fbgemm"]["device"] == "cuda" and measured["cpu", "torch"]["backend"] == "torch"
    assert len({json.dumps(m, sort_keys=True) for m in measured.values()}) == 3


def test_comm_stage_picks_nccl_only_with_a_gpu_per_rank(tmp_path: Path, monkeypatch) -> None:
    from autoshard.pipeline.profiling import stage_comm

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert comm_backend("cpu", 2)[0] == "gloo"  # CPU kernels: CPU processes, GPUs or not
    assert comm_backend("cuda", 2)[0] == "nccl"
    backend, what = comm_backend("cuda", 4)
    assert backend == "gloo" and "CPU processes' fit" in what and "--comm" in what
    ctx = Context(PipelineConfig(Suite(name="t", num_tables=2, num_devices=2), device="cuda"), tmp_path)
    captured = _capture_stage(ctx, monkeypatch)
    stage_comm(ctx)
    assert captured["comm"]["backend"] == "nccl"
    eight = Context(PipelineConfig(Suite(name="t", num_tables=2, num_devices=8), device="cuda"), tmp_path)
    (tmp_path / "costs").mkdir()
    (tmp_path / "costs" / context_mod.COMM_MODEL_FILE).write_text("{}")
    assert "CPU processes' fit" in eight.comm_description()  # what the bench report's meta says


def test_torchrec_alone_gets_the_cuda_compute_device() -> None:
    pytest.importorskip("torchrec")
    assert planner_extras(MeasureSettings()) == {}
    extras = planner_extras(MeasureSettings(device="cuda"))
    assert extras == {TORCHREC: {"compute_device": "cuda"}}
    options = PlannerOptions(time_limit_s=0.5, algorithm_extra=extras)
    assert make_planner(TORCHREC, options).config.compute_device == "cuda"
    assert make_planner(TORCHREC, PlannerOptions(time_limit_s=0.5)).config.compute_device == "cpu"
    make_planner("ilp", options)  # built from the shared options, without the key: ilp refuses an unknown one
    make_planner("size_greedy", options)
    assert options.extra == {}


def _learned_model(path: Path, settings: dict) -> str:
    from autoshard.costs.learned import LearnedCostModel
    from autoshard.host import host_info

    old_checkpoint = Path(__file__).resolve().parent / "data" / "stop10_cost_model.pt"  # one network
    m = LearnedCostModel.load(old_checkpoint, allow_other_hardware=True)
    trained_on = {**m.trained_on, "host": host_info("cpu"), "settings": settings}
    LearnedCostModel(m.net, m.normalizer, m.scaler, m.comm, trained_on, m.info).save(path)
    return str(path)


def test_planning_model_is_checked_against_the_kernel_settings(tmp_path: Path, capsys) -> None:
    fbgemm = MeasureSettings().to_json()
    torch_backend = MeasureSettings(backend="torch")
    model = _learned_model(tmp_path / "fbgemm.pt", fbgemm)
    assert load_planning_model(model, MeasureSettings()).name == "learned"
    with pytest.raises(AutoshardError, match="backend='fbgemm'.*backend='torch'"):
        load_planning_model(model, torch_backend)
    with pytest.raises(AutoshardError, match="device"):
        load_planning_model(model, MeasureSettings(device="cuda"))
    assert load_planning_model(model, torch_backend, allow_other_hardware=True).name == "learned"
    # settings recorded before the backend was: FBGEMM timings
    old = _learned_model(tmp_path / "old.pt", {k: v for k, v in fbgemm.items() if k != "backend"})
    load_planning_model(old, MeasureSettings())
    with pytest.raises(AutoshardError, match="FBGEMM timings"):
        load_planning_model(old, torch_backend)
    # the bench refuses it before any stage runs
    out = tmp_path / "run"
    argv = ["bench", "--suite", "tiny", "-o", str(out), "--cost-model", model, "--backend", "torch"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "backend" in err and "allow other hardware" in err
    assert not out.exists()


def test_cuda_kernels_with_fewer_gpus_than_ranks_get_modelled_collectives(tmp_path: Path,
                                                                         monkeypatch) -> None:
    """One GPU for a 4-device task (the lent GPU host): CPU processes' gloo all-to-alls would time another
    interconnect than the plan's, so auto models them; CPU kernels on enough cores still measure."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(context_mod.os, "cpu_count", lambda: 16)
    suite = Suite(name="t", num_tables=2, num_devices=4)
    mode, why = Context(PipelineConfig(suite, device="cuda"), tmp_path).collectives()
    assert mode == "model" and "fewer GPUs" in why and "modelled" in why
    assert Context(PipelineConfig(suite, device="cpu"), tmp_path).collectives()[0] == "measure"
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)  # a GPU per rank: NCCL, measured
    assert Context(PipelineConfig(suite, device="cuda"), tmp_path).collectives()[0] == "measure"
    forced = Context(PipelineConfig(suite, device="cuda", collectives="measure"), tmp_path)
    assert forced.collectives() == ("measure", "--collectives measure")


def test_bench_batch_size_and_estimate_reach_the_pipeline(tmp_path: Path, monkeypatch, capsys) -> None:
    from autoshard.bench import runner

    seen = []

    def fake_run_suite(config, out_dir, **kwargs):
        seen.append(config)
        raise AutoshardError("stop before any stage")

    monkeypatch.setattr(runner, "run_suite", fake_run_suite)
    out = str(tmp_path / "run")
    assert main(["bench", "--suite", "tiny", "-o", out, "--batch-size", "128", "--estimate", "none"]) == 2
    (config,) = seen
    assert config.suite.batch_size == 128 and config.estimate == "none"
    assert "--batch-size 128" in config.command and "--estimate none" in config.command
    assert main(["bench", "--suite", "tiny", "-o", out, "--batch-size", "0"]) == 2
    assert "--batch-size 0 must be a positive integer" in capsys.readouterr().err
    assert main(["bench", "--suite", "seq-2x4", "-o", out, "--estimate", "planning"]) == 2
    assert "does not apply to sequence suites" in capsys.readouterr().err


def test_default_algorithms_skip_planners_whose_package_is_missing(monkeypatch) -> None:
    from autoshard.pipeline import measure

    chosen, skipped = measure.select_algorithms(None)
    assert "size_greedy" in chosen and not set(chosen) & set(skipped)
    monkeypatch.setattr(measure, "PLANNER_PACKAGES", {"ilp": "autoshard_no_such_package"})
    chosen, skipped = measure.select_algorithms(None)
    assert "ilp" not in chosen and "autoshard_no_such_package missing" in skipped["ilp"]
    assert measure.select_algorithms(["ilp"])[0] == ["ilp"]  # asked for by name: run, and fail per task


def test_a_gpu_model_is_checked_by_its_gpu_and_plans_on_hosts_without_one() -> None:
    from autoshard.costs.learned.compat import check_trained_host

    gpu_host = {"device": "cuda", "cpu": "Intel(R) Xeon(R) Processor", "llc_bytes": 300, "gpu": "NVIDIA H200"}
    trained_on = {"host": gpu_host}
    check_trained_host(trained_on, {"device": "cuda", "cpu": "AMD EPYC", "llc_bytes": 32})  # no GPU here
    check_trained_host(trained_on, {**gpu_host, "cpu": "AMD EPYC", "llc_bytes": 32})  # same GPU, other CPU
    with pytest.raises(AutoshardError, match="gpu='NVIDIA H200' but this machine has 'NVIDIA H100"):
        check_trained_host(trained_on, {**gpu_host, "gpu": "NVIDIA H100 80GB HBM3"})
    cpu_host = {"device": "cpu", "cpu": "Intel(R) Xeon(R) Processor", "llc_bytes": 300}
    with pytest.raises(AutoshardError, match="cpu="):
        check_trained_host({"host": cpu_host}, {**cpu_host, "cpu": "AMD EPYC"})
