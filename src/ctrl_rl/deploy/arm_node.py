"""What the deploy node adds for an arm bundle: the pose command it tracks, the object pose it reads and the
workspace box it keeps.

An arm bundle (exported from an arm task: its metadata has ``kinematic_chain`` and a workspace, the pose
command's or the task's) has no IMU, no velocity command and no tilt; the node instead reads an end-effector
pose target (reach: ``pose_command_topic``, ``geometry_msgs/PoseStamped`` in the bundle's
``pose_command.frame``, the arm's base body) or the manipulated object's pose (insert and lift:
``object_pose_topic``, ``geometry_msgs/PoseStamped`` in the bundle's object frame) and a target height (lift:
``lift_command_topic``, ``std_msgs/Float64``), computes the end effector's position by forward
kinematics (``arm_kinematics.py``) for the terms that need it, and checks every policy command's end effector
against a workspace box. docs/deploy.md, "Arms", states the rules; :class:`ArmSide` is them.

Numpy only.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import messages as m
from .arm_kinematics import KinematicChain, WorkspaceBox
from .safety import JointCommand, clamp_targets

OBJECT_TERMS = ("object_pose", "object_to_ee", "object_to_tool", "tool_correction")
"""The observation terms an object pose source feeds (``ctrl_rl.robots.terms.EXTERNAL_TERMS``)."""
TOOL_TERMS = ("object_to_tool", "tool_correction")
"""Terms of a held tool's tip: a bundle that observes one carries the tip's ``tool_offset``."""


def matrix_to_quat(r: np.ndarray) -> np.ndarray:
    """Unit quaternion (w, x, y, z, w >= 0) of a rotation matrix (Shepperd's method)."""
    t = np.trace(r)
    if t > 0:
        s = 2.0 * np.sqrt(1.0 + t)
        q = np.array([0.25 * s, (r[2, 1] - r[1, 2]) / s, (r[0, 2] - r[2, 0]) / s, (r[1, 0] - r[0, 1]) / s])
    else:
        i = int(np.argmax(np.diag(r)))
        j, k = (i + 1) % 3, (i + 2) % 3
        s = 2.0 * np.sqrt(1.0 + r[i, i] - r[j, j] - r[k, k])
        q = np.zeros(4)
        q[0] = (r[k, j] - r[j, k]) / s
        q[1 + i], q[1 + j], q[1 + k] = 0.25 * s, (r[j, i] + r[i, j]) / s, (r[k, i] + r[i, k]) / s
    q /= np.linalg.norm(q)
    return q if q[0] >= 0 else -q


def _checked_pose(msg: m.PoseStamped, frame: str, what: str) -> np.ndarray:
    """``[x, y, z, qw, qx, qy, qz]`` of ``msg``, the quaternion normalized; a ``ValueError`` naming ``what``
    unless it is given in ``frame``, finite, and its quaternion within 0.05 of unit norm."""
    if msg.frame_id != frame:
        raise ValueError(f"{what} is in frame {msg.frame_id!r}; the policy was trained on poses in {frame!r} "
                         "(transform it there, e.g. with tf2, before publishing)")
    pose = np.concatenate([np.asarray(msg.position, dtype=np.float64).reshape(-1),
                           np.asarray(msg.orientation, dtype=np.float64).reshape(-1)])
    if pose.shape != (7,) or not np.all(np.isfinite(pose)):
        raise ValueError(f"{what} must be a finite position and quaternion")
    norm = float(np.linalg.norm(pose[3:]))
    if abs(norm - 1.0) > 0.05:
        raise ValueError(f"{what} orientation is not a unit quaternion (norm {norm:.3f})")
    pose[3:] /= norm
    return pose


def is_arm_bundle(meta: dict[str, Any]) -> bool:
    """Whether a bundle's metadata comes from an arm task (it carries the arm's config)."""
    return "arm_config" in meta


class ArmSide:
    """The pose command and the workspace guard of one arm bundle (see the module docstring)."""

    def __init__(self, meta: dict[str, Any], joint_names: list[str], default_pose: np.ndarray,
                 margin: float) -> None:
        """``margin``: ``safety.workspace_margin`` (m). A bundle without its chain or workspace is refused."""
        if "kinematic_chain" not in meta:
            raise ValueError("arm bundle lacks kinematic_chain in its metadata: it was exported before the deploy "
                             "node ran arms; re-export it with `ctrl-rl export <run>`")
        workspace = (meta.get("pose_command") or {}).get("workspace", meta.get("workspace"))
        if workspace is None:
            raise ValueError(f"arm bundle of task {meta.get('task')!r} has no workspace (pose_command.workspace or "
                             "workspace): the node keeps every arm's end effector in a box; re-export it with "
                             "`ctrl-rl export <run>`")
        self.chain = KinematicChain(meta["kinematic_chain"], list(joint_names))
        ee, rotation = self.chain.ee_pose(default_pose)
        self.targets = WorkspaceBox.around(workspace, ee, 0.0)
        """The task's target box (stretched to the default pose): pose commands are clipped into it."""
        self.box = WorkspaceBox(self.targets.bounds + np.array([-margin, margin]))
        """Where a policy command may put the end effector."""
        self.default_target = np.concatenate([ee, matrix_to_quat(rotation)])
        """The target until a pose command arrives: hold the end effector where the default pose puts it."""
        self.command_frame = str((meta.get("pose_command") or {}).get("frame", ""))
        """The frame a pose command must be given in (the arm's base body); "" for a task without one."""
        self.object_frame = str((meta.get("object") or {}).get("frame", ""))
        """The frame an object pose must be given in (the arm's base body); "" for a task without an object."""
        self.observes_object = any(t.get("name") in OBJECT_TERMS for t in meta.get("obs_terms", []))
        """Whether the policy reads the object's pose: the node then needs a fresh one to run."""
        if "pose_command" in meta and not self.command_frame:
            raise ValueError("arm bundle has a pose command but its metadata has no pose_command.frame; re-export "
                             "it with `ctrl-rl export <run>`")
        if self.observes_object and not self.object_frame:
            raise ValueError("arm bundle observes an object but its metadata has no object.frame; re-export it "
                             "with `ctrl-rl export <run>`")
        self.tool_offset: np.ndarray | None = None
        """A held tool's tip in the end effector's frame (m; the bundle's ``tool_offset``): the ``tool_pos`` signal."""
        if "tool_offset" in meta:
            self.tool_offset = np.asarray(meta["tool_offset"], dtype=np.float64)
            if self.tool_offset.shape != (3,) or not np.all(np.isfinite(self.tool_offset)):
                raise ValueError(f"arm bundle's tool_offset must be 3 finite numbers (m), got {meta['tool_offset']!r}")
        elif any(t.get("name") in TOOL_TERMS for t in meta.get("obs_terms", [])):
            raise ValueError(f"arm bundle observes {'/'.join(TOOL_TERMS)} but its metadata has no tool_offset; "
                             "re-export it with `ctrl-rl export <run>`")
        names = list(joint_names)
        self.moved = [names.index(j) for j in meta.get("action_joints", names) if j in names]
        """The joints the policy moves (indices into ``joint_names``): the columns of ``tool_jacobian``."""
        self.lift_range: tuple[float, float] | None = None
        """A lift bundle's training range of the target height (m; the bundle's ``object.lift_height``)."""
        if any(t.get("name") == "lift_command" for t in meta.get("obs_terms", [])):
            heights = (meta.get("object") or {}).get("lift_height")
            if heights is None or len(heights) != 2 or not heights[0] <= heights[1]:
                raise ValueError("arm bundle observes lift_command but its metadata has no object.lift_height "
                                 "[low, high]; re-export it with `ctrl-rl export <run>`")
            self.lift_range = (float(heights[0]), float(heights[1]))
        self.holds = 0
        """Policy commands whose target was moved back inside the box (or refused)."""
        self.last_hold = ""

    def parse_pose(self, msg: m.PoseStamped) -> np.ndarray:
        """``[x, y, z, qw, qx, qy, qz]`` of an end-effector target in :attr:`command_frame`: the position clipped
        into the task's target box (the policy never saw a target beyond it), the quaternion normalized; a
        ``ValueError`` for a pose in another frame, non-finite or not a unit quaternion."""
        pose = _checked_pose(msg, self.command_frame, "pose command")
        pose[:3] = np.clip(pose[:3], self.targets.bounds[:, 0], self.targets.bounds[:, 1])
        return pose

    def parse_lift(self, msg: m.Float64) -> np.ndarray:
        """``[height]``: a lift target (m above the table) clipped into the training range (the policy never saw
        a target beyond it); a ``ValueError`` for a non-finite one."""
        height = float(msg.data)
        if not np.isfinite(height):
            raise ValueError("lift command must be a finite height (m)")
        return np.array([min(max(height, self.lift_range[0]), self.lift_range[1])])

    def parse_object(self, msg: m.PoseStamped) -> np.ndarray:
        """``[x, y, z, qw, qx, qy, qz]`` of the object, the quaternion normalized; a ``ValueError`` for a pose in
        another frame, non-finite, not a unit quaternion, or outside the workspace box (a tracking error: the
        policy never saw an object there)."""
        pose = _checked_pose(msg, self.object_frame, "object pose")
        if not self.box.contains(pose[:3]):
            raise ValueError(f"object at {pose[:3].round(3).tolist()} m lies outside the workspace box "
                             f"{self.box.bounds.round(3).tolist()}")
        return pose

    def kinematic_signals(self, joint_pos: np.ndarray) -> dict[str, np.ndarray]:
        """``ee_pos`` and, for a bundle with a :attr:`tool_offset`, ``tool_pos`` (the held tool's tip) and its
        Jacobian in the moved joints (``tool_jacobian``, ``[3, n]``) at ``joint_pos`` (m, base frame), from one pass
        of the chain."""
        ee, rotation, axes = self.chain.pose_and_axes(joint_pos)
        if self.tool_offset is None:
            return {"ee_pos": ee}
        tool = ee + rotation @ self.tool_offset
        return {"ee_pos": ee, "tool_pos": tool, "tool_jacobian": self.chain.point_jacobian(axes, tool, self.moved)}

    def guard(self, out: JointCommand, limits: np.ndarray | None, torque: np.ndarray | None,
              measured: np.ndarray, joint_vel: np.ndarray | None) -> JointCommand | None:
        """``out`` if its target's end effector lies inside :attr:`box`; else the target moved back toward the
        measured pose: ``c + s (target - c)``, where ``c`` is the measured pose clamped as every target is (joint
        limits, and what the torque limits allow at the measured speed) and ``s`` in [0, 1) is the largest
        whose end effector is inside (bisection, to 1/1024). Both ends lie within the clamp's limits (an
        interval per joint), so every point between does: the result needs no clamp of its own. ``None`` (the
        node faults) where ``c``'s end effector is outside the box: nothing inside is within reach."""
        if self.box.contains(self.chain.ee_pose(out.position)[0]):
            return out
        self.holds += 1
        start, moved = clamp_targets(measured, limits, out.kp, out.kd, torque, measured, joint_vel)
        if not self.box.contains(self.chain.ee_pose(start)[0]):
            self.last_hold = ("the measured pose (clamped to the joint and torque limits) puts the end effector "
                              "outside the workspace box")
            return None
        step = out.position - start
        lo, hi = 0.0, 1.0
        for _ in range(10):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if self.box.contains(self.chain.ee_pose(start + mid * step)[0]) else (lo, mid)
        outside = self.box.distance_outside(self.chain.ee_pose(out.position)[0])
        self.last_hold = (f"end effector target {outside:.3f} m outside the workspace box "
                          f"{self.box.bounds.round(3).tolist()}: scaled to {lo:.3f} of its step")
        return JointCommand(start + lo * step, out.kp, out.kd, max(out.clamped, moved))

    def status(self) -> dict[str, Any]:
        return {"workspace_holds": self.holds, "last_workspace_hold": self.last_hold}
