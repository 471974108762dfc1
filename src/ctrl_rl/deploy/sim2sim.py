"""Sim2sim bridge: a MuJoCo process that behaves like the robot on the deploy node's topics.

It publishes ``sensor_msgs/JointState`` and ``sensor_msgs/Imu`` from the simulated robot's
sensors (the same canonical sensors training observed), applies the joint commands it
receives through the model's PD actuators at the physics rate, and can add sensor noise and
latency. The robot is built from its YAML exactly as in training (``ctrl_rl.robots``), so a
policy that fails here fails for a reason worth knowing before the real robot.

Run it alone (``python -m ctrl_rl.deploy.sim2sim --help``) or with the node:
``ctrl-rl deploy sim2sim <bundle>``. Needs numpy, mujoco, pyyaml; never torch.
"""

from __future__ import annotations

import argparse
import collections
import gc
import json
import logging
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import mujoco
import numpy as np

from ctrl_rl.robots.robot import build_model, joint_indices, load_robot
from ctrl_rl.robots.terrain import TerrainConfig, add_limb_colliders, add_to_spec, generate
from ctrl_rl.tasks.locomotion.velocity_config import policy_terms

from . import messages as m
from .gait_recorder import GaitRecorder
from .height_map import HeightMapSpec, grid_shape, yaw_points
from .node_params import TopicQos
from .stats import LoopTimer
from .transports import TRANSPORTS, make_transport

log = logging.getLogger("ctrl_rl.deploy.sim2sim")


@dataclass
class BridgeConfig:
    """What the simulated robot looks like from the outside."""

    robot: str = "ctrl_quad"
    """Robot YAML (name under ``ctrl_rl/robots`` or a path), as in ``task.kwargs.robot``."""
    physics_dt: float = 0.002
    """Physics (and PD) step in seconds (500 Hz, as a robot's joint controllers); 0 = the model's
    timestep (ctrl_quad trains at 0.005 s: the policy meets finer physics here, on purpose)."""
    state_rate_hz: float = 500.0
    """JointState + Imu publish rate (at most the physics rate)."""
    joint_states_topic: str = "joint_states"
    imu_topic: str = "imu/data"
    joint_command_topic: str = "joint_commands"
    cmd_vel_topic: str = "cmd_vel"
    command_format: str = "position"
    """``position`` (targets with the robot's YAML gains) or ``position_gains`` ([3, n]: target, kp, kd)."""
    joint_order: list[str] = field(default_factory=list)
    """Joint order of published JointState and of the incoming command array; empty = the robot's
    YAML order. Tests reverse it: the node must map by name."""
    cmd_vel: tuple[float, float, float] | None = None
    """Publish this velocity command at 10 Hz (a joystick stand-in); None = publish none."""
    noise_joint_pos: float = 0.0
    noise_joint_vel: float = 0.0
    noise_gyro: float = 0.0
    obs_noise: float = 0.0
    """Uniform noise on the published state at this multiple of training's levels (legged_gym's ``noise_level``:
    1 = +-0.01 rad joint positions, +-1.5 rad/s joint velocities, +-0.2 rad/s gyro, +-0.05 rad attitude)."""
    latency: float = 0.0
    """Seconds between sensing and publishing (a driver's delay)."""
    command_latency: float = 0.0
    """Seconds between receiving a joint command and applying it (a bus's delay)."""
    control_dt: float = 0.02
    """The policy's control period: the gait traces' rate (``gait_recorder.py``)."""
    seed: int = 0
    terrain: dict[str, Any] | None = None
    """A generated terrain (``ctrl_rl.robots.terrain.TerrainConfig`` keys: a rough-terrain bundle's
    ``terrain`` metadata) in place of the flat ground; None = the robot's own MJCF ground."""
    limb_collisions: bool = True
    """With a terrain: the limbs collide with it as in training (``add_limb_colliders``)."""
    terrain_cell: tuple[int, int] | None = None
    """With a terrain: the (row, column) sub-terrain whose platform the robot starts on;
    None = the middle row, column 0."""
    height_map: dict[str, Any] | None = None
    """Publish the ground around the base as a height map (``deploy/height_map.py``): a scan bundle's
    ``height_scan`` metadata (``points``, ``offset``); None = no terrain perception."""
    height_map_topic: str = "height_map"
    height_map_rate_hz: float = 50.0
    """Height-map publish rate (an elevation mapper's; at most the physics rate)."""
    start: str = "auto"
    """``lying``: the robot boots folded on the ground (thighs and calves tucked, as real quadrupeds
    rest), so the node's stand-up is exercised for real; ``standing``: at the default pose;
    ``auto``: lying for robots with four or more feet, standing (in the gantry) for bipeds."""
    gantry: str = "auto"
    """``on``: an elastic band holds the base at its standing height and upright (as a humanoid hangs
    from a gantry while its controller starts), released ``release_after`` s after the node's status
    first reports policy mode; ``off``; ``auto``: on for bipeds (fewer than four feet)."""
    release_after: float = 1.0
    status_topic: str = "ctrl_rl/status"
    """The node's status (std_msgs/String JSON): the gantry watches it for policy mode."""


class Sim2SimBridge:
    """One simulated robot: step physics in real time, publish state, apply received commands."""

    def __init__(self, cfg: BridgeConfig, transport: Any) -> None:
        self.cfg, self.transport, self.mj = cfg, transport, mujoco
        self.robot = load_robot(cfg.robot)
        self.terrain = None
        scene = None
        if cfg.terrain is not None:  # the training terrain, rebuilt from its config (numpy + mujoco only)
            self.terrain = generate(TerrainConfig.from_dict(cfg.terrain))

            def scene(spec: Any) -> None:
                add_to_spec(spec, self.terrain)
                if cfg.limb_collisions:
                    add_limb_colliders(spec)

        self.model, layout = build_model(self.robot, scene)
        if cfg.physics_dt:
            self.model.opt.timestep = cfg.physics_dt
        self.data = mujoco.MjData(self.model)
        r = self.robot
        self.names = list(cfg.joint_order) or list(r.joint_names)
        missing = sorted(set(r.joint_names) ^ set(self.names))
        if missing or len(self.names) != len(r.joint_names):
            raise ValueError(f"joint_order must be a permutation of {list(r.joint_names)}; mismatch: {missing}")
        order = [r.joint_names.index(n) for n in self.names]  # published index -> actuator index
        self.order = np.array(order)
        self.s_pos = np.concatenate([np.r_[layout[f"{r.joint_names[i]}_pos"]] for i in order])
        self.s_vel = np.concatenate([np.r_[layout[f"{r.joint_names[i]}_vel"]] for i in order])
        self.s_eff = np.concatenate([np.r_[layout[f"{r.joint_names[i]}_torque"]] for i in order])
        self.s_quat, self.s_gyro, self.s_acc = (np.r_[layout[k]] for k in ("imu_quat", "imu_gyro", "imu_acc"))
        self.s_base = np.r_[layout["base_pos"]]
        self.s_vel_b = np.r_[layout["base_lin_vel"]]
        self.kp0 = np.array(r.kp, dtype=np.float64)
        self.kd0 = np.array(r.kd, dtype=np.float64)
        biped = len(r.foot_geoms) < 4
        if cfg.start == "auto":
            cfg.start = "standing" if biped else "lying"
        if cfg.gantry not in ("auto", "on", "off"):
            raise ValueError(f"gantry must be auto, on or off, got '{cfg.gantry}'")
        self.gantry = cfg.gantry == "on" or (cfg.gantry == "auto" and biped)
        self.released_at: float | None = None
        """Sim time the gantry let go (None: still holding, or no gantry)."""
        self._policy_since: float | None = None
        self._place()
        self._set_gains(np.zeros_like(self.kp0), np.zeros_like(self.kd0))  # limp until commanded
        self.rng = np.random.default_rng(cfg.seed)
        self.decim = max(1, round(1.0 / (cfg.state_rate_hz * self.model.opt.timestep)))
        self.pending: collections.deque[tuple[float, m.JointState, m.Imu]] = collections.deque()
        self._lock = threading.Lock()
        self._command: tuple[np.ndarray, np.ndarray | None, np.ndarray | None] | None = None
        self._delayed: collections.deque[tuple[float, Any]] = collections.deque()
        """Commands waiting out ``command_latency``: (time due, command)."""
        self.noise_scale = _noise_scales(cfg.obs_noise)
        self.node_mode: str | None = None
        """The node's mode as its last status said (the gait recorder's phases)."""
        self.gait = GaitRecorder(self.model, self.data, r, layout, cfg.control_dt, cfg.cmd_vel, self.terrain)
        self.stats = {"commands": 0, "rejected": 0, "published": 0, "physics_steps": 0}
        self.trace = np.zeros((max(1, round(10.0 * cfg.state_rate_hz)), 6))
        """Ring of the last 10 s: time, base z, body forward speed, tilt, base x, base y (preallocated: a
        growing list made the periodic summary and the GC stall the real-time loop)."""
        self.trace_n = 0
        self._stop = threading.Event()
        self._pub_js = transport.publisher(cfg.joint_states_topic, m.JointState)
        self._pub_imu = transport.publisher(cfg.imu_topic, m.Imu)
        self._pub_cmd = transport.publisher(cfg.cmd_vel_topic, m.Twist) if cfg.cmd_vel is not None else None
        self.scan = self._pub_map = None
        if cfg.height_map is not None:
            points = np.asarray(cfg.height_map["points"], dtype=np.float64).reshape(-1, 2)
            self.scan = HeightMapSpec(points, float(cfg.height_map.get("offset", 0.0)), grid_shape(points))
            self._pub_map = transport.publisher(cfg.height_map_topic, m.Float64MultiArray)
        self.map_decim = max(1, round(1.0 / (cfg.height_map_rate_hz * self.model.opt.timestep)))
        transport.subscribe(cfg.joint_command_topic, m.Float64MultiArray, self._on_command)
        status_qos = TopicQos("reliable", 1, "transient_local")
        transport.subscribe(cfg.status_topic, m.String, self._on_status, qos=status_qos)
        if self.gantry:
            self.base_id = self.model.body(r.base_body).id
            self.hold = self.data.qpos[:3].copy()

    def _place(self) -> None:
        """Default pose at the standing height; for ``lying``, fold the legs under PD and let the
        body settle for a second of simulated time before anything is published."""
        qadr, _ = joint_indices(self.model, self.robot)
        self.data.qpos[:] = self.model.qpos0
        self.data.qpos[2] = self.robot.init_height
        if self.terrain is not None:
            t = self.terrain
            row, col = self.cfg.terrain_cell or (t.cfg.num_rows // 2, 0)
            if not (0 <= row < t.cfg.num_rows and 0 <= col < t.cfg.num_cols):
                raise ValueError(f"terrain_cell {[row, col]} is outside the {t.cfg.num_rows} x {t.cfg.num_cols} grid")
            x, y, _ = t.origins[row, col]
            self.data.qpos[:3] = (x, y, t.height_at(np.array(x), np.array(y)) + self.robot.init_height)
        self.data.qpos[qadr] = self.robot.default_pose
        self.mj.mj_forward(self.model, self.data)
        self.data.ctrl[:] = self.robot.default_pose
        if self.cfg.start == "lying":
            lo, hi = self.model.jnt_range[self.model.actuator_trnid[:, 0]].T
            folded = np.where(np.abs(lo) > np.abs(hi), lo * 0.95, hi * 0.35)  # calves tucked, thighs forward
            folded[np.abs(self.robot.default_pose) < 0.2] = 0.0  # hips (abduction) straight
            self._set_gains(self.kp0, self.kd0)
            self.data.ctrl[:] = folded
            for _ in range(int(1.0 / self.model.opt.timestep)):
                self.mj.mj_step(self.model, self.data)
        elif self.cfg.start != "standing":
            raise ValueError(f"start must be 'lying' or 'standing', got '{self.cfg.start}'")

    def _set_gains(self, kp: np.ndarray, kd: np.ndarray) -> None:
        set_pd_gains(self.model, kp, kd)

    def _on_command(self, msg: m.Float64MultiArray) -> None:
        """Validate like a robot driver would: wrong sizes or NaN never reach the actuators."""
        command = parse_joint_command(msg, self.order, self.cfg.command_format)
        if command is None:
            with self._lock:
                self.stats["rejected"] += 1
            return
        pos, kp, kd = command
        with self._lock:
            if self.cfg.command_latency > 0:
                self._delayed.append((time.monotonic() + self.cfg.command_latency, (pos, kp, kd)))
            else:
                self._command = (pos, kp, kd)
            self.stats["commands"] += 1

    def _sense(self, stamp: float) -> tuple[m.JointState, m.Imu]:
        d, c, rng = self.data.sensordata, self.cfg, self.rng
        n = len(self.names)
        pos, vel, gyro = d[self.s_pos].copy(), d[self.s_vel].copy(), d[self.s_gyro].copy()
        if c.noise_joint_pos:
            pos += rng.normal(0, c.noise_joint_pos, n)
        if c.noise_joint_vel:
            vel += rng.normal(0, c.noise_joint_vel, n)
        if c.noise_gyro:
            gyro += rng.normal(0, c.noise_gyro, 3)
        quat = d[self.s_quat].copy()
        if c.obs_noise:
            k = self.noise_scale
            pos += rng.uniform(-k["joint_pos_rel"], k["joint_pos_rel"], n)
            vel += rng.uniform(-k["joint_vel"], k["joint_vel"], n)
            gyro += rng.uniform(-k["base_ang_vel"], k["base_ang_vel"], 3)
            quat = tilted(quat, rng.uniform(-k["projected_gravity"], k["projected_gravity"], 2))
        js = m.JointState(stamp, list(self.names), pos, vel, d[self.s_eff].copy())
        imu = m.Imu(stamp, quat, gyro, d[self.s_acc].copy(), frame_id="imu")
        return js, imu

    def _on_status(self, msg: m.String) -> None:
        try:
            self.node_mode = json.loads(msg.data).get("mode")
        except (ValueError, AttributeError):
            return
        if self._policy_since is None and self.node_mode == "policy":
            self._policy_since = float(self.data.time)

    def _gantry(self) -> None:
        """Spring-damper on the base's position and attitude (world frame) until released."""
        f = self.data.xfrc_applied[self.base_id]
        since = self._policy_since
        if self.released_at is not None or (since is not None and self.data.time - since >= self.cfg.release_after):
            if self.released_at is None:
                self.released_at = float(self.data.time)
                log.info("gantry released at %.2f s", self.released_at)
            f[:] = 0.0
            return
        pos, vel = self.data.qpos[:3], self.data.qvel[:3]
        w, x, y, z = self.data.qpos[3:7]
        up = np.array([2 * (x * z + w * y), 2 * (y * z - w * x)])  # body z axis in the world, x and y
        f[:3] = 5000.0 * (self.hold - pos) - 500.0 * vel
        omega = np.zeros(3)
        self.mj.mju_rotVecQuat(omega, self.data.qvel[3:6], self.data.qpos[3:7])  # body rate in world axes
        f[3:6] = 500.0 * np.array([up[1], -up[0], 0.0]) - 50.0 * omega  # torque toward upright

    def step(self) -> None:
        """Apply the latest command, one physics step, publish state when due."""
        with self._lock:
            while self._delayed and self._delayed[0][0] <= time.monotonic():
                self._command = self._delayed.popleft()[1]
            cmd, self._command = self._command, None
        if cmd is not None:
            pos, kp, kd = cmd
            if kp is None:
                kp, kd = self.kp0, self.kd0
            self._set_gains(kp, kd)
            self.data.ctrl[:] = pos
            self.gait.command_applied()
        if self.gantry:
            self._gantry()
        self.mj.mj_step(self.model, self.data)
        k = self.stats["physics_steps"] = self.stats["physics_steps"] + 1
        if k % self.gait.every == 0:
            self.gait.tick(self.node_mode, not self.gantry or self.released_at is not None)
        now = time.time()
        if k % self.decim == 0:
            self.pending.append((time.monotonic() + self.cfg.latency, *self._sense(now)))
            d = self.data.sensordata
            q = d[self.s_quat]
            tilt = math.acos(max(-1.0, min(1.0, 1.0 - 2.0 * (q[1] ** 2 + q[2] ** 2))))
            x, y, z = d[self.s_base]
            self.trace[self.trace_n % len(self.trace)] = (now, z, d[self.s_vel_b][0], tilt, x, y)
            self.trace_n += 1
        if self._pub_map is not None and k % self.map_decim == 0:
            self._pub_map(self.height_map())
        while self.pending and self.pending[0][0] <= time.monotonic():
            _, js, imu = self.pending.popleft()
            self._pub_js(js)
            self._pub_imu(imu)
            self.stats["published"] += 1

    def height_map(self) -> m.Float64MultiArray:
        """The base's clearance over the ground at the scan points (yaw frame), as perception would
        publish it: the terrain's surface, or the flat ground at z = 0."""
        d = self.data.sensordata
        w, x, y, z = d[self.s_quat]
        bx, by, bz = d[self.s_base]
        xs, ys = yaw_points(self.scan.points, bx, by, math.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z)))
        ground = self.terrain.height_at(xs, ys) if self.terrain is not None else np.zeros(len(xs))
        return self.scan.message(bz - ground)

    def run(self, duration: float | None = None, summary_path: str = "") -> dict[str, Any]:
        """Real-time loop until :meth:`stop` or ``duration`` seconds; returns :meth:`summary`,
        also written to ``summary_path`` every 0.5 s (atomically: a killed bridge leaves one)."""
        sys.setswitchinterval(1e-4)  # transport threads must not hold the GIL for CPython's default 5 ms
        gc.freeze()  # what exists now is never scanned again: shorter collections inside the loop
        every = max(1, round(0.1 / self.model.opt.timestep))

        def tick() -> int:
            self.step()
            k = self.stats["physics_steps"]
            if self._pub_cmd is not None and k % every == 1:
                vx, vy, wz = self.cfg.cmd_vel
                self._pub_cmd(m.Twist(np.array([vx, vy, 0.0]), np.array([0.0, 0.0, wz])))
            return k

        self.stats["physics_deadline_misses"] = real_time_loop(
            tick, self.model.opt.timestep, self._stop, duration, summary_path, self.summary, 5 * every)
        return self.summary()

    def stop(self) -> None:
        self._stop.set()

    def summary(self, last_s: float = 2.0) -> dict[str, Any]:
        """Counters and the last ``last_s`` seconds of base height / body forward speed / tilt."""
        tr = self.trace[: min(self.trace_n, len(self.trace))]
        recent = tr[tr[:, 0] >= tr[:, 0].max() - last_s] if len(tr) else tr
        mean = (lambda c: float(recent[:, c].mean()) if len(recent) else float("nan"))  # noqa: E731
        last = tr[np.argmax(tr[:, 0])] if len(tr) else np.full(6, np.nan)
        if self.terrain is not None and len(recent):  # base height over the ground below it, as in training
            recent = recent.copy()
            recent[:, 1] -= self.terrain.height_at(recent[:, 4], recent[:, 5])
        return {**self.stats, "sim_time": float(self.data.time), "gantry_released": self.released_at,
                "base_height": mean(1),
                "forward_velocity": mean(2), "max_tilt": float(tr[:, 3].max()) if len(tr) else float("nan"),
                "base_x": float(last[4]), "base_y": float(last[5])}


def set_pd_gains(model: Any, kp: np.ndarray, kd: np.ndarray) -> None:
    """The PD position actuators' gains (one per actuator: ``kp (ctrl - q) - kd dq``)."""
    model.actuator_gainprm[:, 0] = kp
    model.actuator_biasprm[:, 1] = -kp
    model.actuator_biasprm[:, 2] = -kd


def parse_joint_command(msg: m.Float64MultiArray, order: np.ndarray, command_format: str
                        ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None] | None:
    """A joint command as a robot driver reads it: ``(targets, kp, kd)`` in actuator order (``order``: the
    actuator index of each published joint; kp, kd None for ``position``), or None for a wrong size or NaN."""
    n = len(order)
    data = np.asarray(msg.data, dtype=np.float64)
    rows = 3 if command_format == "position_gains" else 1
    if data.shape != (rows * n,) or not np.all(np.isfinite(data)):
        return None
    inv = np.argsort(order)  # incoming (published) order -> actuator order
    if rows == 1:
        return data[inv], None, None
    return data[:n][inv], data[n:2 * n][inv], data[2 * n:][inv]


def _noise_scales(level: float) -> dict[str, float]:
    """Half-widths of the uniform state noise at ``level`` times training's (the policy terms' own)."""
    return {t.name: float(t.noise) for t in policy_terms(level)}


def tilted(quat: np.ndarray, angles: np.ndarray) -> np.ndarray:
    """``quat`` (w, x, y, z) turned by small ``angles`` (rad) about its body x and y axes: attitude noise,
    which the node sees in the projected gravity."""
    ax, ay = angles / 2
    w, x, y, z = quat
    dw, dx, dy = math.sqrt(max(0.0, 1 - ax * ax - ay * ay)), ax, ay
    return np.array([w * dw - x * dx - y * dy, w * dx + x * dw - z * dy, w * dy + y * dw + z * dx,
                     z * dw + x * dy - y * dx])


def real_time_loop(tick: Callable[[], int], dt: float, stop: threading.Event, duration: float | None,
                   summary_path: str, summary: Callable[[], dict[str, Any]], summary_every: int) -> int:
    """A bridge's loop: ``tick()`` (one physics step; returns the steps so far) every ``dt`` s of wall time
    until ``stop`` is set or ``duration`` s have passed, ``summary()`` written to ``summary_path`` every
    ``summary_every`` steps (atomically: a killed bridge leaves one). Returns the deadline misses."""
    timer = LoopTimer(dt)
    end = math.inf if duration is None else time.perf_counter() + duration
    timer.start()
    while not stop.is_set() and time.perf_counter() < end:
        k = tick()
        if summary_path and k % summary_every == 0:
            write_json(summary_path, summary())
        timer.wait()
    return timer.misses


def write_json(path: str, data: dict[str, Any]) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(data, f)
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m ctrl_rl.deploy.sim2sim", description=__doc__.split("\n\n")[0])
    ap.add_argument("--robot", default="ctrl_quad")
    ap.add_argument("--transport", choices=TRANSPORTS, default="dds")
    ap.add_argument("--namespace", default="")
    ap.add_argument("--duration", type=float, default=None, help="seconds (default: until Ctrl-C)")
    ap.add_argument("--physics-dt", type=float, default=0.002, help="s; 0 = the model's timestep")
    ap.add_argument("--state-rate", type=float, default=500.0, help="JointState/Imu rate (Hz)")
    ap.add_argument("--command-format", choices=("position", "position_gains"), default="position")
    ap.add_argument("--unitree-family", choices=("go", "hg"), default=None,
                    help="--transport unitree: the robot's message package (default: from the robot)")
    ap.add_argument("--joint-order", default="", help="comma-separated joint names, or 'reversed'")
    ap.add_argument("--cmd-vel", type=float, nargs=3, default=None, metavar=("VX", "VY", "WZ"))
    ap.add_argument("--noise", type=float, nargs=3, default=(0.0, 0.0, 0.0), metavar=("POS", "VEL", "GYRO"))
    ap.add_argument("--obs-noise", type=float, default=0.0, metavar="LEVEL",
                    help="uniform state noise at LEVEL x training's (legged_gym's noise_level)")
    ap.add_argument("--latency", type=float, default=0.0, help="sensing-to-publish delay (s)")
    ap.add_argument("--command-latency", type=float, default=0.0, help="command receive-to-apply delay (s)")
    ap.add_argument("--control-dt", type=float, default=0.02, help="the policy's control period: the gait traces' rate")
    ap.add_argument("--summary", default="", help="write the final summary JSON here")
    ap.add_argument("--gait-trace", default="", metavar="PATH",
                    help="write the policy phase's gait traces here (.npz, ctrl_rl.deploy.gait_recorder.load)")
    ap.add_argument("--terrain", default=None, help="generated terrain config as JSON (a rough bundle's metadata)")
    ap.add_argument("--terrain-cell", type=int, nargs=2, default=None, metavar=("ROW", "COL"),
                    help="sub-terrain to start on (default: middle row, column 0)")
    ap.add_argument("--no-limb-collisions", action="store_true", help="with --terrain: only feet and trunk collide")
    ap.add_argument("--seed", type=int, default=0, help="the bridge's draws (sensor noise)")
    ap.add_argument("--height-map", default=None,
                    help="publish a height map: a scan bundle's height_scan metadata as JSON (points, offset)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s: %(message)s")
    order: list[str] = []
    if args.joint_order:
        names = list(load_robot(args.robot).joint_names)
        order = names[::-1] if args.joint_order == "reversed" else args.joint_order.split(",")
    cfg = BridgeConfig(robot=args.robot, physics_dt=args.physics_dt, state_rate_hz=args.state_rate,
                       command_format=args.command_format, joint_order=order,
                       cmd_vel=tuple(args.cmd_vel) if args.cmd_vel else None, noise_joint_pos=args.noise[0],
                       noise_joint_vel=args.noise[1], noise_gyro=args.noise[2], obs_noise=args.obs_noise,
                       latency=args.latency, command_latency=args.command_latency, control_dt=args.control_dt,
                       terrain=json.loads(args.terrain) if args.terrain else None,
                       limb_collisions=not args.no_limb_collisions,
                       terrain_cell=tuple(args.terrain_cell) if args.terrain_cell else None,
                       height_map=json.loads(args.height_map) if args.height_map else None, seed=args.seed)
    unitree = None
    if args.transport == "unitree":  # the bridge plays the robot's side of Unitree's protocol
        from .unitree_msgs import family_for  # optional extra: cyclonedds, for the unitree transport only

        robot = load_robot(args.robot)
        cfg.command_format = "position_gains"
        unitree = {"family": args.unitree_family or family_for(robot.name, robot.num_joints),
                   "joint_names": list(robot.joint_names), "side": "robot"}
    transport = make_transport(args.transport, namespace=args.namespace, node_name="ctrl_rl_sim2sim",
                               unitree=unitree)
    bridge = Sim2SimBridge(cfg, transport)
    signal.signal(signal.SIGTERM, lambda *_: bridge.stop())  # `deploy sim2sim` ends the bridge so: save first
    try:
        summary = bridge.run(args.duration, args.summary)
    except KeyboardInterrupt:
        summary = bridge.summary()
    finally:
        if args.gait_trace:  # first: closing the transport may take a while
            bridge.gait.save(args.gait_trace)
        transport.close()
    if args.summary:
        write_json(args.summary, summary)
    print("RESULT " + " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in summary.items()))


if __name__ == "__main__":
    main()
