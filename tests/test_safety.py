"""Safety state machine and watchdog: every transition and fault, from hand-written inputs."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

from ctrl_rl.deploy.node import NodeParams
from ctrl_rl.deploy.safety import (
    Mode,
    SafetyConfig,
    SafetyStateMachine,
    clamp_targets,
    find_fault,
    pose_fault,
    tilt_angle,
)
from ctrl_rl.deploy.stats import LoopTimer

POSE = np.array([0.0, 0.8, -1.5])
LIMITS = np.array([[-0.8, 0.8], [-1.0, 3.5], [-2.7, -0.9]])
UP = np.array([0.0, 0.0, -1.0])
CFG = SafetyConfig(state_timeout=0.025, stand_up_time=1.0, stand_hold_time=0.5)


def healthy(**kw):
    args = dict(joint_pos=POSE.copy(), joint_vel=np.zeros(3), gravity_body=UP, gyro=np.zeros(3), state_age=0.005,
                command_age=0.1, joint_limits=LIMITS, need_command=True)
    args.update(kw)
    return find_fault(CFG, **args)


def test_healthy_data_has_no_fault():
    assert healthy() is None


@pytest.mark.parametrize("kw, match", [
    (dict(joint_pos=None), "no joint state"),
    (dict(state_age=0.026), "stale: last JointState/Imu 26.0 ms ago"),
    (dict(state_age=math.inf), "stale"),
    (dict(joint_pos=np.array([0.0, np.nan, -1.5])), "non-finite joint positions"),
    (dict(gyro=np.array([0.0, np.inf, 0.0])), "non-finite IMU angular velocity"),
    (dict(joint_pos=np.array([0.0, 0.8, -0.75])), r"joint 2 at -0.750 rad is outside its limits \[-2.800, -0.800\]"),
    (dict(joint_vel=np.array([0.0, 31.0, 0.0])), "joint speed 31.0"),
    (dict(gyro=np.array([25.0, 0.0, 0.0])), "body rate"),
    (dict(gravity_body=np.array([0.0, -math.sin(0.9), -math.cos(0.9)])), "tilt 52 deg exceeds max_tilt 46 deg"),
    (dict(command_age=0.6), "velocity command is stale: 0.60 s old"),
    (dict(command_age=None), "never received"),
])
def test_each_fault_is_found_and_named(kw, match):
    fault = healthy(**kw)
    assert fault is not None
    import re
    assert re.search(match, fault), fault


def test_limits_allow_the_margin_and_commands_are_optional_outside_policy():
    assert healthy(joint_pos=np.array([0.0, 0.8, -0.85])) is None  # within 0.1 rad of the limit
    assert healthy(command_age=None, need_command=False) is None
    no_cmd = SafetyConfig(command_timeout=0, state_timeout=0.02)
    assert find_fault(no_cmd, POSE, np.zeros(3), UP, np.zeros(3), 0.0, None, LIMITS, True) is None


def test_tilt_angle():
    assert tilt_angle(UP) == pytest.approx(0.0)
    assert tilt_angle(np.array([1.0, 0.0, 0.0])) == pytest.approx(math.pi / 2)
    assert tilt_angle(np.array([0.0, 0.0, 1.0])) == pytest.approx(math.pi)


def test_passive_stand_up_policy_sequence_and_commands():
    sm = SafetyStateMachine(CFG, POSE, kp=[35.0], kd=[0.6])
    lying = np.array([0.1, 1.4, -2.6])
    assert sm.tick(0.0, "no joint state or IMU received yet", None) == Mode.PASSIVE  # waits for data
    assert sm.command(0.0) is None  # no measured pose yet: nothing at all to publish
    assert sm.tick(0.05, "robot state is stale", lying) == Mode.PASSIVE
    c = sm.command(0.05)
    np.testing.assert_array_equal(c.position, lying)  # passive holds the measured pose, not the default
    np.testing.assert_array_equal(c.kp, 0.0)
    np.testing.assert_array_equal(c.kd, 0.0)  # passive before a start: zero gains (safety.passive_kd)
    assert sm.tick(0.08, None, lying) == Mode.PASSIVE  # healthy, but no operator's start yet (the default)
    np.testing.assert_array_equal(sm.command(0.08).kp, 0.0)  # still nothing stiff
    sm.request_start()
    assert sm.tick(0.1, None, lying) == Mode.STAND_UP  # the start, on healthy data
    np.testing.assert_allclose(sm.command(0.1).position, lying)
    np.testing.assert_allclose(sm.command(0.6).position, (lying + POSE) / 2)  # halfway at t0 + 0.5 s
    np.testing.assert_allclose(sm.command(0.6).kp, 35.0)
    np.testing.assert_allclose(sm.command(1.3).position, POSE)  # holding
    assert sm.tick(1.5, None, POSE) == Mode.STAND_UP
    assert sm.tick(1.6, None, POSE) == Mode.POLICY  # stand_up_time + stand_hold_time after entry
    targets = POSE + 0.1
    np.testing.assert_allclose(sm.command(1.6, targets).position, targets)
    with pytest.raises(ValueError, match="policy mode needs"):
        sm.command(1.6)
    assert [m for _, m, _ in sm.transitions] == [Mode.STAND_UP, Mode.POLICY]


def test_fault_latches_damping_until_a_start_on_healthy_data():
    sm = SafetyStateMachine(CFG, POSE, kp=[35.0], kd=[0.6])
    sm.request_start()
    sm.tick(0.0, None, POSE)
    sm.tick(2.0, None, POSE)
    assert sm.mode == Mode.POLICY
    bent = POSE + 0.2
    assert sm.tick(2.02, "robot state is stale", bent) == Mode.DAMPING
    assert sm.fault == "robot state is stale"
    c = sm.command(2.02)
    np.testing.assert_allclose(c.position, bent)  # holds the last measured pose, kp 0: pure damping
    np.testing.assert_array_equal(c.kp, 0.0)
    assert sm.tick(3.0, None, POSE) == Mode.DAMPING  # healthy again, but latched
    sm.request_start()
    assert sm.tick(3.1, "tilt 80 deg", POSE) == Mode.DAMPING  # a start pressed while faulty is dropped
    assert sm.tick(3.2, None, POSE) == Mode.DAMPING
    sm.request_start()
    assert sm.tick(3.3, None, POSE) == Mode.STAND_UP and sm.fault is None


def test_by_default_the_operator_starts_and_estop_in_passive_latches():
    assert SafetyConfig().auto_start is False
    sm = SafetyStateMachine(SafetyConfig(), POSE, kp=[35.0], kd=[0.6])
    assert [sm.tick(t, None, POSE) for t in (0.0, 1.0, 60.0)] == [Mode.PASSIVE] * 3  # healthy data is not a start
    assert sm.tick(61.0, "e-stop message received", POSE) == Mode.PASSIVE  # a data fault would only be noted
    assert sm.tick(61.0, "e-stop message received", POSE, latch_in_passive=True) == Mode.DAMPING


def test_auto_start_stands_up_on_the_first_healthy_data_once():
    sm = SafetyStateMachine(SafetyConfig(auto_start=True, stand_up_time=0.0, stand_hold_time=0.0), POSE,
                            kp=[35.0], kd=[0.6])
    assert sm.tick(0.0, "no joint state or IMU received yet", None) == Mode.PASSIVE
    assert sm.tick(0.1, None, POSE) == Mode.STAND_UP
    assert sm.tick(0.2, None, POSE) == Mode.POLICY
    assert sm.tick(0.3, "tilt 80 deg", POSE) == Mode.DAMPING
    assert sm.tick(0.4, None, POSE) == Mode.DAMPING  # after a fault: only an operator's start


def test_an_operators_stop_is_not_a_fault():
    """A stop (signal, end of the run, lifecycle deactivate) is named in ``stop``; ``fault`` stays None,
    unless a fault already held damping: then both are named."""
    sm = SafetyStateMachine(SafetyConfig(stand_up_time=0.0, stand_hold_time=0.0), POSE, kp=[35.0], kd=[0.6])
    sm.request_start()
    sm.tick(0.0, None, POSE)
    assert sm.tick(0.1, None, POSE) == Mode.POLICY
    assert sm.tick(0.2, "stopped by signal (SIGTERM)", POSE, latch_in_passive=True) == Mode.DAMPING
    assert (sm.fault, sm.stop) == (None, "stopped by signal (SIGTERM)")
    np.testing.assert_array_equal(sm.command(0.2).kp, 0.0)
    sm.request_start()
    assert sm.tick(0.3, None, POSE) == Mode.STAND_UP and (sm.fault, sm.stop) == (None, None)
    sm.tick(0.4, None, POSE)
    assert sm.tick(0.5, "robot state is stale", POSE) == Mode.DAMPING
    assert sm.tick(0.6, "deactivated (lifecycle)", POSE, latch_in_passive=True) == Mode.DAMPING
    assert (sm.fault, sm.stop) == ("robot state is stale", "deactivated (lifecycle)")
    idle = SafetyStateMachine(SafetyConfig(), POSE, kp=[35.0], kd=[0.6])  # stopped before any start
    assert idle.tick(0.0, "stopped: the run's duration ended", POSE, latch_in_passive=True) == Mode.DAMPING
    assert (idle.fault, idle.stop) == (None, "stopped: the run's duration ended")


def test_config_validation_names_the_fix():
    assert SafetyConfig().resolved(0.02).state_timeout == pytest.approx(0.04)  # 2 periods
    assert SafetyConfig(state_timeout=0.01).resolved(0.02).state_timeout == 0.01
    with pytest.raises(ValueError, match="state_timeout must be a finite number >= 0"):
        SafetyConfig(state_timeout=-1)
    with pytest.raises(ValueError, match="max_tilt"):
        SafetyConfig(max_tilt=4.0)
    with pytest.raises(ValueError, match=r"unknown parameter\(s\) \['safety.max_tlt'\]"):
        SafetyConfig.from_dict({"max_tlt": 0.5})
    with pytest.raises(ValueError, match="command_format must be one of"):
        NodeParams(command_format="torque")
    with pytest.raises(ValueError, match=r"unknown parameter\(s\) \['rate'\]"):
        NodeParams.from_dict({"rate": 50})


@pytest.mark.parametrize("values, match", [
    ({"safety": {"auto_start": "no"}}, r"safety.auto_start must be true or false, got 'no'"),
    ({"safety.auto_start": 1}, r"safety.auto_start must be true or false, got 1"),
    ({"rate_hz": "fast"}, r"rate_hz must be a number, got 'fast'"),
    ({"safety.max_tilt": "0.5"}, r"safety.max_tilt must be a number"),
    ({"realtime_priority": 1.5}, r"realtime_priority must be an integer"),
    ({"command_joint_names": "a,b"}, r"command_joint_names must be"),
    ({"command_joint_names": ["a", "a"]}, r"lists a joint twice"),
    ({"qos.imu.reliability": "sometimes"}, r"qos.imu: reliability must be one of"),
    ({"qos.imu.depth": 0}, r"depth must be >= 1"),
    ({"safety": 3}, r"safety is a group"),
    ({"passive_output": "off"}, r"passive_output must be one of"),
])
def test_every_parameter_is_type_checked_with_its_name(values, match):
    with pytest.raises(ValueError, match=match):
        NodeParams.from_dict(values)


def test_ints_are_accepted_for_floats_and_qos_defaults_follow_ros_conventions():
    p = NodeParams.from_dict({"rate_hz": 50, "safety.max_tilt": 1})
    assert p.rate_hz == 50.0 and isinstance(p.safety.max_tilt, float)
    assert (p.qos.joint_states.reliability, p.qos.joint_states.depth) == ("best_effort", 1)
    assert p.qos.joint_commands.reliability == "reliable" and p.qos.estop.reliability == "reliable"
    assert NodeParams.from_dict(p.flat()) == p


def test_a_broken_params_file_is_one_line_naming_file_and_line(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text("ctrl_rl_node:\n  ros__parameters:\n    rate_hz: [1\n    bundle: x\n")
    with pytest.raises(ValueError, match=r"p.yaml line \d+: not valid YAML") as e:
        NodeParams.from_yaml(f)
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="does not exist"):
        NodeParams.from_yaml(tmp_path / "missing.yaml")


def test_rejected_pose_is_never_held():
    """A pose that failed the checks is not passed on; the machine keeps holding the last good one."""
    cfg = SafetyConfig(state_timeout=0.025)
    assert pose_fault(cfg, np.array([0.0, 0.8, 1000.0]), np.zeros(3), LIMITS) is not None
    assert pose_fault(cfg, POSE, np.array([0.0, np.nan, 0.0]), LIMITS) == "non-finite joint velocities"
    assert pose_fault(cfg, POSE, np.zeros(3), LIMITS, ["hip", "thigh", "calf"]) is None
    assert "joint calf at 0.500" in pose_fault(cfg, np.array([0.0, 0.8, 0.5]), np.zeros(3), LIMITS,
                                               ["hip", "thigh", "calf"])
    sm = SafetyStateMachine(cfg, POSE, kp=[35.0], kd=[0.6], joint_limits=LIMITS)
    sm.request_start()
    sm.tick(0.0, None, POSE)
    sm.tick(1.0, "malformed input: JointState refused", None)  # the node passes no pose it rejected
    np.testing.assert_array_equal(sm.command(1.0).position, POSE)


def test_clamp_targets_to_joint_and_torque_limits_by_hand():
    limits = np.array([[-0.8, 0.8], [-1.0, 1.0]])
    out, moved = clamp_targets(np.array([2.5, -0.5]), limits)
    np.testing.assert_array_equal(out, [0.8, -0.5])
    assert moved == 1
    # kp 20, kd 1, tau_max 10 at q = 0.1, dq = 2: target in [0.1 + (2 - 10)/20, 0.1 + (2 + 10)/20] = [-0.3, 0.7]
    out, moved = clamp_targets(np.array([0.75, -0.35]), limits, kp=np.array([20.0, 20.0]), kd=np.array([1.0, 1.0]),
                               torque_limits=np.array([10.0, 10.0]), joint_pos=np.array([0.1, 0.1]),
                               joint_vel=np.array([2.0, 2.0]))
    np.testing.assert_allclose(out, [0.7, -0.3])
    assert moved == 2
    tau = 20 * (out - 0.1) - 1.0 * 2.0
    assert np.all(np.abs(tau) <= 10 + 1e-9)
    # kp 0 (damping) is exempt from the torque window; joint limits still apply
    out, _ = clamp_targets(np.array([0.9, 0.0]), limits, kp=np.zeros(2), kd=np.ones(2),
                           torque_limits=np.ones(2), joint_pos=np.zeros(2), joint_vel=np.zeros(2))
    np.testing.assert_array_equal(out, [0.8, 0.0])


def test_policy_targets_beyond_the_limits_are_clamped_and_counted():
    sm = SafetyStateMachine(SafetyConfig(stand_up_time=0.0, stand_hold_time=0.0), POSE, kp=[35.0], kd=[0.6],
                            joint_limits=LIMITS, torque_limits=[23.7, 23.7, 35.55])
    sm.request_start()
    sm.tick(0.0, None, POSE)
    assert sm.tick(0.1, None, POSE) == Mode.POLICY
    c = sm.command(0.1, POSE + np.array([2.5, 0.0, 0.0]), np.zeros(3))
    assert c.clamped == 1
    assert c.position[0] == pytest.approx(23.7 / 35.0)  # torque window at q = 0: 0.677 rad, inside the 0.8 limit
    assert np.all((c.position >= LIMITS[:, 0]) & (c.position <= LIMITS[:, 1]))


def test_a_damping_target_past_the_limits_is_clamped_but_not_counted():
    """Damping holds the measured pose at kp 0: an arm that sagged 0.05 rad past a limit (inside the node's
    ``joint_limit_margin``, so the pose is trusted) gets a target inside the limits, so the message stays within them,
    but no clamp is counted (none moves a motor); at the same pose in stand-up, with stiffness, the clamp counts."""
    past = POSE.copy()
    past[0] = LIMITS[0, 1] + 0.05
    sm = SafetyStateMachine(SafetyConfig(stand_up_time=1.0, stand_hold_time=0.0), POSE, kp=[35.0], kd=[0.6],
                            joint_limits=LIMITS)
    sm.tick(0.0, None, past)
    sm.request_start()
    assert sm.tick(0.01, None, past) == Mode.STAND_UP
    assert sm.command(0.01, None, np.zeros(3)).clamped == 1
    assert sm.trip(0.02, "test fault") == Mode.DAMPING
    c = sm.command(0.02, None, np.zeros(3))
    assert c.clamped == 0 and not np.any(c.kp) and c.position[0] == pytest.approx(LIMITS[0, 1])


def test_params_yaml_in_ros2_format(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text("ctrl_rl_node:\n  ros__parameters:\n    rate_hz: 100.0\n    safety:\n      max_tilt: 0.5\n"
                 "    command_joint_names: [b, a]\n")
    p = NodeParams.from_yaml(f)
    assert p.rate_hz == 100.0 and p.safety.max_tilt == 0.5 and p.command_joint_names == ["b", "a"]
    flat = p.flat()
    assert flat["safety.max_tilt"] == 0.5
    assert NodeParams.from_dict(flat) == p


def test_loop_timer_counts_overruns_without_bursting():
    timer = LoopTimer(0.01)
    timer.start()
    t0 = time.perf_counter()
    for i in range(10):
        if i == 4:
            time.sleep(0.035)  # this tick's work overran 3 slots
        timer.wait()
    elapsed = time.perf_counter() - t0
    assert timer.misses == 1 and timer.ticks == 10
    assert elapsed == pytest.approx(0.13, abs=0.015)  # 10 slots + 3 skipped, no catch-up burst


def test_shipped_params_file_and_launch_file_are_valid():
    """configs/deploy/node.yaml loads with every default; the launch file at least compiles
    (launch_ros has no PyPI wheels, so it is never launched here)."""
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent / "src" / "ctrl_rl"
    assert NodeParams.from_yaml(root / "configs/deploy/node.yaml") == NodeParams()
    compile((root / "deploy/launch/ctrl_rl_node.launch.py").read_text(), "launch.py", "exec")


def test_a_stiffer_stand_up_hands_the_policy_its_own_gains():
    """``stand_up_stiffness`` s: the stand-up and the hold send kp x s and kd x sqrt(s) (the same damping
    ratio); the policy's ticks the bundle's gains; 0 in the node's parameters takes the bundle's value."""
    cfg = SafetyConfig(stand_up_time=1.0, stand_hold_time=0.5, stand_up_stiffness=0.0).resolved(0.02, 4.0)
    assert cfg.stand_up_stiffness == 4.0  # the bundle's
    assert SafetyConfig(stand_up_stiffness=2.0).resolved(0.02, 4.0).stand_up_stiffness == 2.0  # the operator's
    assert SafetyConfig().resolved(0.02).stand_up_stiffness == 1.0  # a bundle without one
    sm = SafetyStateMachine(cfg, POSE, kp=[20.0, 20.0, 30.0], kd=[0.5, 0.5, 1.0])
    sm.request_start()
    sm.tick(0.0, None, POSE + 0.3)
    for t in (0.5, 1.2):  # standing up, then holding
        c = sm.command(t)
        np.testing.assert_allclose(c.kp, [80.0, 80.0, 120.0])
        np.testing.assert_allclose(c.kd, [1.0, 1.0, 2.0])
    assert sm.tick(1.5, None, POSE) == Mode.POLICY
    c = sm.command(1.5, POSE)
    np.testing.assert_allclose(c.kp, [20.0, 20.0, 30.0])
    np.testing.assert_allclose(c.kd, [0.5, 0.5, 1.0])
    with pytest.raises(ValueError, match="safety.stand_up_stiffness must be at most 10"):
        SafetyConfig(stand_up_stiffness=11.0)
