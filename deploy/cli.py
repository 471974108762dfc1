"""``ctrl-rl deploy``: run the deploy node, or the node against the MuJoCo sim2sim bridge.

Dispatched before the training CLI is imported, so it works on a robot computer with only
``pip install ctrl-rl[deploy]`` (numpy, onnxruntime, cyclonedds; never torch).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .transports import TRANSPORTS

SIM2SIM_STATE_TIMEOUT = 0.25
"""sim2sim's default ``safety.state_timeout`` (s). The simulated robot is a Python process on the
node's own CPU, so its 500 Hz state stream stalls when the machine is busy (seen on a 2-core CI
machine: 25 ms, and 113 ms during stand-up), which the robot default (0.75 control periods =
15 ms at 50 Hz) calls a fault. sim2sim checks the policy, not the driver's timing (kept below the 0.5 s
command timeout, so a dead bridge still reads as stale state); the node's
status reports ``max_state_age_ms`` to show the stalls. ``ctrl-rl deploy node`` keeps the strict
default."""

EPILOG = """examples:
  ctrl-rl deploy node --bundle logs/ppo/quadruped_velocity_flat/<run>/exported/policy.onnx
  ctrl-rl deploy node --params configs/deploy/node.yaml --transport rclpy
  ctrl-rl deploy sim2sim logs/.../exported/policy.onnx --duration 20 --cmd-vel 0.5 0 0
  ctrl-rl deploy node --params configs/deploy/node.yaml --record logs/robot   # + episode logs
"""


def _node_params(args: argparse.Namespace):
    from .node import NodeParams

    values: dict[str, Any] = {}
    if args.params:
        values = NodeParams.from_yaml(args.params).flat()
    if args.bundle:
        values["bundle"] = str(args.bundle)
    if args.record:
        values["record_dir"] = str(args.record)
    for kv in args.set or []:
        key, sep, raw = kv.partition("=")
        if not sep:
            raise ValueError(f"--set takes key=value, got '{kv}'")
        import yaml

        values[key] = yaml.safe_load(raw)
    params = NodeParams.from_dict(values)
    if not params.bundle:
        raise ValueError("no policy bundle: pass --bundle PATH or set 'bundle' in the params file")
    if not Path(params.bundle).is_file():
        raise ValueError(f"bundle {params.bundle} does not exist (export one with `ctrl-rl export <run>`)")
    return params


def run_node(args: argparse.Namespace) -> dict[str, Any]:
    """Build transport + node, run until Ctrl-C or ``--duration``, print the final status."""
    from .node import DeployNode
    from .transports import make_transport

    params = _node_params(args)
    transport = make_transport(args.transport, namespace=args.namespace, node_name="ctrl_rl_node")
    if hasattr(transport, "declare_parameters"):  # rclpy: `ros2 param get` and --params-file work
        from .node import NodeParams

        values = transport.declare_parameters(params.flat())
        if args.bundle:  # the command line wins over a params file's `bundle`
            values["bundle"] = str(args.bundle)
        if args.record:
            values["record_dir"] = str(args.record)
        params = NodeParams.from_dict(values)
    node = DeployNode(params, transport)
    try:
        status = node.run(args.duration)
    except KeyboardInterrupt:
        status = node.status()
    finally:
        transport.close()
    print(json.dumps(status, indent=1))
    lat = status["latency_us"].get("inference", {})
    print(f"RESULT mode={status['mode']} ticks={status['ticks']} deadline_misses={status['deadline_misses']} "
          f"rejected={status['rejected']} inference_p50_us={lat.get('p50', float('nan'))} "
          f"period_p99_err_ms={status['period_error_ms'].get('p99', float('nan'))}")
    return status


def run_sim2sim(args: argparse.Namespace) -> dict[str, Any]:
    """The bridge as a child process, the node here; both on the same topics over ``--transport``."""
    args.bundle = args.bundle or args.bundle_pos
    summary_path = Path(tempfile.mkdtemp(prefix="ctrl_rl_sim2sim_")) / "bridge.json"
    cmd = [sys.executable, "-m", "ctrl_rl.deploy.sim2sim", "--transport", args.transport,
           "--robot", args.robot, "--state-rate", str(args.state_rate), "--physics-dt", str(args.physics_dt),
           "--summary", str(summary_path),
           "--command-format", args.command_format, "--latency", str(args.latency),
           "--noise", *map(str, args.noise)]
    if args.namespace:
        cmd += ["--namespace", args.namespace]
    if args.cmd_vel:
        cmd += ["--cmd-vel", *map(str, args.cmd_vel)]
    if args.joint_order:  # the robot driver's order: JointState is mapped by name, commands go in this order
        cmd += ["--joint-order", args.joint_order]
        if args.joint_order != "reversed":
            args.set = [*(args.set or []), f"command_joint_names=[{args.joint_order}]"]
        else:
            from .robot_policy import RobotPolicy

            names = RobotPolicy(args.bundle).joint_names[::-1]
            args.set = [*(args.set or []), f"command_joint_names=[{','.join(names)}]"]
    args.set = [*(args.set or []), f"command_format={args.command_format}"]
    from .node import NodeParams

    user_timeout = any(kv.startswith("safety.state_timeout=") for kv in args.set)
    if not user_timeout and not (args.params and NodeParams.from_yaml(args.params).safety.state_timeout):
        args.set.insert(0, f"safety.state_timeout={SIM2SIM_STATE_TIMEOUT}")
    bridge = subprocess.Popen(cmd, env=os.environ.copy())
    try:
        time.sleep(0.5)  # let the bridge create its topics (discovery continues in the background)
        status = run_node(args)
    finally:
        bridge.terminate()
        try:
            bridge.wait(timeout=10)
        except subprocess.TimeoutExpired:
            bridge.kill()
    sim = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    print("RESULT sim2sim " + " ".join(
        f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
        for k, v in {"mode": status["mode"], "base_height": sim.get("base_height", float("nan")),
                     "forward_velocity": sim.get("forward_velocity", float("nan")),
                     "max_tilt": sim.get("max_tilt", float("nan")), "commands": sim.get("commands", 0),
                     "deadline_misses": status["deadline_misses"]}.items()))
    return {"node": status, "bridge": sim}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ctrl-rl deploy", formatter_class=argparse.RawDescriptionHelpFormatter,
                                     description=__doc__.split("\n\n")[0], epilog=EPILOG)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, text in (("node", "run the deploy node (safety state machine + policy) on ROS 2 topics"),
                       ("sim2sim", "the node against a MuJoCo robot on the same topics (bridge process)")):
        p = sub.add_parser(name, help=text, description=text)
        if name == "sim2sim":
            p.add_argument("bundle_pos", nargs="?", metavar="BUNDLE", help="exported/policy.onnx")
        p.add_argument("--bundle", default=None, help="exported/policy.onnx (or 'bundle' in --params)")
        p.add_argument("--params", default=None, help="ROS 2 params YAML (configs/deploy/node.yaml)")
        p.add_argument("--set", action="append", metavar="KEY=VALUE",
                       help="override a parameter, e.g. --set safety.max_tilt=0.6 (repeatable)")
        p.add_argument("--transport", choices=TRANSPORTS, default="dds",
                       help="dds: plain DDS (cyclonedds) in ROS 2's wire format; rclpy: ROS 2")
        p.add_argument("--namespace", default="", help="ROS namespace of every topic")
        p.add_argument("--duration", type=float, default=None, help="seconds (default: until Ctrl-C)")
        p.add_argument("--record", default=None, metavar="DIR",
                       help="write one robot log (HDF5) per policy episode into DIR (parameter record_dir)")
        if name == "sim2sim":
            p.add_argument("--robot", default="ctrl_quad")
            p.add_argument("--state-rate", type=float, default=500.0, help="JointState/Imu rate (Hz)")
            p.add_argument("--physics-dt", type=float, default=0.002, help="bridge physics/PD step (s)")
            p.add_argument("--command-format", choices=("position", "position_gains"), default="position_gains")
            p.add_argument("--cmd-vel", type=float, nargs=3, default=None, metavar=("VX", "VY", "WZ"),
                           help="velocity command the bridge publishes at 10 Hz")
            p.add_argument("--joint-order", default="", help="bridge's joint order: 'reversed' or names a,b,...")
            p.add_argument("--noise", type=float, nargs=3, default=(0.0, 0.0, 0.0), metavar=("POS", "VEL", "GYRO"))
            p.add_argument("--latency", type=float, default=0.0, help="bridge's sensing-to-publish delay (s)")
        p.set_defaults(func=run_node if name == "node" else run_sim2sim)
    return parser


def main(argv: list[str]) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s: %(message)s")
    if "--ros-args" in argv:  # rclpy reads these itself (e.g. --ros-args --params-file x.yaml)
        argv = argv[: argv.index("--ros-args")]
    args = build_parser().parse_args(argv)
    try:
        args.func(args)
    except (ValueError, FileNotFoundError) as e:
        print(f"ctrl-rl deploy: error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
