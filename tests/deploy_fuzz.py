"""Fuzz the deploy node from a peer process, over either transport, and check every command it sends.

    python tests/deploy_fuzz.py BUNDLE_DIR --transport dds|rclpy|unitree [--cases a,b,...] [--bundle NAME]

``BUNDLE_DIR`` holds ``policy.onnx`` (a real exported ctrl_quad bundle) and the crafted bundles
``nan.onnx``, ``inf.onnx``, ``huge.onnx`` (the same policy with its output multiplied by NaN, inf
and 1e6: tests/bundles.py). Each case starts the node as a user does (``python -m ctrl_rl
deploy node``) in its own process and namespace; this process is the robot: it publishes
JointState + Imu at 200 Hz and whatever the case sends, and records every command and status. It
is the operator too: while the node waits in passive and the robot streams a valid state, it sends
a start message every 0.1 s (the node's default, ``safety.auto_start: false``, waits for one).

Checked on **every** command received, in every case: all values finite; every target within the
bundle's joint limits (in the command's joint order); with ``position_gains`` kp and kd finite,
>= 0 and each joint's kp either 0 or the bundle's; no command before the first valid robot state was sent.
After each case: the node process is alive; its status names the expected fault/rejection; on
SIGTERM it exits 0 and prints its final status. Prints ``case | result`` and ends with
``RESULT cases=… unsafe_commands=… crashes=…``.

Over ``unitree`` the peer plays the robot's side of Unitree's protocol (``LowState`` out, ``LowCmd`` in,
``transports/unitree.py``), every case runs with ``position_gains`` (LowCmd carries kp and kd), the cases
about a JointState's own structure (:data:`NOT_ON_UNITREE`) do not exist there, and two more do: a
LowState with a wrong CRC and one whose tick stops advancing.

An arm bundle in ``BUNDLE_DIR/policy.onnx`` (with its own crafted bundles) runs the cases an arm's node can
meet plus its own (tests/deploy_fuzz_arm.py); the peer then also publishes an end-effector pose target with
each state and checks that no target but the pose it reported puts the end effector outside the node's
workspace box (docs/deploy.md, "Arms").
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
from ctrl_rl.deploy import messages as m  # noqa: E402
from ctrl_rl.deploy.arm_node import ArmSide, is_arm_bundle  # noqa: E402
from ctrl_rl.deploy.height_map import HeightMapSpec  # noqa: E402
from ctrl_rl.deploy.node_params import TopicQos  # noqa: E402
from ctrl_rl.deploy.runtime import OnnxPolicy  # noqa: E402
from ctrl_rl.deploy.safety import SafetyConfig  # noqa: E402
from ctrl_rl.deploy.transports import make_transport  # noqa: E402
from ctrl_rl.deploy.transports.unitree import LOWSTATE  # noqa: E402
from ctrl_rl.deploy.unitree_msgs import family_for  # noqa: E402

STATUS_QOS = TopicQos("reliable", 1, "transient_local")
BASE_SETTINGS = ["safety.stand_up_time=0.3", "safety.stand_hold_time=0.0", "safety.command_timeout=0",
                 "safety.state_timeout=0.3"]
"""Fast stand-up; a state timeout with room for a loaded 2-core CI machine (the dead-driver case
checks the watchdog itself); no velocity-command watchdog unless a case turns it on."""


@dataclass
class Case:
    name: str
    run: Callable[[Robot], None]
    expect: str = ""
    """A regular expression the final status's fault, last_rejection, velocity_source or last_clamp match."""
    bundle: str = "policy.onnx"
    settings: list[str] = field(default_factory=list)
    command_format: str = "position_gains"
    expect_no_commands: bool = False


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
        self.pub_pose = None if self.arm is None else self.t.publisher("pose_command", m.Float64MultiArray)
        self.pose_sample: Callable[[], m.Float64MultiArray] | None = None if self.arm is None else \
            (lambda: m.Float64MultiArray(self.arm.default_target.copy(), []))
        """What the arm's operator publishes as its end-effector target with each state (None: nothing)."""
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
                for publish, make in ((self.pub_map, self.map_sample), (self.pub_pose, self.pose_sample)):
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

    def wait_mode(self, mode: str, timeout: float = 15.0) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.status.get("mode") == mode:
                return True
            time.sleep(0.01)
        return False

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


# -- the cases ------------------------------------------------------------------------------------


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


def _corrupt(robot: Robot, make: Callable[[], tuple[m.JointState, m.Imu]], seconds: float = 0.5) -> None:
    """Policy mode, then the robot sends only ``make()`` samples for ``seconds``."""
    robot.to_policy()
    robot.sample = make
    time.sleep(seconds)


def _js(robot: Robot, **kw) -> Callable[[], tuple[m.JointState, m.Imu]]:
    def make() -> tuple[m.JointState, m.Imu]:
        js, imu = robot.healthy()
        for k, v in kw.items():
            setattr(js, k, v(js) if callable(v) else v)
        return js, imu
    return make


def _imu(robot: Robot, **kw) -> Callable[[], tuple[m.JointState, m.Imu]]:
    def make() -> tuple[m.JointState, m.Imu]:
        js, imu = robot.healthy()
        for k, v in kw.items():
            setattr(imu, k, v)
        return js, imu
    return make


def _pose_with(robot: Robot, i: int, value: float) -> np.ndarray:
    p = robot.pose.copy()
    p[i] = value
    return p


def _no_state(robot: Robot) -> None:
    time.sleep(1.5)


def _imu_only(robot: Robot) -> None:
    for _ in range(200):
        robot.pub_imu(robot.healthy()[1])
        time.sleep(0.005)


def _start_before_state(robot: Robot) -> None:
    for _ in range(20):
        robot.pub_start(m.Bool(True))
        time.sleep(0.02)
    time.sleep(0.5)


def _invalid_only(robot: Robot) -> None:
    robot.sample_valid = False
    robot.sample = _js(robot, position=lambda js: np.full(len(js.position), 1000.0))
    robot.streaming = True
    time.sleep(1.0)


def _reorder_midrun(robot: Robot) -> None:
    robot.to_policy()
    perm = np.random.default_rng(0).permutation(len(robot.order))

    def shuffled() -> tuple[m.JointState, m.Imu]:
        js, imu = robot.healthy()
        return m.JointState(js.stamp, [js.name[i] for i in perm], js.position[perm], js.velocity[perm],
                            js.effort), imu
    robot.sample = shuffled
    time.sleep(0.5)
    assert robot.status.get("mode") == "policy", robot.status


def _empty_velocity(robot: Robot) -> None:
    robot.sample = _js(robot, velocity=np.zeros(0))
    robot.streaming = True
    assert robot.wait_mode("policy"), robot.status
    time.sleep(0.3)


def _burst(robot: Robot) -> None:
    robot.to_policy()
    js, _ = robot.healthy()
    for _ in range(10_000):
        robot.pub_js(js)
    time.sleep(0.5)


def _estop_start_storm(robot: Robot) -> None:
    robot.to_policy()
    for i in range(400):
        (robot.pub_estop if i % 2 == 0 else robot.pub_start)(m.Bool(True))
    time.sleep(0.5)  # two topics: their interleaving is not ordered, so the storm's last word is not known
    robot.pub_estop(m.Bool(True))  # one e-stop after it must still latch
    assert robot.wait_mode("damping", 5), robot.status


def _estop_latches(robot: Robot) -> None:
    robot.to_policy()
    robot.pub_estop(m.Bool(True))
    assert robot.wait_mode("damping", 5)
    time.sleep(0.5)
    assert robot.status.get("mode") == "damping", robot.status


def _dead_driver(robot: Robot) -> None:
    robot.to_policy()
    robot.streaming = False
    assert robot.wait_mode("damping", 5), robot.status


def _cmd_vel(value: float) -> Callable[[Robot], None]:
    def run(robot: Robot) -> None:
        robot.to_policy()
        for _ in range(20):
            robot.pub_cmd_vel(m.Twist(np.array([value, value, 0.0]), np.array([0.0, 0.0, value])))
            time.sleep(0.01)
        time.sleep(0.3)
        if np.isfinite(value):  # clipped to the training ranges, not a fault
            assert robot.status.get("mode") == "policy", robot.status
    return run


def _wrong_type(robot: Robot) -> None:
    """A String on the node's joint_states topic (a second participant: a topic has one type per
    participant). Typed middleware never matches it with the node's JointState reader."""
    other = make_transport("dds" if robot.t.name == "unitree" else robot.t.name, namespace=robot.ns,
                           node_name="fuzz_wrong_type")
    try:
        pub = other.publisher("joint_states", m.String)
        for _ in range(200):
            pub(m.String("not a joint state"))
            time.sleep(0.005)
        time.sleep(0.5)
    finally:
        other.close()


def _old_stamps_ignored(robot: Robot) -> None:
    """Header stamps an hour old while the node ages state by arrival time (the default)."""
    robot.sample = _stamped(robot, -3600.0)
    robot.streaming = True
    assert robot.wait_mode("policy"), robot.status


def _stamped(robot: Robot, offset: float) -> Callable[[], tuple[m.JointState, m.Imu]]:
    def make() -> tuple[m.JointState, m.Imu]:
        js, imu = robot.healthy()
        js.stamp += offset
        imu.stamp += offset
        return js, imu
    return make


def _clock_jump(offset: float) -> Callable[[Robot], None]:
    def run(robot: Robot) -> None:
        _corrupt(robot, _stamped(robot, offset))
    return run


def _policy_runs(seconds: float = 0.8) -> Callable[[Robot], None]:
    def run(robot: Robot) -> None:
        robot.to_policy()
        time.sleep(seconds)
    return run


def _policy_faults(robot: Robot) -> None:
    robot.start_streaming()
    assert robot.wait_mode("damping", 15), robot.status
    time.sleep(0.3)


def _no_height_map(robot: Robot) -> None:
    """Healthy state but no height map: the node holds the pose in passive and says why."""
    robot.map_sample = None
    robot.start_streaming()
    time.sleep(1.5)
    assert robot.status.get("mode") == "passive", robot.status


def _height_map_stops(robot: Robot) -> None:
    robot.to_policy()
    robot.map_sample = None
    assert robot.wait_mode("damping", 5), robot.status


def _bad_map(make: Callable[[Robot], m.Float64MultiArray]) -> Callable[[Robot], None]:
    def run(robot: Robot) -> None:
        robot.to_policy()
        robot.map_sample = lambda: make(robot)
        assert robot.wait_mode("damping", 5), robot.status
    return run


def _map_with(robot: Robot, index: int, value: float) -> m.Float64MultiArray:
    msg = robot.flat_map()
    msg.data[index] = value
    return msg


def _tampered_lowstate(crc_delta: int = 0, freeze_tick: bool = False) -> Callable[[Robot], None]:
    """In policy mode, the robot's LowStates replaced by ones with a wrong CRC or a tick that stops:
    the node must take none of them, so its state goes stale and it damps."""
    def run(robot: Robot) -> None:
        robot.to_policy()
        family = robot.t.family
        write = robot.t.dds.publisher(LOWSTATE, family.low_state.idl)
        robot.streaming = False
        tick = None
        end = time.monotonic() + 0.8
        while time.monotonic() < end:
            s = robot.t.low_state(*robot.healthy())
            if freeze_tick:
                tick = s.tick if tick is None else tick
                s.tick, s.crc = tick, family.low_state.crc(s)
            s.crc = (s.crc + crc_delta) & 0xFFFFFFFF
            write(s)
            time.sleep(0.005)
    return run


NOT_ON_UNITREE = {"short position array", "huge arrays (1e6 positions)", "duplicate joint names",
                  "unknown joint names", "no joint names", "empty velocity array", "stamp 1 h old (header stamps)",
                  "clock jump +1 h (header stamps)"}
"""Cases a LowState cannot carry: it holds every motor by index, position and velocity always, and a
tick instead of a header stamp."""


def unitree_cases() -> list[Case]:
    return [Case("LowState with a wrong CRC", _tampered_lowstate(crc_delta=1), "stale"),
            Case("LowState tick stops advancing", _tampered_lowstate(freeze_tick=True), "stale")]


def cases(robot_meta: dict) -> list[Case]:
    n = len(robot_meta["joint_names"])
    big = 1_000_000
    return [
        Case("no state: position", _no_state, "", command_format="position", expect_no_commands=True),
        Case("no state: position_gains", _no_state, "", expect_no_commands=True),
        Case("imu only, no JointState", _imu_only, "", expect_no_commands=True),
        Case("start messages before any state", _start_before_state, "", expect_no_commands=True),
        Case("only out-of-range states (1000 rad)", _invalid_only, "outside its limits", command_format="position",
             expect_no_commands=True),
        Case("position 1000 rad in policy", lambda r: _corrupt(r, _js(r, position=_pose_with(r, 0, 1000.0))),
             "outside its limits"),
        Case("position 0.5 rad past a limit", lambda r: _corrupt(r, _js(
            r, position=_pose_with(r, 1, r.limits[1, 1] + 0.5))), "outside its limits", command_format="position"),
        Case("NaN position", lambda r: _corrupt(r, _js(r, position=_pose_with(r, 2, np.nan))), "non-finite"),
        Case("inf velocity", lambda r: _corrupt(r, _js(r, velocity=np.full(n, np.inf))), "non-finite"),
        Case("velocity beyond max_joint_vel", lambda r: _corrupt(r, _js(r, velocity=np.full(n, 100.0))),
             "max_joint_vel"),
        Case("short position array", lambda r: _corrupt(r, _js(r, position=r.pose[:-1])), "positions"),
        # 8 MB samples: refused by length if they arrive, else lost by best-effort delivery (stale state)
        Case("huge arrays (1e6 positions)", lambda r: _corrupt(r, _js(r, position=np.zeros(big))), "positions|stale"),
        Case("duplicate joint names", lambda r: _corrupt(r, _js(r, name=[r.order[0]] * n)), "more than once"),
        Case("unknown joint names", lambda r: _corrupt(r, _js(r, name=[f"x{i}" for i in range(n)])),
             "does not report"),
        Case("no joint names", lambda r: _corrupt(r, _js(r, name=[], position=np.zeros(0), velocity=np.zeros(0))),
             "does not report"),
        Case("names reordered mid-run", _reorder_midrun, ""),
        Case("empty velocity array", _empty_velocity, "estimated"),
        Case("burst of 10,000 JointStates", _burst, ""),
        Case("NaN quaternion", lambda r: _corrupt(r, _imu(r, orientation=np.array([np.nan, 0, 0, 0]))), "Imu"),
        Case("non-unit quaternion", lambda r: _corrupt(r, _imu(r, orientation=np.array([2.0, 0, 0, 0]))),
             "unit quaternion"),
        Case("gyro 1e6 rad/s", lambda r: _corrupt(r, _imu(r, angular_velocity=np.array([1e6, 0, 0]))), "max_gyro"),
        Case("fallen over (tilt 90 deg)", lambda r: _corrupt(r, _imu(
            r, orientation=np.array([np.cos(np.pi / 4), np.sin(np.pi / 4), 0, 0]))), "tilt"),
        Case("e-stop latches", _estop_latches, "e-stop"),
        Case("e-stop/start storm (400)", _estop_start_storm, "e-stop"),
        Case("dead state publisher", _dead_driver, "stale"),
        Case("NaN velocity command", _cmd_vel(np.nan), "Twist contains NaN"),
        Case("velocity command 1e9", _cmd_vel(1e9), "", settings=["safety.command_timeout=0"]),
        Case("another type on a near topic", _wrong_type, "", expect_no_commands=True),
        Case("stamp 1 h old (header stamps)", _clock_jump(-3600.0), "old", settings=["safety.use_header_stamps=true"]),
        Case("clock jump +1 h (header stamps)", _clock_jump(3600.0), "future",
             settings=["safety.use_header_stamps=true"]),
        Case("stamp 1 h old (arrival time)", _old_stamps_ignored, ""),
        Case("policy outputs NaN", _policy_faults, "policy output non-finite", bundle="nan.onnx"),
        Case("policy outputs inf", _policy_faults, "policy output non-finite", bundle="inf.onnx"),
        Case("policy outputs 1e6", _policy_runs(), "clamped", bundle="huge.onnx"),
        Case("policy outputs 1e6, position", _policy_runs(), "clamped", bundle="huge.onnx",
             command_format="position"),
        Case("passive_output none", _no_state, "", command_format="position", expect_no_commands=True,
             settings=["passive_output=none"]),
        # a policy that observes the height scan: the height map is robot state like any other
        Case("scan bundle: no height map", _no_height_map, "no height map received", bundle="scan.onnx"),
        Case("scan bundle: policy with a height map", _policy_runs(), "", bundle="scan.onnx"),
        Case("scan bundle: height map stops", _height_map_stops, "height map is stale", bundle="scan.onnx"),
        Case("scan bundle: NaN in the height map", _bad_map(lambda r: _map_with(r, 5, np.nan)),
             "height map refused: .*non-finite", bundle="scan.onnx"),
        Case("scan bundle: clearance 1e3 m", _bad_map(lambda r: _map_with(r, 0, 1e3)), "max_height_map",
             bundle="scan.onnx"),
        Case("scan bundle: height map of the wrong size", _bad_map(
            lambda r: m.Float64MultiArray(np.zeros(r.scan.size - 1), [])), "the bundle's scan has", bundle="scan.onnx"),
    ]


def run_case(case: Case, bundle_dir: Path, transport: str, index: int, family: str = "") -> tuple[str, int, bool]:
    """Start the node, run the case as its robot, stop the node; (result, unsafe commands, crashed)."""
    ns = f"fuzz{os.getpid()}_{index}"
    bundle = bundle_dir / case.bundle
    meta = OnnxPolicy(bundle).metadata
    robot = Robot(transport, ns, meta, case.command_format, family)
    sets = [*BASE_SETTINGS, f"command_format={case.command_format}",
            f"command_joint_names=[{','.join(robot.order)}]", *case.settings,
            *([f"unitree_family={family}"] if family else [])]
    cmd = [sys.executable, "-m", "ctrl_rl", "deploy", "node", "--bundle", str(bundle), "--transport", transport,
           "--namespace", ns, *[a for s in sets for a in ("--set", s)]]
    node = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    result, crashed = "ok", False
    try:
        if not robot.wait_mode("passive", 30):
            raise AssertionError(f"the node never reported passive: {node.poll()}")
        case.run(robot)
        time.sleep(0.1)
        if node.poll() is not None:
            crashed, result = True, f"node exited {node.returncode}"
        status = robot.status
        named = " ".join(str(status.get(k) or "") for k in ("fault", "waiting", "last_rejection",
                                                             "velocity_source", "last_clamp", "last_workspace_hold"))
        if case.expect and not re.search(case.expect, named):
            result = f"status does not name '{case.expect}': {named!r}"
        if case.expect_no_commands and robot.commands:
            robot.unsafe.append(f"{robot.commands} commands where none was requested")
    except AssertionError as e:
        result = f"failed: {str(e)[:200]}"
    finally:
        out, err, timed_out = stop_node(node, robot, timeout=20)
        if timed_out:
            crashed, result = True, "did not exit on SIGTERM"
    if not crashed and (node.returncode != 0 or "RESULT mode=" not in out):
        crashed, result = True, f"exit {node.returncode} after SIGTERM: {err.strip().splitlines()[-1:]}"
    unsafe = len(robot.unsafe)
    if unsafe:
        result = f"UNSAFE: {robot.unsafe[0]}"
    return result, unsafe, crashed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("bundle_dir", type=Path)
    ap.add_argument("--transport", default="dds")
    ap.add_argument("--cases", default="", help="comma-separated case indices (default: all)")
    ap.add_argument("--command-format", default="", help="run every picked case with this command_format")
    ap.add_argument("--bundle", default="", help="run the cases of the plain policy with this bundle of "
                    "BUNDLE_DIR (the crafted and scan bundles' cases are left out)")
    ap.add_argument("--unitree-family", default="", help="--transport unitree: go or hg (default: from the robot)")
    args = ap.parse_args()
    all_cases = cases(OnnxPolicy(args.bundle_dir / (args.bundle or "policy.onnx")).metadata)
    if is_arm_bundle(OnnxPolicy(args.bundle_dir / "policy.onnx").metadata):
        from deploy_fuzz_arm import NOT_ON_ARM, arm_cases  # it imports this module's machinery

        all_cases = [c for c in all_cases if c.name not in NOT_ON_ARM and c.bundle != "scan.onnx"] + arm_cases()
    if args.transport == "unitree":
        all_cases = [c for c in all_cases if c.name not in NOT_ON_UNITREE] + unitree_cases()
        args.command_format = "position_gains"
    if args.bundle:
        all_cases = [c for c in all_cases if c.bundle == "policy.onnx"]
    picked = [int(i) for i in args.cases.split(",")] if args.cases else range(len(all_cases))
    rows, unsafe_total, crashes = [], 0, 0
    print(f"| case ({args.transport}) | result |\n|---|---|", flush=True)
    for i in picked:
        case = all_cases[i]
        if args.command_format:
            case.command_format = args.command_format
        if args.bundle:
            case.bundle = args.bundle
        t0 = time.monotonic()
        result, unsafe, crashed = run_case(case, args.bundle_dir, args.transport, i, args.unitree_family)
        unsafe_total += unsafe
        crashes += crashed
        rows.append((case.name, result))
        print(f"| {case.name} | {result} ({time.monotonic() - t0:.1f} s) |", flush=True)
    failed = sum(not r.startswith("ok") for _, r in rows)
    print(f"RESULT cases={len(rows)} failed={failed} unsafe_commands={unsafe_total} crashes={crashes}", flush=True)


if __name__ == "__main__":
    main()
