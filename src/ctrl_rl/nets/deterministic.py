"""Deterministic tanh actor (DDPG / TD3 / PQL) and PQL's networks; the critic ensemble is SAC's."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch
from torch import nn

from ctrl_rl.nets.groups import GroupedModel
from ctrl_rl.nets.mlp import mlp
from ctrl_rl.nets.normalizer import EmpiricalNormalizer
from ctrl_rl.nets.sac import QEnsemble

if TYPE_CHECKING:
    from ctrl_rl.config_offpolicy import PQLConfig


class DeterministicActor(nn.Module):
    """Observation normalizer -> MLP -> tanh, mapped onto the env's action bounds.

    The normalizer and the MLP are separate children because PQL's roles own them separately:
    the actor role updates the observation statistics, the P-learner trains ``net``. ``forward``
    is the deployed policy (export and evaluation run it); ``normalized`` gives the [-1, 1] action
    the critics and the replay buffer work in.
    """

    def __init__(self, obs_dim: int, action_dim: int, hidden: Sequence[int], activation: str,
                 normalize_obs: bool, action_bounds: tuple[float, float] | None):
        super().__init__()
        self.action_dim = action_dim
        self.normalizer: nn.Module = EmpiricalNormalizer(obs_dim) if normalize_obs else nn.Identity()
        # a small last layer starts the policy near a = 0 instead of saturating tanh (TD3 practice)
        self.net = mlp(obs_dim, hidden, action_dim, activation, out_gain=0.01)
        low, high = action_bounds if action_bounds is not None else (-1.0, 1.0)
        self.register_buffer("action_center", torch.tensor((high + low) / 2))
        self.register_buffer("action_half_range", torch.tensor((high - low) / 2))

    def normalized(self, obs: torch.Tensor) -> torch.Tensor:
        """``tanh(net(normalize(obs)))`` in [-1, 1] for raw ``obs``."""
        return torch.tanh(self.net(self.normalizer(obs)))

    def to_env(self, action: torch.Tensor) -> torch.Tensor:
        """[-1, 1] actions -> the env's action range."""
        return self.action_center + self.action_half_range * action

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """The deterministic env action for raw ``obs``: what export and evaluation run."""
        return self.to_env(self.normalized(obs))


class PQLModel(GroupedModel):
    """PQL's networks: deterministic actor, its target MLP, a critic ensemble, its target, and the
    critic's observation normalizer (outside the ensemble so online and target critics see the same
    inputs; the actor's normalizer is inside the actor, exported with it)."""

    def __init__(self, obs_dims: dict[str, int], action_dim: int, cfg: PQLConfig,
                 action_bounds: tuple[float, float] | None):
        super().__init__(obs_dims, cfg.actor_obs, cfg.critic_obs)
        critic_dim = self.critic_dim
        self.actor = DeterministicActor(self.actor_dim, action_dim, cfg.actor_hidden, cfg.activation,
                                        cfg.normalize_obs, action_bounds)
        self.actor_target = copy.deepcopy(self.actor.net).requires_grad_(False)
        out = cfg.num_atoms if cfg.distributional else 1
        self.critic = QEnsemble(critic_dim, action_dim, cfg.critic_hidden, cfg.activation, cfg.num_critics, out)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        self.critic_normalizer: nn.Module = EmpiricalNormalizer(critic_dim) if cfg.normalize_obs else nn.Identity()
