"""A quadruped written as MuJoCo Menagerie writes its robots (the Go2's layout), for the tests to load unedited.

What such an MJCF carries that a training model must cope with: its own ``<sensor>`` block (named
``imu_quat`` like ours), ``<option cone="elliptic" impratio="100"/>``, joint damping, armature and
frictionloss from default classes, collision geoms without names under a ``collision`` class, visual
OBJ meshes, motor actuators, a keyframe with ``qpos`` and ``ctrl``, a camera, a light, and an
``<include>`` of a second file (its assets).
"""

from __future__ import annotations

import json
from pathlib import Path

LEGS = {"FL": (0.1934, 0.0465, 1), "FR": (0.1934, -0.0465, -1), "RL": (-0.1934, 0.0465, 1),
        "RR": (-0.1934, -0.0465, -1)}
JOINTS = [f"{leg}_{part}_joint" for leg in LEGS for part in ("hip", "thigh", "calf")]
DEFAULT_POSE = [0.0, 0.9, -1.8] * 4

LEG = """
      <body name="{leg}_hip" pos="{x} {y} 0">
        <inertial pos="-0.0054 {iy} 0" mass="0.678" diaginertia="0.00088 0.0006 0.00048"/>
        <joint name="{leg}_hip_joint" class="abduction"/>
        <geom mesh="link" class="visual" material="dark"/>
        <geom size="0.046 0.02" pos="0 {hy} 0" quat="1 1 0 0" type="cylinder" class="collision"/>
        <body name="{leg}_thigh" pos="0 {ty} 0">
          <inertial pos="-0.00374 {iy} -0.0327" mass="1.152" diaginertia="0.0059 0.0058 0.00088"/>
          <joint name="{leg}_thigh_joint" class="hip"/>
          <geom mesh="link" class="visual" material="dark"/>
          <geom size="0.1065 0.01225 0.017" pos="0 0 -0.1065" quat="0.7071 0 0.7071 0" type="box" class="collision"/>
          <body name="{leg}_calf" pos="0 0 -0.213">
            <inertial pos="0.0063 0 -0.1414" mass="0.241" diaginertia="0.0015 0.0015 0.00005"/>
            <joint name="{leg}_calf_joint" class="knee"/>
            <geom mesh="link" class="visual" material="dark"/>
            <geom size="0.012 0.06" pos="0.008 0 -0.06" quat="0.9945 0 -0.1048 0" type="cylinder" class="collision"/>
            <geom name="{leg}" class="foot"/>
          </body>
        </body>
      </body>"""

MJCF = """<mujoco model="menagerie_quad">
  <compiler angle="radian" meshdir="assets" autolimits="true"/>
  <option cone="elliptic" impratio="100"/>
  <include file="menagerie_quad_assets.xml"/>
  <default>
    <default class="quad">
      <geom friction="0.6" margin="0.001" condim="1"/>
      <joint axis="0 1 0" damping="2" armature="0.01" frictionloss="0.2"/>
      <motor ctrlrange="-23.7 23.7"/>
      <default class="abduction"><joint axis="1 0 0" range="-1.0472 1.0472"/></default>
      <default class="hip"><joint range="-1.5708 3.4907"/></default>
      <default class="knee"><joint range="-2.7227 -0.83776"/><motor ctrlrange="-45.43 45.43"/></default>
      <default class="visual"><geom type="mesh" contype="0" conaffinity="0" group="2"/></default>
      <default class="collision">
        <geom group="3"/>
        <default class="foot">
          <geom size="0.022" pos="-0.002 0 -0.213" priority="1" condim="6" friction="0.8 0.02 0.01"/>
        </default>
      </default>
    </default>
  </default>
  <worldbody>
    <light name="top" pos="0 0 3" dir="0 0 -1"/>
    <body name="base" pos="0 0 0.445" childclass="quad">
      <camera name="tracking" pos="0.85 -1.3 0.32" xyaxes="0.866 0.5 0 -0.171 0.296 0.94" mode="trackcom"/>
      <inertial pos="0.021 0 -0.005" mass="6.921" diaginertia="0.107 0.098 0.0245"/>
      <freejoint/>
      <geom mesh="trunk" class="visual" material="dark"/>
      <geom size="0.1881 0.04675 0.057" type="box" class="collision"/>
      <site name="imu" pos="-0.02557 0 0.04232"/>""" + "".join(
    LEG.format(leg=leg, x=x, y=y, iy=-0.002 * s, hy=0.08 * s, ty=0.0955 * s) for leg, (x, y, s) in LEGS.items()) + """
    </body>
  </worldbody>
  <actuator>
{actuators}
  </actuator>
  <sensor>
    <jointpos name="FL_hip_pos" joint="FL_hip_joint"/>
    <framequat name="imu_quat" objtype="site" objname="imu"/>
    <gyro name="imu_gyro" site="imu"/>
    <accelerometer name="imu_acc" site="imu"/>
    <actuatorfrc name="FL_calf_torque" actuator="FL_calf"/>
  </sensor>
  <keyframe>
    <key name="home" qpos="0 0 0.27 1 0 0 0 {pose}" ctrl="{ctrl}"/>
  </keyframe>
</mujoco>
"""

ASSETS = """<mujocoinclude>
  <asset>
    <material name="dark" rgba="0.2 0.2 0.2 1"/>
    <mesh name="trunk" file="box.obj" scale="0.19 0.05 0.06"/>
    <mesh name="link" file="box.obj" scale="0.02 0.02 0.1"/>
  </asset>
</mujocoinclude>
"""

BOX_OBJ = "".join(f"v {x} {y} {z}\n" for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)) + "".join(
    f"f {a} {b} {c}\n" for a, b, c in ((1, 3, 2), (2, 3, 4), (5, 6, 7), (6, 8, 7), (1, 2, 5), (2, 6, 5),
                                       (3, 7, 4), (4, 7, 8), (1, 5, 3), (3, 5, 7), (2, 4, 6), (4, 8, 6)))
"""A unit box (vertices at +-1), the visual mesh every body shows."""

YAML = """name: menagerie_quad
mjcf: menagerie_quad.xml
base_body: base
joint_names: {joints}
default_pose: {pose}
kp: [20.0]
kd: [0.5]
torque_limits: [23.7, 23.7, 45.43]
foot_geoms: [FL, FR, RL, RR]
imu_site: imu
collide: [class:foot, body:base]
{extra}"""


def write_menagerie_robot(folder: Path, physics: str | None = None, extra_actuator: bool = False) -> Path:
    """Write the MJCF (``menagerie_quad.xml``, its included assets, ``assets/box.obj``) and its robot YAML into
    ``folder``; returns the YAML's path. ``physics``: the YAML's ``physics`` key (left out when None);
    ``extra_actuator``: one motor more than the YAML actuates, so the keyframe's ``ctrl`` has 13 values."""
    (folder / "assets").mkdir(parents=True, exist_ok=True)
    names = JOINTS + (["FL_hip_joint"] if extra_actuator else [])
    motors = [f'    <motor class="{("abduction", "hip", "knee")[i % 3]}" name="{j.removesuffix("_joint")}" '
              f'joint="{j}"/>' for i, j in enumerate(JOINTS)]
    if extra_actuator:
        motors.append('    <motor name="spare" joint="FL_hip_joint"/>')
    pose = " ".join(map(str, DEFAULT_POSE))
    ctrl = " ".join(map(str, DEFAULT_POSE + [0.0] * (len(names) - len(JOINTS))))
    (folder / "menagerie_quad.xml").write_text(MJCF.format(actuators="\n".join(motors), pose=pose, ctrl=ctrl))
    (folder / "menagerie_quad_assets.xml").write_text(ASSETS)
    (folder / "assets" / "box.obj").write_text(BOX_OBJ)
    extra = f"physics: {physics}\n" if physics else ""
    yaml = folder / "menagerie_quad.yaml"
    yaml.write_text(YAML.format(joints=json.dumps(JOINTS), pose=json.dumps(DEFAULT_POSE), extra=extra))
    return yaml


def model_files(folder: Path) -> dict[str, bytes]:
    """Every file of the robot's model, by path: the tests check none changed."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and p.suffix in (".xml", ".obj")}
