"""The gait recipe's late polish in one run: ``task.kwargs.polish_rewards`` from ``polish_start`` control steps
(Isaac Lab's ``modify_reward_weight``) and ``algo.polish_max_std`` from ``algo.polish_start`` updates."""

from __future__ import annotations

import pytest
import torch

from ctrl_rl.algos.ppo import PPO
from ctrl_rl.config import ConfigError
from ctrl_rl.config_onpolicy import PPOConfig
from ctrl_rl.nets.actor_critic import GaussianActor
from ctrl_rl.tasks.locomotion.velocity_config import VelocityTaskConfig
from ctrl_rl.tasks.rewards import switched_weights, weighted_sum


def test_switched_weights_by_hand():
    terms = {"a": torch.tensor([1.0, 2.0]), "b": torch.tensor([10.0, 10.0])}
    base, scales = {"a": 0.0, "b": -1.0}, {"b": 0.5}
    for on, want in ((0.0, [-5.0, -5.0]), (1.0, [-3.0 - 2.5, -6.0 - 2.5])):
        # a: 0 -> -3 when on; b: -1 (ramped by 0.5) -> -0.5 x 0.5 when on
        w, s = switched_weights(base, {"a": -3.0, "b": -0.5}, torch.tensor(on), scales)
        reward, _ = weighted_sum(terms, w, ["a", "b"], 1.0, 2, torch.device("cpu"), scales=s)
        assert reward.tolist() == pytest.approx(want)
    assert base == {"a": 0.0, "b": -1.0} and scales == {"b": 0.5}  # the task's own weights are left as they were


def test_cap_std_clamps_and_lifting_it_gives_the_learned_std_back():
    actor = GaussianActor(3, 2, [8], "elu", init_std=1.0, std_type="scalar", min_std=0.01, max_std=2.0,
                          normalize_obs=False)
    obs = torch.zeros(4, 3)
    actor.cap_std(0.1)
    assert actor.distribution(obs)[1].max().item() == pytest.approx(0.1)
    actor.cap_std(5.0)  # never above max_std
    assert actor.distribution(obs)[1].max().item() == pytest.approx(1.0)
    assert "log_std_cap" not in actor.state_dict()  # set by the learner's schedule, not stored


def _ppo(**kw) -> PPO:
    cfg = PPOConfig(num_steps_per_env=4, num_minibatches=1, num_learning_epochs=1, init_std=1.0, **kw)
    return PPO(cfg, {"policy": 3}, 2, num_envs=2, device="cpu")


def _update(ppo: PPO) -> None:
    for _ in range(ppo.cfg.num_steps_per_env):
        obs = {"policy": torch.randn(2, 3)}
        ppo.act(obs)
        ppo.process_step(obs, torch.randn(2), torch.zeros(2, dtype=torch.bool), torch.zeros(2, dtype=torch.bool), {})
    ppo.prepare_update()
    ppo.update()


def test_ppo_caps_the_std_from_polish_start_and_after_a_resume():
    ppo = _ppo(polish_max_std=0.1, polish_start=2)
    std = lambda p: float(p.model.actor.distribution(torch.zeros(1, 3))[1].max().detach())  # noqa: E731
    assert std(ppo) > 0.5
    _update(ppo)
    assert std(ppo) > 0.5  # one update done: the second rollout still explores
    _update(ppo)
    assert std(ppo) == pytest.approx(0.1)  # from the third rollout on (iteration polish_start + 1)
    resumed = _ppo(polish_max_std=0.1, polish_start=2)
    resumed.load_state_dict(ppo.state_dict())
    assert std(resumed) == pytest.approx(0.1)
    assert resumed.num_updates == 2


def test_polish_settings_are_checked():
    with pytest.raises(ConfigError, match="algo.polish_max_std"):
        PPOConfig(polish_max_std=20.0)
    with pytest.raises(ConfigError, match="algo.polish_start.*needs algo.polish_max_std"):
        PPOConfig(polish_start=10)
    with pytest.raises(ValueError, match=r"polish_rewards: unknown reward term\(s\) \['smoothnes'\]"):
        VelocityTaskConfig.from_kwargs(polish_rewards={"smoothnes": -0.3})
    with pytest.raises(ValueError, match="polish_start must be >= 0 and needs task.kwargs.polish_rewards"):
        VelocityTaskConfig.from_kwargs(polish_start=100)


def test_both_halves_of_the_polish_must_start_together():
    from ctrl_rl.app.configure import load_train_config

    base = ["task=quadruped_velocity_flat", "algo.polish_max_std=0.1", "algo.polish_start=500",
            "+task.kwargs.polish_rewards={action_smoothness: -0.3}"]
    with pytest.raises(ConfigError, match=r"algo.polish_start x algo.num_steps_per_env = 12000"):
        load_train_config([*base, "+task.kwargs.polish_start=1000"])
    load_train_config([*base, "+task.kwargs.polish_start=12000"])
    derived = load_train_config([*base, "algo.num_steps_per_env=8"])  # left out: derived from the learner's
    assert derived.task.kwargs["polish_start"] == 4000


def test_the_polish_weight_switches_at_polish_start():
    """``polish_rewards={action_smoothness: -1}`` from control step 5: its logged term is 0 before and the
    switched weight x step_dt x the term after; legged_gym's terms are the same as without the polish."""
    from ctrl_rl.sims import make_env

    kw = {"robot": "ctrl_quad", "obs_noise": 0.0, "push_velocity": 0.0, "gait_terms_ramp_steps": 0}
    polished = make_env("mujoco", "quadruped_velocity_flat", 2, seed=3, polish_rewards={"action_smoothness": -1.0},
                        polish_start=5, **kw)
    plain = make_env("mujoco", "quadruped_velocity_flat", 2, seed=3, **kw)
    gen = torch.Generator().manual_seed(0)
    for k in range(1, 10):  # step k sees k - 1 earlier steps
        action = 0.3 * torch.randn(2, polished.action_dim, generator=gen)
        log_p, log_f = polished.step(action)[4]["log"], plain.step(action)[4]["log"]
        smooth = float(log_p["Reward/action_smoothness"])
        assert (smooth == 0.0) if k <= 5 else (smooth < 0.0), (k, smooth)
        torch.testing.assert_close(log_p["Reward/track_lin_vel_xy"], log_f["Reward/track_lin_vel_xy"])
        assert "Reward/action_smoothness" not in log_f


def test_the_polish_filter_switches_on_at_polish_start():
    """``polish_action_filter=0.5`` from control step 3: steps 1-3 apply the policy's action, later steps
    ``0.5 action + 0.5 last applied`` (the first-order filter of ``robots/action_filter.py``)."""
    from ctrl_rl.sims import make_env

    env = make_env("mujoco", "quadruped_velocity_flat", 2, seed=3, robot="ctrl_quad", obs_noise=0.0,
                   push_velocity=0.0, polish_action_filter=0.5, polish_start=3)
    gen = torch.Generator().manual_seed(0)
    last = torch.zeros(2, env.action_dim)
    for k in range(1, 7):
        action = (0.3 * torch.randn(2, env.action_dim, generator=gen)).clamp(-1, 1)
        env.step(action)
        want = action if k <= 3 else 0.5 * action + 0.5 * last
        torch.testing.assert_close(env.task.last_action, want)
        last = want


def test_a_checkpoint_runs_as_it_last_trained():
    """Inference (eval, export, play) takes a checkpoint from after the polish's start with the polish's filter
    and weights, one from before it as without the polish."""
    from ctrl_rl.app.configure import load_train_config
    from ctrl_rl.app.session import as_polished

    cfg = load_train_config(["task=quadruped_velocity_flat", "algo.polish_max_std=0.1", "algo.polish_start=500",
                             "+task.kwargs.polish_rewards={action_smoothness: -0.3}",
                             "+task.kwargs.polish_action_filter=0.5", "+task.kwargs.polish_start=12000"])
    before, after = as_polished(cfg, {"iteration": 500}), as_polished(cfg, {"iteration": 501})
    assert not any(k.startswith("polish") for k in (*before.task.kwargs, *after.task.kwargs))
    assert before.task.kwargs.get("action_filter", 0.0) == 0.0
    assert "action_smoothness" not in before.task.kwargs.get("rewards", {})
    assert after.task.kwargs["action_filter"] == 0.5 and after.task.kwargs["rewards"]["action_smoothness"] == -0.3
    assert as_polished(load_train_config(["task=quadruped_velocity_flat"]), {"iteration": 9}).task.kwargs == \
        load_train_config(["task=quadruped_velocity_flat"]).task.kwargs


def test_the_recipe_polishes_in_one_run_and_its_bundle_carries_the_filter(tmp_path):
    """The preset's polish at a tiny size (16 envs, 3 iterations, from update 2): the run caps the std at its
    third iteration, and the exported bundle's ``action_filter`` is the polish's, which the node then applies."""
    import json
    import subprocess
    import sys

    import onnx

    cmd = [sys.executable, "-m", "ctrl_rl", "train", "task=quadruped_velocity_flat",
           "tune=ppo_quadruped_velocity_flat_fast", "env.num_envs=16", "runner.max_iterations=3", "algo.compile=false",
           "algo.polish_start=2", "task.kwargs.polish_start=48", "threads=1"]
    out = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "std is capped at 0.1 from iteration 3" in out.stderr + out.stdout
    (model,) = tmp_path.glob("logs/ppo/quadruped_velocity_flat/*/model_3.pt")
    out = subprocess.run([sys.executable, "-m", "ctrl_rl", "export", str(model)], cwd=tmp_path, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0 and "it runs with it (action_filter=0.5)" in out.stdout, out.stderr[-2000:]
    meta = {p.key: p.value for p in onnx.load(model.parent / "exported" / "policy.onnx").metadata_props}
    assert json.loads(meta["action_filter"]) == 0.5
