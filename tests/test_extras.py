"""A missing optional dependency is one line naming the extra that installs it (issue 42): simulated
by blocking the import (``sys.modules[name] = None``) in a fresh interpreter, as a user without the
extra would meet it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ctrl_rl.utils.extras import EXTRAS, missing


def _cli(blocked: str, *argv: str) -> subprocess.CompletedProcess:
    code = (f"import sys; sys.modules[{blocked!r}] = None; from ctrl_rl.app.cli import main; "
            f"main({list(argv)!r})")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_the_message_names_the_extra() -> None:
    try:
        import mujoco_not_a_module  # noqa: F401
    except ModuleNotFoundError as exc:
        assert missing(exc) is None  # not an optional dependency: a real error, raised as such
    exc = ModuleNotFoundError("No module named 'mujoco_warp'", name="mujoco_warp")
    assert missing(exc, "sim=mjwarp") == 'sim=mjwarp needs mujoco_warp, which is not installed: pip install ' \
                                         '"ctrl-rl[mjwarp]"'
    assert set(EXTRAS.values()) <= {"train", "deploy", "gymnasium", "mujoco", "mjwarp", "video", "bench"}


@pytest.mark.parametrize("blocked, argv, extra", [
    ("mujoco", ["train", "task=quadruped_velocity_flat", "runner.max_iterations=1"], "mujoco"),
    ("mujoco_warp", ["train", "task=quadruped_velocity_flat", "sim=mjwarp", "env.num_envs=2"], "mjwarp"),
    ("mujoco_warp", ["train", "task=humanoid_velocity_flat", "tune=ppo_humanoid_velocity_flat_gpu"], "mjwarp"),
    ("gymnasium", ["train", "sim=gymnasium", "task=Pendulum-v1", "env.num_envs=2"], "gymnasium"),
    ("cyclonedds", ["deploy", "sim2sim", "no_bundle.onnx"], "deploy"),
    ("av", ["play", "--agent", "zero", "task=pendulum", "--steps", "2", "--video", "out.mp4"], "video"),
])
def test_a_missing_extra_is_one_line(blocked, argv, extra) -> None:
    proc = _cli(blocked, *argv)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert len(lines) == 1 and f'pip install "ctrl-rl[{extra}]"' in lines[0], proc.stderr[-2000:]


def test_list_says_which_sims_are_unavailable() -> None:
    proc = _cli("mujoco", "list")
    assert proc.returncode == 0, proc.stderr[-2000:]
    flowing = " ".join(proc.stdout.split())  # the list wraps at 100 columns
    assert 'sim=mujoco (unavailable: sim=mujoco needs mujoco, which is not installed: pip install ' \
           '"ctrl-rl[mujoco]")' in flowing
    assert "sim=torch " in proc.stdout and "pendulum" in proc.stdout


@pytest.mark.parametrize("task", ["quadruped_velocity_flat", "humanoid_velocity_flat"])
def test_help_and_cfg_of_a_gpu_preset_print_without_mujoco_warp(task) -> None:
    """The README's GPU lines: every key and its value, on a machine without the mjwarp extra."""
    argv = ["train", f"task={task}", f"tune=ppo_{task}_gpu"]
    helped = _cli("mujoco_warp", *argv, "--help")
    assert helped.returncode == 0 and not helped.stderr.strip(), helped.stderr[-2000:]
    assert "keys for algo=ppo task=" in helped.stdout and "sim=mjwarp" in helped.stdout
    assert "task.kwargs.decimation=" in helped.stdout and "device=cuda" in helped.stdout
    flowing = " ".join(helped.stdout.split())
    assert 'sim=mjwarp (unavailable: sim=mjwarp needs mujoco_warp, which is not installed: pip install ' \
           '"ctrl-rl[mjwarp]")' in flowing
    printed = _cli("mujoco_warp", *argv, "--cfg")
    assert printed.returncode == 0 and "name: mjwarp" in printed.stdout, printed.stderr[-2000:]


def test_help_and_cfg_of_every_tune_preset_print_without_its_simulator() -> None:
    """MuJoCo and MuJoCo Warp both missing: every tune file (tasks/<family>/tune) prints ``--help`` and ``--cfg``
    for its own learner and task, without ``dataset=`` or ``algo.teacher``."""
    code = """
import contextlib, io, sys
sys.modules["mujoco"] = sys.modules["mujoco_warp"] = None
from ctrl_rl.algos.registry import learners
from ctrl_rl.app.catalog import train_help
from ctrl_rl.app.configure import available
from ctrl_rl.app.train import train
for preset in available("tune"):
    algo = max((a for a in learners() if preset.startswith(a + "_")), key=len)
    task = max((t for t in available("task") if preset[len(algo) + 1:].startswith(t)), key=len)
    argv = [f"algo={algo}", f"task={task}", f"tune={preset}"]
    assert f"keys for algo={algo} task={task}" in train_help(argv), preset
    with contextlib.redirect_stdout(io.StringIO()) as out:
        train(argv, print_cfg=True)
    assert f"name: {algo}" in out.getvalue(), preset
    print("ok", preset)
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    from ctrl_rl.app.configure import available

    assert proc.stdout.count("ok ") == len(available("tune")) >= 20


def test_list_marks_every_sim_that_cannot_run_here_with_what_it_needs() -> None:
    """Packages of every non-torch backend blocked: each sim row says unavailable and names its extra,
    or its own install where no extra installs it (Isaac Lab, mjlab's own venv, Isaac Gym)."""
    blocked = ["mujoco_warp", "gymnasium", "isaaclab", "mjlab", "isaacgym", "legged_gym"]
    code = (f"import sys; sys.modules.update(dict.fromkeys({blocked!r})); from ctrl_rl.app.cli import main; "
            "main(['list'])")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    row: dict[str, str] = {}
    for line in proc.stdout.split("tasks (task=..., sim=...):")[1].splitlines()[1:]:
        if line.startswith("  sim="):  # a row; the lines after it continue its description (100 columns)
            sim, _, text = line.strip()[4:].partition(" ")
            row[sim] = text.strip()
        elif line.startswith("   "):
            row[sim] += " " + line.strip()
        else:
            break
    needs = {"mjwarp": 'pip install "ctrl-rl[mjwarp]"', "gymnasium": 'pip install "ctrl-rl[gymnasium]"',
             "isaaclab": "pip install 'isaaclab[isaacsim]", "mjlab": ".venv-mjlab/bin/ctrl-rl",
             "isaacgym": "Isaac Gym Preview 4"}
    for sim, what in needs.items():
        assert row[sim].startswith(f"(unavailable: sim={sim} needs") and what in row[sim], (sim, row[sim])
    assert "unavailable" not in row["torch"] and "unavailable" not in row["mujoco"]
    assert "pendulum" in row["torch"] and "quadruped_velocity_flat" in row["mujoco"]


def test_a_torch_task_exports_without_mujoco(tmp_path) -> None:
    """The quickstart's `ctrl-rl export` on the pendulum needs no simulator extra (the arm bundles' forward
    kinematics import MuJoCo only for an arm bundle)."""
    from ctrl_rl.app.train import train

    run = train(["task=pendulum", "env.num_envs=8", "algo.num_steps_per_env=8", "runner.max_iterations=1",
                 "runner.progress=false", f"runner.log_root={tmp_path}"])
    r = _cli("mujoco", "export", str(run))
    assert r.returncode == 0 and (run / "exported" / "policy.onnx").is_file(), r.stderr[-2000:]
