"""The deploy node under fuzzing over both transports, and its errors as a user meets them.

tests/deploy_fuzz.py drives a real node process (``ctrl-rl deploy node``) from a peer process
that checks every command it receives (finite, within the joint limits, nothing before a valid
state, gains as the bundle's); here pytest runs it per transport and reads its RESULT line.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from bundles import arm_bundle, crafted_bundle, humanoid_bundle, insert_bundle, quadruped_bundle, scan_bundle

HERE = Path(__file__).parent
ROS_PY = HERE.parent / ".venv-ros" / "bin" / "python"
MIN_CASES = 42
UNITREE_CASES = MIN_CASES - 8 + 2
"""Over Unitree's protocol: the 8 JointState-structure cases do not exist, 2 LowState ones do."""
UNITREE_HG_CASES = UNITREE_CASES - 10
"""On the humanoid bundle alone: without the 10 cases of the crafted and scan bundles."""
ARM_CASES = MIN_CASES - 6 - 6 + 7 + 6 + 4
"""An arm bundle: without the 6 scan-bundle cases and the 6 about an IMU or a velocity command (NOT_ON_ARM),
with 7 of its own (deploy_fuzz_arm.arm_cases: the pose command, the workspace box), 6 of an insert bundle's
object pose and 4 of a lift bundle's target height."""


@pytest.fixture(scope="module")
def bundle_dir(tmp_path_factory) -> Path:
    """A real exported quadruped bundle, the same policy with its output times NaN, inf and 1e6, a
    rough-terrain bundle whose actor observes the height scan, and a humanoid bundle."""
    d = tmp_path_factory.mktemp("fuzz_bundles")
    src = quadruped_bundle(d / "runs")
    shutil.copy(src, d / "policy.onnx")
    shutil.copy(scan_bundle(d / "scan_runs"), d / "scan.onnx")
    for name, factor in (("nan", float("nan")), ("inf", float("inf")), ("huge", 1e6)):
        crafted_bundle(src, d / f"{name}.onnx", factor)
    shutil.copy(humanoid_bundle(d / "humanoid_runs"), d / "humanoid.onnx")
    return d


@pytest.fixture(scope="module")
def arm_bundle_dir(tmp_path_factory) -> Path:
    """An exported reach bundle of i2rt's YAM, the same policy with its output times NaN, inf and 1e6, an
    insert bundle (its policy observes the socket's pose) and a lift bundle (the cube's pose, a target height)."""
    d = tmp_path_factory.mktemp("fuzz_arm_bundles")
    src = arm_bundle(d / "runs")
    shutil.copy(src, d / "policy.onnx")
    shutil.copy(insert_bundle(d / "insert_runs"), d / "insert.onnx")
    shutil.copy(insert_bundle(d / "lift_runs", task="lift"), d / "lift.onnx")
    for name, factor in (("nan", float("nan")), ("inf", float("inf")), ("huge", 1e6)):
        crafted_bundle(src, d / f"{name}.onnx", factor)
    return d


def run_fuzz(python: Path | str, bundle_dir: Path, transport: str, *args: str, **env: str) -> tuple[str, dict]:
    proc = subprocess.run([str(python), str(HERE / "deploy_fuzz.py"), str(bundle_dir), "--transport", transport,
                           "--jobs", "2", *args], capture_output=True, text=True, timeout=900,
                          env={**os.environ, "PYTHONUNBUFFERED": "1", **env})
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stdout[-4000:] + proc.stderr[-4000:]
    return proc.stdout, dict(kv.split("=") for kv in lines[-1].split()[1:])


def check(out: str, result: dict, cases: int) -> None:
    assert int(result["cases"]) == cases, out
    assert result["unsafe_commands"] == "0" and result["crashes"] == "0", out
    assert result["failed"] == "0", out


@pytest.mark.slow
def test_fuzz_over_dds(bundle_dir):
    out, result = run_fuzz(sys.executable, bundle_dir, "dds")
    check(out, result, MIN_CASES)


@pytest.mark.slow
def test_fuzz_over_the_unitree_protocol_go(bundle_dir):
    """``--transport unitree`` with unitree_go messages (ctrl_quad's joints are a Go2's motors): the cases a
    LowState can carry, plus a wrong CRC and a stopped tick (tests/deploy_fuzz.py, NOT_ON_UNITREE)."""
    out, result = run_fuzz(sys.executable, bundle_dir, "unitree")
    check(out, result, UNITREE_CASES)


@pytest.mark.slow
def test_fuzz_over_the_unitree_protocol_hg(bundle_dir):
    """The same with unitree_hg messages, on a humanoid bundle (ctrl_humanoid's joints are G1 motors)."""
    out, result = run_fuzz(sys.executable, bundle_dir, "unitree", "--bundle", "humanoid.onnx",
                           "--unitree-family", "hg")
    check(out, result, UNITREE_HG_CASES)


@pytest.mark.slow
@pytest.mark.skipif(not ROS_PY.exists(), reason="no .venv-ros: `bash scripts/setup_ros_env.sh` (scripts/test.sh does)")
def test_fuzz_over_rclpy(bundle_dir):
    out, result = run_fuzz(ROS_PY, bundle_dir, "rclpy", ROS_AUTOMATIC_DISCOVERY_RANGE="SUBNET",
                           ROS_DOMAIN_ID=str(1 + os.getpid() % 100))
    check(out, result, MIN_CASES)


@pytest.mark.slow
def test_fuzz_an_arm_bundle_over_dds(arm_bundle_dir):
    """The arm's node under the same fuzzing, plus its pose command and workspace box: the peer also checks
    that no target other than the reported pose puts the end effector outside the box."""
    out, result = run_fuzz(sys.executable, arm_bundle_dir, "dds")
    check(out, result, ARM_CASES)


@pytest.mark.slow
@pytest.mark.skipif(not ROS_PY.exists(), reason="no .venv-ros: `bash scripts/setup_ros_env.sh` (scripts/test.sh does)")
def test_fuzz_an_arm_bundle_over_rclpy(arm_bundle_dir):
    out, result = run_fuzz(ROS_PY, arm_bundle_dir, "rclpy", ROS_AUTOMATIC_DISCOVERY_RANGE="SUBNET",
                           ROS_DOMAIN_ID=str(1 + (os.getpid() + 7) % 100))
    check(out, result, ARM_CASES)


@pytest.mark.parametrize("command_format", ["position", "position_gains"])
def test_nothing_moves_a_joint_before_the_first_valid_state(bundle_dir, command_format):
    """No state, IMU only, start messages before any state, only out-of-range states: not one command."""
    out, result = run_fuzz(sys.executable, bundle_dir, "dds", "--cases", "0,2,3,4", "--command-format", command_format)
    check(out, result, 4)


# -- errors: one line naming the file or key, exit 2, no traceback ---------------------------------


def deploy(*args: str, python: str = sys.executable, timeout: float = 60, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([python, "-m", "ctrl_rl", "deploy", "node", "--duration", "0.5", *args],
                          capture_output=True, text=True, timeout=timeout, env={**os.environ, **env})


def one_line_error(proc: subprocess.CompletedProcess, pattern: str) -> None:
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr and len(lines) == 1, proc.stderr
    assert re.search(pattern, lines[0]), lines[0]


@pytest.mark.parametrize("content", [b"", b"not an onnx model\n", "truncated"])
def test_a_broken_bundle_is_one_line(bundle_dir, tmp_path, content):
    bad = tmp_path / "policy.onnx"
    data = (bundle_dir / "policy.onnx").read_bytes()
    bad.write_bytes(data[: len(data) // 2] if content == "truncated" else content)
    one_line_error(deploy("--bundle", str(bad)), rf"bundle {re.escape(str(bad))} \(\d+ bytes\) is not a loadable "
                                                 r"ONNX model .*re-export it")


@pytest.mark.parametrize("text, pattern", [
    ("ctrl_rl_node:\n  ros__parameters:\n    rate_hz: [1\n", r"p.yaml line \d+: not valid YAML"),
    ("ctrl_rl_node:\n  ros__parameters:\n    safety:\n      auto_start: \"no\"\n",
     r"safety.auto_start must be true or false, got 'no'"),
    ("ctrl_rl_node:\n  ros__parameters:\n    max_tlt: 0.5\n", r"unknown parameter\(s\) \['max_tlt'\]"),
])
def test_a_bad_params_file_is_one_line(bundle_dir, tmp_path, text, pattern):
    f = tmp_path / "p.yaml"
    f.write_text(text)
    one_line_error(deploy("--bundle", str(bundle_dir / "policy.onnx"), "--params", str(f)), pattern)


@pytest.mark.parametrize("setting, pattern", [
    ("rate_hz=fast", r"rate_hz must be a number, got 'fast'"),
    ("command_joint_names=[FL_hip_joint]", r"command_joint_names must name exactly the bundle's joints: unknown \[\], "
                                     r"missing \['FR_hip_joint'"),
    ("command_joint_names=[nope]", r"unknown \['nope'\]"),
    ("safety.max_tilt=4", r"max_tilt must be in \(0, pi\)"),
    ("qos.imu.reliability=sometimes", r"qos.imu: reliability must be one of"),
])
def test_a_bad_option_is_one_line(bundle_dir, setting, pattern):
    one_line_error(deploy("--bundle", str(bundle_dir / "policy.onnx"), "--set", setting), pattern)


def test_a_scan_bundle_without_a_height_map_topic_is_one_line(bundle_dir):
    """A robot without terrain perception (``height_map_topic: ""``) cannot run a policy that needs it."""
    one_line_error(deploy("--bundle", str(bundle_dir / "scan.onnx"), "--set", 'height_map_topic=""'),
                   r"observes 'height_scan', which needs a height-map source.*height_map_topic")


needs_ros = pytest.mark.skipif(not ROS_PY.exists(), reason="no .venv-ros: `bash scripts/setup_ros_env.sh`")


@needs_ros
@pytest.mark.parametrize("args, pattern", [
    (["--ros-args", "-p", "max_tlt:=0.5"], r"unknown ROS parameter\(s\) \['max_tlt'\]"),
    (["--ros-args", "-p", "rate_hz:=fast"], r"rate_hz must be a number, got 'fast'"),
    (["--set", "command_joint_names=[x]"], r"command_joint_names must name exactly"),
])
def test_rclpy_errors_are_one_line_and_exit_2(bundle_dir, args, pattern):
    """With rclpy too: one line and exit 2, never an abort (exit 134) from rclpy's threads."""
    proc = deploy("--bundle", str(bundle_dir / "policy.onnx"), "--transport", "rclpy", *args, python=str(ROS_PY),
                  ROS_AUTOMATIC_DISCOVERY_RANGE="SUBNET", ROS_DOMAIN_ID=str(1 + os.getpid() % 100))
    one_line_error(proc, pattern)


@needs_ros
def test_rclpy_broken_bundle_is_one_line(tmp_path):
    bad = tmp_path / "policy.onnx"
    bad.write_bytes(b"")
    one_line_error(deploy("--bundle", str(bad), "--transport", "rclpy", python=str(ROS_PY)), r"not a loadable ONNX")


def ros_checks(bundle_dir: Path, mode: str) -> dict:
    import json

    proc = subprocess.run([str(ROS_PY), str(HERE / "deploy_ros_checks.py"), str(bundle_dir / "policy.onnx"), mode],
                          capture_output=True, text=True, timeout=180,
                          env={**os.environ, "ROS_AUTOMATIC_DISCOVERY_RANGE": "SUBNET",
                               "ROS_DOMAIN_ID": str(1 + (os.getpid() + 7) % 100)})
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("CHECKS ")]
    assert proc.returncode == 0 and lines, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(lines[-1][len("CHECKS "):])


@needs_ros
@pytest.mark.slow
def test_ros2_param_set_applies_live_limits_and_refuses_the_rest(bundle_dir):
    r = ros_checks(bundle_dir, "params")
    assert r["reached_policy"]
    assert r["get"] == [15.0, 25.0, str(bundle_dir / "policy.onnx")]  # --set beats -p; -p beats the default
    assert r["set_string"] == [[False, "parameter safety.max_tilt must be a number, got 'high' (str)"]]
    assert not r["set_rate"][0][0] and "cannot change while the node runs" in r["set_rate"][0][1]
    assert r["mode_at_tilt_0.2_default_limit"] == "policy"
    assert r["set_tilt"] == [[True, ""]]  # and it took effect: 0.2 rad of tilt is now a fall
    assert r["after_live_set"]["mode"] == "damping" and "exceeds max_tilt 6 deg" in r["after_live_set"]["fault"]
    assert r["stop"]["exit"] == 0 and r["stop"]["result"]


@needs_ros
@pytest.mark.slow
def test_lifecycle_node_commands_only_while_active(bundle_dir):
    r = ros_checks(bundle_dir, "lifecycle")
    assert r["commands_unconfigured"] == 0 and r["commands_inactive"] == 0 and r["mode_inactive"] == "passive"
    assert r["transitions"] == [["configure", True, "inactive"], ["activate", True, "active"],
                                ["deactivate", True, "inactive"]]
    assert r["reached_policy"] and r["commands_active"] > 0
    assert r["after_deactivate"] == {"mode": "damping", "fault": None, "stop": "deactivated (lifecycle)"}
    assert r["stop"]["exit"] == 0
