"""The weighted reward every MuJoCo-family task sums (legged_gym's and mjlab's convention).

Each term's weight is per second, so a step contributes ``term x weight x step_dt``: the same weights
hold at any control rate. Each term's mean contribution is logged as ``Reward/<name>`` (TensorBoard),
so one sees which term drives the total.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import torch


def weighted_sum(terms: Mapping[str, torch.Tensor], weights: Mapping[str, float], names: Iterable[str],
                 step_dt: float, num_envs: int, device: torch.device,
                 scales: Mapping[str, torch.Tensor | float] | None = None) -> tuple[torch.Tensor, dict]:
    """``sum over names of terms[name] * weights[name] * step_dt`` (times ``scales[name]`` where given: a
    ramp) per env, ``[num_envs]``, and ``{"Reward/<name>": mean contribution}``."""
    reward = torch.zeros(num_envs, device=device)
    log = {}
    for name in names:
        r = terms[name] * (weights[name] * step_dt)
        if scales is not None and name in scales:
            r = r * scales[name]
        reward += r
        log[f"Reward/{name}"] = r.mean()
    return reward, log


def switched_weights(weights: Mapping[str, float], new: Mapping[str, float], on: torch.Tensor,
                     scales: Mapping[str, torch.Tensor | float]) -> tuple[dict[str, float], dict]:
    """``(weights, scales)`` for :func:`weighted_sum` in which each term of ``new`` weighs ``new[name]``
    where ``on`` is 1 and ``weights[name]`` where it is 0 (a 0-d tensor, so a captured step switches without
    a host read: Isaac Lab's ``modify_reward_weight``). ``scales`` (a ramp) still multiply."""
    out_weights, out_scales = dict(weights), dict(scales)
    for name, after in new.items():
        before = weights.get(name, 0.0)
        out_weights[name] = 1.0
        out_scales[name] = (before + (after - before) * on) * scales.get(name, 1.0)
    return out_weights, out_scales
