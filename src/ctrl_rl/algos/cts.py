"""Concurrent Teacher-Student (``algo=cts``; Wang et al. 2024): PPO on envs split between a teacher and
a student that share the actor MLP and the critic (``ctrl_rl/nets/cts.py``).

Everything PPO does is unchanged; the model gives each sample its role's latent, and the head adds
the latent regression ``latent_coef * mean((z_student - sg(z_teacher))^2)`` to the actor's loss
(``Loss/latent``), from the same encoder pass as the surrogate's. The student reads only what the
robot measures and is what export writes.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ctrl_rl.algos.heads import GaussianHead
from ctrl_rl.algos.ppo import PPO
from ctrl_rl.algos.registry import register_learner
from ctrl_rl.config_onpolicy import CTSConfig
from ctrl_rl.nets.cts import CTSActorCritic, StudentPolicy
from ctrl_rl.storage.rollout import Minibatch


class CTSHead(GaussianHead):
    """The Gaussian head with the latent regression beside the surrogate; the deterministic policy is
    the student's."""

    def loss(self, actor: nn.Module, mb: Minibatch, cfg: Any) -> tuple[torch.Tensor, torch.Tensor,
                                                                      dict[str, torch.Tensor]]:
        mean, std, latent = actor.distribution_and_latent_loss(mb.actor_obs)
        surrogate, entropy, stats = self.surrogate(mean, std, mb, cfg)
        return surrogate, entropy, {**stats, "latent": latent.detach(), "aux": cfg.latent_coef * latent}

    def inference_policy(self, model: nn.Module) -> nn.Module:
        return StudentPolicy(model.actor)


def make_cts(cfg: CTSConfig, obs_dims: dict[str, int], action_dim: int, num_envs: int, device: torch.device | str,
             seed: int = 0, action_bounds: tuple[float, float] | None = (-1.0, 1.0),
             inference_only: bool = False) -> PPO:
    return PPO(cfg, obs_dims, action_dim, num_envs, device, seed=seed, model=CTSActorCritic(obs_dims, action_dim, cfg),
               head=CTSHead())


register_learner("cts", config=CTSConfig, build=make_cts, loop="online", torchrun=True)
