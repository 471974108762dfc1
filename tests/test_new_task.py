"""One way in per task and robot: a robot (an MJCF and its YAML) and a task on it, both from this
file alone, become ``task=<id>`` after one ``register_task`` call, and train, evaluate and export
through the CLI like a shipped task; no file in ``configs/`` or ``robots/`` is involved."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import onnx
import pytest

pytest.importorskip("mujoco")

from toy_robot import JOINTS, write_toy_robot  # noqa: E402


@pytest.fixture
def toy_task(tmp_path):
    """The robot folder and the one registration."""
    from ctrl_rl.tasks import TASKS, register_task, tasks
    from ctrl_rl.tasks.locomotion.locomotion import VelocityTask, VelocityTaskConfig

    robot_yaml = write_toy_robot(tmp_path / "toy_quad")
    register_task("toy_quad_velocity_flat", config=VelocityTaskConfig, task=VelocityTask,
                  defaults={"robot": str(robot_yaml), "episode_length_s": 1.0},
                  tune={"ppo": {"algo.actor_hidden": [32, 32], "algo.critic_hidden": [32, 32], "env.num_envs": 16}})
    assert "toy_quad_velocity_flat" in tasks()
    yield "toy_quad_velocity_flat"
    del TASKS["toy_quad_velocity_flat"]


@pytest.mark.slow
def test_a_task_with_a_new_robot_trains_evaluates_and_exports_through_the_cli(toy_task, tmp_path, capsys):
    from ctrl_rl.app.cli import main
    from ctrl_rl.app.configure import load_train_config

    cfg = load_train_config([f"task={toy_task}"])
    assert cfg.sim.name == "mujoco"  # routed to the task's backend by its registration alone
    assert list(cfg.algo.actor_hidden) == [32, 32] and cfg.env.num_envs == 16  # its registered tuning
    assert load_train_config([f"task={toy_task}", "env.num_envs=8"]).env.num_envs == 8  # the command line wins

    logs = tmp_path / "logs"
    main(["train", f"task={toy_task}", "env.num_envs=8", "algo.num_steps_per_env=16", "runner.max_iterations=2",
          f"runner.log_root={logs}", "runner.progress=false"])
    run = next((logs / "ppo" / toy_task).iterdir())
    assert (run / "model_2.pt").is_file() and (run / "params" / "config.yaml").is_file()
    capsys.readouterr()
    main(["eval", str(run), "--episodes", "4"])
    result = capsys.readouterr().out.strip().splitlines()[-1]
    assert result.startswith("RESULT mean_return=") and "episodes=4" in result, result
    main(["export", str(run)])
    model = onnx.load(str(run / "exported" / "policy.onnx"))
    meta = {p.key: p.value for p in model.metadata_props}
    assert meta["task"] == toy_task and meta["robot"] == "toy_quad", meta
    assert json.loads(meta["joint_names"]) == JOINTS
    carried = json.loads(meta["robot_config"])  # the bundle carries the robot: sim2sim rebuilds it
    assert carried["name"] == "toy_quad" and carried["mjcf"].startswith("/") and carried["kp"]

    bundle = str(run / "exported" / "policy.onnx")
    sim2sim = [sys.executable, "-m", "ctrl_rl", "deploy", "sim2sim", bundle, "--duration", "3",
               "--set", "safety.stand_up_time=0.5", "--cmd-vel", "0", "0", "0"]
    env = {**os.environ, "ROS_DOMAIN_ID": str(1 + (os.getpid() + 7) % 100), "ROS_LOCALHOST_ONLY": "1"}
    ok = subprocess.run(sim2sim, capture_output=True, text=True, timeout=120, env=env)
    assert ok.returncode == 0 and "RESULT sim2sim mode=" in ok.stdout, ok.stderr[-2000:]
    broken = subprocess.run([*sim2sim, "--robot", str(tmp_path / "no_such_robot.yaml")], capture_output=True,
                            text=True, timeout=120, env=env)  # the bridge cannot build the robot and dies
    assert broken.returncode == 1, broken.stdout[-1000:] + broken.stderr[-2000:]
    assert "sim2sim failed: the sim2sim bridge (the simulated robot) exited with status" in broken.stderr


def test_an_unknown_or_misrouted_task_names_the_registered_ones(toy_task):
    from ctrl_rl.app.configure import load_train_config
    from ctrl_rl.config import ConfigError
    from ctrl_rl.sims import make_env

    with pytest.raises(ValueError, match="unknown task 'toy_quad_velocity_flat' for sim 'torch'; choose one of: "):
        make_env("torch", toy_task, 2)
    with pytest.raises(ConfigError, match=r"unknown task 'toy_quad_velocity_flat' for sim 'torch' \(a task of "
                                          r"sim=mujoco and sim=mjwarp\); did you mean task=toy_quad_velocity_flat "
                                          r"sim=mujoco\?"):
        load_train_config(["task=toy_quad_velocity_flat", "sim=torch"])  # refused when the config is built
    with pytest.raises(ConfigError, match="unknown task 'toy_quad_velocity_flta' for sim 'mujoco'; did you mean "
                                          "task=toy_quad_velocity_flat\\? "
                                          "\\(`ctrl-rl list` lists every task\\)"):
        load_train_config(["task=toy_quad_velocity_flta", "sim=mujoco"])
    with pytest.raises(ConfigError, match="unknown task 'zzz' for sim 'mujoco'; choose one of: .*quadruped_velocity"
                                          "_flat, .*(toy_quad_velocity_flat \\(`ctrl-rl list` lists every task|"
                                          "more: `ctrl-rl list`)\\)$") as refused:
        load_train_config(["task=zzz", "sim=mujoco"])  # the sim's own; the rest behind `ctrl-rl list`
    assert len(f"ctrl-rl: error: {refused.value}") <= 200
