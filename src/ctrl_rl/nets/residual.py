"""Residual policies (ResiP, Ankile et al. 2024): a frozen base policy plus a learned correction.

``a = a_base(o) + scale * r``, ``r ~ N(μ(o, a_base), σ)``. The residual actor sees the
observation and the base action; its mean layer starts at exactly zero, so before any update
the policy's mean action *is* the base's. Bases: a classical controller
(:class:`LinearController`, e.g. a PD law), any ctrl_rl policy (BC, PPO; chunking ones through
:class:`~ctrl_rl.nets.chunk.ChunkExecutor`), or an exported ONNX bundle (:class:`OnnxBase`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import nn

from ctrl_rl.env import Obs
from ctrl_rl.nets.actor_critic import ActorCritic, GaussianActor, concat_groups
from ctrl_rl.nets.chunk import ChunkExecutor


class LinearController(nn.Module):
    """``clip(K obs + b, bounds)``: state feedback (a PD law when obs holds an error and its rate)."""

    def __init__(self, gain: torch.Tensor, bias: torch.Tensor, bounds: tuple[float, float] | None):
        super().__init__()
        self.register_buffer("gain", gain.float())
        self.register_buffer("bias", bias.float())
        self.bounds = bounds

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        a = obs @ self.gain.T + self.bias
        return a.clamp(*self.bounds) if self.bounds is not None else a


class OnnxBase(nn.Module):
    """An exported ``policy.onnx`` as a frozen base, run by onnxruntime on the CPU.

    Costs a host round trip per step (fine on CPU envs; on GPU prefer a checkpoint base).
    Torch cannot trace through it, so such a residual policy is not exportable (export says so).
    """

    def __init__(self, path: str | Path, obs_dim: int, action_dim: int):
        super().__init__()
        import onnxruntime as ort

        self.path = str(path)
        self.session = ort.InferenceSession(self.path, providers=["CPUExecutionProvider"])
        inputs = {i.name: i.shape for i in self.session.get_inputs()}
        width = inputs.get("obs", [None, None])[-1]
        if width != obs_dim:
            raise ValueError(f"base {path}: its 'obs' input is {width} wide, the task's actor observation {obs_dim}")
        self.noise_dim = inputs["noise"][-1] if "noise" in inputs else 0
        out = self.session.get_outputs()[0].shape[-1]
        if out != action_dim:
            raise ValueError(f"base {path}: outputs {out} actions, the task has {action_dim}")

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x = obs.detach().cpu().numpy().astype(np.float32)
        feeds = {"obs": x}
        if self.noise_dim:
            feeds["noise"] = np.zeros((len(x), self.noise_dim), np.float32)  # deterministic base action
        return torch.from_numpy(self.session.run(None, feeds)[0]).to(obs.device)


class ResidualActor(nn.Module):
    """Gaussian over the full action whose mean is ``a_base + scale * μ`` and std ``scale * σ``.

    Its input is ``[obs, a_base]`` (what :meth:`ResidualActorCritic.actor_input` builds), so PPO's
    storage, ratio and KL work unchanged: the log-prob of ``a`` under this Gaussian is the
    residual's log-prob of ``(a - a_base) / scale`` up to a constant.
    """

    def __init__(self, net: GaussianActor, action_dim: int, scale: float):
        super().__init__()
        self.residual, self.action_dim, self.scale = net, action_dim, scale
        with torch.no_grad():  # exactly zero at the start: the policy begins as the base
            last = net.net[-1]
            last.weight[:action_dim].zero_()
            last.bias[:action_dim].zero_()

    @property
    def normalizer(self) -> nn.Module:
        return self.residual.normalizer

    def distribution(self, obs_and_base: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean, std = self.residual.distribution(obs_and_base)
        return obs_and_base[..., -self.action_dim:] + self.scale * mean, self.scale * std

    def forward(self, obs_and_base: torch.Tensor) -> torch.Tensor:
        return self.distribution(obs_and_base)[0]


class ResidualPolicy(nn.Module):
    """Raw actor observation -> base action -> residual mean: what evaluation and export run."""

    def __init__(self, base: ChunkExecutor, actor: ResidualActor):
        super().__init__()
        self.base, self.actor = base, actor

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.actor(torch.cat([obs, self.base(obs)], dim=-1))


class ResidualActorCritic(ActorCritic):
    """PPO's model with a frozen base in front of the actor: ``actor_input`` appends the base action."""

    def __init__(self, obs_dims: dict[str, int], action_dim: int, cfg, base: ChunkExecutor):
        super().__init__(obs_dims, action_dim, cfg, make_actor=lambda obs_dim: ResidualActor(
            GaussianActor(obs_dim + action_dim, action_dim, cfg.actor_hidden, cfg.activation, cfg.init_std,
                          cfg.std_type, cfg.min_std, cfg.max_std, cfg.normalize_obs),
            action_dim, cfg.residual_scale))
        self.actor_dim += action_dim
        self.base = base.requires_grad_(False).eval()

    def actor_input(self, obs: Obs) -> torch.Tensor:
        raw = concat_groups(obs, self.actor_obs)
        with torch.no_grad():
            base = self.base(raw)
        return torch.cat([raw, base], dim=-1)

    def policy(self, base: ChunkExecutor | None = None) -> ResidualPolicy:
        """The deterministic composed policy on raw actor observations (own chunk state if ``base``)."""
        return ResidualPolicy(base or self.base, self.actor)
