"""ROS 2's messages as DDS sees them: IDL structs field by field (the wire format) and their conversions to and
from the neutral messages (``ctrl_rl.deploy.messages``). The plain-DDS transport (``dds.py``) and Unitree's
(``unitree.py``) speak them.
"""

# No `from __future__ import annotations`: cyclonedds resolves string annotations by module global
# name, which fails for builtins (bool, str).
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from cyclonedds.idl import IdlStruct
from cyclonedds.idl.types import array, float64, int32, sequence, uint8, uint32

from .. import messages as m
from . import split_stamp, stamp_seconds

# IDL types: ROS 2 .msg definitions as DDS sees them (field order and widths are the wire format).
# Module-level classes (not nested) because cyclonedds resolves the annotations by global name;
# ``@dataclass`` because IdlStruct only adds the (de)serializer, not ``__init__``.


@dataclass
class Time_(IdlStruct, typename="builtin_interfaces::msg::dds_::Time_"):
    sec: int32
    nanosec: uint32


@dataclass
class Header_(IdlStruct, typename="std_msgs::msg::dds_::Header_"):
    stamp: Time_
    frame_id: str


@dataclass
class JointState_(IdlStruct, typename="sensor_msgs::msg::dds_::JointState_"):
    header: Header_
    name: sequence[str]
    position: sequence[float64]
    velocity: sequence[float64]
    effort: sequence[float64]


@dataclass
class Quaternion_(IdlStruct, typename="geometry_msgs::msg::dds_::Quaternion_"):
    x: float64
    y: float64
    z: float64
    w: float64


@dataclass
class Vector3_(IdlStruct, typename="geometry_msgs::msg::dds_::Vector3_"):
    x: float64
    y: float64
    z: float64


@dataclass
class Point_(IdlStruct, typename="geometry_msgs::msg::dds_::Point_"):
    x: float64
    y: float64
    z: float64


@dataclass
class Pose_(IdlStruct, typename="geometry_msgs::msg::dds_::Pose_"):
    position: Point_
    orientation: Quaternion_


@dataclass
class PoseStamped_(IdlStruct, typename="geometry_msgs::msg::dds_::PoseStamped_"):
    header: Header_
    pose: Pose_


@dataclass
class Imu_(IdlStruct, typename="sensor_msgs::msg::dds_::Imu_"):
    header: Header_
    orientation: Quaternion_
    orientation_covariance: array[float64, 9]
    angular_velocity: Vector3_
    angular_velocity_covariance: array[float64, 9]
    linear_acceleration: Vector3_
    linear_acceleration_covariance: array[float64, 9]


@dataclass
class Twist_(IdlStruct, typename="geometry_msgs::msg::dds_::Twist_"):
    linear: Vector3_
    angular: Vector3_


@dataclass
class MultiArrayDimension_(IdlStruct, typename="std_msgs::msg::dds_::MultiArrayDimension_"):
    label: str
    size: uint32
    stride: uint32


@dataclass
class MultiArrayLayout_(IdlStruct, typename="std_msgs::msg::dds_::MultiArrayLayout_"):
    dim: sequence[MultiArrayDimension_]
    data_offset: uint32


@dataclass
class Float64MultiArray_(IdlStruct, typename="std_msgs::msg::dds_::Float64MultiArray_"):
    layout: MultiArrayLayout_
    data: sequence[float64]


@dataclass
class Float64_(IdlStruct, typename="std_msgs::msg::dds_::Float64_"):
    data: float64


@dataclass
class Bool_(IdlStruct, typename="std_msgs::msg::dds_::Bool_"):
    data: bool


@dataclass
class String_(IdlStruct, typename="std_msgs::msg::dds_::String_"):
    data: str


@dataclass
class KeyValue_(IdlStruct, typename="diagnostic_msgs::msg::dds_::KeyValue_"):
    key: str
    value: str


@dataclass
class DiagnosticStatus_(IdlStruct, typename="diagnostic_msgs::msg::dds_::DiagnosticStatus_"):
    level: uint8  # ROS `byte` (IDL octet): one byte on the wire either way
    name: str
    message: str
    hardware_id: str
    values: sequence[KeyValue_]


@dataclass
class DiagnosticArray_(IdlStruct, typename="diagnostic_msgs::msg::dds_::DiagnosticArray_"):
    header: Header_
    status: sequence[DiagnosticStatus_]


def stamp_to_time(t: float) -> Time_:
    """Float seconds -> ``Time_`` (:func:`~ctrl_rl.deploy.transports.split_stamp`)."""
    sec, ns = split_stamp(t)
    return Time_(sec=sec, nanosec=ns)


time_to_stamp = stamp_seconds


def _f64(xs: Any) -> list[float]:
    return np.asarray(xs, dtype=np.float64).ravel().tolist()


def _arr(xs: Any) -> np.ndarray:
    return np.array(xs, dtype=np.float64)


def _vec3(v: Any) -> Vector3_:
    x, y, z = _f64(v)
    return Vector3_(x=x, y=y, z=z)


def _unvec3(v: Vector3_) -> np.ndarray:
    return np.array([v.x, v.y, v.z], dtype=np.float64)


def _header(stamp: float, frame_id: str) -> Header_:
    return Header_(stamp=stamp_to_time(stamp), frame_id=frame_id)


_ZERO9 = [0.0] * 9


def _to_joint_state(msg: m.JointState) -> JointState_:
    return JointState_(header=_header(msg.stamp, msg.frame_id), name=list(msg.name), position=_f64(msg.position),
                       velocity=_f64(msg.velocity), effort=_f64(msg.effort))


def _from_joint_state(s: JointState_) -> m.JointState:
    return m.JointState(stamp=time_to_stamp(s.header.stamp), name=list(s.name), position=_arr(s.position),
                        velocity=_arr(s.velocity), effort=_arr(s.effort), frame_id=s.header.frame_id)


def _to_imu(msg: m.Imu) -> Imu_:
    w, x, y, z = _f64(msg.orientation)  # neutral w,x,y,z -> ROS x,y,z,w
    return Imu_(header=_header(msg.stamp, msg.frame_id), orientation=Quaternion_(x=x, y=y, z=z, w=w),
                orientation_covariance=_ZERO9, angular_velocity=_vec3(msg.angular_velocity),
                angular_velocity_covariance=_ZERO9, linear_acceleration=_vec3(msg.linear_acceleration),
                linear_acceleration_covariance=_ZERO9)


def _from_imu(s: Imu_) -> m.Imu:
    q = s.orientation
    return m.Imu(stamp=time_to_stamp(s.header.stamp), orientation=np.array([q.w, q.x, q.y, q.z], dtype=np.float64),
                 angular_velocity=_unvec3(s.angular_velocity), linear_acceleration=_unvec3(s.linear_acceleration),
                 frame_id=s.header.frame_id)


def _to_pose(msg: m.PoseStamped) -> PoseStamped_:
    (x, y, z), (qw, qx, qy, qz) = _f64(msg.position), _f64(msg.orientation)  # neutral w,x,y,z -> ROS x,y,z,w
    return PoseStamped_(header=_header(msg.stamp, msg.frame_id),
                        pose=Pose_(position=Point_(x=x, y=y, z=z), orientation=Quaternion_(x=qx, y=qy, z=qz, w=qw)))


def _from_pose(s: PoseStamped_) -> m.PoseStamped:
    p, q = s.pose.position, s.pose.orientation
    return m.PoseStamped(stamp=time_to_stamp(s.header.stamp), position=np.array([p.x, p.y, p.z], dtype=np.float64),
                         orientation=np.array([q.w, q.x, q.y, q.z], dtype=np.float64), frame_id=s.header.frame_id)


def _to_multiarray(msg: m.Float64MultiArray) -> Float64MultiArray_:
    dims = [MultiArrayDimension_(label=str(lb), size=int(sz), stride=int(st)) for lb, sz, st in msg.dims]
    return Float64MultiArray_(layout=MultiArrayLayout_(dim=dims, data_offset=int(msg.data_offset)), data=_f64(msg.data))


def _from_multiarray(s: Float64MultiArray_) -> m.Float64MultiArray:
    return m.Float64MultiArray(data=_arr(s.data), dims=[(d.label, d.size, d.stride) for d in s.layout.dim],
                               data_offset=s.layout.data_offset)


def _to_diagnostics(msg: m.DiagnosticArray) -> DiagnosticArray_:
    return DiagnosticArray_(header=_header(msg.stamp, msg.frame_id), status=[
        DiagnosticStatus_(level=int(st.level), name=st.name, message=st.message, hardware_id=st.hardware_id,
                          values=[KeyValue_(key=str(k), value=str(v)) for k, v in st.values]) for st in msg.status])


def _from_diagnostics(s: DiagnosticArray_) -> m.DiagnosticArray:
    return m.DiagnosticArray(stamp=time_to_stamp(s.header.stamp), frame_id=s.header.frame_id, status=[
        m.DiagnosticStatus(int(st.level), st.name, st.message, st.hardware_id, [(kv.key, kv.value) for kv in st.values])
        for st in s.status])


CONVERTERS: dict[type, tuple[type[IdlStruct], Callable[[Any], IdlStruct], Callable[[Any], Any]]] = {
    m.JointState: (JointState_, _to_joint_state, _from_joint_state),
    m.Imu: (Imu_, _to_imu, _from_imu),
    m.Twist: (Twist_, lambda x: Twist_(linear=_vec3(x.linear), angular=_vec3(x.angular)),
              lambda s: m.Twist(linear=_unvec3(s.linear), angular=_unvec3(s.angular))),
    m.PoseStamped: (PoseStamped_, _to_pose, _from_pose),
    m.Float64MultiArray: (Float64MultiArray_, _to_multiarray, _from_multiarray),
    m.Float64: (Float64_, lambda x: Float64_(data=float(x.data)), lambda s: m.Float64(data=float(s.data))),
    m.Bool: (Bool_, lambda x: Bool_(data=bool(x.data)), lambda s: m.Bool(data=bool(s.data))),
    m.String: (String_, lambda x: String_(data=str(x.data)), lambda s: m.String(data=s.data)),
    m.DiagnosticArray: (DiagnosticArray_, _to_diagnostics, _from_diagnostics),
}
"""Neutral class -> (IDL class, to_idl, from_idl); keys are exactly ``messages.MESSAGE_TYPES``."""
