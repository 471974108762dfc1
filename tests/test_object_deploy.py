"""Arm bundles that observe an object (insert and lift, i2rt's YAM) on the deploy node: what a bundle carries,
the object pose's and the lift command's checks, the node's observation against training's, and sim2sim
episodes over the node."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from bundles import ROS_PY, insert_bundle, run_sim2sim

from ctrl_rl.deploy import messages as m
from ctrl_rl.deploy.arm_node import ArmSide
from ctrl_rl.deploy.robot_policy import RobotPolicy
from ctrl_rl.deploy.runtime import OnnxPolicy
from ctrl_rl.robots.arm_scenes import PEG_SOCKET_KEYS

SOURCES = ("object_pose", "object_to_ee", "object_to_tool", "tool_correction", "lift_command")


@pytest.fixture(scope="module")
def short_insert_bundle(tmp_path_factory) -> Path:
    """The insert task on the YAM after 1 iteration of 8 envs x 8 steps, exported; 2 s episodes (sim2sim runs
    them: three in 9 s)."""
    return Path(insert_bundle(tmp_path_factory.mktemp("insert_run"), episode_s=2.0))


@pytest.fixture(scope="module")
def short_lift_bundle(tmp_path_factory) -> Path:
    """The lift task's, likewise."""
    return Path(insert_bundle(tmp_path_factory.mktemp("lift_run"), episode_s=2.0, task="lift"))


@pytest.fixture(params=["insert", "lift"])
def object_bundle(request) -> tuple[str, Path]:
    return request.param, request.getfixturevalue(f"short_{request.param}_bundle")


def side(meta: dict) -> ArmSide:
    return ArmSide(meta, list(meta["joint_names"]), np.asarray(meta["default_pose"]), 0.2)


def test_an_insert_bundle_carries_its_scene_its_rule_and_its_rest_targets(short_insert_bundle):
    meta = OnnxPolicy(short_insert_bundle).metadata
    obj = meta["object"]
    assert obj["kind"] == "peg_socket" and obj["frame"] == meta["arm_config"]["base_body"]
    assert set(PEG_SOCKET_KEYS) <= set(obj) and obj["episode_length_s"] == 2.0 and obj["success_hold_steps"] == 10
    assert np.asarray(meta["workspace"]).shape == (3, 2)
    # the gripper (not moved by the policy) holds its closed limit, as in training; the arm joints their default
    n_arm = len(meta["action_joints"])
    assert meta["rest_targets"][:n_arm] == meta["default_pose"][:n_arm]
    assert meta["rest_targets"][n_arm:] == pytest.approx([meta["joint_limits"][n_arm][0]], abs=1e-6)
    assert RobotPolicy(short_insert_bundle, SOURCES).targets(np.zeros(n_arm))[n_arm:] == pytest.approx(
        meta["rest_targets"][n_arm:])


def test_a_robot_without_an_object_pose_source_is_refused(short_insert_bundle):
    with pytest.raises(ValueError, match=r"observes 'object_pose', which needs an object pose source .* "
                                         r"object_pose_topic"):
        RobotPolicy(short_insert_bundle, ())


def test_the_peg_tip_is_the_end_effector_moved_by_the_bundles_tool_offset(short_insert_bundle):
    """insert observes the socket from the peg's tip (``object_to_tool``): the bundle says where the tip is in the
    end effector's frame, and a bundle that observes it without saying is refused."""
    meta = OnnxPolicy(short_insert_bundle).metadata
    assert meta["tool_offset"] == [0.0, 0.0, 0.06]  # insert's peg_tip, on the site's approach axis
    arm = side(meta)
    q = np.asarray(meta["default_pose"])
    ee, rotation = arm.chain.ee_pose(q)
    np.testing.assert_allclose(arm.kinematic_signals(q)["tool_pos"], ee + 0.06 * rotation[:, 2])
    np.testing.assert_allclose(arm.kinematic_signals(q)["ee_pos"], ee)
    step = 1e-6 * np.eye(len(q))[:6]  # the tip's Jacobian in the six moved joints, against central differences
    tip = lambda dq: arm.kinematic_signals(q + dq)["tool_pos"]  # noqa: E731
    numeric = np.stack([(tip(d) - tip(-d)) / 2e-6 for d in step], axis=1)
    np.testing.assert_allclose(arm.kinematic_signals(q)["tool_jacobian"], numeric, atol=1e-7)
    with pytest.raises(ValueError, match="observes object_to_tool/tool_correction but its metadata has no tool_offset"):
        side({k: v for k, v in meta.items() if k != "tool_offset"})
    with pytest.raises(ValueError, match="tool_offset must be 3 finite numbers"):
        side({**meta, "tool_offset": [0.0, float("nan"), 0.06]})


def test_a_lift_bundle_carries_its_cube_its_draws_its_rule_and_its_contact_model(short_lift_bundle):
    meta = OnnxPolicy(short_lift_bundle).metadata
    obj = meta["object"]
    assert obj["kind"] == "cube" and obj["frame"] == "arm" and obj["half_size"] == 0.02
    assert obj["lift_height"] == [0.1, 0.2] and obj["episode_length_s"] == 2.0 and obj["success_tolerance"] == 0.02
    assert obj["contact"] == {"cone": "elliptic", "impratio": 10.0}  # LiftConfig.physics_profile's grasp
    assert {"cube_x", "cube_y", "cube_yaw", "object_friction", "object_mass"} <= set(obj)
    # the end effector's box: over the cube's start range, from the table to the highest target
    assert meta["workspace"] == [obj["cube_x"], obj["cube_y"], [0.0, 0.22]]


def test_a_robot_without_a_lift_command_source_is_refused(short_lift_bundle):
    with pytest.raises(ValueError, match=r"observes 'lift_command', which needs a lift target source .* "
                                         r"lift_command_topic"):
        RobotPolicy(short_lift_bundle, ("object_pose", "object_to_ee"))


def test_lift_commands_are_finite_and_clipped_into_the_training_range(short_lift_bundle):
    arm = side(OnnxPolicy(short_lift_bundle).metadata)
    assert arm.lift_range == (0.1, 0.2)
    assert arm.parse_lift(m.Float64(0.15)).tolist() == [0.15]
    assert arm.parse_lift(m.Float64(2.0)).tolist() == [0.2] and arm.parse_lift(m.Float64(-1.0)).tolist() == [0.1]
    for bad in (float("nan"), float("inf")):
        with pytest.raises(ValueError, match="finite height"):
            arm.parse_lift(m.Float64(bad))


def test_object_poses_are_checked_by_frame_finiteness_quaternion_and_workspace(short_insert_bundle):
    meta = OnnxPolicy(short_insert_bundle).metadata
    arm = side(meta)
    frame = meta["object"]["frame"]
    pose = arm.parse_object(m.PoseStamped(0.0, np.array([0.28, 0.05, 0.0]), np.array([1.02, 0.0, 0.0, 0.0]), frame))
    assert pose.tolist() == [0.28, 0.05, 0.0, 1.0, 0.0, 0.0, 0.0]  # the quaternion normalized
    for msg, why in ((m.PoseStamped(0.0, np.array([0.28, 0.0, 0.0]), np.array([1.0, 0, 0, 0]), "world"),
                      r"in frame 'world'; the policy was trained on poses in 'arm'"),
                     (m.PoseStamped(0.0, np.array([np.nan, 0.0, 0.0]), np.array([1.0, 0, 0, 0]), frame), "finite"),
                     (m.PoseStamped(0.0, np.array([0.28, 0.0, 0.0]), np.array([1.0, 1.0, 0, 0]), frame),
                      "unit quaternion"),
                     (m.PoseStamped(0.0, np.array([10.0, 0.0, 0.0]), np.array([1.0, 0, 0, 0]), frame),
                      r"outside the workspace box")):
        with pytest.raises(ValueError, match=why):
            arm.parse_object(msg)


def test_the_nodes_observation_is_trainings_for_the_same_state(object_bundle):
    """The task's env (no observation noise) stepped with random actions; the node's frame from what a robot
    measures and is told (joint state, the object's pose, the end effector and insert's peg tip by the bundle's
    forward kinematics, lift's target height, the last action) equals the env's policy observation."""
    from ctrl_rl.sims import make_env

    task, bundle = object_bundle
    env = make_env("mujoco", task, 2, "cpu", seed=0, obs_noise=0.0)
    env.reset(seed=0)
    policy = RobotPolicy(bundle, SOURCES)
    arm = side(policy.policy.metadata)
    gen = torch.Generator().manual_seed(0)
    for _ in range(5):
        obs = env.step(torch.randn(2, env.action_dim, generator=gen))[0]["policy"]
    s = env.task.signals(env.physics)
    for i in range(2):
        q = s["joint_pos"][i].double().numpy()
        policy.last_action = s["last_action"][i].double().numpy()
        told = {"lift_command": arm.parse_lift(m.Float64(float(s["lift_command"][i, 0])))} if task == "lift" else {}
        frame = policy.frame({"joint_pos": q, "joint_vel": s["joint_vel"][i].double().numpy(),
                              "object_pose": s["object_pose"][i].double().numpy(), **arm.kinematic_signals(q),
                              **told})
        np.testing.assert_allclose(frame, obs[i].numpy(), atol=2e-5)


NO_ROS = pytest.mark.skipif(not ROS_PY.exists(), reason="no .venv-ros: `bash scripts/setup_ros_env.sh`")


@pytest.mark.parametrize("task, transport", [("insert", "dds"), ("lift", "dds"),
                                             pytest.param("insert", "rclpy", marks=NO_ROS)])
def test_sim2sim_runs_episodes_over_the_node(task, transport, request, tmp_path):
    """The node over the transport against the object bridge: the object's pose as PoseStamped (and lift's target
    height as Float64), episodes started and stopped by the operator's messages, each judged by the task's rule;
    the verdict on the RESULT line with the task's measures. (Lift's messages over rclpy: the arm fuzz's lift
    cases and the transport round trips.)"""
    bundle = request.getfixturevalue(f"short_{task}_bundle")
    summary = tmp_path / "s.json"
    proc = run_sim2sim(bundle, tmp_path, transport, 9, task, "--summary", str(summary),
                       "--set", "safety.stand_up_time=0.5", "--set", "safety.stand_hold_time=0.0")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    line = proc.stdout.strip().splitlines()[-1]
    assert line.startswith("RESULT sim2sim "), line
    result = dict(kv.split("=") for kv in line.split()[2:])
    assert int(result["episodes"]) >= 2 and re.fullmatch(r"[01](\.\d+)?", result["success_rate"]), result
    assert result["cut_short"] == "0" and int(result["object_poses"]) > 200, result
    measures = {"insert": ("insertion_depth", "lateral_error"), "lift": ("object_height", "height_error")}[task]
    assert all(np.isfinite(float(result[k])) for k in measures), result
    s = json.loads(summary.read_text())
    assert s["bridge"]["rejected"] == 0 and s["rejected"] == 0, s
    assert "e-stop" in (s["fault"] or "") or s["fault"] is None, s  # the operator's stops between episodes
