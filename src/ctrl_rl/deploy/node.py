"""The deploy node: robot state in, joint commands out, at a fixed rate, behind a safety state machine.

What it guarantees (docs/deploy.md lists the test of each):

1. Nothing is published before a valid robot state has been read (no pose to hold before one).
2. A rejected message (malformed, non-finite, out of range, badly stamped) changes no state
   that feeds a command: callbacks validate completely before they store anything (``node_inputs.py``).
3. Every published command is finite and each target lies within the bundle's joint limits
   (and, with torque limits, within what they allow at the measured state); clamps are counted.
4. A non-finite policy output is a fault: damping in that same tick, named in the status.
5. Stale state, an e-stop, a lifecycle deactivate or a stop end in damping; damping latches.
6. A bundle that observes ``height_scan`` needs a fresh, checked height map (``height_map.py``):
   without one the node does not stand up, and one that goes stale ends in damping.
7. Nothing with stiffness (kp > 0) or a target other than the measured pose goes out before an
   operator's start message (``safety.auto_start`` false, the default; sim2sim turns it on).
8. An arm bundle's policy commands keep its end effector inside the workspace box (``arm_node.py``).
9. An arm bundle that observes an object needs a fresh, checked object pose in its frame (``arm_node.py``):
   without one the node does not stand up, and one that goes stale ends in damping. A lift bundle also needs
   a finite target height (clipped into its training range) before it stands up.

Transport-neutral: it speaks :mod:`ctrl_rl.deploy.messages` through a
:class:`~ctrl_rl.deploy.transports.Transport` (plain DDS or rclpy), so the same core runs on a
ROS 2 robot, on a robot without ROS, and against the sim2sim bridge in CI.

Per tick: read (snapshot of the latest accepted messages, :class:`NodeInputs`) -> obs (the bundle's
observation terms) -> inference (onnxruntime) -> action (targets, safety command) -> publish. Each
stage is timed.
Numpy + onnxruntime only.
"""

from __future__ import annotations

import gc
import json
import logging
import math
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from ctrl_rl.robots.terms import projected_gravity

from . import messages as m
from .arm_node import ArmSide, is_arm_bundle
from .height_map import HeightMapSpec
from .node_inputs import MalformedMessage, NodeInputs
from .node_params import COMMAND_FORMATS, NodeParams, TopicQos
from .recorder import EpisodeRecorder, episode_end
from .robot_policy import RobotPolicy, joint_index_map
from .safety import OPERATOR_STOPS, Mode, SafetyConfig, SafetyStateMachine, find_fault
from .stats import LatencyStats, LoopTimer, set_realtime_priority

__all__ = ["COMMAND_FORMATS", "DeployNode", "MalformedMessage", "NodeParams", "set_realtime_priority"]

log = logging.getLogger("ctrl_rl.deploy.node")

STAGES = ("read", "obs", "inference", "action", "publish")
STATUS_QOS = TopicQos("reliable", 1, "transient_local")
"""Status and ``/diagnostics``: a late subscriber (``ros2 topic echo``, a monitor) gets the current one."""


class DeployNode:
    """Subscriptions, the fixed-rate loop and the status publisher around one :class:`RobotPolicy`.

    ``enabled=False`` (a lifecycle node before ``activate``) ticks and reports status but
    publishes no command until :meth:`activate`.
    """

    def __init__(self, params: NodeParams, transport: Any, policy: RobotPolicy | None = None,
                 enabled: bool = True) -> None:
        self.params = params
        self.transport = transport
        self.policy = policy or RobotPolicy(params.bundle, params.sources())
        p = self.policy
        self.height_map = HeightMapSpec.from_metadata(p.policy.metadata)
        """The scan the policy observes (None: a bundle without ``height_scan``, no subscription)."""
        n = len(p.joint_names)
        self.rate_hz = params.rate_hz or 1.0 / p.control_dt
        meta = p.policy.metadata
        self.arm = ArmSide(meta, p.joint_names, p.default_pose, params.safety.workspace_margin) \
            if is_arm_bundle(meta) else None
        """An arm bundle's pose command and workspace guard (None: a legged robot's bundle)."""
        limits = meta.get("joint_limits")
        self.joint_limits = None if limits is None else np.asarray(limits, dtype=np.float64).reshape(n, 2)
        torque = meta.get("torque_limits")
        self.torque_limits = None if torque is None else np.asarray(torque, dtype=np.float64)
        ranges = (meta.get("command") or {}).get("ranges")
        self.command_ranges = None if ranges is None else np.asarray(ranges, dtype=np.float64)
        out_names = params.command_joint_names or p.joint_names
        if sorted(out_names) != sorted(p.joint_names):
            extra = sorted(set(out_names) - set(p.joint_names))
            missing = [j for j in p.joint_names if j not in out_names]
            raise ValueError(f"command_joint_names must name exactly the bundle's joints: unknown {extra}, "
                             f"missing {missing}; the bundle drives {p.joint_names}")
        self.out_index = joint_index_map(out_names, p.joint_names)  # policy-order values -> output order
        self.stand_up_stiffness = float(meta.get("stand_up_stiffness", 1.0))  # the robot YAML's, via the bundle
        self.safety_cfg = params.safety.resolved(1.0 / self.rate_hz, self.stand_up_stiffness)
        self.safety = SafetyStateMachine(self.safety_cfg, p.rest_targets, p.kp, p.kd,
                                         self.joint_limits, self.torque_limits)
        self.latency = LatencyStats(STAGES)
        self.timer = LoopTimer(1.0 / self.rate_hz)
        self.counters = {"joint_state": 0, "imu": 0, "cmd_vel": 0, "height_map": 0, "rejected": 0, "published": 0,
                         "clamped": 0, "policy_faults": 0, "policy_ticks": 0}
        """``clamped``: commands in which :func:`~ctrl_rl.deploy.safety.clamp_targets` moved a target that a
        stiffness acts on (stand-up, policy; passive and damping targets, at kp 0, are clamped but not counted)."""
        topics = {**({"height_scan": params.height_map_topic} if self.height_map is not None else {}),
                  **({"object_pose": params.object_pose_topic} if self.arm is not None and self.arm.observes_object
                     else {}),
                  **({"lift_command": params.lift_command_topic} if self.arm is not None and self.arm.lift_range
                     else {})}
        self.inputs = NodeInputs(p.joint_names, self.safety_cfg, self.joint_limits, self.command_ranges, self.arm,
                                 self.height_map, self.counters, topics)
        """The latest accepted messages (the subscriptions check and store them) and the operator's hold."""
        self.last_clamp = ""
        self.max_state_age = 0.0
        """Largest robot-state age (s) seen at a tick while the node was not passive: how close
        the driver's stream came to ``safety.state_timeout`` (reported in :meth:`status`)."""
        self.enabled = enabled
        self.mode_at_stop: str | None = None
        """The mode the loop was in when it was stopped (then it sends one damping command)."""
        self.waiting: str | None = None
        """In passive: what keeps the node from standing up (no state yet, no height map, an
        operator's start)."""
        self._last_status = -1.0
        self._stop = threading.Event()
        self._stop_reason = "stopped"
        resolve = getattr(transport, "resolve", None)  # the real transports have it; a test's fake may not
        self.start_topic = resolve(params.start_topic) if resolve is not None else params.start_topic
        """The start topic's full ROS name, as an operator publishes on it."""
        self.log_period = 10.0
        """Seconds between latency log lines."""
        self.recorder = None if not params.record_dir else EpisodeRecorder(params.record_dir, self._log_attrs())
        """Episode recording (``record_dir``); None = off."""
        q = params.qos
        self._publish_cmd = transport.publisher(params.joint_command_topic, m.Float64MultiArray, qos=q.joint_commands)
        self._publish_status = transport.publisher(params.status_topic, m.String, qos=STATUS_QOS)
        self._publish_diag = (transport.publisher(params.diagnostics_topic, m.DiagnosticArray, qos=STATUS_QOS)
                              if params.diagnostics_topic else None)
        inputs = self.inputs
        transport.subscribe(params.joint_states_topic, m.JointState, inputs.on_joint_state, qos=q.joint_states)
        if self.arm is None:
            transport.subscribe(params.imu_topic, m.Imu, inputs.on_imu, qos=q.imu)
            transport.subscribe(params.cmd_vel_topic, m.Twist, inputs.on_cmd_vel, qos=q.cmd_vel)
        else:  # an arm: no IMU, and a pose target in place of a velocity command
            self.counters["pose_command"] = 0
            transport.subscribe(params.pose_command_topic, m.PoseStamped, inputs.on_pose_command,
                                qos=q.pose_command)
            if self.arm.observes_object:
                self.counters["object_pose"] = 0
                transport.subscribe(params.object_pose_topic, m.PoseStamped, inputs.on_object_pose,
                                    qos=q.object_pose)
            if self.arm.lift_range is not None:
                self.counters["lift_command"] = 0
                transport.subscribe(params.lift_command_topic, m.Float64, inputs.on_lift_command,
                                    qos=q.lift_command)
        transport.subscribe(params.estop_topic, m.Bool, inputs.on_estop, qos=q.estop)
        transport.subscribe(params.start_topic, m.Bool, self._on_start, qos=q.start)
        if self.height_map is not None:
            transport.subscribe(params.height_map_topic, m.Float64MultiArray, inputs.on_height_map, qos=q.height_map)

    def _on_start(self, msg: m.Bool) -> None:
        if msg.data:
            self.start()

    def start(self) -> None:
        """The operator's start (a start message): clear a latched hold and stand up."""
        self.inputs.clear_for_start()
        self.safety.request_start()

    def apply_safety(self, cfg: SafetyConfig) -> None:
        """New watchdog limits (``ros2 param set``), in force from the next tick."""
        resolved = cfg.resolved(1.0 / self.rate_hz, self.stand_up_stiffness)
        self.safety.cfg = resolved
        self.safety_cfg = resolved
        self.inputs.safety_cfg = resolved
        log.info("safety parameters now %s", resolved)

    # -- lifecycle (rclpy managed node) -------------------------------------------------------------
    def activate(self) -> None:
        """Commands on; stand up now if ``safety.auto_start`` (else on a start message)."""
        self.inputs.set_hold(None)
        self.enabled = True
        if self.params.safety.auto_start:
            self.safety.request_start()
        else:
            self._log_start_hint()

    def _log_start_hint(self) -> None:
        topic = self.start_topic
        log.info("waiting for an operator's start (safety.auto_start is false): publish std_msgs/Bool true on %s, "
                 "e.g. ros2 topic pub -1 %s std_msgs/msg/Bool \"{data: true}\"", topic, topic)

    def deactivate(self) -> None:
        """Damping (latched) until the next activate or start."""
        self.inputs.set_hold("deactivated (lifecycle)")

    # -- the loop ---------------------------------------------------------------------------------
    def tick(self) -> Mode:
        """One control period: read, check, infer (in policy mode), command, publish."""
        lat = self.latency
        t0 = time.perf_counter_ns()
        now = time.monotonic()
        joints, imu, cmd, hold, sources, malformed = self.inputs.take()
        pos = vel = grav = gyro = None
        state_age = math.inf
        if joints is not None and imu is not None:
            pos, vel = joints[0], joints[1]
            gyro = imu[1]
            grav = projected_gravity({"imu_quat": imu[0]})
            state_age = now - min(joints[2], imu[2])
        cmd_age = None if cmd is None else now - cmd[1]
        if hold is not None:
            fault: str | None = hold
        elif not self.enabled:  # an inactive lifecycle node waits in passive (its start is kept for activate)
            fault = "not active (lifecycle)"
        elif malformed is not None:
            fault = f"malformed input: {malformed}"
        else:
            fault = find_fault(self.safety_cfg, pos, vel, grav, gyro, state_age, cmd_age, self.joint_limits,
                               need_command=self.safety.mode == Mode.POLICY and self.arm is None) \
                or self.inputs.source_fault(sources, now)
        before = self.safety.mode
        if before in (Mode.STAND_UP, Mode.POLICY) and state_age != math.inf:
            self.max_state_age = max(self.max_state_age, state_age)
        # joints were checked by pose_fault before they were stored: a pose the machine may hold
        mode = self.safety.tick(now, fault, None if joints is None else joints[0],
                                latch_in_passive=hold is not None)
        if mode == Mode.PASSIVE:
            self.waiting = fault or f"an operator's start: std_msgs/Bool true on {self.start_topic}"
        else:
            self.waiting = None
        if mode != before and mode == Mode.POLICY:
            self.policy.reset()
        t1 = time.perf_counter_ns()
        lat.add("read", t1 - t0)
        targets = obs = actions = signals = None
        if mode == Mode.POLICY:
            self.counters["policy_ticks"] += 1
            signals = self.inputs.signals(joints, imu, cmd, sources)
            obs = self.policy.observation(signals)
            t2 = time.perf_counter_ns()
            actions = self.policy.policy(obs)
            t3 = time.perf_counter_ns()
            lat.add("obs", t2 - t1)
            lat.add("inference", t3 - t2)
            t1 = t3
            if np.all(np.isfinite(actions)):
                targets = self.policy.targets(actions)
            else:  # a fault like non-finite sensor data: damping in this very tick
                self.counters["policy_faults"] += 1
                bad = np.flatnonzero(~np.isfinite(actions)).tolist()
                mode = self.safety.trip(now, f"policy output non-finite (action index {bad[:4]})")
                obs = None
        if mode != before:  # a fault (-> damping) is a warning; stand-up, policy, reset and a stop are the plan
            reason = self.safety.transitions[-1][2]
            fault = mode is Mode.DAMPING and self.safety.fault is not None
            (log.warning if fault else log.info)("mode %s -> %s (%s)", before.value, mode.value, reason)
        out = self.safety.command(now, targets, None if joints is None else joints[1])
        if self.arm is not None and mode == Mode.POLICY:
            out, mode = self._keep_in_workspace(out, now, joints)
        t4 = time.perf_counter_ns()
        lat.add("action", t4 - t1)
        if out is not None and self.enabled:
            self._send(out, mode)
        lat.add("publish", time.perf_counter_ns() - t4)
        if self.recorder is not None:  # after the command is out: recording never delays it
            if obs is not None:
                self.recorder.step(obs, actions, now, {**signals, "projected_gravity": grav, "state_age": state_age})
            elif before == Mode.POLICY and self.recorder.active:  # leaving policy mode ends the episode
                self._end_episode(now, *episode_end(self.safety.fault or self.safety.stop), joints, imu, cmd,
                                  sources)
        if mode != before or now - self._last_status >= 0.5:
            self.publish_status()
        return mode

    def _keep_in_workspace(self, out: Any, now: float, joints: tuple) -> tuple[Any, Mode]:
        """An arm's policy command, its target moved inside the workspace box (``ArmSide.guard``); a fault
        where that cannot be done (the measured end effector is outside)."""
        torque = self.safety.torque_limits if self.safety_cfg.torque_clamp else None
        guarded = self.arm.guard(out, self.joint_limits, torque, joints[0], joints[1])
        if guarded is not None:
            return guarded, Mode.POLICY
        mode = self.safety.trip(now, f"workspace: {self.arm.last_hold}")
        log.warning("mode policy -> %s (%s)", mode.value, self.safety.transitions[-1][2])
        return self.safety.command(now, None, joints[1]), mode

    def _send(self, out: Any, mode: Mode) -> None:
        """Publish one command (see the guarantees at the top); returns without publishing when
        ``passive_output: none`` asks for silence in passive/damping with position commands."""
        if (self.params.command_format == "position" and self.params.passive_output == "none"
                and mode in (Mode.PASSIVE, Mode.DAMPING)):
            return
        data = self._pack(out.position, out.kp, out.kd)
        if not np.all(np.isfinite(data.data)):  # unreachable by construction; never let it through
            log.error("non-finite command withheld: %s", data.data)
            return
        if out.clamped:
            self.counters["clamped"] += 1
            self.last_clamp = f"{out.clamped} joint target(s) clamped in mode {mode.value}"
        self._publish_cmd(data)
        self.counters["published"] += 1

    def _log_attrs(self) -> dict[str, Any]:
        meta = self.policy.policy.metadata
        return {"bundle": str(Path(self.params.bundle).resolve()) if self.params.bundle else "",
                "rate_hz": self.rate_hz, "joint_names": list(self.policy.joint_names),
                "obs_terms": meta.get("obs_terms", []), "command_format": self.params.command_format,
                **{k: meta[k] for k in ("task", "robot", "config_hash", "control_dt", "action_scale") if k in meta}}

    def _end_episode(self, now: float, end: str, terminal: bool, joints: tuple, imu: tuple, cmd: tuple | None,
                     sources: dict[str, tuple]) -> None:
        """Close the recorded episode with the observation after its last action, from the latest
        signals (the one the next policy tick would have consumed)."""
        signals = self.inputs.signals(joints, imu, cmd, sources)
        obs = self.policy.peek_observation(signals)
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
        return {"mode": self.safety.mode.value, "fault": self.safety.fault, "stop": self.safety.stop,
                "mode_at_stop": self.mode_at_stop,
                "waiting": self.waiting, "enabled": self.enabled, **self.counters,
                "last_rejection": self.inputs.last_rejection, "last_clamp": self.last_clamp,
                "velocity_source": self.inputs.velocity_source,
                "state_clock": "header stamps" if self.safety_cfg.use_header_stamps else "arrival",
                "state_timeout_ms": round(self.safety_cfg.state_timeout * 1e3, 2),
                "ticks": self.timer.ticks, "deadline_misses": self.timer.misses, "rate_hz": self.rate_hz,
                "max_state_age_ms": round(self.max_state_age * 1e3, 2),
                "latency_us": self.latency.summary(), "period_error_ms": self.timer.summary(),
                "recording": self.recorder.status() if self.recorder is not None else None,
                **(self.arm.status() if self.arm is not None else {})}

    def diagnostics(self, status: dict[str, Any]) -> m.DiagnosticArray:
        """The status as one ``DiagnosticStatus``: OK running, WARN passive/not enabled/damping on an
        operator's stop, ERROR damping on a fault."""
        mode = status["mode"]
        level = (m.DiagnosticStatus.ERROR if mode == "damping" and status["fault"]
                 else m.DiagnosticStatus.WARN if mode in ("passive", "damping") or not self.enabled
                 else m.DiagnosticStatus.OK)
        why = status["fault"] or status["stop"] or status["waiting"]
        message = f"{mode}: {why}" if why else mode
        keys = ("mode", "fault", "stop", "waiting", "enabled", "joint_state", "imu", "cmd_vel", "height_map",
                "rejected", "last_rejection", "published", "clamped", "last_clamp", "policy_faults", "velocity_source",
                "state_clock", "state_timeout_ms", "max_state_age_ms", "ticks", "deadline_misses", "rate_hz")
        values = [(k, "" if status[k] is None else str(status[k])) for k in keys]
        return m.DiagnosticArray(time.time(), [m.DiagnosticStatus(level, "ctrl_rl_node: safety", message,
                                                                  self.policy.policy.metadata.get("robot", ""),
                                                                  values)])

    def publish_status(self) -> None:
        self._last_status = time.monotonic()
        status = self.status()
        self._publish_status(m.String(json.dumps(status)))
        if self._publish_diag is not None:
            self._publish_diag(self.diagnostics(status))

    def run(self, duration: float | None = None) -> dict[str, Any]:
        """Tick at ``rate_hz`` until :meth:`stop` (or ``duration`` seconds); returns the final status.
        On the way out the robot gets one damping command (the status's ``stop`` says why: the
        reason given to :meth:`stop`, or the duration's end; ``fault`` stays ``None`` unless one
        happened), then the final status."""
        log.info("ctrl_rl node: %s at %.0f Hz, %d joints, command format %s", self.params.bundle or "policy",
                 self.rate_hz, len(self.policy.joint_names), self.params.command_format)
        if self.enabled and not self.safety_cfg.auto_start:
            self._log_start_hint()
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
            self.mode_at_stop = self.safety.mode.value
            self._final_damping(self._stop_cause())
        self.publish_status()
        return self.status()

    def _stop_cause(self) -> str:
        """Why :meth:`run` ends (called in its ``finally``): an operator's stop (a reason in
        :data:`~ctrl_rl.deploy.safety.OPERATOR_STOPS`), or the error that ended the loop (a fault)."""
        error = sys.exc_info()[1]
        if isinstance(error, KeyboardInterrupt):
            return "stopped by KeyboardInterrupt (Ctrl-C)"
        if error is not None:
            return f"control loop error: {type(error).__name__}: {error}"
        return self._stop_reason if self._stop.is_set() else "stopped: the run's duration ended"

    def _final_damping(self, reason: str) -> None:
        """Leave the robot damped (or holding its measured pose), never on a policy target;
        ``reason`` becomes the status's ``stop`` (or, for a loop error, its ``fault``)."""
        self.inputs.set_hold(reason)
        try:
            self.tick()
        except Exception:  # the transport may already be gone (interpreter shutdown)
            log.exception("final damping command failed")

    def _stop_recording(self) -> None:
        if self.recorder.active:
            joints, imu, cmd, sources = self.inputs.latest()
            self._end_episode(time.monotonic(), "stopped", False, joints, imu, cmd, sources)
        self.recorder.flush()

    def _log_latency(self) -> None:
        lat = self.latency.summary()
        stages = "  ".join(f"{k} {v['p50']:.0f}/{v['p99']:.0f}" for k, v in lat.items())
        err = self.timer.summary()
        log.info("mode %s | us p50/p99: %s | period err p99 %.2f ms, %d deadline misses in %d ticks",
                 self.safety.mode.value, stages, err.get("p99", float("nan")), self.timer.misses, self.timer.ticks)

    def stop(self, reason: str = "stopped") -> None:
        """End :meth:`run` after this tick; ``reason`` (it starts with ``stopped``) is the status's
        ``stop``, e.g. ``stopped by signal (SIGTERM)``: an operator's stop, not a fault."""
        self._stop_reason = reason if reason.startswith(OPERATOR_STOPS) else f"stopped: {reason}"
        self._stop.set()
