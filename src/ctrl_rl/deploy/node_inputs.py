"""The deploy node's inputs: every robot and operator message checked completely, then stored.

The subscriptions run on the transport's threads and store the latest accepted message of each
input behind one lock; the control loop (``node.py``) reads them once per tick (:meth:`NodeInputs.take`).
A message that fails a check (malformed, non-finite, out of range, badly stamped) changes no stored
state: it is counted, named in ``last_rejection`` and becomes a ``malformed input`` fault at the next
tick (the node's guarantee 2). The operator's hold (an e-stop, a lifecycle deactivate, the loop's
end: damping until a start) is kept here too, under the same lock.

Numpy only.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable

import numpy as np

from . import messages as m
from .arm_node import ArmSide
from .height_map import HeightMapSpec
from .robot_policy import joint_index_map
from .safety import SafetyConfig, pose_fault

log = logging.getLogger("ctrl_rl.deploy.node")  # the node's logger: its rejections read as the node's lines

FIXED_BASE = (np.array([1.0, 0.0, 0.0, 0.0]), np.zeros(3))
"""An arm's IMU stand-in (it has none): upright and still, as its fixed base is."""

Joints = tuple[np.ndarray, np.ndarray, float]
"""Positions, velocities (policy joint order), receive time."""
Stamped = tuple[np.ndarray, float]
"""A value and its receive time (an IMU reading adds its gyro: quat wxyz, gyro, t)."""
Sources = dict[str, Stamped]
"""The latest reading of each external source by signal (``height_scan``, ``object_pose``, ``lift_command``)."""


SOURCE_TIMEOUTS = {"height_scan": ("height map", "height_map_timeout"),
                   "object_pose": ("object pose", "object_pose_timeout"),
                   "lift_command": ("lift command", None)}
"""Each external source in words and the ``safety`` parameter that bounds its age (None: a set point, which
holds until the next one)."""


class MalformedMessage(ValueError):
    """A message that must never reach the actuators (wrong lengths, NaN, missing joints)."""


class NodeInputs:
    """The latest accepted message of each input, and the operator's hold, behind one lock.

    ``counters`` is the node's status dict of counts: each accepted message adds one to its
    input's count, each refused one to ``rejected``. ``safety_cfg`` is replaced when the node's
    safety parameters change (``DeployNode.apply_safety``).
    """

    def __init__(self, joint_names: list[str], safety_cfg: SafetyConfig, joint_limits: np.ndarray | None,
                 command_ranges: np.ndarray | None, arm: ArmSide | None, height_map: HeightMapSpec | None,
                 counters: dict[str, int], topics: dict[str, str] | None = None) -> None:
        """``topics``: the topic of each external source the bundle needs, by signal (:meth:`source_fault`
        names it)."""
        self.joint_names = joint_names
        self.safety_cfg = safety_cfg
        self.joint_limits = joint_limits
        self.command_ranges = command_ranges
        """The policy's training ranges of the velocity command (None: not clipped)."""
        self.arm = arm
        self.height_map = height_map
        self.counters = counters
        self.last_rejection = ""
        self.velocity_source = "message"
        """``message``, or ``estimated`` once a JointState came with an empty velocity array."""
        self.lock = threading.Lock()
        self.joints: Joints | None = None
        self.imu: tuple[np.ndarray, np.ndarray, float] | None = None  # quat wxyz, gyro, t
        self.cmd: Stamped | None = None  # a velocity command, or an arm's pose target
        self.sources: Sources = {}
        """External sources by signal: ``height_scan`` (clearance - offset, t), ``object_pose`` (pose, t)."""
        self.topics = dict(topics or {})
        """The sources the bundle needs (signal -> topic): none yet, or a stale one, is a fault."""
        self.malformed: str | None = None
        """The last rejection since the loop's last :meth:`take` (its next tick's fault)."""
        self.hold: str | None = None
        """E-stop / lifecycle deactivate / the loop's end: damping until a start."""
        self._map_cache: tuple[tuple[str, ...], np.ndarray] | None = None
        self._prev_pos: Stamped | None = None  # for velocity estimates

    # -- what the loop reads ----------------------------------------------------------------------
    def take(self) -> tuple[Joints | None, tuple | None, Stamped | None, str | None, Sources, str | None]:
        """One tick's view: (joints, base state, command, hold, external sources, the rejection since the
        last take); the base state is the IMU's reading, or an arm's :data:`FIXED_BASE`."""
        with self.lock:
            joints, imu, cmd, hold, sources = self.joints, self.imu, self.cmd, self.hold, dict(self.sources)
            malformed, self.malformed = self.malformed, None
        return joints, self.base_state(joints, imu), cmd, hold, sources, malformed

    def latest(self) -> tuple[Joints | None, tuple | None, Stamped | None, Sources]:
        """(joints, base state, command, external sources) as :meth:`take` sees them, a pending rejection kept."""
        with self.lock:
            joints, imu, cmd, sources = self.joints, self.imu, self.cmd, dict(self.sources)
        return joints, self.base_state(joints, imu), cmd, sources

    def base_state(self, joints: Joints | None, imu: tuple | None) -> tuple | None:
        """The IMU's reading; for an arm (none) :data:`FIXED_BASE`, as fresh as its joint state."""
        if self.arm is None or joints is None:
            return imu
        return (*FIXED_BASE, joints[2])

    def signals(self, joints: Joints, imu: tuple, cmd: Stamped | None, sources: Sources) -> dict[str, np.ndarray]:
        """The robot signals of the observation terms (policy joint order): the operator's command (a velocity;
        an arm's pose target, the default pose's until one arrives, its end effector's position and a held tool's
        tip), the external sources' readings too."""
        signals = {"imu_quat": imu[0], "imu_gyro": imu[1], "joint_pos": joints[0], "joint_vel": joints[1]}
        if self.arm is None:
            signals["command"] = cmd[0] if cmd is not None else np.zeros(3)
        else:
            signals["pose_command"] = cmd[0] if cmd is not None else self.arm.default_target
            signals.update(self.arm.kinematic_signals(joints[0]))
        signals.update({name: value for name, (value, _) in sources.items()})
        return signals

    def source_fault(self, sources: Sources, now: float) -> str | None:
        """Why an external source the bundle needs cannot feed the policy (none yet on its topic, or stale);
        None: every one can."""
        for name, topic in self.topics.items():
            what, limit = SOURCE_TIMEOUTS[name]
            if name not in sources:
                return f"no {what} received yet on {topic!r}"
            if limit is None:
                continue
            age, timeout = now - sources[name][1], getattr(self.safety_cfg, limit)
            if age > timeout:
                return f"{what} is stale: {age * 1e3:.0f} ms old (> {limit} {timeout * 1e3:.0f} ms)"
        return None

    # -- the operator's hold ----------------------------------------------------------------------
    def set_hold(self, reason: str | None) -> None:
        """Damping (latched) for ``reason`` until a start; None lifts the hold."""
        with self.lock:
            self.hold = reason

    def clear_for_start(self) -> None:
        """An operator's start: lift the hold and drop a rejection no tick has seen yet."""
        with self.lock:
            self.hold = None
            self.malformed = None

    # -- subscriptions (transport threads): validate everything, then store, return ---------------
    def reject(self, what: str) -> None:
        if what != self.last_rejection:  # once per kind of problem, not 500 times a second
            log.error("rejected: %s", what)
        with self.lock:
            self.counters["rejected"] += 1
            self.last_rejection = what
            self.malformed = what

    def receive_time(self, stamp: float, what: str) -> float:
        """Arrival time, or with ``safety.use_header_stamps`` the stamp on the monotonic clock;
        a stamp older than the state timeout or from the future is a :class:`MalformedMessage`."""
        now = time.monotonic()
        if not self.safety_cfg.use_header_stamps:
            return now
        skew = time.time() - stamp
        limit = self.safety_cfg.state_timeout
        if not math.isfinite(skew) or abs(skew) > limit:
            side = "old" if skew > 0 else "in the future"
            raise MalformedMessage(f"{what} stamped {abs(skew) * 1e3:.1f} ms {side} (> state_timeout "
                                   f"{limit * 1e3:.1f} ms; clocks unsynchronized? set safety.use_header_stamps=false)")
        return now - skew

    def on_joint_state(self, msg: m.JointState) -> None:
        try:
            names = tuple(msg.name)
            cache = self._map_cache
            if cache is None or cache[0] != names:
                try:
                    cache = (names, joint_index_map(self.joint_names, names))
                except ValueError as e:
                    raise MalformedMessage(f"JointState refused: {e}") from None
            idx = cache[1]
            n = len(names)
            estimate = len(msg.velocity) == 0 and n > 0
            if len(msg.position) != n or (len(msg.velocity) != n and not estimate):
                raise MalformedMessage(f"JointState has {n} names but {len(msg.position)} positions and "
                                       f"{len(msg.velocity)} velocities")
            t = self.receive_time(msg.stamp, "JointState")
            pos = np.asarray(msg.position, dtype=np.float64)[idx]
            vel = self.estimate_velocity(pos, t) if estimate else np.asarray(msg.velocity, dtype=np.float64)[idx]
            bad = pose_fault(self.safety_cfg, pos, vel, self.joint_limits, self.joint_names)
            if bad is not None:
                raise MalformedMessage(f"JointState refused: {bad}")
        except MalformedMessage as e:
            self.reject(str(e))
            return
        with self.lock:
            self._map_cache = cache
            self._prev_pos = (pos, t)
            if estimate:
                self.velocity_source = "estimated"
            self.joints = (pos, vel, t)
            self.counters["joint_state"] += 1

    def estimate_velocity(self, pos: np.ndarray, t: float) -> np.ndarray:
        """Finite difference to the previous accepted JointState (zero for the first; the node
        cannot leave passive before a second one arrives: stand-up takes seconds)."""
        prev = self._prev_pos
        if prev is None or t - prev[1] <= 1e-6:
            last = self.joints
            return np.zeros_like(pos) if last is None else last[1]
        return (pos - prev[0]) / (t - prev[1])

    def on_imu(self, msg: m.Imu) -> None:
        q = np.asarray(msg.orientation, dtype=np.float64)
        w = np.asarray(msg.angular_velocity, dtype=np.float64)
        try:
            if q.shape != (4,) or w.shape != (3,) or not (np.all(np.isfinite(q)) and np.all(np.isfinite(w))):
                raise MalformedMessage("Imu malformed or NaN/inf")
            norm = float(np.linalg.norm(q))
            if abs(norm - 1.0) > 0.05:
                raise MalformedMessage(f"Imu orientation is not a unit quaternion (norm {norm:.3f})")
            if np.abs(w).max() > self.safety_cfg.max_gyro:
                raise MalformedMessage(f"Imu body rate {np.abs(w).max():.1f} rad/s exceeds max_gyro "
                                       f"{self.safety_cfg.max_gyro}")
            t = self.receive_time(msg.stamp, "Imu")
        except MalformedMessage as e:
            self.reject(str(e))
            return
        with self.lock:
            self.imu = (q / norm, w, t)
            self.counters["imu"] += 1

    def on_cmd_vel(self, msg: m.Twist) -> None:
        lin, ang = np.asarray(msg.linear, dtype=np.float64), np.asarray(msg.angular, dtype=np.float64)
        if lin.shape != (3,) or ang.shape != (3,):
            self.reject("Twist malformed")
            return
        cmd = np.array([lin[0], lin[1], ang[2]], dtype=np.float64)
        if not np.all(np.isfinite(cmd)):
            self.reject("Twist contains NaN/inf")
            return
        if self.command_ranges is not None:  # the policy never saw commands beyond its training ranges
            cmd = np.clip(cmd, self.command_ranges[:, 0], self.command_ranges[:, 1])
        with self.lock:
            self.cmd = (cmd, time.monotonic())
            self.counters["cmd_vel"] += 1

    def on_pose_command(self, msg: m.PoseStamped) -> None:
        try:
            pose = self.arm.parse_pose(msg)
        except ValueError as e:
            self.reject(str(e))
            return
        with self.lock:
            self.cmd = (pose, time.monotonic())
            self.counters["pose_command"] += 1

    def _store_source(self, signal: str, counter: str, what: str,
                      parse: Callable[[], tuple[np.ndarray, float]]) -> None:
        """Store ``parse()``'s (value, receive time) as the external source ``signal``, counted under
        ``counter``; a refusal (``ValueError``) names ``what`` and stores nothing."""
        try:
            value, t = parse()
        except ValueError as e:  # MalformedMessage too
            self.reject(f"{what} refused: {e}")
            return
        with self.lock:
            self.sources[signal] = (value, t)
            self.counters[counter] += 1

    def on_height_map(self, msg: m.Float64MultiArray) -> None:
        self._store_source("height_scan", "height_map", "height map", lambda: (
            self.height_map.parse(msg, self.safety_cfg.max_height_map), time.monotonic()))

    def on_object_pose(self, msg: m.PoseStamped) -> None:
        self._store_source("object_pose", "object_pose", "object pose", lambda: (
            self.arm.parse_object(msg), self.receive_time(msg.stamp, "object pose")))

    def on_lift_command(self, msg: m.Float64) -> None:
        self._store_source("lift_command", "lift_command", "lift command", lambda: (
            self.arm.parse_lift(msg), time.monotonic()))

    def on_estop(self, msg: m.Bool) -> None:
        if msg.data:
            self.set_hold("e-stop message received")
