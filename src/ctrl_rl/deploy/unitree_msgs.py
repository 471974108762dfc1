"""Unitree's low-level messages: ``LowCmd``/``LowState`` of the ``unitree_go`` (Go2 family) and
``unitree_hg`` (G1, H1-2) IDL packages, their CRC and their motor index maps. Numpy and cyclonedds.

Written here from the public definitions (unitree_sdk2's IDL and ``crc32_core``, unitree_ros2's
``.msg`` files; facts and sources in docs/deploy.md, "Unitree"):

* Each message is declared once as a field list (:data:`GO`, :data:`HG`); the cyclonedds IDL class
  (the DDS type ``unitree_go::msg::dds_::LowCmd_`` ...) and the CRC's byte layout are both made
  from it.
* The CRC is CRC-32/MPEG-2 (polynomial 0x04C11DB7, initial value 0xFFFFFFFF, no reflection, no
  final XOR) over the message laid out as a naturally aligned little-endian C struct (not the
  CDR bytes on the wire), taken as 32-bit words read little-endian and fed most significant bit
  first, every word but the trailing ``crc``. Test vectors: ``tests/test_unitree_transport.py``.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np
from cyclonedds.idl import IdlStruct, make_idl_struct
from cyclonedds.idl.types import array, float32, int8, int16, int32, uint8, uint16, uint32

POS_STOP = 2.146e9
"""``unitree_go``: a motor's ``q`` meaning "no position target" (with kp = 0)."""
VEL_STOP = 16000.0
"""``unitree_go``: a motor's ``dq`` meaning "no velocity target" (with kd = 0)."""
MODE_ENABLE, MODE_DISABLE = 0x01, 0x00
"""Motor ``mode``: servo (FOC) enabled / stopped, in both families."""
GO_HEAD, GO_LEVEL_LOW = (0xFE, 0xEF), 0xFF

Field = tuple[str, Any, int]
"""``(name, kind, count)``: kind a ``struct`` code (B H I b h i f) or another field list; count 1 = scalar."""

_IDL = {"B": uint8, "H": uint16, "I": uint32, "b": int8, "h": int16, "i": int32, "f": float32}

_go_motor_cmd: list[Field] = [("mode", "B", 1), ("q", "f", 1), ("dq", "f", 1), ("tau", "f", 1), ("kp", "f", 1),
                              ("kd", "f", 1), ("reserve", "I", 3)]
_go_motor_state: list[Field] = [("mode", "B", 1), ("q", "f", 1), ("dq", "f", 1), ("ddq", "f", 1), ("tau_est", "f", 1),
                                ("q_raw", "f", 1), ("dq_raw", "f", 1), ("ddq_raw", "f", 1), ("temperature", "B", 1),
                                ("lost", "I", 1), ("reserve", "I", 2)]
_go_imu: list[Field] = [("quaternion", "f", 4), ("gyroscope", "f", 3), ("accelerometer", "f", 3), ("rpy", "f", 3),
                        ("temperature", "B", 1)]
_go_bms_cmd: list[Field] = [("off", "B", 1), ("reserve", "B", 3)]
_go_bms_state: list[Field] = [("version_high", "B", 1), ("version_low", "B", 1), ("status", "B", 1), ("soc", "B", 1),
                              ("current", "i", 1), ("cycle", "H", 1), ("bq_ntc", "B", 2), ("mcu_ntc", "B", 2),
                              ("cell_vol", "H", 15)]
_go_head: list[Field] = [("head", "B", 2), ("level_flag", "B", 1), ("frame_reserve", "B", 1), ("sn", "I", 2),
                         ("version", "I", 2), ("bandwidth", "H", 1)]
_hg_motor_cmd: list[Field] = [("mode", "B", 1), ("q", "f", 1), ("dq", "f", 1), ("tau", "f", 1), ("kp", "f", 1),
                              ("kd", "f", 1), ("reserve", "I", 1)]
_hg_motor_state: list[Field] = [("mode", "B", 1), ("q", "f", 1), ("dq", "f", 1), ("ddq", "f", 1), ("tau_est", "f", 1),
                                ("temperature", "h", 2), ("vol", "f", 1), ("sensor", "I", 2), ("motorstate", "I", 1),
                                ("reserve", "I", 4)]
_hg_imu: list[Field] = [("quaternion", "f", 4), ("gyroscope", "f", 3), ("accelerometer", "f", 3), ("rpy", "f", 3),
                        ("temperature", "h", 1)]


def _idl_class(package: str, name: str, fields: list[Field], classes: dict[str, type]) -> type[IdlStruct]:
    """The cyclonedds class of one message (its nested classes made first, kept in ``classes``)."""
    annotations = {}
    for fname, kind, count in fields:
        if isinstance(kind, tuple):  # (nested name, nested fields)
            key = f"{package}.{kind[0]}"
            if key not in classes:
                classes[key] = _idl_class(package, kind[0], kind[1], classes)
            sub = classes[key]
            annotations[fname] = array[sub, count] if count > 1 else sub
        else:
            annotations[fname] = array[_IDL[kind], count] if count > 1 else _IDL[kind]
    return make_idl_struct(f"{package}_{name}", f"{package}::msg::dds_::{name}", annotations)


def _c_layout(fields: list[Field]) -> tuple[str, int]:
    """``struct`` format (explicit padding, no prefix) and alignment of ``fields`` as a C struct."""
    fmt, offset, align = "", 0, 1
    for _, kind, count in fields:
        if isinstance(kind, tuple):
            sub_fmt, sub_align = _c_layout(kind[1])
            size, part = struct.calcsize("<" + sub_fmt), sub_fmt * count
        else:
            sub_align = size = struct.calcsize(kind)
            part = f"{count}{kind}"
        pad = -offset % sub_align
        fmt += "x" * pad + part
        offset += pad + size * count
        align = max(align, sub_align)
    return fmt + "x" * (-offset % align), align


def _flatten(msg: Any, fields: list[Field], out: list) -> list:
    for fname, kind, count in fields:
        value = getattr(msg, fname)
        items = value if count > 1 else [value]
        for item in items:
            if isinstance(kind, tuple):
                _flatten(item, kind[1], out)
            else:
                out.append(item)
    return out


_REVERSE = bytes(int(f"{b:08b}"[::-1], 2) for b in range(256))


def crc32_core(words: bytes) -> int:
    """Unitree's ``crc32_core`` of little-endian 32-bit ``words``: CRC-32/MPEG-2 of each word's bytes
    in big-endian order, computed through zlib's reflected CRC-32 on bit-reversed bytes."""
    be = np.frombuffer(words, "<u4").astype(">u4").tobytes()
    reflected = zlib.crc32(be.translate(_REVERSE)) ^ 0xFFFFFFFF
    return int(f"{reflected:032b}"[::-1], 2)


@dataclass(frozen=True)
class Message:
    """One Unitree message: its IDL class and its CRC layout."""

    idl: type[IdlStruct]
    fields: list[Field]
    fmt: str
    nested: dict[str, type]
    """Nested struct name (``MotorCmd_`` ...) -> its IDL class."""

    @property
    def size(self) -> int:
        """Bytes of the C struct the CRC covers (the crc word included)."""
        return struct.calcsize(self.fmt)

    def c_bytes(self, msg: Any) -> bytes:
        return struct.pack(self.fmt, *_flatten(msg, self.fields, []))

    def crc(self, msg: Any) -> int:
        """The CRC ``msg`` should carry (over every word but its trailing ``crc``)."""
        return crc32_core(self.c_bytes(msg)[:-4])

    def zero(self) -> Any:
        """An all-zero message (nested structs and arrays filled)."""
        return self._zero(self.idl, self.fields)

    def _zero(self, cls: type, fields: list[Field]) -> Any:
        values = {}
        for fname, kind, count in fields:
            if isinstance(kind, tuple):
                items = [self._zero(self.nested[kind[0]], kind[1]) for _ in range(count)]
            else:
                items = [0.0 if kind == "f" else 0] * count
            values[fname] = items if count > 1 else items[0]
        return cls(**values)


@dataclass(frozen=True)
class Family:
    """A message package: ``unitree_go`` (Go2, Go1-style quadrupeds) or ``unitree_hg`` (G1, H1-2)."""

    name: str
    num_motors: int
    low_cmd: Message
    low_state: Message
    motors: tuple[str, ...]
    """Joint names by motor index (the robot's own order); the rest of the slots are unused."""


def _family(package: str, num_motors: int, motor_cmd: list[Field], motor_state: list[Field], imu: list[Field],
            cmd_fields: list[Field], state_fields: list[Field], motors: tuple[str, ...]) -> Family:
    classes: dict[str, type] = {}
    nested = {"MotorCmd_": motor_cmd, "MotorState_": motor_state, "IMUState_": imu, "BmsCmd_": _go_bms_cmd,
              "BmsState_": _go_bms_state}

    def resolve(fields: list[Field]) -> list[Field]:
        return [(n, (k, nested[k]) if k in nested else k, c) for n, k, c in fields]

    cmd, state = resolve(cmd_fields), resolve(state_fields)
    messages = []
    for name, fields in (("LowCmd_", cmd), ("LowState_", state)):
        fmt, _ = _c_layout(fields)
        idl = _idl_class(package, name, fields, classes)
        messages.append(Message(idl, fields, "<" + fmt, {k.split(".", 1)[1]: v for k, v in classes.items()}))
    return Family(package, num_motors, messages[0], messages[1], motors)


_LEG = ("hip", "thigh", "calf")
GO_MOTORS = tuple(f"{leg}_{j}_joint" for leg in ("FR", "FL", "RR", "RL") for j in _LEG)
"""unitree_go motor order: FR, FL, RR, RL legs, each hip, thigh, calf (slots 12-19 unused)."""
G1_MOTORS = tuple(
    [f"{side}_{j}_joint" for side in ("left", "right")
     for j in ("hip_pitch", "hip_roll", "hip_yaw", "knee", "ankle_pitch", "ankle_roll")]
    + ["waist_yaw_joint", "waist_roll_joint", "waist_pitch_joint"]
    + [f"{side}_{j}_joint" for side in ("left", "right")
       for j in ("shoulder_pitch", "shoulder_roll", "shoulder_yaw", "elbow", "wrist_roll", "wrist_pitch", "wrist_yaw")])
"""unitree_hg motor order of the 29-DoF G1 (slots 29-34 unused)."""

GO = _family("unitree_go", 20, _go_motor_cmd, _go_motor_state, _go_imu,
             [*_go_head, ("motor_cmd", "MotorCmd_", 20), ("bms_cmd", "BmsCmd_", 1), ("wireless_remote", "B", 40),
              ("led", "B", 12), ("fan", "B", 2), ("gpio", "B", 1), ("reserve", "I", 1), ("crc", "I", 1)],
             [*_go_head, ("imu_state", "IMUState_", 1), ("motor_state", "MotorState_", 20),
              ("bms_state", "BmsState_", 1), ("foot_force", "h", 4), ("foot_force_est", "h", 4), ("tick", "I", 1),
              ("wireless_remote", "B", 40), ("bit_flag", "B", 1), ("adc_reel", "f", 1), ("temperature_ntc1", "B", 1),
              ("temperature_ntc2", "B", 1), ("power_v", "f", 1), ("power_a", "f", 1), ("fan_frequency", "H", 4),
              ("reserve", "I", 1), ("crc", "I", 1)], GO_MOTORS)
HG = _family("unitree_hg", 35, _hg_motor_cmd, _hg_motor_state, _hg_imu,
             [("mode_pr", "B", 1), ("mode_machine", "B", 1), ("motor_cmd", "MotorCmd_", 35), ("reserve", "I", 4),
              ("crc", "I", 1)],
             [("version", "I", 2), ("mode_pr", "B", 1), ("mode_machine", "B", 1), ("tick", "I", 1),
              ("imu_state", "IMUState_", 1), ("motor_state", "MotorState_", 35), ("wireless_remote", "B", 40),
              ("reserve", "I", 4), ("crc", "I", 1)], G1_MOTORS)
FAMILIES = {"go": GO, "hg": HG}
"""``unitree_family`` parameter value -> family."""


def family_for(robot: str, num_joints: int) -> str:
    """The family a bundle's robot speaks by default: ``hg`` for Unitree's humanoids, ``go`` for legged
    robots of up to 12 joints; otherwise the ``unitree_family`` parameter must say."""
    if robot.startswith(("unitree_g1", "unitree_h1")):
        return "hg"
    if robot.startswith("unitree_go") or num_joints <= 12:
        return "go"
    raise ValueError(f"robot {robot!r} ({num_joints} joints): set the deploy parameter unitree_family to go "
                     "(unitree_go: Go2-style quadrupeds) or hg (unitree_hg: G1, H1-2)")
