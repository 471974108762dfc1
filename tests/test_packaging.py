"""The built wheel carries the folder mapping and the configs (a non-editable install works)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_wheel_maps_folders_and_ships_configs(tmp_path):
    wheel_dir, target = tmp_path / "wheel", tmp_path / "site"
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                            str(ROOT), "-w", str(wheel_dir)], capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr
    wheel = next(wheel_dir.glob("ctrl_rl-*.whl"))
    install = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target),
                              str(wheel)], capture_output=True, text=True, timeout=600)
    assert install.returncode == 0, install.stderr
    code = """
import ctrl_rl, ctrl_rl.sims, ctrl_rl.robots, ctrl_rl.tasks, ctrl_rl.deploy.runtime, ctrl_rl.configs
from ctrl_rl.app.configure import load_train_config
cfg = load_train_config(["task=cartpole_balance"])
assert cfg.task.name == "cartpole_balance" and cfg.env.num_envs == 256, cfg
for mod in (ctrl_rl, ctrl_rl.sims, ctrl_rl.configs):
    assert mod.__file__.startswith(TARGET), mod.__file__
import pathlib, ctrl_rl.deploy.transports
from ctrl_rl.deploy.node import NodeParams
deploy = pathlib.Path(ctrl_rl.deploy.transports.__file__).parent.parent
assert (deploy / "launch" / "ctrl_rl_node.launch.py").is_file()
NodeParams.from_yaml(pathlib.Path(ctrl_rl.configs.__file__).parent / "deploy" / "node.yaml")
print("ok")
""".replace("TARGET", repr(str(target)))
    env = {**os.environ, "PYTHONPATH": str(target)}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr
