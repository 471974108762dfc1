"""The learners. Each module registers what it defines (``ctrl_rl.algos.registry``); ``make_algorithm``
builds one by ``algo.name``."""

from __future__ import annotations

from typing import Any

from ctrl_rl.algos.registry import learner


def make_algorithm(algo_cfg: Any, obs_dims: dict[str, int], action_dim: int, num_envs: int, device: Any,
                   seed: int = 0, action_bounds: tuple[float, float] | None = (-1.0, 1.0),
                   inference_only: bool = False) -> Any:
    """Build the learner ``algo_cfg.name`` names; ``inference_only`` skips training-only state
    (a replay buffer) for evaluation and export."""
    return learner(algo_cfg.name).build(algo_cfg, obs_dims, action_dim, num_envs, device, seed=seed,
                                        action_bounds=action_bounds, inference_only=inference_only)
