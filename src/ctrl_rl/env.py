"""The batched environment contract (docs/architecture.md, contract 1).

Every simulator backend returns a :class:`VecEnv`; every learner consumes only this.
Observations are dicts of ``[num_envs, dim]`` float32 tensors keyed by observation
group (``"policy"`` always, ``"critic"`` for privileged critic inputs).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import numpy as np
import torch

from ctrl_rl.mirror import EnvMirror

Obs = dict[str, torch.Tensor]
"""Observation groups -> ``[num_envs, dim]`` float32 tensors on the env's device."""

StepResult = tuple[Obs, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]
"""``(obs, reward[N] float32, terminated[N] bool, truncated[N] bool, info)``."""


class SimulationError(RuntimeError):
    """The simulation cannot be right (a physics buffer overflowed, the robot fell through the
    ground): an error naming the fix, never a training run."""


class RenderUnavailableError(RuntimeError):
    """:meth:`VecEnv.render_frame` cannot draw on this machine (no usable headless OpenGL).

    Distinct from ``NotImplementedError`` (the env never renders) so callers can tell
    "install GL libraries" from "pick another sim"."""


class VecEnv(ABC):
    """A batch of ``num_envs`` environments stepped together on one torch device.

    Semantics every backend must honour (checked by ``tests/vecenv_conformance.py``):

    * same-step auto-reset: rows of ``obs`` for envs that finished this step already hold
      the first observation of their next episode;
    * ``info["final_obs"]``: dict of groups, each ``[num_envs, dim]``, holding the true last
      observation for rows that finished this step (other rows: the current obs), so a
      learner bootstraps truncated episodes with ``V(s_T)``;
    * ``info["episode"]``: ``{"return": float32[num_envs], "length": int64[num_envs]}``,
      meaningful in the rows where ``terminated | truncated`` (the episodes that finished
      this step). Full-size tensors rather than the ``k`` finished rows, so GPU backends
      never sync with the host to find ``k``;
    * ``info["log"]``: ``dict[str, float | Tensor]`` scalars for TensorBoard (optional);
    * ``info["metrics"]``: ``dict[str, Tensor[num_envs]]`` per-env task measures (optional,
      e.g. forward velocity), which ``ctrl-rl eval`` averages over each env's episode;
    * ``info["episode_metrics"]``: ``dict[str, Tensor[num_envs]]`` measures of a whole episode (optional,
      e.g. ``success_rate``: 1 for a success, 0 else), meaningful in the rows whose episode finished this
      step; ``ctrl-rl eval`` averages them over the episodes;
    * ``terminated``: the MDP reached a terminal state (no bootstrap); ``truncated``: a time
      limit or other cut (bootstrap from ``final_obs``). Both may not be true together:
      a terminal state reached on the last step counts as terminated.
    """

    num_envs: int
    device: torch.device
    action_dim: int
    obs_dims: dict[str, int]
    max_episode_length: int
    step_dt: float
    action_bounds: tuple[float, float] | None = (-1.0, 1.0)
    """Range the policy's actions are expected in (clipped by the env), or ``None`` when the
    env accepts unbounded actions (a Gaussian policy's raw samples)."""

    @abstractmethod
    def reset(self, seed: int | None = None) -> Obs:
        """Reset every env; ``seed`` makes the whole batch reproducible."""

    @abstractmethod
    def step(self, actions: torch.Tensor) -> StepResult:
        """Advance every env by one control step with ``actions[num_envs, action_dim]``."""

    def get_state(self) -> dict[str, Any]:
        """Everything needed to continue stepping exactly (sim state, counters, RNG).

        Backends that can expose their state override this; the runner stores it in
        checkpoints so a killed run resumes bit-exactly.
        """
        raise NotImplementedError(f"{type(self).__name__} does not expose its state")

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`get_state` returned."""
        raise NotImplementedError(f"{type(self).__name__} does not expose its state")

    def stagger_episodes(self) -> None:
        """Move every env's episode to a random step in ``[0, max_episode_length)``, drawn from the env's own
        generator (rsl_rl's ``init_at_random_ep_len``; ``runner.stagger_episodes``). After a reset every
        episode of a task without terminations ends on the same step, and a rollout shorter than an episode
        then shows the update one phase of it in every env. Backends that own their step counter override it."""
        raise NotImplementedError(f"{type(self).__name__} does not own its episodes' step counter and cannot "
                                  "stagger them: set runner.stagger_episodes=false")

    @property
    def supports_stagger(self) -> bool:
        """Whether :meth:`stagger_episodes` is implemented."""
        return type(self).stagger_episodes is not VecEnv.stagger_episodes

    def deploy_metadata(self) -> dict[str, Any]:
        """What a robot needs besides the network (written into the exported bundle).

        Robot tasks return the observation terms (names, dims, scales, clip, history), the
        joint names in policy order, default pose, action scale and clip, PD gains, torque
        limits, control dt and decimation. ``action_clip`` (if present) is applied inside the
        exported graph. Envs without a robot return ``{}``.
        """
        return {}

    def obs_terms(self) -> dict[str, list[tuple[str, int]]]:
        """Each group's terms in order, ``(name, dim)``: the units an observation history stacks
        (``task.kwargs.term_history``). Robot tasks list their terms; the default is one term per
        group, named after the group."""
        return {g: [(g, d)] for g, d in self.obs_dims.items()}

    def mirror(self) -> EnvMirror | None:
        """Left/right mirror maps of the observation terms and the actions (``algo.symmetry``), or None
        for an env that declares none. Robot tasks build theirs from the robot YAML's ``mirror``."""
        return None

    def record_gait(self) -> dict[str, Any] | None:
        """From the next step on, put each step's per-env gait signals into ``info["gait"]`` (robot tasks:
        base pose and velocity, joints, torques, feet, actions; what ``ctrl-rl eval``'s gait report reads,
        ``ctrl_rl.deploy.gait_report``) and return the robot's constants (standing height, mass, torque and
        joint limits, control dt); None (the default): the env has no legged robot, and records nothing."""
        return None

    @property
    def supports_state(self) -> bool:
        """Whether :meth:`get_state` / :meth:`set_state` are implemented."""
        return type(self).get_state is not VecEnv.get_state

    def render_frame(self, env_idx: int = 0) -> np.ndarray:
        """``[H, W, 3]`` uint8 RGB image of env ``env_idx``'s current state (optional).

        Simulators with a renderer override this (MuJoCo backends draw one world with
        ``ctrl_rl.sims.render.OffscreenRenderer``: ``render(data)`` or ``render_qpos(qpos)``);
        ``ctrl-rl play --video`` records env 0 after the reset and after each control step
        (every k-th above 60 Hz). Raises :class:`RenderUnavailableError` when the machine has
        no headless OpenGL.
        """
        raise NotImplementedError(f"{type(self).__name__} does not render")

    @property
    def supports_render(self) -> bool:
        """Whether :meth:`render_frame` is implemented."""
        return type(self).render_frame is not VecEnv.render_frame

    def close(self) -> None:  # noqa: B027 - optional hook, not abstract
        """Release simulator resources."""


def term_mask(obs_terms: dict[str, list[tuple[str, int]]], groups: list[str], exclude: list[str],
              key: str) -> torch.Tensor:
    """1 per element of the input that concatenates ``groups`` (``algo.actor_obs``), 0 for the terms named in
    ``exclude``; a ``ValueError`` under ``key`` for a name no group of the input has."""
    pieces, names = [], set()
    for g in groups:
        for name, dim in obs_terms[g]:
            pieces.append(torch.full((dim,), 0.0 if name in exclude else 1.0))
            names.add(name)
    unknown = sorted(set(exclude) - names)
    if unknown:
        raise ValueError(f"{key}: no observation term {unknown} in the policy's input {groups}; its terms: "
                         f"{', '.join(sorted(names))}")
    return torch.cat(pieces)
