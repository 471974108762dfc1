"""Humanoid velocity tracking (``humanoid_velocity_flat``): the legged task with biped rewards.

The flat task of ``locomotion.py`` (commands, randomization, pushes, observation terms, the
deploy bundle) on ``ctrl_humanoid``, with the reward and termination changes of the Isaac Lab
H1/G1 velocity tasks:

* linear velocity tracked in the **heading frame** (yaw only): a humanoid's pelvis pitches and
  rolls with every step, and its body-frame velocity would punish that sway;
* ``feet_air_time_biped``: on single stance, the shorter of the stance foot's contact time and
  the swing foot's air time, capped at ``air_time_threshold``: long alternating steps, not hops;
* ``feet_slide``: foot speed while in contact;
* ``joint_deviation_*``: arms, hip roll/yaw and waist away from the default pose (they are not
  needed to walk and otherwise flail);
* ``termination``: a penalty on falling (pelvis/torso contact, tilt, or the pelvis below
  ``min_base_height``), without legged_gym's positive-reward clip, so falls cost;
* the quadrupeds' gait recipe, the same terms at the same weights (``gait_rewards.py``): joint pose,
  base height over the robot's standing height, torque headroom and power, and the heading hold
  (``heading_stiffness``), so "straight" stays straight (docs/experiments/unitree_g1.md, the biped gait recipe).

And the gait clock of unitree_rl_gym's G1/H1 tasks (``gait_period`` > 0, the default): the policy
observes ``gait_clock`` (sin, cos of a phase that runs from each episode's start; the deploy node runs
the same clock from its control ticks) and is rewarded for foot contacts that follow it
(``gait_contact``: the left foot in stance for the first ``stance_fraction`` of each period, the right
half a period later) and for lifting the swing foot ``swing_height`` (``feet_swing_height``). Without
it a policy trained on 2 cores shuffles its feet (docs/humanoid.md).

``ctrl_humanoid`` is 21-DoF and G1-sized (``robots/ctrl_humanoid.yaml``); the config below documents
every ``task.kwargs``. Runs on sim=mujoco (CPU threads, its default) or sim=mjwarp; tuned settings per
learner: ``tune/<algo>_humanoid_velocity_flat[_<preset>].yaml``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, ClassVar

import mujoco
import torch

from ctrl_rl.robots.robot import RobotConfig
from ctrl_rl.tasks import register_task

from .locomotion import DEFAULT_REWARDS, VelocityTask, VelocityTaskConfig

HUMANOID_REWARDS = {
    **{k: 0.0 for k in DEFAULT_REWARDS},
    "track_lin_vel_xy": 1.0, "track_ang_vel_z": 0.5, "lin_vel_z": -2.0, "ang_vel_xy": -0.05,
    "orientation": -1.0, "torques": -1e-5, "joint_acc": -2.5e-7, "action_rate": -0.01,
    "joint_pos_limits": -5.0, "termination": -200.0,
    "gait_contact": 0.18, "feet_swing_height": -20.0, "feet_air_time_biped": 0.0, "feet_slide": -0.1,
    "joint_deviation_arms": -0.1, "joint_deviation_hip": -0.1, "joint_deviation_torso": -0.1,
    "joint_pose": -0.5, "base_height_ratio": -10.0, "torque_limits": -2.0, "power": -0.01,
}
"""Weights per second: unitree_rl_gym's G1 set (gait clock terms, tracking, penalties) with Isaac Lab's G1
deviation, feet-slide and torque terms and a termination penalty, and the quadrupeds' gait recipe
(``gait_rewards.py``, at their weights): joint pose against per-joint tolerances, base height against the
robot's own standing height (in place of unitree_rl_gym's absolute ``base_height``, whose weight it takes),
torque headroom and power. The recipe's sharp velocity kernel (``track_lin_vel_xy_fine``, here in the
heading frame as ``track_lin_vel_xy`` is) stays at weight 0: at the quadrupeds' 0.5 the G1 (seed 1) tracked vx
and vy and lost its yaw tracking, walking a curve (docs/experiments/unitree_g1.md). The quadruped's
``feet_air_time`` is off, and so is Isaac Lab's clock-free ``feet_air_time_biped``; the clock's
``feet_swing_height`` stands in for ``feet_clearance``."""

DEVIATION_JOINTS = {
    "joint_deviation_arms": r".*_(shoulder|elbow)_.*",
    "joint_deviation_hip": r".*_hip_(roll|yaw)_.*",
    "joint_deviation_torso": r"waist_.*",
}
"""``joint_deviation_<group>`` reward term -> regular expression of the joint names it covers."""


@dataclass
class HumanoidVelocityTaskConfig(VelocityTaskConfig):
    """The legged task's parameters with humanoid defaults, plus the biped terms' settings."""

    reward_defaults: ClassVar[dict[str, float]] = HUMANOID_REWARDS
    robot: str = "ctrl_humanoid"
    """Shipped robot name or a robot YAML path (see robots/ctrl_humanoid.yaml)."""
    lin_vel_x: tuple[float, float] = (-0.5, 1.0)
    """Forward velocity command range (m/s)."""
    lin_vel_y: tuple[float, float] = (-0.3, 0.3)
    """Lateral velocity command range (m/s)."""
    added_base_mass: tuple[float, float] = (-1.0, 3.0)
    """Per-env mass added to the pelvis (kg)."""
    init_joint_noise: float = 0.05
    """Reset joint angles: default pose +- this (rad); a biped has less margin than four legs."""
    init_base_vel: float = 0.2
    """Reset base linear/angular velocity: uniform +- this."""
    max_tilt_deg: float = 45.0
    """Terminate when the pelvis tilts more than this from upright."""
    min_base_height: float = 0.45
    """Terminate when the pelvis comes below this height (m; standing: the robot's init_height)."""
    air_time_threshold: float = 0.4
    """``feet_air_time_biped`` caps each single-stance phase at this many seconds."""
    gait_period: float = 0.8
    """unitree_rl_gym's G1 clock (``tasks/locomotion/gait_clock.py``): 0.8 s per cycle. 0: no clock; then
    turn the ``gait_contact`` and ``feet_swing_height`` rewards off and ``feet_air_time_biped`` on."""
    stance_fraction: float = 0.55
    """Each foot's share of the period in stance (the left foot first, the right half a period later)."""
    only_positive_rewards: bool = False
    """Falls must cost (the termination penalty), so the total is not clipped at zero."""
    rewards: dict[str, float] = field(default_factory=lambda: dict(HUMANOID_REWARDS))
    """Reward term -> weight per second (0 disables a term)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.min_base_height < 0 or self.air_time_threshold <= 0:
            raise ValueError("task.kwargs.min_base_height must be >= 0 and air_time_threshold > 0")


def yaw_frame_velocity(quat: torch.Tensor, v_body: torch.Tensor) -> torch.Tensor:
    """``[N, 3]`` body-frame velocity in the heading frame (world axes turned by the yaw only)."""
    w, x, y, z = quat.unbind(-1)
    # rotation matrix rows of body -> world
    r = torch.stack([
        torch.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
        torch.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
        torch.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1),
    ], -2)
    v_world = (r @ v_body[..., None])[..., 0]
    yaw = torch.atan2(r[..., 1, 0], r[..., 0, 0])
    c, s = torch.cos(yaw), torch.sin(yaw)
    return torch.stack([c * v_world[:, 0] + s * v_world[:, 1], -s * v_world[:, 0] + c * v_world[:, 1],
                        v_world[:, 2]], -1)


def single_stance_air_time(contact: torch.Tensor, stance_time: torch.Tensor, swing_time: torch.Tensor,
                           threshold: float) -> torch.Tensor:
    """Isaac Lab's biped air-time reward: with exactly one foot down, the shorter of that foot's
    contact time and the other's air time, capped at ``threshold``; zero otherwise."""
    in_mode = torch.where(contact, stance_time, swing_time)
    single = contact.sum(-1) == 1
    return torch.where(single[:, None], in_mode, 0.0).min(-1).values.clamp(max=threshold)


class HumanoidVelocityTask(VelocityTask):
    """:class:`VelocityTask` with the biped rewards and terminations of the module docstring."""

    cfg: HumanoidVelocityTaskConfig
    _BUFFERS = (*VelocityTask._BUFFERS, "stance_time", "swing_time")

    def __init__(self, cfg: VelocityTaskConfig, robot: RobotConfig, model: mujoco.MjModel,
                 *args: Any, **kwargs: Any) -> None:
        super().__init__(cfg, robot, model, *args, **kwargs)
        n, f = self.num_envs, len(self.feet)
        self.stance_time = torch.zeros(n, f, device=self.device)
        self.swing_time = torch.zeros(n, f, device=self.device)
        self.deviation = {}
        for term, pattern in DEVIATION_JOINTS.items():
            idx = [i for i, j in enumerate(robot.joint_names) if re.fullmatch(pattern, j)]
            self.deviation[term] = torch.tensor(idx, dtype=torch.long, device=self.device)

    def reset_rows(self, rows: torch.Tensor, gen: torch.Generator) -> None:
        super().reset_rows(rows, gen)
        self.stance_time.masked_fill_(rows[:, None], 0.0)
        self.swing_time.masked_fill_(rows[:, None], 0.0)

    def failed(self, s: dict[str, torch.Tensor], g: torch.Tensor) -> torch.Tensor:
        return super().failed(s, g) | (s["base_height"][:, 0] < self.cfg.min_base_height)

    def tracked_velocity(self, s: dict[str, torch.Tensor]) -> torch.Tensor:
        """In the heading (yaw) frame (:func:`yaw_frame_velocity`), not the pitching base's."""
        return yaw_frame_velocity(s["imu_quat"], s["base_lin_vel"])[:, :2]

    def reward_terms(self, s: dict[str, torch.Tensor], g: torch.Tensor,
                     terminated: torch.Tensor) -> dict[str, torch.Tensor]:
        terms = super().reward_terms(s, g, terminated)
        dt, contact = self.step_dt, s["_contact"]
        self.stance_time = torch.where(contact, self.stance_time + dt, 0.0)
        self.swing_time = torch.where(contact, 0.0, self.swing_time + dt)
        moving = (self.commands[:, :2].norm(dim=-1) > 0.1).float()
        terms["feet_air_time_biped"] = single_stance_air_time(contact, self.stance_time, self.swing_time,
                                                              self.cfg.air_time_threshold) * moving
        dq = (s["joint_pos"] - self.default_pose).abs()
        for term, idx in self.deviation.items():
            terms[term] = dq[:, idx].sum(-1)
        return terms


register_task("humanoid_velocity_flat", config=HumanoidVelocityTaskConfig, task=HumanoidVelocityTask)
