"""Pure-torch batched tasks: any device, thousands of envs per step, no host syncs."""

from __future__ import annotations

from .bandit import BimodalBanditEnv
from .base import TaskParams, TorchVecEnv, wrap_to_pi
from .cartpole import CartpoleBalanceEnv, CartpoleSwingupEnv
from .pendulum import PendulumEnv
from .point_mass import PointMassEnv

TASKS: dict[str, type[TorchVecEnv]] = {
    "bimodal_bandit": BimodalBanditEnv,
    "cartpole_balance": CartpoleBalanceEnv,
    "cartpole_swingup": CartpoleSwingupEnv,
    "pendulum": PendulumEnv,
    "point_mass": PointMassEnv,
}
"""Task id -> env class, called as ``cls(num_envs, device, seed, **task_kwargs)``."""


def register_task(name: str, cls: type[TorchVecEnv]) -> None:
    """Add (or replace) a pure-torch task: ``ctrl-rl train task=<name>`` then builds ``cls`` (the
    fields of its ``Params`` dataclass are the task's ``task.kwargs``, shown by ``--help``)."""
    if not (isinstance(cls, type) and issubclass(cls, TorchVecEnv)):
        raise TypeError(f"register_task({name!r}): {cls!r} is not a TorchVecEnv subclass")
    TASKS[name] = cls


__all__ = [
    "TASKS",
    "register_task",
    "TaskParams",
    "BimodalBanditEnv",
    "CartpoleBalanceEnv",
    "CartpoleSwingupEnv",
    "PendulumEnv",
    "PointMassEnv",
    "TorchVecEnv",
    "wrap_to_pi",
]
