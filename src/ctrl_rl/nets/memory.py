"""Recurrent memory for PPO's family: an LSTM or GRU in front of the actor's (and critic's) MLP.

A memory's per-env state is one tensor ``[envs, k, hidden]`` (``k`` = layers for a GRU, 2 x layers
for an LSTM: its h then its c), so rollout storage, checkpoints and the ONNX graph hold it the same
way for both cell types; zeros are the state of an env that starts an episode.

Training runs the memory over whole env trajectories (truncated BPTT over the rollout, as rsl_rl):
:func:`split_trajectories` cuts each env's ``[T]`` steps at episode ends and pads them to ``[T,
trajectories]``; the memory starts each trajectory from the state its env had at the rollout's
first step (if the trajectory starts there) or from zeros (after a reset), and :func:`unpad` puts
its outputs back in ``[T, envs]`` order, where the losses read them beside the stored samples.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import nn

from ctrl_rl.nets.normalizer import EmpiricalNormalizer


@dataclass
class Trajectories:
    """How ``[T, envs]`` steps are cut into padded trajectories (one minibatch's envs)."""

    masks: torch.Tensor
    """``[T, trajectories]`` bool: which padded slots hold a real step."""
    from_start: torch.Tensor
    """``[trajectories]`` bool: the trajectory begins at the rollout's first step (its memory starts
    from the stored state; the others begin after an episode end and start from zeros)."""
    env: torch.Tensor
    """``[trajectories]`` the env (column of the minibatch) each trajectory belongs to."""


def trajectories(dones: torch.Tensor) -> Trajectories:
    """The trajectories of ``dones`` ``[T, envs]`` (an episode ended after step t): each env's steps
    up to and including an end, the rollout's last step closing every env's last trajectory."""
    T, n = dones.shape
    ends = dones.clone()
    ends[-1] = True
    ends_env_major = ends.transpose(0, 1).reshape(-1)
    end_idx = ends_env_major.nonzero().squeeze(-1)
    lengths = torch.diff(end_idx, prepend=end_idx.new_tensor([-1]))
    starts = end_idx - lengths + 1
    masks = torch.arange(T, device=dones.device)[:, None] < lengths[None, :]
    return Trajectories(masks=masks, from_start=starts % T == 0, env=starts // T)


def split_trajectories(x: torch.Tensor, traj: Trajectories) -> torch.Tensor:
    """``x`` ``[T, envs, ...]`` as padded trajectories ``[T, trajectories, ...]`` (zeros past each end)."""
    T, n = x.shape[:2]
    out = x.new_zeros((traj.masks.shape[1], T, *x.shape[2:]))
    out[traj.masks.transpose(0, 1)] = x.transpose(0, 1).reshape(n * T, *x.shape[2:])
    return out.transpose(0, 1)


def unpad(padded: torch.Tensor, traj: Trajectories) -> torch.Tensor:
    """Inverse of :func:`split_trajectories`: ``[T, trajectories, ...]`` back to ``[T, envs, ...]``."""
    T = padded.shape[0]
    real = padded.transpose(0, 1)[traj.masks.transpose(0, 1)]  # env-major: each env's steps in order
    return real.reshape(-1, T, *padded.shape[2:]).transpose(0, 1)


class Memory(nn.Module):
    """Observation normalizer -> LSTM/GRU. ``step`` advances per-env states one control step;
    ``sequence`` runs padded trajectories for the update."""

    def __init__(self, input_dim: int, rnn_type: str, hidden_size: int, num_layers: int, normalize_obs: bool):
        super().__init__()
        if rnn_type not in ("lstm", "gru"):
            raise ValueError(f"unknown rnn_type {rnn_type!r}; choose lstm or gru")
        self.rnn_type, self.hidden_size, self.num_layers = rnn_type, hidden_size, num_layers
        self.normalizer: nn.Module = EmpiricalNormalizer(input_dim) if normalize_obs else nn.Identity()
        cell = nn.LSTM if rnn_type == "lstm" else nn.GRU
        self.rnn = cell(input_dim, hidden_size, num_layers)
        self.state_shape = ((2 if rnn_type == "lstm" else 1) * num_layers, hidden_size)
        """Per-env state ``(k, hidden)``."""

    def initial_state(self, num_envs: int, device: torch.device | str | None = None) -> torch.Tensor:
        """Zeros: the state of an env at the start of an episode."""
        return torch.zeros(num_envs, *self.state_shape, device=device)

    def _hidden(self, state: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        h = state.transpose(0, 1).contiguous()  # [k, envs, hidden], torch's layout
        return (h[: self.num_layers], h[self.num_layers:]) if self.rnn_type == "lstm" else h

    def _state(self, hidden: torch.Tensor | tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        h = torch.cat(hidden, 0) if isinstance(hidden, tuple) else hidden
        return h.transpose(0, 1)

    def step(self, obs: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(features [envs, hidden], next state)`` for one step of raw ``obs`` ``[envs, dim]``."""
        out, hidden = self.rnn(self.normalizer(obs).unsqueeze(0), self._hidden(state))
        return out.squeeze(0), self._state(hidden)

    def sequence(self, obs: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """Features ``[T, batch, hidden]`` of ``obs`` ``[T, batch, dim]`` from ``state`` ``[batch, k, hidden]``."""
        out, _ = self.rnn(self.normalizer(obs), self._hidden(state))
        return out

    def over_trajectories(self, obs: torch.Tensor, start: torch.Tensor, traj: Trajectories) -> torch.Tensor:
        """Features ``[T, envs, hidden]`` of ``obs`` ``[T, envs, dim]``: every trajectory of ``traj``
        from its env's ``start`` state ``[envs, k, hidden]`` or from zeros after an episode end."""
        init = torch.where(traj.from_start[:, None, None], start[traj.env], torch.zeros_like(start[traj.env]))
        return unpad(self.sequence(split_trajectories(obs, traj), init), traj)

    def rollout(self, obs: torch.Tensor, start: torch.Tensor, dones: torch.Tensor,
                final_obs: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
        """Step through a rollout without gradients: features of ``obs`` ``[T(+1), envs, dim]``, of
        ``final_obs[t]`` ``[T, envs, dim]`` with the state after step t before its reset (the true
        last observation of an episode that ended at t), and the state after the last of ``dones``'
        ``T`` steps, resets applied (where the next rollout starts)."""
        T = dones.shape[0]
        state, feats, finals = start, [], []
        for t in range(obs.shape[0]):
            out, state = self.step(obs[t], state)
            feats.append(out)
            if t < T:
                if final_obs is not None:
                    finals.append(self.step(final_obs[t], state)[0])
                state = torch.where(dones[t][:, None, None], torch.zeros_like(state), state)
                if t == T - 1:
                    end_state = state
        return torch.stack(feats), (torch.stack(finals) if final_obs is not None else None), end_state


class RecurrentPolicy(nn.Module):
    """``(obs, state) -> (action, next state)``: a memory and the deterministic actor on its features
    (what ``ctrl-rl export`` writes, the state as an input and an output)."""

    def __init__(self, memory: Memory, actor: nn.Module):
        super().__init__()
        self.memory, self.actor = memory, actor

    def forward(self, obs: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features, state = self.memory.step(obs, state)
        return self.actor(features), state


class MemoryStates:
    """Per-env memory states of a recurrent actor-critic while it collects, and their values at the
    first step of the rollout being collected (where the update's trajectories start)."""

    def __init__(self, model: nn.Module, num_envs: int, device: torch.device):
        self.model = model
        memories = {"actor": model.actor_memory, "critic": model.critic_memory}
        self.current = {k: m.initial_state(num_envs, device) for k, m in memories.items() if m is not None}
        """States now: the actor's advanced each step; the critic's once per rollout (:meth:`critic_rollout`)."""
        self.start = {k: v.clone() for k, v in self.current.items()}
        """States at the rollout's first step."""

    def actor_features(self, actor_in: torch.Tensor, first_step: bool) -> torch.Tensor:
        """The actor's features of this step (advancing its state); the first step of a rollout
        records where every memory starts."""
        if first_step:
            self.start = {k: v.clone() for k, v in self.current.items()}
        features, self.current["actor"] = self.model.actor_memory.step(actor_in, self.current["actor"])
        return features

    def episodes_ended(self, dones: torch.Tensor) -> None:
        """Envs ``dones`` start new episodes: their actor state is zeroed (the critic's is reset inside
        :meth:`critic_rollout`, which sees the same ends)."""
        self.current["actor"] = torch.where(dones[:, None, None], 0.0, self.current["actor"])

    def critic_rollout(self, critic_obs: torch.Tensor, dones: torch.Tensor,
                       final_critic_obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The critic's features over a rollout (see :meth:`Memory.rollout`); its state moves on to the
        next rollout's start."""
        feats, finals, self.current["critic"] = self.model.critic_memory.rollout(
            critic_obs, self.start["critic"], dones, final_critic_obs)
        return feats, finals

    def state_dict(self) -> dict[str, dict[str, torch.Tensor]]:
        return {"current": {k: v.clone() for k, v in self.current.items()},
                "start": {k: v.clone() for k, v in self.start.items()}}

    def load_state_dict(self, state: dict[str, dict[str, torch.Tensor]]) -> None:
        for key in ("current", "start"):
            mine = getattr(self, key)
            for k in mine:
                mine[k] = state[key][k].to(mine[k].device, copy=True)


class StatefulPolicy:
    """A :class:`RecurrentPolicy` on observation dicts that keeps each env's state between calls
    (evaluation, play, export's recordings): ``episodes_ended`` zeroes the envs that start over."""

    def __init__(self, policy: RecurrentPolicy, groups: list[str]):
        self.policy, self.groups = policy, groups
        self.state: torch.Tensor | None = None

    def __call__(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        x = torch.cat([obs[g] for g in self.groups], -1) if len(self.groups) > 1 else obs[self.groups[0]]
        if self.state is None or self.state.shape[0] != x.shape[0]:
            self.state = self.policy.memory.initial_state(x.shape[0], x.device)
        actions, self.state = self.policy(x, self.state)
        return actions

    def episodes_ended(self, dones: torch.Tensor | None) -> None:
        """Envs ``dones`` (all, when None: a reset of the whole batch) start new episodes."""
        if dones is None or self.state is None:
            self.state = None
        else:
            self.state = torch.where(dones[:, None, None], 0.0, self.state)


def through_memory(model: nn.Module, mb: Any) -> Any:
    """A recurrent model's minibatch (``ctrl_rl.storage.rollout.Minibatch`` of whole envs) with its raw
    observations replaced by the memories' features, each trajectory run from its start state
    (truncated BPTT over the rollout); a feed-forward minibatch unchanged."""
    seq = mb.sequences
    if seq is None:
        return mb
    T = seq.num_steps
    B = mb.actor_obs.shape[0] // T

    def features(memory: Memory, x: torch.Tensor, key: str) -> torch.Tensor:
        return memory.over_trajectories(x.reshape(T, B, -1), seq.start_states[key], seq.trajectories).reshape(T * B, -1)

    critic = getattr(model, "critic_memory", None)
    critic_in = mb.critic_obs if critic is None else features(critic, mb.critic_obs, "critic")
    return replace(mb, actor_obs=features(model.actor_memory, mb.actor_obs, "actor"), critic_obs=critic_in)
