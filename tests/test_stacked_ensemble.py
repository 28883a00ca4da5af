"""An ensemble's device path priced in one batched call (``StackedDeviceNets``, what planners use) agrees
with each member's own ``device_forward``, for every architecture option that changes that path."""

from __future__ import annotations

import pytest
import torch

from autoshard.costs.learned.network import CostNet, CostNetConfig, StackedDeviceNets
from autoshard.errors import AutoshardError


def _trained_looking(config: CostNetConfig, seed: int) -> CostNet:
    """A network whose every parameter is non-zero (a fresh additive one has a zero compute head, which
    would hide a mistake in the stacked head)."""
    torch.manual_seed(seed)
    net = CostNet(config)
    with torch.no_grad():
        for p in net.parameters():
            p.add_(0.1 * torch.randn_like(p))
        net.log_scale.uniform_(0.5, 2.0)
    return net.eval()


@pytest.mark.parametrize("config", [
    CostNetConfig(),
    CostNetConfig(kernel_groups=True, context=True, reuse=True),
    CostNetConfig(interaction=True, hidden=16, embed=8),
    CostNetConfig(additive=False, target="linear", hidden=16, embed=8),
], ids=["default", "kernel-groups", "interaction", "linear"])
def test_stacked_members_agree_with_each_member_alone(config):
    nets = [_trained_looking(config, seed) for seed in range(3)]
    feats = torch.randn(12, config.input_width)
    dims = torch.tensor([4, 8, 16, 32, 64, 128] * 2)
    # (2 episodes, 3 devices) of states: every member's vectors side by side, as the ensemble keeps them
    segment = torch.tensor([0, 0, 1, 1, 1, 2, 3, 4, 4, 5, 5, 5])
    states = []
    for net in nets:
        with torch.no_grad():
            vec = net.encode(feats, dims)
        states.append(torch.zeros(6, config.acc_width).index_add_(0, segment, vec))
    acc = torch.cat(states, dim=-1).reshape(2, 3, -1)
    got = StackedDeviceNets(nets).forward(acc)
    assert got.shape == (3, 2, 3, 2)
    for m, net in enumerate(nets):
        with torch.no_grad():
            _, alone = net.device_forward(states[m].reshape(2, 3, -1))
        torch.testing.assert_close(got[m], alone, rtol=1e-5, atol=1e-6)


def test_stacking_refuses_members_of_other_architectures():
    with pytest.raises(AutoshardError, match="differ in architecture"):
        StackedDeviceNets([CostNet(CostNetConfig()), CostNet(CostNetConfig(hidden=64))])
