"""Isaac Gym (legacy) backend: legged_gym-style tasks as a :class:`~ctrl_rl.env.VecEnv` (``sim=isaacgym``).

legged_gym's ``LeggedRobot`` (and its descendants: walk-these-ways, extreme-parkour, HIMLoco, the
robot vendors' repos) steps as ``step(actions) -> obs_buf, privileged_obs_buf, rew_buf, reset_buf,
extras`` and resets finished envs inside ``post_physics_step`` (``reset_idx``) before it computes the
returned observation. :class:`IsaacGymVecEnv` maps that onto contract 1:

* groups: ``policy`` = ``obs_buf``; ``critic`` = ``privileged_obs_buf`` when the task has one;
* ``reset_buf`` split by ``extras["time_outs"]`` into terminated and truncated (a task that does
  not send time-outs has only terminations, as ``cfg.env.send_timeouts=False`` means there);
* the true final observation: the instance's ``reset_idx`` is wrapped to run the task's own
  ``compute_observations()`` just before the reset and keep the rows that end (``"hook"``); a task
  without ``compute_observations`` gets the previous step's observation for them, i.e. V(s_t)
  bootstrapping, with a warning (``"approximate"``);
* ``extras["episode"]`` (legged_gym's per-term reward means) goes to TensorBoard as
  ``Episode_Reward/<term>``; episode returns and lengths are counted here;
* tensors stay on the task's device;
* legged_gym draws from torch's global generators: the adapter gives each env a stream of its own
  (swapped in around every call into the task), so ``reset(seed)`` reproduces a run and two envs in
  one process do not disturb each other.

Tasks come from legged_gym's ``task_registry`` (``task.kwargs`` set fields of its env config by
dotted name: ``task.kwargs.terrain.mesh_type=plane``), or from :func:`register_isaacgym_task` (the tests
register a stand-in, ``tests/legged_gym_standin.py``, as ``legged_standin``: that is how everything
here is tested without Isaac Gym). The bundle gets the task's robot data (joint names in order, default
angles, PD gains, action scale, decimation, dt, torque and joint limits) and observation layout.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch

from ctrl_rl.env import Obs, StepResult, VecEnv

from .isaacgym_bundle import legged_gym_metadata

log = logging.getLogger(__name__)

INSTALL = ("sim=isaacgym needs Isaac Gym Preview 4 (NVIDIA's archive, Python 3.8, an NVIDIA GPU) and legged_gym in "
           "their own environment; see docs/backends.md#isaac-gym-legacy")

_TASKS: dict[str, Callable[[int, torch.device, dict[str, Any]], Any]] = {}
"""Tasks registered here (name -> ``make(num_envs, device, kwargs) -> env``), besides legged_gym's registry."""

LEGGED_GYM_TASKS = ["anymal_c_flat", "anymal_c_rough", "a1", "cassie", "go2", "g1", "h1"]
"""Listed for ``sim=isaacgym`` (legged_gym's and unitree_rl_gym's registry names); any registered name works."""


def register_isaacgym_task(name: str, make: Callable[[int, torch.device, dict[str, Any]], Any]) -> None:
    """Make ``name`` available to ``sim=isaacgym`` (a stand-in, or a task outside legged_gym's registry)."""
    _TASKS[name] = make


def set_config(cfg: Any, kwargs: Mapping[str, Any], prefix: str = "task.kwargs") -> None:
    """Set fields of a legged_gym-style nested config from ``kwargs`` (nested dicts or dotted keys);
    an unknown field is an error naming the valid ones."""
    for key, value in kwargs.items():
        head, _, rest = str(key).partition(".")
        if not hasattr(cfg, head):
            valid = sorted(k for k in vars(cfg) if not k.startswith("_")) if hasattr(cfg, "__dict__") else []
            raise ValueError(f"{prefix}.{head}: the task's config has no such field; valid: {', '.join(valid)}")
        if rest:
            set_config(getattr(cfg, head), {rest: value}, f"{prefix}.{head}")
        elif isinstance(value, Mapping) and not isinstance(getattr(cfg, head), Mapping):
            set_config(getattr(cfg, head), value, f"{prefix}.{head}")
        else:
            setattr(cfg, head, value)


def make_env(task: str, num_envs: int, device: torch.device | str, seed: int | None, **kwargs: Any) -> VecEnv:
    """The adapter around task ``task`` with ``num_envs`` envs (kwargs: its config fields)."""
    device = torch.device(device)
    if task in _TASKS:
        env = _TASKS[task](num_envs, device, kwargs)
    else:
        try:  # legged_gym imports isaacgym, which must come before torch in a fresh process
            from legged_gym.envs import task_registry  # type: ignore[import-not-found]
        except ImportError as exc:
            raise RuntimeError(f"{INSTALL} ({exc})") from None
        env_cfg, _ = task_registry.get_cfgs(name=task)
        set_config(env_cfg, kwargs)
        env_cfg.env.num_envs = num_envs
        args = type("Args", (), {"sim_device": str(device), "rl_device": str(device), "headless": True,
                                 "physics_engine": None, "use_gpu": device.type == "cuda",
                                 "use_gpu_pipeline": device.type == "cuda", "subscenes": 0, "num_threads": 0,
                                 "sim_device_type": device.type, "compute_device_id": device.index or 0,
                                 "graphics_device_id": -1})()
        env, _ = task_registry.make_env(name=task, args=args, env_cfg=env_cfg)
    return IsaacGymVecEnv(env, seed)


class IsaacGymVecEnv(VecEnv):
    """Adapter from a legged_gym-style task to contract 1 (module docstring). ``action_bounds=None``:
    the task clips actions itself (``cfg.normalization.clip_actions``)."""

    action_bounds = None

    def __init__(self, env: Any, seed: int | None = None) -> None:
        self.env = env
        self.num_envs = int(env.num_envs)
        self.device = torch.device(env.device) if not isinstance(env.device, torch.device) else env.device
        self.action_dim = int(env.num_actions)
        self.max_episode_length = int(env.max_episode_length)
        self.step_dt = float(env.dt)
        self._capturing = False
        self._captured: dict[str, torch.Tensor] | None = None
        self._rng = self._global_rng()
        """This env's random stream: the global generators' states while the task runs."""
        self._generator = torch.Generator().manual_seed(0 if seed is None else int(seed))
        """The adapter's own draws (:meth:`stagger_episodes`)."""
        self.final_obs_source = self._install_hook()
        self.episode_return = torch.zeros(self.num_envs, device=self.device)
        self.episode_length = torch.zeros(self.num_envs, dtype=torch.long, device=self.device)
        obs = self.reset(seed)
        self.obs_dims = {k: int(v.shape[1]) for k, v in obs.items()}

    def _install_hook(self) -> str:
        env = self.env
        if not (callable(getattr(env, "reset_idx", None)) and callable(getattr(env, "compute_observations", None))):
            log.warning("%s has no reset_idx/compute_observations to hook: final_obs of ended episodes is the "
                        "previous step's observation (V(s_t) bootstrapping on truncation)", type(env).__name__)
            return "approximate"
        original = env.reset_idx

        def reset_idx(env_ids: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            if self._capturing and len(env_ids) > 0:  # inside our step, before these rows reset
                env.compute_observations()
                self._captured = self._groups()
            return original(env_ids, *args, **kwargs)

        env.reset_idx = reset_idx  # shadows the class method for this instance only
        return "hook"

    def _groups(self) -> Obs:
        obs = {"policy": self.env.obs_buf.float().clone()}
        priv = getattr(self.env, "privileged_obs_buf", None)
        if priv is not None:
            obs["critic"] = priv.float().clone()
        return obs

    def _global_rng(self) -> dict[str, torch.Tensor]:
        state = {"cpu": torch.get_rng_state()}
        if self.device.type == "cuda":
            state["cuda"] = torch.cuda.get_rng_state(self.device)
        return state

    def _set_global_rng(self, state: dict[str, torch.Tensor]) -> None:
        torch.set_rng_state(state["cpu"])
        if "cuda" in state:
            torch.cuda.set_rng_state(state["cuda"], self.device)

    @contextlib.contextmanager
    def _own_rng(self) -> Iterator[None]:
        """Run the task on this env's stream; the caller's global generators are left as they were."""
        outside = self._global_rng()
        self._set_global_rng(self._rng)
        try:
            yield
        finally:
            self._rng = self._global_rng()
            self._set_global_rng(outside)

    def reset(self, seed: int | None = None) -> Obs:
        """Reset every env; ``seed`` restarts this env's random stream (legged_gym draws from torch's
        global generators, which the adapter swaps for this env's own around the call)."""
        if seed is not None:
            outside = self._global_rng()
            torch.manual_seed(seed)
            self._rng = self._global_rng()
            self._set_global_rng(outside)
        with self._own_rng():
            self.env.reset()
        self.episode_return.zero_()
        self.episode_length.zero_()
        self._previous = self._groups()
        return self._previous

    def step(self, actions: torch.Tensor) -> StepResult:
        self._capturing, self._captured = True, None
        try:
            with self._own_rng():
                _, _, rew, resets, extras = self.env.step(actions.to(self.device))
        finally:
            self._capturing = False
        obs = self._groups()
        done = resets.bool()
        time_outs = extras.get("time_outs")
        truncated = done & time_outs.bool() if time_outs is not None else torch.zeros_like(done)
        terminated = done & ~truncated
        final = self._captured if self._captured is not None else self._previous
        reward = rew.float().clone()
        self.episode_return += reward
        self.episode_length += 1
        episode = {"return": self.episode_return.clone(), "length": self.episode_length.clone()}
        self.episode_return.masked_fill_(done, 0.0)
        self.episode_length.masked_fill_(done, 0)
        log_scalars = {f"Episode_Reward/{k}": v for k, v in extras.get("episode", {}).items()
                       if (torch.is_tensor(v) and v.numel() == 1) or isinstance(v, (int, float))} if done.any() else {}
        info = {"final_obs": {k: torch.where(done[:, None], final[k], v) for k, v in obs.items()},
                "episode": episode, "log": log_scalars}
        self._previous = obs
        return obs, reward, terminated, truncated, info

    def stagger_episodes(self) -> None:
        """Every env's episode moved to a random step in ``[0, max_episode_length)``: legged_gym's own counter
        (``episode_length_buf``, which its time-outs read; its runner's ``init_at_random_ep_len``) and this
        adapter's episode statistics, drawn from the adapter's generator (seeded with the env)."""
        drawn = torch.randint(0, self.max_episode_length, (self.num_envs,), generator=self._generator)
        self.env.episode_length_buf.copy_(drawn.to(self.device, self.env.episode_length_buf.dtype))
        self.episode_length.copy_(drawn.to(self.device))

    # -- state (only where the task itself can give it: the stand-in; legged_gym cannot) ------
    @property
    def supports_state(self) -> bool:
        return callable(getattr(self.env, "get_state", None))

    def get_state(self) -> dict[str, Any]:
        return {"task": self.env.get_state(), "rng": {k: v.clone() for k, v in self._rng.items()},
                "previous": self._previous,
                "episode_return": self.episode_return.clone(), "episode_length": self.episode_length.clone()}

    def set_state(self, state: dict[str, Any]) -> None:
        self.env.set_state(state["task"])
        self._rng = {k: v.clone() for k, v in state["rng"].items()}
        self._previous = {k: v.clone() for k, v in state["previous"].items()}
        self.episode_return.copy_(state["episode_return"])
        self.episode_length.copy_(state["episode_length"])
        with self._own_rng():
            self.env.compute_observations()

    def deploy_metadata(self) -> dict[str, Any]:
        return legged_gym_metadata(self.env)

    def close(self) -> None:
        closer = getattr(self.env, "close", None)
        if callable(closer):
            closer()
