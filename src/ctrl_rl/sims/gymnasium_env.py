"""Gymnasium backend: any registered continuous-control env id as a :class:`VecEnv`.

Gymnasium 1.x vector envs reset finished sub-envs in one of three ways
(``gymnasium.vector.AutoresetMode``); the adapter turns each into contract 1's same-step
auto-reset with a true ``final_obs``:

* ``SAME_STEP`` (requested by default when we build the env): the step already returns the
  reset obs; the last obs is in ``infos["final_obs"]`` (object array, mask ``"_final_obs"``).
* ``NEXT_STEP`` (gymnasium's default): the step *after* a done would return the reset obs
  and ignore its action. We reset the finished sub-envs at once with
  ``reset(options={"reset_mask": done})``, which also clears gymnasium's pending autoreset,
  so no action is ever dropped.
* ``DISABLED``: the same masked reset.

Each sub-env's reset draws from its own RNG, so the three modes give identical trajectories
for the same seed. This backend steps on the host (numpy); tensors are moved to ``device``.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

import gymnasium
import numpy as np
import torch
from gymnasium.vector import AutoresetMode
from gymnasium.vector import VectorEnv as GymVectorEnv

from ctrl_rl.env import Obs, StepResult, VecEnv
from ctrl_rl.registry import UnknownNameError, closest

from . import GYMNASIUM_TASKS as LISTED_TASKS

logger = logging.getLogger(__name__)


def make_gymnasium_vector(
    env_id: str,
    num_envs: int,
    vectorization_mode: str = "sync",
    vector_kwargs: dict[str, Any] | None = None,
    **env_kwargs: Any,
) -> GymVectorEnv:
    """``gymnasium.make_vec`` asking for SAME_STEP autoreset where the mode allows kwargs."""
    if env_id not in gymnasium.registry:
        raise UnknownNameError.of("task", env_id, LISTED_TASKS, context=" for sim 'gymnasium'",
                                  suggestion=closest(env_id, gymnasium.registry), also="a registered gymnasium id")
    vector_kwargs = dict(vector_kwargs or {})
    if vectorization_mode in ("sync", "async"):
        vector_kwargs.setdefault("autoreset_mode", AutoresetMode.SAME_STEP)
    return gymnasium.make_vec(
        env_id,
        num_envs=num_envs,
        vectorization_mode=vectorization_mode,
        vector_kwargs=vector_kwargs,
        **env_kwargs,
    )


class GymnasiumVecEnv(VecEnv):
    """Adapter from a ``gymnasium.vector.VectorEnv`` with Box spaces to :class:`VecEnv`.

    Policy actions in [-1, 1] are clipped and mapped affinely onto the action space's
    ``[low, high]`` (``center + half_range * a``, exact for symmetric bounds). Observations
    are flattened to float32 ``"policy"``. Episode returns and lengths are tracked here.
    The adapter owns ``vec`` and closes it in :meth:`close`.

    Args:
        vec: a registered env id (built with :func:`make_gymnasium_vector`) or a built
            vector env (any autoreset mode).
        num_envs: batch size when ``vec`` is an id.
        device: where returned tensors live.
        seed: if given, the first reset uses it (sub-env ``i`` gets ``seed + i``).
        max_episode_length: overrides the env spec's ``max_episode_steps``.
        step_dt: overrides the env's ``dt`` attribute (1.0 when the env has none).
    """

    def __init__(
        self,
        vec: str | GymVectorEnv,
        num_envs: int | None = None,
        device: str | torch.device = "cpu",
        seed: int | None = None,
        *,
        vectorization_mode: str = "sync",
        vector_kwargs: dict[str, Any] | None = None,
        max_episode_length: int | None = None,
        step_dt: float | None = None,
        **env_kwargs: Any,
    ) -> None:
        built_here = isinstance(vec, str)
        if isinstance(vec, str):
            if num_envs is None or num_envs < 1:
                raise ValueError(f"num_envs must be >= 1 when building {vec!r}, got {num_envs}")
            if max_episode_length is not None:  # the real TimeLimit, not just the attribute
                env_kwargs.setdefault("max_episode_steps", int(max_episode_length))
            vec = make_gymnasium_vector(
                vec, num_envs, vectorization_mode, vector_kwargs, **env_kwargs
            )
        elif num_envs is not None and num_envs != vec.num_envs:
            raise ValueError(f"num_envs={num_envs} but the given vector env has {vec.num_envs}")
        self.vec = vec
        self.num_envs = vec.num_envs
        self.device = torch.empty(0, device=device).device  # canonical, e.g. cuda -> cuda:0
        self.autoreset_mode = vec.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)

        act_space, obs_space = vec.single_action_space, vec.single_observation_space
        name = vec.spec.id if vec.spec is not None else type(vec).__name__
        if not isinstance(act_space, gymnasium.spaces.Box):
            if built_here:
                vec.close()
            raise ValueError(
                f"{name} has a {type(act_space).__name__} action space; ctrl_rl is for "
                "continuous control and accepts only Box action spaces"
            )
        if not isinstance(obs_space, gymnasium.spaces.Box):
            if built_here:
                vec.close()
            raise ValueError(f"{name} has a {type(obs_space).__name__} observation space; only Box")
        self.action_dim = int(np.prod(act_space.shape))
        self.obs_dims = {"policy": int(np.prod(obs_space.shape))}
        self._act_shape, self._act_dtype = act_space.shape, act_space.dtype
        low = np.asarray(act_space.low, dtype=np.float64).reshape(-1)
        high = np.asarray(act_space.high, dtype=np.float64).reshape(-1)
        if np.isfinite(low).all() and np.isfinite(high).all():
            self.action_bounds = (-1.0, 1.0)
            self._act_center, self._act_half = (high + low) / 2.0, (high - low) / 2.0
        else:
            logger.info("%s has unbounded actions; passing policy actions through unscaled", name)
            self.action_bounds = None
            self._act_center = self._act_half = None

        self.max_episode_length = int(max_episode_length or self._spec_max_steps(name))
        self.step_dt = float(step_dt if step_dt is not None else self._env_dt(name))
        self.reset(seed=seed)

    def _spec_max_steps(self, name: str) -> int:
        # Sub-env specs first: they carry a ``max_episode_steps`` override given to make_vec.
        specs = []
        with contextlib.suppress(Exception):  # vector envs differ in what get_attr supports
            specs += list(self.vec.get_attr("spec"))
        specs.append(self.vec.spec)
        for spec in specs:
            if spec is not None and spec.max_episode_steps is not None:
                return spec.max_episode_steps
        raise ValueError(f"{name} declares no max_episode_steps; pass max_episode_length")

    def _env_dt(self, name: str) -> float:
        try:
            return float(self.vec.get_attr("dt")[0])
        except Exception:  # noqa: BLE001 - an env without ``dt`` (e.g. MountainCar)
            logger.info("%s has no dt attribute; step_dt = 1.0 (one step per time unit)", name)
            return 1.0

    def _to_tensor(self, obs: np.ndarray) -> torch.Tensor:
        # torch.tensor copies: gymnasium may reuse its obs buffer on the next step.
        flat = np.asarray(obs, dtype=np.float32).reshape(self.num_envs, -1)
        return torch.tensor(flat, device=self.device)

    def _to_env_action(self, actions: torch.Tensor) -> np.ndarray:
        if actions.shape != (self.num_envs, self.action_dim):
            raise ValueError(
                f"actions must have shape ({self.num_envs}, {self.action_dim}), "
                f"got {tuple(actions.shape)}"
            )
        act = actions.detach().to("cpu", torch.float64).numpy()
        if self.action_bounds is not None:
            act = self._act_center + self._act_half * np.clip(act, -1.0, 1.0)
        return act.astype(self._act_dtype).reshape(self.num_envs, *self._act_shape)

    def reset(self, seed: int | None = None) -> Obs:
        """Reset all sub-envs; sub-env ``i`` is seeded with ``seed + i`` (gymnasium's rule)."""
        obs, _ = self.vec.reset(seed=seed)
        self._episode_length = torch.zeros(self.num_envs, dtype=torch.int64, device=self.device)
        self._episode_return = torch.zeros(self.num_envs, dtype=torch.float32, device=self.device)
        return {"policy": self._to_tensor(obs)}

    def step(self, actions: torch.Tensor) -> StepResult:
        """Step all sub-envs and hide the autoreset mode behind same-step reset semantics."""
        obs, rew, term, trunc, infos = self.vec.step(self._to_env_action(actions))
        term, trunc = np.asarray(term, dtype=bool), np.asarray(trunc, dtype=bool)
        # TimeLimit reports both when a terminal state falls on the last step; contract 1
        # counts that as terminated.
        trunc = trunc & ~term
        done = term | trunc
        final_obs = np.array(obs, copy=True)  # a masked reset may reuse the obs buffer
        if self.autoreset_mode == AutoresetMode.SAME_STEP:
            if "final_obs" in infos:
                rows = np.asarray(infos["_final_obs"], dtype=bool)
                final_obs[rows] = np.stack(list(infos["final_obs"][rows]))
        elif done.any():
            obs, _ = self.vec.reset(options={"reset_mask": done.copy()})

        reward = torch.tensor(np.asarray(rew, dtype=np.float32), device=self.device)
        terminated = torch.tensor(term, device=self.device)
        truncated = torch.tensor(trunc, device=self.device)
        finished = terminated | truncated
        length = self._episode_length + 1
        episode_return = self._episode_return + reward
        self._episode_length = torch.where(finished, 0, length)
        self._episode_return = torch.where(finished, 0.0, episode_return)
        info: dict[str, Any] = {
            "final_obs": {"policy": self._to_tensor(final_obs)},
            "episode": {"return": episode_return, "length": length},
        }
        return {"policy": self._to_tensor(obs)}, reward, terminated, truncated, info

    def close(self) -> None:
        self.vec.close()

    def __repr__(self) -> str:
        return f"GymnasiumVecEnv({self.vec!r}, device={self.device})"
