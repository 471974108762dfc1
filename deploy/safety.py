"""The deploy node's safety state machine: passive -> stand-up -> policy, damping on any fault.

Pure logic on numpy arrays and times, no transport and no clock of its own, so every
transition is unit-tested with hand-written inputs (tests/test_safety.py). The node calls
:func:`find_fault` on what it last received, then :meth:`SafetyStateMachine.tick`.

Modes (rl_sar / unitree_rl_gym users know them):

- ``passive``: the start. Damping only (kp = 0, kd = ``damping_kd``, target = measured pose);
  waits for healthy data, then stands up by itself (``auto_start``) or on a start message.
- ``stand_up``: joint targets move linearly from the pose at entry to the bundle's default pose
  over ``stand_up_time``, then hold it for ``stand_hold_time``, with the bundle's PD gains.
- ``policy``: the policy's joint targets with the bundle's gains.
- ``damping``: any fault (stale or malformed data, joint limits, tilt, e-stop) from stand-up or
  policy lands here and **latches**: only an explicit start message leaves it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from enum import Enum
from typing import Any

import numpy as np


class Mode(str, Enum):
    PASSIVE = "passive"
    STAND_UP = "stand_up"
    POLICY = "policy"
    DAMPING = "damping"


@dataclass
class SafetyConfig:
    """Watchdog limits and stand-up timing (ROS 2 parameters of the node; seconds, radians)."""

    state_timeout: float = 0.0
    """JointState or Imu older than this (receive time, s) is a fault. 0 = 0.75 control periods
    (15 ms at 50 Hz), so a dead state publisher trips damping within 2 control periods of its
    last message; the robot driver must then publish several times per period (500 Hz is usual)."""
    command_timeout: float = 0.5
    """A velocity command older than this is a fault while the policy runs; 0 = commands never
    go stale (and the policy starts with a zero command if none ever came)."""
    max_tilt: float = 0.8
    """Angle (rad) between the body z axis and vertical beyond which the robot has fallen."""
    joint_limit_margin: float = 0.1
    """Measured joint positions may exceed the bundle's hard limits by this much (rad)."""
    max_joint_vel: float = 30.0
    """Measured joint speed (rad/s) beyond which the data or the robot is wrong."""
    max_gyro: float = 20.0
    """Measured body rate (rad/s) beyond which the data or the robot is wrong."""
    stand_up_time: float = 2.0
    """Seconds to move from the pose at start to the default pose."""
    stand_hold_time: float = 0.5
    """Seconds to hold the default pose before the policy takes over."""
    damping_kd: float = 1.0
    """Joint damping (N m s/rad) in passive and damping modes (kp = 0)."""
    auto_start: bool = True
    """Stand up on the first healthy data without waiting for a start message (once: after a
    fault the node waits for a start message)."""

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name != "auto_start" and (not isinstance(v, (int, float)) or v < 0 or not math.isfinite(v)):
                raise ValueError(f"safety parameter {f.name} must be a finite number >= 0, got {v!r}")
        if not 0 < self.max_tilt < math.pi:
            raise ValueError(f"max_tilt must be in (0, pi) rad, got {self.max_tilt}")

    def resolved(self, control_dt: float) -> SafetyConfig:
        """This config with ``state_timeout = 0`` replaced by 0.75 control periods."""
        return replace(self, state_timeout=self.state_timeout or 0.75 * control_dt)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> SafetyConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown safety parameter(s) {unknown}; known: {sorted(known)}")
        return cls(**values)


def tilt_angle(gravity_body: np.ndarray) -> float:
    """Angle (rad) between the body z axis and vertical, from gravity in body axes (unit)."""
    return float(math.acos(max(-1.0, min(1.0, -float(gravity_body[2])))))


def find_fault(
    cfg: SafetyConfig,
    joint_pos: np.ndarray | None,
    joint_vel: np.ndarray | None,
    gravity_body: np.ndarray | None,
    gyro: np.ndarray | None,
    state_age: float,
    command_age: float | None,
    joint_limits: np.ndarray | None,
    need_command: bool,
) -> str | None:
    """The first fault in the latest robot data, as a message for the log; ``None`` if healthy.

    Ages are seconds since receipt (``inf`` when never received). ``joint_limits`` is
    ``[num_joints, 2]`` (lo, hi) in policy joint order.
    """
    if joint_pos is None or gravity_body is None or gyro is None or joint_vel is None:
        return "no joint state or IMU received yet"
    if state_age > cfg.state_timeout:  # (resolved: never 0 here)
        return (f"robot state is stale: last JointState/Imu {state_age * 1e3:.1f} ms ago "
                f"(> {cfg.state_timeout * 1e3:.1f} ms)")
    for name, v in (("joint positions", joint_pos), ("joint velocities", joint_vel),
                    ("IMU gravity", gravity_body), ("IMU angular velocity", gyro)):
        if not np.all(np.isfinite(v)):
            return f"non-finite {name}"
    if joint_limits is not None:
        lo, hi = joint_limits[:, 0] - cfg.joint_limit_margin, joint_limits[:, 1] + cfg.joint_limit_margin
        bad = np.flatnonzero((joint_pos < lo) | (joint_pos > hi))
        if bad.size:
            i = int(bad[0])
            return f"joint {i} at {joint_pos[i]:.3f} rad is outside its limits [{lo[i]:.3f}, {hi[i]:.3f}]"
    if np.abs(joint_vel).max(initial=0.0) > cfg.max_joint_vel:
        return f"joint speed {np.abs(joint_vel).max():.1f} rad/s exceeds max_joint_vel {cfg.max_joint_vel}"
    if np.abs(gyro).max() > cfg.max_gyro:
        return f"body rate {np.abs(gyro).max():.1f} rad/s exceeds max_gyro {cfg.max_gyro}"
    tilt = tilt_angle(gravity_body)
    if tilt > cfg.max_tilt:
        return f"tilt {math.degrees(tilt):.0f} deg exceeds max_tilt {math.degrees(cfg.max_tilt):.0f} deg"
    stale = command_age is None or command_age > cfg.command_timeout
    if need_command and cfg.command_timeout > 0 and stale:
        age = "never received" if command_age is None else f"{command_age:.2f} s old"
        return f"velocity command is stale: {age} (> command_timeout {cfg.command_timeout} s)"
    return None


@dataclass
class JointCommand:
    """What goes to the actuators this tick: per-joint target, gains (policy joint order)."""

    position: np.ndarray
    kp: np.ndarray
    kd: np.ndarray


class SafetyStateMachine:
    """Mode bookkeeping and the joint command of each mode (see the module docstring)."""

    def __init__(self, cfg: SafetyConfig, default_pose: np.ndarray, kp: np.ndarray, kd: np.ndarray) -> None:
        self.cfg = cfg
        self.default_pose = np.asarray(default_pose, dtype=np.float64)
        n = len(self.default_pose)
        self.kp = np.broadcast_to(np.asarray(kp, dtype=np.float64), (n,)).copy()
        self.kd = np.broadcast_to(np.asarray(kd, dtype=np.float64), (n,)).copy()
        self.mode = Mode.PASSIVE
        self.fault: str | None = None
        self.transitions: list[tuple[float, Mode, str]] = []
        """``(time, new mode, why)`` of every transition, for the log and the tests."""
        self._start_requested = cfg.auto_start
        self._t0 = 0.0
        self._q0 = self.default_pose.copy()
        self._last_pos = self.default_pose.copy()

    def _enter(self, mode: Mode, t: float, why: str) -> None:
        self.mode, self._t0 = mode, t
        self.transitions.append((t, mode, why))

    def request_start(self) -> None:
        """Operator's start: stand up from passive, or clear a latched fault and stand up."""
        self._start_requested = True

    def trip(self, t: float, reason: str) -> None:
        """A fault: damping from stand-up or policy; noted (not latched) in passive."""
        if self.mode in (Mode.STAND_UP, Mode.POLICY) or (self.mode == Mode.PASSIVE and reason.startswith("e-stop")):
            self.fault = reason
            self._start_requested = False
            self._enter(Mode.DAMPING, t, reason)

    def tick(self, t: float, fault: str | None, joint_pos: np.ndarray | None) -> Mode:
        """Advance the mode at time ``t`` given this tick's fault (``None`` when healthy)."""
        if joint_pos is not None and np.all(np.isfinite(joint_pos)):
            self._last_pos = np.asarray(joint_pos, dtype=np.float64).copy()
        if fault is not None:
            if self.mode == Mode.DAMPING:
                self._start_requested = False  # a start pressed while still faulty is not kept for later
            self.trip(t, fault)
            return self.mode
        if self.mode in (Mode.PASSIVE, Mode.DAMPING) and self._start_requested:
            self._start_requested = False
            self.fault = None
            self._q0 = self._last_pos.copy()
            self._enter(Mode.STAND_UP, t, "start")
        elif self.mode == Mode.STAND_UP and t - self._t0 >= self.cfg.stand_up_time + self.cfg.stand_hold_time:
            self._enter(Mode.POLICY, t, "stood up")
        return self.mode

    def command(self, t: float, policy_targets: np.ndarray | None = None) -> JointCommand:
        """The joint command of the current mode (``policy_targets`` is used in policy mode)."""
        if self.mode == Mode.STAND_UP:
            alpha = min(1.0, (t - self._t0) / self.cfg.stand_up_time) if self.cfg.stand_up_time > 0 else 1.0
            return JointCommand(self._q0 + alpha * (self.default_pose - self._q0), self.kp, self.kd)
        if self.mode == Mode.POLICY:
            if policy_targets is None:
                raise ValueError("policy mode needs the policy's joint targets")
            return JointCommand(np.asarray(policy_targets, dtype=np.float64), self.kp, self.kd)
        zeros = np.zeros_like(self.kp)
        return JointCommand(self._last_pos.copy(), zeros, np.full_like(self.kd, self.cfg.damping_kd))
