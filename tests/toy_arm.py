"""A tiny arm written by the tests (no mesh): a user's arm, from MJCF to arm YAML.

Three arm joints (a base yaw and two pitch joints, 0.3 m of reach), a slide finger the gripper motor
drives and a second finger coupled to it by an equality constraint; its own actuator and sensor, which
training replaces. Light links, so PD alone nearly holds the default pose against gravity.
"""

from __future__ import annotations

from pathlib import Path

TOY_ARM_MJCF = """
<mujoco model="toy_arm">
  <compiler angle="radian"/>
  <option timestep="0.002"/>
  <default>
    <joint type="hinge" axis="0 1 0" range="-2.5 2.5" damping="0.02"/>
    <geom type="capsule" size="0.015" density="300" contype="0" conaffinity="0"/>
  </default>
  <worldbody>
    <body name="mount">
      <geom name="pedestal" type="cylinder" size="0.03 0.05" pos="0 0 0.05"/>
      <body name="turret" pos="0 0 0.1">
        <joint name="yaw" axis="0 0 1"/>
        <geom type="sphere" size="0.03"/>
        <body name="upper" pos="0 0 0">
          <joint name="shoulder"/>
          <geom fromto="0 0 0 0.15 0 0"/>
          <body name="fore" pos="0.15 0 0">
            <joint name="elbow"/>
            <geom fromto="0 0 0 0.15 0 0"/>
            <site name="tip" pos="0.15 0 0"/>
            <body name="finger_a" pos="0.15 0.01 0">
              <joint name="finger_a" type="slide" axis="0 1 0" range="0 0.02"/>
              <geom name="finger_a" type="box" size="0.005 0.002 0.01" mass="0.02" contype="1" conaffinity="1"/>
            </body>
            <body name="finger_b" pos="0.15 -0.01 0">
              <joint name="finger_b" type="slide" axis="0 1 0" range="-0.02 0"/>
              <geom name="finger_b" type="box" size="0.005 0.002 0.01" mass="0.02"/>
            </body>
          </body>
        </body>
      </body>
    </body>
  </worldbody>
  <equality><joint joint1="finger_a" joint2="finger_b" polycoef="0 -1 0 0 0"/></equality>
  <actuator><motor joint="yaw" ctrlrange="-1 1" forcelimited="true" forcerange="-4 4"/></actuator>
  <sensor><jointpos name="own_yaw" joint="yaw"/></sensor>
</mujoco>
"""

TOY_ARM_YAML = """
name: toy_arm
mjcf: toy_arm.xml
base_body: mount
arm_joints: [yaw, shoulder, elbow]
gripper_joints: [finger_a]
passive_pose: {finger_b: -0.01}
ee_site: tip
default_pose: [0.0, -0.3, 1.0, 0.01]
kp: [6.0, 6.0, 4.0, 20.0]
kd: [0.3, 0.3, 0.2, 1.0]
torque_limits: [4.0, 4.0, 3.0, 5.0]
armature: [0.01, 0.01, 0.01, 0.001]
action_scale: 0.5
collide: [finger_a]
workspace: [[0.15, 0.25], [-0.1, 0.1], [0.03, 0.12]]
"""
"""At the default pose the tip is at (0.258, 0, 0.048) m from the mount, its frame pitched 0.7 rad."""

REACH_KWARGS = {"target_roll": (0.0, 0.0), "target_pitch": (0.0, 0.0), "target_yaw": (0.0, 0.0),
                "success_angle": 3.2, "rewards": {"orientation_error": 0.0, "orientation_tracking": 0.0}}
"""The reach task on the toy arm, by position alone: three joints cannot also set the tip's orientation."""


def write_toy_arm(folder: Path, yaml_text: str = TOY_ARM_YAML) -> Path:
    """Write ``toy_arm.xml`` and ``toy_arm.yaml`` (``yaml_text``) into ``folder``; returns the YAML's path."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "toy_arm.xml").write_text(TOY_ARM_MJCF)
    (folder / "toy_arm.yaml").write_text(yaml_text)
    return folder / "toy_arm.yaml"
