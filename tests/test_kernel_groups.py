"""The kernel-group cost of a learned model: a device's distinct shard dims, which the torch backend runs as
separate kernels, counted from the additive accumulator and priced by a learned per-group term; and
``train-cost --kernel-groups`` (auto: on for records timed with the torch backend)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch
from conftest import QUICK_MEASURE, SMALL_BROAD_DESIGN

from autoshard.cli.main import main
from autoshard.costs.learned import CostNetConfig, LearnedCostModel
from autoshard.costs.learned.network import KERNEL_GROUP_CHANNELS, CostNet, segment_sum
from autoshard.errors import AutoshardError
from autoshard.hardware.kernel import KernelBackend
from autoshard.hardware.profiler import ProfileConfig, profile


def _device_ms(net: CostNet, dims: list[int], scale: float = 1.0) -> torch.Tensor:
    """The compute heads' additive total (model units) of one device holding shards of ``dims``, all of the
    same features, so only the dims differ between calls."""
    feats = torch.zeros(len(dims), net.config.input_width, dtype=torch.float64)
    d = torch.tensor(dims)
    acc = segment_sum(net.encode(feats, d), torch.zeros(len(dims), dtype=torch.int64), 1) * scale
    with torch.no_grad():
        _, out = net.device_forward(acc)
    return torch.exp(out[0] * net.log_scale)  # the correction head starts at zero: exp(out) is the total


def test_each_distinct_dim_adds_one_group_cost_and_a_scaled_state_keeps_its_groups():
    net = CostNet(CostNetConfig(kernel_groups=True)).double()
    per_group = torch.exp(net.group_log.detach())
    three_one_dim, three_two_dims = _device_ms(net, [32, 32, 32]), _device_ms(net, [32, 32, 64])
    assert torch.allclose(three_two_dims - three_one_dim, per_group)
    # dims 4..256 in steps of 4 are one channel each, so 64 shards of 64 dims are 64 groups
    every = _device_ms(net, list(range(4, 257, 4)))
    same = _device_ms(net, [4] * 64)
    assert torch.allclose(every - same, (KERNEL_GROUP_CHANNELS - 1) * per_group)
    # the hand-over scales a device's state by count_in / count (below 1): its groups stay counted
    scaled = _device_ms(net, [32, 64, 128], scale=0.3)
    plain = CostNet(CostNetConfig()).double()
    plain.load_state_dict({k: v for k, v in net.state_dict().items() if k != "group_log"})
    assert torch.allclose(scaled - _device_ms(plain, [32, 64, 128], scale=0.3), 3 * per_group)


def test_kernel_groups_widen_the_accumulator_need_the_additive_head_and_default_off():
    for config in (CostNetConfig(), CostNetConfig(kernel_groups=True)):  # with or without the option, an
        head = CostNet(config).compute_head  # additive network starts as the pure sum of per-table costs
        assert not head.weight.any() and not head.bias.any()
    assert CostNetConfig(kernel_groups=True).acc_width == CostNetConfig().acc_width + KERNEL_GROUP_CHANNELS
    with pytest.raises(AutoshardError, match="additive head"):
        CostNetConfig(kernel_groups=True, additive=False, target="linear")
    old = {k: v for k, v in CostNetConfig().to_json().items() if k != "kernel_groups"}
    assert CostNetConfig.from_json(old).kernel_groups is False  # checkpoints before the option


@pytest.fixture(scope="module")
def profiles(tmp_path_factory) -> dict[str, Path]:
    """Two REAL small broad profiles of this machine, one per kernel backend."""
    out = {}
    for backend in (KernelBackend.FBGEMM, KernelBackend.TORCH):
        d = tmp_path_factory.mktemp(backend.value) / "costs"
        settings = replace(QUICK_MEASURE, backend=backend)
        for _ in profile(None, d, ProfileConfig(samples=16, seed=0, settings=settings,
                                                design=SMALL_BROAD_DESIGN)):
            pass
        out[backend.value] = d
    return out


@pytest.mark.parametrize(("backend", "flag", "expected"), [
    ("torch", "auto", True), ("fbgemm", "auto", False), ("torch", "off", False), ("fbgemm", "on", True)])
def test_train_cost_turns_kernel_groups_on_for_torch_backend_records(profiles, tmp_path, capsys, backend,
                                                                    flag, expected):
    model = tmp_path / "m.pt"
    assert main(["train-cost", "--data", str(profiles[backend]), "--epochs", "2", "--kernel-groups", flag,
                 "-o", str(model)]) == 0
    assert ("kernel groups: on" in capsys.readouterr().out) is expected  # the user is told
    loaded = LearnedCostModel.load(model)
    assert loaded.config.kernel_groups is expected
    task, shards = _a_device(profiles[backend])
    assert loaded.device_costs(task, [shards]).shape == (1, 3)


def _a_device(directory: Path):
    from autoshard.hardware.profile_dataset import load_dataset

    ds = load_dataset(directory)
    return ds.task_of(max(ds.records, key=lambda r: len(r.dims)))
