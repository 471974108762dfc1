"""Flow-matching policy: a velocity field integrated from noise to an action (FPO's actor).

Rectified-flow convention (McAllister et al., "Flow Matching Policy Gradients"): the path from
action ``a`` (t = 0) to noise ``ε`` (t = 1) is ``x_t = t ε + (1 - t) a``, whose velocity
``dx_t/dt = ε - a`` is the conditional flow-matching (CFM) target. Sampling starts at
``x_1 = ε`` and takes ``num_steps`` Euler steps back to t = 0. The policy is a deterministic
function of ``(obs, ε)``: ``ε = 0`` gives the deterministic action that deployment runs, and
export keeps ``ε`` as a second input with the integration loop unrolled in the graph.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

from ctrl_rl.nets.mlp import mlp
from ctrl_rl.nets.normalizer import EmpiricalNormalizer


class FlowActor(nn.Module):
    """Observation normalizer -> velocity MLP on ``[obs, x_t, sin/cos(t)]``; Euler sampler."""

    def __init__(self, obs_dim: int, action_dim: int, hidden: Sequence[int], activation: str,
                 normalize_obs: bool, num_steps: int = 10, time_features: int = 4):
        super().__init__()
        self.action_dim, self.num_steps = action_dim, num_steps
        self.noise_dim = action_dim  # export: the graph gets a ``noise [batch, noise_dim]`` input
        self.normalizer: nn.Module = EmpiricalNormalizer(obs_dim) if normalize_obs else nn.Identity()
        # a small last layer: the initial field is ~0, so the first policy samples ≈ ε ~ N(0, I)
        self.net = mlp(obs_dim + action_dim + 2 * time_features, hidden, action_dim, activation, out_gain=0.01)
        self.register_buffer("freqs", math.pi * 2.0 ** torch.arange(time_features, dtype=torch.float32))

    def velocity(self, obs_n: torch.Tensor, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """``v(obs, x_t, t)`` for normalized ``obs_n [..., O]``, ``x [..., A]`` and ``t [...]``."""
        angle = t.unsqueeze(-1) * self.freqs
        return self.net(torch.cat([obs_n, x, angle.sin(), angle.cos()], dim=-1))

    def forward(self, obs: torch.Tensor, noise: torch.Tensor | None = None) -> torch.Tensor:
        """Action for raw ``obs [B, O]`` from initial noise ``[B, A]``; ``None``/zeros: deterministic."""
        obs_n = self.normalizer(obs)
        x = noise if noise is not None else obs.new_zeros(*obs.shape[:-1], self.action_dim)
        dt = 1.0 / self.num_steps
        for k in range(self.num_steps, 0, -1):  # t = 1, 1 - dt, ..., dt: unrolled when exported
            x = x - dt * self.velocity(obs_n, x, x.new_full(x.shape[:-1], k * dt))
        return x

    def cfm_loss(self, obs: torch.Tensor, actions: torch.Tensor, eps: torch.Tensor, t: torch.Tensor,
                 target: str = "velocity") -> torch.Tensor:
        """Per-pair CFM loss -> ``[B, n]``.

        ``obs [B, O]`` raw, ``actions [B, A]``, ``eps [B, n, A]``, ``t [B, n]``: n (ε, t) pairs per
        action. ``target="velocity"``: ``mean_j (v - (ε - a))_j²``. ``target="eps"``: the error of
        the noise the velocity implies, ``ε̂ = x_t + (1 - t) v``: ``mean_j (ε̂ - ε)_j² =
        (1 - t)² mean_j (v - (ε - a))_j²`` (FPO's reference default, which weighs the nearly-pure-noise
        end t -> 1 down to nothing). Its negative is (up to constants and weighting) a lower bound
        on log π(a|s), which is what FPO's ratio is built from.
        """
        n = eps.shape[1]
        obs_n = self.normalizer(obs).unsqueeze(1).expand(-1, n, -1)
        a = actions.unsqueeze(1)
        x_t = t.unsqueeze(-1) * eps + (1.0 - t.unsqueeze(-1)) * a
        err = (self.velocity(obs_n, x_t, t) - (eps - a)).square().mean(-1)
        if target == "eps":
            return (1.0 - t).square() * err
        if target != "velocity":
            raise ValueError(f"unknown CFM target '{target}'; choose one of: velocity, eps")
        return err
