"""The insert task (``ctrl_rl.tasks.manipulation.insert``): the peg-in-hole geometry, success rule and reward
terms against hand-computed values, config errors that name the fix, the contract on both MuJoCo backends, the
socket's and the peg's draws, success judged on hand-made states, an impossible simulation refused, the scripted
expert's success rate on the YAM (mjlab's wheel) and ``ctrl-rl collect scripted task=insert``."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

mujoco = pytest.importorskip("mujoco")

from ctrl_rl.env import SimulationError  # noqa: E402
from ctrl_rl.robots.arm_scenes import inserted, peg_in_hole  # noqa: E402
from ctrl_rl.robots.terms import damped_least_squares, object_to_tool, point_jacobian  # noqa: E402
from ctrl_rl.runners.episodes import run_episodes, zero_policy  # noqa: E402
from ctrl_rl.sims import make_env  # noqa: E402
from ctrl_rl.tasks.manipulation.experts import EXPERTS, ArmIK, grasp_quat  # noqa: E402
from ctrl_rl.tasks.manipulation.insert_config import InsertConfig  # noqa: E402
from ctrl_rl.tasks.manipulation.rewards import insert_terms  # noqa: E402


# ---- geometry, success and rewards, by hand ---------------------------------------------------------------
def test_peg_in_hole_measures_the_tip_from_the_hole_axis_and_top():
    """A socket at (0.3, 0.1) on the table with a 25 mm hole: a tip at (0.303, 0.104, 0.005) is 5 mm off the axis
    (a 3-4-5 triangle) and 20 mm down; one at z = 0.04 is 15 mm above the top (depth -0.015)."""
    socket = torch.tensor([[0.3, 0.1, 0.0], [0.3, 0.1, 0.0]], dtype=torch.float64)
    tip = torch.tensor([[0.303, 0.104, 0.005], [0.3, 0.1, 0.04]], dtype=torch.float64)
    lateral, depth = peg_in_hole(tip, socket, 0.025)
    np.testing.assert_allclose(lateral.numpy(), [0.005, 0.0], atol=1e-12)
    np.testing.assert_allclose(depth.numpy(), [0.020, -0.015], atol=1e-12)


def test_object_to_tool_is_the_socket_seen_from_the_peg_tip():
    """The socket's base centre at (0.3, 0.1, 0) and the tip at (0.302, 0.099, 0.04): the hole's bottom is 2 mm
    back in x, 1 mm on in y and 40 mm down; the end effector's position plays no part."""
    s = {"object_pose": np.array([0.3, 0.1, 0.0, 1.0, 0.0, 0.0, 0.0]), "tool_pos": np.array([0.302, 0.099, 0.04]),
         "ee_pos": np.array([9.0, 9.0, 9.0])}
    np.testing.assert_allclose(object_to_tool(s), [-0.002, 0.001, -0.04], atol=1e-12)


def test_point_jacobian_of_a_planar_arm_and_a_slide_by_hand():
    """Hinges about z at the origin and at (1, 0, 0) carrying a point at (2, 0, 0): each turns it along y by its
    lever (2, then 1); a slide along x moves it along x; a batch of two poses, in numpy and torch alike."""
    anchors = np.array([[0.0, 0, 0], [1.0, 0, 0], [5.0, 5, 5]])
    axes = np.array([[0.0, 0, 1], [0.0, 0, 1], [1.0, 0, 0]])
    hinge = np.array([1.0, 1.0, 0.0])
    expected = np.array([[0.0, 0, 1], [2.0, 1, 0], [0.0, 0, 0]])
    jac = point_jacobian(anchors, axes, hinge, np.array([2.0, 0, 0]))
    np.testing.assert_allclose(jac, expected, atol=1e-12)
    batch = point_jacobian(torch.tensor(np.stack([anchors] * 2)), torch.tensor(np.stack([axes] * 2)),
                           torch.tensor(hinge), torch.tensor([[2.0, 0, 0], [2.0, 0, 0]]))
    np.testing.assert_allclose(batch.numpy(), np.stack([expected] * 2), atol=1e-12)


def test_damped_least_squares_by_hand():
    """J = [[1, 0], [0, 2], [0, 0]] and an error (1, 1, 1) with damping 0.01: J J^T + 1e-4 I = diag(1.0001, 4.0001,
    1e-4), so the step is (1 / 1.0001, 2 / 4.0001); the z error, which no joint moves, buys nothing."""
    jac, err = np.array([[1.0, 0], [0, 2], [0, 0]]), np.array([1.0, 1, 1])
    step = damped_least_squares(jac, err, 0.01)
    np.testing.assert_allclose(step, [1 / 1.0001, 2 / 4.0001], rtol=1e-12)
    np.testing.assert_allclose(damped_least_squares(torch.tensor(jac)[None], torch.tensor(err)[None], 0.01)[0].numpy(),
                               step, rtol=1e-12)


def test_the_tips_jacobian_is_mujocos_and_its_correction_lands_the_tip():
    """At random arm poses, the task's ``tool_jacobian`` (the joints' body frames from sensors) equals MuJoCo's own
    ``mj_jacSite`` of the peg's tip in the base frame; and the observed ``tool_correction``, added to the joints,
    brings the tip onto a point 1 mm off it to within 2 % of that millimetre (first order)."""
    from ctrl_rl.robots.arm import arm_indices
    from ctrl_rl.robots.terms import TERM_FUNCTIONS
    from ctrl_rl.tasks.manipulation.insert import InsertTask

    cfg = InsertConfig()
    model, layout = InsertTask.build_model(cfg, None)
    task = InsertTask(cfg, None, model, layout, 1, torch.device("cpu"))
    data, rng = mujoco.MjData(model), np.random.default_rng(0)
    qadr, dadr = arm_indices(model, task.arm.arm_joints)
    site, base = model.site("peg_tip").id, model.body(task.arm.base_body).id
    for _ in range(5):
        data.qpos[:] = model.qpos0
        data.qpos[qadr] = np.asarray(task.arm.default_pose[:len(qadr)]) + rng.uniform(-0.4, 0.4, len(qadr))
        mujoco.mj_forward(model, data)
        s = task.signals(type("Physics", (), {"sensordata": torch.tensor(data.sensordata)[None]})())
        jac = np.zeros((3, model.nv))
        mujoco.mj_jacSite(model, data, jac, None, site)
        expected = data.xmat[base].reshape(3, 3).T @ jac[:, dadr]
        np.testing.assert_allclose(s["tool_jacobian"][0].numpy(), expected, atol=1e-6)
        tip = s["tool_pos"][0].double().numpy()
        target = tip + rng.normal(size=3) * 0.001 / math.sqrt(3)
        step = TERM_FUNCTIONS["tool_correction"]({"object_pose": np.concatenate([target, [1.0, 0, 0, 0]]),
                                                  "tool_pos": tip, "tool_jacobian": expected})
        data.qpos[qadr] += step
        mujoco.mj_forward(model, data)
        landed = data.xmat[base].reshape(3, 3).T @ (data.site_xpos[site] - data.xpos[base])
        assert np.linalg.norm(landed - target) < 0.02 * np.linalg.norm(target - tip)


def test_inserted_needs_the_depth_and_the_lateral_tolerance_both():
    """min depth 20 mm, max lateral 1.5 mm: (21, 1.0) yes; (19, 1.0) too shallow; (21, 1.6) off the axis;
    exactly (20, 1.5) counts."""
    depth = torch.tensor([0.021, 0.019, 0.021, 0.020], dtype=torch.float64)
    lateral = torch.tensor([0.001, 0.001, 0.0016, 0.0015], dtype=torch.float64)
    assert inserted(lateral, depth, 0.020, 0.0015).tolist() == [True, False, False, True]


def test_insert_terms_hand_computed():
    """Env 0: the tip 2 cm from its goal, 1 mm off the axis, 10 mm down a 25 mm hole, the hand 0.05 rad off:
    keypoint 1 - tanh(0.2) = 0.802625, fine 1 - tanh(2) = 0.035972, align 1 - tanh(0.2), orientation
    1 - tanh(0.5) = 0.537883, insert 10 / 25 = 0.4. Env 1: 12 mm off the axis of a hole 9 mm in half-width, not
    over the opening: no insert however low (align 1 - tanh(2.4)). Env 2: 30 mm down a 25 mm hole (pressed into
    the table): insert clipped at 1. Action rate: (1 - 0)^2 + (2 - 0)^2 = 5."""
    t = lambda *v: torch.tensor(v, dtype=torch.float64)  # noqa: E731
    terms = insert_terms(distance=t(0.02, 0.05, 0.0), lateral=t(0.001, 0.012, 0.0), depth=t(0.010, 0.020, 0.030),
                         angle=t(0.05, 0.0, 0.0), action=t([1.0, 2.0], [1.0, 2.0], [1.0, 2.0]),
                         last_action=torch.zeros(3, 2, dtype=torch.float64), hole_half_width=0.009, goal_depth=0.025,
                         keypoint_std=0.1, keypoint_fine_std=0.01, align_std=0.005, orientation_std=0.1,
                         jam_lateral=0.0015, jam_band=0.003)
    expected = {"keypoint": [1 - math.tanh(0.2), 1 - math.tanh(0.5), 1.0],
                "keypoint_fine": [1 - math.tanh(2.0), 1 - math.tanh(5.0), 1.0],
                "align": [1 - math.tanh(0.2), 1 - math.tanh(2.4), 1.0],
                "orientation": [1 - math.tanh(0.5), 1.0, 1.0],
                "insert": [0.4, 0.0, 1.0], "jam": [0.0, 1.0, 0.0], "action_rate": [5.0, 5.0, 5.0]}
    assert set(terms) == set(expected)
    assert terms["keypoint"][0] == pytest.approx(0.802625, abs=1e-6)
    for name, value in expected.items():
        np.testing.assert_allclose(terms[name].numpy(), value, rtol=1e-9, err_msg=name)


def test_jam_is_a_tip_off_the_axis_at_or_below_the_rim():
    """jam_lateral 1.5 mm, band 3 mm: 2 mm off the axis, 2 mm above the top is a third of the way into the band;
    10 mm down (beside the hole) is 1, 4 mm above the top 0; 1 mm off the axis at the top (going in) is 0."""
    t = lambda *v: torch.tensor(v, dtype=torch.float64)  # noqa: E731
    n = 4
    terms = insert_terms(distance=torch.zeros(n), lateral=t(0.002, 0.002, 0.002, 0.001),
                         depth=t(-0.002, 0.010, -0.004, 0.0), angle=torch.zeros(n), action=torch.zeros(n, 1),
                         last_action=torch.zeros(n, 1), hole_half_width=0.009, goal_depth=0.025, keypoint_std=0.1,
                         keypoint_fine_std=0.01, align_std=0.005, orientation_std=0.1, jam_lateral=0.0015,
                         jam_band=0.003)
    np.testing.assert_allclose(terms["jam"].numpy(), [1 / 3, 1.0, 0.0, 0.0], rtol=1e-12)


def test_the_default_clearance_is_at_most_two_millimetres_in_all():
    cfg = InsertConfig()
    assert 2 * cfg.clearance <= 0.002 and cfg.hole_half_width == pytest.approx(cfg.peg_half_width + 0.001)


# ---- the task (its conformance suite runs in tests/test_lift.py) ------------------------------------------
def test_the_socket_is_drawn_per_episode_and_the_peg_per_world_and_the_peg_is_in_hand():
    env = make_env("mujoco", "insert", 32, "cpu", seed=0)
    env.reset(seed=0)
    task, c = env.task, env.task.cfg
    s = task.signals(env.physics)
    socket = s["object_pose"]
    for axis, (low, high) in ((0, c.socket_x), (1, c.socket_y)):
        assert bool(((socket[:, axis] >= low - 1e-6) & (socket[:, axis] <= high + 1e-6)).all())
    assert torch.allclose(socket[:, 2], torch.zeros(32), atol=1e-9)  # on the table
    yaw = 2 * torch.atan2(socket[:, 6], socket[:, 3])
    assert c.socket_yaw[0] - 1e-5 <= float(yaw.min()) < float(yaw.max()) <= c.socket_yaw[1] + 1e-5
    reach = (s["tool_pos"] - s["ee_pos"]).norm(dim=-1)  # the tip rides peg_tip beyond the end effector
    assert torch.allclose(reach, torch.full((32,), c.peg_tip), atol=1e-5)
    friction = env.physics.model_field("geom_friction")[:, task.peg_geom, 0]
    mass = env.physics.model_field("body_mass")[:, task.peg_body]
    assert c.object_friction[0] <= float(friction.min()) < float(friction.max()) <= c.object_friction[1]
    assert c.object_mass[0] <= float(mass.min()) < float(mass.max()) <= c.object_mass[1]
    for _ in range(20):  # the socket holds still under a resting arm; the gripper closes on the peg
        env.step(torch.zeros(32, env.action_dim))
    assert torch.allclose(task.signals(env.physics)["object_pose"], socket, atol=1e-6)


def _peg_at(env, depth: float, offset: float = 0.0) -> None:
    """Every env's arm posed by inverse kinematics so the peg, upright, has its tip ``depth`` down the hole and
    ``offset`` (m, along x) off its axis (written, not stepped: a hand-made state)."""
    task, ik = env.task, ArmIK(env.physics.model, env.task.arm)
    qpos, qvel = env.physics.qpos.clone(), torch.zeros_like(env.physics.qvel)
    socket = task.signals(env.physics)["object_pose"].to(torch.float64).numpy()
    for i in range(env.num_envs):
        yaw = 2 * math.atan2(socket[i, 6], socket[i, 3])
        tip = socket[i, :3] + np.array([offset, 0.0, task.cfg.hole_depth - depth])
        q = ik.solve(qpos[i].numpy(), tip + np.array([0.0, 0.0, task.cfg.peg_tip]), grasp_quat(yaw), iterations=100)
        qpos[i, ik.qadr] = torch.as_tensor(q, dtype=qpos.dtype)
    env.physics.write_rows(torch.ones(env.num_envs, dtype=torch.bool), qpos, qvel)


def _judge(env, steps: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``steps`` evaluations of the same state: the success metric and the lateral error."""
    for _ in range(steps):
        env.task.evaluate(env.physics, torch.ones(env.num_envs, dtype=torch.long), torch.Generator())
    return env.task.episode_metrics["success_rate"], env.task.metrics["lateral_error"]


def test_success_is_the_peg_down_the_hole_on_its_axis_held_for_the_last_steps():
    """Hand-made states (the arm posed by IK, the socket where its reset drew it): the tip 22 mm down a 25 mm hole
    on its axis is a success once held 10 steps (not after 9); 15 mm down (60 %) is not; 22 mm down but 3 mm off
    the axis (more than 1 mm + 0.5 mm) is not, and it restarts the hold."""
    env = make_env("mujoco", "insert", 2, "cpu", seed=0)
    env.reset(seed=0)
    _peg_at(env, 0.022)
    success, lateral = _judge(env, 9)
    assert float(lateral.max()) < 2e-4 and success.tolist() == [0.0, 0.0]
    assert _judge(env, 1)[0].tolist() == [1.0, 1.0]
    assert float(env.task.metrics["insertion_depth"].min()) == pytest.approx(0.022, abs=2e-4)
    _peg_at(env, 0.022, offset=0.003)
    assert _judge(env, 1)[0].tolist() == [0.0, 0.0] and int(env.task.held.max()) == 0
    _peg_at(env, 0.015)
    assert _judge(env, 12)[0].tolist() == [0.0, 0.0]


def test_episodes_start_where_the_arms_pd_holds_it():
    """``settle_s``: the arm starts settled under its PD at the rest targets (as a real arm stands after the
    deploy node's stand-up): with zero actions and no joint noise it stays (joint speeds under 0.05 rad/s); from
    the default pose itself (``settle_s=0``) the soft YAM falls (0.7 rad/s), its grasp site 3.5 cm lower within
    0.2 s."""
    speeds, heights = {}, {}
    for settle in (0.0, 1.0):
        env = make_env("mujoco", "insert", 2, "cpu", seed=0, init_joint_noise=0.0, settle_s=settle)
        env.reset(seed=0)
        start = env.task.signals(env.physics)["ee_pos"][:, 2].clone()
        speed = 0.0
        for _ in range(10):
            env.step(torch.zeros(2, env.action_dim))
            speed = max(speed, float(env.task.signals(env.physics)["joint_vel"].abs().max()))
        speeds[settle], heights[settle] = speed, float((start - env.task.signals(env.physics)["ee_pos"][:, 2]).max())
    assert speeds[1.0] < 0.05 and heights[1.0] < 0.003, (speeds, heights)
    assert speeds[0.0] > 0.3 and heights[0.0] > 0.02, (speeds, heights)


def test_a_peg_held_above_the_table_is_no_success():
    env = make_env("mujoco", "insert", 4, "cpu", seed=0, episode_length_s=0.5)
    metrics: dict[str, float] = {}
    run_episodes(env, zero_policy(env), seed=0, metrics=metrics)
    assert metrics["success_rate"] == 0.0 and metrics["insertion_depth"] < 0


def test_a_peg_below_the_table_or_not_finite_is_a_simulation_error():
    env = make_env("mujoco", "insert", 2, "cpu", seed=0)
    env.reset(seed=0)
    _judge(env, 1)
    env.task.check_simulation()  # a peg in hand is fine
    _peg_at(env, env.task.cfg.hole_depth + 0.03)  # the tip 3 cm into the table (a state, not stepped)
    _judge(env, 1)
    with pytest.raises(SimulationError, match=r"peg's tip fell through the table in env\(s\) \[0, 1\]"):
        env.task.check_simulation()
    env.task.tip_pos[1] = float("nan")
    with pytest.raises(SimulationError, match=r"not finite in env\(s\) \[1\]"):
        env.task.check_simulation()


# ---- the scripted expert and demonstrations ------------------------------------------------------------
def test_the_scripted_expert_inserts_the_peg_in_at_least_90_percent_of_episodes():
    """The YAM with the default draws, 16 episodes (deterministic: no action noise). Measured on 64 episodes:
    1.0 (seeds 1 and 7 of the reset)."""
    env = make_env("mujoco", "insert", 16, "cpu", seed=0)
    metrics: dict[str, float] = {}
    run_episodes(env, EXPERTS["insert"](env), seed=1, metrics=metrics)
    assert metrics["success_rate"] >= 0.9, metrics


def test_collect_scripted_writes_insert_demonstrations(tmp_path, capsys):
    from ctrl_rl.app.cli import main
    from ctrl_rl.storage.dataset import Dataset, read_attrs

    out = tmp_path / "insert.hdf5"
    main(["collect", "scripted", "task=insert", "--episodes", "2", "--envs", "2", "--successful-only",
          "--output", str(out)])
    result = capsys.readouterr().out.strip().splitlines()[-1]
    assert result.startswith("RESULT ") and "episodes=2" in result and "behavior_success_rate=" in result, result
    data = Dataset.load_hdf5(out)
    assert len(np.flatnonzero(data.episode_ends())) == 2 and len(data) == 2 * 250  # whole 5 s episodes
    assert data.obs_dim == 41 and data.action_dim == 6
    attrs = read_attrs(out)
    assert attrs["task"] == "insert" and attrs["level"] == "scripted" and int(attrs["episodes_kept"]) == 2
