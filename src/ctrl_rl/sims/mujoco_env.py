"""The MuJoCo-family VecEnv: one task loop over interchangeable physics backends.

A :class:`Physics` owns N worlds of one ``MjModel`` (CPU threads in ``mujoco_cpu``, GPU or
CPU warp kernels in ``mujoco_warp``) and exposes them as torch views. A task from
``ctrl_rl.tasks`` reads those views and writes joint targets; :class:`MjVecEnv` runs the
contract around both: decimation, same-step auto-reset, ``final_obs``, episode statistics,
state save/restore. The task never knows which backend it runs on.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from typing import Any

import mujoco
import numpy as np
import torch

from ctrl_rl.env import Obs, StepResult, VecEnv
from ctrl_rl.mirror import EnvMirror
from ctrl_rl.robots.robot import derived_values, load_robot
from ctrl_rl.task import MjTask
from ctrl_rl.tasks import task_entry
from ctrl_rl.utils.cuda_graphs import CapturedStep, clone_tensors, keep_bindings

from .render import OffscreenRenderer


class Physics(ABC):
    """N worlds of one model, seen from torch. Subclasses: ``CpuPhysics``, ``WarpPhysics``. A task sees
    the part of it that ``ctrl_rl.task.PhysicsView`` lists."""

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
    """A MuJoCo-family task on a :class:`Physics`, honouring the VecEnv contract.

    ``task`` is built by the caller from the same model the physics holds (see
    :func:`make_mujoco_env`) and meets ``ctrl_rl.task.MjTask`` (the optional hooks of
    ``MjTaskExtras`` are looked up with ``getattr``); the module docstring there gives the order
    in which this class calls the hooks.
    """

    CHECK_EVERY = 50
    """Control steps between host reads of the task's simulation check (``check_simulation``)."""

    def __init__(self, physics: Physics, task: MjTask, seed: int | None = None, cuda_graph: bool = False) -> None:
        """``cuda_graph``: on a CUDA device, replay the step's torch work as CUDA graphs (three per
        step, around the physics' own graphs); needs a physics with ``forward_written_rows`` and a
        task declaring ``graph_safe``. On CPU the same segments run eagerly."""
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
        self._render_model: mujoco.MjModel | None = None
        self._render_data: mujoco.MjData | None = None
        self._steps = 0
        self._gait = False
        """Whether each step's ``info["gait"]`` holds the task's gait signals (:meth:`record_gait`)."""
        self.cuda_graph = bool(cuda_graph)
        if getattr(task, "switches_contact", False) and not hasattr(physics, "set_contact"):
            raise ValueError(f"task.kwargs.polish_contact=mjcf changes the friction cone mid-run, which "
                             f"{type(physics).__name__} compiles into its step; train on the MJCF's contact model "
                             "from the start (task.kwargs.cone, impratio) or set task.kwargs.polish_contact=''")
        if self.cuda_graph:
            self._check_graph_safe()
        graphs = self.cuda_graph and self.device.type == "cuda"

        def segment(fn: Any, what: str) -> Any:
            return CapturedStep(fn, self.device, generators=[self._generator], owners=(self, task), fallback=True,
                                name=f"the env step's {what}") if graphs else fn

        self._before = segment(self._before_physics, "targets")
        self._after = segment(self._after_physics, "rewards and resets")
        self._observe = segment(self._observe_after_reset, "observation")
        if seed is None:
            self._generator.seed()  # unseeded construction: non-deterministic, never torch's global RNG
        self.reset(seed=seed)

    def _bindings(self) -> Any:
        """Eager work on state the step's graphs read keeps its tensors (``sim.cuda_graph``)."""
        return keep_bindings((self, self.task)) if self.cuda_graph else contextlib.nullcontext()

    def reset(self, seed: int | None = None) -> Obs:
        if seed is not None:  # unseeded resets continue the stream: a construction seed fixes them too
            self._generator.manual_seed(int(seed))
        with self._bindings():
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

    def _check_graph_safe(self) -> None:
        if not getattr(self.task, "graph_safe", False):
            raise ValueError(f"sim.cuda_graph: task {type(self.task).__name__} is not graph-safe (host reads or "
                             "physics calls inside its step, e.g. terrain height scans); set sim.cuda_graph=false")
        if not hasattr(self.physics, "forward_written_rows"):
            raise ValueError(f"sim.cuda_graph: physics {type(self.physics).__name__} cannot be captured; "
                             "it applies to sim=mjwarp")

    def step(self, actions: torch.Tensor) -> StepResult:
        """Actions -> targets, physics, rewards and same-step resets, then the observation; with
        ``cuda_graph`` each torch segment is one graph replay."""
        pre = self._before(actions.to(self.device, torch.float32))
        self.physics.step(pre["ctrl"], self.task.decimation)
        out = self._after(pre)
        self._steps += 1
        if self._steps % self.CHECK_EVERY == 0:  # one host read
            self.task.check_simulation()
        done = out["done"]
        if self.device.type == "cpu" and out["pushed"] is False and not bool(done.any()):
            # nothing moved since final_obs was read: the same observation (a task whose perturb
            # returns nothing is observed again; on a GPU the check would cost a host sync every
            # step, so there it is always recomputed)
            obs, final = out["final_obs"], out["final_obs"]
        else:
            if self.cuda_graph:
                self.physics.forward_written_rows()  # outside the graphs: the physics replays its own
            obs, final = self._observe({"noise": pre["noise"], "done": done, "final_obs": out["final_obs"]})
        info = {"final_obs": final, "episode": out["episode"], "log": out["log"], "metrics": out["metrics"],
                "episode_metrics": out["episode_metrics"]}
        if self._gait:  # evaluation only: training never asks, and pays nothing
            info["gait"] = self.task.gait_signals()
        result = obs, out["reward"], out["terminated"], out["truncated"], info
        return clone_tensors(result) if self.cuda_graph and self.device.type == "cuda" else result

    def _before_physics(self, actions: torch.Tensor) -> dict[str, Any]:
        noise = self.task.sample_obs_noise(self._generator)
        return {"noise": noise, "ctrl": self.task.joint_targets(actions, self._generator)}

    def _after_physics(self, pre: dict[str, Any]) -> dict[str, Any]:
        self.episode_length += 1
        reward, terminated, log = self.task.evaluate(self.physics, self.episode_length, self._generator)
        truncated = ((self.episode_length >= self.max_episode_length) | self.task.out_of_bounds) & ~terminated
        done = terminated | truncated
        final_obs = self.task.observe(self.physics, pre["noise"], self.task.post_step_signals)
        self.episode_return += reward
        episode = {"return": self.episode_return.clone(), "length": self.episode_length.clone()}
        self._reset_rows(done)
        self.episode_length.masked_fill_(done, 0)
        self.episode_return.masked_fill_(done, 0.0)
        pushed = self.task.perturb(self.physics, self.episode_length, self._generator)
        return {"reward": reward, "terminated": terminated, "truncated": truncated, "done": done,
                "final_obs": final_obs, "episode": episode, "log": log, "metrics": dict(self.task.metrics),
                "episode_metrics": dict(getattr(self.task, "episode_metrics", {})), "pushed": pushed}

    def _observe_after_reset(self, x: dict[str, Any]) -> tuple[Obs, Obs]:
        """The observation after resets and pushes; ``final_obs`` where an episode ended."""
        obs = self.task.observe(self.physics, x["noise"])
        final = {k: torch.where(x["done"][:, None], v, obs[k]) for k, v in x["final_obs"].items()}
        return obs, final

    def stagger_episodes(self) -> None:
        with self._bindings():
            self.episode_length.copy_(torch.randint(0, self.max_episode_length, (self.num_envs,),
                                                    generator=self._generator, device=self.device))

    # -- state ------------------------------------------------------------------------------
    def get_state(self) -> dict[str, Any]:
        return {"physics": self.physics.get_state(), "task": self.task.get_state(self.physics),
                "episode_length": self.episode_length.clone(), "episode_return": self.episode_return.clone(),
                "generator": self._generator.get_state()}

    def set_state(self, state: dict[str, Any]) -> None:
        self.physics.set_state(state["physics"])
        with self._bindings():
            self.task.set_state(state["task"], self.physics)
        self.episode_length.copy_(state["episode_length"])
        self.episode_return.copy_(state["episode_return"])
        self._generator.set_state(state["generator"])

    def record_gait(self) -> dict[str, Any] | None:
        """The task's gait signals in ``info["gait"]`` from now on (a legged task: ``gait_signals()`` and
        ``gait_spec(model)``; another task records nothing)."""
        spec = getattr(self.task, "gait_spec", None)  # only the legged tasks have a gait
        if spec is None:
            return None
        self._gait = True
        return spec(self.physics.model)

    def obs_terms(self) -> dict[str, list[tuple[str, int]]]:
        return {g: [(t.name, t.dim) for t in terms] for g, terms in self.task.obs_terms.items()}

    def mirror(self) -> EnvMirror | None:
        return self.task.mirror()

    def deploy_metadata(self) -> dict[str, Any]:
        meta = self.task.deploy_metadata()
        meta["physics_dt"] = float(self.physics.model.opt.timestep)
        if self.task.robot is not None:  # a task without a robot (an arm from its own MJCF) has no robot size
            meta["robot_derived"] = derived_values(self.physics.model, self.task.robot)  # standing height, mass, legs
        return meta

    # -- rendering --------------------------------------------------------------------------
    def render_frame(self, env_idx: int = 0) -> np.ndarray:
        """An RGB frame of world ``env_idx`` (offscreen; see ``ctrl_rl.sims.render``)."""
        if self._renderer is None:  # the task's model with its visual meshes, where it has one
            make = getattr(self.task, "render_model", None)
            self._render_model = make() if make is not None else self.physics.model
            self._renderer = OffscreenRenderer(self._render_model)
            self._render_data = mujoco.MjData(self._render_model)
        if self._render_model is self.physics.model:
            return self._renderer.render(self.physics.env_data(env_idx))
        # Same joints, more geoms: pose the render model's own data (one MjData for every frame) at the world's qpos.
        shown = self._render_data
        shown.qpos[:] = self.physics.qpos[env_idx].cpu().numpy()
        mujoco.mj_forward(self._render_model, shown)
        return self._renderer.render(shown)

    def close(self) -> None:
        if self._renderer is not None:
            self._renderer.close()
        self.physics.close()


def make_mujoco_env(physics_factory: Any, task: str, num_envs: int, device: str | torch.device,
                    seed: int | None, cuda_graph: bool = False, **task_kwargs: Any) -> MjVecEnv:
    """Build a registered task (``ctrl_rl.tasks.TASKS``) on the physics ``physics_factory(model, num_envs,
    device)``; the task config's ``apply_physics(model, robot)`` sets its physics profile first. A config
    whose ``robot`` is None builds its model without one (``ctrl_rl.task.MjTaskConfig``)."""
    entry = task_entry(task)
    task_cls, cfg = entry.task, entry.make_config(**task_kwargs)
    robot = load_robot(cfg.robot) if cfg.robot is not None else None
    model, layout = task_cls.build_model(cfg, robot)
    cfg.apply_physics(model, robot)  # the task's physics profile (or the MJCF's: `physics: mjcf`), on every backend
    physics = physics_factory(model, num_envs, torch.device(device))
    return MjVecEnv(physics, task_cls(cfg, robot, model, layout, num_envs, physics.device), seed=seed,
                    cuda_graph=cuda_graph)
