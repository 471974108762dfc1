"""Transports for the deploy node and the sim2sim bridge: one protocol, three implementations.

``dds``: plain DDS through PyPI ``cyclonedds`` in ROS 2's wire format (no ROS install needed);
``ros2``: rclpy (a ROS 2 install or PyPI ``ros-rclpy`` wheels). Both interoperate with ROS 2
nodes on the same domain. ``unitree``: Unitree's ``LowCmd``/``LowState`` for the robot link, plain
DDS for the rest (``transports/unitree.py``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Protocol


class Transport(Protocol):
    """Publish/subscribe of :mod:`ctrl_rl.deploy.messages` objects on ROS 2 topics.

    Topic names are ROS names (``joint_states``, ``/imu/data``); relative names resolve in the
    transport's namespace. Callbacks run on a transport thread: keep them short (store and return).
    """

    name: str

    def publisher(self, topic: str, msg_type: type) -> Callable[[Any], None]:
        """A function that publishes one message of ``msg_type`` on ``topic``."""
        ...

    def subscribe(self, topic: str, msg_type: type, callback: Callable[[Any], None], sensor: bool = False) -> None:
        """Call ``callback(msg)`` for each message received on ``topic``: reliable, keep-last 10, or
        with ``sensor=True`` ROS 2's sensor-data profile (best effort, keep-last 5), for high-rate
        state streams where a late sample is worse than a lost one."""
        ...

    def close(self) -> None:
        """Stop threads, delete entities; idempotent."""
        ...


TRANSPORTS = ("dds", "rclpy", "unitree")


def split_stamp(t: float) -> tuple[int, int]:
    """Float seconds -> ``(sec, nanosec)`` of ``builtin_interfaces/Time``, rounded to the nearest ns
    (exact for ``time.time()`` stamps); both transports write stamps through it."""
    sec = math.floor(t)
    ns = round((t - sec) * 1e9)
    if ns >= 1_000_000_000:
        sec, ns = sec + 1, ns - 1_000_000_000
    return int(sec), int(ns)


def stamp_seconds(t: Any) -> float:
    """A ``builtin_interfaces/Time`` (either transport's) -> float seconds."""
    return t.sec + t.nanosec * 1e-9


def make_transport(name: str, namespace: str = "", domain_id: int | None = None,
                   node_name: str = "ctrl_rl", unitree: dict[str, Any] | None = None) -> Transport:
    """``'dds'``, ``'rclpy'`` or ``'unitree'`` (``unitree``: ``family`` go|hg, ``joint_names``,
    ``side`` node|robot); errors name the install that is missing."""
    if name == "unitree":
        from ..unitree_msgs import FAMILIES  # optional extra: cyclonedds (deploy)
        from .unitree import UnitreeTransport  # optional extra: cyclonedds (deploy)

        opts = dict(unitree or {})
        return UnitreeTransport(FAMILIES[opts.pop("family")], namespace=namespace, domain_id=domain_id, **opts)
    if name == "dds":
        from .dds import DdsTransport  # optional extra: cyclonedds (deploy)

        return DdsTransport(namespace=namespace, domain_id=domain_id)
    if name == "rclpy":
        from .ros2 import RclpyTransport  # optional: rclpy, from a ROS 2 install

        return RclpyTransport(namespace=namespace, domain_id=domain_id, node_name=node_name)
    raise ValueError(f"transport must be one of {TRANSPORTS}, got '{name}'")
