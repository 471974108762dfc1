"""Recurrent PPO: trajectories, hidden-state resets, the truncation bootstrap's state, sequence
minibatches against collection, and the recurrent bundle through export and the runtime."""

import math

import numpy as np
import pytest
import torch

from ctrl_rl.algos.ppo import PPO
from ctrl_rl.config_onpolicy import PPOConfig
from ctrl_rl.nets.memory import Memory, split_trajectories, through_memory, trajectories, unpad
from ctrl_rl.sims import make_env
from ctrl_rl.storage.rollout import env_minibatches


def test_trajectories_split_pad_and_unpad_by_hand():
    # env 0 ends an episode after step 1; env 1 runs through: trajectories [0, 1], [2, 3] and [0..3]
    dones = torch.tensor([[False, False], [True, False], [False, False], [False, False]])
    traj = trajectories(dones)
    assert traj.masks.T.tolist() == [[True, True, False, False], [True, True, False, False], [True] * 4]
    assert traj.from_start.tolist() == [True, False, True]
    assert traj.env.tolist() == [0, 0, 1]
    x = torch.tensor([[0.0, 10.0], [1.0, 11.0], [2.0, 12.0], [3.0, 13.0]])[..., None]  # [T, envs, 1]
    padded = split_trajectories(x, traj)[..., 0]
    assert padded.T.tolist() == [[0, 1, 0, 0], [2, 3, 0, 0], [10, 11, 12, 13]]
    assert torch.equal(unpad(split_trajectories(x, traj), traj), x)


def half_gru() -> Memory:
    """A 1-unit GRU with h' = (tanh(x) + h) / 2: every weight zero but the candidate's input weight."""
    m = Memory(1, "gru", 1, 1, normalize_obs=False)
    with torch.no_grad():
        for p in m.rnn.parameters():
            p.zero_()
        m.rnn.weight_ih_l0[2, 0] = 1.0  # rows: reset, update, new gate
    return m


def test_hidden_state_resets_at_episode_ends_and_final_obs_sees_the_state_before_it():
    x = math.atanh(0.5)  # tanh(x) = 1/2
    m = half_gru()
    obs = torch.full((5, 1, 1), x)  # T + 1 = 5 rows, one env
    dones = torch.tensor([[False], [True], [False], [False]])  # the episode ends after step 1
    final = torch.full((4, 1, 1), math.atanh(-0.5))
    with torch.no_grad():
        feats, finals, end = m.rollout(obs, torch.zeros(1, 1, 1), dones, final)
    # h: 0 -> 1/4 -> 3/8 | reset -> 1/4 -> 3/8 -> 7/16
    assert feats[:, 0, 0].tolist() == pytest.approx([0.25, 0.375, 0.25, 0.375, 0.4375])
    # the ended episode's final observation is read with its state after step 1 (3/8), not the reset's 0
    assert float(finals[1, 0, 0]) == pytest.approx((-0.5 + 0.375) / 2)
    assert float(end[0, 0, 0]) == pytest.approx(0.375)  # the next rollout starts where step 3 left it


@pytest.mark.parametrize("rnn", ["lstm", "gru"])
def test_sequence_minibatches_reproduce_collection_exactly(rnn):
    """Trajectory minibatches through the memory give the very means and values of the rollout, with
    episodes ending inside it and start states carried from the previous rollout."""
    cfg = PPOConfig(rnn_type=rnn, rnn_hidden_size=8, rnn_num_layers=2, num_steps_per_env=16, num_minibatches=2,
                    actor_hidden=[16], critic_hidden=[16], normalize_obs=False)
    env = make_env("torch", "pendulum", 6, seed=0, observe_velocity=False, max_episode_length=7)
    alg = PPO(cfg, env.obs_dims, 1, 6, "cpu", seed=0)
    obs = env.reset(seed=0)
    for _ in range(2):
        for _ in range(16):
            a = alg.act(obs)
            obs, r, te, tr, info = env.step(a)
            alg.process_step(obs, r, te, tr, info)
        alg.prepare_update()
        s = alg.storage
        assert bool(s.dones.any())
        batch = alg.source.training_batch(alg.model)
        with torch.no_grad():
            for mb in env_minibatches(batch, 16, s.dones, alg.memory.start, 2, torch.Generator().manual_seed(0)):
                through = through_memory(alg.model, mb)
                mean, _ = alg.model.actor.distribution(through.actor_obs)
                torch.testing.assert_close(mean, mb.old_mean, rtol=0, atol=1e-6)
                torch.testing.assert_close(alg.model.critic(through.critic_obs), mb.old_values, rtol=0, atol=1e-6)
        alg.update()


def test_recurrent_bootstrap_value_uses_the_pre_reset_state():
    cfg = PPOConfig(rnn_type="gru", rnn_hidden_size=4, num_steps_per_env=8, num_minibatches=1,
                    actor_hidden=[8], critic_hidden=[8], normalize_obs=False, gamma=0.9, lam=1.0)
    env = make_env("torch", "pendulum", 2, seed=1, observe_velocity=False, max_episode_length=5)
    alg = PPO(cfg, env.obs_dims, 1, 2, "cpu", seed=1)
    obs = env.reset(seed=1)
    finals = []
    for _ in range(8):
        a = alg.act(obs)
        obs, r, te, tr, info = env.step(a)
        finals.append(info["final_obs"]["policy"])
        alg.process_step(obs, r, te, tr, info)
    start = alg.memory.start["critic"].clone()
    alg.prepare_update()
    s, mem = alg.storage, alg.model.critic_memory
    # by hand: step the critic's memory, read the final obs at step 4 (truncation) before zeroing
    with torch.no_grad():
        h = start
        for t in range(5):
            _, h = mem.step(s.critic_obs[t], h)
        v_final = alg.model.critic(mem.step(finals[4], h)[0])
        adv_t4 = s.rewards[4] + 0.9 * v_final - s.values[4]  # GAE with lam=1 at a truncation: bootstrapped
    assert bool(s.dones[4].all()) and not bool(s.terminated[4].any())
    torch.testing.assert_close(s.advantages[4], adv_t4, rtol=1e-5, atol=1e-5)


def test_recurrent_export_checks_sequences_and_refuses_a_mismatch(tmp_path):
    from ctrl_rl.deploy.runtime import OnnxPolicy
    from ctrl_rl.export.onnx_policy import ExportedRecurrentPolicy, ParityError, check_sequence_parity, export_onnx
    from ctrl_rl.nets.actor_critic import GaussianActor
    from ctrl_rl.nets.memory import RecurrentPolicy

    torch.manual_seed(0)

    def policy() -> RecurrentPolicy:
        actor = GaussianActor(8, 2, [16], "elu", 1.0, "scalar", 1e-3, 10.0, False)
        return RecurrentPolicy(Memory(3, "lstm", 8, 2, normalize_obs=True), actor).eval()

    a, b = policy(), policy()
    info = export_onnx(a, 3, (-1.0, 1.0), tmp_path / "policy.onnx", {"task": "t"})
    assert info["num_probes"] >= 256 * 8 and info["max_abs_diff"] <= 1e-5
    onnx_policy = OnnxPolicy(tmp_path / "policy.onnx")
    assert onnx_policy.recurrent and onnx_policy.metadata["memory"]["shape"] == [4, 8]
    # the runtime carries the state: two calls differ from two fresh starts, reset() starts over
    obs = np.ones(3, np.float32)
    first = onnx_policy(obs)
    state = onnx_policy.state.copy()
    second = onnx_policy(obs)
    assert np.abs(onnx_policy.state - state).max() > 1e-3 and np.abs(first - second).max() > 1e-6
    onnx_policy.reset()
    np.testing.assert_allclose(onnx_policy(obs), first, atol=1e-6)
    starts = np.zeros((40, 2), bool)
    starts[[0, 20]] = True
    seq = np.random.default_rng(0).normal(size=(40, 2, 3))
    model_bytes = (tmp_path / "policy.onnx").read_bytes()
    assert check_sequence_parity(ExportedRecurrentPolicy(a, (-1.0, 1.0)), model_bytes, seq, starts, (4, 8)) < 1e-5
    with pytest.raises(ParityError, match="on a sequence"):
        check_sequence_parity(ExportedRecurrentPolicy(b, (-1.0, 1.0)), model_bytes, seq, starts, (4, 8))


@pytest.mark.parametrize("algo, extra, match", [
    ("props", [], r"algo.rnn_type: props trains feed-forward policies; use algo=ppo .*task.kwargs.history_length"),
    ("fpo", [], r"algo.rnn_type: fpo trains feed-forward policies"),
    ("ppo", ["algo.cudagraphs=true"], r"algo.cudagraphs: replays fixed shapes"),
    ("ppo", ["algo.rnn_type=rnn"], r"algo.rnn_type: must be one of: none, lstm, gru"),
    ("ppo", ["env.num_envs=2", "algo.num_minibatches=4"], r"minibatches are whole envs: 2 env\(s\) cannot fill 4"),
])
def test_recurrent_options_are_refused_with_the_fix(algo, extra, match):
    from ctrl_rl.app.configure import load_train_config
    from ctrl_rl.config import ConfigError

    with pytest.raises(ConfigError, match=match):
        load_train_config([f"algo={algo}", "task=pendulum", "algo.rnn_type=lstm", *extra])
