"""Simulator backends and the task registry (``ctrl_rl.sims``).

``make_env(sim, task, num_envs, ...)`` turns a task id into a :class:`~ctrl_rl.env.VecEnv`.
Each backend is one entry of :data:`SIMS` (a :class:`~ctrl_rl.registry.Registry`): a factory plus
the task ids it lists. Backends import their simulator inside the factory, so importing this
package costs nothing for simulators that are not used (gymnasium, later MuJoCo / Isaac Lab). A new
backend calls :func:`register_sim` the same way the ones below do. Commands and runners build
their envs through ``ctrl_rl.sims.build.build_env``, which calls :func:`make_env`.
"""

from __future__ import annotations

import dataclasses
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ctrl_rl.env import VecEnv
from ctrl_rl.registry import Registry, UnknownNameError, closest
from ctrl_rl.tasks import tasks as robot_tasks
from ctrl_rl.utils.docs import field_docs
from ctrl_rl.utils.extras import missing

from .history import with_history
from .isaacgym import _TASKS as ISAACGYM_TASKS  # the adapters only: Isaac Gym, Isaac Lab and mjlab load in
from .isaacgym import INSTALL as ISAACGYM_INSTALL  # their factories
from .isaacgym import LEGGED_GYM_TASKS
from .isaacgym import make_env as make_isaacgym_env
from .isaaclab import ISAACLAB_INSTALL, ISAACLAB_TASKS, make_isaaclab_env
from .mjlab import MJLAB_INSTALL, MJLAB_TASKS, make_mjlab_env
from .torch_backend import TASKS as TORCH_TASKS

__all__ = ["SIMS", "SimBackend", "check_task", "list_tasks", "make_env", "register_sim", "unavailable"]


@dataclass(frozen=True)
class SimBackend:
    """How to build a backend's envs and which task ids it advertises."""

    make: Callable[..., VecEnv]
    """``make(task, num_envs, device, seed, **task_kwargs)``; raises ``ValueError`` for an
    unknown task."""
    tasks: Callable[[], list[str]]
    """Task ids for ``list_tasks`` and error messages (a backend may accept more)."""
    renders: bool = False
    """Whether its envs implement ``render_frame`` (``ctrl-rl play --video``)."""
    closed: bool = False
    """Whether ``tasks`` lists every id the backend accepts (so a config can be checked without an env)."""
    physics: tuple[str, ...] = ()
    """Physics options its ``make`` takes as ``physics={...}`` (``sim.<key>`` in the config)."""
    needs: tuple[str, ...] = ()
    """Top-level modules its envs import (found, not imported, by :func:`unavailable`)."""
    install: str = ""
    """How to get ``needs`` where no extra of ``ctrl-rl`` installs them (one line); empty: the extra
    that does (``ctrl_rl.utils.extras``)."""


SIMS: Registry[SimBackend] = Registry("sim")
"""Sim backend name (``sim=<name>``) -> :class:`SimBackend`."""


def register_sim(name: str, make: Callable[..., VecEnv], tasks: Callable[[], list[str]], renders: bool = False,
                 closed: bool = False, physics: tuple[str, ...] = (), needs: tuple[str, ...] = (),
                 install: str = "") -> None:
    """Add (or replace) a backend under ``name``; ``renders``: its envs implement ``render_frame``;
    ``closed``: ``tasks`` is exhaustive; ``physics``: the physics options ``make`` accepts; ``needs``:
    the modules it imports, and ``install``: how to get them when no extra does."""
    SIMS.register(name, SimBackend(make=make, tasks=tasks, renders=renders, closed=closed, physics=physics,
                                   needs=needs, install=install))


def unavailable(sim: str) -> str | None:
    """Why ``sim`` cannot run here, naming what to install (its extra, or its own install line), or
    None when every module it needs is found (nothing is imported)."""
    backend = SIMS[sim]
    for module in backend.needs:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):  # a broken or blocked install
            found = False
        if not found:
            extra = missing(ModuleNotFoundError(f"No module named '{module}'", name=module), f"sim={sim}")
            return backend.install or extra or f"sim={sim} needs {module}, which is not installed"
    return None


def check_task(sim: str, task: str) -> None:
    """:class:`~ctrl_rl.registry.UnknownNameError` when a backend with an exhaustive task list lacks ``task``:
    one line of at most 200 characters naming the sims that have it, or the closest registered id with
    the sim it needs, or else the sim's own tasks."""
    backend = SIMS[sim]
    if not backend.closed or task in backend.tasks():
        return
    owners: dict[str, list[str]] = {}  # task -> the sims that have it (mujoco before mjwarp)
    for name, tasks in _closed_tasks().items():
        for t in tasks if isinstance(tasks, list) else []:
            owners.setdefault(t, []).append(name)
    context = f" for sim '{sim}'"
    if task in owners:
        context += f" (a task of sim={' and sim='.join(owners[task])})"
    guess = task if task in owners else closest(task, owners)
    suggestion = guess and guess + ("" if sim in owners[guess] else f" sim={owners[guess][0]}")
    raise UnknownNameError.of("task", task, backend.tasks(), context=context, suggestion=suggestion)


def _closed_tasks() -> dict[str, list[str] | str]:
    """Each exhaustive backend's task ids, or why it has none here (its missing extra)."""
    out: dict[str, list[str] | str] = {}
    for name, backend in SIMS.items():
        if not backend.closed:
            continue
        try:
            out[name] = list(backend.tasks())
        except ModuleNotFoundError as exc:
            message = missing(exc, f"sim={name}")
            if message is None:
                raise
            out[name] = f"(unavailable: {message})"
    return out


def make_env(
    sim: str,
    task: str,
    num_envs: int,
    device: str | torch.device = "cpu",
    seed: int | None = None,
    physics: dict[str, object] | None = None,
    **task_kwargs: object,
) -> VecEnv:
    """Build ``num_envs`` copies of ``task`` on backend ``sim``, already reset with ``seed``.

    ``task_kwargs`` go to the task (e.g. ``max_episode_length=100`` or pendulum's ``g``), except
    ``history_length`` and ``term_history``: observation history, for every backend
    (``ctrl_rl.sims.history``). ``physics``: the backend's physics options (mjwarp:
    ``deterministic``, ``nconmax``, ``njmax``, ``cuda_graph``).
    """
    backend = SIMS[sim]
    if int(num_envs) < 1:
        raise ValueError(f"num_envs must be >= 1, got {num_envs}")
    unknown = sorted(set(physics or {}) - set(backend.physics))
    if unknown:
        raise ValueError(f"sim {sim!r} takes no physics option {unknown[0]!r}"
                         + (f"; it takes: {', '.join(backend.physics)}" if backend.physics else ""))
    history = {k: task_kwargs.pop(k) for k in HISTORY_PARAMETERS if k in task_kwargs}
    if physics:
        task_kwargs["physics"] = physics
    env = backend.make(task, int(num_envs), device, seed, **task_kwargs)
    if not history:
        return env
    return with_history(env, **history)  # type: ignore[arg-type]


def list_tasks(sim: str | None = None) -> dict[str, list[str]]:
    """Sim backend name -> its listed task ids (all backends, or just ``sim``)."""
    if sim is not None:
        return {sim: SIMS[sim].tasks()}
    return {name: SIMS[name].tasks() for name in sorted(SIMS)}


# ---- built-in backends ------------------------------------------------------------------
HISTORY_PARAMETERS = {
    "history_length": "Frames of every term of a group, oldest first (an int: the policy group; or {group: frames}).",
    "term_history": "Frames per policy term ({term: frames}); observation history on every backend.",
}
"""``task.kwargs`` every task takes: observation history, applied by :func:`make_env` (``history.py``)."""


def task_parameters(sim: str, task: str, kwargs: dict[str, Any]) -> list[tuple[str, object, str]] | None:
    """``(name, value, description)`` of every parameter ``task`` declares on ``sim`` (``task.kwargs``),
    with the values ``kwargs`` give them; a wrong name is refused with the declared ones listed.
    None for backends whose tasks take parameters this package does not declare (gymnasium,
    Isaac Lab, mjlab, Isaac Gym: their kwargs go to the simulator's own config)."""
    history = [(name, kwargs.get(name), doc) for name, doc in HISTORY_PARAMETERS.items()]
    kwargs = {k: v for k, v in kwargs.items() if k not in HISTORY_PARAMETERS}
    if sim in ("mujoco", "mjwarp"):
        entry = robot_tasks().get(task)
        if entry is None:
            return None
        cls = entry.config
        cfg, docs = entry.make_config(**kwargs), field_docs(cls)
        return [(f.name, getattr(cfg, f.name), docs.get(f.name, "")) for f in dataclasses.fields(cls)] + history
    if sim == "torch":
        env_cls = TORCH_TASKS.get(task)
        if env_cls is None:
            return None
        params, docs = env_cls.Params.make(task, **kwargs), field_docs(env_cls.Params)
        if params.max_episode_length is None:
            params.max_episode_length = env_cls.max_episode_length
        return [(f.name, getattr(params, f.name), docs.get(f.name, ""))
                for f in dataclasses.fields(params)] + history
    return None


def _torch_tasks() -> list[str]:
    return sorted(TORCH_TASKS)


def _make_torch(
    task: str, num_envs: int, device: str | torch.device, seed: int | None, **kw: object
) -> VecEnv:
    cls = TORCH_TASKS[task]
    cls.Params.make(task, **kw)  # a wrong name is refused naming the task id
    return cls(num_envs, device, seed, **kw)


GYMNASIUM_TASKS = ["MountainCarContinuous-v0", "Pendulum-v1",
                   "HalfCheetah-v5", "Hopper-v5", "Walker2d-v5", "Ant-v5", "Humanoid-v5"]
"""Continuous-control ids listed for ``"gymnasium"`` (classic control, then the MuJoCo suite,
which needs ``gymnasium[mujoco]``: its ``imageio``); any registered Box-action id is accepted."""


def _gymnasium_tasks() -> list[str]:
    return list(GYMNASIUM_TASKS)


def _make_gymnasium(
    task: str, num_envs: int, device: str | torch.device, seed: int | None, **kw: object
) -> VecEnv:
    from .gymnasium_env import GymnasiumVecEnv  # optional extra: gymnasium

    return GymnasiumVecEnv(task, num_envs, device, seed, **kw)


def _robot_tasks(*modules: str) -> list[str]:
    """The robot tasks, once ``modules`` import (a missing one raises naming itself: the CLIs turn that
    into the extra to install, where an empty list would read as "no such task")."""
    for module in modules:  # found, not imported: warp's import is slow and talks about CUDA
        if importlib.util.find_spec(module) is None:
            raise ModuleNotFoundError(f"No module named '{module}'", name=module)
    return sorted(robot_tasks())


def _mujoco_tasks() -> list[str]:
    return _robot_tasks("mujoco")


def _mjwarp_tasks() -> list[str]:
    return _robot_tasks("mujoco", "mujoco_warp")


def _make_mujoco(task: str, num_envs: int, device: str | torch.device, seed: int | None, **kw: object) -> VecEnv:
    from .mujoco_cpu import CpuPhysics  # optional extra: mujoco
    from .mujoco_env import make_mujoco_env  # optional extra: mujoco

    if torch.device(device).type != "cpu":
        raise ValueError("sim 'mujoco' steps on CPU threads; use device=cpu, or sim=mjwarp for the GPU")
    return make_mujoco_env(lambda m, n, d: CpuPhysics(m, n), task, num_envs, device, seed, **kw)


def _make_mjwarp(task: str, num_envs: int, device: str | torch.device, seed: int | None,
                 physics: dict[str, Any] | None = None, **kw: object) -> VecEnv:
    from .mujoco_env import make_mujoco_env  # optional extra: mujoco
    from .mujoco_warp import WarpPhysics, warp_device  # optional extra: mjwarp

    warp_device(torch.device(device))  # cpu or cuda, else a clear error before building anything
    options = dict(physics or {})
    cuda_graph = bool(options.pop("cuda_graph", False))
    return make_mujoco_env(lambda m, n, d: WarpPhysics(m, n, d, **options), task, num_envs, device, seed,
                           cuda_graph=cuda_graph, **kw)


register_sim("torch", _make_torch, _torch_tasks, renders=True, closed=True)
register_sim("mujoco", _make_mujoco, _mujoco_tasks, renders=True, closed=True, needs=("mujoco",))
register_sim("mjwarp", _make_mjwarp, _mjwarp_tasks, renders=True, closed=True,
             physics=("deterministic", "nconmax", "njmax", "cuda_graph"), needs=("mujoco", "mujoco_warp", "warp"))
register_sim("gymnasium", _make_gymnasium, _gymnasium_tasks, needs=("gymnasium",))


# ---- Isaac Lab's RL API: Isaac Lab itself, and mjlab (the same API on MuJoCo Warp) -------------
def _make_isaaclab(task: str, num_envs: int, device: str | torch.device, seed: int | None, **kw: object) -> VecEnv:
    return make_isaaclab_env(task, num_envs, device, seed, **kw)


def _make_mjlab(task: str, num_envs: int, device: str | torch.device, seed: int | None, **kw: object) -> VecEnv:
    return make_mjlab_env(task, num_envs, device, seed, **kw)


def _isaaclab_tasks() -> list[str]:
    return list(ISAACLAB_TASKS)


def _mjlab_tasks() -> list[str]:
    return list(MJLAB_TASKS)


register_sim("isaaclab", _make_isaaclab, _isaaclab_tasks, needs=("isaaclab",), install=ISAACLAB_INSTALL)
register_sim("mjlab", _make_mjlab, _mjlab_tasks, needs=("mjlab",), install=MJLAB_INSTALL)


# ---- Isaac Gym (legacy): legged_gym-style tasks ------------------------------------------------
def _make_isaacgym(task: str, num_envs: int, device: str | torch.device, seed: int | None, **kw: object) -> VecEnv:
    return make_isaacgym_env(task, num_envs, device, seed, **kw)


def _isaacgym_tasks() -> list[str]:
    return [*ISAACGYM_TASKS, *LEGGED_GYM_TASKS]


register_sim("isaacgym", _make_isaacgym, _isaacgym_tasks, needs=("isaacgym", "legged_gym"), install=ISAACGYM_INSTALL)
