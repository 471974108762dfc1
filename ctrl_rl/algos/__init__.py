"""Learners by name: ``algo.name`` -> algorithm class and the runner that drives it."""

from __future__ import annotations

from typing import Any

ON_POLICY = ("ppo", "props", "fpo", "residual")
OFF_POLICY = ("sac", "pql")
OFFLINE = ("bc",)
OFFLINE_TO_ONLINE = ("uni_o4",)
"""Offline phase on ``dataset=``, then online PPO, in one run."""


def make_algorithm(algo_cfg: Any, obs_dims: dict[str, int], action_dim: int, num_envs: int, device: Any,
                   seed: int = 0, action_bounds: tuple[float, float] | None = (-1.0, 1.0),
                   inference_only: bool = False) -> Any:
    """Build the learner ``algo_cfg.name`` names; ``inference_only`` skips training-only state
    (SAC's replay buffer) for evaluation and export."""
    name = algo_cfg.name
    if name == "ppo":
        from ctrl_rl.algos.ppo import PPO

        return PPO(algo_cfg, obs_dims, action_dim, num_envs, device, seed=seed)
    if name == "props":
        from ctrl_rl.algos.props import PROPS

        return PROPS(algo_cfg, obs_dims, action_dim, num_envs, device, seed=seed)
    if name == "fpo":
        from ctrl_rl.algos.fpo import FPO

        return FPO(algo_cfg, obs_dims, action_dim, num_envs, device, seed=seed, action_bounds=action_bounds)
    if name == "residual":
        from ctrl_rl.algos.residual import ResidualPPO

        return ResidualPPO(algo_cfg, obs_dims, action_dim, num_envs, device, seed=seed, action_bounds=action_bounds)
    if name == "bc":
        from ctrl_rl.algos.bc import BC

        return BC(algo_cfg, obs_dims, action_dim, device, seed=seed, action_bounds=action_bounds)
    if name == "uni_o4":
        from ctrl_rl.algos.uni_o4 import UniO4

        return UniO4(algo_cfg, obs_dims, action_dim, num_envs, device, seed=seed, action_bounds=action_bounds)
    if name == "sac":
        from ctrl_rl.algos.sac import SAC

        return SAC(algo_cfg, obs_dims, action_dim, num_envs, device, seed=seed, action_bounds=action_bounds,
                   inference_only=inference_only)
    if name == "pql":
        from ctrl_rl.algos.pql import PQL

        return PQL(algo_cfg, obs_dims, action_dim, num_envs, device, seed=seed, action_bounds=action_bounds,
                   inference_only=inference_only)
    names = ON_POLICY + OFF_POLICY + OFFLINE + OFFLINE_TO_ONLINE
    raise ValueError(f"unknown algorithm '{name}'; choose one of: {', '.join(names)}")
