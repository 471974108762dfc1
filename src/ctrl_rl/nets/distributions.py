"""Diagonal Gaussian math as plain functions (no ``torch.distributions`` object overhead)."""

from __future__ import annotations

import math

import torch

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


def gaussian_log_prob(actions: torch.Tensor, mean: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
    """``log N(actions; mean, diag(std^2))`` summed over the last dim -> ``[batch]``."""
    z = (actions - mean) / std
    return (-0.5 * z.square() - std.log() - _LOG_SQRT_2PI).sum(-1)


def censored_gaussian_log_prob(actions: torch.Tensor, mean: torch.Tensor, std: torch.Tensor,
                                bounds: tuple[float, float] | None) -> torch.Tensor:
    """Log-likelihood of actions an env clipped to ``bounds`` (a Tobit likelihood), summed over the
    last dim -> ``[batch]``.

    A recorded action at (or beyond) a bound says only that the draw was at or beyond it, so it
    scores the tail mass ``log P(x >= high)`` (or ``log P(x <= low)``); every other action its
    density. With the plain density a policy fitted to clipped data pulls its mean inside the
    bounds, and a clone of a policy that pushes against them acts weaker than its source.
    ``bounds=None``: the plain Gaussian log-density.
    """
    if bounds is None:
        return gaussian_log_prob(actions, mean, std)
    low, high = bounds
    tol = 1e-6 * max(1.0, abs(low), abs(high))  # a bound stored in float32
    density = -0.5 * ((actions - mean) / std).square() - std.log() - _LOG_SQRT_2PI
    upper = torch.special.log_ndtr((mean - high) / std)
    lower = torch.special.log_ndtr((low - mean) / std)
    return torch.where(actions >= high - tol, upper, torch.where(actions <= low + tol, lower, density)).sum(-1)


def gaussian_entropy(std: torch.Tensor) -> torch.Tensor:
    """Entropy of a diagonal Gaussian, summed over the last dim."""
    return (std.log() + 0.5 + _LOG_SQRT_2PI).sum(-1)


def gaussian_kl(mean0: torch.Tensor, std0: torch.Tensor, mean1: torch.Tensor, std1: torch.Tensor) -> torch.Tensor:
    """``KL(N0 || N1)`` for diagonal Gaussians, summed over the last dim (closed form)."""
    return (
        torch.log(std1 / std0) + (std0.square() + (mean0 - mean1).square()) / (2.0 * std1.square()) - 0.5
    ).sum(-1)
