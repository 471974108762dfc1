"""Transport-neutral ROS 2 messages: the few the deploy node and the sim2sim bridge speak.

Each transport (``transports/dds.py``: plain DDS in ROS 2's wire format; ``transports/ros2.py``:
rclpy) converts between these and its own message objects, so the node core, the safety logic
and the bridge never see a transport type. Field names follow the ROS 2 definitions; stamps
are seconds (float) on the sender's ``time.time()`` clock, as ``builtin_interfaces/Time``.

Numpy only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


def _vec(n: int):
    return field(default_factory=lambda: np.zeros(n))


@dataclass
class JointState:
    """``sensor_msgs/msg/JointState``: per-joint arrays in the order of ``name``."""

    stamp: float = 0.0
    name: list[str] = field(default_factory=list)
    position: np.ndarray = _vec(0)
    velocity: np.ndarray = _vec(0)
    effort: np.ndarray = _vec(0)
    frame_id: str = ""


@dataclass
class Imu:
    """``sensor_msgs/msg/Imu`` without covariances (sent as zeros: "unknown")."""

    stamp: float = 0.0
    orientation: np.ndarray = field(default_factory=lambda: np.array([1.0, 0.0, 0.0, 0.0]))
    """Quaternion **w, x, y, z** here (ROS orders x, y, z, w on the wire; transports convert)."""
    angular_velocity: np.ndarray = _vec(3)
    linear_acceleration: np.ndarray = _vec(3)
    frame_id: str = ""


@dataclass
class Twist:
    """``geometry_msgs/msg/Twist``: body velocity command (linear x, y; angular z used)."""

    linear: np.ndarray = _vec(3)
    angular: np.ndarray = _vec(3)


@dataclass
class PoseStamped:
    """``geometry_msgs/msg/PoseStamped``: a pose in frame ``frame_id`` (an object's, from motion capture or
    perception)."""

    stamp: float = 0.0
    position: np.ndarray = _vec(3)
    orientation: np.ndarray = field(default_factory=lambda: np.array([1.0, 0.0, 0.0, 0.0]))
    """Quaternion **w, x, y, z** here (ROS orders x, y, z, w on the wire; transports convert)."""
    frame_id: str = ""


@dataclass
class Float64MultiArray:
    """``std_msgs/msg/Float64MultiArray``; ``dims`` holds the layout's (label, size, stride)."""

    data: np.ndarray = _vec(0)
    dims: list[tuple[str, int, int]] = field(default_factory=list)
    data_offset: int = 0


@dataclass
class Float64:
    """``std_msgs/msg/Float64``: one set point (a lift bundle's target height)."""

    data: float = 0.0


@dataclass
class Bool:
    """``std_msgs/msg/Bool`` (e-stop, start)."""

    data: bool = False


@dataclass
class String:
    """``std_msgs/msg/String`` (the node's JSON status)."""

    data: str = ""


@dataclass
class DiagnosticStatus:
    """``diagnostic_msgs/msg/DiagnosticStatus``; ``values`` holds the ``KeyValue`` pairs."""

    OK, WARN, ERROR, STALE = 0, 1, 2, 3
    level: int = 0
    name: str = ""
    message: str = ""
    hardware_id: str = ""
    values: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class DiagnosticArray:
    """``diagnostic_msgs/msg/DiagnosticArray`` (the node's status on ``/diagnostics``)."""

    stamp: float = 0.0
    status: list[DiagnosticStatus] = field(default_factory=list)
    frame_id: str = ""


MESSAGE_TYPES: dict[str, type] = {
    "sensor_msgs/msg/JointState": JointState,
    "sensor_msgs/msg/Imu": Imu,
    "geometry_msgs/msg/Twist": Twist,
    "geometry_msgs/msg/PoseStamped": PoseStamped,
    "std_msgs/msg/Float64MultiArray": Float64MultiArray,
    "std_msgs/msg/Float64": Float64,
    "std_msgs/msg/Bool": Bool,
    "std_msgs/msg/String": String,
    "diagnostic_msgs/msg/DiagnosticArray": DiagnosticArray,
}
"""ROS 2 type name -> neutral class; every transport supports exactly these."""


def type_name(cls: type) -> str:
    """``JointState -> 'sensor_msgs/msg/JointState'``."""
    for name, c in MESSAGE_TYPES.items():
        if c is cls:
            return name
    raise KeyError(f"{cls.__name__} is not a deploy message type; use one of {sorted(MESSAGE_TYPES)}")
