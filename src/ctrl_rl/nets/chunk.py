"""Action chunking: a policy that predicts the next k actions, and an executor that plays them.

A chunking policy (``ChunkedActor``) maps an observation to ``[k, action_dim]`` actions; its
``forward`` returns the first, so evaluation and export treat it as an ordinary policy that
replans every step. ``ChunkExecutor`` is the other way to run it (ResiP's base: predict 32,
execute 8): it keeps each env's current chunk and asks the policy again only after ``execute``
steps or when that env's episode ended.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn


class ChunkedActor(nn.Module):
    """Wraps a policy whose output is ``k * action_dim`` wide (Gaussian or flow) as a chunk policy."""

    def __init__(self, inner: nn.Module, chunk_size: int, action_dim: int):
        super().__init__()
        self.inner, self.chunk_size, self.action_dim = inner, chunk_size, action_dim
        if getattr(inner, "noise_dim", 0):
            self.noise_dim = inner.noise_dim  # a flow head's initial noise covers the whole chunk

    @property
    def normalizer(self) -> nn.Module:
        return self.inner.normalizer

    def chunk(self, obs: torch.Tensor, noise: torch.Tensor | None = None) -> torch.Tensor:
        """``[B, k, action_dim]``: the next k actions."""
        out = self.inner(obs) if noise is None else self.inner(obs, noise)
        return out.reshape(*out.shape[:-1], self.chunk_size, self.action_dim)

    def forward(self, obs: torch.Tensor, noise: torch.Tensor | None = None) -> torch.Tensor:
        """The chunk's first action (replanning every step)."""
        return self.chunk(obs, noise)[..., 0, :]


class ChunkExecutor(nn.Module):
    """Plays a frozen policy's chunks ``execute`` actions at a time, per env (stateful).

    A policy without ``chunk`` is called every step. With ``execute == 1`` the executor is
    stateless (the first action of a fresh chunk each step), which is what export needs.
    """

    def __init__(self, policy: nn.Module, execute: int = 0):
        super().__init__()
        self.policy = policy
        self.chunk_size = int(getattr(policy, "chunk_size", 1))
        self.execute = min(execute or self.chunk_size, self.chunk_size)
        self._chunk: torch.Tensor | None = None  # [N, k, A] current chunk of each env
        self._step: torch.Tensor | None = None  # [N] actions of it already executed

    @property
    def stateless(self) -> bool:
        return self.chunk_size == 1 or self.execute == 1

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        if self.chunk_size == 1:
            return self.policy(obs)
        if self.execute == 1:
            return self.policy.chunk(obs)[..., 0, :]
        n = obs.shape[0]
        if self._chunk is None or self._chunk.shape[0] != n:
            self._chunk = self.policy.chunk(obs)
            self._step = torch.zeros(n, dtype=torch.long, device=obs.device)
        else:
            stale = self._step >= self.execute
            if bool(stale.any()):  # one host sync per step, only with chunking
                self._chunk = torch.where(stale[:, None, None], self.policy.chunk(obs), self._chunk)
                self._step = torch.where(stale, 0, self._step)
        action = self._chunk[torch.arange(n, device=obs.device), self._step]
        self._step = self._step + 1
        return action

    def reset(self, done: torch.Tensor) -> None:
        """Envs whose episode just ended replan at their next step."""
        if self._step is not None:
            self._step = torch.where(done, self.execute, self._step)

    def state(self) -> dict[str, Any]:
        return {"chunk": self._chunk, "step": self._step}

    def load_state(self, state: dict[str, Any]) -> None:
        self._chunk, self._step = state.get("chunk"), state.get("step")
