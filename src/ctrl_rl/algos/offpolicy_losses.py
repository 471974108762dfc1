"""Pure off-policy loss and target functions (SAC, FastSAC, FastTD3, PQL).

Each is a function of tensors only, tested alone against hand-computed cases in
``tests/test_offpolicy_losses.py``. Notation follows Haarnoja et al. 2018 ("SAC v2",
*Soft Actor-Critic Algorithms and Applications*), Fujimoto et al. 2018 (TD3),
Bellemare et al. 2017 (C51) and Seo et al. 2025 (FastTD3). Shapes: ``E`` critics,
``B`` samples, ``D`` action dims, ``A`` atoms.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch
from torch import Tensor, nn

from ctrl_rl.nets.distributions import gaussian_log_prob

_LOG_2 = math.log(2.0)


def squashed_gaussian_log_prob(mean: Tensor, log_std: Tensor, u: Tensor) -> Tensor:
    """``log π(tanh u | s)`` for a pre-tanh sample ``u ~ N(mean, exp(log_std)^2)`` -> ``[B]``.

    Change of variables a = tanh(u) (SAC v2, appendix C, "enforcing action bounds"):

        log π(a|s) = log N(u; μ, σ²) - Σ_d log(1 - tanh²(u_d))
        log(1 - tanh² u) = 2 (log 2 - u - softplus(-2u))

    The right-hand form is exact and finite for any ``u``; the naive ``log(1 - tanh² u + eps)``
    saturates at |u| ≳ 9 in float32 (tanh rounds to ±1) and biases every log-prob by ``eps``.
    """
    log_det = 2.0 * (_LOG_2 - u - nn.functional.softplus(-2.0 * u))
    return gaussian_log_prob(u, mean, log_std.exp()) - log_det.sum(-1)


def squashed_gaussian_sample(mean: Tensor, log_std: Tensor, noise: Tensor) -> tuple[Tensor, Tensor]:
    """Reparameterized tanh-Gaussian action ``a = tanh(mean + exp(log_std) * noise)``.

    ``noise ~ N(0, I)`` is drawn by the caller (so the function stays pure and seedable).
    Returns ``(a[B, D], log_prob[B])`` with the tanh correction of :func:`squashed_gaussian_log_prob`.
    """
    u = mean + log_std.exp() * noise
    return torch.tanh(u), squashed_gaussian_log_prob(mean, log_std, u)


def soft_q_target(
    rewards: Tensor, discount: Tensor, next_q: Tensor, next_log_prob: Tensor, alpha: Tensor | float
) -> Tensor:
    """Soft Bellman target (SAC v2's backup ``r + γ V(s')`` with the soft value ``V = E[Q - α log π]``):

        y = r + discount · (Q̄(s', a') - α log π(a'|s')),   a' ~ π(·|s')

    ``discount`` already holds ``γ^m (1 - terminated)`` for an m-step transition whose ``rewards``
    is the discounted m-step sum (the replay buffer computes both), so a terminal transition
    bootstraps nothing and a truncated one bootstraps from its true final observation.
    Call it under ``torch.no_grad()``; the losses below detach their targets anyway.
    """
    return rewards + discount * (next_q - alpha * next_log_prob)


def clipped_double_q(qs: Tensor, mode: str = "min") -> Tensor:
    """Reduce an ensemble ``qs[E, B]`` of critic estimates to ``[B]``.

    ``"min"``: clipped double-Q (Fujimoto et al. 2018), the pessimistic min over critics.
    ``"mean"``: ensemble mean, as FastSAC does (REDQ-style averaging, no clipping).
    """
    if mode == "min":
        return qs.min(dim=0).values
    if mode == "mean":
        return qs.mean(dim=0)
    raise ValueError(f"clipped_double_q: mode must be 'min' or 'mean', got {mode!r}")


def sac_critic_loss(q_pred: Tensor, target: Tensor) -> Tensor:
    """Soft Q regression (SAC v2, J_Q): ``Σ_e ½ E_B[(Q_e(s, a) - y)²]`` for ``q_pred[E, B]``, ``target[B]``.

    The ½ and the sum over critics match Stable-Baselines3 (each critic gets its own full gradient;
    CleanRL drops the ½, which only rescales the learning rate). ``target`` is detached here.
    """
    return 0.5 * (q_pred - target.detach()).square().mean(dim=-1).sum()


def sac_actor_loss(log_prob: Tensor, q: Tensor, alpha: Tensor | float) -> Tensor:
    """Policy objective (SAC v2, reparameterized J_π): ``E[α log π(ã|s) - Q(s, ã)]``, ``ã`` reparameterized.

    ``alpha`` is treated as a constant (detached): the temperature has its own loss.
    """
    if isinstance(alpha, Tensor):
        alpha = alpha.detach()
    return (alpha * log_prob - q).mean()


def temperature_loss(log_alpha: Tensor, log_prob: Tensor, target_entropy: float) -> Tensor:
    """Automatic entropy tuning (SAC v2, J(α)), in log space as in Stable-Baselines3:

        J(α) = -E[log α · (log π(a|s) + H̄)]

    Its gradient ``-E[log π + H̄] = H(π) - H̄``: when the policy's entropy is above the target
    the gradient is positive and descent lowers α; below the target α grows.
    """
    return -(log_alpha * (log_prob + target_entropy).detach()).mean()


def deterministic_actor_loss(q: Tensor) -> Tensor:
    """Deterministic policy gradient objective (DDPG, TD3, PQL): ``-E[Q(s, μ(s))]``."""
    return -q.mean()


def td3_target_policy_noise(
    actions: Tensor, noise_std: Tensor | float, noise_clip: float, generator: torch.Generator | None = None
) -> Tensor:
    """Target policy smoothing (TD3): ``ã' = clip(μ'(s') + clip(ε, -c, c), -1, 1)``, ``ε ~ N(0, σ²)``.

    ``actions`` are the target actor's ``μ'(s')`` in the normalized box ``[-1, 1]``; ``noise_std``
    may be a per-sample tensor broadcastable to ``actions``. PQL uses σ = 0.8, c = 0.2.
    """
    eps = torch.randn(actions.shape, generator=generator, device=actions.device, dtype=actions.dtype)
    return (actions + (eps * noise_std).clamp(-noise_clip, noise_clip)).clamp(-1.0, 1.0)


def categorical_support(
    v_min: float,
    v_max: float,
    num_atoms: int,
    device: torch.device | str | None = None,
    dtype: torch.dtype | None = None,
) -> Tensor:
    """The fixed C51 support ``z_j = v_min + j Δz``, ``Δz = (v_max - v_min) / (A - 1)``."""
    return torch.linspace(v_min, v_max, num_atoms, device=device, dtype=dtype)


def categorical_projection(next_probs: Tensor, rewards: Tensor, discount: Tensor, v_min: float, v_max: float) -> Tensor:
    """Project ``r + discount · z`` onto the support z (C51, Bellemare et al. 2017, Algorithm 1).

    ``next_probs[B, A]`` are the target critic's probabilities at ``(s', a')``; ``rewards[B]`` and
    ``discount[B]`` (``γ^m (1 - terminated)``) as in :func:`soft_q_target`. Each shifted atom
    ``T z_j = clamp(r + discount · z_j, v_min, v_max)`` sits at fractional index
    ``b = (T z_j - v_min) / Δz`` and gives its mass to the neighbours ``l = ⌊b⌋``, ``u = ⌈b⌉``:

        m_l += p_j (u - b),   m_u += p_j (b - l)

    When ``b`` is an integer, ``l == u`` and both weights are 0, so Algorithm 1 as written drops
    ``p_j`` (the bug FastTD3 shipped); the ``+ [l == u]`` term gives it all to that atom. Targets
    outside the support clamp to the edge atoms; ``discount = 0`` puts all mass at ``clamp(r)``.
    Rows of the result sum to 1.
    """
    num_atoms = next_probs.shape[-1]
    z = categorical_support(v_min, v_max, num_atoms, device=next_probs.device, dtype=next_probs.dtype)
    delta_z = (v_max - v_min) / (num_atoms - 1)
    tz = (rewards.unsqueeze(-1) + discount.unsqueeze(-1) * z).clamp(v_min, v_max)
    b = ((tz - v_min) / delta_z).clamp(0, num_atoms - 1)  # clamp absorbs float round-off at the edges
    lower, upper = b.floor(), b.ceil()
    on_atom = (lower == upper).to(next_probs.dtype)
    projected = torch.zeros_like(next_probs)
    projected.scatter_add_(-1, lower.long(), next_probs * (upper - b + on_atom))
    projected.scatter_add_(-1, upper.long(), next_probs * (b - lower))
    return projected


def categorical_td_loss(logits: Tensor, target_probs: Tensor) -> Tensor:
    """Distributional TD loss (C51): cross-entropy ``-Σ_j m_j log p_j(s, a)``.

    ``logits[E, B, A]`` (or ``[B, A]``), ``target_probs[B, A]`` (shared) or ``[E, B, A]``, detached
    here. Mean over the batch, summed over critics, like :func:`sac_critic_loss`.
    """
    cross_entropy = -(target_probs.detach() * logits.log_softmax(dim=-1)).sum(dim=-1)
    return cross_entropy.mean(dim=-1).sum()


def categorical_mean(probs: Tensor, support: Tensor) -> Tensor:
    """Q value of a categorical critic: ``E[Z] = Σ_j p_j z_j`` over the last dim (pass
    ``logits.softmax(-1)`` for raw critic outputs). ``[E, B, A] -> [E, B]``."""
    return (probs * support).sum(dim=-1)


def lowest_mean_distribution(probs: Tensor, support: Tensor) -> Tensor:
    """Clipped double-Q for categorical critics (FastTD3): per sample, the distribution of the
    critic whose mean is lowest. ``probs[E, B, A] -> [B, A]``."""
    pick = categorical_mean(probs, support).argmin(dim=0)  # [B]
    return probs.gather(0, pick.view(1, -1, 1).expand(1, *probs.shape[1:])).squeeze(0)


def polyak_update(target: nn.Module | Iterable[Tensor], online: nn.Module | Iterable[Tensor], tau: float) -> None:
    """Soft target update ``θ̄ ← (1 - τ) θ̄ + τ θ`` (Lillicrap et al. 2016), in place.

    One ``torch._foreach_lerp_`` call updates every parameter (a single fused kernel on GPU).
    For modules, buffers (observation-normalizer statistics, BatchNorm counters) are *copied*,
    not averaged: they are estimates of the data, not learned weights, so a lagged average would
    scale the target network's inputs differently from the online one (and integer buffers
    cannot be interpolated). Plain iterables of tensors are all interpolated.
    """
    if isinstance(target, nn.Module) != isinstance(online, nn.Module):
        raise TypeError("polyak_update: target and online must both be nn.Modules or both be iterables of tensors")
    buffers: list[tuple[Tensor, Tensor]] = []
    if isinstance(target, nn.Module) and isinstance(online, nn.Module):
        buffers = list(zip(target.buffers(), online.buffers(), strict=True))
        target, online = target.parameters(), online.parameters()
    target_params, online_params = list(target), list(online)
    if len(target_params) != len(online_params):
        raise ValueError(
            f"polyak_update: {len(target_params)} target vs {len(online_params)} online tensors; "
            "the target network must be a copy of the online one"
        )
    with torch.no_grad():
        if target_params:
            torch._foreach_lerp_(target_params, online_params, tau)
        for target_buffer, online_buffer in buffers:
            target_buffer.copy_(online_buffer)
