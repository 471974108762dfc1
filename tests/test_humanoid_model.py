"""The ctrl_humanoid robot (robots/ctrl_humanoid.yaml + assets/humanoid.xml) and the mirror map."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from ctrl_rl.robots.robot import RobotConfig, build_model, joint_indices, load_robot

NAME = "ctrl_humanoid"

LINK_MASS = {  # body: (min, max) kg, for a G1-sized humanoid
    "pelvis": (3.0, 5.0),
    "torso_link": (6.0, 11.0),
    "left_hip_yaw_link": (2.0, 4.0),  # thigh
    "left_knee_link": (1.2, 2.5),  # shank
    "left_ankle_roll_link": (0.4, 1.0),  # foot
    "left_shoulder_yaw_link": (0.5, 1.5),  # upper arm
    "left_elbow_link": (0.5, 1.2),  # forearm and hand
}


@pytest.fixture(scope="module")
def robot() -> RobotConfig:
    return load_robot(NAME)


@pytest.fixture(scope="module")
def built(robot):
    return build_model(robot)


def _swap_sides(name: str, robot: RobotConfig) -> str:
    """The body or joint name of the other side."""
    pairs = [("left_", "right_")] if robot.name == NAME else [("FR", "FL"), ("RR", "RL")]
    for a, b in pairs:
        if a in name:
            return name.replace(a, b)
        if b in name:
            return name.replace(b, a)
    return name


def test_masses_and_sizes(robot, built):
    model, _ = built
    assert 30.0 <= model.body_mass.sum() <= 40.0
    for body, (lo, hi) in LINK_MASS.items():
        for side in {body, _swap_sides(body, robot)}:
            assert lo <= model.body(side).mass[0] <= hi, side
    assert (model.body_inertia[1:] > 0).all()
    data = mujoco.MjData(model)
    mujoco.mj_kinematics(model, data)  # qpos0: straight legs
    z = {b: data.xpos[model.body(b).id][2] for b in ("left_hip_pitch_link", "left_knee_link", "left_ankle_pitch_link")}
    assert 0.30 <= z["left_hip_pitch_link"] - z["left_knee_link"] <= 0.33  # thigh
    assert 0.30 <= z["left_knee_link"] - z["left_ankle_pitch_link"] <= 0.33  # shank
    # standing in the default pose: ~1.3 m tall
    qadr, _ = joint_indices(model, robot)
    data.qpos[2] = robot.init_height
    data.qpos[qadr] = robot.default_pose
    mujoco.mj_kinematics(model, data)
    top = data.geom_xpos[model.geom("head").id][2] + model.geom("head").size[0]
    assert 1.25 <= top <= 1.40, top


def test_joints_gains_and_canonical_sensors(robot, built):
    model, layout = built
    assert robot.num_joints == 21 and model.nu == 21
    raw = mujoco.MjModel.from_xml_path(str(robot.mjcf_path()))
    assert raw.nu == 0 and raw.nsensor == 0, "the MJCF must leave actuators and sensors to build_model"
    for i, name in enumerate(robot.joint_names):
        joint = model.joint(name)
        lo, hi = joint.range
        assert joint.limited[0] and lo < hi, name
        assert lo <= robot.default_pose[i] <= hi, name
        assert robot.kp[i] > 0 and robot.kd[i] > 0 and robot.torque_limits[i] > 0, name
    np.testing.assert_allclose(model.actuator_gainprm[:, 0], robot.kp)
    np.testing.assert_allclose(-model.actuator_biasprm[:, 2], robot.kd)
    np.testing.assert_allclose(model.actuator_forcerange[:, 1], robot.torque_limits)
    for sensor in ("imu_quat", "imu_gyro", "imu_acc", "base_lin_vel", "base_pos", "base_contact",
                   "left_foot_contact", "right_foot_contact", "left_foot_pos", "right_foot_pos",
                   "left_knee_joint_pos", "waist_yaw_joint_vel", "right_elbow_joint_torque"):
        assert sensor in layout, sensor
    colliding = {model.geom(i).name for i in range(model.ngeom) if model.geom_contype[i] or model.geom_conaffinity[i]}
    assert colliding == {"floor", "trunk_collision", "left_foot", "right_foot"}
    assert model.opt.timestep == 0.005


def test_default_pose_stands_on_pd_alone(robot, built):
    """No policy: PD targets = default pose hold the robot up for 2 s at its config height."""
    model, layout = built
    data = mujoco.MjData(model)
    qadr, _ = joint_indices(model, robot)
    data.qpos[2] = robot.init_height
    data.qpos[qadr] = robot.default_pose
    data.ctrl[:] = robot.default_pose
    for _ in range(400):
        mujoco.mj_step(model, data)
        assert abs(data.qpos[2] - robot.init_height) < 0.03, data.qpos[2]
        up = data.xmat[model.body(robot.base_body).id].reshape(3, 3)[:, 2]
        assert np.arccos(np.clip(up[2], -1.0, 1.0)) < 0.1
    for foot in robot.foot_geoms:
        assert data.sensordata[layout[f"{foot}_contact"]][0] > 0, foot
    assert data.sensordata[layout["base_contact"]][0] == 0


@pytest.mark.parametrize("name", [NAME, "ctrl_quad"])
def test_mirror_map(name):
    robot = load_robot(name)
    perm, sign = robot.mirror_map()
    q = np.random.default_rng(0).normal(size=(5, robot.num_joints))
    np.testing.assert_array_equal(sign * (sign * q[:, perm])[:, perm], q)  # an involution
    np.testing.assert_allclose(sign * np.array(robot.default_pose)[perm], robot.default_pose)
    for key in ("kp", "kd", "torque_limits"):
        np.testing.assert_array_equal(np.array(getattr(robot, key))[perm], getattr(robot, key))
    model, _ = build_model(robot)
    ranges = np.array([model.joint(j).range for j in robot.joint_names])
    mirrored = np.sort(sign[:, None] * ranges[perm], axis=1)  # range of mirror(j) = sign * range of j
    np.testing.assert_allclose(mirrored, ranges)
    # the map is the geometric mirror: a mirrored pose puts each body where its twin was, reflected in y
    data = mujoco.MjData(model)
    qadr, _ = joint_indices(model, robot)
    pos = []
    for joints in (q[0] * 0.3, sign * (q[0] * 0.3)[perm]):
        data.qpos[qadr] = joints
        mujoco.mj_kinematics(model, data)
        pos.append(data.xpos.copy())
    for b in range(1, model.nbody):
        twin = model.body(_swap_sides(model.body(b).name, robot)).id
        np.testing.assert_allclose(pos[1][b], pos[0][twin] * [1, -1, 1], atol=1e-9, err_msg=model.body(b).name)


def _write(tmp_path, mirror: str) -> str:
    path = tmp_path / "robot.yaml"
    path.write_text("name: tiny\nmjcf: none.xml\nbase_body: base\njoint_names: [l_hip, r_hip, waist]\n"
                    "default_pose: [0.1, 0.1, 0.0]\nkp: [10.0]\nkd: [1.0]\ntorque_limits: [5.0]\n" + mirror)
    return str(path)


def test_mirror_validation(tmp_path):
    ok = RobotConfig.from_yaml(_write(tmp_path, "mirror: [[l_hip, r_hip, 1], [waist, waist, -1]]\n"))
    perm, sign = ok.mirror_map()
    assert perm.tolist() == [1, 0, 2] and sign.tolist() == [1, 1, -1]
    with pytest.raises(ValueError, match="declares no mirror"):
        RobotConfig.from_yaml(_write(tmp_path, "")).mirror_map()
    bad = {
        "mirror: [[l_hip, knee, 1], [waist, waist, -1]]": r"unknown joint\(s\) \['knee'\]",
        "mirror: [[l_hip, r_hip, 1], [l_hip, waist, -1]]": r"\['l_hip'\] more than once",
        "mirror: [[l_hip, r_hip, 2], [waist, waist, -1]]": "sign must be 1 or -1",
        "mirror: [[l_hip, r_hip, 1]]": r"misses joint\(s\) \['waist'\]",
        "mirror: [[l_hip, r_hip]]": r"is not \[joint_a, joint_b, sign\]",
    }
    for text, message in bad.items():
        with pytest.raises(ValueError, match=f"mirror.*{message}"):
            RobotConfig.from_yaml(_write(tmp_path, text + "\n"))
