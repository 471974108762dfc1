"""Checkpoint -> bundle -> deploy node <-> sim2sim bridge over real DDS on loopback.

The node and the bridge speak plain DDS (cyclonedds) in ROS 2's wire format. Everything here is
real: a trained and exported policy, onnxruntime, MuJoCo, DDS discovery and transport.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from bundles import quadruped_bundle, scan_bundle

from ctrl_rl.deploy import messages as m
from ctrl_rl.deploy.node import DeployNode, NodeParams
from ctrl_rl.deploy.transports.dds import DdsTransport

HERE = Path(__file__).parent
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> str:
    """A short real training run of the quadruped, exported (parity-checked) to a bundle."""
    return quadruped_bundle(tmp_path_factory.mktemp("runs"))


def run_exchange(python: str, bundle: str, transport: str, **env: str) -> dict:
    proc = subprocess.run([python, str(HERE / "deploy_exchange.py"), bundle, "--transport", transport],
                          capture_output=True, text=True, timeout=240,
                          env={**os.environ, "PYTHONUNBUFFERED": "1", **env})
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("EXCHANGE ")]
    assert proc.returncode == 0 and lines, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(lines[-1][len("EXCHANGE "):])


def check_exchange(r: dict) -> None:
    """Stand-up through the state machine, the policy driving the robot, damping on a dead publisher."""
    modes = [mode for mode, _ in r["transitions"]]
    assert modes[:3] == ["stand_up", "policy", "damping"], (r["transitions"], r["status"])
    assert r["mode_before_kill"] == "policy", r["status_before_kill"]
    assert r["stand_pose_err"] < 0.3  # the measured pose reached the default pose (rad)
    st = r["status_before_kill"]
    assert st["rejected"] == 0 and st["ticks"] > 100 and "inference" in st["latency_us"]
    assert 0 < st["max_state_age_ms"] < r["state_timeout_ms"]  # the worst gap in the state stream
    assert r["bridge"]["commands"] > 100 and r["bridge"]["rejected"] == 0
    assert r["bridge"]["base_height"] > 0.2  # standing (lying: 0.11 m)
    assert "stale" in r["transitions"][2][1]
    # the watchdog fires within the state timeout (sim2sim's, see deploy/commands.py) plus a tick
    assert r["state_timeout_ms"] < r["damping_after_last_state_ms"]
    assert r["damping_after_last_state_ms"] <= r["state_timeout_ms"] + 2 * r["control_period_ms"]


@pytest.mark.slow
def test_end_to_end_over_dds(bundle):
    check_exchange(run_exchange(sys.executable, bundle, "dds"))


class Robot:
    """Publishes hand-made robot messages on a second DDS participant; records the node's commands."""

    def __init__(self, ns: str) -> None:
        self.t = DdsTransport(namespace=ns, localhost_only=True)
        self.pub_js = self.t.publisher("joint_states", m.JointState)
        self.pub_imu = self.t.publisher("imu/data", m.Imu)
        self.pub_estop = self.t.publisher("estop", m.Bool)
        self.pub_start = self.t.publisher("ctrl_rl/start", m.Bool)
        self.commands: list[np.ndarray] = []
        self.t.subscribe("joint_commands", m.Float64MultiArray, lambda msg: self.commands.append(msg.data.copy()))

    def send(self, names, pos, vel=None, quat=(1.0, 0.0, 0.0, 0.0)) -> None:
        vel = np.zeros(len(pos)) if vel is None else vel
        self.pub_js(m.JointState(time.time(), list(names), np.asarray(pos, float), np.asarray(vel, float), np.zeros(0)))
        self.pub_imu(m.Imu(time.time(), np.asarray(quat, float), np.zeros(3), np.array([0, 0, 9.81])))


def wait_for(cond, timeout=10.0):
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            return False
        time.sleep(0.005)
    return True


@pytest.fixture()
def node_and_robot(bundle, request):
    ns = f"t{os.getpid()}_{request.node.name[-20:].replace('[', '_').replace(']', '')}"
    transport = DdsTransport(namespace=ns, localhost_only=True)
    node = DeployNode(NodeParams(bundle=bundle, safety={"stand_up_time": 0.2, "stand_hold_time": 0.0,
                                                        "command_timeout": 0, "state_timeout": 0.2}), transport)
    robot = Robot(ns)
    assert robot.t.wait_for_subscribers(1, 10) and robot.t.wait_for_publishers(1, 10)
    th = threading.Thread(target=node.run, daemon=True)
    th.start()
    yield node, robot
    node.stop()
    th.join(5)
    transport.close()
    robot.t.close()


def test_joint_state_in_any_order_is_mapped_by_name(node_and_robot):
    node, robot = node_and_robot
    names = node.policy.joint_names
    pose = node.policy.default_pose + np.linspace(-0.05, 0.05, len(names))
    perm = np.random.default_rng(0).permutation(len(names))
    robot.send([names[i] for i in perm], pose[perm], vel=np.arange(len(names), dtype=float)[perm] * 0.1)
    assert wait_for(lambda: node.inputs.joints is not None)
    np.testing.assert_array_equal(node.inputs.joints[0], pose)  # policy order restored exactly
    np.testing.assert_array_equal(node.inputs.joints[1], np.arange(len(names)) * 0.1)


def test_missing_joint_names_are_refused_with_a_clear_error(node_and_robot):
    node, robot = node_and_robot
    names = node.policy.joint_names
    robot.send(names[1:], node.policy.default_pose[1:])
    assert wait_for(lambda: node.counters["rejected"] > 0)
    assert f"does not report joint(s) ['{names[0]}']" in node.inputs.last_rejection
    assert node.inputs.joints is None  # nothing of it was used


def drive_to_policy(node, robot) -> None:
    """Healthy state and the operator's start (sent until the node leaves passive)."""
    names, pose = node.policy.joint_names, node.policy.default_pose

    def step() -> bool:
        robot.send(names, pose)
        if node.safety.mode.value == "passive" and node.inputs.joints is not None:
            robot.pub_start(m.Bool(True))
        return node.safety.mode.value == "policy"
    assert wait_for(step, 15), node.status()


@pytest.mark.parametrize("bad", ["nan_position", "short_position", "nan_imu", "not_unit_quaternion"])
def test_malformed_messages_never_reach_the_actuators(node_and_robot, bad):
    node, robot = node_and_robot
    names, pose = node.policy.joint_names, node.policy.default_pose
    drive_to_policy(node, robot)
    if bad == "nan_position":
        robot.send(names, np.where(np.arange(len(pose)) == 3, np.nan, pose))
    elif bad == "short_position":
        robot.send(names, pose[:-1])
    elif bad == "nan_imu":
        robot.send(names, pose, quat=(np.nan, 0.0, 0.0, 0.0))
    else:
        robot.send(names, pose, quat=(2.0, 0.0, 0.0, 0.0))
    assert wait_for(lambda: node.safety.mode.value == "damping"), node.status()
    assert "malformed input" in node.safety.fault
    n = len(robot.commands)
    assert wait_for(lambda: len(robot.commands) > n + 3)
    sent = np.stack(robot.commands)
    assert np.all(np.isfinite(sent)) and sent.shape[1] == len(names)
    lo, hi = np.asarray(node.joint_limits).T
    assert np.all((sent >= lo - 0.2) & (sent <= hi + 0.2))  # only poses near the measured/limited range


def test_estop_latches_damping_and_start_stands_up_again(node_and_robot, bundle):
    node, robot = node_and_robot
    names, pose = node.policy.joint_names, node.policy.default_pose
    drive_to_policy(node, robot)
    robot.pub_estop(m.Bool(True))
    assert wait_for(lambda: node.safety.mode.value == "damping")
    assert node.safety.fault == "e-stop message received"
    start = robot.t.publisher("ctrl_rl/start", m.Bool)
    assert robot.t.wait_for_subscribers(1, 10)
    start(m.Bool(True))
    assert wait_for(lambda: (robot.send(names, pose), node.safety.mode.value == "policy")[1], 15), node.status()


@pytest.mark.slow
def test_sim2sim_command_runs_bridge_and_node(bundle, tmp_path):
    """`ctrl-rl deploy sim2sim` as a user runs it: ends with RESULT lines, the robot standing."""
    proc = subprocess.run([sys.executable, "-m", "ctrl_rl", "deploy", "sim2sim", bundle, "--duration", "6",
                           "--set", "safety.stand_up_time=1.0", "--cmd-vel", "0", "0", "0",
                           "--joint-order", "reversed"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "{" not in proc.stdout and " WARNING: mode" not in proc.stderr  # JSON to a file; mode changes are INFO
    result = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT sim2sim")]
    assert result, proc.stdout[-2000:]
    fields = dict(kv.split("=") for kv in result[0].split()[2:])
    assert fields["mode"] == "policy", proc.stdout[-2000:] + proc.stderr[-2000:]
    assert float(fields["base_height"]) > 0.2


@pytest.mark.slow
def test_sim2sim_serves_a_scan_bundle_the_height_map_of_its_terrain(tmp_path):
    """A bundle whose actor observes the height scan: the bridge plays the robot's terrain perception
    (the map of the training terrain under the robot), the node reads it and runs the policy."""
    bundle = scan_bundle(tmp_path / "runs")
    proc = subprocess.run([sys.executable, "-m", "ctrl_rl", "deploy", "sim2sim", bundle, "--duration", "8",
                           "--set", "safety.stand_up_time=1.0", "--cmd-vel", "0", "0", "0", "--terrain-cell", "1", "0"],
                          capture_output=True, text=True, timeout=180, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = next(ln.split(": ", 1)[1] for ln in proc.stdout.splitlines() if ln.startswith("summary: "))
    status = json.loads(Path(summary).read_text())
    result = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT sim2sim")]
    fields = dict(kv.split("=") for kv in result[0].split()[2:])
    assert fields["mode"] == "policy", proc.stdout[-2000:] + proc.stderr[-2000:]
    assert status["height_map"] > 100 and status["rejected"] == 0, status  # 50 Hz maps, none refused


ROS_PY = HERE.parent / ".venv-ros" / "bin" / "python"


@pytest.mark.slow
@pytest.mark.skipif(not ROS_PY.exists(), reason="no .venv-ros: `bash scripts/setup_ros_env.sh` (scripts/test.sh does)")
def test_end_to_end_over_rclpy(bundle):
    """The same exchange with real rclpy (ROS 2 Kilted wheels, Fast DDS) for node and bridge.

    Fast DDS over UDP (the transport's default), not the LOCALHOST range: in that range
    rmw_fastrtps forces shared memory, where the bridge's SIGKILL made the node segfault at
    shutdown (1 run in 4-6). A domain of its own keeps other ROS 2 traffic out.
    """
    check_exchange(run_exchange(str(ROS_PY), bundle, "rclpy", ROS_AUTOMATIC_DISCOVERY_RANGE="SUBNET",
                                ROS_DOMAIN_ID=str(1 + os.getpid() % 100)))
