"""Lift: an arm grasps a cube on the table and holds it at a target height.

Written against the task contract (``ctrl_rl.task``) on an arm robot (``ctrl_rl.robots.arm``), so it runs on
every MuJoCo-family backend. The cube is added to the arm's model by an MJCF edit (``arm_scenes.add_cube``: a
free joint, a box geom, and frame sensors of its pose in the arm's base frame); its pose, friction and mass are
drawn as :class:`~.lift_config.LiftConfig` says. The policy moves every actuated joint, the gripper's too, and
observes the terms of ``ctrl_rl.robots.terms``: joint positions and velocities, the cube's pose, the cube
relative to the end effector, the target height and the last action. Rewards are the terms of ``rewards.py:
lift_terms`` with per-second weights (``Reward/<name>``); success is the named metric ``success_rate``
(``LiftConfig``'s docstring states the rule), which ``ctrl-rl eval`` prints. A cube below the table or a
non-finite state is a ``SimulationError``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import mujoco
import torch

from ctrl_rl.robots.arm import load_arm
from ctrl_rl.robots.arm_scenes import CUBE, add_cube
from ctrl_rl.robots.terms import ObsTerm
from ctrl_rl.tasks import register_task

from .arm_task import ArmLayout, ArmTask, check_object
from .lift_config import LiftConfig
from .rewards import lift_terms


def yaw_quat(yaw: torch.Tensor) -> torch.Tensor:
    """``[N, 4]`` quaternions (w, x, y, z) of turns by ``yaw [N]`` about the vertical."""
    zero = torch.zeros_like(yaw)
    return torch.stack([torch.cos(yaw / 2), zero, zero, torch.sin(yaw / 2)], -1)


class LiftTask(ArmTask):
    """Grasp the cube and hold it at the episode's target height (every actuated joint moves)."""

    _BUFFERS = ("lift_target", "last_action", "held", "cube_pos")
    _RANDOMIZED = ("geom_friction", "body_mass", "body_inertia")
    """The model fields :meth:`randomize_model` draws per world (saved with the state)."""

    def __init__(self, cfg: LiftConfig, robot: None, model: mujoco.MjModel, layout: ArmLayout, num_envs: int,
                 device: torch.device) -> None:
        super().__init__(cfg, model, layout, num_envs, device, action_dim=layout.arm.num_joints)
        joint = model.joint(f"{CUBE}_joint")
        self.cube_qadr, self.cube_dofadr = int(joint.qposadr[0]), int(joint.dofadr[0])
        self.cube_body, self.cube_geom = model.body(CUBE).id, model.geom(f"{CUBE}_geom").id
        self.start_ranges = self.tensor([cfg.cube_x, cfg.cube_y, cfg.cube_yaw]).T  # [2, 3]
        self.height_range = self.tensor(cfg.lift_height)[:, None]  # [2, 1]
        noise = 0.005 * cfg.obs_noise  # m: what a good object tracker gets wrong
        self.set_obs_terms((*self.joint_terms(), ObsTerm("object_pose", 9, noise=noise),
                            ObsTerm("object_to_ee", 3, noise=noise), ObsTerm("lift_command", 1),
                            ObsTerm("last_action", self.action_dim)))
        self.lift_target = torch.full((num_envs, 1), float(cfg.lift_height[0]), device=device)
        """``[N, 1]``: each env's target height of the cube's centre above the table (m)."""
        self.cube_pos = torch.zeros(num_envs, 3, device=device)
        """The cube's position at the last step (base frame), which :meth:`check_simulation` reads."""

    @classmethod
    def scene(cls, cfg: LiftConfig) -> Callable[[mujoco.MjSpec], None]:
        """The cube (``arm_scenes.add_cube``), its mass the middle of ``object_mass`` until :meth:`randomize_model`."""
        frame = load_arm(cfg.arm).base_body
        return lambda spec: add_cube(spec, cfg.cube_size, sum(cfg.object_mass) / 2, frame)

    def signals(self, physics: Any) -> dict[str, torch.Tensor]:
        """The arm's signals and the cube's pose (``object_pose``, base frame) and the target height."""
        sd = self.snapshot(physics)
        pose = torch.cat([sd[:, self.sensors["object_pos"]], sd[:, self.sensors["object_quat"]]], -1)
        return {**self.arm_signals(sd), "object_pose": pose, "lift_command": self.lift_target}

    # -- hooks called by MjVecEnv ----------------------------------------------------------------
    def randomize_model(self, physics: Any, gen: torch.Generator) -> None:
        """Each world's cube friction and mass (inertia scaled with the mass), uniform in their ranges."""
        self.randomize_object(physics, gen, self.cube_body, self.cube_geom)

    def sample_initial_state(self, physics: Any, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """The arm's start (``ArmTask``) and the cube at rest on the table, its position and yaw uniform."""
        qpos, qvel = super().sample_initial_state(physics, gen)
        x, y, yaw = self.uniform(gen, *self.start_ranges).unbind(-1)
        a = self.cube_qadr
        qpos[:, a:a + 3] = torch.stack([x, y, torch.full_like(x, self.cfg.cube_size)], -1).to(qpos.dtype)
        qpos[:, a + 3:a + 7] = yaw_quat(yaw).to(qpos.dtype)
        return qpos, qvel

    def reset_rows(self, rows: torch.Tensor, gen: torch.Generator) -> None:
        """A fresh target height, no last action and no held steps for ``rows``."""
        super().reset_rows(rows, gen)
        height = self.uniform(gen, *self.height_range)
        self.lift_target = torch.where(rows[:, None], height, self.lift_target)

    def evaluate(self, physics: Any, episode_length: torch.Tensor,
                 gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """Rewards and the success state for this step's cube and end effector; then the last action moves on."""
        c, s = self.cfg, self.signals(physics)
        self.cube_pos = s["object_pose"][:, :3]
        distance = (self.cube_pos - s["ee_pos"]).norm(dim=-1)
        height, target = self.cube_pos[:, 2], self.lift_target[:, 0]
        error = (height - target).abs()
        terms = lift_terms(distance, height, c.cube_size, target, self._action, self.last_action, c.reach_std,
                           c.approach_std, c.grasp_distance, c.height_std)
        metrics = {"object_height": height, "height_error": error, "ee_object_distance": distance}
        return self.finish_step(terms, metrics, error < c.success_tolerance, s)

    def check_simulation(self) -> None:
        """A cube below the table (its centre lower than its half-size) or a non-finite one cannot be right."""
        check_object("lift", "cube", self.cube_pos, -self.cfg.cube_size)

    def deploy_metadata(self) -> dict[str, Any]:
        """The arm's bundle entries (``ArmTask``), what the cube is and how an episode is drawn and judged
        (``object``: what sim2sim rebuilds the cell and its verdict from; ``lift_height`` is also the range the
        node clips a lift command into), the contact model the grasp was trained on, and the end effector's
        workspace: over the cube's start range, from the table to the highest target."""
        c, profile = self.cfg, self.cfg.physics_profile()
        draws = {k: list(getattr(c, k)) for k in ("cube_x", "cube_y", "cube_yaw", "lift_height", "object_friction",
                                                  "object_mass")}
        rule = {"success_tolerance": c.success_tolerance, "success_hold_steps": c.success_hold_steps,
                "episode_length_s": c.episode_length_s}
        workspace = [list(c.cube_x), list(c.cube_y), [0.0, c.lift_height[1] + c.cube_size]]
        return {**super().deploy_metadata(), "workspace": workspace,
                "object": {"kind": "cube", "frame": self.arm.base_body, "half_size": c.cube_size, **draws, **rule,
                           "contact": {"cone": profile.cone, "impratio": profile.impratio}}}


register_task("lift", config=LiftConfig, task=LiftTask)
