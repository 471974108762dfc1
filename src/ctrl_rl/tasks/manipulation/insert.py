"""Insert: an arm puts a peg it holds into a square hole with a millimetre of clearance per side.

Isaac Lab Factory's peg-insert convention: the peg starts in the gripper, the socket (the "fixed asset") stands
on the table, and the task is the insertion alone (Factory's ``peg_insert``; its success: the peg down the hole
past a fraction of its depth, centred on its axis). Two differences, said here and in docs/manipulation.md:

* **The peg is held rigidly**: it is a body fixed to the end effector's body (a child of the body of the arm's
  ``ee_site``, on the site's approach axis), not a grasped free body, so it cannot slip or turn in the hand. The
  gripper is closed (its rest target is the fingers' closed limit) but does not bear on the peg: on the YAM the
  finger pads sit 1.4 cm off the site's axis, beside the peg. A grasp held by friction is a later slice.
* **The start** is the arm's default pose with random joint offsets (as lift's), not Factory's end effector
  placed above the socket by inverse kinematics: the policy also brings the peg over the hole.

The peg and the socket are added to the arm's model by an MJCF edit (:func:`add_peg_and_socket`): the peg a box
with a site at its tip; the socket four box walls around a hole ``clearance`` wider than the peg on each side,
on three joints (x, y, yaw) that a reset writes and that hold still under the peg (a large armature, damping and
dry friction: it moves by micrometres in an episode of the expert's pushing; a reset moves it through
``write_rows`` like every other coordinate). Its walls do not touch the table (an ``exclude`` pair); the peg
touches the table and the walls (and the fingers, where they reach it). The policy moves the six arm joints (the
gripper holds its rest target) and observes joint positions and velocities, the socket's pose and its position
relative to the end effector (with ``socket_obs_noise``) and the last action. Rewards are the terms of
``rewards.py: insert_terms``; success is the named metric ``success_rate`` (:class:`~.insert_config.InsertConfig`'s
docstring states the rule), which ``ctrl-rl eval`` prints. A peg tip below the table or a non-finite one is a
``SimulationError``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import mujoco
import numpy as np
import torch

from ctrl_rl.robots.arm import load_arm
from ctrl_rl.robots.terms import ObsTerm, quat_angle, quat_mul
from ctrl_rl.tasks import register_task

from .arm_task import ArmLayout, ArmTask, add_pose_sensors, check_object, extend_keyframes
from .insert_config import InsertConfig
from .rewards import insert_terms, inserted, peg_in_hole

PEG, SOCKET = "peg", "socket"
"""The peg's body (geom ``peg_geom``, tip site ``peg_tip``) and the socket's body (joints ``socket_x``,
``socket_y``, ``socket_yaw``; walls ``socket_wall<k>``; sensors ``socket_pos``, ``socket_quat``)."""
SOCKET_HOLD = {"armature": 10.0, "damping": 100.0, "frictionloss": 500.0}
"""The socket's joints: 10 kg (kg m^2) of armature, damping and 500 N (N m) of dry friction, more than the arm
can push with, so the socket stays where its reset put it."""
DOWN = (0.0, 0.0, 1.0, 0.0)
"""A half turn about y (w, x, y, z): the end effector's approach axis straight down, its fingers along y."""


def site_pose(spec: mujoco.MjSpec, site: str) -> tuple[np.ndarray, np.ndarray]:
    """The site's position and quaternion in its body's frame (compiled: every way an MJCF gives them)."""
    model = spec.compile()
    i = model.site(site).id
    return model.site_pos[i].copy(), model.site_quat[i].copy()


def add_peg_and_socket(spec: mujoco.MjSpec, cfg: InsertConfig, frame: str, ee_site: str) -> None:
    """The peg, fixed to the body of ``ee_site`` along the site's z axis (its tip ``cfg.peg_tip`` beyond the
    site), and the socket at the middle of its ranges on its three joints; sensors ``peg_tip_pos`` and
    ``socket_pos`` / ``socket_quat`` in body ``frame``'s frame."""
    pos, quat = site_pose(spec, ee_site)
    centre = np.zeros(3)
    mujoco.mju_rotVecQuat(centre, np.array([0.0, 0.0, cfg.peg_tip - cfg.peg_length / 2]), quat)
    w, half = cfg.peg_half_width, cfg.peg_length / 2
    peg = spec.site(ee_site).parent.add_body(name=PEG, pos=pos + centre, quat=quat)
    peg.add_geom(name=f"{PEG}_geom", type=mujoco.mjtGeom.mjGEOM_BOX, size=[w, w, half], mass=sum(cfg.object_mass) / 2,
                 friction=[1.0, 5e-3, 5e-4], priority=1, rgba=[0.9, 0.6, 0.1, 1.0])
    peg.add_site(name=f"{PEG}_tip", pos=[0.0, 0.0, half])
    home = [sum(cfg.socket_x) / 2, sum(cfg.socket_y) / 2, 0.0]
    socket = spec.worldbody.add_body(name=SOCKET, pos=home)
    slide, hinge = mujoco.mjtJoint.mjJNT_SLIDE, mujoco.mjtJoint.mjJNT_HINGE
    for name, kind, axis in (("x", slide, [1, 0, 0]), ("y", slide, [0, 1, 0]), ("yaw", hinge, [0, 0, 1])):
        socket.add_joint(name=f"{SOCKET}_{name}", type=kind, axis=axis, **SOCKET_HOLD)
    h, t, d = cfg.hole_half_width, cfg.wall_thickness, cfg.hole_depth
    walls = [((s * (h + t / 2), 0.0), (t / 2, h + t)) for s in (1, -1)] + \
            [((0.0, s * (h + t / 2)), (h, t / 2)) for s in (1, -1)]
    for k, ((x, y), (sx, sy)) in enumerate(walls):
        socket.add_geom(name=f"{SOCKET}_wall{k}", type=mujoco.mjtGeom.mjGEOM_BOX, pos=[x, y, d / 2],
                        size=[sx, sy, d / 2], rgba=[0.3, 0.3, 0.35, 1.0])
    spec.add_exclude(bodyname1="world", bodyname2=SOCKET)  # the walls stand on the table without contacts
    add_pose_sensors(spec, SOCKET, mujoco.mjtObj.mjOBJ_XBODY, SOCKET, frame)
    spec.add_sensor(name="peg_tip_pos", type=mujoco.mjtSensor.mjSENS_FRAMEPOS, objtype=mujoco.mjtObj.mjOBJ_SITE,
                    objname=f"{PEG}_tip", reftype=mujoco.mjtObj.mjOBJ_XBODY, refname=frame)
    extend_keyframes(spec, (0.0, 0.0, 0.0), 3)  # the socket at home


class InsertTask(ArmTask):
    """Insert the held peg into the socket's hole and leave it there (the arm's joints move; the gripper holds
    the peg closed)."""

    _BUFFERS = ("last_action", "held", "tip_pos")
    _RANDOMIZED = ("geom_friction", "body_mass", "body_inertia")

    def __init__(self, cfg: InsertConfig, robot: None, model: mujoco.MjModel, layout: ArmLayout, num_envs: int,
                 device: torch.device) -> None:
        n_arm = len(layout.arm.arm_joints)
        super().__init__(cfg, model, layout, num_envs, device, action_dim=n_arm)
        self.socket_qadr = int(model.joint(f"{SOCKET}_x").qposadr[0])
        self.socket_home = self.tensor(model.body(SOCKET).pos[:2])
        self.peg_body, self.peg_geom = model.body(PEG).id, model.geom(f"{PEG}_geom").id
        self.start_ranges = self.tensor([cfg.socket_x, cfg.socket_y, cfg.socket_yaw]).T  # [2, 3]
        self.rest_targets[n_arm:] = self.tensor(self.joint_limits[n_arm:, 0])  # the gripper closed on the peg
        noise = cfg.socket_obs_noise * cfg.obs_noise
        self.set_obs_terms((*self.joint_terms(), ObsTerm("object_pose", 9, noise=noise),
                            ObsTerm("object_to_ee", 3, noise=noise), ObsTerm("last_action", self.action_dim)))
        self.tip_pos = torch.zeros(num_envs, 3, device=device)
        """The peg tip's position at the last step (base frame), which :meth:`check_simulation` reads."""
        self.down = self.tensor(DOWN)

    @classmethod
    def scene(cls, cfg: InsertConfig) -> Callable[[mujoco.MjSpec], None]:
        """The peg and the socket (:func:`add_peg_and_socket`), the peg's mass the middle of ``object_mass`` until
        :meth:`randomize_model`."""
        arm = load_arm(cfg.arm)
        return lambda spec: add_peg_and_socket(spec, cfg, arm.base_body, arm.ee_site)

    def signals(self, physics: Any) -> dict[str, torch.Tensor]:
        """The arm's signals, the socket's pose (``object_pose``, its base centre on the table, base frame) and
        the peg's tip (``peg_tip``)."""
        sd = self.snapshot(physics)
        pose = torch.cat([sd[:, self.sensors["socket_pos"]], sd[:, self.sensors["socket_quat"]]], -1)
        return {**self.arm_signals(sd), "object_pose": pose, "peg_tip": sd[:, self.sensors["peg_tip_pos"]]}

    def goal_quat(self, socket_quat: torch.Tensor) -> torch.Tensor:
        """``[N, 4]``: the end effector's orientation with the peg down the hole, square to its walls."""
        return quat_mul(socket_quat, self.down.expand_as(socket_quat))

    # -- hooks called by MjVecEnv ----------------------------------------------------------------
    def randomize_model(self, physics: Any, gen: torch.Generator) -> None:
        """Each world's peg friction and mass (inertia scaled with the mass), uniform in their ranges."""
        self.randomize_object(physics, gen, self.peg_body, self.peg_geom)

    def sample_initial_state(self, physics: Any, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """The arm's start (``ArmTask``) and the socket's position and yaw, uniform in their ranges."""
        qpos, qvel = super().sample_initial_state(physics, gen)
        drawn = self.uniform(gen, *self.start_ranges)
        drawn[:, :2] -= self.socket_home  # the slide joints move the socket from its home
        a = self.socket_qadr
        qpos[:, a:a + 3] = drawn.to(qpos.dtype)
        return qpos, qvel

    def evaluate(self, physics: Any, episode_length: torch.Tensor,
                 gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """Rewards and the success state for this step's peg; then the last action moves on."""
        c, s = self.cfg, self.signals(physics)
        socket, self.tip_pos = s["object_pose"][:, :3], s["peg_tip"]
        lateral, depth = peg_in_hole(self.tip_pos, socket, c.hole_depth)
        distance = (self.tip_pos - socket).norm(dim=-1)  # the goal: the tip at the hole's bottom, on its axis
        angle = quat_angle(s["ee_quat"], self.goal_quat(s["object_pose"][:, 3:]))
        terms = insert_terms(distance, lateral, depth, angle, self._action, self.last_action, c.hole_half_width,
                             c.hole_depth, c.keypoint_std, c.keypoint_fine_std, c.align_std, c.orientation_std)
        success = inserted(lateral, depth, c.success_depth * c.hole_depth, c.clearance + c.success_margin)
        metrics = {"insertion_depth": depth, "lateral_error": lateral, "tip_goal_distance": distance,
                   "orientation_error": angle}
        return self.finish_step(terms, metrics, success, s)

    def check_simulation(self) -> None:
        """A peg tip below the table (by more than the peg's half-width) or a non-finite one cannot be right."""
        check_object("insert", "peg's tip", self.tip_pos, -self.cfg.peg_half_width)

    def deploy_metadata(self) -> dict[str, Any]:
        """The arm's bundle entries (``ArmTask``) and what the peg and the socket are."""
        c = self.cfg
        return {**super().deploy_metadata(), "object": {
            "frame": self.arm.base_body, "peg_half_width": c.peg_half_width, "peg_tip": c.peg_tip,
            "clearance": c.clearance, "hole_depth": c.hole_depth}}


register_task("insert", config=InsertConfig, task=InsertTask)
