"""Simulator backends and the task registry (``ctrl_rl.sims``).

``make_env(sim, task, num_envs, ...)`` turns a task id into a :class:`~ctrl_rl.env.VecEnv`.
Each backend is one entry of :data:`SIMS`: a factory plus the task ids it lists. Backends
import their simulator inside the factory, so importing this package costs nothing for
simulators that are not used (gymnasium, later MuJoCo / Isaac Lab). A new backend calls
:func:`register_sim` the same way the two below do.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from ctrl_rl.env import VecEnv

__all__ = ["SIMS", "SimBackend", "list_tasks", "make_env", "register_sim"]


@dataclass(frozen=True)
class SimBackend:
    """How to build a backend's envs and which task ids it advertises."""

    make: Callable[..., VecEnv]
    """``make(task, num_envs, device, seed, **task_kwargs)``; raises ``ValueError`` for an
    unknown task."""
    tasks: Callable[[], list[str]]
    """Task ids for ``list_tasks`` and error messages (a backend may accept more)."""


SIMS: dict[str, SimBackend] = {}
"""Sim backend name -> :class:`SimBackend`."""


def register_sim(name: str, make: Callable[..., VecEnv], tasks: Callable[[], list[str]]) -> None:
    """Add (or replace) a backend under ``name``."""
    SIMS[name] = SimBackend(make=make, tasks=tasks)


def _backend(sim: str) -> SimBackend:
    if sim not in SIMS:
        raise ValueError(f"unknown sim {sim!r}; choose one of: {', '.join(sorted(SIMS))}")
    return SIMS[sim]


def make_env(
    sim: str,
    task: str,
    num_envs: int,
    device: str | torch.device = "cpu",
    seed: int | None = None,
    **task_kwargs: object,
) -> VecEnv:
    """Build ``num_envs`` copies of ``task`` on backend ``sim``, already reset with ``seed``.

    ``task_kwargs`` go to the task (e.g. ``max_episode_length=100`` or pendulum's ``g``).
    """
    backend = _backend(sim)
    if int(num_envs) < 1:
        raise ValueError(f"num_envs must be >= 1, got {num_envs}")
    return backend.make(task, int(num_envs), device, seed, **task_kwargs)


def list_tasks(sim: str | None = None) -> dict[str, list[str]]:
    """Sim backend name -> its listed task ids (all backends, or just ``sim``)."""
    if sim is not None:
        return {sim: _backend(sim).tasks()}
    return {name: SIMS[name].tasks() for name in sorted(SIMS)}


# ---- built-in backends ------------------------------------------------------------------
def _torch_tasks() -> list[str]:
    from .torch_envs import TASKS

    return sorted(TASKS)


def _make_torch(
    task: str, num_envs: int, device: str | torch.device, seed: int | None, **kw: object
) -> VecEnv:
    from .torch_envs import TASKS

    if task not in TASKS:
        raise ValueError(
            f"unknown task {task!r} for sim 'torch'; choose one of: {', '.join(sorted(TASKS))}"
        )
    import inspect

    params = inspect.signature(TASKS[task].__init__).parameters
    valid = [n for n, p in params.items() if p.kind is p.KEYWORD_ONLY or n == "max_episode_length"]
    unknown = [k for k in kw if k not in params or k in ("self", "num_envs", "device", "seed")]
    if unknown:
        raise ValueError(f"task {task!r} has no parameter {unknown[0]!r} (task.kwargs); "
                         f"valid: {', '.join(valid) or 'none'}")
    return TASKS[task](num_envs, device, seed, **kw)


GYMNASIUM_TASKS = ["MountainCarContinuous-v0", "Pendulum-v1"]
"""Continuous classic-control ids listed for ``"gymnasium"``; any registered Box-action id
is accepted (MuJoCo ids need ``gymnasium[mujoco]``)."""


def _gymnasium_tasks() -> list[str]:
    return list(GYMNASIUM_TASKS)


def _make_gymnasium(
    task: str, num_envs: int, device: str | torch.device, seed: int | None, **kw: object
) -> VecEnv:
    from .gymnasium_env import GymnasiumVecEnv  # imports gymnasium only when used

    return GymnasiumVecEnv(task, num_envs, device, seed, **kw)


register_sim("torch", _make_torch, _torch_tasks)
register_sim("gymnasium", _make_gymnasium, _gymnasium_tasks)
