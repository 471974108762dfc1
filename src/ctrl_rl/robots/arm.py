"""Arm descriptions: a fixed-base arm's MJCF plus what a policy and a deploy node must agree on.

An :class:`ArmRobot` (one YAML file, as a legged robot's) names the arm joints in the policy's order,
the gripper joints, the end-effector site, the default pose, PD gains, torque limits and action scale.
:func:`build_arm_model` compiles the MJCF through ``mujoco.MjSpec`` under the legged robots' loading rules
(``robots/mjcf_edits.py``, ``robots/physics.py``), so an owner's arm needs no hand edits:

* the MJCF's own sensors leave (said once), its visual meshes leave the training model, ``collide``
  and ``armature`` apply, a floor (the table the arm stands on) is added where it has no ground;
* its actuators are replaced by PD position actuators on the arm and gripper joints with the YAML's
  gains and torque limits (targets never past a joint's range); keyframes keep their poses;
* the sensors a task reads are added under canonical names: ``<joint>_pos``, ``<joint>_vel``,
  ``<joint>_torque`` per actuated joint, and ``ee_pos`` / ``ee_quat``, the end-effector site's pose in
  the base body's frame (a target is given in that frame, on the robot as in training).

Kept from the MJCF: masses, inertias, joint ranges (the joint limits the bundle carries), per-joint
damping, frictionloss and armature (unless the YAML sets ``armature``), equality constraints (a
gripper's coupled finger), contact geometry. Its ``<option>`` is replaced by the task's physics profile
unless the YAML says ``physics: mjcf``; the timestep is the task's either way.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar

import mujoco
import numpy as np

from . import mjcf_edits as edits
from .description import RobotDescription, per_joint
from .physics import PHYSICS_CHOICES
from .robot import SensorLayout

log = logging.getLogger(__name__)

REQUIRED = ("name", "mjcf", "base_body", "arm_joints", "ee_site", "default_pose", "kp", "kd")
"""Keys every arm YAML gives."""
PER_JOINT = ("default_pose", "kp", "kd", "torque_limits", "armature", "action_scale")
"""Keys with one value for every actuated joint (``arm_joints`` then ``gripper_joints``), or one in all."""


@dataclass(frozen=True)
class ArmRobot(RobotDescription):
    """One fixed-base arm: where its MJCF is (:class:`RobotDescription`: ``name``, ``mjcf``, ``base_body``,
    its mount), which joints move and which site is the end effector."""

    kind: ClassVar[str] = "arm"

    arm_joints: tuple[str, ...]
    """The arm's actuated joints in the policy's order (actions, observations, the bundle)."""
    ee_site: str
    """The end-effector site (the point between the fingers): its pose is what a reach task tracks."""
    default_pose: tuple[float, ...]
    """Joint positions (rad, m for a slide joint) of :attr:`joint_names` that actions are offsets from."""
    kp: tuple[float, ...]
    """PD stiffness per actuated joint (N m/rad; N/m for a slide joint)."""
    kd: tuple[float, ...]
    """PD damping per actuated joint (N m s/rad; N s/m)."""
    torque_limits: tuple[float, ...] = ()
    """Motor torque (force) limits per actuated joint (N m; N); empty: read from the MJCF (an actuator's
    ``forcerange`` on the joint, else the joint's ``actuatorfrcrange``), an error where it has none."""
    gripper_joints: tuple[str, ...] = ()
    """The gripper's actuated joints, after the arm's in :attr:`joint_names`; a finger coupled to another by
    an equality constraint is not one (the constraint moves it). Empty: no gripper."""
    passive_pose: dict[str, float] = field(default_factory=dict)
    """Start positions of joints no actuator drives (a coupled finger), so a reset meets the MJCF's
    equality constraints; the others start at the MJCF's ``qpos0``."""
    action_scale: float | tuple[float, ...] = 0.5
    """Joint target = default_pose + action_scale * action: one value, or one per actuated joint."""
    armature: tuple[float, ...] = ()
    """Rotor armature per actuated joint (kg m^2, rotor inertia x gear ratio^2); empty: the MJCF's."""
    collide: tuple[str, ...] = ()
    """The arm's geoms that collide (the legged YAML's spellings: geom names or regexes, ``body:<regex>``,
    ``class:<regex>``); every other geom of the arm does not. Empty: the MJCF's own settings."""
    physics: str = "task"
    """``task``: the task's physics profile replaces the MJCF's options; ``mjcf``: the MJCF's stay."""
    workspace: tuple[tuple[float, float], ...] = ()
    """``[[x_lo, x_hi], [y_lo, y_hi], [z_lo, z_hi]]`` (m, base frame): the box in front of the arm where its
    end effector is sent (a reach task's targets). Empty: a task must be given one."""
    source: str = ""
    """The YAML file this config came from (for messages)."""

    @property
    def joint_names(self) -> tuple[str, ...]:
        """Every actuated joint: the arm's, then the gripper's (the bundle's joint order)."""
        return self.arm_joints + self.gripper_joints

    @classmethod
    def from_yaml(cls, path: str | Path) -> ArmRobot:
        """Load and validate an arm config; errors name the key and the fix."""
        path, raw = cls.read_yaml(path)
        known = {f.name for f in fields(cls)} - {"source"}
        unknown, missing = sorted(set(raw) - known), [k for k in REQUIRED if k not in raw]
        if unknown or missing:
            raise ValueError(f"{path}: unknown key(s) {unknown}, missing key(s) {missing}; an arm YAML's keys are "
                             f"{sorted(known)} (docs/manipulation.md)")
        values: dict[str, Any] = {**raw, "source": str(path.resolve())}
        for key in ("arm_joints", "gripper_joints", "collide"):
            values[key] = tuple(raw.get(key) or ())
        n = len(values["arm_joints"]) + len(values["gripper_joints"])
        joints = f"actuated joint ({n}: arm_joints, then gripper_joints)"  # what a per-joint key's error counts
        for key in PER_JOINT:
            if key == "action_scale" and not isinstance(raw.get(key), list):
                values[key] = float(raw.get(key, cls.action_scale))
            elif key in raw:
                values[key] = per_joint(raw[key], n, f"{path}: {key}", joints, single=key != "default_pose")
        values["passive_pose"] = {str(k): float(v) for k, v in (raw.get("passive_pose") or {}).items()}
        values["workspace"] = tuple(tuple(float(x) for x in axis) for axis in raw.get("workspace") or ())
        if values["workspace"] and (len(values["workspace"]) != 3 or
                                    any(len(a) != 2 or a[0] > a[1] for a in values["workspace"])):
            raise ValueError(f"{path}: workspace must be [[x_lo, x_hi], [y_lo, y_hi], [z_lo, z_hi]] (m, base frame), "
                             f"got {raw['workspace']}")
        if values.get("physics", cls.physics) not in PHYSICS_CHOICES:
            raise ValueError(f"{path}: physics must be one of {list(PHYSICS_CHOICES)}, got {raw['physics']!r}")
        if not np.all(np.asarray(values.get("action_scale", cls.action_scale)) >= 0):
            raise ValueError(f"{path}: action_scale must be >= 0, got {raw['action_scale']}")
        arm = cls(**values)
        if not arm.torque_limits:  # from the model, where it has them
            arm = cls(**{**values, "torque_limits": model_torque_limits(arm)})
        return arm


def model_torque_limits(arm: ArmRobot) -> tuple[float, ...]:
    """Each actuated joint's torque limit from the MJCF: a force-limited actuator on it, else the joint's
    ``actuatorfrcrange``; a ``ValueError`` naming the joints without one and the YAML key."""
    model = mujoco.MjModel.from_xml_path(str(arm.mjcf_path()))
    limits, absent = [], []
    for name in arm.joint_names:
        j = model.joint(name).id
        on_joint = [a for a in range(model.nu) if model.actuator_trntype[a] == mujoco.mjtTrn.mjTRN_JOINT
                    and model.actuator_trnid[a, 0] == j and model.actuator_forcelimited[a]]
        if on_joint:
            limits.append(float(np.abs(model.actuator_forcerange[on_joint[0]]).max()))
        elif model.jnt_actfrclimited[j]:
            limits.append(float(np.abs(model.jnt_actfrcrange[j]).max()))
        else:
            absent.append(name)
    if absent:
        raise ValueError(f"arm {arm.name}: its MJCF gives joint(s) {absent} no torque limit (no force-limited "
                         f"actuator, no actuatorfrcrange); set torque_limits in {arm.source or 'its YAML'}")
    return tuple(limits)


def load_arm(name_or_path: str) -> ArmRobot:
    """A shipped arm by name (``i2rt_yam``: a YAML of ``ctrl_rl/robots``) or an arm YAML by path."""
    return ArmRobot.load(name_or_path)


def build_arm_model(arm: ArmRobot, visuals: bool = False,
                    scene: Callable[[mujoco.MjSpec], None] | None = None) -> tuple[mujoco.MjModel, SensorLayout]:
    """Compile the arm's MJCF under the loading rules of this module's docstring; ``visuals``: keep the
    visual meshes (rendering); ``scene``: a task's edit of the spec once the arm's are done (a lift task's
    cube and its sensors). Returns the model and its sensors' slices of ``sensordata``."""
    path = arm.mjcf_path()
    spec = mujoco.MjSpec.from_file(str(path))
    joints = {j.name for j in spec.joints}
    absent = [n for n in (*arm.joint_names, *arm.passive_pose) if n not in joints]
    if spec.body(arm.base_body) is None or spec.site(arm.ee_site) is None or absent:
        raise ValueError(f"arm {arm.name}: {path.name} lacks base_body {arm.base_body!r}, ee_site {arm.ee_site!r} "
                         f"or joint(s) {absent}; its joints are {sorted(n for n in joints if n)}")
    own = edits.drop_own_sensors(spec)
    if own:
        edits.log_once(log, arm.source or arm.name, "sensors", logging.INFO, "arm %s: its MJCF's %d sensors (%s) "
                       "are left out of the training model; tasks read only the sensors training adds", arm.name,
                       len(own), ", ".join(own))
    if arm.collide:
        edits.filter_collisions(spec, arm.base_body, arm.collide, (), arm.name)
    if not visuals:
        edits.strip_visual_meshes(spec)
    edits.add_floor_if_missing(spec, arm.name)
    if arm.armature:
        edits.set_armature(spec, arm.joint_names, arm.armature)
    edits.replace_actuators(spec, arm.joint_names, arm.kp, arm.kd, arm.torque_limits, arm.default_pose)
    if scene is not None:
        scene(spec)
    S, O = mujoco.mjtSensor, mujoco.mjtObj  # noqa: E741 - short names keep the table readable
    for name in arm.joint_names:
        spec.add_sensor(name=f"{name}_pos", type=S.mjSENS_JOINTPOS, objtype=O.mjOBJ_JOINT, objname=name)
        spec.add_sensor(name=f"{name}_vel", type=S.mjSENS_JOINTVEL, objtype=O.mjOBJ_JOINT, objname=name)
        spec.add_sensor(name=f"{name}_torque", type=S.mjSENS_ACTUATORFRC, objtype=O.mjOBJ_ACTUATOR,
                        objname=f"{name}_pd")
    for sensor, kind in (("ee_pos", S.mjSENS_FRAMEPOS), ("ee_quat", S.mjSENS_FRAMEQUAT)):
        spec.add_sensor(name=sensor, type=kind, objtype=O.mjOBJ_SITE, objname=arm.ee_site, reftype=O.mjOBJ_XBODY,
                        refname=arm.base_body)
    model = spec.compile()
    layout = {model.sensor(i).name: slice(int(model.sensor_adr[i]), int(model.sensor_adr[i] + model.sensor_dim[i]))
              for i in range(model.nsensor)}
    return model, layout


def add_joint_frame_sensors(spec: mujoco.MjSpec, arm: ArmRobot) -> None:
    """Each arm joint's body frame in the base frame (sensors ``<joint>_frame_pos``, ``<joint>_frame_quat``): with
    the joint's own anchor and axis, what the Jacobian of a point the arm carries needs
    (``ArmTask.point_jacobian``). A task that observes ``tool_correction`` adds them in its scene."""
    S, O = mujoco.mjtSensor, mujoco.mjtObj  # noqa: E741
    for name in arm.arm_joints:
        body = spec.joint(name).parent.name
        for suffix, kind in (("pos", S.mjSENS_FRAMEPOS), ("quat", S.mjSENS_FRAMEQUAT)):
            spec.add_sensor(name=f"{name}_frame_{suffix}", type=kind, objtype=O.mjOBJ_XBODY, objname=body,
                            reftype=O.mjOBJ_XBODY, refname=arm.base_body)


def arm_indices(model: mujoco.MjModel, names: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    """``qpos`` and ``qvel`` addresses of joints ``names`` (one-dof joints), in that order."""
    ids = [model.joint(n).id for n in names]
    return np.array([model.jnt_qposadr[i] for i in ids], dtype=np.int64), \
        np.array([model.jnt_dofadr[i] for i in ids], dtype=np.int64)


def rest_qpos(model: mujoco.MjModel, arm: ArmRobot) -> np.ndarray:
    """``qpos`` of the default pose: the actuated joints at ``default_pose``, the passive ones at
    ``passive_pose``, every other coordinate at the model's ``qpos0``."""
    qpos = model.qpos0.copy()
    qpos[arm_indices(model, arm.joint_names)[0]] = arm.default_pose
    if arm.passive_pose:
        qpos[arm_indices(model, tuple(arm.passive_pose))[0]] = list(arm.passive_pose.values())
    return qpos


def settled_qpos(model: mujoco.MjModel, arm: ArmRobot, qpos: np.ndarray, targets: np.ndarray,
                 seconds: float) -> np.ndarray:
    """``qpos`` with the arm's joints (actuated and passive) where its PD actuators hold them after ``seconds``
    with ``targets`` from ``qpos`` at rest: where a real arm stands once its controller holds those targets (a
    soft arm sags under gravity). The other coordinates (a scene's objects) keep their ``qpos`` values."""
    data = mujoco.MjData(model)
    data.qpos[:] = qpos
    data.ctrl[:] = targets
    for _ in range(max(0, round(seconds / model.opt.timestep))):
        mujoco.mj_step(model, data)
    out = np.array(qpos, dtype=np.float64)
    idx = arm_indices(model, (*arm.joint_names, *arm.passive_pose))[0]
    out[idx] = data.qpos[idx]
    return out


def default_ee_pose(model: mujoco.MjModel, layout: SensorLayout, arm: ArmRobot) -> tuple[np.ndarray, np.ndarray]:
    """The end effector's position and quaternion (w, x, y, z) in the base frame at the default pose."""
    data = mujoco.MjData(model)
    data.qpos[:] = rest_qpos(model, arm)
    mujoco.mj_forward(model, data)
    return data.sensordata[layout["ee_pos"]].copy(), data.sensordata[layout["ee_quat"]].copy()
