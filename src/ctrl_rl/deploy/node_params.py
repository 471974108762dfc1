"""The deploy node's parameters (ROS 2 parameters of ``ctrl_rl_node``), with their documentation.

``ctrl_rl/configs/deploy/node.yaml`` is a params file with every default. All sources (that file,
``--ros-args``, ``--set``, the node's own options) go through :func:`ctrl_rl.deploy.typed_params.from_flat`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .arm_node import OBJECT_TERMS
from .safety import SafetyConfig
from .typed_params import check_value, from_flat, to_flat

COMMAND_FORMATS = ("position", "position_gains")
PASSIVE_OUTPUTS = ("hold", "none")

RELIABILITY = ("reliable", "best_effort")
DURABILITY = ("volatile", "transient_local")


@dataclass(frozen=True)
class TopicQos:
    """QoS of one topic, as ROS 2 names its policies (history is always keep-last)."""

    reliability: str = "reliable"
    """``reliable`` or ``best_effort``. A best-effort subscription matches reliable and best-effort
    publishers; a reliable one matches only reliable publishers."""
    depth: int = 10
    """Keep-last history depth (>= 1)."""
    durability: str = "volatile"
    """``volatile`` or ``transient_local`` (a late subscriber gets the last ``depth`` messages)."""

    def __post_init__(self) -> None:
        if self.reliability not in RELIABILITY:
            raise ValueError(f"reliability must be one of {RELIABILITY}, got '{self.reliability}'")
        if self.durability not in DURABILITY:
            raise ValueError(f"durability must be one of {DURABILITY}, got '{self.durability}'")
        if self.depth < 1:
            raise ValueError(f"depth must be >= 1, got {self.depth}")


def _sensor() -> TopicQos:
    return TopicQos("best_effort", 1)


def _reliable(depth: int = 10) -> TopicQos:
    return TopicQos("reliable", depth)


@dataclass
class QosParams:
    """QoS per topic. Robot state is best effort, keep-last 1 (a lost sample is skipped, never waited
    for: a late state is worse than none, and this matches drivers that publish best effort or
    reliable); operator inputs and the command stream are reliable. Status and ``/diagnostics``
    are always reliable and transient-local, so a late subscriber sees the current mode and fault."""

    joint_states: TopicQos = field(default_factory=_sensor)
    imu: TopicQos = field(default_factory=_sensor)
    cmd_vel: TopicQos = field(default_factory=_reliable)
    estop: TopicQos = field(default_factory=_reliable)
    start: TopicQos = field(default_factory=_reliable)
    joint_commands: TopicQos = field(default_factory=lambda: _reliable(1))
    """Keep-last 1: a controller never needs a queued, older target."""
    height_map: TopicQos = field(default_factory=_sensor)
    """Sensor data like the robot state: a late map is worse than the next one."""
    pose_command: TopicQos = field(default_factory=_reliable)
    """An arm's end-effector target: an operator input, like ``cmd_vel``."""
    object_pose: TopicQos = field(default_factory=_sensor)
    """Sensor data like the robot state: a late object pose is worse than the next one."""
    lift_command: TopicQos = field(default_factory=_reliable)
    """A lift bundle's target height: an operator input, like ``cmd_vel``."""




@dataclass
class NodeParams:
    """ROS 2 parameters of ``ctrl_rl_node`` (see ctrl_rl/configs/deploy/node.yaml for a params file)."""

    bundle: str = ""
    """Path of ``exported/policy.onnx``."""
    rate_hz: float = 0.0
    """Control loop rate; 0 = the bundle's training rate (1 / control_dt)."""
    joint_states_topic: str = "joint_states"
    """``sensor_msgs/JointState`` in, joints matched by name. An empty ``velocity`` array (legal in
    ROS) is replaced by finite differences of successive positions (the status says so)."""
    imu_topic: str = "imu/data"
    cmd_vel_topic: str = "cmd_vel"
    """``geometry_msgs/Twist`` velocity command (linear.x, linear.y, angular.z)."""
    height_map_topic: str = "height_map"
    """``std_msgs/Float64MultiArray`` of ground clearances at the bundle's scan points
    (``deploy/height_map.py`` has the layout), subscribed only for a bundle whose policy observes
    ``height_scan``; "" = this robot has no terrain perception (such a bundle is then refused)."""
    pose_command_topic: str = "pose_command"
    """An arm bundle's end-effector target: ``geometry_msgs/PoseStamped`` whose ``header.frame_id`` is the
    bundle's ``pose_command.frame`` (the arm's base body), the position clipped into the task's target box;
    until one arrives the target is the end effector's pose at the default pose (docs/deploy.md, "Arms").
    Legged bundles: unused. An arm bundle subscribes to neither ``imu_topic`` nor ``cmd_vel_topic``."""
    lift_command_topic: str = "lift_command"
    """A lift bundle's target height of the object above the table: ``std_msgs/Float64`` (m), clipped into the
    training range (the bundle's ``object.lift_height``), subscribed only for a bundle whose policy observes
    ``lift_command``. A set point: the node does not stand up before one arrives, and the latest holds (it
    does not go stale). "" = this robot has no such source (such a bundle is then refused). docs/deploy.md,
    "Arms"."""
    object_pose_topic: str = "object_pose"
    """``geometry_msgs/PoseStamped`` of the manipulated object (motion capture, a fiducial tracker,
    perception), subscribed only for an arm bundle whose policy observes ``object_pose`` or ``object_to_ee``:
    ``header.frame_id`` must be the bundle's object frame (the arm's base body, e.g. ``base_link``), the
    position inside the workspace box. "" = this robot has no object pose source (such a bundle is then
    refused). docs/deploy.md, "Arms"."""
    estop_topic: str = "estop"
    """``std_msgs/Bool``: true -> damping, latched."""
    start_topic: str = "ctrl_rl/start"
    """``std_msgs/Bool``: true -> stand up (from passive, or after a fault). The node waits for it
    before anything stiff goes out (unless ``safety.auto_start``)."""
    joint_command_topic: str = "joint_commands"
    """``std_msgs/Float64MultiArray`` out (e.g. ``forward_position_controller/commands``)."""
    command_format: str = "position"
    """``position``: n targets, for ros2_control's ``forward_command_controller/ForwardCommandController``
    (``interface_name: position``; the robot's own gains apply, so passive/damping hold the
    measured pose). ``position_gains``: ``[3, n]`` rows of target, kp, kd (layout dims ``field``,
    ``joint``), true damping, for drivers with a per-motor PD command (Unitree-style low-level
    commands, the sim2sim bridge); no stock ros2_control controller reads it (docs/deploy.md)."""
    passive_output: str = "hold"
    """What ``position`` commands do in passive and damping: ``hold`` the last measured pose, or
    publish ``none`` (for controllers that hold or go limp by themselves when commands stop).
    ``position_gains`` always publishes its kp = 0 damping command."""
    command_joint_names: list[str] = field(default_factory=list)
    """Joint order of the outgoing array (the controller's ``joints``); empty = the bundle's order.
    Must name exactly the bundle's joints (checked at start-up)."""
    unitree_family: str = "auto"
    """``--transport unitree``: the robot's low-level message package, ``go`` (``unitree_go``: Go2-style
    quadrupeds) or ``hg`` (``unitree_hg``: G1, H1-2); ``auto`` = from the bundle's robot
    (``deploy/unitree_msgs.py: family_for``)."""
    realtime_priority: int = 0
    """SCHED_FIFO priority (1-99) of the control thread, as robot control loops run; 0 = normal
    scheduling. Needs root or an rtprio limit (``ulimit -r``); refused with a warning otherwise."""
    status_topic: str = "ctrl_rl/status"
    """``std_msgs/String`` JSON: mode, fault, counters, latency percentiles (2 Hz and on change;
    transient-local: a late subscriber gets the current one)."""
    diagnostics_topic: str = "/diagnostics"
    """``diagnostic_msgs/DiagnosticArray`` (rqt_robot_monitor, diagnostic_aggregator): one status
    named ``ctrl_rl_node: safety`` whose level is OK, WARN (passive) or ERROR (damping, fault);
    transient-local. "" = off."""
    record_dir: str = ""
    """Write one robot log (HDF5: the observations the policy consumed, its raw actions, timestamps,
    raw signals; ``ctrl_rl.storage.robot_log``) per policy-mode episode into this directory, for
    offline RL on robot data; "" = off (no cost). Needs h5py. Written off the control thread."""
    safety: SafetyConfig = field(default_factory=SafetyConfig)
    qos: QosParams = field(default_factory=QosParams)

    def __post_init__(self) -> None:
        if isinstance(self.safety, dict):
            self.safety = SafetyConfig.from_dict(self.safety)
        if isinstance(self.qos, dict):
            self.qos = from_flat(QosParams, self.qos, "qos.")
        for name, tp in (("bundle", str), ("rate_hz", float), ("command_format", str), ("passive_output", str),
                         ("height_map_topic", str), ("object_pose_topic", str), ("lift_command_topic", str),
                         ("unitree_family", str),
                         ("command_joint_names", list[str]), ("realtime_priority", int), ("record_dir", str)):
            setattr(self, name, check_value(name, getattr(self, name), tp))
        if self.command_format not in COMMAND_FORMATS:
            raise ValueError(f"command_format must be one of {COMMAND_FORMATS}, got '{self.command_format}'")
        if self.unitree_family not in ("auto", "go", "hg"):
            raise ValueError(f"unitree_family must be auto, go or hg, got '{self.unitree_family}'")
        if self.passive_output not in PASSIVE_OUTPUTS:
            raise ValueError(f"passive_output must be one of {PASSIVE_OUTPUTS}, got '{self.passive_output}'")
        if not 0 <= self.realtime_priority <= 99:
            raise ValueError("realtime_priority must be 0 (off) or a SCHED_FIFO priority 1-99, "
                             f"got {self.realtime_priority}")
        if not (self.rate_hz >= 0 and math.isfinite(self.rate_hz)):
            raise ValueError(f"rate_hz must be >= 0 (0 = the bundle's rate), got {self.rate_hz}")
        if len(set(self.command_joint_names)) != len(self.command_joint_names):
            raise ValueError(f"command_joint_names lists a joint twice: {self.command_joint_names}")

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> NodeParams:
        """From nested (``safety: {...}``) or ROS-flat (``safety.state_timeout``) keys, type-checked."""
        return from_flat(cls, values)

    @classmethod
    def from_yaml(cls, path: str | Path, node_name: str = "ctrl_rl_node") -> NodeParams:
        """A ROS 2 params file (``<node>: {ros__parameters: {...}}`` or ``/**``) or a plain mapping."""
        return cls.from_dict(read_params_file(path, node_name))

    def sources(self) -> tuple[str, ...]:
        """The external signals this robot provides (``RobotPolicy(sources=...)``): ``height_scan``
        when a height-map topic is configured, ``object_pose`` (and the terms ``object_to_ee``,
        ``object_to_tool`` and ``tool_correction`` it feeds) when an object pose topic is, ``lift_command``
        when a lift command topic is."""
        return (("height_scan",) if self.height_map_topic else ()) + \
            (OBJECT_TERMS if self.object_pose_topic else ()) + \
            (("lift_command",) if self.lift_command_topic else ())

    def flat(self) -> dict[str, Any]:
        """ROS-style flat parameters (``safety.state_timeout``), for declaring them on a node."""
        return to_flat(self)


def read_params_file(path: str | Path, node_name: str = "ctrl_rl_node") -> dict[str, Any]:
    """The parameter mapping of a ROS 2 params file; errors name the file and the line."""
    import yaml

    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise ValueError(f"params file {path} does not exist (see ctrl_rl/configs/deploy/node.yaml)") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise ValueError(f"params file {path}{where}: not valid YAML ({problem}); "
                         "compare with ctrl_rl/configs/deploy/node.yaml") from None
    data = data or {}
    if not isinstance(data, dict):
        raise ValueError(f"params file {path} must hold a mapping (see ctrl_rl/configs/deploy/node.yaml)")
    for key in (node_name, f"/{node_name}", "/**"):
        if isinstance(data.get(key), dict) and "ros__parameters" in data[key]:
            return data[key]["ros__parameters"] or {}
    return data
