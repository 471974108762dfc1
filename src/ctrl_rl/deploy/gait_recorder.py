"""The sim2sim bridge's gait traces: the simulated robot at the policy's control rate, for the gait report
(``gait_report.py``).

Recorded while the node is in policy mode (its first policy phase; with a gantry, from its release on):
the stand-up is no gait. During the node's stand-up it counts the control ticks with a motor at its
torque limit (MuJoCo clamps the actuator force at its ``forcerange``): a stand-up at the clamp is the
first thing to fail on a real robot. A fall is what ends a training episode: the base touching the
ground or tilting past 60 deg. numpy and mujoco only, preallocated: nothing grows in the
real-time loop.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .gait_report import MAX_TILT, GaitSpec, GaitTrace

CAPACITY = 30_000
"""Samples kept (10 minutes at 50 Hz); a longer policy phase is reported over its first ones."""
STATUS_LAG = 2
"""Samples left off the end: the node's status saying it left policy mode reaches the bridge a tick or
two after its first damping command, which is no gait."""


class GaitRecorder:
    """Samples of one simulated robot, taken by :meth:`tick` every ``every`` physics steps."""

    def __init__(self, model: Any, data: Any, robot: Any, layout: dict[str, slice], control_dt: float,
                 command: tuple[float, float, float] | None, terrain: Any = None) -> None:
        self.model, self.data, self.robot, self.terrain = model, data, robot, terrain
        self.every = max(1, round(control_dt / model.opt.timestep))
        self.dt = self.every * float(model.opt.timestep)
        sensors = {"base_pos": ["base_pos"], "base_quat": ["imu_quat"], "base_lin_vel": ["base_lin_vel"],
                   "gyro": ["imu_gyro"], "joint_pos": [f"{j}_pos" for j in robot.joint_names],
                   "joint_vel": [f"{j}_vel" for j in robot.joint_names],
                   "torque": [f"{j}_torque" for j in robot.joint_names],
                   "foot_contact": [f"{f}_contact" for f in robot.foot_geoms],
                   "foot_vel": [f"{f}_vel" for f in robot.foot_geoms], "base_contact": ["base_contact"]}
        self.index = np.concatenate([np.r_[layout[s]] for names in sensors.values() for s in names])
        """Every sensordata entry a sample keeps, in the column order of :attr:`columns`."""
        self.columns: dict[str, slice] = {}
        at = 0
        for key, names in sensors.items():
            width = sum(layout[s].stop - layout[s].start for s in names)
            self.columns[key] = slice(at, at + width)
            at += width
        self.act = np.array(robot.action_index)
        self.default = np.asarray(robot.default_pose, dtype=np.float64)[self.act]
        self.scale = np.asarray(robot.action_scales, dtype=np.float64)[self.act]
        self.buf = np.zeros((CAPACITY, at + len(self.act)))
        self.n = 0
        self.command = np.asarray(command if command is not None else (0.0, 0.0, 0.0), dtype=np.float64)
        self.limit = model.actuator_forcerange[:, 1] * (1 - 1e-9)
        self.recording = self.done = False
        self.stand_up_ticks = self.stand_up_clamps = 0
        self.beats = np.zeros(CAPACITY, dtype=np.int32)
        """Per sample: the joint commands the bridge applied in the control period before it (1 on the beat;
        0 or 2+ when the node and the simulation lost step: a machine behind real time)."""
        self._commands = 0

    def command_applied(self) -> None:
        """The bridge applied a new joint command (called from its physics step)."""
        self._commands += 1

    def tick(self, mode: str | None, released: bool) -> None:
        """One control tick: the node's last reported ``mode``; ``released``: no gantry holds the robot."""
        if mode == "stand_up":
            self.stand_up_ticks += 1
            self.stand_up_clamps += bool(np.any(np.abs(self.data.actuator_force) >= self.limit))
        elif mode == "policy" and released and not self.done:
            self.recording = True
            if self.n < CAPACITY:
                row = self.buf[self.n]
                k = len(self.index)
                row[:k] = self.data.sensordata[self.index]
                row[k:] = (self.data.ctrl[self.act] - self.default) / self.scale  # the policy's actions
                self.beats[self.n] = self._commands
                self.n += 1
        elif self.recording:  # the node left policy mode: its first policy phase is the trajectory
            self.done = True
        self._commands = 0

    def trace(self) -> GaitTrace:
        """The policy phase, less its last :data:`STATUS_LAG` samples."""
        rows = self.buf[: max(0, self.n - STATUS_LAG)]
        col = {k: rows[:, s] for k, s in self.columns.items()}
        feet = len(self.robot.foot_geoms)
        pos, q = col["base_pos"], col["base_quat"]
        tilt = np.arccos(np.clip(1.0 - 2.0 * (q[:, 1] ** 2 + q[:, 2] ** 2), -1.0, 1.0))
        fell = bool(np.any(tilt > MAX_TILT) or np.any(col["base_contact"] > 1.0))  # the training task's failure
        ground = self.terrain.height_at(pos[:, 0], pos[:, 1]) if self.terrain is not None else 0.0
        return GaitTrace(base_pos=pos, base_height=pos[:, 2] - ground, base_quat=col["base_quat"],
                         base_lin_vel=col["base_lin_vel"], gyro=col["gyro"],
                         command=np.tile(self.command, (len(rows), 1)), joint_pos=col["joint_pos"],
                         joint_vel=col["joint_vel"], torque=col["torque"], foot_contact=col["foot_contact"] > 1.0,
                         foot_vel=col["foot_vel"].reshape(-1, feet, 3), actions=rows[:, len(self.index):],
                         fell=fell)

    def spec(self) -> GaitSpec:
        r, m = self.robot, self.model
        base = m.body(r.base_body).id
        joints = [m.joint(j).id for j in r.joint_names]
        return GaitSpec(standing_height=float(r.init_height), mass=float(m.body_subtreemass[base]),
                        torque_limits=np.asarray(r.torque_limits, dtype=np.float64),
                        joint_limits=np.where(m.jnt_limited[joints, None] > 0, m.jnt_range[joints], 0.0),
                        dt=self.dt, joint_names=list(r.joint_names), foot_names=list(r.foot_geoms))

    def save(self, path: str | Path) -> None:
        """The trace, the robot's constants, the stand-up's clamps and the commands per control period as one
        ``.npz`` (:func:`load`)."""
        save(path, self.trace(), self.spec(), self.stand_up_ticks, self.stand_up_clamps,
             self.beats[: max(0, self.n - STATUS_LAG)])


def save(path: str | Path, trace: GaitTrace, spec: GaitSpec, stand_up_ticks: int = 0, stand_up_clamps: int = 0,
         beats: np.ndarray | None = None) -> None:
    """``trace``, ``spec``, the stand-up's counts and ``beats`` (commands per control period, one per sample;
    None: not recorded) as one ``.npz`` (:func:`load` reads it back)."""
    arrays = {f"trace_{k}": v for k, v in vars(trace).items() if k != "fell"}
    arrays |= {f"spec_{k}": np.asarray(v) for k, v in vars(spec).items()}
    if beats is not None:
        arrays["beats"] = np.asarray(beats)
    np.savez(path, **arrays, fell=trace.fell, stand_up_ticks=stand_up_ticks, stand_up_clamps=stand_up_clamps)


def load(path: str | Path) -> tuple[GaitTrace, GaitSpec, int | None, np.ndarray | None]:
    """``(trace, spec, stand-up clamps, beats)`` from :meth:`GaitRecorder.save` (clamps None: no stand-up seen;
    beats: the commands applied per control period, None where not recorded)."""
    with np.load(path) as z:
        trace = GaitTrace(**{k[6:]: z[k] for k in z.files if k.startswith("trace_")}, fell=bool(z["fell"]))
        spec = {k[5:]: z[k] for k in z.files if k.startswith("spec_")}
        spec = GaitSpec(**{**spec, "standing_height": float(spec["standing_height"]), "mass": float(spec["mass"]),
                           "dt": float(spec["dt"]), "joint_names": [str(n) for n in spec["joint_names"]],
                           "foot_names": [str(n) for n in spec["foot_names"]]})
        clamps = int(z["stand_up_clamps"]) if int(z["stand_up_ticks"]) else None
        beats = z["beats"] if "beats" in z.files else None
    return trace, spec, clamps, beats
