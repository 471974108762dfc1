"""The MuJoCo-family VecEnv: one task loop over interchangeable physics backends.

A :class:`Physics` owns N worlds of one ``MjModel`` (CPU threads in ``mujoco_cpu``, GPU or
CPU warp kernels in ``mujoco_warp``) and exposes them as torch views. A task from
``ctrl_rl.robots`` reads those views and writes joint targets; :class:`MjVecEnv` runs the
contract around both: decimation, same-step auto-reset, ``final_obs``, episode statistics,
state save/restore. The task never knows which backend it runs on.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import mujoco
import numpy as np
import torch

from ctrl_rl.env import Obs, StepResult, VecEnv
from ctrl_rl.mirror import EnvMirror


class Physics(ABC):
    """N worlds of one model, seen from torch. Subclasses: ``CpuPhysics``, ``WarpPhysics``."""

    batched_rays: bool = False
    """Whether :meth:`cast_down` casts every world's rays in one native call (fast enough to scan
    terrain every step for thousands of envs)."""

    def __init__(self, model: mujoco.MjModel, num_envs: int, device: torch.device) -> None:
        self.model = model
        """The host model every world was built from (layout, names, rendering)."""
        self.num_envs = int(num_envs)
        self.device = device

    @property
    @abstractmethod
    def qpos(self) -> torch.Tensor:
        """``[N, nq]`` view (float64 on CPU, float32 on warp); read-only for callers."""

    @property
    @abstractmethod
    def qvel(self) -> torch.Tensor:
        """``[N, nv]`` view."""

    @property
    @abstractmethod
    def sensordata(self) -> torch.Tensor:
        """``[N, nsensordata]`` view, consistent with ``qpos``/``qvel``."""

    @abstractmethod
    def step(self, ctrl: torch.Tensor, nstep: int) -> None:
        """Advance every world ``nstep`` physics steps holding ``ctrl[N, nu]``."""

    @abstractmethod
    def write_rows(self, rows: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        """Set ``qpos``/``qvel`` of the worlds where ``rows[N]`` is true (full-size inputs)
        and recompute their derived quantities (sensors) without advancing time."""

    @abstractmethod
    def set_model_field(self, name: str, values: torch.Tensor) -> None:
        """Per-world model parameters (``values[N, *field.shape]``), e.g. ``geom_friction``."""

    @abstractmethod
    def model_field(self, name: str) -> torch.Tensor:
        """``[N, *shape]`` current per-world values of a model field."""

    @abstractmethod
    def get_state(self) -> dict[str, torch.Tensor]:
        """Everything to continue stepping bit-exactly."""

    @abstractmethod
    def set_state(self, state: dict[str, torch.Tensor]) -> None:
        """Restore :meth:`get_state`."""

    @abstractmethod
    def env_data(self, env_idx: int) -> mujoco.MjData:
        """A host ``MjData`` holding world ``env_idx`` (rendering, debugging)."""

    @abstractmethod
    def cast_down(self, start: torch.Tensor) -> torch.Tensor:
        """Distance ``[N, R]`` from ``start[N, R, 3]`` straight down to the first static geom of the
        terrain group (``ctrl_rl.robots.terrain.TERRAIN_GEOM_GROUP``), -1 where a ray hits nothing.
        World ``i``'s rays see world ``i`` (its static geoms: the same terrain in every world)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release threads / device memory."""


class MjVecEnv(VecEnv):
    """A robots task on a :class:`Physics`, honouring the VecEnv contract.

    ``task`` is built by the caller from the same model the physics holds (see
    ``ctrl_rl.sims.make_mujoco_env``); it provides ``obs_dims``, ``action_dim``,
    ``max_episode_length``, ``step_dt``, ``decimation`` and the hooks used below.
    """

    def __init__(self, physics: Physics, task: Any, seed: int | None = None) -> None:
        self.physics = physics
        self.task = task
        self.num_envs = physics.num_envs
        self.device = physics.device
        self.action_dim = task.action_dim
        self.obs_dims = dict(task.obs_dims)
        self.max_episode_length = task.max_episode_length
        self.step_dt = task.step_dt
        self.action_bounds = task.action_bounds
        self._generator = torch.Generator(device=self.device)
        self.episode_length = torch.zeros(self.num_envs, dtype=torch.long, device=self.device)
        self.episode_return = torch.zeros(self.num_envs, device=self.device)
        self._renderer: Any = None
        if seed is None:
            self._generator.seed()  # unseeded construction: non-deterministic, never torch's global RNG
        self.reset(seed=seed)

    def reset(self, seed: int | None = None) -> Obs:
        if seed is not None:  # unseeded resets continue the stream: a construction seed fixes them too
            self._generator.manual_seed(int(seed))
        self.task.randomize_model(self.physics, self._generator)
        all_rows = torch.ones(self.num_envs, dtype=torch.bool, device=self.device)
        self._reset_rows(all_rows)
        self.episode_length.zero_()
        self.episode_return.zero_()
        return self.task.observe(self.physics, self.task.sample_obs_noise(self._generator))

    def _reset_rows(self, rows: torch.Tensor) -> None:
        self.task.begin_reset(self.physics, rows, self._generator)
        qpos, qvel = self.task.sample_initial_state(self.physics, self._generator)
        self.physics.write_rows(rows, qpos, qvel)
        self.task.reset_rows(rows, self._generator)

    def step(self, actions: torch.Tensor) -> StepResult:
        noise = self.task.sample_obs_noise(self._generator)
        ctrl = self.task.joint_targets(actions.to(self.device, torch.float32), self._generator)
        self.physics.step(ctrl, self.task.decimation)
        self.episode_length += 1
        reward, terminated, log = self.task.evaluate(self.physics, self.episode_length, self._generator)
        truncated = ((self.episode_length >= self.max_episode_length) | self.task.out_of_bounds) & ~terminated
        done = terminated | truncated
        final_obs = self.task.observe(self.physics, noise, self.task.post_step_signals)
        self.episode_return += reward
        episode = {"return": self.episode_return.clone(), "length": self.episode_length.clone()}

        self._reset_rows(done)
        self.episode_length.masked_fill_(done, 0)
        self.episode_return.masked_fill_(done, 0.0)
        pushed = self.task.perturb(self.physics, self.episode_length, self._generator)
        if self.device.type == "cpu" and pushed is False and not bool(done.any()):
            # nothing moved since final_obs was read: the same observation (a task whose perturb
            # returns nothing is observed again; on a GPU the check would cost a host sync every
            # step, so there it is always recomputed)
            obs, final = final_obs, final_obs
        else:
            obs = self.task.observe(self.physics, noise)
            final = {k: torch.where(done[:, None], v, obs[k]) for k, v in final_obs.items()}
        info = {"final_obs": final, "episode": episode, "log": log, "metrics": self.task.metrics}
        return obs, reward, terminated, truncated, info

    # -- state ------------------------------------------------------------------------------
    def get_state(self) -> dict[str, Any]:
        return {"physics": self.physics.get_state(), "task": self.task.get_state(self.physics),
                "episode_length": self.episode_length.clone(), "episode_return": self.episode_return.clone(),
                "generator": self._generator.get_state()}

    def set_state(self, state: dict[str, Any]) -> None:
        self.physics.set_state(state["physics"])
        self.task.set_state(state["task"], self.physics)
        self.episode_length.copy_(state["episode_length"])
        self.episode_return.copy_(state["episode_return"])
        self._generator.set_state(state["generator"])

    def obs_terms(self) -> dict[str, list[tuple[str, int]]]:
        return {g: [(t.name, t.dim) for t in terms] for g, terms in self.task.obs_terms.items()}

    def mirror(self) -> EnvMirror:
        return self.task.mirror()

    def deploy_metadata(self) -> dict[str, Any]:
        meta = self.task.deploy_metadata()
        meta["physics_dt"] = float(self.physics.model.opt.timestep)
        return meta

    # -- rendering --------------------------------------------------------------------------
    def render_frame(self, env_idx: int = 0) -> np.ndarray:
        """An RGB frame of world ``env_idx`` (offscreen; see ``ctrl_rl.sims.render``)."""
        from .render import OffscreenRenderer

        if self._renderer is None:
            self._renderer = OffscreenRenderer(self.physics.model)
        return self._renderer.render(self.physics.env_data(env_idx))

    def close(self) -> None:
        self.physics.close()


def make_mujoco_env(physics_factory: Any, task: str, num_envs: int, device: str | torch.device,
                    seed: int | None, **task_kwargs: Any) -> MjVecEnv:
    """Build a ``ctrl_rl.robots`` task on the physics ``physics_factory(model, num_envs, device)``;
    the task config's ``apply_physics(model)`` sets the physics step and solver budget first."""
    from ctrl_rl.robots import task_entry
    from ctrl_rl.robots.robot import load_robot

    entry = task_entry(task)
    task_cls, cfg = entry.task, entry.make_config(**task_kwargs)
    robot = load_robot(cfg.robot)
    model, layout = task_cls.build_model(cfg, robot)
    cfg.apply_physics(model, robot.name)  # the task's physics step and solver budget, on every backend
    physics = physics_factory(model, num_envs, torch.device(device))
    return MjVecEnv(physics, task_cls(cfg, robot, model, layout, num_envs, physics.device), seed=seed)
