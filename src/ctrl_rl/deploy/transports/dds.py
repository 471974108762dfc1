"""Plain-DDS transport: PyPI ``cyclonedds`` speaking ROS 2's wire format, no ROS install needed.

Why this works with real ROS 2 nodes (rmw_cyclonedds_cpp, rmw_fastrtps_cpp): a ROS 2 topic is a
DDS topic named ``rt/<fully qualified name>`` whose type is named ``<pkg>::msg::dds_::<Msg>_``,
serialized as plain CDR (XCDR1, encapsulation ``CDR_LE``) of final (non-extensible) structs.
The IDL structs below mirror the ``.msg`` definitions field by field, so the bytes on the wire are
the same as ROS 2's; QoS defaults to ROS 2's (reliable, keep-last 10, volatile).

Type matching is by name, as between ROS 2 RMWs: cyclonedds-python always announces XTypes type
information, and Cyclone rejects the type objects that Fast DDS 3 (ROS 2 Kilted's rmw_fastrtps)
announces ("ddsi_xt_type_init_impl with invalid type object"), so without ``IgnoreTypeInformation``
for eProsima peers the endpoints never match. Every domain gets that compatibility fragment.

Local mode (``localhost_only=True``, or ``None`` with ``ROS_LOCALHOST_ONLY=1`` /
``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST``) configures the domain the way rmw_cyclonedds does for
that range: loopback interface, multicast off, unicast discovery to the 127.0.0.1 participant-index
ports. That is what makes containers and CI without multicast work. A user's ``CYCLONEDDS_URI``
is appended after our fragments, so explicit settings still win.
"""

# No `from __future__ import annotations`: cyclonedds resolves string annotations by module global
# name, which fails for builtins (bool, str).
import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from cyclonedds.core import DDSException, Listener, Policy, Qos
from cyclonedds.domain import Domain, DomainParticipant
from cyclonedds.idl import IdlStruct
from cyclonedds.idl.types import array, float64, int32, sequence, uint8, uint32
from cyclonedds.pub import DataWriter
from cyclonedds.sub import DataReader
from cyclonedds.topic import Topic
from cyclonedds.util import duration

from .. import messages as m
from ..node_params import TopicQos
from . import split_stamp, stamp_seconds

log = logging.getLogger(__name__)

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
    m.Float64MultiArray: (Float64MultiArray_, _to_multiarray, _from_multiarray),
    m.Bool: (Bool_, lambda x: Bool_(data=bool(x.data)), lambda s: m.Bool(data=bool(s.data))),
    m.String: (String_, lambda x: String_(data=str(x.data)), lambda s: m.String(data=s.data)),
    m.DiagnosticArray: (DiagnosticArray_, _to_diagnostics, _from_diagnostics),
}
"""Neutral class -> (IDL class, to_idl, from_idl); keys are exactly ``messages.MESSAGE_TYPES``."""


def _same(x: Any) -> Any:
    return x


def _converter(msg_type: type):
    if isinstance(msg_type, type) and issubclass(msg_type, IdlStruct):  # a vendor's own IDL type, as is
        return msg_type, _same, _same
    try:
        return CONVERTERS[msg_type]
    except KeyError:
        raise KeyError(f"{msg_type!r} is not a deploy message type; use one of {sorted(m.MESSAGE_TYPES)}") from None


def dds_topic_name(topic: str, namespace: str = "") -> str:
    """ROS name -> DDS topic: ``('joint_states', '/robot') -> 'rt/robot/joint_states'``; absolute names
    ignore the namespace. ``~`` (private) names need a node name and are not supported."""
    if not topic or topic.startswith("~") or topic.endswith("/"):
        raise ValueError(f"invalid ROS topic name '{topic}'")
    if not topic.startswith("/"):
        ns = namespace.strip("/")
        topic = f"/{ns}/{topic}" if ns else f"/{topic}"
    return "rt" + topic


def _env_localhost_only() -> bool:
    return (os.environ.get("ROS_LOCALHOST_ONLY", "") == "1"
            or os.environ.get("ROS_AUTOMATIC_DISCOVERY_RANGE", "").upper() == "LOCALHOST")


COMPAT_CONFIG = (
    "<CycloneDDS><Domain><Compatibility>"
    "<IgnoreTypeInformation>1.1,1.15</IgnoreTypeInformation>"  # RTI, eProsima vendor ids
    "</Compatibility></Domain></CycloneDDS>"
)
"""Match RTI Connext and Fast DDS endpoints by type name, ignoring their type information (see top)."""

LOCALHOST_CONFIG = (
    "<CycloneDDS><Domain>"
    '<General><Interfaces><NetworkInterface address="127.0.0.1"/></Interfaces>'
    "<AllowMulticast>false</AllowMulticast></General>"
    "<Discovery><ParticipantIndex>auto</ParticipantIndex><MaxAutoParticipantIndex>32</MaxAutoParticipantIndex>"
    '<Peers><Peer address="127.0.0.1"/></Peers></Discovery>'
    "</Domain></CycloneDDS>"
)
"""rmw_cyclonedds' LOCALHOST-range fragment plus the loopback interface: one participant per index
(ports 7410 + 250*domain + 10 + 2*index), peers found by unicast probes of indices 0..32."""

_QOS_COMMON = [Policy.Reliability.Reliable(max_blocking_time=duration(milliseconds=100)),
               Policy.History.KeepLast(10), Policy.Durability.Volatile]
WRITER_QOS = Qos(*_QOS_COMMON, Policy.DataRepresentation(use_cdrv0_representation=True))
"""ROS 2 default QoS; writers offer XCDR1 only (ROS 2 RMWs speak only that)."""
READER_QOS = Qos(*_QOS_COMMON, Policy.DataRepresentation(use_cdrv0_representation=True, use_xcdrv2_representation=True))
"""Readers accept XCDR1 (ROS 2) and XCDR2 (other DDS apps); the sample's encapsulation header decides."""
SENSOR_READER_QOS = Qos(Policy.Reliability.BestEffort, Policy.History.KeepLast(5), Policy.Durability.Volatile,
                        Policy.DataRepresentation(use_cdrv0_representation=True, use_xcdrv2_representation=True))
"""ROS 2's sensor-data profile (best effort, keep-last 5): a lost sample is skipped, never waited for;
with a reliable reader one lost packet holds back every later sample until it is repaired."""



def qos_policies(q: TopicQos, reader: bool) -> Qos:
    """A :class:`~ctrl_rl.deploy.node_params.TopicQos` as cyclonedds policies (ROS 2's mapping)."""
    rel = (Policy.Reliability.Reliable(max_blocking_time=duration(milliseconds=100)) if q.reliability == "reliable"
           else Policy.Reliability.BestEffort)
    dur = Policy.Durability.TransientLocal if q.durability == "transient_local" else Policy.Durability.Volatile
    rep = (Policy.DataRepresentation(use_cdrv0_representation=True, use_xcdrv2_representation=True) if reader
           else Policy.DataRepresentation(use_cdrv0_representation=True))
    return Qos(rel, Policy.History.KeepLast(q.depth), dur, rep)


_domains: dict[int, list] = {}  # domain id -> [Domain, users]
_domains_lock = threading.Lock()


def domain_config(localhost_only: bool) -> str:
    """The config string a domain is created with: ours, then the user's ``CYCLONEDDS_URI``."""
    parts = [COMPAT_CONFIG, LOCALHOST_CONFIG if localhost_only else "", os.environ.get("CYCLONEDDS_URI", "")]
    return ",".join(p for p in parts if p)


def _acquire_domain(domain_id: int, localhost_only: bool) -> None:
    """Create the domain once per process (its config is fixed at creation: later participants on
    that id share it, whatever their ``localhost_only``), or count one more user."""
    with _domains_lock:
        if domain_id in _domains:
            _domains[domain_id][1] += 1
            return
        try:
            domain = Domain(domain_id, domain_config(localhost_only))
        except DDSException as e:
            if e.code == DDSException.DDS_RETCODE_PRECONDITION_NOT_MET:
                raise RuntimeError(f"DDS domain {domain_id} was already created in this process outside "
                                   "DdsTransport; use DdsTransport for all participants on it") from e
            raise RuntimeError(f"cyclonedds rejected the domain config (CYCLONEDDS_URI?): {e}") from e
        _domains[domain_id] = [domain, 1]


def _release_domain(domain_id: int) -> None:
    with _domains_lock:
        entry = _domains.get(domain_id)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] == 0:
            del _domains[domain_id]
            _delete(entry[0])


def _delete(entity: Any) -> None:
    """Delete now (and its children, in C) instead of whenever the GC gets to it."""
    entity.__del__()


class DdsTransport:
    """One DomainParticipant; publishers and subscriptions in ROS 2 wire format.

    Subscription callbacks run on cyclonedds' receive thread (a Listener; for a writer in this same
    process, synchronously on the writing thread), so there is no polling thread of ours; keep them
    short. ``domain_id``: arg, else ``ROS_DOMAIN_ID``, else 0. ``localhost_only``: ``None`` honors
    ``ROS_LOCALHOST_ONLY=1`` / ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` (see the module docstring).
    """

    name = "dds"

    def __init__(self, namespace: str = "", domain_id: int | None = None, localhost_only: bool | None = None):
        self.namespace = namespace
        self.domain_id = int(domain_id if domain_id is not None else os.environ.get("ROS_DOMAIN_ID") or 0)
        self.localhost_only = _env_localhost_only() if localhost_only is None else bool(localhost_only)
        _acquire_domain(self.domain_id, self.localhost_only)
        try:
            self._participant = DomainParticipant(self.domain_id)
        except Exception:
            _release_domain(self.domain_id)
            raise
        self._topics: dict[str, Topic] = {}
        self._writers: list[DataWriter] = []
        self._readers: list[tuple[DataReader, Listener]] = []
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._closed = False

    def resolve(self, topic: str) -> str:
        """The ROS name ``topic`` maps to in this namespace (``ctrl_rl/start`` -> ``/robot/ctrl_rl/start``)."""
        return dds_topic_name(topic, self.namespace)[len("rt"):]

    def _topic(self, topic: str, idl_type: type[IdlStruct]) -> Topic:
        name = dds_topic_name(topic, self.namespace)
        t = self._topics.get(name)
        if t is None:
            t = self._topics[name] = Topic(self._participant, name, idl_type)
        elif t.data_type is not idl_type:
            raise TypeError(f"topic '{name}' already used with {t.data_type.__idl_typename__}")
        return t

    def publisher(self, topic: str, msg_type: type, qos: TopicQos | None = None) -> Callable[[Any], None]:
        idl_type, to_idl, _ = _converter(msg_type)
        with self._lock:
            self._check_open()
            writer = DataWriter(self._participant, self._topic(topic, idl_type),
                                qos=WRITER_QOS if qos is None else qos_policies(qos, reader=False))
            self._writers.append(writer)

        closing = self._closing

        def publish(msg: Any) -> None:
            if closing.is_set():
                raise RuntimeError(f"DdsTransport is closed (publishing on '{topic}')")
            writer.write(to_idl(msg))

        return publish

    def subscribe(self, topic: str, msg_type: type, callback: Callable[[Any], None], sensor: bool = False,
                  qos: TopicQos | None = None) -> None:
        idl_type, _, from_idl = _converter(msg_type)

        closing, holder = self._closing, []  # not ``self``: no transport <-> listener reference cycle

        def on_data_available(_: Any) -> None:
            # Our own reference, not the argument: cyclonedds passes None once close() has begun.
            if closing.is_set() or not holder:
                return
            try:
                while True:
                    samples = holder[0].take(N=64)
                    for s in samples:
                        if s.sample_info.valid_data:  # skip dispose/unregister notifications
                            callback(from_idl(s))
                    if len(samples) < 64:
                        return
            except Exception:  # an exception must not unwind into cyclonedds' C thread
                if not closing.is_set():
                    log.exception("dds subscription callback for '%s' failed", topic)

        listener = Listener(on_data_available=on_data_available)
        with self._lock:
            self._check_open()
            policies = (qos_policies(qos, reader=True) if qos is not None
                        else SENSOR_READER_QOS if sensor else READER_QOS)
            reader = DataReader(self._participant, self._topic(topic, idl_type), qos=policies, listener=listener)
            holder.append(reader)
            self._readers.append((reader, listener))

    def wait_for_subscribers(self, n: int = 1, timeout: float = 5.0) -> bool:
        """True once every writer matched ``n`` readers (start-up ordering without sleeps). A match on the
        writer's side does not mean the remote reader is in sync yet: a sample written right after it can
        still be dropped by a volatile reader (as in ROS 2); streams don't care, one-shot messages might."""
        return self._wait_matched(self._writers, "publication_matched", n, timeout)

    def wait_for_publishers(self, n: int = 1, timeout: float = 5.0) -> bool:
        """True once every reader matched ``n`` writers."""
        return self._wait_matched([r for r, _ in self._readers], "subscription_matched", n, timeout)

    @staticmethod
    def _wait_matched(entities: list, status: str, n: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while True:
            if all(getattr(e, f"get_{status}_status")().current_count >= n for e in entities):
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.005)

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("DdsTransport is closed")

    def close(self) -> None:
        """Delete readers (each waits for a running callback to return), writers, topics, participant.
        Do not call from a subscription callback: the reader's delete would wait for itself."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._closing.set()
            for entity in [r for r, _ in self._readers] + self._writers + list(self._topics.values()):
                _delete(entity)
            _delete(self._participant)
            self._readers.clear()
            self._writers.clear()
            self._topics.clear()
        _release_domain(self.domain_id)

    def __enter__(self) -> "DdsTransport":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if not getattr(self, "_closed", True):
            with contextlib.suppress(Exception):  # interpreter shutdown may have torn down cyclonedds
                self.close()
