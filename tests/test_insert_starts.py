"""Insert's recovery starts (``task.kwargs.rim_start``, ``tasks/manipulation/insert_starts.py``): where they put the
peg, that the arm holds them, and that only training sees them."""

from __future__ import annotations

import numpy as np
import pytest
import torch

mujoco = pytest.importorskip("mujoco")

from ctrl_rl.robots.arm_scenes import peg_in_hole  # noqa: E402
from ctrl_rl.sims import make_env  # noqa: E402
from ctrl_rl.tasks.manipulation.insert_config import InsertConfig  # noqa: E402
from ctrl_rl.tasks.manipulation.insert_starts import tilted  # noqa: E402

FAR = 0.01
"""m: a tip further than this from the hole's axis at a reset started from the arm's pose (measured: 49-132 mm)."""


def _tip(env) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Each env's tip: lateral distance from the hole's axis, height above the hole's top (m), the peg's tilt (rad)."""
    s = env.task.signals(env.physics)
    lateral, depth = peg_in_hole(s["tool_pos"], s["object_pose"][:, :3], env.task.cfg.hole_depth)
    w, x, y, _ = s["ee_quat"].double().T  # the end effector's z axis (the peg's) against straight down
    axis_z = 1 - 2 * (x * x + y * y)
    return lateral, -depth, torch.arccos((-axis_z).clamp(-1, 1))


def test_tilted_turns_about_a_horizontal_axis_by_hand():
    """Upright (identity) turned 0.1 rad about x (heading 0): (cos 0.05, sin 0.05, 0, 0); about y (heading pi/2):
    (cos 0.05, 0, sin 0.05, 0)."""
    c, s = np.cos(0.05), np.sin(0.05)
    np.testing.assert_allclose(tilted(np.array([1.0, 0, 0, 0]), 0.1, 0.0), [c, s, 0, 0], atol=1e-12)
    np.testing.assert_allclose(tilted(np.array([1.0, 0, 0, 0]), 0.1, np.pi / 2), [c, 0, s, 0], atol=1e-12)


def test_rim_starts_put_the_tip_just_above_the_rim_off_the_axis_and_the_arm_holds_it():
    """``rim_start=0.5`` on 64 envs: about half the episodes (binomial: 20-44 holds with p > 0.999) start with the tip
    within the drawn offset (0.5-4 mm) of the hole's axis and height (0.5-4 mm) above its top, the peg tilted at
    most 0.03 rad, and their last action the pose's hold; the rest start from the arm's pose, last action zero.
    Stepped with their last action, the rim starts stay put (the tip moves under 1 mm in 10 steps; measured 0.4).
    The same seed draws the same starts."""
    c = InsertConfig()
    env = make_env("mujoco", "insert", 64, "cpu", seed=0, rim_start=0.5)
    env.reset(seed=3)
    lateral, height, tilt = _tip(env)
    rim = lateral < FAR
    assert 20 <= int(rim.sum()) <= 44
    tol = 1e-4  # m: the solved tips measured within 0.05 mm of their goals (the bank keeps those within 0.5 mm)
    for value, (low, high) in ((lateral[rim], c.rim_start_offset), (height[rim], c.rim_start_height)):
        assert low - tol <= float(value.min()) and float(value.max()) <= high + tol, (value, low, high)
    assert float(tilt[rim].max()) <= c.rim_start_tilt + 0.002
    last = env.task.last_action
    assert bool((last[rim].abs().sum(1) > 0.1).all()) and bool((last[~rim] == 0).all())
    before = env.task.signals(env.physics)["tool_pos"].clone()
    for _ in range(10):
        env.step(env.task.last_action.clone())
    moved = (env.task.signals(env.physics)["tool_pos"] - before).norm(dim=-1)
    assert float(moved[rim].max()) < 0.001, moved[rim]
    env.reset(seed=3)
    assert torch.equal(_tip(env)[0] < FAR, rim)


def test_rim_starts_on_mujoco_warp_match_the_bank():
    """The same draw on ``sim=mjwarp`` (its CPU kernels): every env a rim start, within the bank's ranges."""
    pytest.importorskip("mujoco_warp")
    c = InsertConfig()
    env = make_env("mjwarp", "insert", 4, "cpu", seed=0, rim_start=1.0)
    env.reset(seed=0)
    lateral, height, tilt = _tip(env)
    assert float(lateral.min()) >= c.rim_start_offset[0] - 1e-4 and float(lateral.max()) <= c.rim_start_offset[1] + 1e-4
    assert float(height.min()) >= c.rim_start_height[0] - 1e-4 and float(height.max()) <= c.rim_start_height[1] + 1e-4
    assert float(tilt.max()) <= c.rim_start_tilt + 0.002


def test_rim_start_is_checked_when_the_config_is_built():
    with pytest.raises(ValueError, match=r"task.kwargs.rim_start must lie in \[0, 1\]"):
        InsertConfig(rim_start=1.5)
    with pytest.raises(ValueError, match=r"rim_start_offset, rim_start_height and rim_start_tilt >= 0"):
        InsertConfig(rim_start_tilt=-0.1)


def test_inference_starts_every_episode_as_a_robot_does(tmp_path, capsys):
    """A run trained with ``rim_start=1``: ``ctrl-rl eval`` sets it back to 0 and says so; an explicit override keeps
    it. The tip's lateral error, a mean over 0.2 s episodes of the untrained policy (its actions ~0 pull the arm to
    its default targets): 8.7 cm from the robot's start, 2.0 cm from the rim (measured)."""
    from ctrl_rl.app.cli import main
    from ctrl_rl.app.evaluate import evaluate

    main(["train", "algo=ppo", "task=insert", "env.num_envs=4", "algo.num_steps_per_env=4", "runner.max_iterations=1",
          "runner.progress=false", "task.kwargs.rim_start=1.0", "task.kwargs.episode_length_s=0.2",
          f"runner.log_root={tmp_path}"])
    run = next((tmp_path / "ppo" / "insert").iterdir())
    capsys.readouterr()
    as_robot = evaluate(str(run), [], episodes=4, seed=0)
    out = capsys.readouterr().out
    assert "task.kwargs.rim_start=1.0 shaped training only: episodes start as on a robot (rim_start=0.0" in out, out
    kept = evaluate(str(run), ["task.kwargs.rim_start=1.0"], episodes=4, seed=0)
    assert "shaped training only" not in capsys.readouterr().out
    assert as_robot["lateral_error"] > 0.05 > kept["lateral_error"], (as_robot, kept)
