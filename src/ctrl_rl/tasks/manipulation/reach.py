"""Reach: an arm brings its end effector to a pose target (position and orientation) and holds it there.

Written against the task contract (``ctrl_rl.task``) on an arm robot (``ctrl_rl.robots.arm``), so it runs
on every MuJoCo-family backend. The target is drawn in the arm's workspace box (base frame) at each reset
and on a timer; the arm starts from its default pose with random joint offsets. The policy observes the
terms of ``ctrl_rl.robots.terms`` a deploy node computes too (joint positions relative to the default pose,
joint velocities, the pose command, the last action); the critic also the end effector's pose error.
Rewards are the terms of ``rewards.py`` with per-second weights (times the control dt, as the locomotion
tasks weigh theirs), each logged as ``Reward/<name>``. Success is a named metric: ``success_rate``, judged
at each episode's end (``ReachConfig``'s docstring states the rule), which ``ctrl-rl eval`` prints.
"""

from __future__ import annotations

from typing import Any

import mujoco
import torch

from ctrl_rl.robots.arm import default_ee_pose
from ctrl_rl.robots.terms import ObsTerm, quat_angle, quat_mul
from ctrl_rl.tasks import register_task

from .arm_task import ArmLayout, ArmTask
from .reach_config import ReachConfig
from .rewards import reach_terms


def axis_quat(angle: torch.Tensor, axis: int) -> torch.Tensor:
    """``[N, 4]`` quaternions (w, x, y, z) of rotations by ``angle [N]`` about coordinate axis ``axis``."""
    q = torch.zeros(*angle.shape, 4, dtype=angle.dtype, device=angle.device)
    q[..., 0] = torch.cos(angle / 2)
    q[..., 1 + axis] = torch.sin(angle / 2)
    return q


class ReachTask(ArmTask):
    """Reach a sampled end-effector pose in the arm's workspace and hold it (the arm's joints move; the
    gripper holds its default)."""

    _BUFFERS = ("target", "last_action", "held")

    def __init__(self, cfg: ReachConfig, robot: None, model: mujoco.MjModel, layout: ArmLayout, num_envs: int,
                 device: torch.device) -> None:
        super().__init__(cfg, model, layout, num_envs, device, action_dim=len(layout.arm.arm_joints))
        self.resample_every = int(round(cfg.target_resample_s / self.step_dt))
        ee_pos, self.ee_quat0 = (self.tensor(v) for v in default_ee_pose(model, self.sensors, self.arm))
        box = cfg.workspace or self.arm.workspace
        if not box:
            raise ValueError(f"arm {self.arm.name} declares no workspace; give its YAML one or set "
                             "task.kwargs.workspace")
        self.workspace = self.tensor(box).T  # [2, 3]: low, high
        self.angle_ranges = self.tensor([cfg.target_roll, cfg.target_pitch, cfg.target_yaw]).T  # [2, 3]
        self.set_obs_terms((*self.joint_terms(), ObsTerm("pose_command", 9), ObsTerm("last_action", self.action_dim)),
                           (ObsTerm("ee_pose_error", 6),) if cfg.privileged_critic else ())
        self.target = torch.cat([ee_pos, self.ee_quat0]).expand(num_envs, 7).clone()
        """``[N, 7]``: each env's target, position and quaternion (w, x, y, z) in the base frame."""

    def sample_targets(self, gen: torch.Generator) -> torch.Tensor:
        """``[N, 7]`` targets: a position uniform in the workspace box; the default pose's orientation turned
        about the end effector's own x, y and z axes by angles uniform in their ranges."""
        position = self.uniform(gen, *self.workspace)
        angles = self.uniform(gen, *self.angle_ranges)
        q = self.ee_quat0.expand(self.num_envs, 4)
        for axis in range(3):
            q = quat_mul(q, axis_quat(angles[:, axis], axis))
        return torch.cat([position, q], -1)

    def signals(self, physics: Any) -> dict[str, torch.Tensor]:
        """The named signals of the observation terms (``ctrl_rl.robots.terms``), from one sensor snapshot."""
        return {**self.arm_signals(self.snapshot(physics)), "pose_command": self.target}

    def reset_rows(self, rows: torch.Tensor, gen: torch.Generator) -> None:
        """A fresh target, no last action and no held steps for ``rows``."""
        super().reset_rows(rows, gen)
        self.target = torch.where(rows[:, None], self.sample_targets(gen), self.target)

    def evaluate(self, physics: Any, episode_length: torch.Tensor,
                 gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """Rewards and the success state for this step's pose; then the last action moves on and the rows
        whose timer is due get a new target."""
        c, s = self.cfg, self.signals(physics)
        distance = (s["ee_pos"] - self.target[:, :3]).norm(dim=-1)
        angle = quat_angle(s["ee_quat"], self.target[:, 3:])
        terms = reach_terms(distance, angle, self._action, self.last_action, s["joint_vel"][:, :self.action_dim],
                            c.position_std, c.position_fine_std, c.orientation_std)
        out = self.finish_step(terms, {"position_error": distance, "orientation_error": angle},
                               (distance < c.success_distance) & (angle < c.success_angle), s)
        if self.resample_every > 0:
            due = episode_length % self.resample_every == 0
            self.target = torch.where(due[:, None], self.sample_targets(gen), self.target)
            self.held = self.held.masked_fill(due, 0)
        s["pose_command"] = self.target
        return out

    def deploy_metadata(self) -> dict[str, Any]:
        """The arm's bundle entries (``ArmTask``) and the pose command's frame and workspace."""
        c = self.cfg
        command = {"frame": self.arm.base_body, "ee_site": self.arm.ee_site, "workspace": self.workspace.T.tolist(),
                   # how sim2sim's operator draws targets and judges them, as training did (deploy/arm_sim2sim.py)
                   "target_period": c.target_resample_s or c.episode_length_s,
                   "angle_ranges": [list(c.target_roll), list(c.target_pitch), list(c.target_yaw)],
                   "success_distance": c.success_distance, "success_angle": c.success_angle,
                   "success_hold_steps": c.success_hold_steps}
        return {**super().deploy_metadata(), "pose_command": command}


register_task("reach", config=ReachConfig, task=ReachTask)
