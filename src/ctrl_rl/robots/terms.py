"""Observation terms: the one definition shared by training and the robot.

Each term is a small function of named *signals* — what a real robot provides (IMU
quaternion and gyro, joint encoders, the velocity command, the last action) or, for
privileged critic terms, what only a simulator knows. The functions use only operations
common to numpy and torch (``x[..., i]``, arithmetic, ``stack``, ``concatenate``), so the
training env calls them on torch tensors and the deploy runtime on numpy arrays, with no
torch import there. That is how a bundle's observation layout is recomputed on the robot
instead of re-implemented by hand (the sim2sim bugs of today's deploy stacks).

This module imports numpy only.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

Array = Any
"""A numpy array or a torch tensor (``[..., dim]``)."""


def namespace(x: Array) -> Any:
    """The array module of ``x``: torch for tensors (already imported by the caller), else numpy."""
    if type(x).__module__.startswith("torch"):
        import torch

        return torch
    return np


def quat_rotate_inverse(q: Array, v: Array) -> Array:
    """Rotate ``v`` by the inverse of unit quaternions ``q`` (w, x, y, z): world -> body frame."""
    xp = namespace(q)
    w, u = q[..., 0:1], q[..., 1:4]
    uv = _cross(u, v, xp)
    return v * (2.0 * w * w - 1.0) - 2.0 * w * uv + 2.0 * u * (u * v).sum(-1)[..., None]


def _cross(a: Array, b: Array, xp: Any) -> Array:
    ax, ay, az = a[..., 0], a[..., 1], a[..., 2]
    bx, by, bz = b[..., 0], b[..., 1], b[..., 2]
    return xp.stack([ay * bz - az * by, az * bx - ax * bz, ax * by - ay * bx], -1)


def gait_clock(s: Mapping[str, Array]) -> Array:
    """``(sin 2 pi phi, cos 2 pi phi)`` of the gait phase ``phi`` in [0, 1): a periodic clock the policy
    steps to (unitree_rl_gym's humanoid observation); continuous where the phase wraps."""
    phase = s["gait_phase"][..., 0] * (2.0 * np.pi)
    xp = namespace(phase)
    return xp.stack([xp.sin(phase), xp.cos(phase)], -1)


def projected_gravity(s: Mapping[str, Array]) -> Array:
    """Unit gravity direction in the base frame, from the IMU quaternion ((0, 0, -1) upright)."""
    q = s["imu_quat"]
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    xp = namespace(q)
    return xp.stack([2.0 * (w * y - x * z), -2.0 * (w * x + y * z), 1.0 - 2.0 * (w * w + z * z)], -1)


def yaw_angle(q: Array) -> Array:
    """Heading (rad, in (-pi, pi]) of unit quaternions ``q`` (w, x, y, z): the yaw of the body's x axis."""
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    return namespace(q).arctan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


def heading_hold(user_yaw_rate: Array, target: Array, yaw: Array, stiffness: float, low: float,
                 high: float) -> Array:
    """The yaw-rate command a policy is given while it holds a heading: the operator's rate plus
    ``stiffness`` times the heading error ``wrap(target - yaw)``, clipped to the trained range
    (legged_gym's and mjlab's heading command, with the operator's rate fed forward). The caller
    advances ``target`` by the operator's rate every control step, so a robot told to go straight
    corrects the yaw it picked up instead of walking off in an arc. Training and the deploy node
    (``ctrl_rl.deploy.robot_policy``) run this one function."""
    xp = namespace(yaw)
    error = target - yaw
    error = xp.arctan2(xp.sin(error), xp.cos(error))  # wrapped to (-pi, pi]
    return (user_yaw_rate + stiffness * error).clip(low, high)


def quat_mul(a: Array, b: Array) -> Array:
    """Hamilton product ``a b`` of quaternions (w, x, y, z): rotation ``b``, then ``a``."""
    aw, ax, ay, az = a[..., 0], a[..., 1], a[..., 2], a[..., 3]
    bw, bx, by, bz = b[..., 0], b[..., 1], b[..., 2], b[..., 3]
    return namespace(a).stack([aw * bw - ax * bx - ay * by - az * bz, aw * bx + ax * bw + ay * bz - az * by,
                               aw * by - ax * bz + ay * bw + az * bx, aw * bz + ax * by - ay * bx + az * bw], -1)


def quat_conjugate(q: Array) -> Array:
    """The inverse rotation of unit quaternions ``q`` (w, x, y, z)."""
    return namespace(q).stack([q[..., 0], -q[..., 1], -q[..., 2], -q[..., 3]], -1)


def rotation_6d(q: Array) -> Array:
    """The first two columns of the rotation matrix of unit quaternions ``q`` (w, x, y, z), ``[..., 6]``: an
    orientation without a quaternion's sign flip (``q`` and ``-q`` give the same), continuous everywhere
    (Zhou et al., "On the Continuity of Rotation Representations in Neural Networks", CVPR 2019)."""
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    return namespace(q).stack([1 - 2 * (y * y + z * z), 2 * (x * y + w * z), 2 * (x * z - w * y),
                               2 * (x * y - w * z), 1 - 2 * (x * x + z * z), 2 * (y * z + w * x)], -1)


def quat_error(q: Array, target: Array) -> Array:
    """``[..., 3]``: the rotation from ``q`` to ``target`` (the frame's axes), as twice the vector part of
    ``target q^-1`` on the short way round: the rotation vector for small angles, 2 sin(angle / 2) x axis."""
    e = quat_mul(target, quat_conjugate(q))
    return 2.0 * namespace(q).where(e[..., :1] < 0, -e[..., 1:], e[..., 1:])


def quat_angle(q: Array, target: Array) -> Array:
    """The angle (rad, in [0, pi]) of the rotation from ``q`` to ``target``: 2 atan2(|v|, |w|) of
    ``target q^-1`` (exact for small angles, where 2 acos(|w|) loses precision)."""
    e = quat_mul(target, quat_conjugate(q))
    xp = namespace(q)
    return 2.0 * xp.arctan2(((e[..., 1:] ** 2).sum(-1)) ** 0.5, xp.abs(e[..., 0]))


def pose_features(pose: Array) -> Array:
    """A pose ``[x, y, z, qw, qx, qy, qz]`` as a policy sees it: the position and :func:`rotation_6d` of the
    orientation, ``[..., 9]``."""
    return namespace(pose).concatenate([pose[..., :3], rotation_6d(pose[..., 3:7])], -1)


def pose_command(s: Mapping[str, Array]) -> Array:
    """An end-effector pose target ``[x, y, z, qw, qx, qy, qz]`` (the arm's base frame) as the policy sees
    it: :func:`pose_features`, ``[..., 9]``."""
    return pose_features(s["pose_command"])


def object_pose(s: Mapping[str, Array]) -> Array:
    """The manipulated object's pose ``[x, y, z, qw, qx, qy, qz]`` (the arm's base frame; a simulator's, or a
    perception source's on a robot) as :func:`pose_features`, ``[..., 9]``."""
    return pose_features(s["object_pose"])


def object_to_ee(s: Mapping[str, Array]) -> Array:
    """The object's position relative to the end effector (base frame axes), ``[..., 3]``: what a wrist
    camera sees."""
    return s["object_pose"][..., :3] - s["ee_pos"]


def object_to_tool(s: Mapping[str, Array]) -> Array:
    """The object's position relative to the tip of the tool the arm holds (``tool_pos``, base frame axes),
    ``[..., 3]``: for a peg in a hole, the hole's bottom centre less the peg's tip (Isaac Lab Factory observes the
    held asset's tip relative to the fixed asset). Millimetre work needs it: the end effector's position leaves the
    tip to the policy's own kinematics through a tilt (0.02 rad x 6 cm = 1.2 mm)."""
    return s["object_pose"][..., :3] - s["tool_pos"]


TOOL_DAMPING = 0.01
"""The damping (m) of :func:`tool_correction`'s least squares: below a singular value of about this much, a
direction of the tip's motion is given up rather than bought with large joint steps."""


def point_jacobian(anchors: Array, axes: Array, hinge: Array, point: Array) -> Array:
    """``[..., 3, n]``: how a point carried by a serial arm moves per unit of each of ``n`` joints, from each
    joint's ``anchors [..., n, 3]`` and unit ``axes [..., n, 3]`` (base frame) and ``hinge [n]`` (1: a hinge, whose
    column is ``axis x (point - anchor)``; 0: a slide, whose column is its axis)."""
    xp = namespace(point)
    turn = _cross(axes, point[..., None, :] - anchors, xp)
    return (hinge[..., None] * turn + (1.0 - hinge[..., None]) * axes).swapaxes(-1, -2)


def damped_least_squares(jac: Array, err: Array, damping: float) -> Array:
    """``J^T (J J^T + damping^2 I)^-1 err``, ``[..., n]`` for ``jac [..., 3, n]`` and ``err [..., 3]``: the
    smallest joint step that moves the point by ``err`` (Wampler's damped least squares, as differential inverse
    kinematics uses it)."""
    xp = namespace(jac)
    jt = jac.swapaxes(-1, -2)
    eye = xp.eye(3, dtype=jac.dtype) if xp is np else xp.eye(3, dtype=jac.dtype, device=jac.device)
    return (jt @ xp.linalg.solve(jac @ jt + damping ** 2 * eye, err[..., None]))[..., 0]


def tool_correction(s: Mapping[str, Array]) -> Array:
    """The step of the moved joints (rad, ``[..., n]``) that takes the held tool's tip onto the object's point
    (:func:`object_to_tool`), by damped least squares through the tip's Jacobian (``tool_jacobian``, ``[..., 3,
    n]``). The same millimetre is a different joint vector at every pose of the arm; this term hands a policy
    that vector, which a residual in joint space otherwise has to learn as the arm's Jacobian (ResiP acts in the
    end effector's space for this reason)."""
    return damped_least_squares(s["tool_jacobian"], object_to_tool(s), TOOL_DAMPING)


def ee_pose_error(s: Mapping[str, Array]) -> Array:
    """The end effector's pose error to its target (base frame): position (m) and :func:`quat_error`,
    ``[..., 6]``."""
    target = s["pose_command"]
    return namespace(target).concatenate([target[..., :3] - s["ee_pos"], quat_error(s["ee_quat"], target[..., 3:7])],
                                         -1)


TERM_FUNCTIONS: dict[str, Callable[[Mapping[str, Array]], Array]] = {
    # measurable on the robot
    "base_ang_vel": lambda s: s["imu_gyro"],
    "projected_gravity": projected_gravity,
    "velocity_commands": lambda s: s["command"],
    "joint_pos_rel": lambda s: s["joint_pos"] - s["default_pose"],
    "joint_vel": lambda s: s["joint_vel"],
    "last_action": lambda s: s["last_action"],
    "gait_clock": gait_clock,
    "pose_command": pose_command,
    # privileged: simulation only (critic inputs)
    "base_lin_vel": lambda s: s["base_lin_vel"],
    "base_height": lambda s: s["base_height"],
    "foot_contact": lambda s: s["foot_contact"],
    "ee_pose_error": ee_pose_error,
    # an object and its goal (simulation; a robot would need an object pose source): manipulation tasks
    "object_pose": object_pose,
    "object_to_ee": object_to_ee,
    "object_to_tool": object_to_tool,
    "tool_correction": tool_correction,
    "lift_command": lambda s: s["lift_command"],
    # the terrain around the base (simulation: ray casts; a robot: a configured height-map source)
    "height_scan": lambda s: s["height_scan"],
}
"""Term name -> function of the signals dict. ``default_pose`` is a constant signal."""

TERM_MIRRORS: dict[str, tuple[float, ...] | str] = {
    "base_ang_vel": (-1.0, 1.0, -1.0),       # a pseudovector: roll and yaw rates flip
    "projected_gravity": (1.0, -1.0, 1.0),
    "velocity_commands": (1.0, -1.0, -1.0),  # vx, vy, yaw rate
    "joint_pos_rel": "joints", "joint_vel": "joints", "last_action": "actions",
    "gait_clock": (-1.0, -1.0),              # half a period on: the other leg's phase
    "base_lin_vel": (1.0, -1.0, 1.0),
    "base_height": (1.0,),
    "foot_contact": "feet",
    "height_scan": "scan",
}
"""How each term mirrors left/right (reflection in the base's x-z plane): per-element signs, or the
name of a signed permutation the robot supplies (``joints``: its YAML ``mirror`` map; ``actions``: that map
on the joints the policy moves; ``feet``: its
foot geoms paired by position; ``scan``: the scan points paired by position). ``ctrl_rl.mirror``."""

ROBOT_SIGNALS = ("imu_quat", "imu_gyro", "joint_pos", "joint_vel", "command", "last_action", "default_pose",
                 "gait_phase", "pose_command", "ee_pos", "tool_pos", "tool_jacobian")
"""Signals a deploy node can provide; a policy's terms must use only these. ``gait_phase`` is the
controller's own clock: control steps since the episode (policy mode) began, over the bundle's
``gait_period``, modulo 1. ``pose_command``: an arm's end-effector target ``[x, y, z, qw, qx, qy, qz]``
in its base frame. ``ee_pos``: an arm's end-effector position in its base frame, by forward kinematics of
``joint_pos`` (the bundle's ``kinematic_chain``). ``tool_pos``: the tip of a tool the arm holds rigidly (insert's
peg), the end effector's pose by the same kinematics moved by the bundle's ``tool_offset`` (end-effector frame).
``tool_jacobian``: that tip's Jacobian in the moved joints, ``[3, n]`` (:func:`point_jacobian` of the chain's joint
axes at ``joint_pos``)."""

ROBOT_TERMS = ("base_ang_vel", "projected_gravity", "velocity_commands", "joint_pos_rel", "joint_vel", "last_action",
               "gait_clock", "pose_command")
"""Terms computed from :data:`ROBOT_SIGNALS` alone: what a bundle's actor may observe on any robot."""

EXTERNAL_TERMS = {"height_scan": "a height-map source (terrain perception)",
                  "object_pose": "an object pose source (motion capture or perception)",
                  "object_to_ee": "an object pose source (motion capture or perception)",
                  "object_to_tool": "an object pose source (motion capture or perception)",
                  "tool_correction": "an object pose source (motion capture or perception)",
                  "lift_command": "a lift target source (the operator's target height)"}
"""Terms a robot can observe only from an extra source, by term: what provides it. A deploy
node refuses a bundle whose actor needs one unless that source is configured."""


@dataclass(frozen=True)
class ObsTerm:
    """One named slice of an observation group: ``clip(scale * f(signals))``."""

    name: str
    """Key of :data:`TERM_FUNCTIONS`."""
    dim: int
    scale: float | tuple[float, ...] = 1.0
    """Multiplier (per term or per element), legged_gym's ``obs_scales``."""
    clip: float | None = None
    """Symmetric clip applied after scaling (``None``: none)."""
    noise: float = 0.0
    """Half-width of uniform noise added in training (physical units, before scaling);
    never applied at deploy time."""
    history: int = 1
    """Frames of this term the policy sees, oldest first (1: the current frame only); the stacking
    is :class:`TermHistory`'s, in training and on the robot."""

    def to_dict(self) -> dict[str, Any]:
        """The term as a deploy bundle stores it (no training noise)."""
        scale = list(self.scale) if isinstance(self.scale, tuple) else self.scale
        return {"name": self.name, "dim": self.dim, "scale": scale, "clip": self.clip, "history": self.history}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ObsTerm:
        """Inverse of :meth:`to_dict` (a bundle's term list back into terms)."""
        history = int(d.get("history", 1))
        if history < 1:
            raise ValueError(f"observation term {d['name']!r} has history {history}; it must be >= 1")
        scale = tuple(float(x) for x in d["scale"]) if isinstance(d["scale"], list) else float(d["scale"])
        return cls(d["name"], int(d["dim"]), scale, d["clip"], history=history)


@functools.lru_cache(maxsize=256)
def _scale_tensor(scale: tuple[float, ...], dtype: Any, device: Any) -> Any:
    """A per-element scale on the device, made once (no host-to-device copy per step: a CUDA graph
    replaying the step could not hold one)."""
    import torch

    return torch.tensor(scale, dtype=dtype, device=device)


def compute_term(term: ObsTerm, signals: Mapping[str, Array], noise: Array | None = None) -> Array:
    """One term's value; ``noise`` (same shape, in [-1, 1]) is scaled by ``term.noise``."""
    value = TERM_FUNCTIONS[term.name](signals)
    if noise is not None and term.noise > 0:
        value = value + noise * term.noise
    xp = namespace(value)
    scale = term.scale
    if isinstance(scale, tuple):
        scale = np.asarray(scale, dtype=np.float32) if xp is np else _scale_tensor(scale, value.dtype, value.device)
    value = value * scale
    if term.clip is not None:
        value = xp.clip(value, -term.clip, term.clip)
    return value


def compute_obs(terms: Sequence[ObsTerm], signals: Mapping[str, Array],
                noise: Callable[[ObsTerm], Array] | None = None) -> Array:
    """Concatenate ``terms`` into one ``[..., sum(dim)]`` observation.

    ``noise(term)`` returns uniform [-1, 1] samples of the term's shape (training only).
    """
    parts = [compute_term(t, signals, noise(t) if noise is not None and t.noise > 0 else None)
             for t in terms]
    return namespace(parts[0]).concatenate(parts, -1)


class TermHistory:
    """The last ``lengths[i]`` frames of each term of one observation group, per row.

    The stacked observation lays each term's frames out oldest first, term after term (Isaac
    Lab's flattened term history): ``[a_{t-2}, a_{t-1}, a_t, b_t]`` for term ``a`` with history 3
    and ``b`` with 1. A row that starts an episode is filled with its first frame (no zeros the
    policy never saw in training). Works on numpy arrays (the robot) and torch tensors (the env)
    with the same operations, so the layout is written once.
    """

    def __init__(self, dims: Sequence[int], lengths: Sequence[int]) -> None:
        if len(dims) != len(lengths) or any(h < 1 for h in lengths):
            raise ValueError(f"history lengths {list(lengths)} must be >= 1, one per term of {list(dims)}")
        self.dims, self.lengths = [int(d) for d in dims], [int(h) for h in lengths]
        self.stacks: list[Array] = []
        """Per term ``[rows, history, dim]``, oldest frame first (empty before :meth:`restart`)."""

    @property
    def out_dim(self) -> int:
        """Width of the stacked observation."""
        return sum(d * h for d, h in zip(self.dims, self.lengths, strict=True))

    def _split(self, frame: Array) -> list[Array]:
        if frame.shape[-1] != sum(self.dims):
            raise ValueError(f"frame has {frame.shape[-1]} values; the terms add up to {sum(self.dims)}")
        bounds = np.cumsum([0, *self.dims])
        return [frame[:, a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]

    def _flat(self, stacks: Sequence[Array]) -> Array:
        return namespace(stacks[0]).concatenate([s.reshape(s.shape[0], -1) for s in stacks], -1)

    def restart(self, frame: Array) -> Array:
        """Every row starts over from ``frame`` ``[rows, dim]``; returns the stacked observation."""
        self.stacks = self._filled(frame)
        return self._flat(self.stacks)

    def _filled(self, frame: Array) -> list[Array]:
        xp = namespace(frame)
        return [xp.concatenate([f[:, None]] * h, 1) for f, h in zip(self._split(frame), self.lengths, strict=True)]

    def peek(self, frame: Array) -> Array:
        """The stacked observation with ``frame`` as the newest, without keeping it (``final_obs``)."""
        return self._flat(self._appended(frame))

    def _appended(self, frame: Array) -> list[Array]:
        xp = namespace(frame)
        return [xp.concatenate([s[:, 1:], f[:, None]], 1) for s, f in zip(self.stacks, self._split(frame), strict=True)]

    def push(self, frame: Array, restart: Array | None = None) -> Array:
        """Append ``frame``; rows where ``restart`` (bool ``[rows]``) is true start over from it."""
        stacks = self._appended(frame)
        if restart is not None:
            where = namespace(frame).where
            stacks = [where(restart[:, None, None], n, s) for n, s in zip(self._filled(frame), stacks, strict=True)]
        self.stacks = stacks
        return self._flat(stacks)
