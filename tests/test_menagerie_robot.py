"""A robot owner's MJCF as MuJoCo Menagerie publishes it (``tests/menagerie_robot.py``) loads unedited: its own
sensors, actuators, keyframe, camera, light, include and OBJ meshes; its physics options give way to the task's
profile, and say so, unless its YAML keeps them; ``collide`` reaches its unnamed geoms by class and body; the
robot's derived size is printed and bundled; a bundle whose MJCF is gone names ``--robot``."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys

import mujoco
import onnx
import pytest
from menagerie_robot import DEFAULT_POSE, JOINTS, model_files, write_menagerie_robot

from ctrl_rl.robots.mjcf_edits import filter_collisions
from ctrl_rl.robots.robot import build_model, derived_values, load_robot
from ctrl_rl.tasks.locomotion.velocity_config import VelocityTaskConfig

REPLACED = ("robot menagerie_quad: the task's physics profile replaces its MJCF's elliptic cone with impratio 100 -> "
            "pyramidal cone, impratio 1: an elliptic cone with impratio 100 costs about 2x per physics step")
KEPT = "Kept from the MJCF: joint frictionloss, damping and armature, contact geometry. Set `physics: mjcf`"


def test_the_mjcf_loads_unedited_with_its_sensors_left_out_and_its_keyframe_fitted(tmp_path, caplog):
    robot = load_robot(str(write_menagerie_robot(tmp_path)))
    files = model_files(tmp_path)
    with caplog.at_level(logging.INFO):
        model, layout = build_model(robot)
        build_model(robot, visuals=True)  # rendering's model: the OBJ meshes through the include's meshdir
    names = {model.sensor(i).name for i in range(model.nsensor)}
    assert {"imu_quat", "imu_gyro", "imu_acc", "FL_calf_joint_torque"} <= names and "FL_hip_pos" not in names
    assert layout["imu_quat"] == slice(0, 4)  # ours, at the IMU site the YAML names
    assert caplog.text.count("robot menagerie_quad: its MJCF's 5 sensors (FL_hip_pos, imu_quat, imu_gyro, imu_acc, "
                             "FL_calf_torque) are left out of the training model") == 1
    assert model.nu == 12 and model.nkey == 1
    assert model.key_qpos[0][7:].tolist() == DEFAULT_POSE and model.key_ctrl[0].tolist() == DEFAULT_POSE
    dofs = [model.jnt_dofadr[model.joint(j).id] for j in JOINTS]
    assert set(model.dof_frictionloss[dofs]) == {0.2} and set(model.dof_damping[dofs]) == {2.0}  # the robot's own
    assert set(model.dof_armature[dofs]) == {0.01}
    assert model_files(tmp_path) == files  # nothing written next to the owner's model


def test_a_keyframe_for_more_actuators_than_the_yaml_drives_still_compiles(tmp_path):
    robot = load_robot(str(write_menagerie_robot(tmp_path, extra_actuator=True)))
    assert mujoco.MjModel.from_xml_path(robot.mjcf_path().as_posix()).key_ctrl.shape == (1, 13)
    model, _ = build_model(robot)
    assert model.nu == 12 and model.key_ctrl[0].tolist() == DEFAULT_POSE


def test_the_task_profile_replaces_cone_and_impratio_and_says_so_once_naming_the_robot(tmp_path, caplog):
    robot = load_robot(str(write_menagerie_robot(tmp_path)))
    cfg = VelocityTaskConfig(robot=str(robot.source))
    with caplog.at_level(logging.INFO):
        for _ in range(2):  # a run builds the model more than once: the news comes once
            model = cfg.apply_physics(build_model(robot)[0], robot)
    assert model.opt.cone == mujoco.mjtCone.mjCONE_PYRAMIDAL and model.opt.impratio == 1.0
    assert (model.opt.iterations, model.opt.ls_iterations, model.opt.timestep) == (10, 20, 0.005)
    assert caplog.text.count(REPLACED) == 1 and KEPT in caplog.text
    assert caplog.text.count("robot menagerie_quad: the MJCF's timestep 0.002 s is replaced by "
                             "task.kwargs.physics_dt=0.005 s") == 1
    assert "the task's solver budget replaces its MJCF's: solver iterations 100 -> 10, ls_iterations 50 -> 20" \
        in caplog.text
    dofs = [model.jnt_dofadr[model.joint(j).id] for j in JOINTS]
    assert set(model.dof_frictionloss[dofs]) == {0.2} and set(model.dof_damping[dofs]) == {2.0}


def test_physics_mjcf_keeps_the_mjcf_options_but_not_its_timestep(tmp_path, caplog):
    robot = load_robot(str(write_menagerie_robot(tmp_path, physics="mjcf")))
    assert robot.physics == "mjcf" and robot.bundle_dict()["physics"] == "mjcf"
    with caplog.at_level(logging.INFO):
        model = VelocityTaskConfig().apply_physics(build_model(robot)[0], robot)
    assert model.opt.cone == mujoco.mjtCone.mjCONE_ELLIPTIC and model.opt.impratio == 100.0
    assert (model.opt.iterations, model.opt.ls_iterations, model.opt.timestep) == (100, 50, 0.005)
    assert "robot menagerie_quad: physics: mjcf keeps its MJCF's options: elliptic cone, impratio 100, solver " \
           "iterations 100, ls_iterations 50" in caplog.text
    assert REPLACED not in caplog.text


def test_the_physics_key_names_its_choices(tmp_path):
    with pytest.raises(ValueError, match=r"physics must be one of \['task', 'mjcf'\].*got 'fast'"):
        load_robot(str(write_menagerie_robot(tmp_path, physics="fast")))


def test_collide_selects_unnamed_geoms_by_class_and_body(tmp_path):
    robot = load_robot(str(write_menagerie_robot(tmp_path)))

    def colliding(collide: list[str]) -> list[str]:
        spec = mujoco.MjSpec.from_file(str(robot.mjcf_path()))
        return sorted(filter_collisions(spec, "base", collide, robot.foot_geoms, robot.name))

    assert colliding(["class:foot", "body:base"]) == ["FL", "FR", "RL", "RR", "base/box"]  # the YAML's: no mesh
    limbs = colliding(["class:collision"])  # a geom's own class: the feet are class `foot`, inside `collision`
    assert len(limbs) == 1 + 4 * 3 and not {"FL", "FR", "RL", "RR"} & set(limbs)
    assert colliding(["class:collision", "feet"]) == sorted(limbs + ["FL", "FR", "RL", "RR"])
    assert colliding(["body:.*_calf"]) == sorted(["FL", "FR", "RL", "RR"] + ["FL_calf/cylinder", "FR_calf/cylinder",
                                                                            "RL_calf/cylinder", "RR_calf/cylinder"])
    spellings = "an entry is one of <geom name or regex>, feet, body:<regex>, class:<regex>"
    with pytest.raises(ValueError, match=rf"collide entry 'class:colision' matches no geom of the robot; its colliding "
                                         rf"geoms' classes are \['collision', 'foot'\]; {spellings}"):
        colliding(["class:colision"])
    with pytest.raises(ValueError, match=r"collide entry 'body:trunk' matches no geom.*bodies with colliding geoms "
                                         r"are \['FL_calf', 'FL_hip', 'FL_thigh', .*'base'\]"):
        colliding(["body:trunk"])
    with pytest.raises(ValueError, match=r"collide entry 'clas:foot' matches no geom of the robot; its named geoms "
                                         rf"are \['FL', 'FR', 'RL', 'RR'\]; {spellings}"):
        colliding(["clas:foot"])


def test_the_derived_size_is_printed_once(tmp_path, caplog):
    robot = load_robot(str(write_menagerie_robot(tmp_path)))
    with caplog.at_level(logging.INFO):
        model, _ = build_model(robot)
        build_model(robot)
    derived = derived_values(model, robot)
    # 6.921 kg base + 4 legs x (0.678 + 1.152 + 0.241); leg: 0.0955 hip offset + 0.213 thigh + 0.21301 calf to
    # the foot's centre + 0.022 its radius
    assert derived == pytest.approx({"init_height": robot.init_height, "mass": 15.205, "leg_length": 0.54351},
                                    abs=1e-4)
    assert 0.28 < robot.init_height < 0.3  # derived: the default pose's feet on the ground
    line = (f"robot menagerie_quad: standing height (init_height) {robot.init_height:.3f} m, mass 15.21 kg, "
            "leg length 0.544 m")
    assert caplog.text.count(line) == 1


def test_a_bundle_whose_mjcf_is_gone_is_refused_naming_robot(tmp_path):
    from ctrl_rl.deploy.commands import bundle_robot

    robot = load_robot(str(write_menagerie_robot(tmp_path / "robot")))
    meta = {"robot": robot.name, "robot_config": robot.bundle_dict()}
    assert load_robot(bundle_robot(meta, tmp_path)).mjcf_path() == robot.mjcf_path()
    shutil.move(tmp_path / "robot", tmp_path / "moved")
    with pytest.raises(FileNotFoundError, match=r"the bundle's robot menagerie_quad was trained on the MJCF "
                                                r"/.*/robot/menagerie_quad.xml, which is not on this machine; pass "
                                                r"its robot YAML with --robot <robot.yaml>"):
        bundle_robot(meta, tmp_path)


@pytest.mark.slow
def test_a_menagerie_robot_trains_evaluates_exports_and_runs_sim2sim_unedited(tmp_path, capsys):
    from ctrl_rl.app.cli import main

    yaml = write_menagerie_robot(tmp_path / "robot")
    files = model_files(tmp_path / "robot")
    logs = tmp_path / "logs"
    main(["train", "task=quadruped_velocity_flat", f"robot={yaml}", "task.kwargs.episode_length_s=1",
          "env.num_envs=8", "algo.num_steps_per_env=16", "runner.max_iterations=2", f"runner.log_root={logs}",
          "runner.progress=false"])
    run = next((logs / "ppo" / "quadruped_velocity_flat").iterdir())
    capsys.readouterr()
    main(["eval", str(run), "--episodes", "2"])
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("RESULT mean_return=")
    main(["export", str(run)])
    bundle = run / "exported" / "policy.onnx"
    meta = {p.key: p.value for p in onnx.load(str(bundle)).metadata_props}
    derived = json.loads(meta["robot_derived"])
    assert derived["mass"] == pytest.approx(15.205) and derived["leg_length"] == pytest.approx(0.5435, abs=1e-3)
    assert json.loads(meta["robot_config"])["collide"] == ["class:foot", "body:base"]

    sim2sim = [sys.executable, "-m", "ctrl_rl", "deploy", "sim2sim", str(bundle), "--duration", "3",
               "--set", "safety.stand_up_time=0.5", "--cmd-vel", "0", "0", "0"]
    env = {**os.environ, "ROS_DOMAIN_ID": str(1 + (os.getpid() + 11) % 100), "ROS_LOCALHOST_ONLY": "1"}
    ok = subprocess.run(sim2sim, capture_output=True, text=True, timeout=120, env=env)
    assert ok.returncode == 0 and "RESULT sim2sim mode=" in ok.stdout, ok.stderr[-2000:]
    assert model_files(tmp_path / "robot") == files  # the owner's files, byte for byte

    shutil.move(tmp_path / "robot", tmp_path / "moved")  # the run copied to a machine where the MJCF lives elsewhere
    moved = subprocess.run(sim2sim, capture_output=True, text=True, timeout=120, env=env)
    assert moved.returncode == 2 and "--robot <robot.yaml>" in moved.stderr, moved.stderr[-2000:]
    assert len(moved.stderr.strip().splitlines()) == 1, moved.stderr
    again = subprocess.run([*sim2sim, "--robot", str(tmp_path / "moved" / "menagerie_quad.yaml")],
                           capture_output=True, text=True, timeout=120, env=env)
    assert again.returncode == 0 and "RESULT sim2sim mode=" in again.stdout, again.stderr[-2000:]
    assert model_files(tmp_path / "moved") == files
