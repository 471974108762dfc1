"""Arms as robots (``ctrl_rl.robots.arm``): an arm YAML loads under the legged robots' rules (own sensors
replaced and said, actuators from the YAML, collisions and armature applied, a floor added), reads torque
limits from the MJCF where the YAML gives none, and the YAM from mjlab's wheel loads with mjlab's gains."""

from __future__ import annotations

import logging
import math
import re

import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco")
from toy_arm import TOY_ARM_YAML, write_toy_arm  # noqa: E402

from ctrl_rl.robots.arm import ArmRobot, build_arm_model, default_ee_pose, load_arm, rest_qpos  # noqa: E402
from ctrl_rl.robots.packages import RobotModelNotFetched, resolve  # noqa: E402


def test_an_arm_yaml_expands_per_joint_values_and_refuses_wrong_keys(tmp_path):
    arm = load_arm(str(write_toy_arm(tmp_path)))
    assert arm.joint_names == ("yaw", "shoulder", "elbow", "finger_a") and arm.num_joints == 4
    assert arm.action_scales == (0.5,) * 4 and arm.passive_pose == {"finger_b": -0.01}
    assert arm.workspace == ((0.15, 0.25), (-0.1, 0.1), (0.03, 0.12))
    one_kp = write_toy_arm(tmp_path / "one", TOY_ARM_YAML.replace("kp: [6.0, 6.0, 4.0, 20.0]", "kp: 7"))
    assert load_arm(str(one_kp)).kp == (7.0,) * 4  # one value for every joint
    for bad, words in (("ee_site: tip", "missing key(s) ['ee_site']"), ("kd: [0.3, 0.3, 0.2, 1.0]", "kd has 2"),
                       ("collide: [finger_a]", "unknown key(s) ['colide']")):
        fix = {"ee_site: tip": "", "kd: [0.3, 0.3, 0.2, 1.0]": "kd: [0.3, 0.3]",
               "collide: [finger_a]": "colide: [finger_a]"}[bad]
        path = write_toy_arm(tmp_path / str(abs(hash(bad))), TOY_ARM_YAML.replace(bad, fix))
        with pytest.raises(ValueError, match=re.escape(words)):
            load_arm(str(path))


def test_torque_limits_come_from_the_mjcf_where_the_yaml_has_none(tmp_path):
    """The toy arm's own motor on ``yaw`` is force-limited at 4 N m; the other joints have no limit in the
    MJCF, so the YAML must give them (the error names the joints and the key)."""
    text = TOY_ARM_YAML.replace("torque_limits: [4.0, 4.0, 3.0, 5.0]\n", "")
    with pytest.raises(ValueError, match=r"\['shoulder', 'elbow', 'finger_a'\].*set torque_limits"):
        load_arm(str(write_toy_arm(tmp_path, text)))
    xml = (tmp_path / "toy_arm.xml").read_text()
    for joint, limit in (("shoulder", 2.5), ("elbow", 1.5), ("finger_a", 3.0)):  # the joints' actuatorfrcrange
        xml = xml.replace(f'<joint name="{joint}"', f'<joint name="{joint}" actuatorfrcrange="-{limit} {limit}"')
    (tmp_path / "toy_arm.xml").write_text(xml)
    assert load_arm(str(tmp_path / "toy_arm.yaml")).torque_limits == (4.0, 2.5, 1.5, 3.0)


def test_the_training_model_follows_the_legged_loading_rules(tmp_path, caplog):
    arm = load_arm(str(write_toy_arm(tmp_path)))
    with caplog.at_level(logging.INFO):
        model, layout = build_arm_model(arm)
    assert "sensors (own_yaw) are left out" in caplog.text and "added a floor" in caplog.text
    assert model.nu == 4 and [model.actuator(i).name for i in range(4)] == [f"{j}_pd" for j in arm.joint_names]
    np.testing.assert_allclose(model.actuator_gainprm[:, 0], arm.kp)  # the YAML's PD gains ...
    np.testing.assert_allclose(-model.actuator_biasprm[:, 2], arm.kd)
    np.testing.assert_allclose(model.actuator_forcerange[:, 1], arm.torque_limits)  # ... limits ...
    np.testing.assert_allclose(model.actuator_ctrlrange, model.jnt_range[:4])  # ... targets inside the joint range
    np.testing.assert_allclose(model.dof_armature[:4], arm.armature)
    assert "own_yaw" not in layout and {"ee_pos", "ee_quat", "yaw_pos", "finger_a_torque"} <= set(layout)
    colliding = {model.geom(g).name for g in range(model.ngeom) if model.geom_contype[g] or model.geom_conaffinity[g]}
    assert colliding == {"finger_a", "ctrl_rl_floor"}  # collide: [finger_a], and the table
    assert model.neq == 1  # the coupled finger's equality stays


def test_the_end_effector_pose_is_in_the_base_frame(tmp_path):
    """Moved and turned mount: ``ee_pos``/``ee_quat`` stay the tip's pose relative to it. At the default pose
    (shoulder -0.3 rad, elbow 1.0) the tip is 0.15 (cos 0.3, sin 0.3) + 0.15 (cos 0.7, -sin 0.7) from the
    shoulder, 0.1 above the mount, pitched down by 0.7 rad about y."""
    path = write_toy_arm(tmp_path)
    xml = (tmp_path / "toy_arm.xml").read_text().replace('<body name="mount">',
                                                         '<body name="mount" pos="1 2 0.5" euler="0 0 0.7">')
    (tmp_path / "toy_arm.xml").write_text(xml)
    arm = load_arm(str(path))
    model, layout = build_arm_model(arm)
    pos, quat = default_ee_pose(model, layout, arm)
    x = 0.15 * (math.cos(0.3) + math.cos(0.7))
    z = 0.1 + 0.15 * (math.sin(0.3) - math.sin(0.7))
    np.testing.assert_allclose(pos, [x, 0.0, z], atol=1e-9)
    np.testing.assert_allclose(np.abs(quat), [math.cos(0.35), 0.0, math.sin(0.35), 0.0], atol=1e-9)
    qpos = rest_qpos(model, arm)
    assert qpos[model.joint("finger_b").qposadr[0]] == -0.01 and qpos[model.joint("elbow").qposadr[0]] == 1.0


def _fetched_yam() -> ArmRobot:
    arm = load_arm("i2rt_yam")
    try:
        resolve(arm.mjcf)
    except RobotModelNotFetched as exc:
        pytest.fail(f"{exc} (scripts/test.sh fetches it)")
    return arm


def test_the_yam_loads_from_mjlabs_wheel_with_mjlabs_gains():
    """kp = I (2 pi 2 Hz)^2 and kd = 2 x 2 x I (2 pi 2 Hz) on i2rt's effective inertias (the gripper at 1 Hz);
    28 / 10 N m motors; the visual meshes left out; the grasp site 0.255 m ahead at the home pose."""
    arm = _fetched_yam()
    inertia = np.array([0.123153, 0.277411, 0.232763, 0.030154, 0.009126, 0.002868, 2.781624])
    omega = 2 * math.pi * np.array([2.0] * 6 + [1.0])
    np.testing.assert_allclose(arm.kp, inertia * omega ** 2, rtol=1e-4)
    np.testing.assert_allclose(arm.kd, 4 * inertia * omega, rtol=1e-4)
    assert arm.torque_limits[:6] == (28.0,) * 3 + (10.0,) * 3
    model, layout = build_arm_model(arm)
    assert model.nmesh == 0 and model.nu == 7 and model.neq == 1
    pos, _ = default_ee_pose(model, layout, arm)
    np.testing.assert_allclose(pos, [0.2553, 0.0, 0.1918], atol=1e-3)
    assert build_arm_model(arm, visuals=True)[0].nmesh > 0  # rendering keeps them



def test_an_arm_given_to_a_legged_task_is_named_as_an_arm(tmp_path):
    """``robot=<an arm>`` on a velocity task: one line that says it is an arm and how arms run, not a list
    of unknown keys."""
    from ctrl_rl.robots.robot import load_robot

    yaml_path = write_toy_arm(tmp_path)
    with pytest.raises(ValueError, match=r"an arm's YAML .*task=reach task\.kwargs\.arm="):
        load_robot(str(yaml_path))
