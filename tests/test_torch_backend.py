"""The torch-only fused embedding bag (hardware.torch_backend) against FBGEMM's TBE: same outputs, same
updates for exact SGD and exact row-wise Adagrad."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from autoshard.errors import AutoshardError
from autoshard.hardware.kernel import KernelBackend, MeasureSettings, Optimizer, measure_shard
from autoshard.hardware.torch_backend import FusedEmbeddingBags
from autoshard.shards import ShardRef
from autoshard.tables import LookupKind, LookupSpec, Precision, Table
from autoshard.tasks import Task

BATCH = 32


def _batch(rows: list[int], seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """FBGEMM layout: indices table-major, offsets of length T * B + 1; bags of 0-6 lookups (some empty),
    indices over a few hot rows too, so rows repeat within and across bags."""
    rng = np.random.default_rng(seed)
    idx, lengths = [], []
    for r in rows:
        n = rng.integers(0, 7, BATCH)
        n[rng.random(BATCH) < 0.2] = 0
        hot = rng.random(int(n.sum())) < 0.3
        idx.append(np.where(hot, rng.integers(0, 5, int(n.sum())), rng.integers(0, r, int(n.sum()))))
        lengths.append(n)
    offsets = np.concatenate([[0], np.cumsum(np.concatenate(lengths))])
    return torch.from_numpy(np.concatenate(idx)).long(), torch.from_numpy(offsets).long()


def _pair(rows: list[int], dims: list[int], optimizer: Optimizer) -> tuple[object, FusedEmbeddingBags]:
    """An FBGEMM TBE (its defaults: lr 0.01, eps) and ours with its initial weights copied in."""
    from fbgemm_gpu.split_embedding_configs import EmbOptimType
    from fbgemm_gpu.split_table_batched_embeddings_ops_common import EmbeddingLocation, PoolingMode
    from fbgemm_gpu.split_table_batched_embeddings_ops_training import (
        ComputeDevice,
        SplitTableBatchedEmbeddingBagsCodegen,
    )

    torch.manual_seed(0)
    opt = {Optimizer.EXACT_SGD: EmbOptimType.EXACT_SGD,
           Optimizer.ROWWISE_ADAGRAD: EmbOptimType.EXACT_ROWWISE_ADAGRAD}[optimizer]
    tbe = SplitTableBatchedEmbeddingBagsCodegen(
        [(r, d, EmbeddingLocation.HOST, ComputeDevice.CPU) for r, d in zip(rows, dims)],
        optimizer=opt, pooling_mode=PoolingMode.SUM, device=torch.device("cpu"))
    tbe.init_embedding_weights_uniform(-0.1, 0.1)
    ours = FusedEmbeddingBags(rows, dims, optimizer)
    for mine, theirs in zip(ours.split_embedding_weights(), tbe.split_embedding_weights()):
        mine.copy_(theirs)
    return tbe, ours


def _assert_weights_equal(tbe: object, ours: FusedEmbeddingBags) -> None:
    for mine, theirs in zip(ours.split_embedding_weights(), tbe.split_embedding_weights()):
        torch.testing.assert_close(mine, theirs, rtol=0, atol=1e-5)


@pytest.mark.parametrize("dims, shift_on_device", [([8, 16, 8], False), ([8, 8], False), ([8, 8], True)])
def test_forward_matches_fbgemm(dims: list[int], shift_on_device: bool) -> None:
    rows = [300, 200, 400][:len(dims)]
    tbe, ours = _pair(rows, dims, Optimizer.EXACT_SGD)
    ours.shift_on_device = shift_on_device  # the CUDA path of one distinct dim, on CPU
    idx, off = _batch(rows, seed=1)
    want = tbe(idx, off)
    got = ours(idx, off)
    assert got.shape == want.shape == (BATCH, sum(dims)) and got.dtype == torch.float32
    torch.testing.assert_close(got, want, rtol=0, atol=1e-5)
    empty = (off[1:] == off[:-1]).nonzero().flatten()
    assert len(empty) > 0  # some bags are empty, pooled to 0
    t, b = int(empty[0]) // BATCH, int(empty[0]) % BATCH
    col = sum(dims[:t])
    assert torch.all(got[b, col:col + dims[t]] == 0)


@pytest.mark.parametrize("optimizer", list(Optimizer))
@pytest.mark.parametrize("grad_scale", [1.0, 1e-8])  # tiny gradients: Adagrad's step depends on eps
@pytest.mark.parametrize("dims, shift_on_device", [([8, 16, 8], False), ([8, 8], False), ([8, 8], True)])
def test_optimizer_steps_match_fbgemm(optimizer: Optimizer, grad_scale: float, dims: list[int],
                                      shift_on_device: bool) -> None:
    rows = [300, 200, 400][:len(dims)]
    tbe, ours = _pair(rows, dims, optimizer)
    ours.shift_on_device = shift_on_device
    before = [w.clone() for w in ours.split_embedding_weights()]
    gen = torch.Generator().manual_seed(2)
    for step in range(2):  # two steps: Adagrad's state accumulates
        idx, off = _batch(rows, seed=10 + step)
        grad = torch.randn(BATCH, sum(dims), generator=gen) * grad_scale
        want, got = tbe(idx, off), ours(idx, off)
        torch.testing.assert_close(got, want, rtol=0, atol=1e-5)
        want.backward(grad)
        got.backward(grad)
        _assert_weights_equal(tbe, ours)
    assert any(not torch.equal(b, w) for b, w in zip(before, ours.split_embedding_weights()))  # it moved
    if optimizer is Optimizer.ROWWISE_ADAGRAD:
        for mine, theirs in zip(ours.split_optimizer_states(), tbe.split_optimizer_states()):
            torch.testing.assert_close(mine, theirs[0].flatten(), rtol=1e-5, atol=grad_scale ** 2 * 1e-6)


def test_sgd_sums_duplicate_lookups() -> None:
    ours = FusedEmbeddingBags([4], [4], "exact_sgd", learning_rate=0.5)
    ours.init_embedding_weights_uniform(1.0, 1.0)
    # two bags, row 1 looked up three times (twice in bag 0)
    out = ours(torch.tensor([1, 1, 1, 2]), torch.tensor([0, 2, 4]))
    out.backward(torch.tensor([[1.0] * 4, [2.0] * 4]))
    w = ours.split_embedding_weights()[0]
    assert torch.allclose(w[1], torch.full((4,), 1.0 - 0.5 * (1 + 1 + 2)))
    assert torch.allclose(w[2], torch.full((4,), 1.0 - 0.5 * 2))
    assert torch.equal(w[0], torch.ones(4)) and torch.equal(w[3], torch.ones(4))
    with pytest.raises(AutoshardError, match="already applied"):
        out.backward(torch.ones(2, 4))  # the step is applied once


def test_fp16_weights_and_bad_inputs() -> None:
    ours = FusedEmbeddingBags([50, 60], [8, 4], "rowwise_adagrad", dtype=torch.float16)
    ours.init_embedding_weights_uniform(-0.1, 0.1)
    idx, off = _batch([50, 60], seed=3)
    out = ours(idx.int(), off.int())
    assert out.dtype == torch.float32 and out.shape == (BATCH, 12)
    out.backward(torch.ones_like(out))
    assert all(w.dtype == torch.float16 for w in ours.split_embedding_weights())
    with pytest.raises(AutoshardError, match="offsets"):
        ours(idx, off[:-1])
    with pytest.raises(AutoshardError, match="optimizer"):
        FusedEmbeddingBags([5], [4], "adam")


# -- wired into hardware.kernel.measure_shard ---------------------------------------------------------------

FAST_TORCH = MeasureSettings(warmup=1, repeats=3, max_cv=10.0, max_tries=1, flush_cache=False, num_batches=2,
                             backend="torch")


def _task(precision: Precision = Precision.FP32) -> Task:
    tables = tuple(Table(f"t{i}", 16 + 8 * i, r, 4.0 + i, lookups=LookupSpec(LookupKind.POWER_LAW, seed=i))
                   for i, r in enumerate((500, 3000, 20000)))
    return Task(tables, (10**9, 10**9), precision=precision, batch_size=64, name="small")


@pytest.mark.parametrize("optimizer", list(Optimizer))
def test_measure_shard_with_torch_backend(optimizer: Optimizer, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    # as on a host without fbgemm_gpu: any import of it fails
    for name in [m for m in sys.modules if m == "fbgemm_gpu" or m.startswith("fbgemm_gpu.")] + ["fbgemm_gpu"]:
        monkeypatch.setitem(sys.modules, name, None)
    settings = MeasureSettings(**{**FAST_TORCH.to_json(), "optimizer": optimizer})
    for precision in (Precision.FP32, Precision.FP16):
        t = measure_shard(_task(precision), [ShardRef(0, 16), ShardRef(1, 12), ShardRef(2, 32)], settings)
        assert t.fwd_ms > 0 and t.bwd_ms > 0 and len(t.fwd_runs_ms) == 3
        assert t.rows == (500, 3000, 20000)
    fbgemm = MeasureSettings(**{**FAST_TORCH.to_json(), "backend": "fbgemm"})
    with pytest.raises(AutoshardError, match="backend 'torch'") as e:  # the fbgemm path does need it
        measure_shard(_task(), [ShardRef(0, 16)], fbgemm)
    assert "\n" not in str(e.value)


def test_backend_setting_json_and_validation() -> None:
    assert MeasureSettings().backend is KernelBackend.FBGEMM
    assert FAST_TORCH.backend is KernelBackend.TORCH and FAST_TORCH.to_json()["backend"] == "torch"
    assert MeasureSettings.from_json(FAST_TORCH.to_json()) == FAST_TORCH
    old = {k: v for k, v in MeasureSettings().to_json().items() if k != "backend"}  # written before backends
    assert MeasureSettings.from_json(old).backend is KernelBackend.FBGEMM
    with pytest.raises(AutoshardError, match="backend"):
        MeasureSettings(backend="triton")


def test_profile_dir_made_before_backends_resumes_as_fbgemm(tmp_path) -> None:
    import json

    from autoshard.hardware.profiler import MANIFEST_FILE, ProfileConfig, prepare_dir
    from autoshard.tables import TablePool

    pool = TablePool.from_tables(list(_task().tables))
    prepare_dir(pool, tmp_path, ProfileConfig(samples=2))
    manifest = tmp_path / MANIFEST_FILE
    old = json.loads(manifest.read_text())
    del old["settings"]["backend"]  # as written before the backend setting existed
    manifest.write_text(json.dumps(old))
    prepare_dir(pool, tmp_path, ProfileConfig(samples=3))  # resumes: the missing backend reads as fbgemm
    with pytest.raises(AutoshardError, match="other settings"):
        prepare_dir(pool, tmp_path, ProfileConfig(samples=3, settings=FAST_TORCH))


@pytest.mark.parametrize("optimizer", list(Optimizer))
def test_split_segment_sums_match_fbgemm_on_a_row_looked_up_hundreds_of_times(optimizer: Optimizer) -> None:
    """The CUDA backward's segment sums in pieces (``split_long_segments``, run here on CPU): a power-law
    table whose ids almost all hit one row (what made the unsplit sum take 150 ms on an H200) updates as
    FBGEMM does, including rows looked up fewer times than a piece and across two distinct dims."""
    from autoshard.hardware.torch_backend import SEGMENT_PIECE

    rows, dims = [300, 200, 400], [8, 16, 8]
    tbe, ours = _pair(rows, dims, optimizer)
    ours.split_long_segments = True
    idx, off = _batch(rows, seed=5)
    lengths = off.diff()
    hot = SEGMENT_PIECE * 3 + 7  # three full pieces and a partial one
    # table 0's bag 0 gets `hot` extra lookups of row 7; the rest stays as _batch drew it
    idx = torch.cat([torch.full((hot,), 7), idx])
    lengths[0] += hot
    off = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)])
    grad = torch.randn(BATCH, sum(dims), generator=torch.Generator().manual_seed(3))
    want, got = tbe(idx, off), ours(idx, off)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-4)
    want.backward(grad)
    got.backward(grad)
    for mine, theirs in zip(ours.split_embedding_weights(), tbe.split_embedding_weights()):
        torch.testing.assert_close(mine, theirs, rtol=0, atol=1e-5)
    assert (idx[:int(off[BATCH])] == 7).sum() > 3 * SEGMENT_PIECE
