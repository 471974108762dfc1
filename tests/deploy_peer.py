"""The robot side of a deploy node under test: a peer process that streams state, plays the operator and
checks every command the node sends (tests/deploy_fuzz.py's cases and tests/deploy_operator_start.py drive it).

:class:`Robot` publishes JointState + Imu at 200 Hz (with each state a height map and an arm's pose target
when the bundle has them), sends start messages while the node waits in passive, records the node's status
and diagnostics, and checks each command on arrival (the checks: tests/deploy_fuzz.py's docstring). Over
``unitree`` it is the robot's side of Unitree's protocol. :func:`stop_node` ends a run: SIGTERM to the node.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable

import numpy as np

os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
from ctrl_rl.deploy import messages as m  # noqa: E402
from ctrl_rl.deploy.arm_node import ArmSide, is_arm_bundle  # noqa: E402
from ctrl_rl.deploy.height_map import HeightMapSpec  # noqa: E402
from ctrl_rl.deploy.node_params import TopicQos  # noqa: E402
from ctrl_rl.deploy.safety import SafetyConfig  # noqa: E402
from ctrl_rl.deploy.transports import make_transport  # noqa: E402
from ctrl_rl.deploy.unitree_msgs import family_for  # noqa: E402

STATUS_QOS = TopicQos("reliable", 1, "transient_local")


class Robot:
    """The peer: a robot publishing state, an operator, and the checker of every command."""

    def __init__(self, transport_name: str, ns: str, meta: dict, command_format: str, family: str = "",
                 driver_order: list[str] | None = None) -> None:
        self.ns = ns
        self.names = list(meta["joint_names"])
        self.order = self.names[::-1] if driver_order is None else list(driver_order)
        """The driver's joint order (by default it differs from the policy's)."""
        unitree = None
        if transport_name == "unitree":  # this peer is the robot's side of the protocol
            unitree = {"family": family or family_for(str(meta.get("robot", "")), len(self.names)),
                       "joint_names": self.order, "side": "robot"}
        self.t = make_transport(transport_name, namespace=ns, node_name="fuzz_robot", unitree=unitree)
        self.limits = np.asarray(meta["joint_limits"], dtype=np.float64)[[self.names.index(j) for j in self.order]]
        if transport_name == "unitree":  # LowCmd carries float32: a target clamped to a limit rounds with it
            self.limits = self.limits.astype(np.float32).astype(np.float64)
        self.kp = np.asarray(meta["kp"], dtype=np.float64)[[self.names.index(j) for j in self.order]]
        self.pose = np.asarray(meta["default_pose"], dtype=np.float64)[[self.names.index(j) for j in self.order]]
        self.command_format = command_format
        self.pub_js = self.t.publisher("joint_states", m.JointState)
        self.pub_imu = self.t.publisher("imu/data", m.Imu)
        self.pub_estop = self.t.publisher("estop", m.Bool)
        self.pub_start = self.t.publisher("ctrl_rl/start", m.Bool)
        self.pub_cmd_vel = self.t.publisher("cmd_vel", m.Twist)
        self.scan = HeightMapSpec.from_metadata(meta)
        self.pub_map = None if self.scan is None else self.t.publisher("height_map", m.Float64MultiArray)
        self.map_sample: Callable[[], m.Float64MultiArray] | None = None if self.scan is None else self.flat_map
        """What the robot's terrain perception publishes with each state (None: nothing)."""
        self.arm = ArmSide(meta, self.names, np.asarray(meta["default_pose"], dtype=np.float64),
                           SafetyConfig().workspace_margin) if is_arm_bundle(meta) else None
        """An arm bundle's workspace box and forward kinematics: every stiff command's end effector is checked."""
        self.to_policy_order = np.array([self.order.index(j) for j in self.names])
        self.pub_pose = None if self.arm is None else self.t.publisher("pose_command", m.PoseStamped)
        self.pose_sample: Callable[[], m.PoseStamped] | None = None if self.arm is None else self.pose_target
        """What the arm's operator publishes as its end-effector target with each state (None: nothing)."""
        observes_object = self.arm is not None and self.arm.observes_object
        self.pub_object = self.t.publisher("object_pose", m.PoseStamped) if observes_object else None
        self.object_sample: Callable[[], m.PoseStamped] | None = self.socket_pose if observes_object else None
        """What the cell's object tracker publishes with each state (None: nothing)."""
        lifts = self.arm is not None and self.arm.lift_range is not None
        self.pub_lift = self.t.publisher("lift_command", m.Float64) if lifts else None
        self.lift_sample: Callable[[], m.Float64] | None = \
            (lambda: m.Float64(sum(self.arm.lift_range) / 2)) if lifts else None
        """What a lift cell's operator sends as the target height with each state (None: nothing)."""
        self.sent_pose = self.pose.copy()
        """The joint positions of the last JointState sent (driver order): a command may hold them."""
        self.first_valid_state: float | None = None
        self.operator = True
        """Send start messages while the node is passive and the state is valid (module docstring)."""
        self.received: list[tuple[float, np.ndarray]] | None = None
        """Every command as ``(arrival time, data)`` when set to a list (None: only counted)."""
        self.commands = 0
        self.unsafe: list[str] = []
        self.status: dict = {}
        self.diagnostics: list[m.DiagnosticArray] = []
        self.lock = threading.Lock()
        self.t.subscribe("joint_commands", m.Float64MultiArray, self._on_command)
        self.t.subscribe("ctrl_rl/status", m.String, self._on_status, qos=STATUS_QOS)
        self.t.subscribe("/diagnostics", m.DiagnosticArray, self.diagnostics.append, qos=STATUS_QOS)
        self.streaming = False
        self.sample_valid = True
        """Whether what :attr:`sample` makes is a valid robot state (commands may follow it)."""
        self.sample: Callable[[], tuple[m.JointState, m.Imu]] = self.healthy
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._stream, daemon=True)
        self._thread.start()

    # -- what the robot sends -------------------------------------------------------------------
    def healthy(self) -> tuple[m.JointState, m.Imu]:
        now = time.time()
        return (m.JointState(now, list(self.order), self.pose.copy(), np.zeros(len(self.order)), np.zeros(0)),
                m.Imu(now, np.array([1.0, 0.0, 0.0, 0.0]), np.zeros(3), np.array([0.0, 0.0, 9.81])))

    def pose_target(self, position: object = None, orientation: object = None, frame: str | None = None
                    ) -> m.PoseStamped:
        """An end-effector target: where the default pose holds it, in the bundle's command frame, unless told."""
        t = self.arm.default_target
        return m.PoseStamped(time.time(), np.asarray(t[:3] if position is None else position, dtype=np.float64),
                             np.asarray(t[3:] if orientation is None else orientation, dtype=np.float64),
                             self.arm.command_frame if frame is None else frame)

    def socket_pose(self) -> m.PoseStamped:
        """The object where an insert or lift episode may put it: at the middle of the workspace box, on the
        table."""
        centre = self.arm.targets.bounds.mean(axis=1)
        return m.PoseStamped(time.time(), np.array([centre[0], centre[1], 0.0]), np.array([1.0, 0.0, 0.0, 0.0]),
                             self.arm.object_frame)

    def flat_map(self) -> m.Float64MultiArray:
        """Flat ground under a robot standing at its training height: every clearance is the offset."""
        return self.scan.message(np.full(self.scan.size, self.scan.offset))

    def _stream(self) -> None:
        next_start = 0.0
        while not self._stop.is_set():
            if self.streaming:
                js, imu = self.sample()
                if self.sample_valid and self.first_valid_state is None:
                    self.first_valid_state = time.monotonic()
                if len(js.position) == len(self.order):
                    self.sent_pose = np.asarray(js.position, dtype=np.float64).copy()
                self.pub_js(js)
                self.pub_imu(imu)
                for publish, make in ((self.pub_map, self.map_sample), (self.pub_pose, self.pose_sample),
                                      (self.pub_object, self.object_sample), (self.pub_lift, self.lift_sample)):
                    if make is not None:
                        publish(make())
                now = time.monotonic()
                if self.operator and self.sample_valid and self.status.get("mode") == "passive" and now >= next_start:
                    self.pub_start(m.Bool(True))
                    next_start = now + 0.1
            time.sleep(0.005)

    def start_streaming(self) -> None:
        self.sample = self.healthy
        self.streaming = True

    # -- what the robot receives ----------------------------------------------------------------
    def _on_command(self, msg: m.Float64MultiArray) -> None:
        t = time.monotonic()
        d = np.asarray(msg.data, dtype=np.float64)
        n = len(self.order)
        problems = []
        if self.first_valid_state is None or t < self.first_valid_state:
            problems.append("command before any valid state")
        if not np.all(np.isfinite(d)):
            problems.append("non-finite command")
        expected = 3 * n if self.command_format == "position_gains" else n
        if d.size != expected:
            problems.append(f"{d.size} values, expected {expected}")
        else:
            q = d[:n]
            lo, hi = self.limits[:, 0] - 1e-9, self.limits[:, 1] + 1e-9
            if np.any((q < lo) | (q > hi)):
                problems.append(f"target beyond the joint limits: {q.round(3).tolist()}")
            problems += self._workspace_problems(q)
            if self.command_format == "position_gains":
                kp, kd = d[n:2 * n], d[2 * n:]
                if np.any(kp < 0) or np.any(kd < 0) or not np.all((kp == 0) | np.isclose(kp, self.kp)):
                    problems.append(f"gains out of range: kp {kp.tolist()} kd {kd.tolist()}")
        with self.lock:
            self.commands += 1
            self.unsafe += problems
            if self.received is not None:
                self.received.append((t, d))

    def _workspace_problems(self, q: np.ndarray) -> list[str]:
        """An arm's target (driver order) whose end effector is outside the node's workspace box, unless it
        holds the pose the robot last reported (passive, damping)."""
        if self.arm is None or not np.all(np.isfinite(q)) or np.allclose(q, self.sent_pose, atol=1e-6):
            return []
        ee = self.arm.chain.ee_pose(q[self.to_policy_order])[0]
        return [] if self.arm.box.contains(ee) else [f"end effector target outside the workspace box: {ee.round(3)}"]

    def _on_status(self, msg: m.String) -> None:
        self.status = json.loads(msg.data)

    def wait_status(self, ok: Callable[[dict], object], timeout: float = 15.0) -> bool:
        """Whether the node's latest status satisfies ``ok`` within ``timeout`` seconds."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if ok(self.status):
                return True
            time.sleep(0.01)
        return bool(ok(self.status))

    def wait_mode(self, mode: str, timeout: float = 15.0) -> bool:
        return self.wait_status(lambda s: s.get("mode") == mode, timeout)

    def to_policy(self) -> None:
        self.start_streaming()
        if not self.wait_mode("policy"):
            raise AssertionError(f"never reached policy mode: {self.status}")

    def send_js(self, pos=None, vel=None, names=None, stamp=None) -> None:
        names = list(self.order) if names is None else names
        pos = self.pose if pos is None else pos
        vel = np.zeros(len(names)) if vel is None else vel
        self.pub_js(m.JointState(time.time() if stamp is None else stamp, names, np.asarray(pos, float),
                                 np.asarray(vel, float), np.zeros(0)))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self.t.close()


def stop_node(node: subprocess.Popen, robot: Robot, timeout: float) -> tuple[str, str, bool]:
    """Stop streaming, SIGTERM the node and collect its output (killed after ``timeout`` s), close the robot
    side; returns ``(stdout, stderr, timed_out)``."""
    robot.streaming = False
    if node.poll() is None:
        node.send_signal(signal.SIGTERM)
    timed_out = False
    try:
        out, err = node.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        node.kill()
        out, err = node.communicate()
        timed_out = True
    robot.close()
    return out, err, timed_out
