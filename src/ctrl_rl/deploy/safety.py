"""The deploy node's safety state machine: passive -> stand-up -> policy, damping on any fault.

Pure logic on numpy arrays and times, no transport and no clock of its own, so every
transition is unit-tested with hand-written inputs (tests/test_safety.py). The node calls
:func:`find_fault` on what it last received, then :meth:`SafetyStateMachine.tick`.

Modes (rl_sar / unitree_rl_gym users know them):

- ``passive``: the start. No gains (kp = 0, kd = ``passive_kd``, 0 by default: zero torque, as
  Unitree's examples and rl_sar send before their start button; target = measured pose); nothing at
  all until a valid robot state has been read (there is no pose to hold before it); waits for
  healthy data and an operator's start message (with ``auto_start``: healthy data only, for
  sim2sim). Before that start no command has non-zero gains (with the default ``passive_kd``) or a
  target other than the measured pose.
- ``stand_up``: joint targets move linearly from the pose at entry to the bundle's default pose
  over ``stand_up_time``, then hold it for ``stand_hold_time``, with the bundle's PD gains (stiffer by
  ``stand_up_stiffness``, up to 10 x).
- ``policy``: the policy's joint targets with the bundle's gains.
- ``damping``: any fault (stale or malformed data, joint limits, tilt, e-stop) from stand-up or
  policy lands here and **latches**: only an explicit start message leaves it. An operator's stop
  (:data:`OPERATOR_STOPS`) lands here too, named as :attr:`SafetyStateMachine.stop`, not as a fault.

Every target the machine returns passes :func:`clamp_targets` (the bundle's joint limits and,
where the bundle has torque limits and gains, what they allow at the measured state), and the
pose it holds is only ever a measured pose that passed :func:`pose_fault`.
"""

from __future__ import annotations

import math
import typing
from dataclasses import dataclass, fields, replace
from enum import Enum
from typing import Any

import numpy as np

from ctrl_rl.robots.description import MAX_STAND_UP_STIFFNESS

from .typed_params import check_value, from_flat

STATE_TIMEOUT_PERIODS = 2.0
"""``safety.state_timeout = 0`` means this many control periods (see the field's docstring)."""


OPERATOR_STOPS = ("stopped", "deactivated")
"""Prefixes of the reasons of a damping hold that the operator asked for (the node stopped by a
signal or at the end of its run, a lifecycle deactivate): they are a ``stop``, never a ``fault``."""


class Mode(str, Enum):
    PASSIVE = "passive"
    STAND_UP = "stand_up"
    POLICY = "policy"
    DAMPING = "damping"


@dataclass
class SafetyConfig:
    """Watchdog limits and stand-up timing (ROS 2 parameters of the node; seconds, radians)."""

    state_timeout: float = 0.0
    """JointState or Imu older than this (s) is a fault. 0 = ``STATE_TIMEOUT_PERIODS`` (2) control
    periods, 40 ms at 50 Hz: a dead state publisher reaches damping within 3 periods of its last
    message, and a healthy 200-500 Hz stream on a loaded computer does not trip it. Shorter catches
    a dead driver sooner and trips on scheduling hiccups; longer the reverse (docs/deploy.md;
    the measurements: docs/experiments/deploy_state_timeout.md)."""
    use_header_stamps: bool = False
    """Age robot state by its header stamp (the robot's and this computer's clocks must be
    synchronized, e.g. by PTP/chrony); false = by arrival time. With stamps, a message stamped more
    than ``state_timeout`` in the past or in the future is rejected."""
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
    stand_up_stiffness: float = 0.0
    """The stand-up's and the hold's gains over the bundle's: ``kp x s``, ``kd x sqrt(s)`` (the same damping
    ratio), at most :data:`MAX_STAND_UP_STIFFNESS`; 0 = the bundle's (its robot YAML's ``stand_up_stiffness``,
    1 without one). Soft policy gains (the Go1's place its joints at 10 Hz) let the robot sag under its own
    weight while it stands (to 0.57 of its standing height), and the policy then lifts it at the torque
    limit; with ``s`` the policy takes over from the pose its training episodes start in, as Unitree's
    examples stand up stiffer than they walk."""
    damping_kd: float = 1.0
    """Joint damping (N m s/rad) in damping mode (kp = 0): after a fault or an operator's stop."""
    passive_kd: float = 0.0
    """Joint damping (N m s/rad) in passive mode, before the operator's start (kp = 0): 0 sends zero
    gains (zero torque: the robot stays as it lies, held by nothing); a value > 0 damps its motion."""
    auto_start: bool = False
    """Stand up on the first healthy data without waiting for an operator's start message (once:
    after a fault the node waits for a start message). Off on a robot: nothing with stiffness goes
    out before an operator sends start; ``ctrl-rl deploy sim2sim`` turns it on for its simulated robot."""
    height_map_timeout: float = 0.2
    """A height map (bundles that observe ``height_scan``) older than this (s) is a fault: the
    node does not stand up without a fresh one and goes to damping when it goes stale. 0.2 s is
    two periods of a 10 Hz elevation mapper."""
    max_height_map: float = 3.0
    """A height-map clearance beyond +-this (m) makes the message malformed (a perception fault,
    not terrain a policy trained on +-1 m readings could use)."""
    object_pose_timeout: float = 0.2
    """An object pose (arm bundles that observe ``object_pose``, ``object_to_ee``, ``object_to_tool`` or
    ``tool_correction``) older than this (s) is a fault: the node does not stand up without a fresh one and goes
    to damping when it goes stale. 0.2 s is six periods of a 30 Hz camera tracker; raise it for a slower source."""
    workspace_margin: float = 0.2
    """Arm bundles: every policy target's end effector (forward kinematics) is kept inside the task's target
    box (stretched to hold the default pose's end effector) grown by this much (m) on every side. A soft PD
    arm's policy aims past its target, against gravity and to accelerate: on the YAM's reach policy 0.1 m
    scaled back 43 % of its targets and cost 14 points of success, 0.2 m 5 % and none (docs/deploy.md, "Arms")."""
    torque_clamp: bool = True
    """Also clamp each target to what the bundle's torque limits allow with its PD gains at the
    measured state (``|kp (target - q) - kd dq| <= torque limit``); joint limits always apply."""

    def __post_init__(self) -> None:
        hints = typing.get_type_hints(type(self))
        for f in fields(self):
            v = check_value(f"safety.{f.name}", getattr(self, f.name), hints[f.name])
            setattr(self, f.name, v)
            if isinstance(v, float) and (v < 0 or not math.isfinite(v)):
                raise ValueError(f"safety.{f.name} must be a finite number >= 0, got {v!r}")
        if self.stand_up_stiffness > MAX_STAND_UP_STIFFNESS:
            raise ValueError(f"safety.stand_up_stiffness must be at most {MAX_STAND_UP_STIFFNESS:g} (x the bundle's "
                             f"kp), got {self.stand_up_stiffness}")
        if not 0 < self.max_tilt < math.pi:
            raise ValueError(f"safety.max_tilt must be in (0, pi) rad, got {self.max_tilt}")

    def resolved(self, control_dt: float, stand_up_stiffness: float = 1.0) -> SafetyConfig:
        """This config with ``state_timeout = 0`` replaced by ``STATE_TIMEOUT_PERIODS`` control periods and
        ``stand_up_stiffness = 0`` by the bundle's ``stand_up_stiffness``."""
        return replace(self, state_timeout=self.state_timeout or STATE_TIMEOUT_PERIODS * control_dt,
                       stand_up_stiffness=self.stand_up_stiffness or stand_up_stiffness)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> SafetyConfig:
        return from_flat(cls, values, "safety.")


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
    for name, v in (("IMU gravity", gravity_body), ("IMU angular velocity", gyro)):
        if not np.all(np.isfinite(v)):
            return f"non-finite {name}"
    bad_joints = pose_fault(cfg, joint_pos, joint_vel, joint_limits)
    if bad_joints is not None:
        return bad_joints
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


def pose_fault(cfg: SafetyConfig, joint_pos: np.ndarray, joint_vel: np.ndarray,
               joint_limits: np.ndarray | None, names: list[str] | None = None) -> str | None:
    """Why measured joint positions/velocities cannot be trusted (non-finite, beyond the limits
    plus ``joint_limit_margin``, faster than ``max_joint_vel``); ``None`` if they can. The node
    rejects a JointState that fails this before it stores anything of it."""
    for what, v in (("joint positions", joint_pos), ("joint velocities", joint_vel)):
        if not np.all(np.isfinite(v)):
            return f"non-finite {what}"
    if joint_limits is not None:
        lo, hi = joint_limits[:, 0] - cfg.joint_limit_margin, joint_limits[:, 1] + cfg.joint_limit_margin
        bad = np.flatnonzero((joint_pos < lo) | (joint_pos > hi))
        if bad.size:
            i = int(bad[0])
            name = names[i] if names else str(i)
            return f"joint {name} at {joint_pos[i]:.3f} rad is outside its limits [{lo[i]:.3f}, {hi[i]:.3f}]"
    if np.abs(joint_vel).max(initial=0.0) > cfg.max_joint_vel:
        return f"joint speed {np.abs(joint_vel).max():.1f} rad/s exceeds max_joint_vel {cfg.max_joint_vel}"
    return None


def clamp_targets(
    targets: np.ndarray,
    joint_limits: np.ndarray | None,
    kp: np.ndarray | None = None,
    kd: np.ndarray | None = None,
    torque_limits: np.ndarray | None = None,
    joint_pos: np.ndarray | None = None,
    joint_vel: np.ndarray | None = None,
) -> tuple[np.ndarray, int]:
    """Targets within what the robot may be asked for, and how many joints the clamp moved.

    Torque first: a PD joint (``tau = kp (target - q) - kd dq``, the robot's law at zero velocity
    target) stays within ``torque_limits`` at the measured ``q, dq`` for ``target`` in
    ``[q + (kd dq - tau_max) / kp, q + (kd dq + tau_max) / kp]`` (joints with kp = 0 are exempt).
    Then the hard joint limits, which win where the two disagree.
    """
    out = np.asarray(targets, dtype=np.float64).copy()
    if torque_limits is not None and kp is not None and joint_pos is not None and joint_vel is not None:
        kd = np.zeros_like(out) if kd is None else kd
        active = kp > 0
        safe_kp = np.where(active, kp, 1.0)
        lo = np.where(active, joint_pos + (kd * joint_vel - torque_limits) / safe_kp, -np.inf)
        hi = np.where(active, joint_pos + (kd * joint_vel + torque_limits) / safe_kp, np.inf)
        out = np.clip(out, lo, hi)
    if joint_limits is not None:
        out = np.clip(out, joint_limits[:, 0], joint_limits[:, 1])
    moved = int(np.count_nonzero(out != np.asarray(targets, dtype=np.float64)))
    return out, moved


@dataclass
class JointCommand:
    """What goes to the actuators this tick: per-joint target, gains (policy joint order)."""

    position: np.ndarray
    kp: np.ndarray
    kd: np.ndarray
    clamped: int = 0
    """Joints whose target :func:`clamp_targets` moved this tick."""


class SafetyStateMachine:
    """Mode bookkeeping and the joint command of each mode (see the module docstring).

    ``joint_limits`` (``[n, 2]``) and ``torque_limits`` (``[n]``) bound every target; ``None``
    where the bundle has none.
    """

    def __init__(self, cfg: SafetyConfig, default_pose: np.ndarray, kp: np.ndarray, kd: np.ndarray,
                 joint_limits: np.ndarray | None = None, torque_limits: np.ndarray | None = None) -> None:
        self.cfg = cfg
        self.default_pose = np.asarray(default_pose, dtype=np.float64)
        n = len(self.default_pose)
        self.kp = np.broadcast_to(np.asarray(kp, dtype=np.float64), (n,)).copy()
        self.kd = np.broadcast_to(np.asarray(kd, dtype=np.float64), (n,)).copy()
        self.joint_limits = None if joint_limits is None else np.asarray(joint_limits, dtype=np.float64)
        self.torque_limits = None if torque_limits is None else \
            np.broadcast_to(np.asarray(torque_limits, dtype=np.float64), (n,)).copy()
        self.mode = Mode.PASSIVE
        self.fault: str | None = None
        """The fault that holds the machine in damping (``None``: none, or only an operator's stop)."""
        self.stop: str | None = None
        """The operator's stop (:data:`OPERATOR_STOPS`) that holds it in damping: not a fault."""
        self.transitions: list[tuple[float, Mode, str]] = []
        """``(time, new mode, why)`` of every transition, for the log and the tests."""
        self._start_requested = cfg.auto_start
        self._t0 = 0.0
        self._q0: np.ndarray | None = None
        self.measured_pose: np.ndarray | None = None
        """The last measured pose that passed the checks; ``None`` until one has: until then no
        mode has a pose to hold and :meth:`command` returns nothing."""

    def _enter(self, mode: Mode, t: float, why: str) -> None:
        self.mode, self._t0 = mode, t
        self.transitions.append((t, mode, why))

    def request_start(self) -> None:
        """Operator's start: stand up from passive, or clear a latched fault and stand up."""
        self._start_requested = True

    def trip(self, t: float, reason: str, latch_in_passive: bool = False) -> Mode:
        """A fault, or an operator's stop (``reason`` starts with one of :data:`OPERATOR_STOPS`):
        damping from stand-up or policy; in passive only an operator's hold (e-stop, deactivate,
        stop: ``latch_in_passive``) latches, a data fault is noted and waited out. A stop is kept
        in :attr:`stop`, a fault in :attr:`fault`; a stop while a fault holds damping adds to it."""
        operator = reason.startswith(OPERATOR_STOPS)
        if self.mode in (Mode.STAND_UP, Mode.POLICY) or (self.mode == Mode.PASSIVE and latch_in_passive):
            self.fault, self.stop = (None, reason) if operator else (reason, None)
            self._start_requested = False
            self._enter(Mode.DAMPING, t, reason)
        elif self.mode == Mode.DAMPING and operator:
            self.stop = reason
        return self.mode

    def tick(self, t: float, fault: str | None, measured_pose: np.ndarray | None,
             latch_in_passive: bool = False) -> Mode:
        """Advance the mode at time ``t`` given this tick's fault (``None`` when healthy).

        ``measured_pose``: the latest joint positions that passed :func:`pose_fault`, or ``None``
        (the caller never passes a pose it rejected: it would become the pose held in damping).
        """
        if measured_pose is not None:
            self.measured_pose = np.asarray(measured_pose, dtype=np.float64).copy()
        if fault is not None:
            if self.mode == Mode.DAMPING:
                self._start_requested = False  # a start pressed while still faulty is not kept for later
            return self.trip(t, fault, latch_in_passive)
        if self.mode in (Mode.PASSIVE, Mode.DAMPING) and self._start_requested and self.measured_pose is not None:
            self._start_requested = False
            self.fault = self.stop = None
            self._q0 = self.measured_pose.copy()
            self._enter(Mode.STAND_UP, t, "start")
        elif self.mode == Mode.STAND_UP and t - self._t0 >= self.cfg.stand_up_time + self.cfg.stand_hold_time:
            self._enter(Mode.POLICY, t, "stood up")
        return self.mode

    def command(self, t: float, policy_targets: np.ndarray | None = None,
                joint_vel: np.ndarray | None = None) -> JointCommand | None:
        """The joint command of the current mode, clamped (``policy_targets`` in policy mode);
        ``None`` while no measured pose exists (nothing may be published then)."""
        if self.measured_pose is None:
            return None
        if self.mode == Mode.STAND_UP:
            alpha = min(1.0, (t - self._t0) / self.cfg.stand_up_time) if self.cfg.stand_up_time > 0 else 1.0
            s = self.cfg.stand_up_stiffness or 1.0
            target, kp, kd = self._q0 + alpha * (self.default_pose - self._q0), self.kp * s, self.kd * math.sqrt(s)
        elif self.mode == Mode.POLICY:
            if policy_targets is None:
                raise ValueError("policy mode needs the policy's joint targets")
            target, kp, kd = np.asarray(policy_targets, dtype=np.float64), self.kp, self.kd
        else:  # passive, damping: hold the measured pose with no stiffness
            damping = self.cfg.passive_kd if self.mode == Mode.PASSIVE else self.cfg.damping_kd
            target, kp, kd = self.measured_pose, np.zeros_like(self.kp), np.full_like(self.kd, damping)
        torque = self.torque_limits if self.cfg.torque_clamp else None
        target, moved = clamp_targets(target, self.joint_limits, kp, kd, torque, self.measured_pose, joint_vel)
        # with kp 0 (passive, damping) a target moves no motor: clamping the measured pose of an arm that sagged
        # past its range keeps the message inside the limits, but no clamp bit, so none is counted
        return JointCommand(target, kp, kd, moved if np.any(kp > 0) else 0)
