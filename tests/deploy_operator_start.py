"""The deploy node as a user starts it, with its default parameters: nothing stiff before an operator's start.

    python tests/deploy_operator_start.py BUNDLE --transport dds|rclpy|unitree [--command-format position_gains]

Starts ``ctrl-rl deploy node --bundle BUNDLE --transport T`` with no ``--params`` and no ``--set`` (only
a namespace of its own, and with ``--command-format position_gains`` that one setting; ``unitree``
always sends position-gains ``LowCmd``s). This process is the robot (tests/deploy_fuzz.py's peer,
the operator in it switched off): it streams a valid state of a robot lying on the ground (a pose
away from the bundle's default pose) and records every command the node publishes, and over
``unitree`` every ``LowCmd`` on the wire, all 20 or 35 motors. After ``--wait`` seconds of that it
sends one start message (repeated every 0.1 s until the node leaves passive), records the stand-up
for a while, then stops the node with SIGTERM and reads its ``--summary``. Prints ``START {json}``
(tests/test_operator_start.py checks it).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from deploy_peer import Robot, stop_node

from ctrl_rl.deploy import messages as m
from ctrl_rl.deploy.runtime import OnnxPolicy
from ctrl_rl.deploy.transports.unitree import LOWCMD


def lying_pose(meta: dict) -> np.ndarray:
    """Halfway from the default pose to the middle of each joint's range: a valid pose the stand-up moves."""
    default = np.asarray(meta["default_pose"], dtype=np.float64)
    lo, hi = np.asarray(meta["joint_limits"], dtype=np.float64).T
    return default + 0.5 * ((lo + hi) / 2 - default)


def split(received: list[tuple[float, np.ndarray]], t: float, n: int, pose: np.ndarray, gains: bool) -> dict:
    """The commands that arrived before ``t`` and after it: how many, their largest kp and kd, and
    the largest distance of a target from the measured pose."""
    out = {}
    for name, part in (("before", [d for s, d in received if s < t]), ("after", [d for s, d in received if s >= t])):
        data = np.stack(part) if part else np.zeros((0, 3 * n if gains else n))
        out[name] = {"commands": len(part),
                     "max_target_from_pose": float(np.abs(data[:, :n] - pose).max(initial=0.0)),
                     "max_kp": float(data[:, n:2 * n].max(initial=0.0)) if gains else None,
                     "max_kd": float(data[:, 2 * n:].max(initial=0.0)) if gains else None}
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("bundle")
    ap.add_argument("--transport", default="dds")
    ap.add_argument("--command-format", default="position")
    ap.add_argument("--wait", type=float, default=1.0, help="seconds of valid state before the start")
    args = ap.parse_args()
    gains = args.transport == "unitree" or args.command_format == "position_gains"
    meta = OnnxPolicy(args.bundle).metadata
    ns = f"start{os.getpid()}"
    names = list(meta["joint_names"])
    robot = Robot(args.transport, ns, meta, "position_gains" if gains else "position", driver_order=names)
    robot.operator = False  # this test is the operator
    robot.received = []
    pose = lying_pose(meta)
    robot.pose = pose.copy()
    wire: list[tuple[float, list[tuple[int, float, float]]]] = []
    if args.transport == "unitree":  # the LowCmd itself: every motor, not just the bundle's
        robot.t.dds.subscribe(LOWCMD, robot.t.family.low_cmd.idl, lambda s: wire.append(
            (time.monotonic(), [(int(x.mode), float(x.kp), float(x.kd)) for x in s.motor_cmd])))
    summary = Path(tempfile.mkdtemp()) / "summary.json"
    cmd = [sys.executable, "-m", "ctrl_rl", "deploy", "node", "--bundle", args.bundle, "--transport", args.transport,
           "--namespace", ns, "--summary", str(summary),
           *(["--set", "command_format=position_gains"] if gains and args.transport != "unitree" else [])]
    node = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out: dict = {"pose_from_default": float(np.abs(pose - np.asarray(meta["default_pose"])).max())}
    try:
        if not robot.wait_mode("passive", 60):
            raise SystemExit(f"the node never reported passive (exit {node.poll()})")
        robot.start_streaming()
        end = time.monotonic() + 20
        while robot.status.get("joint_state", 0) == 0 and time.monotonic() < end:  # it reads the state
            time.sleep(0.02)
        time.sleep(args.wait)
        out["status_before_start"] = {k: robot.status.get(k) for k in ("mode", "waiting", "joint_state", "published")}
        t_start = time.monotonic()
        end = t_start + 10
        while robot.status.get("mode") == "passive" and time.monotonic() < end:
            robot.pub_start(m.Bool(True))
            time.sleep(0.1)
        time.sleep(0.5)  # the stand-up's first half second
        out["mode_after_start"] = robot.status.get("mode")
    finally:
        stdout, stderr, _ = stop_node(node, robot, timeout=30)
    n = len(names)
    out.update(split(robot.received, t_start, n, pose, gains))
    if wire:
        for name, part in (("before", [w for s, w in wire if s < t_start]),
                           ("after", [w for s, w in wire if s >= t_start])):
            motors = [x for w in part for x in w]
            out[f"wire_{name}"] = {"lowcmds": len(part), "max_kp": max((x[1] for x in motors), default=0.0),
                                   "max_kd": max((x[2] for x in motors), default=0.0)}
    out["unsafe"] = robot.unsafe[:5]
    out["exit"] = node.returncode
    out["start_hint_logged"] = [ln for ln in stderr.splitlines() if "waiting for an operator's start" in ln][:1]
    out["result_line"] = [ln for ln in stdout.splitlines() if ln.startswith("RESULT")][:1]
    out["summary"] = json.loads(summary.read_text()) if summary.exists() else None
    out["namespace"] = ns
    out["stderr_tail"] = stderr[-1500:]
    print("START " + json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
