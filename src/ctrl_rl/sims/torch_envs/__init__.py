"""Pure-torch batched tasks: any device, thousands of envs per step, no host syncs. Each task's
module ends with its :func:`register_torch_task`; importing this package registers them all."""

from __future__ import annotations

from .bandit import BimodalBanditEnv
from .base import TASKS, TaskParams, TorchVecEnv, register_torch_task, wrap_to_pi
from .cartpole import CartpoleBalanceEnv, CartpoleSwingupEnv
from .pendulum import PendulumEnv
from .point_mass import PointMassEnv

__all__ = [
    "TASKS",
    "register_torch_task",
    "TaskParams",
    "BimodalBanditEnv",
    "CartpoleBalanceEnv",
    "CartpoleSwingupEnv",
    "PendulumEnv",
    "PointMassEnv",
    "TorchVecEnv",
    "wrap_to_pi",
]
