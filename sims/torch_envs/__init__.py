"""Pure-torch batched tasks: any device, thousands of envs per step, no host syncs."""

from __future__ import annotations

from .bandit import BimodalBanditEnv
from .base import TorchVecEnv, wrap_to_pi
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

__all__ = [
    "TASKS",
    "BimodalBanditEnv",
    "CartpoleBalanceEnv",
    "CartpoleSwingupEnv",
    "PendulumEnv",
    "PointMassEnv",
    "TorchVecEnv",
    "wrap_to_pi",
]
