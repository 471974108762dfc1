"""The deploy node: robot state in, joint commands out, at a fixed rate, behind a safety state machine.

Transport-neutral: it speaks :mod:`ctrl_rl.deploy.messages` through a
:class:`~ctrl_rl.deploy.transports.Transport` (plain DDS or rclpy), so the same core runs on a
ROS 2 robot, on a robot without ROS, and against the sim2sim bridge in CI.

Per tick: read (snapshot of the latest messages) -> obs (the bundle's observation terms) ->
inference (onnxruntime) -> action (targets, safety command) -> publish. Each stage is timed.
Numpy + onnxruntime only.
"""

from __future__ import annotations

import gc
import json
import logging
import math
import os
import sys
import threading
import time
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
from ctrl_rl.robots.terms import projected_gravity

from . import messages as m
from .recorder import EpisodeRecorder, episode_end
from .robot_policy import RobotPolicy, joint_index_map
from .safety import Mode, SafetyConfig, SafetyStateMachine, find_fault
from .stats import LatencyStats, LoopTimer

log = logging.getLogger("ctrl_rl.deploy.node")

STAGES = ("read", "obs", "inference", "action", "publish")
COMMAND_FORMATS = ("position", "position_gains")


@dataclass
class NodeParams:
    """ROS 2 parameters of ``ctrl_rl_node`` (see configs/deploy/node.yaml for a params file)."""

    bundle: str = ""
    """Path of ``exported/policy.onnx``."""
    rate_hz: float = 0.0
    """Control loop rate; 0 = the bundle's training rate (1 / control_dt)."""
    joint_states_topic: str = "joint_states"
    imu_topic: str = "imu/data"
    cmd_vel_topic: str = "cmd_vel"
    """``geometry_msgs/Twist`` velocity command (linear.x, linear.y, angular.z)."""
    estop_topic: str = "estop"
    """``std_msgs/Bool``: true -> damping, latched."""
    start_topic: str = "ctrl_rl/start"
    """``std_msgs/Bool``: true -> stand up (from passive, or after a fault)."""
    joint_command_topic: str = "joint_commands"
    """``std_msgs/Float64MultiArray`` out (e.g. ``forward_position_controller/commands``)."""
    command_format: str = "position"
    """``position``: targets only (ros2_control forward command controller; the robot's own gains
    apply, so passive/damping become a hold of the measured pose). ``position_gains``: a
    ``[3, n]`` array of target, kp, kd rows (layout dims ``field``, ``joint``): true damping."""
    command_joint_names: list[str] = field(default_factory=list)
    """Joint order of the outgoing array (the controller's ``joints``); empty = the bundle's order."""
    realtime_priority: int = 0
    """SCHED_FIFO priority (1-99) of the control thread, as robot control loops run; 0 = normal
    scheduling. Needs root or an rtprio limit (``ulimit -r``); refused with a warning otherwise."""
    status_topic: str = "ctrl_rl/status"
    """``std_msgs/String`` JSON: mode, fault, counters, latency percentiles (2 Hz and on change)."""
    record_dir: str = ""
    """Write one robot log (HDF5: the observations the policy consumed, its raw actions, timestamps,
    raw signals; ``ctrl_rl.storage.robot_log``) per policy-mode episode into this directory, for
    offline RL on robot data; "" = off (no cost). Needs h5py. Written off the control thread."""
    safety: SafetyConfig = field(default_factory=SafetyConfig)

    def __post_init__(self) -> None:
        if isinstance(self.safety, dict):
            self.safety = SafetyConfig.from_dict(self.safety)
        if self.command_format not in COMMAND_FORMATS:
            raise ValueError(f"command_format must be one of {COMMAND_FORMATS}, got '{self.command_format}'")
        if not 0 <= self.realtime_priority <= 99:
            raise ValueError("realtime_priority must be 0 (off) or a SCHED_FIFO priority 1-99, "
                             f"got {self.realtime_priority}")
        if not (self.rate_hz >= 0 and math.isfinite(self.rate_hz)):
            raise ValueError(f"rate_hz must be >= 0 (0 = the bundle's rate), got {self.rate_hz}")

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> NodeParams:
        """From nested (``safety: {...}``) or ROS-flat (``safety.state_timeout``) keys."""
        nested: dict[str, Any] = {}
        for key, v in values.items():
            head, _, rest = key.partition(".")
            if rest:
                nested.setdefault(head, {})[rest] = v
            else:
                nested[key] = v
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(nested) - known)
        if unknown:
            raise ValueError(f"unknown node parameter(s) {unknown}; known: {sorted(known)}")
        return cls(**nested)

    @classmethod
    def from_yaml(cls, path: str | Path, node_name: str = "ctrl_rl_node") -> NodeParams:
        """A ROS 2 params file (``<node>: {ros__parameters: {...}}`` or ``/**``) or a plain mapping."""
        import yaml

        data = yaml.safe_load(Path(path).read_text()) or {}
        for key in (node_name, f"/{node_name}", "/**"):
            if isinstance(data.get(key), dict) and "ros__parameters" in data[key]:
                return cls.from_dict(data[key]["ros__parameters"])
        return cls.from_dict(data)

    def flat(self) -> dict[str, Any]:
        """ROS-style flat parameters (``safety.state_timeout``), for declaring them on a node."""
        out: dict[str, Any] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, SafetyConfig):
                out.update({f"safety.{g.name}": getattr(v, g.name) for g in fields(v)})
            else:
                out[f.name] = v
        return out


def set_realtime_priority(priority: int) -> bool:
    """SCHED_FIFO for the calling thread (Linux applies it per thread); False, with a warning, if refused."""
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
    except (AttributeError, PermissionError, OSError) as e:
        log.warning("realtime_priority %d refused (%s): running with normal scheduling; "
                    "run as root or raise `ulimit -r`", priority, e)
        return False
    log.info("control thread runs SCHED_FIFO priority %d", priority)
    return True


class MalformedMessage(ValueError):
    """A message that must never reach the actuators (wrong lengths, NaN, missing joints)."""


class DeployNode:
    """Subscriptions, the fixed-rate loop and the status publisher around one :class:`RobotPolicy`."""

    def __init__(self, params: NodeParams, transport: Any, policy: RobotPolicy | None = None) -> None:
        self.params = params
        self.transport = transport
        self.policy = policy or RobotPolicy(params.bundle)
        p = self.policy
        n = len(p.joint_names)
        self.rate_hz = params.rate_hz or 1.0 / p.control_dt
        limits = p.policy.metadata.get("joint_limits")
        self.joint_limits = None if limits is None else np.asarray(limits, dtype=np.float64).reshape(n, 2)
        ranges = (p.policy.metadata.get("command") or {}).get("ranges")
        self.command_ranges = None if ranges is None else np.asarray(ranges, dtype=np.float64)
        out_names = params.command_joint_names or p.joint_names
        self.out_index = joint_index_map(out_names, p.joint_names)  # policy-order values -> output order
        self.safety_cfg = params.safety.resolved(1.0 / self.rate_hz)
        self.safety = SafetyStateMachine(self.safety_cfg, p.default_pose, p.kp, p.kd)
        self.latency = LatencyStats(STAGES)
        self.timer = LoopTimer(1.0 / self.rate_hz)
        self.counters = {"joint_state": 0, "imu": 0, "cmd_vel": 0, "rejected": 0, "published": 0}
        self.last_rejection = ""
        self.max_state_age = 0.0
        """Largest robot-state age (s) seen at a tick while the node was not passive: how close
        the driver's stream came to ``safety.state_timeout`` (reported in :meth:`status`)."""
        self._lock = threading.Lock()
        self._joints: tuple[np.ndarray, np.ndarray, float] | None = None  # pos, vel (policy order), t
        self._imu: tuple[np.ndarray, np.ndarray, float] | None = None  # quat wxyz, gyro, t
        self._cmd: tuple[np.ndarray, float] | None = None
        self._map_cache: tuple[tuple[str, ...], np.ndarray] | None = None
        self._malformed: str | None = None
        self._estop = False
        self._last_status = -1.0
        self._stop = threading.Event()
        self.log_period = 10.0
        """Seconds between latency log lines."""
        self.recorder = None if not params.record_dir else EpisodeRecorder(params.record_dir, self._log_attrs())
        """Episode recording (``record_dir``); None = off."""
        self._publish_cmd = transport.publisher(params.joint_command_topic, m.Float64MultiArray)
        self._publish_status = transport.publisher(params.status_topic, m.String)
        # Robot state: best effort (a lost sample is skipped; reliable delivery would hold every later
        # sample back until a lost one is repaired, and the watchdog would see stale state).
        transport.subscribe(params.joint_states_topic, m.JointState, self._on_joint_state, sensor=True)
        transport.subscribe(params.imu_topic, m.Imu, self._on_imu, sensor=True)
        transport.subscribe(params.cmd_vel_topic, m.Twist, self._on_cmd_vel)
        transport.subscribe(params.estop_topic, m.Bool, self._on_estop)
        transport.subscribe(params.start_topic, m.Bool, self._on_start)

    # -- subscriptions (transport threads): validate, store, return -------------------------------
    def _reject(self, what: str) -> None:
        if what != self.last_rejection:  # once per kind of problem, not 500 times a second
            log.error("rejected: %s", what)
        with self._lock:
            self.counters["rejected"] += 1
            self.last_rejection = what
            self._malformed = what

    def _on_joint_state(self, msg: m.JointState) -> None:
        try:
            names = tuple(msg.name)
            if self._map_cache is None or self._map_cache[0] != names:
                try:
                    self._map_cache = (names, joint_index_map(self.policy.joint_names, names))
                except ValueError as e:
                    raise MalformedMessage(f"JointState refused: {e}") from None
            idx = self._map_cache[1]
            n = len(names)
            if len(msg.position) != n or len(msg.velocity) != n:
                raise MalformedMessage(f"JointState has {n} names but {len(msg.position)} positions and "
                                       f"{len(msg.velocity)} velocities")
            pos = np.asarray(msg.position, dtype=np.float64)[idx]
            vel = np.asarray(msg.velocity, dtype=np.float64)[idx]
            if not (np.all(np.isfinite(pos)) and np.all(np.isfinite(vel))):
                raise MalformedMessage("JointState contains NaN/inf")
        except MalformedMessage as e:
            self._reject(str(e))
            return
        with self._lock:
            self._joints = (pos, vel, time.monotonic())
            self.counters["joint_state"] += 1

    def _on_imu(self, msg: m.Imu) -> None:
        q = np.asarray(msg.orientation, dtype=np.float64)
        w = np.asarray(msg.angular_velocity, dtype=np.float64)
        if q.shape != (4,) or w.shape != (3,) or not (np.all(np.isfinite(q)) and np.all(np.isfinite(w))):
            self._reject("Imu malformed or NaN/inf")
            return
        norm = float(np.linalg.norm(q))
        if abs(norm - 1.0) > 0.05:
            self._reject(f"Imu orientation is not a unit quaternion (norm {norm:.3f})")
            return
        with self._lock:
            self._imu = (q / norm, w, time.monotonic())
            self.counters["imu"] += 1

    def _on_cmd_vel(self, msg: m.Twist) -> None:
        cmd = np.array([msg.linear[0], msg.linear[1], msg.angular[2]], dtype=np.float64)
        if not np.all(np.isfinite(cmd)):
            self._reject("Twist contains NaN/inf")
            return
        if self.command_ranges is not None:  # the policy never saw commands beyond its training ranges
            cmd = np.clip(cmd, self.command_ranges[:, 0], self.command_ranges[:, 1])
        with self._lock:
            self._cmd = (cmd, time.monotonic())
            self.counters["cmd_vel"] += 1

    def _on_estop(self, msg: m.Bool) -> None:
        if msg.data:
            with self._lock:
                self._estop = True

    def _on_start(self, msg: m.Bool) -> None:
        if msg.data:
            with self._lock:
                self._estop = False
                self._malformed = None
            self.safety.request_start()

    # -- the loop ---------------------------------------------------------------------------------
    def tick(self) -> Mode:
        """One control period: read, check, infer (in policy mode), command, publish."""
        lat = self.latency
        t0 = time.perf_counter_ns()
        now = time.monotonic()
        with self._lock:
            joints, imu, cmd, estop = self._joints, self._imu, self._cmd, self._estop
            malformed, self._malformed = self._malformed, None
        pos = vel = grav = gyro = None
        state_age = math.inf
        if joints is not None and imu is not None:
            pos, vel = joints[0], joints[1]
            gyro = imu[1]
            grav = projected_gravity({"imu_quat": imu[0]})
            state_age = now - min(joints[2], imu[2])
        cmd_age = None if cmd is None else now - cmd[1]
        if estop:
            fault: str | None = "e-stop message received"
        elif malformed is not None:
            fault = f"malformed input: {malformed}"
        else:
            fault = find_fault(self.safety_cfg, pos, vel, grav, gyro, state_age, cmd_age, self.joint_limits,
                               need_command=self.safety.mode == Mode.POLICY)
        before = self.safety.mode
        if before in (Mode.STAND_UP, Mode.POLICY) and state_age != math.inf:
            self.max_state_age = max(self.max_state_age, state_age)
        mode = self.safety.tick(now, fault, pos)
        if mode != before:
            log.warning("mode %s -> %s (%s)", before.value, mode.value, self.safety.transitions[-1][2])
            if mode == Mode.POLICY:
                self.policy.reset()
        t1 = time.perf_counter_ns()
        lat.add("read", t1 - t0)
        targets = obs = actions = signals = None
        if mode == Mode.POLICY:
            signals = self._signals(joints, imu, cmd)
            obs = self.policy.observation(signals)
            t2 = time.perf_counter_ns()
            actions = self.policy.policy(obs)
            t3 = time.perf_counter_ns()
            targets = self.policy.targets(actions)
            lat.add("obs", t2 - t1)
            lat.add("inference", t3 - t2)
            t1 = t3
        out = self.safety.command(now, targets)
        data = self._pack(out.position, out.kp, out.kd)
        t4 = time.perf_counter_ns()
        lat.add("action", t4 - t1)
        if np.all(np.isfinite(data.data)):  # belt and braces: nothing non-finite reaches the actuators
            self._publish_cmd(data)
            self.counters["published"] += 1
        lat.add("publish", time.perf_counter_ns() - t4)
        if self.recorder is not None:  # after the command is out: recording never delays it
            if obs is not None:
                self.recorder.step(obs, actions, now, {**signals, "projected_gravity": grav, "state_age": state_age})
            elif before == Mode.POLICY and self.recorder.active:  # leaving policy mode ends the episode
                self._end_episode(now, *episode_end(self.safety.fault), joints, imu, cmd)
        if mode != before or now - self._last_status >= 0.5:
            self.publish_status()
        return mode

    @staticmethod
    def _signals(joints: tuple, imu: tuple, cmd: tuple | None) -> dict[str, np.ndarray]:
        """The robot signals of the observation terms (policy joint order)."""
        command = cmd[0] if cmd is not None else np.zeros(3)
        return {"imu_quat": imu[0], "imu_gyro": imu[1], "joint_pos": joints[0], "joint_vel": joints[1],
                "command": command}

    def _log_attrs(self) -> dict[str, Any]:
        meta = self.policy.policy.metadata
        return {"bundle": str(Path(self.params.bundle).resolve()) if self.params.bundle else "",
                "rate_hz": self.rate_hz, "joint_names": list(self.policy.joint_names),
                "obs_terms": meta.get("obs_terms", []), "command_format": self.params.command_format,
                **{k: meta[k] for k in ("task", "robot", "config_hash", "control_dt", "action_scale") if k in meta}}

    def _end_episode(self, now: float, end: str, terminal: bool, joints: tuple, imu: tuple, cmd: tuple | None) -> None:
        """Close the recorded episode with the observation after its last action, from the latest
        signals (the one the next policy tick would have consumed)."""
        signals = self._signals(joints, imu, cmd)
        obs = self.policy.observation(signals)
        grav = projected_gravity({"imu_quat": imu[0]})
        age = now - min(joints[2], imu[2])
        self.recorder.end(obs, end, terminal, now, {**signals, "projected_gravity": grav, "state_age": age})

    def _pack(self, position: np.ndarray, kp: np.ndarray, kd: np.ndarray) -> m.Float64MultiArray:
        idx, n = self.out_index, len(self.out_index)
        if self.params.command_format == "position":
            return m.Float64MultiArray(position[idx].copy(), [("joint", n, 1)])
        return m.Float64MultiArray(np.concatenate([position[idx], kp[idx], kd[idx]]),
                                   [("field", 3, 3 * n), ("joint", n, 1)])

    def status(self) -> dict[str, Any]:
        return {"mode": self.safety.mode.value, "fault": self.safety.fault, **self.counters,
                "last_rejection": self.last_rejection, "ticks": self.timer.ticks,
                "deadline_misses": self.timer.misses, "rate_hz": self.rate_hz,
                "max_state_age_ms": round(self.max_state_age * 1e3, 2),
                "latency_us": self.latency.summary(), "period_error_ms": self.timer.summary(),
                "recording": self.recorder.status() if self.recorder is not None else None}

    def publish_status(self) -> None:
        self._last_status = time.monotonic()
        self._publish_status(m.String(json.dumps(self.status())))

    def run(self, duration: float | None = None) -> dict[str, Any]:
        """Tick at ``rate_hz`` until :meth:`stop` (or ``duration`` seconds); returns the final status."""
        log.info("ctrl_rl node: %s at %.0f Hz, %d joints, command format %s", self.params.bundle or "policy",
                 self.rate_hz, len(self.policy.joint_names), self.params.command_format)
        end = math.inf if duration is None else time.perf_counter() + duration
        # Transport callbacks run on other threads; with CPython's default 5 ms GIL switch interval
        # a waking control thread can wait that long for them. 0.1 ms keeps the period error small.
        sys.setswitchinterval(1e-4)
        gc.freeze()  # the bundle, session and buffers are never scanned again: short GC pauses
        if self.params.realtime_priority:
            set_realtime_priority(self.params.realtime_priority)
        self.timer.start()
        next_log = time.monotonic() + self.log_period
        try:
            while not self._stop.is_set() and time.perf_counter() < end:
                self.tick()
                if time.monotonic() >= next_log:
                    next_log += self.log_period
                    self._log_latency()
                self.timer.wait()
        finally:  # Ctrl-C included: the open episode ends "stopped" and every episode reaches the disk
            if self.recorder is not None:
                self._stop_recording()
        self.publish_status()
        return self.status()

    def _stop_recording(self) -> None:
        if self.recorder.active:
            with self._lock:
                joints, imu, cmd = self._joints, self._imu, self._cmd
            self._end_episode(time.monotonic(), "stopped", False, joints, imu, cmd)
        self.recorder.flush()

    def _log_latency(self) -> None:
        lat = self.latency.summary()
        stages = "  ".join(f"{k} {v['p50']:.0f}/{v['p99']:.0f}" for k, v in lat.items())
        err = self.timer.summary()
        log.info("mode %s | us p50/p99: %s | period err p99 %.2f ms, %d deadline misses in %d ticks",
                 self.safety.mode.value, stages, err.get("p99", float("nan")), self.timer.misses, self.timer.ticks)

    def stop(self) -> None:
        self._stop.set()
