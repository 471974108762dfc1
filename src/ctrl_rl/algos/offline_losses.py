"""Pure loss functions of the offline learners (Uni-O4's offline phase).

Each is a function of tensors only, tested against hand-computed cases in
``tests/test_offline_losses.py``. Notation follows Kostrikov et al. 2022 (IQL), Zhuang et al.
2023 (BPPO) and Lei et al. 2024 (Uni-O4).
"""

from __future__ import annotations

import torch


def ensemble_bc_loss(log_probs: torch.Tensor, alpha: float) -> torch.Tensor:
    """Uni-O4's ensemble behavior cloning loss, one value per member: ``[K, B] -> [K]``.

        L_i = E[-log π_i(a|s) - α (log π_i(a|s) - max_{j≠i} log π_j(a|s))]

    ``log_probs[i]`` is ``log π_i`` of the dataset's actions. The max over the other members is
    a constant to member i (detached, as in the reference code), so its gradient is that of
    ``-(1+α) log π_i``: members still differ through their own initialization and samples. With
    one member the disagreement term is dropped.
    """
    k = log_probs.shape[0]
    if k == 1:
        return -log_probs.mean(-1)
    others = log_probs.detach().unsqueeze(0).expand(k, k, -1).clone()  # [i, j, B]
    others[torch.arange(k), torch.arange(k)] = -torch.inf  # exclude j == i
    best_other = others.max(dim=1).values  # [K, B]
    return (-log_probs - alpha * (log_probs - best_other)).mean(-1)


def expectile_loss(diff: torch.Tensor, tau: float) -> torch.Tensor:
    """IQL's asymmetric squared loss ``E[|τ - 1(u < 0)| u²]`` of ``u = Q(s, a) - V(s)``.

    ``τ = 0.5`` is plain regression (V fits E_a[Q]: SARSA-style values of the behavior policy);
    ``τ → 1`` fits an upper expectile (V approaches max over in-data actions).
    """
    weight = torch.where(diff < 0, 1.0 - tau, tau)
    return (weight * diff.square()).mean()


def td_target(rewards: torch.Tensor, terminals: torch.Tensor, next_values: torch.Tensor, gamma: float) -> torch.Tensor:
    """One-step target ``r + γ (1 - terminal) V(s')`` (IQL's Q target; a timeout bootstraps)."""
    return rewards + gamma * (1.0 - terminals.to(rewards.dtype)) * next_values


def weighted_advantage(advantages: torch.Tensor, omega: float) -> torch.Tensor:
    """Uni-O4's asymmetric weighting: ``ω A`` where ``A > 0``, ``(1 - ω) A`` elsewhere (0.5 = off).

    Above 0.5 it trusts improvements more than it punishes worse-than-average actions, whose
    advantages from an offline Q are the least reliable.
    """
    return torch.where(advantages > 0, omega * advantages, (1.0 - omega) * advantages)


def gaussian_nll_loss(mean: torch.Tensor, log_var: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Per-member Gaussian negative log-likelihood (constant dropped), ``[E, B, D] -> [E]``:
    ``mean over B, D of (μ - y)² e^{-log σ²} + log σ²`` (the dynamics ensemble's loss, as in PETS/MBPO)."""
    return ((mean - target).square() * torch.exp(-log_var) + log_var).mean(dim=(-2, -1))


def decayed_clip(clip: float, decay: float, step: int) -> float:
    """BPPO's decaying clip range ``ε decay^k`` at improvement step k (BPPO's reference code multiplies
    it by ``decay`` every gradient step: with 0.96 the policy may move ~25% per step at first and
    almost nothing after ~100 steps, which keeps the improvement close to the data)."""
    return clip * decay**step
