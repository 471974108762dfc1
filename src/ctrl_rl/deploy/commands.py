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

from ctrl_rl.robots.packages import resolve
from ctrl_rl.utils.arguments import OneLineParser
from ctrl_rl.utils.extras import missing
from ctrl_rl.utils.files import atomic_write
from ctrl_rl.utils.interrupts import GracefulStop

from .arm_node import is_arm_bundle
from .gait_files import sim2sim_report
from .gait_report import GaitCheckFailed
from .node import DeployNode
from .node_params import NodeParams
from .robot_policy import RobotPolicy
from .runtime import OnnxPolicy, bundle_file
from .transports import TRANSPORTS, make_transport
from .typed_params import field_docs

log = logging.getLogger("ctrl_rl.deploy")

SIM2SIM_STATE_TIMEOUT = 0.4
"""sim2sim's default ``safety.state_timeout`` (s). The simulated robot is a Python process on the
node's own CPU, so its 500 Hz state stream stalls when the machine is busy (seen on a 2-core CI
machine: 25 ms, and 113 ms during stand-up; on a slower one 266 ms during stand-up, which 0.25 s
called a fault), which the robot default (2 control periods = 40 ms at 50 Hz) calls a fault.
sim2sim checks the policy, not the driver's timing (kept below the 0.5 s command timeout, so a dead
bridge still reads as stale state); the node's status reports ``max_state_age_ms`` to show the
stalls. ``ctrl-rl deploy node`` keeps the strict default."""

EPILOG = """examples:
  ctrl-rl deploy node --bundle logs/ppo/quadruped_velocity_flat/<run>/exported/policy.onnx
  ctrl-rl deploy node --params src/ctrl_rl/configs/deploy/node.yaml --transport rclpy
  ctrl-rl deploy sim2sim logs/.../exported/policy.onnx --duration 20 --cmd-vel 0.5 0 0
  ctrl-rl deploy node --params src/ctrl_rl/configs/deploy/node.yaml --record logs/robot  # + logs
"""


LIVE_PARAMETERS = ("safety.max_tilt", "safety.max_joint_vel", "safety.max_gyro", "safety.joint_limit_margin",
                   "safety.command_timeout", "safety.state_timeout", "safety.damping_kd", "safety.passive_kd",
                   "safety.height_map_timeout", "safety.max_height_map", "safety.object_pose_timeout")
"""Parameters ``ros2 param set`` changes while the node runs (validated, then applied at the next tick);
every other parameter is refused with the reason (restart the node with the new value)."""


def _option_values(args: argparse.Namespace) -> dict[str, Any]:
    """The node's own options: ``--bundle``, ``--record``, ``--set key=value`` (YAML values)."""
    import yaml

    values: dict[str, Any] = {}
    if args.bundle:
        values["bundle"] = str(args.bundle)
    if args.record:
        values["record_dir"] = str(args.record)
    for kv in args.set or []:
        key, sep, raw = kv.partition("=")
        if not sep or not key:
            raise ValueError(f"--set takes key=value, got '{kv}'")
        try:
            values[key] = yaml.safe_load(raw)
        except yaml.YAMLError:
            raise ValueError(f"--set {key}: '{raw}' is not a YAML value") from None
    return values


def resolve_params(args: argparse.Namespace, transport: Any = None, require_bundle: bool = True):
    """Every source in one order, each later one winning: defaults < ``--params`` file < ROS
    parameters (``--ros-args --params-file`` / ``-p``, rclpy) < the node's own options. All pass
    the same typed check; a value a later source overrides is named in a warning; with rclpy the
    node's ROS parameters are then set to what the node really uses (``ros2 param get`` tells the truth)."""
    base = (NodeParams.from_yaml(args.params) if args.params else NodeParams()).flat()
    options = _option_values(args)
    NodeParams.from_dict({**base, **options})  # fail on a bad option before any transport exists
    values = dict(base)
    if transport is not None and hasattr(transport, "declare_parameters"):
        safety_docs = field_docs(type(NodeParams().safety))
        docs = {**field_docs(NodeParams), **{f"safety.{k}": v for k, v in safety_docs.items()}}
        values = transport.declare_parameters(base, docs)
    for key, v in options.items():
        if key in values and values[key] != base.get(key) and values[key] != v:
            log.warning("parameter %s: the node's option (%r) wins over the ROS parameter (%r)", key, v, values[key])
    params = NodeParams.from_dict({**values, **options})
    if transport is not None and hasattr(transport, "set_parameter_values"):
        transport.set_parameter_values(params.flat())
    if require_bundle and not params.bundle:
        raise ValueError("no policy bundle: pass --bundle PATH or set 'bundle' in the params file")
    return params


def _live_update(get_node: Any, get_params: Any, set_params: Any):
    """The ``ros2 param set`` check: validate the whole parameter set, apply live ones, refuse the rest."""
    def check(changes: dict[str, Any]) -> str | None:
        current = get_params().flat()
        try:
            new = NodeParams.from_dict({**current, **changes})
        except ValueError as e:
            return str(e)
        node = get_node()
        fixed = sorted(k for k in changes if k not in LIVE_PARAMETERS and new.flat()[k] != current[k])
        if fixed and node is not None:
            return (f"{fixed} cannot change while the node runs: restart it with the new value "
                    f"(live: {', '.join(LIVE_PARAMETERS)})")
        set_params(new)
        if node is not None:
            node.apply_safety(new.safety)
        return None

    return check


STOPPING = "sending a damping command and the final status"
"""What the first SIGINT/SIGTERM does to the node (a second exits at once: ``GracefulStop``)."""


def run_node(args: argparse.Namespace) -> dict[str, Any]:
    """Validate parameters and load the bundle, then the transport and the node; run until a signal or
    ``--duration``; print the final status."""
    run = run_lifecycle_node if getattr(args, "lifecycle", False) else _run_node
    with GracefulStop(STOPPING) as signals:
        return run(args, signals)


def _stop_on_signal(signals: Any, stop: Any) -> None:
    """From now on the first signal calls ``stop(reason)``; one that came before already has. The
    reason (``stopped by signal (SIGTERM)``) is the status's ``stop``: an operator's stop, not a fault."""
    import signal

    def reason(signum: int) -> str:
        return f"stopped by signal ({signal.Signals(signum).name})"

    signals.on_signal = lambda signum: stop(reason(signum))
    if signals.signum is not None:
        stop(reason(signals.signum))


def _run_node(args: argparse.Namespace, signals: Any) -> dict[str, Any]:
    # a bad file, option or bundle fails here: no transport, no threads (with rclpy the bundle may
    # still come from --ros-args)
    if args.transport == "unitree":  # LowCmd carries kp and kd per motor
        args.set = [*(args.set or []), "command_format=position_gains"]
    params = resolve_params(args, require_bundle=args.transport != "rclpy")
    policy = RobotPolicy(params.bundle, params.sources()) if params.bundle else None
    transport = make_transport(args.transport, namespace=args.namespace, node_name="ctrl_rl_node",
                               unitree=_unitree_side(params, policy) if args.transport == "unitree" else None)
    try:
        if hasattr(transport, "declare_parameters"):  # rclpy: `ros2 param get/set`, --ros-args --params-file
            ros_params = resolve_params(args, transport)
            if policy is None or (ros_params.bundle, ros_params.sources()) != (params.bundle, params.sources()):
                policy = RobotPolicy(ros_params.bundle, ros_params.sources())
            params = ros_params
        node = DeployNode(params, transport, policy)
        state = {"params": params}
        if hasattr(transport, "on_set_parameters"):
            transport.on_set_parameters(_live_update(lambda: node, lambda: state["params"],
                                                     lambda p: state.__setitem__("params", p)))
        _stop_on_signal(signals, node.stop)
        status = node.run(args.duration)
    finally:
        transport.close()
    return _report(args, status)


def _unitree_side(params: Any, policy: Any) -> dict[str, Any]:
    """The node's side of ``--transport unitree``: the family and the joints of the outgoing command."""
    from .unitree_msgs import family_for  # optional extra: cyclonedds, for the unitree transport only

    meta, joints = policy.policy.metadata, list(params.command_joint_names or policy.joint_names)
    family = params.unitree_family
    if family == "auto":
        family = family_for(str(meta.get("robot", "")), len(joints))
    return {"family": family, "joint_names": joints, "side": "node"}


def run_lifecycle_node(args: argparse.Namespace, signals: Any) -> dict[str, Any]:
    """A managed node (rclpy): configure loads and checks the bundle and creates the topics,
    activate starts commands, deactivate goes to damping, cleanup removes the topics, shutdown ends."""
    import threading

    from .transports.ros2 import RclpyTransport  # optional: rclpy, from a ROS 2 install

    if args.transport != "rclpy":
        raise ValueError("--lifecycle needs --transport rclpy (a managed node is a ROS 2 node)")
    resolve_params(args, require_bundle=False)  # fail early on a bad file or option
    transport = RclpyTransport(namespace=args.namespace, node_name="ctrl_rl_node", lifecycle=True)
    state: dict[str, Any] = {"node": None, "params": None}
    configured, done = threading.Event(), threading.Event()

    def configure() -> None:
        params = state["params"]
        node = DeployNode(params, transport, RobotPolicy(params.bundle, params.sources()), enabled=False)
        state["node"] = node
        configured.set()

    def cleanup() -> None:
        node = state.pop("node", None)
        state["node"] = None
        configured.clear()
        if node is not None:
            node.stop("stopped: lifecycle cleanup")
        transport.destroy_entities()

    def shutdown(reason: str = "stopped: lifecycle shutdown") -> None:
        done.set()
        if state["node"] is not None:
            state["node"].stop(reason)

    status: dict[str, Any] = {}
    try:
        state["params"] = resolve_params(args, transport)
        transport.on_set_parameters(_live_update(lambda: state["node"], lambda: state["params"],
                                                 lambda p: state.__setitem__("params", p)))
        transport.on_transition(configure=configure, activate=lambda: state["node"].activate(),
                                deactivate=lambda: state["node"].deactivate(), cleanup=cleanup,
                                shutdown=shutdown, error=lambda: shutdown("stopped: lifecycle error transition"))
        _stop_on_signal(signals, shutdown)
        log.info("lifecycle node ctrl_rl_node: unconfigured; configure, then activate, to start commands")
        end = None if args.duration is None else time.monotonic() + args.duration
        while not done.is_set() and (end is None or time.monotonic() < end):
            if not configured.wait(0.1):
                continue
            node = state["node"]
            status = node.run(None if end is None else max(0.0, end - time.monotonic()))
            if state["node"] is node and not done.is_set():  # --duration ran out
                break
    finally:
        transport.close()
    return _report(args, status or {"mode": "unconfigured", "ticks": 0, "deadline_misses": 0, "rejected": 0,
                              "latency_us": {}, "period_error_ms": {}})


def _report(args: argparse.Namespace, status: dict[str, Any]) -> dict[str, Any]:
    """The run's full status as JSON in ``--summary`` (its path printed), then the RESULT line."""
    stamp = f"{time.strftime('%Y-%m-%d_%H-%M-%S')}_{os.getpid()}"  # two runs may end in the same second
    path = Path(args.summary or Path("logs", "deploy", f"{args.command}_{stamp}.json"))
    args.summary_path = path  # sim2sim adds the bridge's side and the gait report to it
    with atomic_write(path) as tmp:
        tmp.write_text(json.dumps(status, indent=1) + "\n")
    print(f"summary: {path.resolve()}")
    lat = status["latency_us"].get("inference", {})
    print(f"RESULT mode={status.get('mode_at_stop') or status['mode']} ticks={status['ticks']} "
          f"policy_ticks={status['policy_ticks']} published={status['published']} "
          f"deadline_misses={status['deadline_misses']} "
          f"rejected={status['rejected']} inference_p50_us={lat.get('p50', float('nan'))} "
          f"period_p99_err_ms={status['period_error_ms'].get('p99', float('nan'))}")
    return status


def run_sim2sim(args: argparse.Namespace) -> dict[str, Any]:
    """The bridge as a child process, the node here; both on the same topics over ``--transport``."""
    import importlib.util

    needed = ["mujoco", *(["cyclonedds"] if args.transport in ("dds", "unitree") else [])]
    for module in needed:  # before the bridge starts: its traceback would come first
        if importlib.util.find_spec(module) is None:
            raise ModuleNotFoundError(f"No module named '{module}'", name=module)
    args.bundle = args.bundle or args.bundle_pos
    meta = OnnxPolicy(args.bundle).metadata
    workdir = Path(tempfile.mkdtemp(prefix="ctrl_rl_sim2sim_"))
    summary_path, gait_path = workdir / "bridge.json", workdir / "gait.npz"
    if args.transport == "unitree":  # LowCmd carries kp and kd per motor, on both sides
        args.command_format = "position_gains"
    if is_arm_bundle(meta):
        return run_arm_sim2sim(args, meta, workdir)
    cmd = [sys.executable, "-m", "ctrl_rl.deploy.sim2sim", "--transport", args.transport,
           "--robot", args.robot or bundle_robot(meta, workdir, args.bundle),
           "--state-rate", str(args.state_rate), "--physics-dt", str(args.physics_dt),
           "--summary", str(summary_path),
           "--command-format", args.command_format, "--latency", str(args.latency),
           "--noise", *map(str, args.noise), "--obs-noise", str(args.obs_noise),
           "--command-latency", str(args.command_latency), "--control-dt", str(meta.get("control_dt", 0.02)),
           "--gait-trace", str(gait_path), "--seed", str(args.seed)]
    if args.namespace:
        cmd += ["--namespace", args.namespace]
    if meta.get("terrain"):  # a rough-terrain policy walks on the terrain it trained on
        cmd += ["--terrain", json.dumps(meta["terrain"])]
        if not meta.get("limb_collisions", True):
            cmd.append("--no-limb-collisions")
        if args.terrain_cell:
            cmd += ["--terrain-cell", *map(str, args.terrain_cell)]
    if meta.get("height_scan"):  # the bridge plays the robot's terrain perception too
        cmd += ["--height-map", json.dumps(meta["height_scan"])]
    if args.cmd_vel:
        cmd += ["--cmd-vel", *map(str, args.cmd_vel)]
    if args.joint_order:  # the robot driver's order: JointState is mapped by name, commands go in this order
        cmd += ["--joint-order", args.joint_order]
        if args.joint_order != "reversed":
            args.set = [*(args.set or []), f"command_joint_names=[{args.joint_order}]"]
        else:
            names = list(meta["joint_names"])[::-1]
            args.set = [*(args.set or []), f"command_joint_names=[{','.join(names)}]"]
    status, sim, died = _node_against_bridge(args, cmd, summary_path)
    report = sim2sim_report(args, status, sim, gait_path)
    print(result_line({"mode": status.get("mode_at_stop") or status["mode"],
                       "base_height": sim.get("base_height", float("nan")),
                       "cmd_vx": float(args.cmd_vel[0]) if args.cmd_vel else 0.0,
                       "forward_velocity": sim.get("forward_velocity", float("nan")),
                       "max_tilt": sim.get("max_tilt", float("nan")), "base_x": sim.get("base_x", float("nan")),
                       "base_y": sim.get("base_y", float("nan")), "commands": sim.get("commands", 0),
                       "deadline_misses": status["deadline_misses"],
                       **(report.result_fields() if report is not None else {"gait": "none"})}))
    _check_ran(status, died)
    if args.require_gait and (report is None or not report.passed):
        failed = ", ".join(report.failed()) if report is not None else "no policy-mode trace to report"
        raise GaitCheckFailed(f"the gait report's bars failed: {failed}")
    return {"node": status, "bridge": sim, "gait": report}


def _node_against_bridge(args: argparse.Namespace, cmd: list[str], summary_path: Path
                         ) -> tuple[dict[str, Any], dict[str, Any], int | None]:
    """Start the bridge (``cmd``), run the node here with sim2sim's settings until ``--duration``, stop the
    bridge; returns the node's final status, the bridge's summary and the bridge's exit status if it died."""
    args.set = [*(args.set or []), f"command_format={args.command_format}"]
    user_timeout = any(kv.startswith("safety.state_timeout=") for kv in args.set)
    if not user_timeout and not (args.params and NodeParams.from_yaml(args.params).safety.state_timeout):
        args.set.insert(0, f"safety.state_timeout={SIM2SIM_STATE_TIMEOUT}")
    if not any(kv.startswith("safety.auto_start=") for kv in args.set):  # no operator at a simulated robot
        args.set.insert(0, "safety.auto_start=true")
    bridge = subprocess.Popen(cmd, env=os.environ.copy(), stdout=subprocess.DEVNULL)  # its RESULT is in ours
    try:
        time.sleep(0.5)  # let the bridge create its topics (discovery continues in the background)
        status = run_node(args)
        died = bridge.poll()  # the bridge runs until told to stop: an exit before that is a failure
    finally:
        bridge.terminate()
        try:
            bridge.wait(timeout=10)
        except subprocess.TimeoutExpired:
            bridge.kill()
    return status, json.loads(summary_path.read_text()) if summary_path.exists() else {}, died


def _check_ran(status: dict[str, Any], died: int | None) -> None:
    """A :class:`Sim2SimFailure` unless the bridge lasted the run and the node ran the policy."""
    if died is not None:
        raise Sim2SimFailure(f"the sim2sim bridge (the simulated robot) exited with status {died} before the run "
                             "ended; its error is printed above")
    if not status.get("policy_ticks"):
        raise Sim2SimFailure(f"the node never ran the policy (mode {status.get('mode_at_stop') or status['mode']}, "
                             f"waiting for: {status.get('waiting') or status.get('fault') or 'nothing'})")


def run_arm_sim2sim(args: argparse.Namespace, meta: dict[str, Any], workdir: Path) -> dict[str, Any]:
    """An arm bundle against the arm bridge (``arm_sim2sim.py``); the verdict is the task's success rate over
    the targets the bridge sent while the policy ran, on the RESULT line and in ``--summary`` (as ``bridge``)."""
    if args.transport == "unitree" or args.joint_order or args.cmd_vel or args.terrain_cell:
        raise ValueError("an arm bundle's sim2sim takes neither --transport unitree (Unitree's robots only), "
                         "--joint-order, --cmd-vel nor --terrain-cell")
    from .arm_sim2sim import bridge_args, verdict  # optional mujoco: sim2sim needs it, the robot node never

    summary_path = workdir / "bridge.json"
    cmd = [sys.executable, *bridge_args(meta, args.robot or bundle_robot(meta, workdir, args.bundle)),
           "--transport", args.transport, "--state-rate", str(args.state_rate), "--physics-dt", str(args.physics_dt),
           "--command-format", args.command_format, "--summary", str(summary_path), "--seed", str(args.seed),
           *(["--namespace", args.namespace] if args.namespace else [])]
    status, sim, died = _node_against_bridge(args, cmd, summary_path)
    with atomic_write(args.summary_path) as tmp:
        tmp.write_text(json.dumps({**status, "bridge": sim}, indent=1) + "\n")
    sentence, fields = verdict(meta, status, sim)
    print(sentence)
    print(result_line(fields))
    _check_ran(status, died)
    return {"node": status, "bridge": sim}


def result_line(fields: dict[str, Any]) -> str:
    """``RESULT sim2sim key=value ...`` (floats to 4 significant digits)."""
    return "RESULT sim2sim " + " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                                        for k, v in fields.items())


class Sim2SimFailure(RuntimeError):
    """sim2sim ran but did not show the policy driving the simulated robot (the command exits 1)."""


def bundle_robot(meta: dict[str, Any], workdir: Path, bundle: str | Path | None = None) -> str:
    """The robot a bundle was trained on, for the bridge: its config as the bundle carries it (``robot_config``,
    an arm's ``arm_config``; written to a YAML in ``workdir``), else its name (bundles from before the config
    was carried). A relative MJCF path is relative to the folder of ``bundle`` (``ctrl-rl export`` writes an
    arm's so: the run may move with its MJCF)."""
    config = meta.get("robot_config") or meta.get("arm_config")
    if not config:
        return str(meta.get("robot") or "ctrl_quad")
    import yaml

    mjcf = str(config.get("mjcf", ""))
    if mjcf.startswith("pkg:"):  # a packaged model resolves on any machine that fetched it
        resolve(mjcf)  # not fetched: the error names `ctrl-rl fetch-robots`
    else:
        path = Path(mjcf) if Path(mjcf).is_absolute() or bundle is None else Path(bundle).parent / mjcf
        if not path.is_file():  # the bundle names the MJCF where it trained: the run has moved without it
            where = "" if str(path) == mjcf else f" (looked for {path})"
            raise FileNotFoundError(f"the bundle's robot {config['name']} was trained on the MJCF {mjcf}, which is not "
                                    f"on this machine{where}; pass its robot YAML with --robot <robot.yaml> (the MJCF "
                                    "beside it)")
        config = {**config, "mjcf": str(path.resolve())}
    path = workdir / f"{config['name']}.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return str(path)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="ctrl-rl deploy", formatter_class=argparse.RawDescriptionHelpFormatter,
                                     description=__doc__.split("\n\n")[0].replace("``", ""), epilog=EPILOG)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, text in (("node", "run the deploy node (safety state machine + policy) on ROS 2 topics"),
                       ("sim2sim", "the node against a MuJoCo robot on the same topics (bridge process)")):
        p = sub.add_parser(name, help=text, description=text)
        if name == "sim2sim":
            p.add_argument("bundle_pos", nargs="?", metavar="BUNDLE", type=bundle_file,
                           help="exported/policy.onnx (or its folder, or the run)")
        p.add_argument("--bundle", default=None, type=bundle_file,
                       help="exported/policy.onnx, its folder or the run (or 'bundle' in --params)")
        p.add_argument("--params", default=None, help="ROS 2 params YAML (ctrl_rl/configs/deploy/node.yaml)")
        p.add_argument("--set", action="append", metavar="KEY=VALUE",
                       help="override a parameter, e.g. --set safety.max_tilt=0.6 (repeatable)")
        p.add_argument("--transport", choices=TRANSPORTS, default="dds",
                       help="dds: plain DDS (cyclonedds) in ROS 2's wire format; rclpy: ROS 2")
        p.add_argument("--namespace", default="", help="ROS namespace of every topic")
        p.add_argument("--duration", type=float, default=None, help="seconds (default: until Ctrl-C)")
        p.add_argument("--summary", default=None, metavar="PATH",
                       help="the run's JSON status at the end; sim2sim: with the gait report, its PNG next to it "
                            "(default: logs/deploy/<command>_<date_time>.json)")
        p.add_argument("--record", default=None, metavar="DIR",
                       help="write one robot log (HDF5) per policy episode into DIR (parameter record_dir)")
        if name == "node":
            p.add_argument("--lifecycle", action="store_true",
                           help="a managed ROS 2 node (--transport rclpy): configure, activate, deactivate, ...")
        if name == "sim2sim":
            p.add_argument("--robot", default=None, help="robot YAML name or path (default: the bundle's robot)")
            p.add_argument("--state-rate", type=float, default=500.0, help="JointState/Imu rate (Hz)")
            p.add_argument("--physics-dt", type=float, default=0.002, help="bridge physics/PD step (s)")
            p.add_argument("--command-format", choices=("position", "position_gains"), default="position_gains")
            p.add_argument("--cmd-vel", type=float, nargs=3, default=None, metavar=("VX", "VY", "WZ"),
                           help="velocity command the bridge publishes at 10 Hz")
            p.add_argument("--joint-order", default="", help="bridge's joint order: 'reversed' or names a,b,...")
            p.add_argument("--noise", type=float, nargs=3, default=(0.0, 0.0, 0.0), metavar=("POS", "VEL", "GYRO"))
            p.add_argument("--obs-noise", type=float, default=0.0, metavar="LEVEL",
                           help="uniform noise on the state the node receives, LEVEL x training's (legged_gym's "
                                "noise_level: 1 = +-0.01 rad, +-1.5 rad/s joints, +-0.2 rad/s gyro, +-0.05 rad tilt)")
            p.add_argument("--latency", type=float, default=0.0, help="bridge's sensing-to-publish delay (s)")
            p.add_argument("--seed", type=int, default=0,
                           help="the simulated robot's draws: sensor noise; an arm's targets, cell resets and object")
            p.add_argument("--command-latency", type=float, default=0.0,
                           help="bridge's delay from receiving a joint command to applying it (s)")
            p.add_argument("--require-gait", action="store_true",
                           help="exit 1 when a bar of the gait report fails (docs/deploy.md#the-gait-report)")
            p.add_argument("--terrain-cell", type=int, nargs=2, default=None, metavar=("ROW", "COL"),
                           help="rough-terrain bundles: the sub-terrain the robot starts on (default: middle row, "
                                "column 0)")
        p.set_defaults(func=run_node if name == "node" else run_sim2sim)
    return parser


def main(argv: list[str]) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s: %(message)s")
    if "--ros-args" in argv:  # rclpy reads these itself (e.g. --ros-args --params-file x.yaml)
        argv = argv[: argv.index("--ros-args")]
    args = build_parser().parse_args(argv)
    try:
        args.func(args)
    except Sim2SimFailure as e:
        print(f"ctrl-rl deploy: sim2sim failed: {e}", file=sys.stderr)
        sys.stderr.flush()
        sys.stdout.flush()
        os._exit(1)
    except GaitCheckFailed as e:  # the run worked; the gait it measured does not meet a bar
        print(f"ctrl-rl deploy: gait check failed: {e}", file=sys.stderr)
        sys.stderr.flush()
        sys.stdout.flush()
        os._exit(1)
    except (ValueError, FileNotFoundError, PermissionError, ImportError) as e:
        if os.environ.get("CTRL_RL_DEBUG"):
            raise
        print(f"ctrl-rl deploy: error: {missing(e, f'ctrl-rl deploy {args.command}') or e}", file=sys.stderr)
        sys.stderr.flush()
        sys.stdout.flush()
        # os._exit: no interpreter teardown racing transport threads (rclpy's C++ threads once
        # aborted with "terminate called without an active exception" there)
        os._exit(2)
