"""A policy bundle as a robot controller: robot state in, joint targets out (numpy only).

The bundle's metadata says which observation terms the policy was trained on; this module
evaluates those very term functions (``ctrl_rl.robots.terms``, numpy-compatible) on what
the robot measures, so nothing about the observation is re-implemented by hand. Joints are
matched by name, never by position: the robot's joint order may differ from the policy's.

Imports numpy and onnxruntime only (``ctrl_rl.robots.terms`` imports numpy only).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ctrl_rl.robots.action_filter import ActionFilter, check_action_filters, check_lowpass
from ctrl_rl.robots.terms import (
    EXTERNAL_TERMS,
    ROBOT_SIGNALS,
    ROBOT_TERMS,
    TERM_FUNCTIONS,
    ObsTerm,
    TermHistory,
    compute_obs,
    heading_hold,
    yaw_angle,
)

from .runtime import OnnxPolicy

REQUIRED_KEYS = ("obs_terms", "joint_names", "default_pose", "action_scale", "kp", "kd", "control_dt")
"""Metadata a bundle needs to drive a robot (robot tasks export it; see ``VecEnv.deploy_metadata``)."""


def joint_index_map(policy_joints: Sequence[str], robot_joints: Sequence[str]) -> np.ndarray:
    """``idx`` with ``robot_values[idx]`` in the policy's joint order; errors name every mismatch."""
    robot = list(robot_joints)
    if len(set(robot)) != len(robot):
        dup = sorted({n for n in robot if robot.count(n) > 1})
        raise ValueError(f"the robot reports joint name(s) {dup} more than once")
    missing = [n for n in policy_joints if n not in robot]
    if missing:
        raise ValueError(f"the robot does not report joint(s) {missing} the policy drives; "
                         f"it reports {robot}")
    return np.array([robot.index(n) for n in policy_joints], dtype=np.int64)


class RobotPolicy:
    """Observation assembly, inference and action mapping for one robot (batch of one)."""

    def __init__(self, bundle: str | Path | OnnxPolicy, sources: Sequence[str] = ()) -> None:
        """``sources``: external signals the robot provides (:data:`EXTERNAL_TERMS`); a bundle that needs
        one not listed is refused here, before anything runs."""
        self.policy = bundle if isinstance(bundle, OnnxPolicy) else OnnxPolicy(bundle)
        meta = self.policy.metadata
        missing = [k for k in REQUIRED_KEYS if k not in meta]
        if missing:
            raise ValueError(f"bundle lacks {missing}: it was not exported from a robot task "
                             "(re-export with ctrl-rl export from a checkpoint of one)")
        self.terms = [ObsTerm.from_dict(t) for t in meta["obs_terms"]]
        unknown = [t.name for t in self.terms if t.name not in TERM_FUNCTIONS]
        if unknown:
            raise ValueError(f"bundle uses observation term(s) {unknown} this ctrl_rl does not define")
        for t in self.terms:
            if t.name in EXTERNAL_TERMS and t.name not in sources:
                raise ValueError(f"the bundle's policy observes {t.name!r}, which needs {EXTERNAL_TERMS[t.name]}; "
                                 f"this robot has none configured. Provide the source (the deploy node: "
                                 f"height_map_topic, object_pose_topic, lift_command_topic; docs/deploy.md) or "
                                 f"train a policy without it (for terrain: task.kwargs.actor_height_scan=false, "
                                 f"the default)")
            if t.name not in ROBOT_TERMS and t.name not in EXTERNAL_TERMS:
                raise ValueError(f"the bundle's policy observes {t.name!r}, a simulator-only (privileged) term no "
                                 f"robot measures; robot terms: {list(ROBOT_TERMS)}")
        self.sources = tuple(sources)
        """External signals the robot provides beside its sensors (e.g. ``height_scan``)."""
        if sum(t.dim * t.history for t in self.terms) != self.policy.obs_dim:
            raise ValueError("bundle's observation terms (dims x history lengths) do not add up to the network's "
                             "input size")
        self.history = TermHistory([t.dim for t in self.terms], [t.history for t in self.terms]) \
            if any(t.history > 1 for t in self.terms) else None
        """The terms' frame stacks (None when every term is one frame), restarted by :meth:`reset`."""
        self.joint_names: list[str] = list(meta["joint_names"])
        self.default_pose = np.asarray(meta["default_pose"], dtype=np.float64)
        self.action_scale = np.asarray(meta["action_scale"], dtype=np.float64)
        """One value or one per joint (a robot YAML's ``action_scale``)."""
        clip = meta.get("action_clip")
        self.action_clip = None if clip is None else float(clip)
        weight = float(meta.get("action_filter", 0.0))  # bundles before it: no filter
        hz = float(meta.get("action_lowpass_hz", 0.0))  # bundles before it: no low-pass
        check_action_filters(weight, hz, "bundle metadata")
        self.kp = np.asarray(meta["kp"], dtype=np.float64)
        self.kd = np.asarray(meta["kd"], dtype=np.float64)
        self.control_dt = float(meta["control_dt"])
        check_lowpass(hz, self.control_dt, "bundle metadata: action_lowpass_hz")
        acting = list(meta.get("action_joints", self.joint_names))  # bundles before it: every joint acts
        unknown = sorted(set(acting) - set(self.joint_names))
        if unknown or len(set(acting)) != len(acting) or not acting:
            raise ValueError(f"bundle metadata: action_joints must be distinct names from joint_names, got {acting}")
        self.action_index = np.array([self.joint_names.index(j) for j in acting])
        """Positions in ``joint_names`` of the policy's outputs; the other joints hold :attr:`rest_targets`."""
        self.rest_targets = np.asarray(meta.get("rest_targets", meta["default_pose"]), dtype=np.float64)
        """The targets at zero action (bundles before it: the default pose): what the joints the policy does not
        move hold (an insert arm's gripper, closed on its peg) and where stand-up goes."""
        if self.policy.action_dim is not None and self.policy.action_dim != len(acting):
            raise ValueError(f"bundle: the network outputs {self.policy.action_dim} actions for {len(acting)} acting "
                             "joints (action_joints, or joint_names); re-export it with `ctrl-rl export <run>`")
        self.last_action = np.zeros(len(acting))
        self.action_before = np.zeros(len(acting))  # the filters' output state: the last two applied actions
        self.filter = ActionFilter(weight, hz, self.control_dt, lambda: np.zeros(len(acting)))
        """The filter training ran (``robots/action_filter.py``), its input state from rest."""
        period = meta.get("gait_period")
        self.gait_period = None if period is None else float(period)
        """Seconds per cycle of the gait clock (``gait_clock`` term); None: the policy has no clock."""
        if any(t.name == "gait_clock" for t in self.terms) and not (
                self.gait_period is not None and np.isfinite(self.gait_period) and self.gait_period > 0):
            raise ValueError(f"bundle metadata: the policy observes 'gait_clock' but gait_period is {period!r}; "
                             "it must be > 0 seconds (re-export the bundle with `ctrl-rl export <run>`)")
        self.ticks = 0
        """Policy steps since :meth:`reset`: the gait clock, as the training env counts its episode's steps."""
        command = meta.get("command") or {}
        self.heading_stiffness = float(command.get("heading_stiffness", 0.0))  # bundles before it: no hold
        """The heading hold's gain (1/s; ``task.kwargs.heading_stiffness``): 0 passes the yaw rate through."""
        ranges = command.get("ranges") or [[-np.inf, np.inf]] * 3
        self.yaw_rate_range = (float(ranges[2][0]), float(ranges[2][1]))
        self.heading_target = 0.0
        """The heading the hold steers to: the yaw at the episode's second tick, advanced by the operator's rate."""
        if not (np.isfinite(self.heading_stiffness) and self.heading_stiffness >= 0) or \
                self.yaw_rate_range[0] > self.yaw_rate_range[1]:
            raise ValueError(f"bundle metadata: command.heading_stiffness must be finite and >= 0 and the yaw-rate "
                             f"range [lo, hi], got {command.get('heading_stiffness')!r}, {ranges[2]!r}")
        self._check_metadata(meta)

    def _check_metadata(self, meta: dict[str, Any]) -> None:
        """Robot data the node turns into commands must be complete and finite, joint by joint."""
        n = len(self.joint_names)
        where = "bundle metadata"
        if n == 0 or len(set(self.joint_names)) != n:
            raise ValueError(f"{where}: joint_names must be distinct and non-empty, got {self.joint_names}")
        for key, value, minimum in (("default_pose", self.default_pose, None), ("kp", self.kp, 0.0),
                                    ("kd", self.kd, 0.0), ("action_scale", self.action_scale, 0.0)):
            if value.shape not in ((n,), (1,), ()) or not np.all(np.isfinite(value)) or \
                    (minimum is not None and np.any(value < minimum)):
                raise ValueError(f"{where}: {key} must be {n} finite values{' >= 0' if minimum is not None else ''}, "
                                 f"got {value.tolist()}")
        if self.default_pose.shape != (n,):
            raise ValueError(f"{where}: default_pose has {self.default_pose.size} values for {n} joints")
        rest = self.rest_targets
        if rest.shape != (n,) or not np.all(np.isfinite(rest)) or \
                not np.array_equal(rest[self.action_index], self.default_pose[self.action_index]):
            raise ValueError(f"{where}: rest_targets must be {n} finite values equal to default_pose on the acting "
                             f"joints, got {rest.tolist()}")
        if not (self.control_dt > 0 and np.isfinite(self.control_dt)):
            raise ValueError(f"{where}: control_dt must be > 0 and finite")
        limits = meta.get("joint_limits")
        if limits is not None:
            lim = np.asarray(limits, dtype=np.float64)
            if lim.shape != (n, 2) or not np.all(np.isfinite(lim)) or np.any(lim[:, 0] > lim[:, 1]):
                raise ValueError(f"{where}: joint_limits must be {n} finite [lo, hi] pairs, got {lim.tolist()}")
        torque = meta.get("torque_limits")
        if torque is not None:
            tau = np.asarray(torque, dtype=np.float64)
            if tau.shape not in ((n,), (1,)) or not np.all(np.isfinite(tau)) or np.any(tau <= 0):
                raise ValueError(f"{where}: torque_limits must be {n} finite values > 0, got {tau.tolist()}")

    def reset(self) -> None:
        """Start an episode as training did: the ``last_action`` term at zero, the history stacks
        filled with the next frame, a recurrent policy's state at zero."""
        self.last_action[:] = 0.0
        self.action_before[:] = 0.0
        self.filter.reset()
        self.ticks = 0
        if self.history is not None:
            self.history.stacks = []
        self.policy.reset()

    def held_command(self, signals: dict[str, Any], advance: bool = True) -> dict[str, Any]:
        """``signals`` with the command's yaw rate from the heading hold, tick for tick as the training env
        computes it (``VelocityTask._held_commands``): the episode's first two ticks pass the operator's rate
        through (the second takes the IMU's yaw as the target), every later one advances the target by the
        operator's rate and corrects toward it. ``advance=False`` leaves the target as it is."""
        if self.heading_stiffness <= 0 or "command" not in signals or self.ticks == 0:
            return signals
        cmd = np.array(signals["command"], dtype=np.float64)
        yaw = float(yaw_angle(np.asarray(signals["imu_quat"], dtype=np.float64)))
        target = yaw if self.ticks == 1 else self.heading_target + cmd[2] * self.control_dt
        if advance:
            self.heading_target = target
        if self.ticks > 1:
            cmd[2] = heading_hold(cmd[2], target, yaw, self.heading_stiffness, *self.yaw_rate_range)
        return {**signals, "command": cmd}

    def frame(self, signals: dict[str, Any]) -> np.ndarray:
        """This tick's frame ``[sum of term dims]`` from robot signals in policy joint order (``imu_quat``
        w-x-y-z, ``imu_gyro`` body rad/s, ``joint_pos``/``joint_vel``, ``command`` (vx, vy, yaw rate))."""
        values = {k: np.asarray(v, dtype=np.float64) for k, v in signals.items()
                  if k in ROBOT_SIGNALS or k in self.sources}
        values["last_action"] = self.last_action
        values["default_pose"] = self.default_pose
        values["gait_phase"] = np.array([self.gait_phase()])
        return compute_obs(self.terms, values).astype(np.float32)

    def gait_phase(self) -> float:
        """The gait clock's phase in [0, 1) at this tick (0 for a policy without one)."""
        if self.gait_period is None:
            return 0.0
        return (self.ticks * self.control_dt / self.gait_period) % 1.0

    def observation(self, signals: dict[str, Any]) -> np.ndarray:
        """``[obs_dim]``: this tick's frame, stacked behind the earlier ones (the history and the gait
        clock advance)."""
        frame = self.frame(self.held_command(signals))
        self.ticks += 1
        if self.history is None:
            return frame
        stacked = self.history.push(frame[None]) if self.history.stacks else self.history.restart(frame[None])
        return stacked[0].astype(np.float32)

    def peek_observation(self, signals: dict[str, Any]) -> np.ndarray:
        """What :meth:`observation` would return, without advancing the history (an episode's last)."""
        frame = self.frame(self.held_command(signals, advance=False))
        if self.history is None:
            return frame
        if not self.history.stacks:
            return TermHistory(self.history.dims, self.history.lengths).restart(frame[None])[0].astype(np.float32)
        return self.history.peek(frame[None])[0].astype(np.float32)

    def step(self, signals: dict[str, Any]) -> np.ndarray:
        """One control step: joint position targets (policy joint order)."""
        return self.targets(self.policy(self.observation(signals)))

    def targets(self, actions: np.ndarray) -> np.ndarray:
        """Policy actions -> clipped, filtered as training did -> joint position targets; remembers the
        applied actions for ``last_action`` (the filter's state)."""
        actions = np.array(actions, dtype=np.float64)  # a copy: it becomes the filters' state
        if self.action_clip is not None:
            actions = np.clip(actions, -self.action_clip, self.action_clip)
        actions = self.filter(actions, self.last_action, self.action_before)
        self.action_before, self.last_action = self.last_action, actions
        offsets = np.zeros(len(self.joint_names))
        offsets[self.action_index] = actions
        return self.rest_targets + self.action_scale * offsets
