"""A toy quadruped written by the tests (8 joints, sphere feet): a user's robot, from MJCF to YAML."""

from __future__ import annotations

import json
from pathlib import Path

LEG = """
      <body name="{leg}" pos="{x} {y} 0"><joint name="{leg}_hip"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.1" size="0.015"/>
        <body pos="0 0 -0.1"><joint name="{leg}_knee"/>
          <geom type="capsule" fromto="0 0 0 0 0 -0.1" size="0.012"/>
          <geom name="{leg}_foot" type="sphere" pos="0 0 -0.1" size="0.02" {{collide}}/>
        </body>
      </body>"""
LEGS = {"FR": (0.12, -0.08), "FL": (0.12, 0.08), "RR": (-0.12, -0.08), "RL": (-0.12, 0.08)}
TOY_MJCF = """
<mujoco model="toy_quad">
  {option}
  <default>
    <geom contype="0" conaffinity="0" density="400"/>
    <joint damping="0.05" armature="0.01" axis="0 1 0" range="-1.5 1.5"/>
  </default>
  <worldbody>
    {floor}
    <body name="trunk" pos="0 0 0.25">
      <freejoint name="root"/>
      <geom type="box" size="0.15 0.08 0.03" {collide}/>""" + "".join(
    LEG.format(leg=leg, x=x, y=y) for leg, (x, y) in LEGS.items()) + """
    </body>
  </worldbody>
</mujoco>
"""

JOINTS = ["FR_hip", "FR_knee", "FL_hip", "FL_knee", "RR_hip", "RR_knee", "RL_hip", "RL_knee"]
TOY_YAML = f"""
name: toy_quad
mjcf: toy_quad.xml
base_body: trunk
joint_names: {json.dumps(JOINTS)}
default_pose: [0.3, -0.6, 0.3, -0.6, 0.3, -0.6, 0.3, -0.6]
kp: [8.0]
kd: [0.2]
torque_limits: [5.0]
action_scale: 0.25
foot_geoms: [FR_foot, FL_foot, RR_foot, RL_foot]
{{init_height}}"""


def write_toy_robot(folder: Path, floor: bool = True, timestep: bool = True, init_height: bool = True,
                    collide: bool = True) -> Path:
    """Write ``toy_quad.xml`` and ``toy_quad.yaml`` into ``folder``; returns the YAML's path. Each
    flag off leaves out what a robot owner's MJCF often lacks: a floor, a timestep, the height."""
    folder.mkdir(parents=True, exist_ok=True)
    contacts = 'contype="1" conaffinity="1"' if collide else 'contype="0" conaffinity="0"'
    xml = (TOY_MJCF.replace("{floor}", '<geom name="floor" type="plane" size="0 0 0.05" contype="1" conaffinity="1"/>'
                            if floor else "")
           .replace("{option}", '<option timestep="0.005" integrator="implicitfast"/>' if timestep else "")
           .replace("{collide}", contacts))
    (folder / "toy_quad.xml").write_text(xml)
    height = "init_height: 0.21\n" if init_height else ""
    (folder / "toy_quad.yaml").write_text(TOY_YAML.replace("{init_height}", height))
    return folder / "toy_quad.yaml"
