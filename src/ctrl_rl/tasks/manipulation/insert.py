"""Insert: an arm puts a peg it holds into a square hole with a millimetre of clearance per side.

Isaac Lab Factory's peg-insert convention: the peg starts in the gripper, the socket (the "fixed asset") stands
on the table, and the task is the insertion alone (Factory's ``peg_insert``; its success: the peg down the hole
past a fraction of its depth, centred on its axis). Two differences, said here and in docs/manipulation.md:

* **The peg is held rigidly**: it is a body fixed to the end effector's body (a child of the body of the arm's
  ``ee_site``, on the site's approach axis), not a grasped free body, so it cannot slip or turn in the hand. The
  gripper is closed (its rest target is the fingers' closed limit) but does not bear on the peg: on the YAM the
  finger pads sit 1.4 cm off the site's axis, beside the peg. A grasp held by friction is a later slice.
* **The start** is the arm's default pose with random joint offsets (as lift's), not Factory's end effector
  placed above the socket by inverse kinematics: the policy also brings the peg over the hole. Training may start
  a share of its episodes (``task.kwargs.rim_start``) with the tip just above the rim, off the hole's axis, where
  failed episodes end (``insert_starts.py``); evaluation never does.

The peg and the socket are added to the arm's model by an MJCF edit (``ctrl_rl.robots.arm_scenes``:
``add_peg_and_socket``, torch-free, so sim2sim rebuilds it from the bundle): the peg a box with a site at its tip;
the socket four box walls around a hole ``clearance`` wider than the peg on each side, on three joints (x, y, yaw)
that a reset writes and that hold still under the peg (a large armature, damping and dry friction: it moves by
micrometres in an episode of the expert's pushing; a reset moves it through ``write_rows`` like every other
coordinate). Its walls do not touch the table (an ``exclude`` pair); the peg touches the table and the walls (and
the fingers, where they reach it). The policy moves the six arm joints (the gripper holds its rest target) and
observes joint positions and velocities, the socket's pose and its position relative to the end effector and to
the peg's tip (with ``socket_obs_noise``), the joint step that takes the tip to the hole's bottom through the tip's
Jacobian (``tool_correction``; ``task.kwargs.tool_correction=false`` leaves it out) and the last action. Rewards
are the terms of ``rewards.py: insert_terms``; success is the named metric ``success_rate``
(:class:`~.insert_config.InsertConfig`'s docstring states the rule), which ``ctrl-rl eval`` prints. A peg tip below
the table or a non-finite one is a ``SimulationError``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import mujoco
import torch

from ctrl_rl.robots.arm import add_joint_frame_sensors, load_arm
from ctrl_rl.robots.arm_scenes import PEG, PEG_SOCKET_KEYS, SOCKET, add_peg_and_socket, inserted, peg_in_hole
from ctrl_rl.robots.terms import ObsTerm, quat_angle, quat_mul
from ctrl_rl.tasks import register_task

from .arm_task import ArmLayout, ArmTask, check_object
from .insert_config import InsertConfig
from .insert_starts import rim_start_bank
from .rewards import insert_terms

TIP_LEVER = 0.3
"""About how far the peg's tip is from the arm's shoulder (m): the socket's observation noise (m) over it is the
noise of ``tool_correction`` (rad)."""
DOWN = (0.0, 0.0, 1.0, 0.0)
"""A half turn about y (w, x, y, z): the end effector's approach axis straight down, its fingers along y."""


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
        correction = (ObsTerm("tool_correction", n_arm, noise=noise / TIP_LEVER),) if cfg.tool_correction else ()
        self.set_obs_terms((*self.joint_terms(), ObsTerm("object_pose", 9, noise=noise),
                            ObsTerm("object_to_ee", 3, noise=noise), ObsTerm("object_to_tool", 3, noise=noise),
                            *correction, ObsTerm("last_action", self.action_dim)))
        self.tip_pos = torch.zeros(num_envs, 3, device=device)
        """The peg tip's position at the last step (base frame), which :meth:`check_simulation` reads."""
        self.down = self.tensor(DOWN)
        self._rim_bank: tuple[torch.Tensor, torch.Tensor] | None = None
        self._start_action = torch.zeros(num_envs, self.action_dim, device=device)
        """Each env's last action as its latest reset drew it: zero, or the hold of its rim start."""

    @classmethod
    def scene(cls, cfg: InsertConfig) -> Callable[[mujoco.MjSpec], None]:
        """The peg and the socket (:func:`add_peg_and_socket`), the peg's mass the middle of ``object_mass`` until
        :meth:`randomize_model`."""
        arm = load_arm(cfg.arm)

        def edit(spec: mujoco.MjSpec) -> None:
            add_peg_and_socket(spec, cfg, arm.base_body, arm.ee_site)
            if cfg.tool_correction:
                add_joint_frame_sensors(spec, arm)
        return edit

    def signals(self, physics: Any) -> dict[str, torch.Tensor]:
        """The arm's signals, the socket's pose (``object_pose``, its base centre on the table, base frame) and
        the peg's tip (``tool_pos``) and, with ``tool_correction``, its Jacobian (``tool_jacobian``)."""
        sd = self.snapshot(physics)
        pose = torch.cat([sd[:, self.sensors["socket_pos"]], sd[:, self.sensors["socket_quat"]]], -1)
        tip = sd[:, self.sensors["peg_tip_pos"]]
        s = {**self.arm_signals(sd), "object_pose": pose, "tool_pos": tip}
        if self.cfg.tool_correction:
            s["tool_jacobian"] = self.point_jacobian(sd, tip)
        return s

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
        if self.cfg.rim_start > 0:
            qpos = self.draw_rim_starts(qpos, gen)
        return qpos, qvel

    def draw_rim_starts(self, qpos: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        """``qpos`` with a ``rim_start`` share of its rows replaced by poses of the bank (``insert_starts.py``,
        solved on the first call); keeps those rows' holding actions for :meth:`reset_rows`."""
        if self._rim_bank is None:
            bank, hold = rim_start_bank(self._model, self.arm, self.cfg, self.start_qpos().cpu().double().numpy(),
                                        self.socket_qadr)
            self._rim_bank = self.tensor(bank).to(qpos.dtype), self.tensor(hold)
        bank, hold = self._rim_bank
        picked = torch.rand(self.num_envs, generator=gen, device=self.device) < self.cfg.rim_start
        row = torch.randint(len(bank), (self.num_envs,), generator=gen, device=self.device)
        self._start_action = torch.where(picked[:, None], hold[row], 0.0)
        return torch.where(picked[:, None], bank[row], qpos)

    def reset_rows(self, rows: torch.Tensor, gen: torch.Generator) -> None:
        """No held steps; the last action zero, or the hold of a rim start (:meth:`draw_rim_starts`)."""
        super().reset_rows(rows, gen)
        self.last_action = torch.where(rows[:, None], self._start_action, self.last_action)

    def evaluate(self, physics: Any, episode_length: torch.Tensor,
                 gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """Rewards and the success state for this step's peg; then the last action moves on."""
        c, s = self.cfg, self.signals(physics)
        socket, self.tip_pos = s["object_pose"][:, :3], s["tool_pos"]
        lateral, depth = peg_in_hole(self.tip_pos, socket, c.hole_depth)
        distance = (self.tip_pos - socket).norm(dim=-1)  # the goal: the tip at the hole's bottom, on its axis
        angle = quat_angle(s["ee_quat"], self.goal_quat(s["object_pose"][:, 3:]))
        tolerance = c.clearance + c.success_margin  # off the axis by more, the peg is not in the hole
        terms = insert_terms(distance, lateral, depth, angle, self._action, self.last_action, c.hole_half_width,
                             c.hole_depth, c.keypoint_std, c.keypoint_fine_std, c.align_std, c.orientation_std,
                             tolerance, c.jam_band)
        success = inserted(lateral, depth, c.success_depth * c.hole_depth, tolerance)
        metrics = {"insertion_depth": depth, "lateral_error": lateral, "tip_goal_distance": distance,
                   "orientation_error": angle, "jam": terms["jam"]}  # jam: how pressed on the rim, off the hole
        return self.finish_step(terms, metrics, success, s)

    def check_simulation(self) -> None:
        """A peg tip below the table (by more than the peg's half-width) or a non-finite one cannot be right."""
        check_object("insert", "peg's tip", self.tip_pos, -self.cfg.peg_half_width)

    def deploy_metadata(self) -> dict[str, Any]:
        """The arm's bundle entries (``ArmTask``), what the peg and the socket are and how an episode is drawn and
        judged (``object``: what sim2sim rebuilds the scene and its verdict from), and the end effector's
        workspace: over the socket's range, up to the default pose's height (the node's box, ``arm_node.py``)."""
        c = self.cfg
        rule = {"success_depth": c.success_depth, "success_margin": c.success_margin,
                "success_hold_steps": c.success_hold_steps, "episode_length_s": c.episode_length_s,
                "socket_yaw": list(c.socket_yaw), "object_friction": list(c.object_friction)}
        geometry = {k: (list(v) if isinstance(v, tuple) else v) for k in PEG_SOCKET_KEYS for v in [getattr(c, k)]}
        workspace = [list(c.socket_x), list(c.socket_y), [c.peg_tip - c.hole_depth, c.peg_tip]]
        return {**super().deploy_metadata(), "workspace": workspace, "tool_offset": [0.0, 0.0, c.peg_tip],
                "object": {"kind": "peg_socket", "frame": self.arm.base_body, **geometry, **rule}}


register_task("insert", config=InsertConfig, task=InsertTask)
