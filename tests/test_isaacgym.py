"""sim=isaacgym: the legged_gym adapter on the stand-in (legged_gym's buffers and step/reset order)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from legged_gym_standin import DEFAULT_ANGLES, JOINTS, StandInLeggedRobot, legged_cfg

from ctrl_rl.app.export import export
from ctrl_rl.app.train import train
from ctrl_rl.sims import make_env

TASK = "legged_standin"


def test_the_adapter_passes_the_vecenv_conformance_suite() -> None:
    from vecenv_conformance import check_vecenv

    def standin(**kw):
        return lambda n, seed: make_env("isaacgym", TASK, n, seed=seed, **{"env": {"episode_length_s": 0.4}, **kw})

    # time-outs every 20 steps; the twin with a time limit that never hits gives the true last observation
    check_vecenv(standin(), num_envs=4, seed=2, make_untruncated=standin(env={"episode_length_s": 1e6}))


def test_final_obs_of_a_fall_equals_a_twin_that_is_not_reset() -> None:
    env = make_env("isaacgym", TASK, 4, seed=0)
    assert env.final_obs_source == "hook"
    push = torch.zeros(4, 12)
    push[:2, 0::3] = 4.0  # the hips of envs 0 and 1 pushed out: they lean over and fall
    for _ in range(200):
        state = env.get_state()
        obs, _, terminated, truncated, info = env.step(push)
        if terminated.any():
            break
    assert terminated.tolist() == [True, True, False, False] and not truncated.any()
    cfg = legged_cfg()
    cfg.env.num_envs = 4
    twin = StandInLeggedRobot(cfg)
    twin.set_state(state["task"])
    torch.set_rng_state(state["rng"]["cpu"])
    twin.reset_idx = lambda env_ids: None  # the same step, without legged_gym's reset
    twin.step(push)
    torch.testing.assert_close(info["final_obs"]["policy"][:2], twin.obs_buf[:2], rtol=0, atol=0)
    torch.testing.assert_close(info["final_obs"]["critic"][:2], twin.privileged_obs_buf[:2], rtol=0, atol=0)
    assert not torch.equal(obs["policy"][:2], twin.obs_buf[:2])  # the returned obs are the new episodes'
    torch.testing.assert_close(info["final_obs"]["policy"][2:], obs["policy"][2:], rtol=0, atol=0)


def test_stagger_moves_legged_gyms_own_step_counter() -> None:
    """``runner.stagger_episodes`` (legged_gym's ``init_at_random_ep_len``): ``episode_length_buf``, which the
    task's time-outs read, and the adapter's episode lengths start at one random step each, from a generator
    seeded with the env: the first time-outs come apart, each reported at a full episode's length."""
    def first_time_outs(seed: int) -> torch.Tensor:
        env = make_env("isaacgym", TASK, 16, seed=seed, env={"episode_length_s": 0.4})
        assert env.supports_stagger
        env.stagger_episodes()
        assert torch.equal(env.env.episode_length_buf, env.episode_length)
        ends = torch.zeros(16, dtype=torch.long)
        for t in range(1, env.max_episode_length + 2):
            _, _, terminated, truncated, info = env.step(torch.zeros(16, 12))
            assert not terminated.any()
            # legged_gym times out once episode_length_buf exceeds max_episode_length: an episode that starts
            # from a reset inside a step (buf 0) lasts max + 1 steps, as every one after the first does
            assert (info["episode"]["length"][truncated] == env.max_episode_length + 1).all()
            ends = torch.where(truncated & (ends == 0), t, ends)
        return ends

    ends = first_time_outs(0)
    assert bool((ends >= 1).all()) and len(ends.unique()) >= 8, ends.tolist()
    assert torch.equal(first_time_outs(0), ends)


def test_time_outs_are_truncations_and_episode_terms_reach_the_log() -> None:
    env = make_env("isaacgym", TASK, 2, seed=0, env={"episode_length_s": 0.2})
    for _ in range(30):
        _, _, terminated, truncated, info = env.step(torch.zeros(2, 12))
        if truncated.any():
            break
    assert truncated.all() and not terminated.any()
    assert set(info["log"]) == {"Episode_Reward/rew_tracking_lin_vel", "Episode_Reward/rew_action_rate",
                                "Episode_Reward/rew_termination"}
    assert info["episode"]["length"].tolist() == [env.max_episode_length, env.max_episode_length]


def test_task_kwargs_reach_the_config_and_unknown_fields_are_named() -> None:
    env = make_env("isaacgym", TASK, 2, seed=0, **{"control.action_scale": 0.5, "terrain": {"mesh_type": "trimesh"}})
    assert env.env.cfg.control.action_scale == 0.5 and env.env.cfg.terrain.mesh_type == "trimesh"
    with pytest.raises(ValueError, match=r"task.kwargs.terrain.mesh_typo: the task's config has no such field"):
        make_env("isaacgym", TASK, 2, seed=0, terrain={"mesh_typo": "plane"})
    with pytest.raises(ValueError, match="only position control"):
        make_env("isaacgym", TASK, 2, seed=0, control={"control_type": "T"}).deploy_metadata()


def test_train_export_and_the_bundle_a_node_would_serve(tmp_path) -> None:
    from ctrl_rl.deploy.robot_policy import RobotPolicy

    run = train(["sim=isaacgym", f"task={TASK}", "env.num_envs=8", "algo.num_steps_per_env=8",
                 "runner.max_iterations=2", "runner.progress=false", "algo.actor_hidden=[32]",
                 "algo.critic_hidden=[32]", "+task.kwargs.control.action_scale=0.3", f"runner.log_root={tmp_path}"])
    bundle = export(str(run), [])  # the ONNX graph checked against torch on recorded observations
    rp = RobotPolicy(bundle)
    meta = rp.policy.metadata
    assert rp.joint_names == JOINTS and meta["source"] == "isaacgym"
    np.testing.assert_allclose(rp.default_pose, [DEFAULT_ANGLES[j] for j in JOINTS])
    np.testing.assert_allclose(rp.kp, 20.0)
    np.testing.assert_allclose(rp.kd, 0.5)
    assert rp.action_scale == pytest.approx(0.3) and rp.control_dt == pytest.approx(0.02) and meta["decimation"] == 4
    assert [t.name for t in rp.terms] == ["base_ang_vel", "projected_gravity", "velocity_commands", "joint_pos_rel",
                                          "joint_vel", "last_action"]
    signals = {"imu_quat": [1.0, 0, 0, 0], "imu_gyro": np.zeros(3), "joint_pos": rp.default_pose,
               "joint_vel": np.zeros(12), "command": np.array([0.5, 0.0, 0.0])}
    targets = rp.step(signals)
    assert targets.shape == (12,) and np.all(np.isfinite(targets))
