"""Pure on-policy loss and return functions (PPO and the learners built on it).

Each is a function of tensors only, tested alone against hand-computed cases in
``tests/test_losses.py``. Notation follows Schulman et al. 2016 (GAE) and 2017 (PPO).
"""

from __future__ import annotations

import torch


def compute_gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    next_values: torch.Tensor,
    terminated: torch.Tensor,
    dones: torch.Tensor,
    gamma: float,
    lam: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalized advantage estimation over a ``[T, N]`` rollout.

    ``next_values[t]`` is ``V(s_{t+1})`` of the *same* episode: for a step that ended in a
    time-limit truncation it is ``V(final_obs)``, the true last state, not the reset state.
    ``terminated`` zeroes the bootstrap (no value after a terminal state); ``dones``
    (terminated or truncated) cuts the λ-trace so advantages never leak across episodes.

        δ_t = r_t + γ (1 - term_t) V(s_{t+1}) - V(s_t)
        A_t = δ_t + γ λ (1 - done_t) A_{t+1}

    Returns ``(advantages, returns)`` with ``returns = advantages + values``.
    """
    not_term = 1.0 - terminated.to(values.dtype)
    not_done = 1.0 - dones.to(values.dtype)
    deltas = rewards + gamma * not_term * next_values - values
    advantages = torch.empty_like(values)
    last = torch.zeros_like(values[0])
    for t in range(values.shape[0] - 1, -1, -1):
        last = deltas[t] + gamma * lam * not_done[t] * last
        advantages[t] = last
    return advantages, advantages + values


LOG_RATIO_MAX = 20.0
"""``log ρ`` is clamped here before ``exp`` (verl's bound): ρ ≤ e^20 ≈ 4.9e8, where float32's ``exp`` overflows
past 88. A healthy update never comes near it (the KL control keeps ρ near 1); a sample far in the tail of its
reference policy does (16 envs, the polish's std 0.1, bf16: actions ~180 std from the recomputed old mean, and
``log ρ`` 394 after one step). Beyond the bound its gradient is 0, and the loss stays finite; the step it takes
is bounded by the gradient-norm clip."""


def ppo_surrogate_loss(
    log_prob: torch.Tensor, old_log_prob: torch.Tensor, advantages: torch.Tensor, clip: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """PPO's clipped surrogate, negated for minimization (Schulman et al. 2017, eq. 7).

        L = -E[min(ρ A, clip(ρ, 1-ε, 1+ε) A)],   ρ = π(a|s) / π_old(a|s),   log ρ ≤ LOG_RATIO_MAX

    Returns ``(loss, clip_fraction, approx_kl)`` where ``approx_kl = E[(ρ-1) - log ρ]``
    (Schulman's low-variance, always non-negative estimator).
    """
    log_ratio = (log_prob - old_log_prob).clamp(max=LOG_RATIO_MAX)
    ratio = log_ratio.exp()
    unclipped = ratio * advantages
    clipped = ratio.clamp(1.0 - clip, 1.0 + clip) * advantages
    loss = -torch.min(unclipped, clipped).mean()
    with torch.no_grad():
        clip_fraction = ((ratio - 1.0).abs() > clip).float().mean()
        approx_kl = ((ratio - 1.0) - log_ratio).mean()
    return loss, clip_fraction, approx_kl


def value_loss(
    values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor, clip: float | None
) -> torch.Tensor:
    """Squared value error; with ``clip``, PPO2's pessimistic clipped variant.

        L = E[max((V - R)^2, (V_old + clip(V - V_old, ±ε) - R)^2)]
    """
    unclipped = (values - returns).square()
    if clip is None:
        return unclipped.mean()
    clipped = old_values + (values - old_values).clamp(-clip, clip)
    return torch.max(unclipped, (clipped - returns).square()).mean()


def adaptive_kl_learning_rate(
    lr: float | torch.Tensor, kl: float | torch.Tensor, desired_kl: float, factor: float = 1.5,
    min_lr: float = 1e-5, max_lr: float = 1e-2,
) -> float | torch.Tensor:
    """rsl_rl's KL-adaptive schedule: shrink the step when the policy moved too far.

    ``lr / factor`` if ``kl > 2 desired``; ``lr * factor`` if ``0 < kl < desired / 2``;
    clamped to ``[min_lr, max_lr]``. Tensors in, a tensor out, computed on their device (no host
    sync: the compiled and CUDA-graph updates keep the learning rate there).
    """
    if isinstance(lr, torch.Tensor):
        kl = torch.as_tensor(kl, device=lr.device)
        grow = (kl > 0.0) & (kl < desired_kl / 2.0)
        lr = torch.where(kl > 2.0 * desired_kl, lr / factor, torch.where(grow, lr * factor, lr))
        return lr.clamp(min_lr, max_lr)
    if kl > 2.0 * desired_kl:
        lr = lr / factor
    elif 0.0 < kl < desired_kl / 2.0:
        lr = lr * factor
    return min(max(lr, min_lr), max_lr)


def explained_variance(predicted: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """``1 - Var[target - predicted] / Var[target]``: 1 is perfect, 0 is a constant guess."""
    var_target = target.var()
    return 1.0 - (target - predicted).var() / var_target.clamp_min(1e-12)


def props_behavior_loss(
    behavior_log_prob: torch.Tensor, target_log_prob: torch.Tensor, kl: torch.Tensor, clip: float, kl_coef: float
) -> torch.Tensor:
    """PROPS's behavior-policy objective (Corrado & Hanna 2024), minimized over φ.

        L = E[max(r, clip(r, 1-ε_P, 1+ε_P))] + λ KL(π_φ || π_θ),   r = π_φ(a|s) / π_θ(a|s)

    Lowering r on the actions already in the buffer makes the behavior policy favour the
    actions the buffer is short of. Once r < 1-ε_P the max is the constant 1-ε_P: no gradient,
    so no action is pushed arbitrarily far down (PPO's clip, mirrored). ``kl`` is the per-state
    KL(π_φ || π_θ) (closed form); the λ term keeps π_φ near the policy it must stand in for.
    """
    ratio = (behavior_log_prob - target_log_prob).exp()
    return torch.max(ratio, ratio.clamp(1.0 - clip, 1.0 + clip)).mean() + kl_coef * kl.mean()


def fpo_log_ratio(cfm_old: torch.Tensor, cfm_new: torch.Tensor, mode: str = "mean", clip: float = 3.0) -> torch.Tensor:
    """FPO's log likelihood-ratio surrogate from ``[B, n]`` CFM losses of the same (ε, t) pairs.

    A CFM loss is (up to constants) a negative ELBO of log π(a|s), so a lower loss under the
    new policy stands for a likelier action (McAllister et al. 2025, eq. 10):

        mean:        log ρ   = mean_i ℓ_old,i − mean_i ℓ_θ,i          -> ``[B]``
        per_sample:  log ρ_i = clip(ℓ_old,i − ℓ_θ,i, −clip, clip)     -> ``[B, n]``
    """
    if mode == "mean":
        return cfm_old.mean(-1) - cfm_new.mean(-1)
    if mode == "per_sample":
        return (cfm_old - cfm_new).clamp(-clip, clip)
    raise ValueError(f"unknown FPO ratio mode '{mode}'; choose one of: mean, per_sample")


def distillation_loss(student_mean: torch.Tensor, teacher_mean: torch.Tensor, kind: str = "mse",
                      student_std: torch.Tensor | None = None, teacher_std: torch.Tensor | None = None) -> torch.Tensor:
    """The student's action error to the teacher's, on states the student visited (DAgger).

    ``mse``: ``mean((mu_s - mu_t)^2)`` over samples and action dims (rsl_rl's behaviour loss);
    ``kl``: ``mean_b KL(pi_t || pi_s)`` of the two diagonal Gaussians (summed over action dims), which
    also fits the student's std to the teacher's.
    """
    if kind == "mse":
        return ((student_mean - teacher_mean) ** 2).mean()
    if kind == "kl":
        if student_std is None or teacher_std is None:
            raise ValueError("the KL distillation loss needs both standard deviations")
        var_s, var_t = student_std**2, teacher_std**2
        kl = torch.log(student_std / teacher_std) + (var_t + (teacher_mean - student_mean) ** 2) / (2 * var_s) - 0.5
        return kl.sum(-1).mean()
    raise ValueError(f"unknown distillation loss {kind!r}; choose mse or kl")


def teacher_mix(iteration: int, start: float, iterations: int) -> float:
    """DAgger's beta: the probability that the teacher's action is executed instead of the student's,
    ``start`` at iteration 0 falling linearly to 0 at ``iterations`` (0: never mixed)."""
    if iterations <= 0:
        return 0.0
    return start * max(0.0, 1.0 - iteration / iterations)


def smoothness_neighbours(actor_obs: torch.Tensor, dones: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor,
                                                                              torch.Tensor]:
    """Each step's previous and next observation in its env, and whether both are in the same episode.

    ``actor_obs``: ``[T, N, D]``; ``dones``: ``[T, N]`` (the episode ended at step t, so step t + 1 is
    another episode's first). Returns ``(prev [T, N, D], next [T, N, D], valid [T, N])``: the rollout's
    first and last steps have one neighbour only and are not valid, nor is a step next to an episode's end.
    """
    prev = torch.cat([actor_obs[:1], actor_obs[:-1]], 0)
    nxt = torch.cat([actor_obs[1:], actor_obs[-1:]], 0)
    valid = torch.zeros_like(dones)
    valid[1:-1] = ~dones[:-2] & ~dones[1:-1]
    return prev, nxt, valid


def action_smoothness_loss(prev_mean: torch.Tensor, mean: torch.Tensor, next_mean: torch.Tensor,
                           valid: torch.Tensor) -> torch.Tensor:
    """Temporal smoothness of the policy's mean action (CAPS, Mysore et al. 2021, on the second difference):
    ``mean over valid steps and action dims of (mu(s_{t+1}) - 2 mu(s_t) + mu(s_{t-1}))^2``.

    The second difference is what the gait report's ``action smoothness`` measures (its RMS): a gait's
    steady swing costs little (a 2.5 Hz sine of amplitude 1 at 50 Hz: 0.005), tick-to-tick jitter a lot
    (alternating +-0.25: 1.0). On the mean, not the sampled action, so it shapes the policy that is
    deployed and never fights the exploration noise; no valid step gives 0."""
    d2 = ((next_mean - 2.0 * mean + prev_mean) ** 2).mean(-1)
    w = valid.to(d2.dtype)
    return (d2 * w).sum() / w.sum().clamp(min=1.0)


def jacobian_penalty(outputs: torch.Tensor, inputs: torch.Tensor, probe: torch.Tensor,
                     mask: torch.Tensor | None = None) -> torch.Tensor:
    """The Lipschitz penalty of LCP (Chen et al. 2024, "Learning Smooth Humanoid Locomotion through
    Lipschitz-Constrained Policies"): ``mean over the batch of ||d outputs_b / d inputs_b||_F^2``, estimated
    with one probe per sample (Hutchinson: ``E ||J^T v||^2 = ||J||_F^2`` for ``v ~ N(0, I)``).

    ``outputs`` ``[B, A]`` computed row by row from ``inputs`` ``[B, D]`` (which requires grad); ``probe``
    ``[B, A]``. Differentiable (``create_graph``), so the penalty trains the network. LCP penalizes the
    gradient of ``log pi(a | s)``, which for a Gaussian is ``J^T eps / sigma``: the same probe (the
    exploration noise ``eps``) without the ``1 / sigma`` factor, so the weight keeps one meaning as the
    policy's std shrinks. A linear map ``x W^T`` with probe ``e_k`` gives ``||W[k]||^2``. ``mask`` ``[D]``
    (1 or 0 per input) keeps only those inputs' columns of the Jacobian."""
    (grad,) = torch.autograd.grad((outputs * probe).sum(), inputs, create_graph=True)
    if mask is not None:
        grad = grad * mask
    return grad.square().sum(-1).mean()
