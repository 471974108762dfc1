"""The fuzz cases of an arm bundle (tests/deploy_fuzz.py runs them when its ``policy.onnx`` is an arm's):
which of the legged cases an arm's node cannot meet, the cases of its pose command and workspace box, those of
an insert bundle's object pose (``insert.onnx`` beside it) and those of a lift bundle's target height
(``lift.onnx``)."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
from deploy_fuzz import Case, _corrupt, _js, _policy_runs
from deploy_peer import Robot

from ctrl_rl.deploy import messages as m

NOT_ON_ARM = {"NaN quaternion", "non-unit quaternion", "gyro 1e6 rad/s", "fallen over (tilt 90 deg)",
              "NaN velocity command", "velocity command 1e9"}
"""Cases an arm bundle's node cannot meet: it subscribes to no IMU and no velocity command (its pose command has
cases of its own, :func:`arm_cases`); it observes no height scan either."""


def _pose_command(make: Callable[[Robot], m.PoseStamped], faults: bool = True) -> Callable[[Robot], None]:
    """Policy mode, then the arm's operator sends only ``make()`` targets: a fault, or (clipped) none."""
    def run(robot: Robot) -> None:
        robot.to_policy()
        robot.pose_sample = lambda: make(robot)
        if faults:
            assert robot.wait_mode("damping", 5), robot.status
        time.sleep(0.5)
        assert faults or robot.status.get("mode") == "policy", robot.status
    return run


def _ee_outside(robot: Robot) -> None:
    """Policy mode, then the arm reports a pose within its joint limits whose end effector lies outside the
    workspace box: the node must not aim at it, and faults."""
    limits = np.asarray(robot.limits)[robot.to_policy_order]  # policy order
    rng = np.random.default_rng(0)
    while True:
        q = rng.uniform(limits[:, 0], limits[:, 1])
        if not robot.arm.box.contains(robot.arm.chain.ee_pose(q)[0]):
            break
    _corrupt(robot, _js(robot, position=q[[robot.names.index(j) for j in robot.order]]))
    assert robot.wait_mode("damping", 5), robot.status


def _no_object(robot: Robot) -> None:
    """Healthy state but no object pose: the node holds the pose in passive and says why."""
    robot.object_sample = None
    robot.start_streaming()
    time.sleep(1.5)
    assert robot.status.get("mode") == "passive", robot.status


def _object(make: Callable[[Robot], m.PoseStamped | None]) -> Callable[[Robot], None]:
    """Policy mode, then the tracker sends only ``make()`` poses (None: stops): the node damps."""
    def run(robot: Robot) -> None:
        robot.to_policy()
        robot.object_sample = None if make(robot) is None else (lambda: make(robot))
        assert robot.wait_mode("damping", 5), robot.status
    return run


def _socket_with(**fields: object) -> Callable[[Robot], m.PoseStamped]:
    def make(robot: Robot) -> m.PoseStamped:
        pose = robot.socket_pose()
        for k, v in fields.items():
            setattr(pose, k, v)
        return pose
    return make


def object_cases() -> list[Case]:
    """An insert bundle: its policy observes the socket's pose (``geometry_msgs/PoseStamped``)."""
    b = "insert.onnx"
    return [Case("insert bundle: no object pose", _no_object, "no object pose received", bundle=b),
            Case("insert bundle: policy with an object pose", _policy_runs(), "", bundle=b),
            Case("insert bundle: object pose stops", _object(lambda r: None), "object pose is stale", bundle=b),
            Case("insert bundle: NaN object pose", _object(_socket_with(position=np.array([np.nan, 0.0, 0.0]))),
                 "object pose refused: .*finite", bundle=b),
            Case("insert bundle: object pose in another frame", _object(_socket_with(frame_id="camera")),
                 "object pose refused: .*frame 'camera'", bundle=b),
            Case("insert bundle: object 10 m away", _object(_socket_with(position=np.array([10.0, 0.0, 0.0]))),
                 "object pose refused: .*outside the workspace box", bundle=b)]


def _no_lift_command(robot: Robot) -> None:
    """Healthy state and object pose but no target height: the node holds the pose in passive and says why."""
    robot.lift_sample = None
    robot.start_streaming()
    time.sleep(1.5)
    assert robot.status.get("mode") == "passive", robot.status


def _lift_command(height: float, faults: bool) -> Callable[[Robot], None]:
    """Policy mode, then the operator sends only ``height``: a fault, or (clipped) none."""
    def run(robot: Robot) -> None:
        robot.to_policy()
        robot.lift_sample = lambda: m.Float64(height)
        if faults:
            assert robot.wait_mode("damping", 5), robot.status
        time.sleep(0.5)
        assert faults or robot.status.get("mode") == "policy", robot.status
    return run


def lift_cases() -> list[Case]:
    """A lift bundle: its policy observes the cube's pose and a target height (``std_msgs/Float64``)."""
    b = "lift.onnx"
    return [Case("lift bundle: no lift command", _no_lift_command, "no lift command received", bundle=b),
            Case("lift bundle: policy with a lift command", _policy_runs(), "", bundle=b),
            Case("lift bundle: NaN lift command", _lift_command(float("nan"), True), "lift command refused: .*finite",
                 bundle=b),
            Case("lift bundle: lift command 10 m (clipped)", _lift_command(10.0, False), "", bundle=b)]


def arm_cases() -> list[Case]:
    def pose(**kw: object) -> Callable[[Robot], m.PoseStamped]:
        return lambda r: r.pose_target(**kw)
    return [Case("pose command NaN", _pose_command(pose(position=[np.nan] * 3)), "pose command must be .*finite"),
            Case("pose command inf orientation", _pose_command(pose(orientation=[np.inf, 0, 0, 0])),
                 "pose command must be .*finite"),
            Case("pose command quaternion of norm 2", _pose_command(pose(orientation=[2.0, 0, 0, 0])),
                 "unit quaternion"),
            Case("pose command in another frame", _pose_command(pose(frame="camera")),
                 "pose command is in frame 'camera'"),
            Case("pose command 10 m away (clipped)", _pose_command(pose(position=[10, 10, 10]), faults=False), ""),
            Case("policy outputs 1e6: workspace box", _policy_runs(), "workspace box", bundle="huge.onnx"),
            Case("measured end effector outside the box", _ee_outside, "measured pose .* outside the workspace box"),
            *object_cases(), *lift_cases()]
