"""The P-learner's buffer (PQL): a ring of observations kept beside the V-learner's replay."""

from __future__ import annotations

from typing import Any

import torch


class StateBuffer:
    """The P-learner's state-only ring (PQL §3.2): observations without actions or rewards.

    The policy objective ``max_a Q(s, μ(s))`` needs states only, so the P-learner samples its own
    buffer instead of contending with the V-learner for the replay. Capacity is rounded down to a
    whole number of env steps; each :meth:`add` writes one row per env.
    """

    def __init__(self, capacity: int, num_envs: int, actor_dim: int, critic_dim: int, device: torch.device,
                 share_critic_obs: bool):
        self.capacity = capacity // num_envs * num_envs
        if self.capacity == 0:
            raise ValueError(f"state buffer of {capacity} observations cannot hold one step of {num_envs} envs: "
                             f"raise algo.state_buffer_size")
        self.num_envs, self.share_critic_obs = num_envs, share_critic_obs
        self.actor_obs = torch.zeros(self.capacity, actor_dim, device=device)
        self.critic_obs = self.actor_obs if share_critic_obs else torch.zeros(self.capacity, critic_dim, device=device)
        self.ptr, self.size = 0, 0

    def add(self, actor_obs: torch.Tensor, critic_obs: torch.Tensor) -> None:
        p, n = self.ptr, self.num_envs
        self.actor_obs[p:p + n] = actor_obs
        if not self.share_critic_obs:
            self.critic_obs[p:p + n] = critic_obs
        self.ptr = (p + n) % self.capacity
        self.size = min(self.size + n, self.capacity)

    def __len__(self) -> int:
        return self.size

    def sample(self, batch_size: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """``(actor_obs, critic_obs)`` of ``batch_size`` stored states, uniform with replacement."""
        idx = torch.randint(self.size, (batch_size,), generator=generator, device=generator.device)
        idx = idx.to(self.actor_obs.device)
        actor_obs = self.actor_obs.index_select(0, idx)
        return actor_obs, actor_obs if self.share_critic_obs else self.critic_obs.index_select(0, idx)

    def state_dict(self) -> dict[str, Any]:
        rows = self.size  # the ring is filled from row 0, so the written rows are [0, size)
        return {"ptr": self.ptr, "size": self.size, "actor_obs": self.actor_obs[:rows].clone(),
                "critic_obs": None if self.share_critic_obs else self.critic_obs[:rows].clone()}

    def load_state_dict(self, d: dict[str, Any]) -> None:
        if d["size"] > self.capacity:
            raise ValueError(f"state buffer checkpoint holds {d['size']} observations, this buffer {self.capacity}: "
                             "resume with the same algo.state_buffer_size and env.num_envs")
        self.actor_obs[: d["size"]].copy_(d["actor_obs"])
        if not self.share_critic_obs:
            self.critic_obs[: d["size"]].copy_(d["critic_obs"])
        self.ptr, self.size = d["ptr"], d["size"]
