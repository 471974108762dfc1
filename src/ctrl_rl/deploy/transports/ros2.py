"""rclpy transport: the deploy messages on a real ROS 2 node (a ROS install or PyPI ``ros-rclpy`` wheels).

Why a second transport next to ``dds``: with rclpy the deploy node is a first-class ROS 2 node —
``ros2 node list`` sees it, ``--ros-args --params-file`` / remaps work, parameters can be read
and set. The PyPI wheels re-exec the interpreter from a ``.pth`` file, so they live in their own
venv (``bash scripts/setup_ros_env.sh`` -> ``.venv-ros``), never in the training ``.venv``.

Conversions are written for 500 Hz x 12 joints: received ``array.array`` fields become numpy
views without a copy (``np.asarray``), outgoing arrays go through ``ndarray.tolist()``.
"""

from __future__ import annotations

import array
import logging
import os
import threading
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ..messages import (
    MESSAGE_TYPES,
    Bool,
    DiagnosticArray,
    DiagnosticStatus,
    Float64,
    Float64MultiArray,
    Imu,
    JointState,
    PoseStamped,
    String,
    Twist,
    type_name,
)
from ..node_params import TopicQos
from . import split_stamp, stamp_seconds

FASTDDS_TRANSPORTS = "UDPv4"
"""Fast DDS transports unless ``FASTDDS_BUILTIN_TRANSPORTS`` is set: UDP only, no shared memory.

Why: when a peer process dies holding a lock in Fast DDS's shared-memory port (a robot driver or
the sim2sim bridge killed with SIGKILL), this process segfaults later, inside ``destroy_node``
(SharedMemChannelResource::release, Fast DDS 3.2.3; reproduced 1 in 4-6 kill runs on 2 loaded
cores). A deploy node must outlive its driver. Loopback UDP costs ~0.1 ms. Note that
``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` makes rmw_fastrtps (Kilted) configure shared memory
itself, over this variable and XML profiles alike (the transport logs that at INFO level: interop
with Cyclone DDS needs that range: tests/test_rclpy_transport.py).
"""
if os.environ.get("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp").startswith("rmw_fastrtps"):
    os.environ.setdefault("FASTDDS_BUILTIN_TRANSPORTS", FASTDDS_TRANSPORTS)  # read once, when rclpy loads Fast DDS

try:
    from builtin_interfaces.msg import Time
    from diagnostic_msgs.msg import DiagnosticArray as RosDiagnosticArray
    from diagnostic_msgs.msg import DiagnosticStatus as RosDiagnosticStatus
    from diagnostic_msgs.msg import KeyValue
    from geometry_msgs.msg import PoseStamped as RosPoseStamped
    from geometry_msgs.msg import Twist as RosTwist
    from rcl_interfaces.msg import ParameterDescriptor, SetParametersResult
    from rclpy.context import Context
    from rclpy.executors import ExternalShutdownException, ShutdownException, SingleThreadedExecutor
    from rclpy.lifecycle import LifecycleNode, TransitionCallbackReturn
    from rclpy.node import Node
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
    from sensor_msgs.msg import Imu as RosImu
    from sensor_msgs.msg import JointState as RosJointState
    from std_msgs.msg import Bool as RosBool
    from std_msgs.msg import Float64 as RosFloat64
    from std_msgs.msg import Float64MultiArray as RosFloat64MultiArray
    from std_msgs.msg import MultiArrayDimension
    from std_msgs.msg import String as RosString
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError(
        f"transport 'rclpy' needs rclpy and the sensor/std/geometry messages ({e}); run "
        "`bash scripts/setup_ros_env.sh` and use .venv-ros/bin/python, or source a ROS 2 install"
    ) from e

log = logging.getLogger(__name__)

QOS_DEPTH = 10
"""Reliable, keep-last 10, volatile: rclpy's default profile (what `ros2 topic pub` uses)."""



# -- neutral <-> ROS conversions ------------------------------------------------------------------


def _time(stamp: float) -> Time:
    sec, nsec = split_stamp(stamp)
    return Time(sec=sec, nanosec=nsec)


def _arr(a: Any) -> list[float]:
    """``ndarray -> list``: the message setters then build their ``array.array('d')`` in C."""
    return a.tolist() if isinstance(a, np.ndarray) else [float(x) for x in a]


def _np(a: array.array) -> np.ndarray:
    """Zero-copy float64 view of a received ``array.array('d')`` (the message is not reused)."""
    return np.asarray(a)  # buffer protocol: 0.3 us for 12 joints (np.frombuffer 0.5, np.array 0.5)


def _js_to_ros(m: JointState) -> RosJointState:
    r = RosJointState()
    r.header.stamp = _time(m.stamp)
    r.header.frame_id = m.frame_id
    r.name = list(m.name)
    r.position = _arr(m.position)
    r.velocity = _arr(m.velocity)
    r.effort = _arr(m.effort)
    return r


def _js_from_ros(r: RosJointState) -> JointState:
    h = r.header
    return JointState(stamp_seconds(h.stamp), list(r.name), _np(r.position), _np(r.velocity), _np(r.effort), h.frame_id)


def _imu_to_ros(m: Imu) -> RosImu:
    r = RosImu()
    r.header.stamp = _time(m.stamp)
    r.header.frame_id = m.frame_id
    w, x, y, z = _arr(m.orientation)
    q, av, la = r.orientation, r.angular_velocity, r.linear_acceleration
    q.x, q.y, q.z, q.w = x, y, z, w  # ROS wire order x, y, z, w
    av.x, av.y, av.z = _arr(m.angular_velocity)
    la.x, la.y, la.z = _arr(m.linear_acceleration)
    return r


def _imu_from_ros(r: RosImu) -> Imu:
    q, av, la = r.orientation, r.angular_velocity, r.linear_acceleration
    return Imu(
        stamp_seconds(r.header.stamp),
        np.array((q.w, q.x, q.y, q.z)),
        np.array((av.x, av.y, av.z)),
        np.array((la.x, la.y, la.z)),
        r.header.frame_id,
    )


def _twist_to_ros(m: Twist) -> RosTwist:
    r = RosTwist()
    r.linear.x, r.linear.y, r.linear.z = _arr(m.linear)
    r.angular.x, r.angular.y, r.angular.z = _arr(m.angular)
    return r


def _twist_from_ros(r: RosTwist) -> Twist:
    lin, ang = r.linear, r.angular
    return Twist(np.array((lin.x, lin.y, lin.z)), np.array((ang.x, ang.y, ang.z)))


def _pose_to_ros(m: PoseStamped) -> RosPoseStamped:
    r = RosPoseStamped()
    r.header.stamp = _time(m.stamp)
    r.header.frame_id = m.frame_id
    p, q = r.pose.position, r.pose.orientation
    p.x, p.y, p.z = _arr(m.position)
    q.w, q.x, q.y, q.z = _arr(m.orientation)  # neutral w, x, y, z; the ROS fields are named
    return r


def _pose_from_ros(r: RosPoseStamped) -> PoseStamped:
    p, q = r.pose.position, r.pose.orientation
    return PoseStamped(stamp_seconds(r.header.stamp), np.array((p.x, p.y, p.z)), np.array((q.w, q.x, q.y, q.z)),
                       r.header.frame_id)


def _f64ma_to_ros(m: Float64MultiArray) -> RosFloat64MultiArray:
    r = RosFloat64MultiArray()
    r.data = _arr(m.data)
    r.layout.dim = [MultiArrayDimension(label=lab, size=int(s), stride=int(st)) for lab, s, st in m.dims]
    r.layout.data_offset = int(m.data_offset)
    return r


def _f64ma_from_ros(r: RosFloat64MultiArray) -> Float64MultiArray:
    dims = [(d.label, d.size, d.stride) for d in r.layout.dim]
    return Float64MultiArray(_np(r.data), dims, r.layout.data_offset)


def _diag_to_ros(m: DiagnosticArray) -> RosDiagnosticArray:
    r = RosDiagnosticArray()
    r.header.stamp = _time(m.stamp)
    r.header.frame_id = m.frame_id
    r.status = [RosDiagnosticStatus(level=bytes([int(st.level)]), name=st.name, message=st.message,
                                    hardware_id=st.hardware_id,
                                    values=[KeyValue(key=str(k), value=str(v)) for k, v in st.values])
                for st in m.status]
    return r


def _diag_from_ros(r: RosDiagnosticArray) -> DiagnosticArray:
    status = [DiagnosticStatus(int.from_bytes(st.level, "little") if isinstance(st.level, bytes) else int(st.level),
                               st.name, st.message, st.hardware_id, [(kv.key, kv.value) for kv in st.values])
              for st in r.status]
    return DiagnosticArray(stamp_seconds(r.header.stamp), status, r.header.frame_id)


CONVERTERS: dict[type, tuple[type, Callable[[Any], Any], Callable[[Any], Any]]] = {
    JointState: (RosJointState, _js_to_ros, _js_from_ros),
    Imu: (RosImu, _imu_to_ros, _imu_from_ros),
    Twist: (RosTwist, _twist_to_ros, _twist_from_ros),
    PoseStamped: (RosPoseStamped, _pose_to_ros, _pose_from_ros),
    Float64MultiArray: (RosFloat64MultiArray, _f64ma_to_ros, _f64ma_from_ros),
    Float64: (RosFloat64, lambda m: RosFloat64(data=float(m.data)), lambda r: Float64(float(r.data))),
    Bool: (RosBool, lambda m: RosBool(data=bool(m.data)), lambda r: Bool(r.data)),
    String: (RosString, lambda m: RosString(data=m.data), lambda r: String(r.data)),
    DiagnosticArray: (RosDiagnosticArray, _diag_to_ros, _diag_from_ros),
}
"""neutral class -> (ROS class, to_ros, from_ros); exactly :data:`MESSAGE_TYPES`."""
assert set(CONVERTERS) == set(MESSAGE_TYPES.values())


def ros_qos(q: TopicQos) -> QoSProfile:
    """A :class:`~ctrl_rl.deploy.node_params.TopicQos` as an rclpy profile."""
    return QoSProfile(
        history=HistoryPolicy.KEEP_LAST, depth=q.depth,
        reliability=ReliabilityPolicy.RELIABLE if q.reliability == "reliable" else ReliabilityPolicy.BEST_EFFORT,
        durability=DurabilityPolicy.TRANSIENT_LOCAL if q.durability == "transient_local" else DurabilityPolicy.VOLATILE)


def _converter(msg_type: type) -> tuple[type, Callable[[Any], Any], Callable[[Any], Any]]:
    try:
        return CONVERTERS[msg_type]
    except KeyError:
        type_name(msg_type)  # raises the KeyError that lists the supported types
        raise


# -- parameters -----------------------------------------------------------------------------------


def _ros_value(v: Any) -> Any:
    if isinstance(v, np.ndarray | np.generic):
        return v.tolist()
    return list(v) if isinstance(v, tuple) else v


def _py_value(v: Any, default: Any) -> Any:
    """A ROS parameter value as the Python value the typed loader checks (no type coercion here
    beyond what YAML cannot express: ``[]`` arrives as NOT_SET, arrays as ``array.array``)."""
    if v is None and isinstance(default, list | tuple):  # rcl's YAML parser turns `[]` (untyped) into NOT_SET
        return []
    if isinstance(v, array.array | np.ndarray):
        v = v.tolist()
    return v


ROS_OWN_PARAMETERS = ("use_sim_time", "start_type_description_service")
"""Parameters every rclpy node declares itself; never "unknown"."""


class _ManagedNode(LifecycleNode):
    """A lifecycle node whose transitions call the hooks the application registered."""

    hooks: dict[str, Callable[[], None]]

    def _run(self, name: str) -> TransitionCallbackReturn:
        hook = self.hooks.get(name)
        if hook is None:
            return TransitionCallbackReturn.SUCCESS
        try:
            hook()
        except Exception as e:  # a failed transition is reported, never raised into the executor
            self.get_logger().error(f"{name} failed: {e}")
            return TransitionCallbackReturn.FAILURE
        return TransitionCallbackReturn.SUCCESS

    def on_configure(self, state: Any) -> TransitionCallbackReturn:
        return self._run("configure")

    def on_activate(self, state: Any) -> TransitionCallbackReturn:
        return self._run("activate")

    def on_deactivate(self, state: Any) -> TransitionCallbackReturn:
        return self._run("deactivate")

    def on_cleanup(self, state: Any) -> TransitionCallbackReturn:
        return self._run("cleanup")

    def on_shutdown(self, state: Any) -> TransitionCallbackReturn:
        return self._run("shutdown")

    def on_error(self, state: Any) -> TransitionCallbackReturn:
        return self._run("error")


# -- the transport --------------------------------------------------------------------------------


class RclpyTransport:
    """One rclpy Context + Node + executor thread: the deploy :class:`Transport` over rclpy.

    ``args`` are command-line arguments for rcl (``None``: ``sys.argv``, so ``--ros-args
    --params-file p.yaml -r __ns:=/x`` given to the process apply); a private Context keeps
    several transports (tests, the sim2sim bridge next to the node) independent.
    ``executor``: ``"single"`` (SingleThreadedExecutor) or ``"events"`` (rclpy's experimental C++
    EventsExecutor; on 2 shared cores both deliver 500 Hz JointStates in ~0.3 ms median).
    ``lifecycle``: a managed node (``lifecycle_msgs`` services ``~/change_state``, ``~/get_state``);
    :meth:`on_transition` registers what each transition does.
    """

    name = "rclpy"

    def __init__(
        self,
        namespace: str = "",
        domain_id: int | None = None,
        node_name: str = "ctrl_rl",
        args: list[str] | None = None,
        executor: str = "single",
        lifecycle: bool = False,
    ) -> None:
        if executor not in ("single", "events"):
            raise ValueError(f"executor must be 'single' or 'events', got '{executor}'")
        if os.environ.get("ROS_AUTOMATIC_DISCOVERY_RANGE", "").upper() == "LOCALHOST" and os.environ.get(
                "RMW_IMPLEMENTATION", "rmw_fastrtps_cpp").startswith("rmw_fastrtps"):
            log.info("ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST: rmw_fastrtps uses shared memory, where a peer "
                     "killed with SIGKILL can crash this process at shutdown; the SUBNET range uses UDP")
        self.context = Context()
        try:
            self.context.init(args, domain_id=domain_id)  # no signal handlers: the app owns SIGINT
        except RuntimeError as e:  # rclpy's UnknownROSArgsError and rcl argument errors
            raise ValueError(f"rclpy refused the ROS arguments ({str(e).splitlines()[0]}); put the node's "
                             "own options before --ros-args") from None
        try:
            if lifecycle:
                self.node: Node = _ManagedNode(node_name, namespace=namespace, context=self.context)
                self.node.hooks = {}
            else:
                self.node = Node(node_name, namespace=namespace, context=self.context)
            if executor == "events":
                from rclpy.experimental import EventsExecutor

                self.executor = EventsExecutor(context=self.context)
            else:
                self.executor = SingleThreadedExecutor(context=self.context)
            self.executor.add_node(self.node)
        except BaseException:
            self.context.try_shutdown()
            raise
        self.lifecycle = lifecycle
        self._entities: list[Any] = []  # publishers and subscriptions, for destroy_entities()
        self._lock = threading.Lock()
        self._closed = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._spin, name=f"rclpy-{node_name}", daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        """spin_once in a loop (not ``spin()``): close() can stop it and join before tearing down."""
        while not self._stop.is_set():
            try:
                self.executor.spin_once(timeout_sec=0.2)
            except (ExternalShutdownException, ShutdownException):  # context shut down under us
                return

    def publisher(self, topic: str, msg_type: type, qos: TopicQos | None = None) -> Callable[[Any], None]:
        ros_type, to_ros, _ = _converter(msg_type)
        pub = self.node.create_publisher(ros_type, topic, QOS_DEPTH if qos is None else ros_qos(qos))
        self._entities.append(pub)

        def publish(msg: Any) -> None:
            pub.publish(to_ros(msg))

        return publish

    def subscribe(self, topic: str, msg_type: type, callback: Callable[[Any], None], sensor: bool = False,
                  qos: TopicQos | None = None) -> None:
        ros_type, _, from_ros = _converter(msg_type)

        def on_msg(r: Any) -> None:
            try:
                callback(from_ros(r))
            except Exception:  # an exception would end the executor thread: no more messages at all
                log.exception("rclpy subscription callback for '%s' failed", topic)

        profile = ros_qos(qos) if qos is not None else qos_profile_sensor_data if sensor else QOS_DEPTH
        self._entities.append(self.node.create_subscription(ros_type, topic, on_msg, profile))

    def destroy_entities(self) -> None:
        """Destroy every publisher and subscription made through this transport (a lifecycle
        cleanup); the node and its parameters stay."""
        while self._entities:
            e = self._entities.pop()
            destroy = self.node.destroy_publisher if hasattr(e, "publish") else self.node.destroy_subscription
            destroy(e)

    def resolve(self, topic: str) -> str:
        """The fully qualified name ``topic`` maps to (namespace, ``~``, remaps applied)."""
        return self.node.resolve_topic_name(topic)

    # -- parameters ---------------------------------------------------------------------------------
    def declare_parameters(self, defaults: Mapping[str, Any], descriptions: Mapping[str, str] | None = None,
                           ) -> dict[str, Any]:
        """Declare each dotted name with its default; return the values with ``--ros-args``
        (``--params-file``, ``-p``) applied. A ROS parameter given for a name that is not declared
        is an error naming it (rclpy would ignore it). Values come back as given: the caller's
        typed loader checks them (dynamic typing here, so that a wrong type gets that loader's message)."""
        descriptions = descriptions or {}
        decl = [(k, _ros_value(v), ParameterDescriptor(dynamic_typing=True, description=descriptions.get(k, "")))
                for k, v in defaults.items()]
        params = self.node.declare_parameters("", decl)
        unknown = sorted(set(self.node._parameter_overrides) - set(defaults) - set(ROS_OWN_PARAMETERS))
        if unknown:
            raise ValueError(f"unknown ROS parameter(s) {unknown} for node {self.node.get_name()}; "
                             "known: see ctrl_rl/configs/deploy/node.yaml")
        return {p.name: _py_value(p.value, defaults[p.name]) for p in params}

    def set_parameter_values(self, values: Mapping[str, Any]) -> None:
        """Make the node's parameters show ``values`` (what the application really uses)."""
        from rclpy.parameter import Parameter

        current = {p.name: p.value for p in self.node.get_parameters(list(values))}
        changed = [Parameter(k, value=_ros_value(v)) for k, v in values.items()
                   if _py_value(current.get(k), v) != v]
        if changed:
            results = self.node.set_parameters(changed)
            bad = [f"{p.name}: {r.reason}" for p, r in zip(changed, results, strict=True) if not r.successful]
            if bad:
                raise ValueError(f"could not set ROS parameters {bad}")

    def on_set_parameters(self, check: Callable[[dict[str, Any]], str | None]) -> None:
        """``ros2 param set`` goes through ``check({name: value})``: ``None`` accepts (the caller has
        applied the change), a string refuses with that reason; the call reports the outcome."""

        def callback(params: list[Any]) -> SetParametersResult:
            try:
                reason = check({p.name: _py_value(p.value, None) for p in params})
            except Exception as e:  # the executor must never see it
                reason = f"{type(e).__name__}: {e}"
            return SetParametersResult(successful=reason is None, reason=reason or "")

        self.node.add_on_set_parameters_callback(callback)

    def on_transition(self, **hooks: Callable[[], None]) -> None:
        """Lifecycle hooks by transition (``configure``, ``activate``, ``deactivate``, ``cleanup``,
        ``shutdown``, ``error``); an exception in one fails that transition. Needs ``lifecycle=True``."""
        if not self.lifecycle:
            raise ValueError("on_transition needs RclpyTransport(lifecycle=True)")
        self.node.hooks.update(hooks)

    def close(self) -> None:
        """Stop the executor thread, destroy the node, shut the context down; idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._stop.set()
        self.executor.wake()
        self._thread.join(timeout=5.0)
        self.executor.shutdown(timeout_sec=1.0)
        self.node.destroy_node()
        self.context.try_shutdown()

    def __enter__(self) -> RclpyTransport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
