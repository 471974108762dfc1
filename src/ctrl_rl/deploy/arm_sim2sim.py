"""Sim2sim for an arm bundle: a MuJoCo arm on the deploy node's topics, and the reach task's verdict.

The arm is rebuilt from the bundle's ``arm_config`` exactly as training built it
(``ctrl_rl.robots.arm.build_arm_model``). The bridge publishes ``sensor_msgs/JointState`` (no IMU: the
base is fixed), applies the joint commands it receives (arm joints and gripper) through the model's PD
actuators at the physics rate, and plays the operator: from the node's first policy tick on it sends an
end-effector pose target (``pose_command``) and draws a new one every ``target_period`` seconds, as the
reach task does (a position uniform in the bundle's workspace box, the default orientation turned by
angles uniform in the task's ranges). Each target is judged as training judges an episode: a success
when the end effector was within ``success_distance`` and ``success_angle`` of it for the last
``success_hold_steps`` control periods before the next one. ``success_rate`` is the verdict. A bundle with an
object (insert, lift) runs episodes instead (``object_sim2sim.py``).

Run by ``ctrl-rl deploy sim2sim <arm bundle>``. Needs numpy, mujoco, pyyaml; never torch.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import mujoco
import numpy as np

from ctrl_rl.robots.arm import build_arm_model, load_arm, rest_qpos
from ctrl_rl.robots.terms import quat_angle, quat_mul

from . import messages as m
from .node_params import TopicQos
from .sim2sim import parse_joint_command, real_time_loop, set_pd_gains, write_json
from .transports import make_transport

log = logging.getLogger("ctrl_rl.deploy.arm_sim2sim")

REACH_DEFAULTS = {"target_period": 2.0, "angle_ranges": [[-0.3, 0.3], [-0.3, 0.3], [-0.5, 0.5]],
                  "success_distance": 0.02, "success_angle": 0.1, "success_hold_steps": 10}
"""The reach task's defaults (``ReachConfig``: ``target_resample_s``, ``target_roll/pitch/yaw``, success),
for a bundle whose ``pose_command`` metadata does not carry its own."""


@dataclass
class ArmBridgeConfig:
    """The simulated arm and the operator who sends it targets."""

    robot: str
    """Arm YAML (a path, or a shipped arm's name)."""
    workspace: list[list[float]]
    """Where target positions are drawn (m, base frame): the bundle's ``pose_command.workspace``."""
    physics_dt: float = 0.002
    state_rate_hz: float = 500.0
    command_format: str = "position_gains"
    control_dt: float = 0.02
    """The policy's control period: the success rule counts these."""
    target_period: float = REACH_DEFAULTS["target_period"]
    angle_ranges: list[list[float]] = field(default_factory=lambda: REACH_DEFAULTS["angle_ranges"])
    """Roll, pitch, yaw ranges (rad) about the end effector's own axes, turning the default orientation."""
    success_distance: float = REACH_DEFAULTS["success_distance"]
    success_angle: float = REACH_DEFAULTS["success_angle"]
    success_hold_steps: int = REACH_DEFAULTS["success_hold_steps"]
    seed: int = 0
    object: dict[str, Any] | None = None
    """The bundle's ``object`` metadata (a task with an object: its scene, draws and success rule); None: reach."""
    joint_states_topic: str = "joint_states"
    joint_command_topic: str = "joint_commands"
    pose_command_topic: str = "pose_command"
    status_topic: str = "ctrl_rl/status"
    object_pose_topic: str = "object_pose"
    lift_command_topic: str = "lift_command"
    estop_topic: str = "estop"
    start_topic: str = "ctrl_rl/start"


def axis_quat(angle: float, axis: int) -> np.ndarray:
    """Quaternion (w, x, y, z) of a rotation by ``angle`` about coordinate axis ``axis``."""
    q = np.zeros(4)
    q[0], q[1 + axis] = np.cos(angle / 2), np.sin(angle / 2)
    return q


class ArmBridge:
    """One simulated arm: physics in real time, joint state out, joint commands in, targets and their verdicts."""

    def __init__(self, cfg: ArmBridgeConfig, transport: Any) -> None:
        self.cfg, self.arm = cfg, load_arm(cfg.robot)
        self.model, self.sensors = self.build_model()
        self.model.opt.timestep = cfg.physics_dt
        self.data = mujoco.MjData(self.model)
        self.data.qpos[:] = rest_qpos(self.model, self.arm)
        mujoco.mj_forward(self.model, self.data)
        self.ee_quat0 = self.data.sensordata[self.sensors["ee_quat"]].copy()
        """The end effector's orientation at the default pose: targets turn it."""
        names = list(self.arm.joint_names)
        self.order = np.arange(len(names))
        self.s_pos = np.array([self.sensors[f"{j}_pos"].start for j in names])
        self.s_vel = np.array([self.sensors[f"{j}_vel"].start for j in names])
        self.s_eff = np.array([self.sensors[f"{j}_torque"].start for j in names])
        self.kp0, self.kd0 = np.array(self.arm.kp), np.array(self.arm.kd)
        set_pd_gains(self.model, np.zeros(len(names)), np.zeros(len(names)))  # limp until commanded
        self.data.ctrl[:] = self.arm.default_pose
        self.rng = np.random.default_rng(cfg.seed)
        self.decim = max(1, round(1.0 / (cfg.state_rate_hz * cfg.physics_dt)))
        self.control_every = max(1, round(cfg.control_dt / cfg.physics_dt))
        self.period_steps = max(1, round(cfg.target_period / cfg.physics_dt))
        self._lock = threading.Lock()
        self._command: tuple[np.ndarray, np.ndarray | None, np.ndarray | None] | None = None
        self.node_mode: str | None = None
        self.node_stop: str | None = None
        """Why the node was stopped (its status's ``stop``: the run's end, a signal), not a fault; None while it
        runs."""
        self.target: np.ndarray | None = None
        """The pose target being sent ``[x, y, z, qw, qx, qy, qz]``; None until the node's policy runs."""
        self._target_start = 0
        self._target_clean = True
        """Whether the node stayed in policy mode since the current target was drawn (else it is not judged)."""
        self.held = 0
        self.results: list[dict[str, float]] = []
        self.stats = {"commands": 0, "rejected": 0, "published": 0, "physics_steps": 0}
        self._stop = threading.Event()
        self._pub_js = transport.publisher(cfg.joint_states_topic, m.JointState)
        self._pub_pose = transport.publisher(cfg.pose_command_topic, m.PoseStamped)
        transport.subscribe(cfg.joint_command_topic, m.Float64MultiArray, self._on_command)
        transport.subscribe(cfg.status_topic, m.String, self._on_status, qos=TopicQos("reliable", 1, "transient_local"))

    def build_model(self) -> tuple[mujoco.MjModel, Any]:
        """The arm as training built it (a subclass adds the task's scene)."""
        return build_arm_model(self.arm)

    def _on_command(self, msg: m.Float64MultiArray) -> None:
        command = parse_joint_command(msg, self.order, self.cfg.command_format)
        with self._lock:
            self.stats["rejected" if command is None else "commands"] += 1
            if command is not None:
                self._command = command

    def _on_status(self, msg: m.String) -> None:
        try:
            status = json.loads(msg.data)
            self.node_mode, self.node_stop = status.get("mode"), status.get("stop")
        except (ValueError, AttributeError):
            return

    def sample_target(self) -> np.ndarray:
        """A reach target: position uniform in the workspace box, the default orientation turned about the end
        effector's own x, y and z axes by angles uniform in their ranges (``ReachTask.sample_targets``)."""
        box, ranges = np.asarray(self.cfg.workspace), np.asarray(self.cfg.angle_ranges)
        q = self.ee_quat0
        for axis, angle in enumerate(self.rng.uniform(ranges[:, 0], ranges[:, 1])):
            q = quat_mul(q, axis_quat(angle, axis))
        return np.concatenate([self.rng.uniform(box[:, 0], box[:, 1]), q])

    def ee_error(self) -> tuple[float, float]:
        """The end effector's distance (m) and angle (rad) to the target."""
        sd = self.data.sensordata
        return (float(np.linalg.norm(sd[self.sensors["ee_pos"]] - self.target[:3])),
                float(quat_angle(sd[self.sensors["ee_quat"]], self.target[3:])))

    def _judge_and_draw(self, k: int) -> None:
        """At a control tick: count the held steps, judge the target when its period is over, draw the next."""
        c = self.cfg
        if self.node_mode != "policy":
            self._target_clean = False
        if self.target is not None:
            distance, angle = self.ee_error()
            self.held = self.held + 1 if distance < c.success_distance and angle < c.success_angle else 0
            if k - self._target_start < self.period_steps:
                return
            if self._target_clean:
                self.results.append({"success": float(self.held >= c.success_hold_steps), "distance": distance,
                                     "angle": angle})
        if self.node_mode == "policy":
            self.target, self._target_start, self._target_clean, self.held = self.sample_target(), k, True, 0

    def step(self) -> None:
        """Apply the latest command, one physics step, publish state (and the target) when due."""
        with self._lock:
            cmd, self._command = self._command, None
        if cmd is not None:
            self.apply(*cmd)
        mujoco.mj_step(self.model, self.data)
        k = self.stats["physics_steps"] = self.stats["physics_steps"] + 1
        if k % self.control_every == 0:
            self.control_tick(k)
        if k % self.decim == 0:
            sd = self.data.sensordata
            self._pub_js(m.JointState(time.time(), list(self.arm.joint_names), sd[self.s_pos].copy(),
                                      sd[self.s_vel].copy(), sd[self.s_eff].copy()))
            self.stats["published"] += 1

    def apply(self, pos: np.ndarray, kp: np.ndarray | None, kd: np.ndarray | None) -> None:
        """A joint command into the PD actuators (the robot's own gains where the command has none)."""
        set_pd_gains(self.model, self.kp0 if kp is None else kp, self.kd0 if kd is None else kd)
        self.data.ctrl[:] = pos

    def control_tick(self, k: int) -> None:
        """Once per control period: judge the target, draw the next, send it."""
        self._judge_and_draw(k)
        if self.target is not None:
            self._pub_pose(m.PoseStamped(time.time(), self.target[:3].copy(), self.target[3:].copy(),
                                         self.arm.base_body))

    def run(self, duration: float | None = None, summary_path: str = "") -> dict[str, Any]:
        """Real time until :meth:`stop` or ``duration`` s; the summary also written every 0.5 s of sim time."""
        def tick() -> int:
            self.step()
            return self.stats["physics_steps"]

        self.stats["physics_deadline_misses"] = real_time_loop(
            tick, self.cfg.physics_dt, self._stop, duration, summary_path, self.summary,
            max(1, round(0.5 / self.cfg.physics_dt)))
        return self.summary()

    def stop(self) -> None:
        self._stop.set()

    def summary(self) -> dict[str, Any]:
        """Counters and the verdict: targets judged, their success rate and mean final errors."""
        r = self.results
        mean = (lambda k: float(np.mean([x[k] for x in r])) if r else float("nan"))  # noqa: E731
        return {**self.stats, "sim_time": float(self.data.time), "targets": len(r), "success_rate": mean("success"),
                "position_error": mean("distance"), "orientation_error": mean("angle")}


def bridge_args(meta: dict[str, Any], robot: str) -> list[str]:
    """The bridge's options for an arm bundle (its workspace and, where the bundle carries them, the task's
    target and success settings; else :data:`REACH_DEFAULTS`); a bundle with an object runs episodes
    (``object_sim2sim.py``)."""
    if meta.get("object"):
        settings = {"workspace": meta["workspace"], "control_dt": meta.get("control_dt", 0.02),
                    "object": meta["object"]}
        return ["-m", "ctrl_rl.deploy.object_sim2sim", "--robot", robot, "--settings", json.dumps(settings)]
    pose = meta.get("pose_command") or {}
    if "workspace" not in pose:
        raise ValueError("the arm bundle's metadata has no pose_command.workspace; re-export it with "
                         "`ctrl-rl export <run>`")
    settings = {**REACH_DEFAULTS, **{k: pose[k] for k in REACH_DEFAULTS if k in pose},
                "workspace": pose["workspace"], "control_dt": meta.get("control_dt", 0.02)}
    return ["-m", "ctrl_rl.deploy.arm_sim2sim", "--robot", robot, "--settings", json.dumps(settings)]


def verdict(meta: dict[str, Any], status: dict[str, Any], sim: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The sim2sim verdict of an arm bundle from the node's final status and the bridge's summary: a sentence and
    the ``RESULT`` fields (reach: targets judged; a task with an object: episodes)."""
    mode, holds = status.get("mode_at_stop") or status["mode"], status.get("workspace_holds", 0)
    nan = float("nan")
    if meta.get("object"):
        return (f"{meta.get('task', 'object')} verdict: {sim.get('episodes', 0)} episodes while the policy ran, "
                f"success rate {sim.get('success_rate', nan):.3f} ({sim.get('rule', '?')}, as in training); "
                f"{sim.get('cut_short', 0)} cut short by a fault; {holds} commands held inside the workspace box",
                {"mode": mode, "episodes": sim.get("episodes", 0), "success_rate": sim.get("success_rate", nan),
                 **sim.get("measures", {}), "cut_short": sim.get("cut_short", 0),
                 "object_poses": status.get("object_pose", 0), "workspace_holds": holds, "clamped": status["clamped"],
                 "deadline_misses": status["deadline_misses"]})
    return (f"reach verdict: {sim.get('targets', 0)} targets judged while the policy ran, success rate "
            f"{sim.get('success_rate', nan):.3f} (within 2 cm and 0.1 rad for the last 0.2 s of each, as in "
            f"training); {holds} commands held inside the workspace box",
            {"mode": mode, "targets": sim.get("targets", 0), "success_rate": sim.get("success_rate", nan),
             "position_error": sim.get("position_error", nan), "orientation_error": sim.get("orientation_error", nan),
             "workspace_holds": holds, "clamped": status["clamped"], "commands": sim.get("commands", 0),
             "deadline_misses": status["deadline_misses"]})


def main(argv: list[str] | None = None, bridge_cls: Callable[[ArmBridgeConfig, Any], ArmBridge] = ArmBridge,
         prog: str = "arm_sim2sim", doc: str = __doc__) -> None:
    """The bridge process: ``bridge_cls(cfg, transport)`` on the transport until SIGTERM or ``--duration``."""
    ap = argparse.ArgumentParser(prog=f"python -m ctrl_rl.deploy.{prog}", description=doc.split("\n\n")[0])
    ap.add_argument("--robot", required=True, help="arm YAML (name or path)")
    ap.add_argument("--settings", required=True, help="JSON: ArmBridgeConfig fields (workspace, control_dt, ...)")
    ap.add_argument("--transport", choices=("dds", "rclpy"), default="dds")
    ap.add_argument("--namespace", default="")
    ap.add_argument("--physics-dt", type=float, default=0.002)
    ap.add_argument("--state-rate", type=float, default=500.0)
    ap.add_argument("--command-format", choices=("position", "position_gains"), default="position_gains")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--duration", type=float, default=None)
    ap.add_argument("--summary", default="")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s: %(message)s")
    cfg = ArmBridgeConfig(robot=args.robot, physics_dt=args.physics_dt, state_rate_hz=args.state_rate,
                          command_format=args.command_format, seed=args.seed, **json.loads(args.settings))
    transport = make_transport(args.transport, namespace=args.namespace, node_name="ctrl_rl_arm_sim2sim")
    bridge = bridge_cls(cfg, transport)
    signal.signal(signal.SIGTERM, lambda *_: bridge.stop())
    try:
        summary = bridge.run(args.duration, args.summary)
    except KeyboardInterrupt:
        summary = bridge.summary()
    finally:
        transport.close()
    if args.summary:
        write_json(args.summary, summary)


if __name__ == "__main__":
    main()
