"""A learned dynamics-model ensemble: ``(s, a) -> (s', r, terminal)``, for offline policy evaluation.

Each member predicts a Gaussian over the normalized ``[s' - s, r]`` (mean and a soft-bounded
log variance, as in PETS/MBPO) and a termination logit. Members share one batched module
(``EnsembleLinear``: one matmul per layer for all E). After training, the ``num_elites``
members with the lowest held-out error are the ones rollouts use; each rolled sample follows one
elite chosen at random (the model's disagreement shows up as spread, not as an average).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from ctrl_rl.nets.mlp import ACTIVATIONS
from ctrl_rl.nets.normalizer import EmpiricalNormalizer
from ctrl_rl.nets.sac import EnsembleLinear


class DynamicsEnsemble(nn.Module):
    """``E`` probabilistic dynamics models ``[E, B, obs + act] -> mean, log_var [E, B, obs + 1], logit [E, B]``."""

    def __init__(self, obs_dim: int, action_dim: int, hidden: Sequence[int], activation: str,
                 num_members: int, num_elites: int):
        super().__init__()
        if not 0 < num_elites <= num_members:
            raise ValueError(f"num_elites must be in 1..num_members={num_members}, got {num_elites}")
        self.obs_dim, self.num_members = obs_dim, num_members
        out = obs_dim + 1  # [Δs, r]
        layers: list[nn.Module] = []
        dims = [obs_dim + action_dim, *hidden]
        for d_in, d_out in zip(dims[:-1], dims[1:], strict=True):
            layers += [EnsembleLinear(num_members, d_in, d_out), ACTIVATIONS[activation]()]
        self.trunk = nn.Sequential(*layers)
        self.head = EnsembleLinear(num_members, dims[-1], 2 * out + 1)
        self.max_log_var = nn.Parameter(torch.full((out,), 0.5))
        self.min_log_var = nn.Parameter(torch.full((out,), -10.0))
        self.obs_normalizer = EmpiricalNormalizer(obs_dim, clip=None)
        self.target_normalizer = EmpiricalNormalizer(out, eps=1e-6, clip=None)
        self.register_buffer("elites", torch.arange(num_elites))

    @torch.no_grad()
    def fit_normalizers(self, obs: torch.Tensor, next_obs: torch.Tensor, rewards: torch.Tensor) -> None:
        """Input and target statistics from the dataset (once, before training)."""
        for norm in (self.obs_normalizer, self.target_normalizer):
            norm.count.zero_()
        self.obs_normalizer.update(obs)
        self.target_normalizer.update(torch.cat([next_obs - obs, rewards.unsqueeze(-1)], -1))

    def forward(self, obs: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``obs [E, B, obs]`` (or ``[B, obs]``, shared) -> normalized-target ``(mean, log_var)`` and the
        termination logit ``[E, B]``."""
        x = torch.cat([self.obs_normalizer(obs), actions], -1)
        if x.dim() == 2:
            x = x.unsqueeze(0).expand(self.num_members, *x.shape)
        out = self.head(self.trunk(x))
        d = self.obs_dim + 1
        mean, log_var, logit = out[..., :d], out[..., d:2 * d], out[..., -1]
        log_var = self.max_log_var - F.softplus(self.max_log_var - log_var)
        log_var = self.min_log_var + F.softplus(log_var - self.min_log_var)
        return mean, log_var, logit

    def targets(self, obs: torch.Tensor, next_obs: torch.Tensor, rewards: torch.Tensor) -> torch.Tensor:
        """Normalized ``[s' - s, r]``: what ``forward``'s mean predicts."""
        return self.target_normalizer(torch.cat([next_obs - obs, rewards.unsqueeze(-1)], -1))

    @torch.no_grad()
    def select_elites(self, obs: torch.Tensor, actions: torch.Tensor, next_obs: torch.Tensor,
                      rewards: torch.Tensor) -> torch.Tensor:
        """Keep the members with the lowest held-out squared error; returns every member's error ``[E]``."""
        mean, _, _ = self(obs, actions)
        err = (mean - self.targets(obs, next_obs, rewards)).square().mean(dim=(-2, -1))
        self.elites.copy_(err.argsort()[: len(self.elites)])
        return err

    @torch.no_grad()
    def step(self, obs: torch.Tensor, actions: torch.Tensor,
             generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One model step from ``obs [B, obs]``: ``(next_obs, reward, terminal)``, each sample's
        prediction the mean of one elite drawn at random."""
        mean, _, logit = self(obs, actions)
        pick = self.elites[torch.randint(len(self.elites), (obs.shape[0],), generator=generator, device=obs.device)]
        rows = torch.arange(obs.shape[0], device=obs.device)
        delta = self.target_normalizer.denormalize(mean[pick, rows])
        return obs + delta[:, :-1], delta[:, -1], logit[pick, rows] > 0
