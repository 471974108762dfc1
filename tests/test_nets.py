"""Normalizer, actor std handling, rollout minibatching."""

import pytest
import torch

from ctrl_rl.config_onpolicy import PPOConfig
from ctrl_rl.nets.actor_critic import ActorCritic, GaussianActor
from ctrl_rl.nets.normalizer import EmpiricalNormalizer
from ctrl_rl.storage.rollout import RolloutStorage


def test_normalizer_batched_updates_equal_full_statistics():
    x = torch.randn(1000, 4) * torch.tensor([1.0, 5.0, 0.1, 2.0]) + torch.tensor([3.0, -1.0, 0.0, 10.0])
    norm = EmpiricalNormalizer(4, clip=None)
    for chunk in x.split(37):
        norm.update(chunk)
    assert torch.allclose(norm.mean, x.mean(0), atol=1e-4)
    assert torch.allclose(norm.var, x.var(0, unbiased=False), rtol=1e-4)
    assert norm.count.item() == 1000
    y = norm(x)
    assert torch.allclose(norm.denormalize(y), x, atol=1e-4)


def test_normalizer_clip_and_freeze():
    norm = EmpiricalNormalizer(1, clip=2.0, until=10)
    norm.update(torch.zeros(10, 1))
    norm.update(torch.full((10, 1), 100.0))  # frozen: ignored
    assert norm.mean.item() == 0.0
    assert norm(torch.tensor([[50.0]])).item() == 2.0


@pytest.mark.parametrize("std_type", ["scalar", "state_dependent"])
def test_actor_std_starts_at_init_and_respects_bounds(std_type):
    actor = GaussianActor(3, 2, [16], "elu", 0.5, std_type, 0.1, 2.0, normalize_obs=False)
    _, std = actor.distribution(torch.zeros(4, 3))
    assert std.shape == (4, 2)
    assert torch.allclose(std, torch.full_like(std, 0.5), atol=1e-2)
    with torch.no_grad():
        if std_type == "scalar":
            actor.log_std.fill_(50.0)
        else:
            actor.net[-1].bias[2:] = 50.0
    _, std = actor.distribution(torch.zeros(4, 3))
    assert torch.allclose(std, torch.full_like(std, 2.0))


def test_actor_critic_rejects_missing_obs_group():
    with pytest.raises(ValueError, match="critic_obs.*'critic'.*available"):
        ActorCritic({"policy": 3}, 1, PPOConfig(critic_obs=["critic"]))


def test_minibatches_fresh_permutation_each_epoch_and_full_coverage():
    s = RolloutStorage(4, 8, 2, 2, 1, torch.device("cpu"))
    s.actor_obs.copy_(torch.arange(32.0).reshape(4, 8, 1).expand(4, 8, 2))
    g = torch.Generator().manual_seed(0)
    epochs = []
    for _ in range(2):
        seen = torch.cat([mb.actor_obs[:, 0] for mb in s.minibatches(4, g)])
        assert sorted(seen.tolist()) == list(range(32))  # every sample exactly once per epoch
        epochs.append(seen)
    assert not torch.equal(epochs[0], epochs[1])
