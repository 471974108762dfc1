"""MuJoCo CPU backend and the ctrl_quad robot: contract 1, determinism, randomization, terms."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
import torch
from vecenv_conformance import check_vecenv

from ctrl_rl.robots.robot import ROBOTS_DIR, RobotConfig, build_model, load_robot
from ctrl_rl.robots.terms import TERM_FUNCTIONS, ObsTerm, compute_obs, projected_gravity, quat_rotate_inverse
from ctrl_rl.sims import list_tasks, make_env

TASK = "quadruped_velocity_flat"
SHORT = {"episode_length_s": 0.4}  # 20 control steps: episodes end inside the checks


def _maker(**kw):
    return lambda n, seed: make_env("mujoco", TASK, n, seed=seed, **{**SHORT, **kw})


def test_listed():
    assert TASK in list_tasks("mujoco")["mujoco"]


def test_conformance():
    check_vecenv(_maker(), num_envs=6, seed=2, make_untruncated=_maker(episode_length_s=1e9))


def test_thread_count_does_not_change_results():
    """No state leaks between worlds through a worker's MjData (e.g. the solver warm start):
    1 and 2 rollout threads give the same bits."""
    from ctrl_rl.sims.mujoco_cpu import CpuPhysics

    robot = load_robot("ctrl_quad")
    model, _ = build_model(robot)
    one, two = CpuPhysics(model, 16, nthread=1), CpuPhysics(model, 16, nthread=2)
    gen = torch.Generator().manual_seed(0)
    for phys in (one, two):
        phys.write_rows(torch.ones(16, dtype=torch.bool), phys.qpos.clone() + 0.0, phys.qvel.clone())
    for _ in range(30):
        ctrl = torch.tensor(robot.default_pose) + 0.3 * torch.randn(16, 12, generator=gen)
        one.step(ctrl, 4)
        two.step(ctrl, 4)
    assert np.array_equal(one.state, two.state) and np.array_equal(one.sensor, two.sensor)


def test_decimation_and_time():
    env = make_env("mujoco", TASK, 4, seed=0, decimation=5)
    assert env.step_dt == pytest.approx(5 * 0.005)
    t0 = env.physics.state[:, 0].copy()
    env.step(torch.zeros(4, 12))
    np.testing.assert_allclose(env.physics.state[:, 0] - t0, 5 * 0.005, atol=1e-12)


def test_default_pose_stands_still():
    """Zero actions hold the default pose: the robot stands upright at its config height."""
    env = make_env("mujoco", TASK, 8, seed=0, push_velocity=0.0, init_base_vel=0.0, obs_noise=0.0)
    for _ in range(150):
        obs, _, terminated, _, _ = env.step(torch.zeros(8, 12))
        assert not terminated.any()
    height = env.physics.qpos[:, 2]
    assert ((height > 0.27) & (height < 0.33)).all(), height
    gravity = obs["policy"][:, 3:6]
    assert (gravity[:, 2] < -0.99).all()


def test_randomized_mass_takes_effect():
    """Per-env model parameters are per env: a heavier base sits lower on the same PD gains."""
    fixed = dict(push_velocity=0.0, init_base_vel=0.0, init_joint_noise=0.0, kp_scale=(1.0, 1.0),
                 kd_scale=(1.0, 1.0), motor_strength=(1.0, 1.0), friction=(1.0, 1.0), obs_noise=0.0)
    env = make_env("mujoco", TASK, 2, seed=0, **fixed)
    mass = env.physics.model_field("body_mass")
    base = env.task.base_id
    mass[0, base] -= 1.0
    mass[1, base] += 4.0
    env.physics.set_model_field("body_mass", mass)
    for _ in range(100):
        env.step(torch.zeros(2, 12))
    light, heavy = env.physics.qpos[:, 2].tolist()
    assert heavy < light - 0.005, (light, heavy)
    assert env.physics.models[0].body_mass[base] != env.physics.models[1].body_mass[base]


def test_observation_terms_match_between_numpy_and_torch():
    """The deploy runtime evaluates the same term functions on numpy arrays."""
    rng = np.random.default_rng(0)
    q = rng.normal(size=(5, 4))
    q /= np.linalg.norm(q, axis=-1, keepdims=True)
    signals = {"imu_quat": q, "imu_gyro": rng.normal(size=(5, 3)), "joint_pos": rng.normal(size=(5, 12)),
               "joint_vel": rng.normal(size=(5, 12)), "command": rng.normal(size=(5, 3)),
               "last_action": rng.normal(size=(5, 12)), "default_pose": rng.normal(size=12)}
    terms = [ObsTerm("base_ang_vel", 3, 0.25), ObsTerm("projected_gravity", 3),
             ObsTerm("velocity_commands", 3, (2.0, 2.0, 0.25)), ObsTerm("joint_pos_rel", 12, clip=1.0),
             ObsTerm("joint_vel", 12, 0.05), ObsTerm("last_action", 12)]
    as_np = compute_obs(terms, signals)
    as_torch = compute_obs(terms, {k: torch.as_tensor(v) for k, v in signals.items()})
    assert isinstance(as_np, np.ndarray) and as_np.shape == (5, 45)
    np.testing.assert_allclose(as_np, as_torch.numpy(), atol=1e-12)
    # projected gravity == R(q)^T (0, 0, -1), against MuJoCo's own quaternion rotation
    for i in range(5):
        expect = np.zeros(3)
        neg = np.zeros(4)
        mujoco.mju_negQuat(neg, q[i])
        mujoco.mju_rotVecQuat(expect, np.array([0.0, 0.0, -1.0]), neg)
        np.testing.assert_allclose(projected_gravity({"imu_quat": q[i:i + 1]})[0], expect, atol=1e-12)
        np.testing.assert_allclose(quat_rotate_inverse(q[i:i + 1], np.array([[0.0, 0, -1]]))[0], expect, atol=1e-12)
    assert set(TERM_FUNCTIONS) >= {t.name for t in terms}


def test_policy_obs_only_uses_robot_signals():
    """Every actor term is computable from what a deploy node receives."""
    from ctrl_rl.robots.terms import ROBOT_SIGNALS

    env = make_env("mujoco", TASK, 2, seed=0)
    signals = env.task.signals(env.physics)
    robot_only = {k: v for k, v in signals.items() if k in ROBOT_SIGNALS}
    obs = compute_obs(env.task.obs_terms["policy"], robot_only)
    assert obs.shape == (2, env.obs_dims["policy"])


def test_sensors_are_one_snapshot_of_the_state():
    """After a reset the sensors read the new state exactly; after a step they are the
    snapshot MuJoCo takes at the start of the last physics substep (5 ms earlier)."""
    env = make_env("mujoco", TASK, 3, seed=1)
    gen = torch.Generator().manual_seed(1)
    for _ in range(20):
        env.step(torch.randn(3, 12, generator=gen) * 0.5)
    phys, task = env.physics, env.task
    phys.write_rows(torch.ones(3, dtype=torch.bool), phys.qpos.clone(), phys.qvel.clone())
    s = task.signals(phys)
    qpos, qvel = phys.qpos.float(), phys.qvel.float()
    exact = dict(atol=1e-6, rtol=0)
    torch.testing.assert_close(s["imu_quat"], qpos[:, 3:7], **exact)
    torch.testing.assert_close(s["base_height"][:, 0], qpos[:, 2], **exact)
    torch.testing.assert_close(s["imu_gyro"], qvel[:, 3:6], **exact)  # free-joint angular velocity: body frame
    torch.testing.assert_close(s["joint_pos"], qpos[:, task.qadr], **exact)
    torch.testing.assert_close(s["joint_vel"], qvel[:, task.vadr], **exact)
    env.step(torch.zeros(3, 12))
    s = task.signals(phys)
    moved = phys.qpos[:, task.qadr].float() - s["joint_pos"]
    assert moved.abs().max() > 0, "sensors equal the post-step state: not the substep snapshot"
    # the last substep's motion, ~ dt * velocity (plus one dt of acceleration)
    torch.testing.assert_close(moved, 0.005 * phys.qvel[:, task.vadr].float(), atol=2e-3, rtol=0)


def test_user_robot_yaml(tmp_path):
    """A user's MJCF + robot YAML (as for a Menagerie model) works through task.kwargs.robot."""
    xml = (ROBOTS_DIR / "assets" / "quadruped.xml").read_text().replace('name="trunk"', 'name="base"', 1)
    (tmp_path / "my_quad.xml").write_text(xml)
    text = (ROBOTS_DIR / "ctrl_quad.yaml").read_text()
    text = text.replace("mjcf: assets/quadruped.xml", "mjcf: my_quad.xml")
    text = text.replace("base_body: trunk", "base_body: base")
    (tmp_path / "my_quad.yaml").write_text(text.replace("name: ctrl_quad", "name: my_quad"))
    env = make_env("mujoco", TASK, 2, seed=0, robot=str(tmp_path / "my_quad.yaml"))
    env.step(torch.zeros(2, 12))
    assert env.task.robot.name == "my_quad"


def test_robot_config_errors(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text((ROBOTS_DIR / "ctrl_quad.yaml").read_text().replace("kp: [35.0]", "kp: [1, 2, 3, 4, 5]"))
    with pytest.raises(ValueError, match="kp has 5 values"):
        RobotConfig.from_yaml(bad)
    text = (ROBOTS_DIR / "ctrl_quad.yaml").read_text()
    text = text.replace("mjcf: assets/", f"mjcf: {ROBOTS_DIR}/assets/")
    bad.write_text(text.replace("FR_hip_joint,", "FR_hipjoint,"))
    cfg = RobotConfig.from_yaml(bad)
    with pytest.raises(ValueError, match="FR_hipjoint"):
        build_model(cfg)
    with pytest.raises(ValueError, match="unknown robot"):
        load_robot("no_such_robot")
    bad.write_text(text.replace("action_scale: 0.25", "action_scale: [0.25, 0.25, -0.1]"))
    with pytest.raises(ValueError, match="action_scale must be finite and >= 0"):
        RobotConfig.from_yaml(bad)
    bad.write_text(text.replace("action_scale: 0.25", "action_scale: [0.25, 0.25, 0.25, 0.1, 0.1, 0.1, "
                                "0.1, 0.1, 0.1, 0.1, 0.1, 0.1]"))  # the front right leg unlike the left
    with pytest.raises(ValueError, match=r"mirrored joints \[\['FR_hip_joint', 'FL_hip_joint'\]"):
        RobotConfig.from_yaml(bad)
    bad.write_text(text + "stand_up_stiffness: 20\n")
    with pytest.raises(ValueError, match=r"stand_up_stiffness must be in \[1, 10\] \(x kp while the node"):
        RobotConfig.from_yaml(bad)
    bad.write_text(text + "action_joints: [FR_.*, .*_elbow]\n")
    with pytest.raises(ValueError, match=r"action_joints \['.\*_elbow'\] match none of joint_names"):
        RobotConfig.from_yaml(bad)
    bad.write_text(text + "action_joints: [FR_.*]\n")  # the right front leg acts, its mirror twin does not
    with pytest.raises(ValueError, match=r"mirrored joints .* differ in action_scale or action_joints"):
        RobotConfig.from_yaml(bad)
    with pytest.raises(ValueError, match="no parameter 'frictoin'"):
        make_env("mujoco", TASK, 2, frictoin=(0.5, 1.0))
    with pytest.raises(ValueError, match="unknown reward term"):
        make_env("mujoco", TASK, 2, rewards={"feet_airtime": 1.0})


def test_pd_actuators_follow_config():
    robot = load_robot("ctrl_quad")
    model, layout = build_model(robot)
    assert model.nu == 12
    np.testing.assert_allclose(model.actuator_gainprm[:, 0], robot.kp)
    np.testing.assert_allclose(-model.actuator_biasprm[:, 2], robot.kd)
    np.testing.assert_allclose(model.actuator_forcerange[:, 1], robot.torque_limits)
    for joint in robot.joint_names:
        assert layout[f"{joint}_torque"].stop - layout[f"{joint}_torque"].start == 1


def test_evaluation_metrics_count_each_env_until_its_episode_ends():
    from ctrl_rl.runners.episodes import run_episodes, zero_policy

    env = make_env("mujoco", TASK, 4, seed=0, fixed_command=(0.5, 0.0, 0.0), **SHORT)
    metrics: dict[str, float] = {}
    returns, lengths = run_episodes(env, zero_policy(env), seed=0, metrics=metrics)
    assert metrics["terminated"] == 0 and (lengths == env.max_episode_length).all()
    assert abs(metrics["forward_velocity"]) < 0.2  # standing still
    assert metrics["lin_vel_error"] == pytest.approx(0.5, abs=0.2)  # ... while asked for 0.5 m/s


def test_export_carries_robot_metadata_and_obs_recompute_with_numpy(tmp_path):
    """The bundle holds the obs layout and action mapping; numpy + the bundle's term list
    rebuild the env's policy observation from robot signals alone; the clip is in the graph."""
    from ctrl_rl.app.export import export
    from ctrl_rl.app.train import train
    from ctrl_rl.deploy.runtime import OnnxPolicy
    from ctrl_rl.robots.terms import ROBOT_SIGNALS

    run = train(["task=quadruped_velocity_flat", "env.num_envs=8", "algo.num_steps_per_env=8",
                 "runner.max_iterations=1", "algo.actor_hidden=[16]", "algo.critic_hidden=[16]",
                 "runner.progress=false", f"runner.log_root={tmp_path}"])
    bundle = OnnxPolicy(export(str(run), []))
    meta = bundle.metadata
    robot = load_robot("ctrl_quad")
    assert meta["joint_names"] == list(robot.joint_names) and meta["default_pose"] == list(robot.default_pose)
    assert meta["kp"] == list(robot.kp) and meta["action_scale"] == robot.action_scale
    assert meta["control_dt"] == pytest.approx(0.02) and meta["decimation"] == 4
    assert sum(t["dim"] for t in meta["obs_terms"]) == meta["obs_dims"]["policy"] == 45

    env = make_env("mujoco", TASK, 3, seed=4, obs_noise=0.0)
    obs, *_ = env.step(torch.randn(3, 12, generator=torch.Generator().manual_seed(0)))
    signals = {k: v.double().numpy() for k, v in env.task.signals(env.physics).items() if k in ROBOT_SIGNALS}
    terms = [ObsTerm.from_dict(t) for t in meta["obs_terms"]]
    np.testing.assert_allclose(compute_obs(terms, signals), obs["policy"].numpy(), atol=1e-5)

    huge = np.full((2, 45), 1e4, dtype=np.float32) * np.array([[1.0], [-1.0]], dtype=np.float32)
    actions = bundle(huge)
    assert np.abs(actions).max() <= meta["action_clip"] == 10.0


@pytest.mark.parametrize("task", [TASK, "humanoid_velocity_flat", "quadruped_velocity_rough"])
def test_a_step_nothing_moved_after_reuses_its_observation_bit_exactly(task):
    """When no env ended and no push landed, ``MjVecEnv.step`` returns the observation it read for
    ``final_obs`` instead of reading it again: the same bits as reading it again, across ends and pushes."""
    kw = {"episode_length_s": 0.4, "push_interval_s": 0.1, "push_velocity": 0.5}
    if task == "quadruped_velocity_rough":
        kw["terrain"] = {"num_rows": 2, "num_cols": 2}
    fast, slow, silent = (make_env("mujoco", task, 4, seed=3, **kw) for _ in range(3))
    perturb, silent_perturb = slow.task.perturb, silent.task.perturb
    slow.task.perturb = lambda *a: perturb(*a) or True  # always observe again

    def says_nothing(*a) -> None:  # a hook that returns no answer: observed again
        silent_perturb(*a)

    silent.task.perturb = says_nothing
    gen = torch.Generator().manual_seed(0)
    reused = 0
    for _ in range(45):
        a = torch.rand(4, fast.action_dim, generator=gen) * 2 - 1
        (o1, r1, te1, tr1, i1), (o2, r2, te2, tr2, i2) = fast.step(a), slow.step(a)
        reused += o1 is i1["final_obs"]
        o3, *_, i3 = silent.step(a)
        assert o3 is not i3["final_obs"]
        assert torch.equal(r1, r2) and torch.equal(te1, te2) and torch.equal(tr1, tr2)
        for g in o2:
            assert torch.equal(o1[g], o2[g]) and torch.equal(i1["final_obs"][g], i2["final_obs"][g])
    assert reused > 10  # the shortcut was taken, not only the full path
