"""Robot descriptions: an MJCF plus the facts a policy and a deploy node must agree on.

A :class:`RobotConfig` (one YAML file beside the MJCF) names the joints in the policy's
order, the default pose, PD gains, torque limits and action scale. :func:`build_model`
compiles the MJCF through ``mujoco.MjSpec`` and *adds* what every task reads, so a user's
model (MuJoCo Menagerie or their own) needs no hand edits:

* PD position actuators on the listed joints with the config's gains and torque limits
  (existing actuators are replaced: the gains trained with are the gains exported; keyframes
  keep their poses);
* the sensors a real robot has (IMU quaternion / gyro / accelerometer at the IMU site,
  foot contact, motor torque) and privileged ones for critics (base velocity and position,
  base contact, foot positions), all under canonical names (:data:`SENSOR_NAMES`), in place
  of the MJCF's own sensors.

The task's physics profile (timestep, solver budget, friction cone) is set on the compiled
model by ``robots/physics.py``; :func:`derived_values` are the robot's size as the task sees it.

Tasks observe through sensors only, never ``qpos``: MuJoCo evaluates sensors in the forward
pass at the start of a physics step, so after a control step every reading is one
consistent snapshot taken one physics step (5 ms) before its end — what a robot's state
estimator delivers too — on every backend alike.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

import mujoco
import numpy as np

from . import mjcf_edits as edits
from .description import MAX_STAND_UP_STIFFNESS, RobotDescription, per_joint
from .packages import RobotModelNotFetched
from .physics import PHYSICS_CHOICES

log = logging.getLogger(__name__)

ROBOTS_DIR = Path(__file__).resolve().parent


@dataclass(frozen=True)
class RobotConfig(RobotDescription):
    """One legged robot: where its MJCF is (:class:`RobotDescription`: ``name``, ``mjcf``, ``base_body``,
    its floating base) and how its joints are driven."""

    joint_names: tuple[str, ...]
    """Actuated joints in the policy's order: actions, joint observations and the deploy
    bundle all use this order (a deploy node maps the robot's names onto it, never by
    position)."""
    default_pose: tuple[float, ...]
    """Joint angles (rad) the actions are offsets from; the stand-up target on the robot."""
    kp: tuple[float, ...]
    """PD stiffness (N m/rad), per joint."""
    kd: tuple[float, ...]
    """PD damping (N m s/rad), per joint."""
    torque_limits: tuple[float, ...]
    """Motor torque limits (N m), per joint."""
    action_scale: float | tuple[float, ...] = 0.25
    """Joint target = default_pose + action_scale * action (legged_gym's convention): one value, or one
    per joint (as mjlab scales each joint; a small value nearly holds a joint at its default)."""
    action_joints: tuple[str, ...] = ()
    """The joints the policy moves, as names or regular expressions; every other joint holds its
    ``default_pose`` under its PD gains (unitree_rl_gym's G1: the legs act, waist and arms hold).
    Empty: every joint. The actions (and the ``last_action`` observation) follow ``joint_names``' order."""
    foot_geoms: tuple[str, ...] = ()
    """Geoms whose contacts count as foot contacts (air time, contact observations)."""
    imu_site: str | None = None
    """Site of the IMU on the base; ``None`` puts one at the base body's origin."""
    init_height: float | None = None
    """Base height (m) of the default pose standing on flat ground: where resets place it. Not
    given: derived from the model, the default pose's lowest foot (or, without feet, lowest
    colliding geom) on the ground (:func:`standing_height`)."""
    collide: tuple[str, ...] = ()
    """The robot's geoms that collide: geom names or regular expressions, ``feet`` (the foot geoms),
    ``body:<regex>`` (every geom of those bodies), ``class:<regex>`` (every geom whose own default class
    matches; Menagerie's collision geoms have no names); every other geom of the robot is made
    non-colliding. Empty: the MJCF's own settings (mjlab's Go1 lets only its feet touch the ground; a raw
    MJCF often lets every limb collide)."""
    physics: str = "task"
    """``task``: the task's physics profile replaces the MJCF's options (pyramidal cone, impratio 1, the
    task's solver budget; ``robots/physics.py``); ``mjcf``: the MJCF's ``<option>`` stays. The timestep is
    the task's either way; joint frictionloss, damping and armature are always the MJCF's."""
    armature: tuple[float, ...] = ()
    """Rotor armature per joint (kg m^2: rotor inertia x gear ratio^2), one value, one per joint or
    per leg; empty: the MJCF's."""
    mirror: tuple[tuple[str, str, int], ...] = ()
    """Left/right mirror of the joints, for symmetry augmentation: ``(a, b, s)`` means
    mirror(a) = s·b and mirror(b) = s·a; a centre joint maps to itself (``(waist, waist, -1)``).
    Empty: no mirror declared. Apply it with :meth:`mirror_map`."""
    stand_up_stiffness: float = 1.0
    """The deploy node's stand-up gains over ``kp`` (``kp x s``, ``kd x sqrt(s)``; 1 to 10), carried in the
    bundle (the node's ``safety.stand_up_stiffness`` overrides it). Soft gains that let the robot sag far
    below its standing height while it holds the default pose want a stiffer stand-up, so the policy takes
    over where its training episodes start (``init_height``) and not from a crouch."""
    source: str = ""
    """The YAML file this config came from (for messages)."""

    @property
    def action_index(self) -> tuple[int, ...]:
        """Positions in ``joint_names`` of the joints the policy moves (:attr:`action_joints`)."""
        if not self.action_joints:
            return tuple(range(self.num_joints))
        return tuple(i for i, j in enumerate(self.joint_names)
                     if any(re.fullmatch(p, j) for p in self.action_joints))

    def mirror_map(self) -> tuple[np.ndarray, np.ndarray]:
        """``(perm, sign)`` with ``mirrored = sign * q[..., perm]`` for any joint-ordered vector
        (positions, velocities, actions, torques); applying it twice gives ``q`` back."""
        if not self.mirror:
            raise ValueError(f"robot {self.name} declares no mirror; add a `mirror` list to its YAML")
        index = {j: i for i, j in enumerate(self.joint_names)}
        perm, sign = np.arange(self.num_joints), np.ones(self.num_joints)
        for a, b, s in self.mirror:
            perm[index[a]], perm[index[b]] = index[b], index[a]
            sign[index[a]] = sign[index[b]] = s
        return perm, sign

    @classmethod
    def from_yaml(cls, path: str | Path) -> RobotConfig:
        """Load and validate a robot config; errors name the key and the fix."""
        path, raw = cls.read_yaml(path)
        if "arm_joints" in raw:  # an arm's YAML (robots/arm.py) given to a legged task
            raise ValueError(f"{path}: an arm's YAML (arm_joints, ee_site), not a legged robot's; arms run with "
                             f"task=reach task.kwargs.arm={raw.get('name', path.stem)} (docs/manipulation.md)")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(raw) - known)
        if unknown:
            raise ValueError(f"{path}: unknown key(s) {unknown}; valid keys: {sorted(known - {'source'})}")
        missing = [k for k in ("name", "mjcf", "base_body", "joint_names", "default_pose", "kp", "kd",
                               "torque_limits") if k not in raw]
        if missing:
            raise ValueError(f"{path}: missing required key(s) {missing}")
        n = len(raw["joint_names"])

        def expand(key: str) -> tuple[float, ...]:  # one value, one per joint or one per joint of a leg
            return per_joint(raw[key], n, f"{path}: {key}", f"joint ({n})", per_leg=True)

        values: dict[str, Any] = dict(raw)
        values["joint_names"] = tuple(raw["joint_names"])
        values["foot_geoms"] = tuple(raw.get("foot_geoms", ()))
        if len(raw["default_pose"]) != n:
            raise ValueError(f"{path}: default_pose has {len(raw['default_pose'])} values for {n} joints")
        values["default_pose"] = tuple(float(v) for v in raw["default_pose"])
        for key in ("kp", "kd", "torque_limits") + (("armature",) if "armature" in raw else ()):
            values[key] = expand(key)
        if isinstance(raw.get("action_scale"), list):
            values["action_scale"] = expand("action_scale")
        elif "action_scale" in raw:
            values["action_scale"] = float(raw["action_scale"])
        scales = np.atleast_1d(values.get("action_scale", cls.action_scale))
        if not (np.all(np.isfinite(scales)) and np.all(scales >= 0)):
            raise ValueError(f"{path}: action_scale must be finite and >= 0, got {raw.get('action_scale')}")
        values["stand_up_stiffness"] = float(raw.get("stand_up_stiffness", cls.stand_up_stiffness))
        if not 1.0 <= values["stand_up_stiffness"] <= MAX_STAND_UP_STIFFNESS:
            raise ValueError(f"{path}: stand_up_stiffness must be in [1, {MAX_STAND_UP_STIFFNESS:g}] (x kp while the "
                             f"node stands the robot up), got {raw['stand_up_stiffness']}")
        values["collide"] = tuple(raw.get("collide") or ())
        if raw.get("physics", cls.physics) not in PHYSICS_CHOICES:
            raise ValueError(f"{path}: physics must be one of {list(PHYSICS_CHOICES)} (task: the task's physics "
                             f"profile; mjcf: the MJCF's own options), got {raw['physics']!r}")
        values["action_joints"] = tuple(raw.get("action_joints") or ())
        idle = [p for p in values["action_joints"] if not any(re.fullmatch(p, j) for j in values["joint_names"])]
        if idle:
            raise ValueError(f"{path}: action_joints {idle} match none of joint_names")
        values["mirror"] = _parse_mirror(path, raw.get("mirror") or [], values["joint_names"])
        values["source"] = str(path.resolve())
        robot = cls(**values)
        scale = dict(zip(robot.joint_names, robot.action_scales, strict=True))
        acting = {robot.joint_names[i] for i in robot.action_index}
        uneven = [[a, b] for a, b, _ in robot.mirror if scale[a] != scale[b] or (a in acting) != (b in acting)]
        if uneven:
            raise ValueError(f"{path}: mirrored joints {uneven} differ in action_scale or action_joints; "
                             f"a mirrored action must move both sides alike")
        if robot.init_height is None and _available(robot):  # the default pose's feet on the ground
            model = mujoco.MjModel.from_xml_path(str(robot.mjcf_path()))
            robot = replace(robot, init_height=standing_height(model, robot))
        return robot


def _available(robot: RobotConfig) -> bool:
    """Whether the robot's MJCF is on this machine (a packaged model may not be fetched yet)."""
    try:
        return robot.mjcf_path().is_file()
    except RobotModelNotFetched:
        return False


def _parse_mirror(path: Path, entries: Any, joints: tuple[str, ...]) -> tuple[tuple[str, str, int], ...]:
    """Validate the YAML ``mirror`` list: a wrong map would silently corrupt augmented data."""
    if not isinstance(entries, list):
        raise ValueError(f"{path}: mirror must be a list of [joint_a, joint_b, sign] entries")
    out: list[tuple[str, str, int]] = []
    seen: set[str] = set()
    for entry in entries:
        if not (isinstance(entry, list) and len(entry) == 3):
            raise ValueError(f"{path}: mirror entry {entry!r} is not [joint_a, joint_b, sign]")
        a, b, s = entry
        unknown = [j for j in (a, b) if j not in joints]
        if unknown:
            raise ValueError(f"{path}: mirror entry {entry} names unknown joint(s) {unknown}; "
                             f"use names from joint_names")
        if s not in (1, -1) or isinstance(s, bool):
            raise ValueError(f"{path}: mirror entry {entry} has sign {s!r}; the sign must be 1 or -1")
        twice = sorted({a, b} & seen)
        if twice:
            raise ValueError(f"{path}: mirror lists joint(s) {twice} more than once; "
                             f"give each joint exactly one entry")
        seen |= {a, b}
        out.append((str(a), str(b), int(s)))
    missing = [j for j in joints if j not in seen]
    if out and missing:
        raise ValueError(f"{path}: mirror misses joint(s) {missing}; add an entry for each "
                         f"(a centre joint maps to itself: [joint, joint, -1])")
    return tuple(out)


def load_robot(name_or_path: str) -> RobotConfig:
    """A registered robot by name (``ctrl_quad``; :data:`ctrl_rl.robots.ROBOTS`) or a user's robot YAML by path."""
    return RobotConfig.load(name_or_path)


SensorLayout = dict[str, slice]
"""Canonical sensor name -> its slice of ``sensordata``."""


SENSOR_NAMES = ("imu_quat", "imu_gyro", "imu_acc", "base_lin_vel", "base_pos", "base_contact")
"""Canonical per-robot sensors; plus ``<foot>_contact``, ``<foot>_pos``, ``<foot>_vel`` (world frame) per
foot geom and ``<joint>_pos``, ``<joint>_vel``, ``<joint>_torque`` per actuated joint."""


FOOT_ZONE_MARGIN = 0.01
"""A spherical foot's contact sensor counts contacts within its radius + this (m): the foot's own
contacts, not those of other colliding geoms on its body (limb colliders on rough terrain keep
farther away, see ``ctrl_rl.robots.terrain.add_limb_colliders``). Other foot shapes count every
contact of their body."""


def _find_geom_body(spec: mujoco.MjSpec, geom_name: str) -> Any:
    for body in spec.bodies:
        for geom in body.geoms:
            if geom.name == geom_name:
                return body
    raise ValueError(f"foot geom {geom_name!r} is not in the MJCF; check foot_geoms in the robot config")


def build_model(robot: RobotConfig, scene: Callable[[mujoco.MjSpec], None] | None = None,
                visuals: bool = False) -> tuple[mujoco.MjModel, SensorLayout]:
    """Compile the robot's MJCF with the YAML's collisions and armature, a floor where it has none,
    the config's actuators and the canonical sensors in place of the MJCF's (``robots/mjcf_edits.py``);
    logs :func:`derived_values` once.

    ``scene(spec)`` edits the MJCF after the robot's own edits, e.g. puts a generated terrain in
    place of the ground plane (``ctrl_rl.robots.terrain.add_to_spec``). ``visuals``: keep mesh
    geoms that neither collide nor carry mass (rendering); training models leave them out.
    """
    path = robot.mjcf_path()
    if not path.is_file():
        raise FileNotFoundError(f"robot {robot.name}: MJCF {path} does not exist")
    spec = mujoco.MjSpec.from_file(str(path))
    if spec.body(robot.base_body) is None:
        raise ValueError(f"robot {robot.name}: base_body {robot.base_body!r} is not in {path.name}")
    own = edits.drop_own_sensors(spec)
    if own:
        edits.log_once(log, robot.source or robot.name, "sensors", logging.INFO, "robot %s: its MJCF's %d sensors (%s) "
                 "are left out of the training model; tasks read only the sensors training adds (SENSOR_NAMES)",
                 robot.name, len(own), ", ".join(own))
    if robot.collide:
        edits.filter_collisions(spec, robot.base_body, robot.collide, robot.foot_geoms, robot.name)
    if not visuals:
        edits.strip_visual_meshes(spec)
    if scene is not None:
        scene(spec)
    edits.add_floor_if_missing(spec, robot.name)
    joints = {j.name for j in spec.joints}
    missing = [j for j in robot.joint_names if j not in joints]
    if missing:
        raise ValueError(f"robot {robot.name}: joints {missing} are not in {path.name}; "
                         f"its joints are {sorted(n for n in joints if n)}")
    base = spec.body(robot.base_body)
    if robot.armature:
        edits.set_armature(spec, robot.joint_names, robot.armature)
    edits.replace_actuators(spec, robot.joint_names, robot.kp, robot.kd, robot.torque_limits, robot.default_pose)

    imu = robot.imu_site or "ctrl_rl_imu"
    if robot.imu_site is None:
        base.add_site(name=imu, pos=[0, 0, 0])
    elif spec.site(imu) is None:
        raise ValueError(f"robot {robot.name}: imu_site {imu!r} is not in {path.name}")
    # Touch sensors count contacts of the site's own body inside the site volume: a sphere
    # larger than the body catches every contact of that body and nothing else.
    base.add_site(name="ctrl_rl_base_zone", type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[2.0, 0, 0], group=5)

    S, O = mujoco.mjtSensor, mujoco.mjtObj  # noqa: E741 - short names keep the table readable
    add = spec.add_sensor
    add(name="imu_quat", type=S.mjSENS_FRAMEQUAT, objtype=O.mjOBJ_SITE, objname=imu)
    add(name="imu_gyro", type=S.mjSENS_GYRO, objtype=O.mjOBJ_SITE, objname=imu)
    add(name="imu_acc", type=S.mjSENS_ACCELEROMETER, objtype=O.mjOBJ_SITE, objname=imu)
    add(name="base_lin_vel", type=S.mjSENS_VELOCIMETER, objtype=O.mjOBJ_SITE, objname=imu)
    # the base body's frame, not the IMU's: init_height and the height terms are the base origin's
    add(name="base_pos", type=S.mjSENS_FRAMEPOS, objtype=O.mjOBJ_XBODY, objname=robot.base_body)
    add(name="base_contact", type=S.mjSENS_TOUCH, objtype=O.mjOBJ_SITE, objname="ctrl_rl_base_zone")
    for foot in robot.foot_geoms:
        body = _find_geom_body(spec, foot)
        zone = f"ctrl_rl_{foot}_zone"
        geom = spec.geom(foot)
        if geom.type == mujoco.mjtGeom.mjGEOM_SPHERE:  # the foot alone, not other geoms of its body (shins)
            body.add_site(name=zone, type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[geom.size[0] + FOOT_ZONE_MARGIN, 0, 0],
                          pos=list(geom.pos), group=5)
        else:
            body.add_site(name=zone, type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[2.0, 0, 0], group=5)
        add(name=f"{foot}_contact", type=S.mjSENS_TOUCH, objtype=O.mjOBJ_SITE, objname=zone)
        add(name=f"{foot}_pos", type=S.mjSENS_FRAMEPOS, objtype=O.mjOBJ_GEOM, objname=foot)
        add(name=f"{foot}_vel", type=S.mjSENS_FRAMELINVEL, objtype=O.mjOBJ_GEOM, objname=foot)  # world frame
    for jname in robot.joint_names:  # encoders: read with the IMU, one consistent snapshot
        add(name=f"{jname}_pos", type=S.mjSENS_JOINTPOS, objtype=O.mjOBJ_JOINT, objname=jname)
        add(name=f"{jname}_vel", type=S.mjSENS_JOINTVEL, objtype=O.mjOBJ_JOINT, objname=jname)
    for jname in robot.joint_names:
        add(name=f"{jname}_torque", type=S.mjSENS_ACTUATORFRC, objtype=O.mjOBJ_ACTUATOR, objname=f"{jname}_pd")

    model = spec.compile()
    layout = {model.sensor(i).name: slice(int(model.sensor_adr[i]), int(model.sensor_adr[i] + model.sensor_dim[i]))
              for i in range(model.nsensor)}
    derived = derived_values(model, robot)
    edits.log_once(log, robot.source or robot.name, "derived", logging.INFO,
             "robot %s: standing height (init_height) %.3f m, mass %.2f kg, leg length %s", robot.name,
             derived["init_height"], derived["mass"],
             f"{derived['leg_length']:.3f} m" if "leg_length" in derived else "- (no foot_geoms)")
    return model, layout


def joint_indices(model: mujoco.MjModel, robot: RobotConfig) -> tuple[np.ndarray, np.ndarray]:
    """``qpos`` and ``qvel`` addresses of the robot's joints, in the config's order."""
    ids = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, j) for j in robot.joint_names]
    return np.array([model.jnt_qposadr[i] for i in ids]), np.array([model.jnt_dofadr[i] for i in ids])


def standing_height(model: mujoco.MjModel, robot: RobotConfig) -> float:
    """Base height (m) at which the default pose touches flat ground at z=0: the lowest point of the
    feet (every colliding geom of the robot when it declares none), base upright at the origin."""
    data = _default_pose(model, robot)
    if robot.foot_geoms:
        geoms = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, g) for g in robot.foot_geoms]
    else:
        geoms = [g for g in range(model.ngeom)
                 if model.geom_bodyid[g] != 0 and model.geom_contype[g] | model.geom_conaffinity[g]]
    lowest = min(_lowest_point(model, data, g) for g in geoms)
    return float(-lowest)


def derived_values(model: mujoco.MjModel, robot: RobotConfig) -> dict[str, float]:
    """The robot's size as the task sees it, logged when the model is built and carried by the deploy
    bundle (``robot_derived``): ``init_height`` (m, the standing height resets use: the YAML's, else
    :func:`standing_height`), ``mass`` (kg, the base and every body below it) and, with foot geoms,
    ``leg_length`` (m, the longest leg stretched straight: from the first joint below the base through
    each joint's anchor to the foot's sole; the Go1's 0.53 = 0.08 hip offset + 0.213 thigh + 0.213 calf
    + 0.023 foot)."""
    base = model.body(robot.base_body).id
    height = robot.init_height if robot.init_height is not None else standing_height(model, robot)
    out = {"init_height": float(height), "mass": float(model.body_subtreemass[base])}
    if robot.foot_geoms:
        data = _default_pose(model, robot)
        out["leg_length"] = max(_leg_length(model, data, base, model.geom(g).id) for g in robot.foot_geoms)
    return out


def _leg_length(model: mujoco.MjModel, data: mujoco.MjData, base: int, foot: int) -> float:
    """Sum of the straight segments from the first joint below ``base`` to the sole of geom ``foot``:
    joint anchors are fixed to both bodies they join, so each segment's length holds in every pose."""
    chain, body = [], int(model.geom_bodyid[foot])
    while body not in (base, 0):
        chain.extend(range(model.body_jntadr[body] + model.body_jntnum[body] - 1, model.body_jntadr[body] - 1, -1))
        body = int(model.body_parentid[body])
    points = [data.xanchor[j] for j in reversed(chain)] + [data.geom_xpos[foot]]
    sole = data.geom_xpos[foot][2] - _lowest_point(model, data, foot)  # the foot's centre to its lowest point
    return float(sum(np.linalg.norm(b - a) for a, b in zip(points, points[1:], strict=False)) + sole)


def _default_pose(model: mujoco.MjModel, robot: RobotConfig) -> mujoco.MjData:
    """Kinematics of the default pose, base upright at the origin."""
    data = mujoco.MjData(model)
    base = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, robot.base_body)
    qpos_adr, _ = joint_indices(model, robot)
    free = model.body_jntadr[base]
    data.qpos[model.jnt_qposadr[free]:model.jnt_qposadr[free] + 7] = [0, 0, 0, 1, 0, 0, 0]
    data.qpos[qpos_adr] = robot.default_pose
    mujoco.mj_kinematics(model, data)
    return data


def _lowest_point(model: mujoco.MjModel, data: mujoco.MjData, g: int) -> float:
    """World z of the lowest point of geom ``g`` (exact for spheres, capsules and boxes, its
    bounding sphere otherwise)."""
    z, kind, size = data.geom_xpos[g][2], model.geom_type[g], model.geom_size[g]
    up = np.abs(data.geom_xmat[g].reshape(3, 3)[2])  # |z component| of the geom's local axes
    if kind == mujoco.mjtGeom.mjGEOM_SPHERE:
        return float(z - size[0])
    if kind == mujoco.mjtGeom.mjGEOM_CAPSULE:
        return float(z - up[2] * size[1] - size[0])
    if kind == mujoco.mjtGeom.mjGEOM_BOX:
        return float(z - up @ size)
    return float(z - model.geom_rbound[g])
