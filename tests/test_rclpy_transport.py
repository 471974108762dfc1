"""The rclpy transport (deploy/transports/ros2.py), exercised in .venv-ros from the main venv's pytest.

Why subprocesses: the PyPI ROS 2 wheels re-exec the interpreter from a .pth file and must never be
installed into .venv, so every rclpy side runs as ``.venv-ros/bin/python helper.py MODE`` (built by
``bash scripts/setup_ros_env.sh``; scripts/test.sh builds it). Discovery stays on loopback
(ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST) and each test uses its own domain id.
The interop test puts the plain-cyclonedds DdsTransport (this process) against rclpy/Fast DDS.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ctrl_rl.deploy import messages as m

ROOT = Path(__file__).resolve().parents[1]
ROS_PY = ROOT / ".venv-ros" / "bin" / "python"
pytestmark = pytest.mark.skipif(
    not ROS_PY.exists(), reason="no .venv-ros: run `bash scripts/setup_ros_env.sh` (scripts/test.sh does)"
)
CYCLONE_VS_FASTDDS = (
    "<CycloneDDS><Domain><Compatibility>"
    "<IgnoreTypeInformation>1.15</IgnoreTypeInformation>"
    "</Compatibility></Domain></CycloneDDS>"
)
"""Cyclone ignores the XTypes TypeInformation of eProsima (vendor 1.15) peers and matches by type name:
Fast DDS 3.2's type objects fail Cyclone's validation, and with type info on both sides Cyclone
would wait forever for a type it cannot resolve."""

HELPER = r"""
import json, sys, threading, time
import numpy as np
from ctrl_rl.deploy import messages as m
from ctrl_rl.deploy.transports import make_transport
from ctrl_rl.deploy.transports.ros2 import RclpyTransport

def to_json(msg):
    import dataclasses
    return json.loads(json.dumps(dataclasses.asdict(msg), default=lambda a: a.tolist()))

def from_json(name, d):
    cls = m.MESSAGE_TYPES[name]
    if cls is m.DiagnosticArray:
        d = {**d, "status": [m.DiagnosticStatus(**{**s, "values": [tuple(kv) for kv in s["values"]]})
                             for s in d["status"]]}
    return cls(**{k: (np.array(v) if isinstance(getattr(cls(), k), np.ndarray) else v) for k, v in d.items()})

def wait(pred, timeout=15.0):
    end = time.monotonic() + timeout
    while not pred() and time.monotonic() < end:
        time.sleep(0.02)

mode, domain, arg = sys.argv[1], int(sys.argv[2]), sys.argv[3]
if mode == "roundtrip":  # two transports (own Context each, both executors); every type from a to b
    sent = json.loads(arg)
    a = make_transport("rclpy", namespace="robot", domain_id=domain, node_name="a")
    b = RclpyTransport(namespace="/robot", domain_id=domain, node_name="b", executor="events")
    got = {}
    for i, name in enumerate(sent):
        cls = m.MESSAGE_TYPES[name]
        b.subscribe(f"t{i}", cls, lambda msg, name=name: got.setdefault(name, to_json(msg)))
        pub = a.publisher(f"/robot/t{i}", cls)  # absolute on a, relative on b: the same topic
        wait(lambda: a.node.count_subscribers(f"t{i}") > 0)
        msg = from_json(name, sent[name])
        wait(lambda: pub(msg) or name in got, 10.0)
    topics = dict(a.node.get_topic_names_and_types())
    info = {"fqn": [a.node.get_fully_qualified_name(), b.node.get_fully_qualified_name()],
            "resolved": [a.resolve("x"), a.resolve("/abs"), a.resolve("~/priv")],
            "types": {t: topics.get(f"/robot/t{i}") for i, t in enumerate(sent)}}
    a.close(); a.close(); b.close()
    info["threads"] = [t.name for t in threading.enumerate()]
    print("RESULT", json.dumps({"got": got, "info": info}), flush=True)
elif mode == "params":
    t = make_transport("rclpy", namespace="robot", domain_id=domain, node_name="ctrl")
    try:
        out, error = t.declare_parameters(json.loads(arg)), None
    except ValueError as e:
        out, error = None, str(e)
    print("RESULT", json.dumps({"fqn": t.node.get_fully_qualified_name(), "params": out, "error": error}),
          flush=True)
    t.close()
elif mode == "echo":  # republish in/<i> on out/<i> until stdin closes
    t = make_transport("rclpy", namespace="robot", domain_id=domain, node_name="echo")
    for i, name in enumerate(json.loads(arg)):
        cls = m.MESSAGE_TYPES[name]
        t.subscribe(f"in{i}", cls, t.publisher(f"out{i}", cls))
    print("READY", flush=True)
    sys.stdin.read()
    t.close()
"""

_JS = m.JointState(
    stamp=1700000000.125,
    name=[f"j{i}" for i in range(12)],
    position=np.linspace(-1.5, 1.5, 12),
    velocity=np.arange(12) * 0.1,
    effort=np.arange(12) - 5.5,
    frame_id="base",
)
MESSAGES: dict[str, Any] = {
    "sensor_msgs/msg/JointState": _JS,
    "sensor_msgs/msg/Imu": m.Imu(
        12.5, np.array([0.5, 0.5, -0.5, 0.5]), np.array([0.1, -0.2, 0.3]), np.array([0.0, 0.5, 9.81]), "imu_link"
    ),
    "geometry_msgs/msg/Twist": m.Twist(np.array([0.5, -0.25, 0.0]), np.array([0.0, 0.0, 1.25])),
    "geometry_msgs/msg/PoseStamped": m.PoseStamped(7.5, np.array([0.28, -0.05, 0.0]), np.array([0.9, 0.1, -0.2, 0.3]),
                                                   "base_link"),
    "std_msgs/msg/Float64MultiArray": m.Float64MultiArray(np.arange(6.0) / 3, [("rows", 2, 6), ("cols", 3, 3)], 1),
    "std_msgs/msg/Float64": m.Float64(0.1234567890123),
    "std_msgs/msg/Bool": m.Bool(True),
    "std_msgs/msg/String": m.String('{"state": "running", "ü": 1}'),
    "diagnostic_msgs/msg/DiagnosticArray": m.DiagnosticArray(
        1700000000.5, [m.DiagnosticStatus(2, "ctrl_rl_node: safety", "damping: stale", "ctrl_quad",
                                          [("mode", "damping"), ("rejected", "3")]),
                       m.DiagnosticStatus(0, "other", "", "", [])], "base"),
}
assert set(MESSAGES) == set(m.MESSAGE_TYPES)


def as_json(msg: Any) -> dict[str, Any]:
    """The helper's JSON form (lists for arrays, lists for dims tuples) of a neutral message."""
    return json.loads(json.dumps(dataclasses.asdict(msg), default=np.ndarray.tolist))


def domain_id(offset: int) -> int:
    """A per-run id in 100..229 (ports 7400 + 250 * id stay < 65536), apart from the other tests'."""
    return 100 + (os.getpid() * 7 + offset) % 130


def ros_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ROS_", "PYTHON", "_ROS_WHEELS"))}
    env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    return env


def run_helper(tmp_path: Path, mode: str, domain: int, arg: Any, *extra: str) -> dict[str, Any]:
    script = tmp_path / "helper.py"
    script.write_text(HELPER)
    cmd = [str(ROS_PY), str(script), mode, str(domain), json.dumps(arg), *extra]
    p = subprocess.run(cmd, env=ros_env(), cwd=tmp_path, capture_output=True, text=True, timeout=120)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
    assert p.returncode == 0 and lines, f"helper {mode} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}"
    return json.loads(lines[-1][len("RESULT ") :])


def test_round_trip_every_message_type(tmp_path: Path) -> None:
    out = run_helper(tmp_path, "roundtrip", domain_id(0), {k: as_json(v) for k, v in MESSAGES.items()})
    for name, msg in MESSAGES.items():
        assert out["got"].get(name) == as_json(msg), name  # exact: floats, stamp, quaternion order, dims
    info = out["info"]
    assert info["fqn"] == ["/robot/a", "/robot/b"]
    assert info["resolved"] == ["/robot/x", "/abs", "/robot/a/priv"]
    assert info["types"] == {name: [name] for name in MESSAGES}  # DDS type names map back to ROS ones
    assert info["threads"] == ["MainThread"]  # close() joined the executor thread


def test_params_file_and_remaps(tmp_path: Path) -> None:
    params = tmp_path / "params.yaml"
    params.write_text(
        "/**:\n  ros__parameters:\n    kp: 40\n    safety:\n      max_torque: 33.5\n    joints: [hip, knee]\n"
        "    tags: []\n    names: []\n"
        "/other/ctrl:\n  ros__parameters:\n    policy: walk.onnx\n"
    )
    defaults = {"kp": 20.0, "kd": 0.5, "policy": "", "joints": ["a"], "tags": ["x"], "names": [],
                "safety.max_torque": 10.0, "safety.estop": True}
    ros_args = ["--ros-args", "--params-file", str(params), "-p", "kd:=0.75", "-r", "__ns:=/other"]
    out = run_helper(tmp_path, "params", domain_id(1), defaults, *ros_args)
    assert out["fqn"] == "/other/ctrl"  # -r __ns:= wins over the constructor's namespace
    assert out["params"] == {
        "kp": 40,  # as given: the node's typed loader accepts an int for a float (test_safety.py)
        "kd": 0.75,
        "policy": "walk.onnx",  # node-specific section
        "joints": ["hip", "knee"],
        "tags": [],  # YAML `[]` reaches rclpy as NOT_SET; still an empty list here
        "names": [],
        "safety.max_torque": 33.5,  # nested YAML <-> dotted names
        "safety.estop": True,
    }
    # a ROS parameter nobody declared is an error naming it, not silently ignored
    out = run_helper(tmp_path, "params", domain_id(1), defaults, "--ros-args", "-p", "max_tlt:=0.5")
    assert out["params"] is None and "unknown ROS parameter(s) ['max_tlt']" in out["error"]


def test_interop_cyclonedds_dds_transport_with_rclpy_fastdds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """DdsTransport (plain cyclonedds, this venv) -> rclpy/Fast DDS echo node (.venv-ros) -> DdsTransport."""
    pytest.importorskip("cyclonedds", reason="cyclonedds not installed in this venv (deploy extra)")
    if not (ROOT / "src" / "ctrl_rl" / "deploy" / "transports" / "dds.py").exists():
        pytest.skip("deploy/transports/dds.py not written yet")
    from ctrl_rl.deploy.transports.dds import DdsTransport

    domain = domain_id(2)
    names = list(MESSAGES)
    script = tmp_path / "helper.py"
    script.write_text(HELPER)
    proc = subprocess.Popen(
        [str(ROS_PY), str(script), "echo", str(domain), json.dumps(names)],
        env=ros_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "READY"
        uri = os.environ.get("CYCLONEDDS_URI")
        monkeypatch.setenv("CYCLONEDDS_URI", CYCLONE_VS_FASTDDS + ("," + uri if uri else ""))
        got: dict[str, Any] = {}
        with DdsTransport(namespace="robot", domain_id=domain, localhost_only=True) as dds:
            pubs = []
            for i, name in enumerate(names):
                cls = m.MESSAGE_TYPES[name]
                dds.subscribe(f"out{i}", cls, lambda msg, name=name: got.setdefault(name, as_json(msg)))
                pubs.append(dds.publisher(f"in{i}", cls))
            assert dds.wait_for_subscribers(1, 20.0), "Fast DDS readers not matched by cyclonedds writers"
            assert dds.wait_for_publishers(1, 10.0), "Fast DDS writers not matched by cyclonedds readers"
            end = time.monotonic() + 15.0
            while len(got) < len(names) and time.monotonic() < end:
                for pub, name in zip(pubs, names, strict=True):
                    if name not in got:
                        pub(MESSAGES[name])
                time.sleep(0.05)
    finally:
        out, _ = proc.communicate(input="", timeout=30)
    assert proc.returncode == 0, out
    for name, msg in MESSAGES.items():
        assert got.get(name) == as_json(msg), f"{name} via rclpy echo: {out}"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-v"]))
