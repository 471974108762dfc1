"""Robot descriptions and tasks (``ctrl_rl.robots``).

Backend-neutral robot definitions (MJCF, joint order, default pose, PD gains; see
``robot.py``) and tasks written against the state view every MuJoCo-family backend
exposes (``ctrl_rl.sims.mujoco_env.Physics``). Observation terms (``terms.py``) import
numpy only: the deploy runtime evaluates the very same definitions on the robot.
The classic-control tasks of the foundation live with their pure-torch dynamics in
``ctrl_rl.sims.torch_envs``.
"""

from __future__ import annotations

from typing import Any

TASKS: dict[str, tuple[Any, Any]] = {}
"""MuJoCo-family task id -> (config dataclass with ``from_kwargs``, task class)."""


def _register_builtin() -> None:
    try:
        from .locomotion import VelocityTask, VelocityTaskConfig
    except ImportError:  # the deploy runtime imports terms.py without torch / mujoco
        return
    from .humanoid import HumanoidVelocityTask, HumanoidVelocityTaskConfig
    from .rough import RoughVelocityTask, RoughVelocityTaskConfig

    TASKS["quadruped_velocity_flat"] = (VelocityTaskConfig, VelocityTask)
    TASKS["quadruped_velocity_rough"] = (RoughVelocityTaskConfig, RoughVelocityTask)
    TASKS["humanoid_velocity_flat"] = (HumanoidVelocityTaskConfig, HumanoidVelocityTask)


_register_builtin()
