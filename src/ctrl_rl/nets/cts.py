"""The Concurrent Teacher-Student model (Wang et al. 2024): two encoders, one actor MLP, one critic.

The actor's input during training is ``[student obs, teacher obs, role]``: ``role`` is 1 for the envs
the teacher drives. Each sample's latent comes from its role's encoder (the teacher's reads the
privileged groups, the student's the deployable ones) and the shared Gaussian actor MLP reads
``[latent, student obs]``. As in the paper, the privileged encoder learns from the policy gradient and
the student's encoder from the latent regression alone: the student's latent enters the actor
detached. The exported policy is the student's path alone (:class:`StudentPolicy`), on the
deployable groups only.
"""

from __future__ import annotations

import torch
from torch import nn

from ctrl_rl.config_onpolicy import CTSConfig
from ctrl_rl.env import Obs
from ctrl_rl.nets.actor_critic import GaussianActor, ValueCritic
from ctrl_rl.nets.groups import GroupedModel, concat_groups, resolve_groups
from ctrl_rl.nets.mlp import mlp
from ctrl_rl.nets.normalizer import EmpiricalNormalizer


def teacher_rows(num_envs: int, fraction: float, device: torch.device | str) -> torch.Tensor:
    """``[num_envs, 1]`` float: 1 for the first ``round(fraction * num_envs)`` envs (the teacher's)."""
    return (torch.arange(num_envs, device=device) < round(fraction * num_envs)).float()[:, None]


class CTSActor(nn.Module):
    """``distribution(x)`` on ``x = [student obs (S), teacher obs (P), role (1)]``, and the latent loss."""

    def __init__(self, student_dim: int, teacher_dim: int, action_dim: int, cfg: CTSConfig):
        super().__init__()
        self.student_dim, self.teacher_dim = student_dim, teacher_dim
        self.normalizer: nn.Module = EmpiricalNormalizer(student_dim + teacher_dim + 1) if cfg.normalize_obs \
            else nn.Identity()
        """One normalizer over the whole input (the role column is normalized too but read raw)."""
        self.student_encoder = mlp(student_dim, cfg.encoder_hidden, cfg.latent_dim, cfg.activation)
        self.teacher_encoder = mlp(teacher_dim, cfg.encoder_hidden, cfg.latent_dim, cfg.activation)
        self.policy = GaussianActor(cfg.latent_dim + student_dim, action_dim, cfg.actor_hidden, cfg.activation,
                                    cfg.init_std, cfg.std_type, cfg.min_std, cfg.max_std, normalize_obs=False)

    def latents(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(student latent, teacher latent, normalized student obs)`` of raw input ``x``."""
        y = self.normalizer(x)
        s, p = y[:, : self.student_dim], y[:, self.student_dim : self.student_dim + self.teacher_dim]
        return self.student_encoder(s), self.teacher_encoder(p), s

    def _policy(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(mean, std, z_student, z_teacher)``: each sample's policy from its role's latent."""
        z_s, z_t, s = self.latents(x)
        z = torch.where(x[:, -1:] > 0.5, z_t, z_s.detach())  # the student encoder: latent loss only
        mean, std = self.policy.distribution(torch.cat([z, s], -1))
        return mean, std, z_s, z_t

    def distribution_and_latent_loss(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(mean, std, mean((z_student - sg(z_teacher))^2))``: the policy of each sample's role and the
        latent regression over the samples of both roles, from one pass of the encoders."""
        mean, std, z_s, z_t = self._policy(x)
        return mean, std, ((z_s - z_t.detach()) ** 2).mean()

    def distribution(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self._policy(x)[:2]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.distribution(x)[0]

    def latent_loss(self, x: torch.Tensor) -> torch.Tensor:
        """``mean((z_student - sg(z_teacher))^2)`` over the samples of both roles."""
        return self.distribution_and_latent_loss(x)[2]


class StudentPolicy(nn.Module):
    """The deterministic student on the deployable groups alone: its slice of the normalizer, its
    encoder and the shared actor MLP (what export writes)."""

    def __init__(self, actor: CTSActor):
        super().__init__()
        self.actor = actor

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        a, n = self.actor, self.actor.student_dim
        norm = a.normalizer
        if isinstance(norm, EmpiricalNormalizer):
            y = (obs - norm.mean[:n]) / (norm.std[:n] + norm.eps)
            s = y.clamp(-norm.clip, norm.clip) if norm.clip is not None else y
        else:
            s = obs
        return a.policy(torch.cat([a.student_encoder(s), s], -1))


class CTSActorCritic(GroupedModel):
    """``actor_obs``: the student's (deployable) groups, what export reads; the actor's training input
    adds ``teacher_obs`` and the role column (:meth:`actor_input`); the critic is shared."""

    def __init__(self, obs_dims: dict[str, int], action_dim: int, cfg: CTSConfig):
        super().__init__(obs_dims, cfg.actor_obs, cfg.critic_obs)
        self.teacher_obs, _ = resolve_groups(obs_dims, cfg.teacher_obs, None)
        self.teacher_fraction = cfg.teacher_fraction
        student_dim = self.actor_dim
        teacher_dim = sum(obs_dims[g] for g in self.teacher_obs)
        self.actor_dim = student_dim + teacher_dim + 1
        self.actor_memory = self.critic_memory = None
        self.actor = CTSActor(student_dim, teacher_dim, action_dim, cfg)
        self.critic = ValueCritic(self.critic_dim, cfg.critic_hidden, cfg.activation, cfg.normalize_obs)

    @property
    def critic_normalizer(self) -> nn.Module:
        return self.critic.normalizer

    def actor_input(self, obs: Obs) -> torch.Tensor:
        student = concat_groups(obs, self.actor_obs)
        role = teacher_rows(student.shape[0], self.teacher_fraction, student.device)
        return torch.cat([student, concat_groups(obs, self.teacher_obs), role], -1)
