"""Isaac Lab API backend: Isaac Lab's and mjlab's RL envs as a :class:`~ctrl_rl.env.VecEnv`.

Isaac Lab's ``ManagerBasedRLEnv`` / ``DirectRLEnv`` and mjlab's ``ManagerBasedRlEnv`` (Isaac
Lab's manager-based API on MuJoCo Warp) step as ``(obs_groups, reward, terminated, time_outs,
extras)`` and reset finished envs inside ``step`` without returning their last observation.
:class:`IsaacLabVecEnv` maps that onto contract 1 and recovers the true last observation with
the cleanest exact hook the env offers (``final_obs_source``):

* ``"manual_reset"`` (mjlab, ``cfg.auto_reset``): the adapter sets ``auto_reset = False``, so
  ``step`` returns the terminal observation itself (commands, noise, history and sensors
  exactly as on any other step); the adapter then calls ``env.reset(env_ids=done)`` and
  splices the fresh rows in. mjlab scopes that reset to ``env_ids`` (history, delay and command
  state of the other envs untouched). Costs a host sync per step (mjlab's step has one too)
  and, on steps with resets, one more ``forward`` and observation pass.
* ``"native"`` (Isaac Lab >= 3.0, ``cfg.compute_final_obs``): Isaac Lab computes the
  observation once more just before ``_reset_idx`` and publishes ``extras["final_obs"]``.
* ``"hook"`` (older Isaac Lab): the instance's ``_reset_idx`` is wrapped to do the same
  (``observation_manager.compute()`` without updating history; ``_get_observations()`` plus
  the policy noise model for direct envs).
* ``"approximate"``: nothing exact exists; ``final_obs`` is the returned obs, with a warning.

In Isaac Lab's own capture (native and hook) the observation precedes the step's command
update (``command_manager.compute``) and history terms hold the previous frames; everything
read from the simulator is the true post-step state.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Callable, Mapping
from typing import Any

import torch

from ctrl_rl.env import Obs, StepResult, VecEnv
from ctrl_rl.registry import UnknownNameError

log = logging.getLogger(__name__)

ISAACLAB_TASKS = [
    "Isaac-Cartpole", "Isaac-Cartpole-Direct", "Isaac-Ant", "Isaac-Humanoid",
    "Isaac-Velocity-Flat-AnymalD", "Isaac-Velocity-Rough-AnymalD", "Isaac-Velocity-Rough-UnitreeGo2",
]
"""Listed for ``sim=isaaclab`` (Isaac Lab 3.x ids; 2.x ids end in ``-v0``); any registered id works."""

ISAACLAB_INSTALL = ("sim=isaaclab needs Isaac Lab in this venv (Python 3.12, an NVIDIA GPU): "
                    "pip install 'isaaclab[isaacsim]==3.0.0' (it brings torch 2.11)")

_GROUPS = {"policy": "policy", "actor": "policy", "critic": "critic"}
"""Env observation group -> contract group (mjlab calls its policy group ``actor``)."""


def _flatten(value: Any, n: int) -> torch.Tensor:
    """A group (tensor, or dict of term tensors when not concatenated) as ``[n, dim]``."""
    if isinstance(value, Mapping):
        return torch.cat([_flatten(v, n) for v in value.values()], dim=1)
    return value.reshape(n, -1)


def _scalars(log_dict: Mapping[str, Any]) -> dict[str, Any]:
    """The scalar entries of ``extras["log"]`` (TensorBoard takes nothing else)."""
    return {k: v for k, v in log_dict.items()
            if isinstance(v, (int, float)) or (torch.is_tensor(v) and v.numel() == 1)}


class IsaacLabVecEnv(VecEnv):
    """Adapter from an Isaac Lab-style RL env (or a gymnasium wrapper around one) to contract 1.

    Groups ``policy``/``actor`` become ``"policy"``, ``critic`` stays ``"critic"``, others keep
    their names; a bare tensor observation is ``"policy"``. Everything is float32 ``[N, dim]``
    on the env's device, copied (the envs reuse their buffers). Actions are unbounded
    (``action_bounds=None``): Isaac Lab action terms scale raw policy outputs themselves.
    ``cfg.is_finite_horizon`` turns time-outs into terminations, as Isaac Lab's rsl_rl wrapper
    does. The adapter owns ``env`` and closes it (then ``on_close``) in :meth:`close`.
    """

    action_bounds = None

    def __init__(self, env: Any, seed: int | None = None, *, on_close: Callable[[], None] | None = None) -> None:
        self.outer = env
        self.env = env.unwrapped if hasattr(env, "unwrapped") else env
        self._on_close = on_close
        u = self.env
        self.num_envs = int(u.num_envs)
        self.device = torch.empty(0, device=str(u.device)).device
        self.max_episode_length = int(u.max_episode_length)
        self.step_dt = float(u.step_dt)
        self.action_dim = int(math.prod(u.single_action_space.shape))
        cfg = getattr(u, "cfg", None)
        self._finite_horizon = bool(getattr(cfg, "is_finite_horizon", False))
        self._capturing = False
        self._captured: Any = None
        self._last_log: Any = None
        self._generator = torch.Generator().manual_seed(0 if seed is None else int(seed))
        """This adapter's own draws (:meth:`stagger_episodes`); the env keeps its own RNGs."""
        self.final_obs_source = self._install_final_obs(cfg)
        obs = self.reset(seed=seed)
        self.obs_dims = {k: int(v.shape[1]) for k, v in obs.items()}

    # ---- the terminal-observation hook -------------------------------------------------
    def _install_final_obs(self, cfg: Any) -> str:
        if cfg is not None and hasattr(cfg, "auto_reset"):
            cfg.auto_reset = False  # read by every mjlab step: we reset finished envs ourselves
            return "manual_reset"
        if cfg is not None and hasattr(cfg, "compute_final_obs"):
            cfg.compute_final_obs = True  # read by every Isaac Lab >= 3.0 step
            return "native"
        capture = self._pre_reset_observer()
        if capture is not None and callable(getattr(self.env, "_reset_idx", None)):
            original = self.env._reset_idx

            def _reset_idx(env_ids: Any, *args: Any, **kwargs: Any) -> Any:
                if self._capturing:  # inside our step, before the env resets these rows
                    self._captured = self._groups(capture())
                return original(env_ids, *args, **kwargs)

            self.env._reset_idx = _reset_idx  # shadows the class method for this instance only
            return "hook"
        log.warning("%s offers no terminal-observation hook: final_obs is the post-reset obs, so "
                    "truncated episodes bootstrap approximately", type(self.env).__name__)
        return "approximate"

    def _pre_reset_observer(self) -> Callable[[], Any] | None:
        u = self.env
        manager = getattr(u, "observation_manager", None)
        if manager is not None:
            # Isaac Lab's compute() is fresh and leaves history alone; mjlab's returns a cache.
            return manager.compute if type(manager).__module__.startswith("isaaclab.") else None
        if not callable(getattr(u, "_get_observations", None)):
            return None

        def direct() -> Any:
            obs = u._get_observations()
            if getattr(u.cfg, "observation_noise_model", None) and isinstance(obs, dict):
                obs["policy"] = u._observation_noise_model(obs["policy"])
            return obs

        return direct

    # ---- conversions -------------------------------------------------------------------
    def _groups(self, raw: Any) -> Obs:
        if torch.is_tensor(raw):
            raw = {"policy": raw}
        out: Obs = {}
        for name, value in raw.items():
            key = _GROUPS.get(name, name)
            if key in out:
                raise ValueError(f"observation groups {sorted(raw)} map twice onto {key!r}")
            out[key] = _flatten(value, self.num_envs).to(self.device, torch.float32, copy=True)
        if "policy" not in out:
            raise ValueError(f"no policy observation group (policy or actor) among {sorted(raw)}")
        return out

    def _flag(self, t: torch.Tensor) -> torch.Tensor:
        return t.to(self.device, torch.bool, copy=True).reshape(self.num_envs)

    def _new_log(self, extras: Any) -> dict[str, Any]:
        """``extras["log"]`` when the env wrote a new one (Isaac Lab keeps the last reset's)."""
        entry = extras.get("log") if isinstance(extras, Mapping) else None
        if not entry or entry is self._last_log:
            return {}
        self._last_log = entry
        return _scalars(entry)

    # ---- VecEnv ------------------------------------------------------------------------
    def reset(self, seed: int | None = None) -> Obs:
        """Reset every env; ``seed`` reseeds the env's (process-global) RNGs first."""
        raw, extras = self.env.reset(seed=seed)
        self._captured = None
        self._last_log = extras.get("log") if isinstance(extras, Mapping) else None  # not step 1's
        self._episode_length = torch.zeros(self.num_envs, dtype=torch.int64, device=self.device)
        self._episode_return = torch.zeros(self.num_envs, dtype=torch.float32, device=self.device)
        return self._groups(raw)

    def step(self, actions: torch.Tensor) -> StepResult:
        """Step, then put same-step auto-reset, ``final_obs`` and episode stats into contract form."""
        if tuple(actions.shape) != (self.num_envs, self.action_dim):
            raise ValueError(f"actions must have shape ({self.num_envs}, {self.action_dim}), "
                             f"got {tuple(actions.shape)}")
        self._capturing = True
        try:
            raw, rew, term, trunc, extras = self.env.step(actions.to(self.device))
        finally:
            self._capturing = False
        # Copies first: the env overwrites these buffers on its next step or reset.
        obs = self._groups(raw)
        reward = rew.to(self.device, torch.float32, copy=True).reshape(self.num_envs)
        terminated, truncated = self._flag(term), self._flag(trunc)
        if self._finite_horizon:  # the time limit ends the task: no bootstrap
            terminated |= truncated
        truncated &= ~terminated
        done = terminated | truncated
        info_log = self._new_log(extras)

        final_obs = obs
        episode_metrics: dict[str, torch.Tensor] = {}
        if self.final_obs_source == "manual_reset":
            ids = done.nonzero().squeeze(-1)
            if ids.numel() > 0:  # a host sync, as in mjlab's own step
                episode_metrics = self._command_successes()  # before the reset clears them
                fresh_raw, reset_extras = self.env.reset(env_ids=ids)
                fresh = self._groups(fresh_raw)
                obs = {k: torch.where(done[:, None], fresh[k], v) for k, v in obs.items()}
                info_log.update(self._new_log(reset_extras))
        else:
            captured = extras.pop("final_obs", None) if self.final_obs_source == "native" else self._captured
            self._captured = None
            if captured is not None:
                last = captured if self.final_obs_source == "hook" else self._groups(captured)
                final_obs = {k: torch.where(done[:, None], last[k], v) for k, v in obs.items()}

        length = self._episode_length + 1
        episode_return = self._episode_return + reward
        self._episode_length = torch.where(done, 0, length)
        self._episode_return = torch.where(done, 0.0, episode_return)
        info: dict[str, Any] = {
            "final_obs": final_obs,
            "episode": {"return": episode_return, "length": length},
            "log": info_log,
            **({"episode_metrics": episode_metrics} if episode_metrics else {}),
        }
        return obs, reward, terminated, truncated, info

    def _command_successes(self) -> dict[str, torch.Tensor]:
        """The success of each command term that keeps one (mjlab's manipulation commands latch
        ``metrics["episode_success"]`` once the object reached its goal since the target was drawn) as
        ``success_rate`` (``<term>/success_rate`` when several do): the contract's ``episode_metrics``, which
        ``ctrl-rl eval`` averages over episodes. Read before the adapter resets finished rows."""
        manager = getattr(self.env, "command_manager", None)
        if manager is None or not hasattr(manager, "active_terms"):
            return {}
        found = {}
        for name in manager.active_terms:
            metrics = getattr(manager.get_term(name), "metrics", {})
            if torch.is_tensor(metrics.get("episode_success")):
                found[name] = metrics["episode_success"].to(self.device, torch.float32, copy=True).reshape(-1)
        if len(found) == 1:
            return {"success_rate": next(iter(found.values()))}
        return {f"{name}/success_rate": v for name, v in found.items()}

    def stagger_episodes(self) -> None:
        """Every env's episode moved to a random step in ``[0, max_episode_length)``, in the env's own step
        counter (``episode_length_buf``: what Isaac Lab's and mjlab's time-out terms read, and what rsl_rl's
        ``init_at_random_ep_len`` sets) and in this adapter's episode statistics, drawn from the adapter's
        generator (seeded with the env)."""
        buf = getattr(self.env, "episode_length_buf", None)
        if not torch.is_tensor(buf):
            raise NotImplementedError(f"{type(self.env).__name__} has no episode_length_buf to stagger; set "
                                      "runner.stagger_episodes=false")
        drawn = torch.randint(0, self.max_episode_length, (self.num_envs,), generator=self._generator)
        buf.copy_(drawn.to(buf.device, buf.dtype))
        self._episode_length = drawn.to(self.device, torch.int64)

    @property
    def supports_stagger(self) -> bool:
        return torch.is_tensor(getattr(self.env, "episode_length_buf", None))

    def close(self) -> None:
        try:
            self.outer.close()
        finally:
            if self._on_close is not None:
                self._on_close()

    def __repr__(self) -> str:
        return f"IsaacLabVecEnv({type(self.env).__name__}, device={self.device}, final_obs={self.final_obs_source})"


# ---- env-config overrides (task.kwargs) -----------------------------------------------
def _fields(obj: Any) -> list[str]:
    if isinstance(obj, Mapping):
        return list(obj)
    if dataclasses.is_dataclass(obj):
        return [f.name for f in dataclasses.fields(obj)]
    return sorted(k for k in vars(obj) if not k.startswith("_"))


def apply_cfg_overrides(cfg: Any, overrides: Mapping[str, Any], prefix: str = "task.kwargs") -> None:
    """Set nested env-config fields from ``task.kwargs`` (``{"episode_length_s": 5}``,
    ``{"rewards": {"upright": {"weight": 2.0}}}``); an unknown name raises ``ValueError``."""
    for key, value in overrides.items():
        is_map = isinstance(cfg, Mapping)
        if (key not in cfg) if is_map else not hasattr(cfg, key):
            raise ValueError(f"{prefix}.{key}: the env config has no such field; "
                             f"fields: {', '.join(_fields(cfg)) or 'none'}")
        current = cfg[key] if is_map else getattr(cfg, key)
        if isinstance(value, Mapping) and current is not None and not isinstance(current, (int, float, str)):
            apply_cfg_overrides(current, value, f"{prefix}.{key}")
            continue
        if isinstance(current, tuple) and isinstance(value, list):
            value = tuple(value)  # hydra gives lists; config ranges are tuples
        if is_map:
            cfg[key] = value
        else:
            setattr(cfg, key, value)


def device_str(device: str | torch.device) -> str:
    """``cuda:<index>`` (index 0 by default) or ``cpu``: the device string both simulators take."""
    d = torch.device(device)
    return f"cuda:{d.index or 0}" if d.type == "cuda" else str(d)


# ---- the factory (registered in ctrl_rl.sims; mjlab's is in sims/mjlab.py) ------------
def make_isaaclab_env(task: str, num_envs: int, device: str | torch.device = "cuda:0",
                      seed: int | None = None, **cfg_overrides: Any) -> IsaacLabVecEnv:
    """An Isaac Lab task via ``gymnasium.make(task, cfg=parse_env_cfg(...))``, headless.

    Isaac Lab 3.x: ``launch_simulation`` (starts Isaac Sim only when the task needs it) held
    open until the env closes; 2.x: ``AppLauncher(headless=True)``, which must run before
    ``isaaclab_tasks`` is imported. Not run on this project's machines (no GPU, no Isaac Sim).
    """
    try:
        import gymnasium
        import isaaclab.app as app
    except ImportError as exc:
        raise ValueError(f"{ISAACLAB_INSTALL} ({exc})") from None
    dev = device_str(device)
    on_close = None
    if not hasattr(app, "launch_simulation"):  # Isaac Lab 2.x
        app.AppLauncher(headless=True, device=dev)
    import isaaclab_tasks  # noqa: F401 - registers the Isaac-* ids
    from isaaclab_tasks.utils import parse_env_cfg

    if task not in gymnasium.registry:
        known = [k for k in gymnasium.registry if k.startswith("Isaac-")]
        raise UnknownNameError.of("task", task, known, context=" for sim 'isaaclab'")
    cfg = parse_env_cfg(task, device=dev, num_envs=num_envs)
    if seed is not None:
        cfg.seed = seed
    if hasattr(cfg, "compute_final_obs"):
        cfg.compute_final_obs = True
    apply_cfg_overrides(cfg, cfg_overrides)
    if hasattr(app, "launch_simulation"):  # Isaac Lab 3.x
        runtime = app.launch_simulation(cfg, {"headless": True, "device": dev})
        runtime.__enter__()

        def on_close() -> None:
            runtime.__exit__(None, None, None)

    try:
        return IsaacLabVecEnv(gymnasium.make(task, cfg=cfg), seed=seed, on_close=on_close)
    except BaseException:
        if on_close is not None:
            on_close()
        raise
