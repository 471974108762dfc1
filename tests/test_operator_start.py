"""The node never moves a robot without an operator: with its default parameters, over every transport,
``ctrl-rl deploy node`` publishes nothing stiff before a start message, and stands up after one; a
SIGTERM then is recorded in its summary as a stop, not a fault.

"Stiff" is what can move a joint: a kp > 0 (``position_gains``; over ``unitree`` any motor of the
``LowCmd``), or in ``position`` format a target away from the measured pose (the driver's own gains
pull towards it). Before the start the node sends zero gains (kp = kd = 0, ``safety.passive_kd``'s
default) at the measured pose: no torque at all. The robot (tests/
deploy_operator_start.py, in the transport's own venv) lies in a valid pose away from the default
pose, so the stand-up that follows the start is seen in the very commands the test checks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from bundles import arm_bundle, quadruped_bundle

from ctrl_rl.deploy.safety import SafetyConfig

HERE = Path(__file__).parent
ROS_PY = HERE.parent / ".venv-ros" / "bin" / "python"
needs_ros = pytest.mark.skipif(not ROS_PY.exists(), reason="no .venv-ros: `bash scripts/setup_ros_env.sh`")
PASSIVE_KD = SafetyConfig().passive_kd
assert PASSIVE_KD == 0.0


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> str:
    return quadruped_bundle(tmp_path_factory.mktemp("runs"))


@pytest.fixture(scope="module")
def arm(tmp_path_factory) -> str:
    return arm_bundle(tmp_path_factory.mktemp("arm_runs"))


def operator_start(bundle: str, transport: str, command_format: str) -> dict:
    python, env = sys.executable, {"ROS_DOMAIN_ID": str(150 + os.getpid() % 50)}  # rt/lowcmd has no namespace
    if transport == "rclpy":  # as tests/test_deploy_fuzz.py runs rclpy (UDP, a domain of its own)
        python, env = str(ROS_PY), {"ROS_AUTOMATIC_DISCOVERY_RANGE": "SUBNET",
                                    "ROS_DOMAIN_ID": str(1 + (os.getpid() + 29) % 100)}
    proc = subprocess.run([python, str(HERE / "deploy_operator_start.py"), bundle, "--transport", transport,
                           "--command-format", command_format], capture_output=True, text=True, timeout=180,
                          env={**os.environ, "PYTHONUNBUFFERED": "1", **env})
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("START ")]
    assert proc.returncode == 0 and lines, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(lines[-1][len("START "):])


@pytest.mark.parametrize("transport, command_format", [
    ("dds", "position"),  # every default: ros2_control's position interface, the robot's own gains
    ("dds", "position_gains"),
    ("unitree", "position_gains"),  # LowCmd: kp and kd per motor, always
    pytest.param("rclpy", "position", marks=needs_ros),
])
def test_default_node_sends_nothing_stiff_before_an_operators_start(bundle, transport, command_format):
    check_operator_start(operator_start(bundle, transport, command_format), transport, command_format)


@pytest.mark.parametrize("transport, command_format", [
    ("dds", "position_gains"),
    pytest.param("rclpy", "position", marks=needs_ros),
])
def test_an_arms_node_sends_nothing_stiff_before_an_operators_start(arm, transport, command_format):
    """The same for an arm bundle (i2rt's YAM: arm joints and gripper), whose node reads no IMU."""
    check_operator_start(operator_start(arm, transport, command_format), transport, command_format)


def check_operator_start(r: dict, transport: str, command_format: str) -> None:
    """Zero gains at the measured pose before the start, the stand-up's gains after it, SIGTERM a stop."""
    before, after = r["before"], r["after"]
    assert r["pose_from_default"] > 0.1  # the stand-up has somewhere to go: a stiff command would show
    # before the start: the node read the state and published, all of it damping at the measured pose
    assert r["status_before_start"]["mode"] == "passive" and r["status_before_start"]["joint_state"] > 0, r
    topic = f"/{r['namespace']}/ctrl_rl/start"
    assert r["status_before_start"]["waiting"] == f"an operator's start: std_msgs/Bool true on {topic}"
    assert r["start_hint_logged"] and topic in r["start_hint_logged"][0], r["stderr_tail"]
    assert before["commands"] >= 10, r  # 50 Hz for about a second (passive_output: hold)
    assert before["max_target_from_pose"] < 1e-5, r  # float32 on Unitree's wire
    if command_format == "position_gains":
        assert before["max_kp"] == 0.0 and before["max_kd"] == PASSIVE_KD, r
    if transport == "unitree":
        assert r["wire_before"]["lowcmds"] >= 10 and r["wire_before"]["max_kp"] == 0.0, r
        assert r["wire_before"]["max_kd"] == PASSIVE_KD, r
    # after it: the stand-up, with the bundle's gains, towards the default pose (so this test can fail)
    assert r["mode_after_start"] in ("stand_up", "policy"), r
    assert after["max_target_from_pose"] > 0.01, r
    if command_format == "position_gains":
        assert after["max_kp"] > 0.0, r
    if transport == "unitree":
        assert r["wire_after"]["max_kp"] > 0.0, r
    assert r["unsafe"] == [] and r["exit"] == 0 and r["result_line"], r
    # SIGTERM is the operator's stop: the summary names it, and no fault
    s = r["summary"]
    assert (s["fault"], s["stop"], s["mode"]) == (None, "stopped by signal (SIGTERM)", "damping"), s
    assert s["mode_at_stop"] in ("stand_up", "policy"), s
