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
