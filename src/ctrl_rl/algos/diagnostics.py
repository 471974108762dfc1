"""Learner diagnostics that need a little optimization of their own.

Sampling error (Corrado & Hanna, "On-Policy Policy Gradient RL Without On-Policy Sampling"):
how far the *empirical* action distribution of a batch is from the policy it is meant to
represent. Fit ``π_D`` to the batch's ``(s, a)`` pairs by maximum likelihood (same network,
initialized from ``π_θ``), then report ``KL(π_D || π_θ)`` averaged over the batch's states.
Zero means the batch looks exactly like a sample from ``π_θ``; finite batches never quite do.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from ctrl_rl.nets.distributions import gaussian_kl, gaussian_log_prob

MLE_LEARNING_RATE = 1e-3
"""Adam step size of the maximum-likelihood fit (the PROPS authors' value)."""


def sampling_error(actor: nn.Module, obs: torch.Tensor, actions: torch.Tensor, steps: int,
                   lr: float = MLE_LEARNING_RATE) -> float:
    """``KL(π_D || π_θ)`` with ``π_D`` fitted to ``(obs, actions)`` by ``steps`` full-batch Adam steps.

    ``actor`` is any module with ``distribution(obs) -> (mean, std)`` (a Gaussian actor); it is
    copied, never changed. The KL is the closed form at each state, averaged (less noisy than
    the Monte-Carlo ``mean[log π_D(a|s) - log π_θ(a|s)]`` over the batch's actions).
    """
    mle = copy.deepcopy(actor)
    mle.requires_grad_(True)
    opt = torch.optim.Adam(mle.parameters(), lr=lr)
    for _ in range(steps):
        mean, std = mle.distribution(obs)
        loss = -gaussian_log_prob(actions, mean, std).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    with torch.no_grad():
        mean_d, std_d = mle.distribution(obs)
        mean, std = actor.distribution(obs)
        return float(gaussian_kl(mean_d, std_d, mean, std).mean())
