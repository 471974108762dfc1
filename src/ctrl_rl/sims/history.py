"""Observation history for any backend: per-term frame stacks kept on the env's device.

``task.kwargs.history_length`` (frames of every term of a group: an int for the ``policy``
group, or ``{group: frames}``) and ``task.kwargs.term_history`` (``{term: frames}`` in the
``policy`` group, over the group's length) are taken by :func:`with_history`, which wraps the
built env in :class:`HistoryEnv`. The stacking is :class:`~ctrl_rl.robots.terms.TermHistory`'s,
the same code the deploy runtime runs on the robot, so the layout cannot drift between them.

Contract (as every VecEnv): a row that finished this step holds its next episode's first frame in
every slot, and ``info["final_obs"]`` carries the finished episode's history with its true last
frame as the newest, so a truncation bootstraps from exactly what the policy would have seen.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from ctrl_rl.env import Obs, StepResult, VecEnv
from ctrl_rl.mirror import EnvMirror
from ctrl_rl.robots.terms import TermHistory


def history_lengths(env: VecEnv, history_length: int | Mapping[str, int] = 1,
                    term_history: Mapping[str, int] | None = None) -> dict[str, list[int]]:
    """Frames per term of each group that stacks more than one; errors name the valid keys."""
    layout = env.obs_terms()
    per_group = {"policy": history_length} if not isinstance(history_length, Mapping) else dict(history_length)
    unknown = [g for g in per_group if g not in layout]
    if unknown:
        raise ValueError(f"task.kwargs.history_length names group(s) {unknown}; this task has {sorted(layout)}")
    policy_terms = [name for name, _ in layout.get("policy", [])]
    unknown = [t for t in (term_history or {}) if t not in policy_terms]
    if unknown:
        raise ValueError(f"task.kwargs.term_history names term(s) {unknown}; the policy group has {policy_terms}")
    lengths: dict[str, list[int]] = {}
    for group, terms in layout.items():
        default = _frames(f"history_length.{group}", per_group.get(group, 1))
        own = term_history if group == "policy" and term_history else {}
        frames = [_frames(f"term_history.{name}", own.get(name, default)) for name, _ in terms]
        if any(h > 1 for h in frames):
            lengths[group] = frames
    return lengths


def _frames(key: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or int(value) < 1:
        raise ValueError(f"task.kwargs.{key} must be an integer >= 1 (frames), got {value!r}")
    return int(value)


def with_history(env: VecEnv, history_length: int | Mapping[str, int] = 1,
                 term_history: Mapping[str, int] | None = None) -> VecEnv:
    """``env`` itself when every term keeps one frame, else ``env`` in a :class:`HistoryEnv`."""
    lengths = history_lengths(env, history_length, term_history)
    return HistoryEnv(env, lengths) if lengths else env


class HistoryEnv(VecEnv):
    """``env`` with the groups in ``lengths`` stacked per term (``{group: frames per term}``)."""

    def __init__(self, env: VecEnv, lengths: Mapping[str, list[int]]) -> None:
        self.env = env
        layout = env.obs_terms()
        self.histories = {g: TermHistory([d for _, d in layout[g]], frames) for g, frames in lengths.items()}
        self.num_envs, self.device, self.action_dim = env.num_envs, env.device, env.action_dim
        self.max_episode_length, self.step_dt = env.max_episode_length, env.step_dt
        self.action_bounds = env.action_bounds
        self.obs_dims = {g: (self.histories[g].out_dim if g in self.histories else d) for g, d in env.obs_dims.items()}
        self.lengths = {g: list(frames) for g, frames in lengths.items()}

    def reset(self, seed: int | None = None) -> Obs:
        obs = self.env.reset(seed)
        return {g: (self.histories[g].restart(v) if g in self.histories else v) for g, v in obs.items()}

    def step(self, actions: torch.Tensor) -> StepResult:
        if any(not h.stacks for h in self.histories.values()):
            raise RuntimeError("HistoryEnv.step before reset: call reset() first (the stacks start from its frame)")
        obs, reward, terminated, truncated, info = self.env.step(actions)
        done = terminated | truncated
        final = info["final_obs"]
        info = dict(info)  # the inner env's dict stays as it returned it
        info["final_obs"] = {g: (self.histories[g].peek(v) if g in self.histories else v) for g, v in final.items()}
        obs = {g: (self.histories[g].push(v, done) if g in self.histories else v) for g, v in obs.items()}
        return obs, reward, terminated, truncated, info

    def obs_terms(self) -> dict[str, list[tuple[str, int]]]:
        return self.env.obs_terms()

    def record_gait(self) -> dict[str, Any] | None:
        return self.env.record_gait()

    def stagger_episodes(self) -> None:
        self.env.stagger_episodes()

    @property
    def supports_stagger(self) -> bool:
        return self.env.supports_stagger

    def mirror(self) -> EnvMirror | None:
        inner = self.env.mirror()
        return None if inner is None else inner.with_history(self.lengths)

    # -- state: the inner env's and the stacks ----------------------------------------------
    def get_state(self) -> dict[str, Any]:
        return {"env": self.env.get_state(),
                "history": {g: [s.clone() for s in h.stacks] for g, h in self.histories.items()}}

    def set_state(self, state: dict[str, Any]) -> None:
        self.env.set_state(state["env"])
        for g, h in self.histories.items():
            h.stacks = [s.to(self.device, copy=True) for s in state["history"][g]]

    @property
    def supports_state(self) -> bool:
        return self.env.supports_state

    def deploy_metadata(self) -> dict[str, Any]:
        """The inner env's bundle data with each policy term's history length."""
        meta = self.env.deploy_metadata()
        if "obs_terms" in meta and "policy" in self.histories:
            lengths = self.histories["policy"].lengths
            meta["obs_terms"] = [{**t, "history": h} for t, h in zip(meta["obs_terms"], lengths, strict=True)]
        return meta

    # -- everything else is the inner env's ---------------------------------------------------
    def render_frame(self, env_idx: int = 0) -> np.ndarray:
        return self.env.render_frame(env_idx)

    @property
    def supports_render(self) -> bool:
        return self.env.supports_render

    def close(self) -> None:
        self.env.close()

    @property
    def unwrapped(self) -> VecEnv:
        """The env without its history."""
        return self.env

    def __getattr__(self, name: str) -> Any:  # task, physics, metrics helpers of the inner env
        if name == "env":
            raise AttributeError(name)
        return getattr(self.env, name)

    def __repr__(self) -> str:
        return f"HistoryEnv({self.env!r}, {dict((g, h.lengths) for g, h in self.histories.items())})"
