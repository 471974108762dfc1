"""Residual PPO (ResiP, Ankile et al. 2024): PPO trains a correction on top of a frozen base.

Everything PPO does is unchanged; the model puts the base in front of the actor
(:class:`~ctrl_rl.nets.residual.ResidualActorCritic`), so the stored actor input is
``[obs, a_base]`` and the ratio and KL are those of the composed Gaussian. This module builds
the base from ``algo.base``, and its head keeps a chunking base's per-env state across episodes
and checkpoints.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ctrl_rl.algos.checkpoints import find_checkpoint, inference_learner, load_checkpoint
from ctrl_rl.algos.heads import GaussianHead
from ctrl_rl.algos.ppo import PPO
from ctrl_rl.algos.registry import register_learner
from ctrl_rl.config_onpolicy import ResidualConfig
from ctrl_rl.nets.chunk import ChunkExecutor
from ctrl_rl.nets.residual import LinearController, OnnxBase, ResidualActorCritic


def load_base(cfg: ResidualConfig, obs_dims: dict[str, int], action_dim: int,
              action_bounds: tuple[float, float] | None) -> nn.Module:
    """The frozen base ``algo.base`` names, checked against the task's actor observation and actions."""
    obs_dim = sum(obs_dims[g] for g in cfg.actor_obs if g in obs_dims)
    if cfg.base in ("zero", "linear"):
        gain = torch.tensor(cfg.base_gain, dtype=torch.float32) if cfg.base == "linear" else \
            torch.zeros(action_dim, obs_dim)
        if gain.shape != (action_dim, obs_dim):
            raise ValueError(f"algo.base_gain is {tuple(gain.shape)}; this task needs [{action_dim}, {obs_dim}] "
                             f"(one row per action, one column per observation of groups {list(cfg.actor_obs)})")
        bias = torch.tensor(cfg.base_bias if cfg.base_bias is not None else [0.0] * action_dim)
        return LinearController(gain, bias, action_bounds)
    if cfg.base.endswith(".onnx"):
        return OnnxBase(cfg.base, obs_dim, action_dim)
    path = find_checkpoint(cfg.base)
    base_cfg, state = load_checkpoint(path)
    base_obs = {g: state["obs_dims"][g] for g in base_cfg.algo.actor_obs}
    if base_obs != {g: obs_dims.get(g) for g in base_cfg.algo.actor_obs} or state["action_dim"] != action_dim:
        raise ValueError(f"base {path} reads {base_obs} and outputs {state['action_dim']} action(s); this task has "
                         f"{obs_dims} and {action_dim}: train the base on this task")
    if list(base_cfg.algo.actor_obs) != list(cfg.actor_obs):
        raise ValueError(f"base {path} reads groups {list(base_cfg.algo.actor_obs)}; set algo.actor_obs to match")
    alg = inference_learner(base_cfg, {**state, "action_bounds": action_bounds}, "cpu")
    return alg.inference_policy()


class ResidualHead(GaussianHead):
    """The Gaussian head of :class:`~ctrl_rl.nets.residual.ResidualActorCritic`: a chunking base
    replans at each new episode, keeps where each env is in its chunk across checkpoints, and the
    deterministic policy is base + residual mean with a chunk state of its own."""

    def __init__(self, base_execute: int):
        self.base_execute = base_execute

    def episodes_ended(self, model: nn.Module, dones: torch.Tensor) -> None:
        model.base.reset(dones)

    def episode_state(self, model: nn.Module) -> dict[str, Any]:
        return model.base.state()

    def load_episode_state(self, model: nn.Module, state: dict[str, Any]) -> None:
        device = next(model.parameters()).device
        model.base.load_state({k: v.to(device) if v is not None else None for k, v in state.items()})

    def inference_policy(self, model: nn.Module) -> nn.Module:
        return model.policy(ChunkExecutor(model.base.policy, self.base_execute))


def make_residual(cfg: ResidualConfig, obs_dims: dict[str, int], action_dim: int, num_envs: int,
                  device: torch.device | str, seed: int = 0,
                  action_bounds: tuple[float, float] | None = (-1.0, 1.0), inference_only: bool = False) -> PPO:
    """PPO on a residual actor-critic around the frozen base ``algo.base``; the base is never updated."""
    base = load_base(cfg, obs_dims, action_dim, action_bounds)
    model = ResidualActorCritic(obs_dims, action_dim, cfg, ChunkExecutor(base, cfg.base_execute))
    return PPO(cfg, obs_dims, action_dim, num_envs, device, seed=seed, model=model,
               head=ResidualHead(cfg.base_execute))


register_learner("residual", config=ResidualConfig, build=make_residual, loop="online", torchrun=True)
