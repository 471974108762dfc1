"""Plain-DDS transport: PyPI ``cyclonedds`` speaking ROS 2's wire format, no ROS install needed.

Why this works with real ROS 2 nodes (rmw_cyclonedds_cpp, rmw_fastrtps_cpp): a ROS 2 topic is a
DDS topic named ``rt/<fully qualified name>`` whose type is named ``<pkg>::msg::dds_::<Msg>_``,
serialized as plain CDR (XCDR1, encapsulation ``CDR_LE``) of final (non-extensible) structs.
The IDL structs (``ros_idl.py``) mirror the ``.msg`` definitions field by field, so the bytes on the wire are
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
from typing import Any

from cyclonedds.core import DDSException, Listener, Policy, Qos
from cyclonedds.domain import Domain, DomainParticipant
from cyclonedds.idl import IdlStruct
from cyclonedds.pub import DataWriter
from cyclonedds.sub import DataReader
from cyclonedds.topic import Topic
from cyclonedds.util import duration

from .. import messages as m
from ..node_params import TopicQos
from .ros_idl import CONVERTERS

log = logging.getLogger(__name__)


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
