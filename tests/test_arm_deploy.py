"""Arms on the deploy node: forward kinematics from the bundle's chain against MuJoCo, the workspace guard by
hand, the pose command's checks, an arm bundle's export (chain, movable MJCF) and its sim2sim run."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import mujoco
import numpy as np
import pytest
from bundles import ROS_PY, run_sim2sim
from toy_arm import REACH_KWARGS, write_toy_arm

from ctrl_rl.deploy import messages as m
from ctrl_rl.deploy.arm_kinematics import KinematicChain, WorkspaceBox, chain_from_model
from ctrl_rl.deploy.arm_node import ArmSide, matrix_to_quat
from ctrl_rl.deploy.safety import JointCommand
from ctrl_rl.robots.arm import arm_indices, build_arm_model, load_arm

CHAIN_MJCF = """
<mujoco>
  <worldbody>
    <body name="base" pos="0.3 -0.2 0.5" quat="0.9 0.1 0.3 -0.2">
      <body name="a" pos="0.05 0.02 0.1" quat="0.7 0.2 -0.1 0.4">
        <joint name="h1" type="hinge" axis="0.3 -0.5 0.8" pos="0.01 0.02 -0.03" ref="0.4" range="-3 3"/>
        <geom size="0.02"/>
        <body name="b" pos="0.2 0 0.05">
          <joint name="s1" type="slide" axis="1 1 0" pos="0.1 0 0" ref="-0.05" range="-0.2 0.2"/>
          <joint name="h2" type="hinge" axis="0 0 1" pos="0 0.03 0" range="-3 3"/>
          <geom size="0.02"/>
          <site name="tip" pos="0.1 -0.02 0.03" quat="0.5 0.5 -0.5 0.5"/>
          <body name="finger" pos="0.1 0 0"><joint name="f" type="slide" axis="0 1 0"/><geom size="0.01"/></body>
        </body>
      </body>
    </body>
  </worldbody>
</mujoco>
"""
"""A chain with what an arm's may hold: rotated bodies, off-center hinges, a slide, two joints on one body,
joint references (qpos0 != 0), a rotated site, a joint below the site that moves it not."""


def world_pose(model: mujoco.MjModel, data: mujoco.MjData, base: str, chain: KinematicChain,
               q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The chain's base-frame pose in world coordinates, by MuJoCo's pose of the base body."""
    p, r = chain.ee_pose(q)
    b = model.body(base).id
    rb = data.xmat[b].reshape(3, 3)
    return data.xpos[b] + rb @ p, rb @ r


@pytest.mark.parametrize("arm", ["toy", "i2rt_yam", "chain"])
def test_forward_kinematics_matches_mujocos_site_pose_on_random_configurations(arm, tmp_path):
    if arm == "chain":
        model = mujoco.MjModel.from_xml_string(CHAIN_MJCF)
        base, site, joints = "base", "tip", ["h1", "s1", "h2", "f"]
    else:
        robot = load_arm(str(write_toy_arm(tmp_path)) if arm == "toy" else arm)
        model, _ = build_arm_model(robot)
        base, site, joints = robot.base_body, robot.ee_site, list(robot.joint_names)
    chain = KinematicChain(json.loads(json.dumps(chain_from_model(model, base, site, joints))), joints)  # as stored
    data, rng = mujoco.MjData(model), np.random.default_rng(0)
    qadr = arm_indices(model, tuple(joints))[0]
    limits = model.jnt_range[[model.joint(j).id for j in joints]]
    errors = []
    for _ in range(100):
        q = rng.uniform(limits[:, 0], limits[:, 1])
        data.qpos[:] = model.qpos0
        data.qpos[qadr] = q
        mujoco.mj_kinematics(model, data)
        p, r = world_pose(model, data, base, chain, q)
        s = model.site(site).id
        errors.append(max(np.abs(p - data.site_xpos[s]).max(), np.abs(r - data.site_xmat[s].reshape(3, 3)).max()))
    assert max(errors) < 1e-6, max(errors)
    assert np.ptp([chain.ee_pose(rng.uniform(limits[:, 0], limits[:, 1]))[0] for _ in range(5)], axis=0).max() > 0.01


def test_a_chain_through_a_joint_the_bundle_does_not_drive_is_refused():
    model = mujoco.MjModel.from_xml_string(CHAIN_MJCF)
    with pytest.raises(ValueError, match=r"joint 's1' between 'base' and 'tip' is not a hinge or slide the bundle "
                                         r"drives"):
        chain_from_model(model, "base", "tip", ["h1", "h2"])
    meta = chain_from_model(model, "base", "tip", ["h1", "s1", "h2"])
    with pytest.raises(ValueError, match=r"kinematic_chain is malformed .*joint 's1' is not one of"):
        KinematicChain(meta, ["h1", "h2"])


def test_matrix_to_quat_inverts_the_chains_rotation():
    rng = np.random.default_rng(1)
    for _ in range(50):
        q = rng.normal(size=4)
        q /= np.linalg.norm(q)
        q = q if q[0] >= 0 else -q
        from ctrl_rl.deploy.arm_kinematics import quat_to_matrix

        np.testing.assert_allclose(matrix_to_quat(quat_to_matrix(q)), q, atol=1e-12)


@pytest.fixture
def toy_side(tmp_path) -> tuple[ArmSide, np.ndarray]:
    """The toy arm's node side: its chain, the task's target box [[0.15, 0.25], [-0.1, 0.1], [0.03, 0.12]]
    stretched to the default tip and grown by 0.05 m."""
    robot = load_arm(str(write_toy_arm(tmp_path)))
    model, _ = build_arm_model(robot)
    joints = list(robot.joint_names)
    meta = {"kinematic_chain": chain_from_model(model, robot.base_body, robot.ee_site, joints),
            "pose_command": {"frame": robot.base_body, "workspace": [list(a) for a in robot.workspace]}}
    return ArmSide(meta, joints, np.array(robot.default_pose), 0.05), np.array(robot.default_pose)


def test_the_workspace_box_holds_the_targets_the_default_pose_and_the_margin(toy_side):
    side, default = toy_side
    ee = side.chain.ee_pose(default)[0]
    # shoulder -0.3 rad about y: the upper arm 0.15 (cos 0.3, 0, sin 0.3); the elbow adds 1.0: the forearm at
    # -0.7 rad, 0.15 (cos 0.7, 0, -sin 0.7); on the turret 0.1 m up: x = 0.1433 + 0.1147, z = 0.1 + 0.0443 - 0.0966
    np.testing.assert_allclose(ee, [0.2580, 0.0, 0.0477], atol=1e-4)
    np.testing.assert_allclose(side.box.bounds, [[0.10, ee[0] + 0.05], [-0.15, 0.15], [-0.02, 0.17]], atol=1e-6)
    assert WorkspaceBox(side.box.bounds).distance_outside(np.array([0.30, 0.15, 0.57])) == pytest.approx(0.4)


def test_a_target_outside_the_box_is_moved_back_toward_the_measured_pose(toy_side):
    side, default = toy_side
    kp, kd = np.full(4, 6.0), np.full(4, 0.3)
    inside = default + np.array([0.1, 0.0, 0.0, 0.0])
    out = JointCommand(inside, kp, kd)
    assert side.guard(out, None, None, default, np.zeros(4)) is out and side.holds == 0  # inside: unchanged
    far = default + np.array([0.0, 0.0, -1.0, 0.0])  # the elbow straight: the tip 0.3 sin 0.3 + 0.1 = 0.189 m up
    assert not side.box.contains(side.chain.ee_pose(far)[0])
    held = side.guard(JointCommand(far, kp, kd), None, None, default, np.zeros(4))
    ee = side.chain.ee_pose(held.position)[0]
    assert side.box.contains(ee) and side.box.distance_outside(ee) == 0.0
    # on the segment from the measured pose to the target, as far as the box allows (to 1/1024 of the step)
    s = (held.position - default)[2] / -1.0
    assert 0.05 < s < 1.0 and np.allclose(held.position, default + s * (far - default))
    assert not side.box.contains(side.chain.ee_pose(default + (s + 2 / 1024) * (far - default))[0])
    assert side.holds == 1 and "outside the workspace box" in side.last_hold
    # moving fast: the torque limits keep the target ahead of the measured pose, so the segment starts at the
    # measured pose so clamped. Yaw at 2 rad/s with kp 1, kd 0.3, limit 0.5 N m: targets in [q + (0.6 - 0.5) / 1,
    # q + (0.6 + 0.5) / 1] = [0.1, 1.1]; a yaw target of 1.0 puts the tip at y = 0.258 sin 1 = 0.217 > 0.15
    kp_fast, torque, vel = np.array([1.0, 6.0, 4.0, 20.0]), np.array([0.5, 10.0, 10.0, 10.0]), np.array([2.0, 0, 0, 0])
    yawed = default + np.array([1.0, 0.0, 0.0, 0.0])
    fast = side.guard(JointCommand(yawed, kp_fast, kd), None, torque, default, vel)
    assert 0.1 <= fast.position[0] <= 1.1 and np.allclose(fast.position[1:], default[1:])
    assert fast.position[0] == pytest.approx(np.arcsin(0.15 / side.chain.ee_pose(default)[0][0]), abs=1e-3)
    # the measured pose's tip outside the box: nothing inside to aim at, the node faults
    assert side.guard(JointCommand(far, kp, kd), None, None, far, np.zeros(4)) is None
    assert side.last_hold.startswith("the measured pose (clamped to the joint and torque limits) puts the end")


def test_pose_commands_are_checked_normalized_and_clipped_into_the_target_box(toy_side):
    side, _ = toy_side
    frame = side.command_frame
    assert frame == "mount"  # the toy arm's base body: the bundle's pose_command.frame

    def target(position, orientation=(1.0, 0.0, 0.0, 0.0), frame_id=frame) -> m.PoseStamped:
        return m.PoseStamped(0.0, np.array(position, dtype=np.float64), np.array(orientation, dtype=np.float64),
                             frame_id)

    pose = side.parse_pose(target([-1.0, -1.0, 0.05], [0.0, 0.0, 1.02, 0.0]))
    np.testing.assert_allclose(pose, [0.15, -0.1, 0.05, 0.0, 0.0, 1.0, 0.0])
    for msg, message in ((target([np.nan] * 3), "pose command must be a finite position"),
                         (target([0.2, 0.0]), "pose command must be a finite position"),  # not on a wire
                         (target([0.2, 0, 0.05], [2.0, 0, 0, 0]), "not a unit quaternion"),
                         (target([0.2, 0, 0.05], frame_id="world"), f"in frame 'world'; .* in {frame!r}")):
        with pytest.raises(ValueError, match=message):
            side.parse_pose(msg)
    np.testing.assert_allclose(side.default_target[:3], side.chain.ee_pose(np.array([0.0, -0.3, 1.0, 0.01]))[0])


def test_a_bundle_with_a_pose_command_but_no_frame_is_refused(tmp_path):
    robot = load_arm(str(write_toy_arm(tmp_path)))
    model, _ = build_arm_model(robot)
    joints = list(robot.joint_names)
    meta = {"kinematic_chain": chain_from_model(model, robot.base_body, robot.ee_site, joints),
            "pose_command": {"workspace": [list(a) for a in robot.workspace]}}
    with pytest.raises(ValueError, match="no pose_command.frame; re-export"):
        ArmSide(meta, joints, np.array(robot.default_pose), 0.05)


# -- export and sim2sim ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def toy_bundle(tmp_path_factory) -> Path:
    """The reach task on the toy arm after 1 iteration, exported; the arm's files beside the run."""
    from ctrl_rl.app.export import export
    from ctrl_rl.app.train import train

    root = tmp_path_factory.mktemp("toy_arm_run")
    yaml = write_toy_arm(root / "arm")
    kwargs = [f"+task.kwargs.{k}={json.dumps(v).replace(' ', '')}" for k, v in REACH_KWARGS.items()
              if k != "rewards"]  # 1 iteration: the reward weights do not matter
    run = train(["task=reach", f"+task.kwargs.arm={yaml}", *kwargs, "env.num_envs=8", "algo.num_steps_per_env=8",
                 "runner.max_iterations=1", "runner.progress=false", f"runner.log_root={root / 'logs'}"])
    return Path(export(str(run), []))


def test_an_arm_bundle_carries_its_chain_and_a_relative_mjcf(toy_bundle, tmp_path):
    from ctrl_rl.deploy.commands import bundle_robot
    from ctrl_rl.deploy.runtime import OnnxPolicy

    meta = OnnxPolicy(toy_bundle).metadata
    mjcf = meta["arm_config"]["mjcf"]
    assert not Path(mjcf).is_absolute() and (toy_bundle.parent / mjcf).resolve().is_file(), mjcf
    assert [j["joint"] for link in meta["kinematic_chain"]["links"] for j in link["joints"]] == \
        ["yaw", "shoulder", "elbow"]
    assert load_arm(bundle_robot(meta, tmp_path, toy_bundle)).name == "toy_arm"
    # the run and the arm moved together: still found; the bundle alone: refused, naming --robot
    moved = tmp_path / "moved"
    shutil.copytree(toy_bundle.parents[5], moved)  # .../toy_arm_runN (arm/ and logs/)
    relative = toy_bundle.relative_to(toy_bundle.parents[5])
    assert load_arm(bundle_robot(meta, tmp_path, moved / relative)).mjcf_path().is_file()
    alone = tmp_path / "alone" / "exported" / "policy.onnx"
    alone.parent.mkdir(parents=True)
    shutil.copy(toy_bundle, alone)
    with pytest.raises(FileNotFoundError, match=r"toy_arm was trained on the MJCF .*toy_arm.xml, which is not on this "
                                                r"machine \(looked for .*\); pass its robot YAML with --robot"):
        bundle_robot(meta, tmp_path, alone)


@pytest.mark.parametrize("transport", ["dds", pytest.param("rclpy", marks=pytest.mark.skipif(
    not ROS_PY.exists(), reason="no .venv-ros: `bash scripts/setup_ros_env.sh`"))])
def test_sim2sim_runs_an_arm_bundle_and_judges_its_targets(toy_bundle, tmp_path, transport):
    """The node over the transport against the arm bridge: targets for every joint (arm and gripper), pose
    targets sent and judged, the verdict on the RESULT line and in the summary."""
    summary = tmp_path / "s.json"
    proc = run_sim2sim(toy_bundle, tmp_path, transport, 12, "arm", "--summary", str(summary),
                       "--set", "safety.stand_up_time=0.5")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    line = proc.stdout.strip().splitlines()[-1]
    assert line.startswith("RESULT sim2sim mode=policy "), line
    result = dict(kv.split("=") for kv in line.split()[2:])
    assert int(result["targets"]) >= 3 and re.fullmatch(r"[01](\.\d+)?", result["success_rate"]), result
    s = json.loads(summary.read_text())
    assert s["bridge"]["commands"] > 300 and s["bridge"]["rejected"] == 0, s["bridge"]  # 50 Hz, 4 joints each
    assert s["pose_command"] > 100 and s["fault"] is None and "workspace_holds" in s, s
