"""Networks of the off-policy learners: a tanh-squashed Gaussian actor and a critic ensemble.

The ensemble is one module whose layers hold a weight per member (``[E, in, out]``, one batched
matmul per layer) rather than E separate MLPs: E critics cost about one kernel launch per layer,
which is what makes 2-10 critics cheap at FastSAC's batch sizes, and it compiles cleanly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

from ctrl_rl.nets.groups import GroupedModel
from ctrl_rl.nets.mlp import ACTIVATIONS, mlp
from ctrl_rl.nets.normalizer import EmpiricalNormalizer


class SquashedGaussianActor(nn.Module):
    """Observation normalizer -> MLP -> (mean, log std) of a Gaussian squashed by tanh (SAC).

    ``forward`` is the deterministic policy deployment runs: ``tanh(mean)`` mapped onto the env's
    action bounds ``[low, high]`` (``None``: the env takes [-1, 1] as is).
    """

    def __init__(self, obs_dim: int, action_dim: int, hidden: Sequence[int], activation: str,
                 log_std_min: float, log_std_max: float, normalize_obs: bool,
                 action_bounds: tuple[float, float] | None):
        super().__init__()
        self.action_dim = action_dim
        self.log_std_min, self.log_std_max = log_std_min, log_std_max
        self.normalizer: nn.Module = EmpiricalNormalizer(obs_dim) if normalize_obs else nn.Identity()
        self.net = mlp(obs_dim, hidden, 2 * action_dim, activation)
        low, high = action_bounds if action_bounds is not None else (-1.0, 1.0)
        self.register_buffer("action_center", torch.tensor((high + low) / 2))
        self.register_buffer("action_half_range", torch.tensor((high - low) / 2))

    def distribution(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Pre-tanh ``(mean, log_std)`` for raw ``obs``; log std squashed smoothly into its bounds
        (CleanRL's tanh rescaling: no dead gradient at a hard clamp)."""
        mean, log_std = self.net(self.normalizer(obs)).chunk(2, dim=-1)
        log_std = torch.tanh(log_std)
        log_std = self.log_std_min + 0.5 * (self.log_std_max - self.log_std_min) * (log_std + 1)
        return mean, log_std

    def to_env(self, squashed: torch.Tensor) -> torch.Tensor:
        """[-1, 1] actions -> the env's action range."""
        return self.action_center + self.action_half_range * squashed

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Deterministic env action ``to_env(tanh(mean))``: what export and evaluation run."""
        return self.to_env(torch.tanh(self.distribution(obs)[0]))


class EnsembleLinear(nn.Module):
    """``E`` independent linear layers applied to ``x[E, B, in]`` in one batched matmul."""

    def __init__(self, num_members: int, in_dim: int, out_dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(num_members, in_dim, out_dim))
        self.bias = nn.Parameter(torch.empty(num_members, 1, out_dim))
        bound = 1.0 / math.sqrt(in_dim)  # nn.Linear's default init, per member
        nn.init.uniform_(self.weight, -bound, bound)
        nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.baddbmm(self.bias, x, self.weight)


class QEnsemble(nn.Module):
    """``E`` critics ``Q_i(s, a)``: ``[B, obs] x [B, act] -> [E, B, out]`` (``out`` = 1 or C51 atoms)."""

    def __init__(self, obs_dim: int, action_dim: int, hidden: Sequence[int], activation: str,
                 num_members: int, out_dim: int = 1, layer_norm: bool = False):
        super().__init__()
        self.num_members = num_members
        layers: list[nn.Module] = []
        dims = [obs_dim + action_dim, *hidden]
        for d_in, d_out in zip(dims[:-1], dims[1:], strict=True):
            layers.append(EnsembleLinear(num_members, d_in, d_out))
            if layer_norm:  # normalizes each member's features on its own (last dim)
                layers.append(nn.LayerNorm(d_out))
            layers.append(ACTIVATIONS[activation]())
        layers.append(EnsembleLinear(num_members, dims[-1], out_dim))
        self.net = nn.Sequential(*layers)

    def forward(self, obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        x = torch.cat([obs, actions], dim=-1)
        return self.net(x.unsqueeze(0).expand(self.num_members, *x.shape))


class SACModel(GroupedModel):
    """Actor, critic ensemble, its Polyak-averaged target, and the critic's observation normalizer.

    The critic normalizer sits outside the ensemble so online and target critics see the same
    normalized inputs; the actor's normalizer is inside the actor (exported with it).
    """

    def __init__(self, obs_dims: dict[str, int], action_dim: int, cfg, action_bounds: tuple[float, float] | None):
        super().__init__(obs_dims, cfg.actor_obs, cfg.critic_obs)
        critic_dim = self.critic_dim
        self.actor = SquashedGaussianActor(self.actor_dim, action_dim, cfg.actor_hidden, cfg.activation,
                                           cfg.log_std_min, cfg.log_std_max, cfg.normalize_obs, action_bounds)
        out = cfg.num_atoms if cfg.distributional else 1
        self.critic = QEnsemble(critic_dim, action_dim, cfg.critic_hidden, cfg.activation, cfg.num_critics,
                                out, cfg.layer_norm)
        self.critic_target = QEnsemble(critic_dim, action_dim, cfg.critic_hidden, cfg.activation,
                                       cfg.num_critics, out, cfg.layer_norm)
        self.critic_target.load_state_dict(self.critic.state_dict())
        self.critic_target.requires_grad_(False)
        self.critic_normalizer: nn.Module = EmpiricalNormalizer(critic_dim) if cfg.normalize_obs else nn.Identity()
