"""Fuzz the deploy node from a peer process, over either transport, and check every command it sends.

    python tests/deploy_fuzz.py BUNDLE_DIR --transport dds|rclpy|unitree [--cases a,b,...] [--bundle NAME] [--jobs N]

``BUNDLE_DIR`` holds ``policy.onnx`` (a real exported ctrl_quad bundle) and the crafted bundles
``nan.onnx``, ``inf.onnx``, ``huge.onnx`` (the same policy with its output multiplied by NaN, inf
and 1e6: tests/bundles.py). Each case starts the node as a user does (``python -m ctrl_rl
deploy node``) in its own process and namespace; this process is the robot (tests/deploy_peer.py): it
publishes JointState + Imu at 200 Hz and whatever the case sends, and records every command and status. It
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
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from deploy_peer import Robot, stop_node

os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
from ctrl_rl.deploy import messages as m  # noqa: E402
from ctrl_rl.deploy.arm_node import is_arm_bundle  # noqa: E402
from ctrl_rl.deploy.runtime import OnnxPolicy  # noqa: E402
from ctrl_rl.deploy.transports import make_transport  # noqa: E402
from ctrl_rl.deploy.transports.unitree import LOWSTATE  # noqa: E402

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


# -- the cases ------------------------------------------------------------------------------------


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


STATUS_WAIT_S = 5.0
"""How long after a case the status may take to name what it expects (it is published on each mode change and at
2 Hz; a 1e6-element message takes a while to serialize on 2 busy cores)."""


def _named(status: dict) -> str:
    return " ".join(str(status.get(k) or "") for k in ("fault", "waiting", "last_rejection", "velocity_source",
                                                       "last_clamp", "last_workspace_hold"))


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
        # a loaded machine may deliver the case's last message (or the next 2 Hz status) late: wait for it
        if case.expect and not robot.wait_status(lambda s: re.search(case.expect, _named(s)), STATUS_WAIT_S):
            result = f"status does not name '{case.expect}' within {STATUS_WAIT_S:.0f} s: {_named(robot.status)!r}"
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


def run_sharded(args: argparse.Namespace, picked: list[int]) -> None:
    """Run ``picked`` round-robin in ``args.jobs`` children of this script at once and print their tables and one
    RESULT summed over them. Each child (and the nodes it starts) is on a domain of its own: Unitree's
    ``rt/lowstate`` and ``rt/lowcmd`` have no namespace, so two cases on one domain would see each other's robot."""
    base = int(os.environ.get("ROS_DOMAIN_ID", "0"))
    options = [("--command-format", args.command_format), ("--bundle", args.bundle),
               ("--unitree-family", args.unitree_family)]

    def shard(k: int) -> subprocess.CompletedProcess:
        cmd = [sys.executable, __file__, str(args.bundle_dir), "--transport", args.transport,
               "--cases", ",".join(str(i) for i in picked[k::args.jobs]), *[a for o, v in options if v for a in (o, v)]]
        env = {**os.environ, "ROS_DOMAIN_ID": str(1 + (base + 29 * k) % 101)}  # 0..101: ROS 2's safe range on Linux
        return subprocess.run(cmd, capture_output=True, text=True, env=env)

    with ThreadPoolExecutor(args.jobs) as pool:
        done = list(pool.map(shard, range(args.jobs)))
    totals = dict.fromkeys(("cases", "failed", "unsafe_commands", "crashes"), 0)
    print(f"| case ({args.transport}, {args.jobs} at once) | result |\n|---|---|", flush=True)
    for proc in done:
        lines = proc.stdout.splitlines()
        print("\n".join(ln for ln in lines[2:] if not ln.startswith("RESULT ")), flush=True)
        results = [ln for ln in lines if ln.startswith("RESULT ")]
        if proc.returncode != 0 or not results:
            print(proc.stderr[-3000:], file=sys.stderr)
            sys.exit(f"a shard exited {proc.returncode} without a RESULT line")
        for key, value in (kv.split("=") for kv in results[-1].split()[1:]):
            totals[key] += int(value)
    print("RESULT " + " ".join(f"{k}={v}" for k, v in totals.items()), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("bundle_dir", type=Path)
    ap.add_argument("--transport", default="dds")
    ap.add_argument("--cases", default="", help="comma-separated case indices (default: all)")
    ap.add_argument("--command-format", default="", help="run every picked case with this command_format")
    ap.add_argument("--bundle", default="", help="run the cases of the plain policy with this bundle of "
                    "BUNDLE_DIR (the crafted and scan bundles' cases are left out)")
    ap.add_argument("--unitree-family", default="", help="--transport unitree: go or hg (default: from the robot)")
    ap.add_argument("--jobs", type=int, default=1, help="run the cases in this many child processes at once, "
                    "each on a DDS domain of its own (a case spends most of its time waiting on the node)")
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
    picked = [int(i) for i in args.cases.split(",")] if args.cases else list(range(len(all_cases)))
    if args.jobs > 1 and len(picked) > 1:
        return run_sharded(args, picked)
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
