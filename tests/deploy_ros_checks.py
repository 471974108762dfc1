"""The deploy node as a ROS 2 node, from an rclpy peer (runs in .venv-ros; tests/test_deploy_fuzz.py drives it).

    python tests/deploy_ros_checks.py BUNDLE params|lifecycle

``params``: ``ros2 param set`` as the ``rcl_interfaces/srv/SetParameters`` service it calls: a live
safety limit is applied (a 0.2 rad tilt then trips damping at max_tilt 0.1), a string for a number
and a change to a start-up parameter are refused with their reasons, and ``GetParameters`` tells
what the node really uses (``--set`` wins over ``-p``); the bundle itself comes from ``-p bundle:=``.
``lifecycle``: ``--lifecycle``: no command while unconfigured or inactive; configure, activate
(then the operator's start: stand-up, policy), deactivate (damping: an operator's stop, not a
fault) through ``lifecycle_msgs/srv/ChangeState``. The peer is the operator too: it sends a start
message while the node is active and passive (the node's default waits for one).
Prints ``CHECKS {json}``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
from rcl_interfaces.srv import GetParameters, SetParameters

from ctrl_rl.deploy import messages as m
from ctrl_rl.deploy.node_params import TopicQos
from ctrl_rl.deploy.runtime import OnnxPolicy
from ctrl_rl.deploy.transports.ros2 import RclpyTransport


def call(node, srv_type, name: str, request, timeout: float = 10.0):
    client = node.create_client(srv_type, name)
    if not client.wait_for_service(timeout_sec=timeout):
        raise RuntimeError(f"service {name} not available")
    future = client.call_async(request)
    end = time.monotonic() + timeout
    while not future.done() and time.monotonic() < end:
        time.sleep(0.01)
    return future.result()


def param(name: str, value) -> Parameter:
    v = ParameterValue()
    if isinstance(value, str):
        v.type, v.string_value = ParameterType.PARAMETER_STRING, value
    else:
        v.type, v.double_value = ParameterType.PARAMETER_DOUBLE, float(value)
    return Parameter(name=name, value=v)


class Peer:
    """The robot (state at 200 Hz, tilt settable), the operator's start, a recorder of commands and status."""

    def __init__(self, ns: str, meta: dict) -> None:
        self.t = RclpyTransport(namespace=ns, node_name="peer", args=[])
        self.names = list(meta["joint_names"])
        self.pose = np.asarray(meta["default_pose"], dtype=np.float64)
        self.tilt = 0.0
        self.status: dict = {}
        self.commands: list[tuple[float, np.ndarray]] = []
        self.pub_js = self.t.publisher("joint_states", m.JointState)
        self.pub_imu = self.t.publisher("imu/data", m.Imu)
        self.pub_start = self.t.publisher("ctrl_rl/start", m.Bool)
        self._next_start = 0.0
        self.t.subscribe("joint_commands", m.Float64MultiArray, lambda c: self.commands.append((time.monotonic(),
                                                                                               c.data.copy())))
        self.t.subscribe("ctrl_rl/status", m.String, lambda s: setattr(self, "status", json.loads(s.data)),
                         qos=TopicQos("reliable", 1, "transient_local"))

    def stream(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.send()
            time.sleep(0.005)

    def send(self) -> None:
        now = time.time()
        q = np.array([np.cos(self.tilt / 2), np.sin(self.tilt / 2), 0.0, 0.0])
        self.pub_js(m.JointState(now, self.names, self.pose, np.zeros(len(self.names)), np.zeros(0)))
        self.pub_imu(m.Imu(now, q, np.zeros(3), np.array([0.0, 0.0, 9.81])))
        waiting = self.status.get("mode") == "passive" and self.status.get("enabled")
        if waiting and time.monotonic() >= self._next_start:  # an operator at the robot presses start
            self.pub_start(m.Bool(True))
            self._next_start = time.monotonic() + 0.1

    def stream_to(self, mode: str, timeout: float = 5.0) -> dict:
        """Stream state until the node reports ``mode`` (or the timeout); its mode, fault and stop then."""
        self.stream_until(lambda: self.status.get("mode") == mode, timeout)
        return {k: self.status.get(k) for k in ("mode", "fault", "stop")}

    def stream_until(self, pred, timeout: float = 15.0) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            self.send()
            if pred():
                return True
            time.sleep(0.005)
        return False


def start_node(bundle: str | None, ns: str, *extra: str) -> subprocess.Popen:
    """The node as a user starts it; ``bundle`` None: it comes from ``extra`` (``--ros-args -p bundle:=``)."""
    return subprocess.Popen([sys.executable, "-m", "ctrl_rl", "deploy", "node",
                             *(["--bundle", bundle] if bundle else []), "--transport", "rclpy", "--namespace", ns,
                             "--set", "safety.stand_up_time=0.3",
                             "--set", "safety.stand_hold_time=0", "--set", "safety.command_timeout=0",
                             "--set", "safety.state_timeout=0.3", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def stop(node: subprocess.Popen) -> dict:
    node.send_signal(signal.SIGTERM)
    out, err = node.communicate(timeout=20)
    return {"exit": node.returncode, "result": [ln for ln in out.splitlines() if ln.startswith("RESULT")],
            "stderr_tail": err[-600:]}


def params_checks(bundle: str) -> dict:
    ns = f"rp{os.getpid()}"
    peer = Peer(ns, OnnxPolicy(bundle).metadata)
    node = start_node(None, ns, "--set", "safety.max_gyro=15", "--ros-args", "-p", "safety.max_gyro:=12.0",
                      "-p", "safety.max_joint_vel:=25.0", "-p", f"bundle:={bundle}")
    out: dict = {}
    try:
        fqn = f"/{ns}/ctrl_rl_node"
        out["reached_policy"] = peer.stream_until(lambda: peer.status.get("mode") == "policy")
        got = call(peer.t.node, GetParameters, f"{fqn}/get_parameters",
                   GetParameters.Request(names=["safety.max_gyro", "safety.max_joint_vel", "bundle"]))
        out["get"] = [v.double_value if v.type == ParameterType.PARAMETER_DOUBLE else v.string_value
                      for v in got.values]
        res = call(peer.t.node, SetParameters, f"{fqn}/set_parameters",
                   SetParameters.Request(parameters=[param("safety.max_tilt", "high")]))
        out["set_string"] = [(r.successful, r.reason) for r in res.results]
        res = call(peer.t.node, SetParameters, f"{fqn}/set_parameters",
                   SetParameters.Request(parameters=[param("rate_hz", 100.0)]))
        out["set_rate"] = [(r.successful, r.reason) for r in res.results]
        peer.tilt = 0.2
        peer.stream(0.5)
        out["mode_at_tilt_0.2_default_limit"] = peer.status.get("mode")
        res = call(peer.t.node, SetParameters, f"{fqn}/set_parameters",
                   SetParameters.Request(parameters=[param("safety.max_tilt", 0.1)]))
        out["set_tilt"] = [(r.successful, r.reason) for r in res.results]
        out["after_live_set"] = peer.stream_to("damping")
    finally:
        out["stop"] = stop(node)
        peer.t.close()
    return out


def lifecycle_checks(bundle: str) -> dict:
    from lifecycle_msgs.msg import Transition
    from lifecycle_msgs.srv import ChangeState, GetState

    ns = f"rl{os.getpid()}"
    peer = Peer(ns, OnnxPolicy(bundle).metadata)
    node = start_node(bundle, ns, "--lifecycle")
    out: dict = {"transitions": []}
    fqn = f"/{ns}/ctrl_rl_node"
    try:
        peer.stream(3.0)  # unconfigured: no topics of the node's yet, certainly no commands
        out["commands_unconfigured"] = len(peer.commands)

        def change(tid: int, label: str) -> None:
            r = call(peer.t.node, ChangeState, f"{fqn}/change_state",
                     ChangeState.Request(transition=Transition(id=tid)))
            state = call(peer.t.node, GetState, f"{fqn}/get_state", GetState.Request())
            out["transitions"].append((label, bool(r.success), state.current_state.label))

        change(Transition.TRANSITION_CONFIGURE, "configure")
        peer.stream(1.5)
        out["commands_inactive"] = len(peer.commands)
        out["mode_inactive"] = peer.status.get("mode")
        change(Transition.TRANSITION_ACTIVATE, "activate")
        out["reached_policy"] = peer.stream_until(lambda: peer.status.get("mode") == "policy")
        out["commands_active"] = len(peer.commands)
        change(Transition.TRANSITION_DEACTIVATE, "deactivate")
        out["after_deactivate"] = peer.stream_to("damping")
    finally:
        out["stop"] = stop(node)
        peer.t.close()
    return out


if __name__ == "__main__":
    bundle_path, mode = sys.argv[1], sys.argv[2]
    result = params_checks(bundle_path) if mode == "params" else lifecycle_checks(bundle_path)
    print("CHECKS " + json.dumps(result), flush=True)
