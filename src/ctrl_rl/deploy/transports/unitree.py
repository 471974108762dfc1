"""``--transport unitree``: Unitree's low-level protocol for the robot-facing topics, plain DDS for the rest.

A Unitree robot (Go2 family: ``unitree_go``; G1, H1-2: ``unitree_hg``) takes ``LowCmd`` on ``rt/lowcmd``
and publishes ``LowState`` on ``rt/lowstate`` over CycloneDDS, with a CRC on each. This transport
speaks that and nothing else on the robot side, and keeps the node unchanged: the node still
subscribes a ``JointState`` and an ``Imu`` and publishes its ``[3, n]`` position-gains command; here

* ``node`` side (the deploy node): each ``LowState`` whose CRC is right and whose ``tick`` advanced
  becomes one ``JointState`` (the bundle's joints by the family's motor index, position, velocity,
  estimated torque) and one ``Imu`` (quaternion w, x, y, z, gyro, accelerometer), stamped on arrival;
  any other is dropped and counted, so the node's state watchdog sees a silent robot and damps.
  Each command becomes one ``LowCmd``: the bundle's motors enabled with target, kp, kd (dq = tau = 0),
  every other motor stopped, the header the family needs, and the CRC.
* ``robot`` side (the sim2sim bridge, as unitree_mujoco plays the robot): the reverse, so the whole
  path runs here; a ``LowCmd`` with a wrong CRC never reaches the simulated motors.

Every other topic (cmd_vel, start, e-stop, status, diagnostics, height map) goes through
:class:`~ctrl_rl.deploy.transports.dds.DdsTransport` unchanged. Message facts: ``deploy/unitree_msgs.py``.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .. import messages as m
from ..unitree_msgs import GO_HEAD, GO_LEVEL_LOW, MODE_ENABLE, POS_STOP, VEL_STOP, Family
from .dds import DdsTransport

LOWCMD, LOWSTATE = "/lowcmd", "/lowstate"
"""ROS names of ``rt/lowcmd`` and ``rt/lowstate`` (absolute: the robot knows no namespace)."""
HG_MODE_MACHINE_29DOF = 5
"""``mode_machine`` a 29-DoF G1 reports (the robot side sends it; the node echoes what it read)."""


class UnitreeTransport:
    """The Unitree low-level protocol on one side of the robot link (module docstring)."""

    name = "unitree"

    def __init__(self, family: Family, joint_names: Sequence[str], side: str = "node", namespace: str = "",
                 domain_id: int | None = None, localhost_only: bool | None = None) -> None:
        if side not in ("node", "robot"):
            raise ValueError(f"side must be node or robot, got {side!r}")
        missing = [j for j in joint_names if j not in family.motors]
        if missing:
            raise ValueError(f"joints {missing} have no motor index in {family.name}, whose motors are "
                             f"{list(family.motors)}; set unitree_family to the robot's message package")
        self.family, self.side = family, side
        self.joint_names = list(joint_names)
        self.motor = np.array([family.motors.index(j) for j in joint_names])
        self._motor_of = {name: int(i) for name, i in zip(self.joint_names, self.motor, strict=True)}
        self.dds = DdsTransport(namespace=namespace, domain_id=domain_id, localhost_only=localhost_only)
        self.stats = {"lowstate": 0, "lowcmd": 0, "bad_crc": 0, "stale_tick": 0}
        self._state_callbacks: dict[type, list[Callable[[Any], None]]] = {m.JointState: [], m.Imu: []}
        self._state_reader = False
        self._last_tick: int | None = None
        self._mode_machine = HG_MODE_MACHINE_29DOF if side == "robot" else 0
        self._joints: m.JointState | None = None
        self._tick = 0
        self._lock = threading.Lock()

    # -- the Transport protocol ------------------------------------------------------------------
    def publisher(self, topic: str, msg_type: type, qos: Any = None) -> Callable[[Any], None]:
        if self.side == "node" and msg_type is m.Float64MultiArray:  # the node's command
            write = self.dds.publisher(LOWCMD, self.family.low_cmd.idl, qos)
            return lambda msg: write(self.low_cmd(msg))
        if self.side == "robot" and msg_type is m.JointState:
            return self._keep_joints
        if self.side == "robot" and msg_type is m.Imu:  # the bridge sends joints, then the IMU: one LowState
            write = self.dds.publisher(LOWSTATE, self.family.low_state.idl, qos)
            return lambda imu: write(self.low_state(self._joints, imu)) if self._joints is not None else None
        return self.dds.publisher(topic, msg_type, qos)

    def subscribe(self, topic: str, msg_type: type, callback: Callable[[Any], None], sensor: bool = False,
                  qos: Any = None) -> None:
        if self.side == "node" and msg_type in self._state_callbacks:
            self._state_callbacks[msg_type].append(callback)
            if not self._state_reader:
                self._state_reader = True
                self.dds.subscribe(LOWSTATE, self.family.low_state.idl, self._on_low_state, sensor=True, qos=qos)
            return
        if self.side == "robot" and msg_type is m.Float64MultiArray:  # the bridge's command subscription
            self.dds.subscribe(LOWCMD, self.family.low_cmd.idl, lambda s: self._on_low_cmd(s, callback), qos=qos)
            return
        self.dds.subscribe(topic, msg_type, callback, sensor, qos)

    def close(self) -> None:
        self.dds.close()

    def resolve(self, topic: str) -> str:
        """The ROS name of a plain-DDS topic (start, e-stop, ...) in this namespace."""
        return self.dds.resolve(topic)

    def wait_for_subscribers(self, n: int = 1, timeout: float = 5.0) -> bool:
        return self.dds.wait_for_subscribers(n, timeout)

    def wait_for_publishers(self, n: int = 1, timeout: float = 5.0) -> bool:
        return self.dds.wait_for_publishers(n, timeout)

    # -- node side -------------------------------------------------------------------------------
    def low_cmd(self, msg: m.Float64MultiArray) -> Any:
        """The node's ``[3, n]`` command (targets, kp, kd in ``joint_names`` order) as a ``LowCmd``
        with its CRC. Anything else, or a non-finite value, is refused: nothing is published."""
        n = len(self.joint_names)
        data = np.asarray(msg.data, dtype=np.float64)
        if data.shape != (3 * n,) or not np.all(np.isfinite(data)):
            raise ValueError(f"transport unitree sends [3, {n}] position-gains commands (command_format="
                             f"position_gains), finite; got {data.shape[0]} values")
        q, kp, kd = data.reshape(3, n)
        cmd = self.family.low_cmd.zero()
        go = self.family.name == "unitree_go"
        if go:
            cmd.head, cmd.level_flag = list(GO_HEAD), GO_LEVEL_LOW
            for motor in cmd.motor_cmd:  # every motor off and without a target unless the bundle drives it
                motor.q, motor.dq = POS_STOP, VEL_STOP
        else:
            cmd.mode_machine = self._mode_machine
        for j, i in enumerate(self.motor):
            motor = cmd.motor_cmd[i]
            motor.mode, motor.q, motor.dq, motor.tau = MODE_ENABLE, float(q[j]), 0.0, 0.0
            motor.kp, motor.kd = float(kp[j]), float(kd[j])
        cmd.crc = self.family.low_cmd.crc(cmd)
        self.stats["lowcmd"] += 1
        return cmd

    def _on_low_state(self, s: Any) -> None:
        if s.crc != self.family.low_state.crc(s):
            self.stats["bad_crc"] += 1
            return
        with self._lock:
            if self._last_tick is not None and s.tick <= self._last_tick:
                self.stats["stale_tick"] += 1
                return
            self._last_tick = s.tick
        if self.family.name == "unitree_hg":
            self._mode_machine = s.mode_machine
        self.stats["lowstate"] += 1
        now = time.time()
        motors = [s.motor_state[i] for i in self.motor]
        joints = m.JointState(stamp=now, name=list(self.joint_names),
                              position=np.array([x.q for x in motors], dtype=np.float64),
                              velocity=np.array([x.dq for x in motors], dtype=np.float64),
                              effort=np.array([x.tau_est for x in motors], dtype=np.float64))
        imu = s.imu_state
        reading = m.Imu(stamp=now, orientation=np.array(imu.quaternion, dtype=np.float64),
                        angular_velocity=np.array(imu.gyroscope, dtype=np.float64),
                        linear_acceleration=np.array(imu.accelerometer, dtype=np.float64))
        for callback in self._state_callbacks[m.JointState]:
            callback(joints)
        for callback in self._state_callbacks[m.Imu]:
            callback(reading)

    # -- robot side ------------------------------------------------------------------------------
    def _keep_joints(self, msg: m.JointState) -> None:
        self._joints = msg

    def low_state(self, joints: m.JointState, imu: m.Imu) -> Any:
        """A ``LowState`` of the robot's joints (by name) and IMU, with a millisecond tick that always
        advances, and its CRC."""
        s = self.family.low_state.zero()
        index = self._motor_of
        for name, q, dq, tau in zip(joints.name, joints.position, joints.velocity,
                                    joints.effort if len(joints.effort) else np.zeros(len(joints.name)), strict=True):
            motor = s.motor_state[index[name]]
            motor.mode, motor.q, motor.dq, motor.tau_est = MODE_ENABLE, float(q), float(dq), float(tau)
        w, x, y, z = (float(v) for v in imu.orientation)
        s.imu_state.quaternion = [w, x, y, z]
        s.imu_state.gyroscope = [float(v) for v in imu.angular_velocity]
        s.imu_state.accelerometer = [float(v) for v in imu.linear_acceleration]
        s.imu_state.rpy = [math.atan2(2 * (w * x + y * z), 1 - 2 * (x * x + y * y)),
                           math.asin(max(-1.0, min(1.0, 2 * (w * y - z * x)))),
                           math.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))]
        self._tick = max(self._tick + 1, int(time.monotonic() * 1000)) & 0xFFFFFFFF
        s.tick = self._tick
        if self.family.name == "unitree_go":
            s.head, s.level_flag = list(GO_HEAD), GO_LEVEL_LOW
        else:
            s.mode_machine = self._mode_machine
        s.crc = self.family.low_state.crc(s)
        return s

    def _on_low_cmd(self, s: Any, callback: Callable[[Any], None]) -> None:
        """A ``LowCmd`` as the bridge's ``[3, n]`` command; a wrong CRC never reaches the motors, and a
        stopped motor gets no stiffness and no damping."""
        if s.crc != self.family.low_cmd.crc(s):
            self.stats["bad_crc"] += 1
            return
        self.stats["lowcmd"] += 1
        motors = [s.motor_cmd[i] for i in self.motor]
        on = np.array([x.mode == MODE_ENABLE for x in motors])
        q = np.where(on, [x.q for x in motors], 0.0)
        kp = np.where(on, [x.kp for x in motors], 0.0)
        kd = np.where(on, [x.kd for x in motors], 0.0)
        callback(m.Float64MultiArray(data=np.concatenate([q, kp, kd]),
                                     dims=[("field", 3, 3 * len(motors)), ("joint", len(motors), len(motors))]))
