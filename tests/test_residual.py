"""Residual PPO: the policy starts as its base exactly, chunk execution by hand, bases from a
controller / checkpoint / ONNX bundle, composed export, errors, and the learning test."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ctrl_rl.algos import make_algorithm
from ctrl_rl.algos.checkpoints import config_from_dict
from ctrl_rl.app.configure import load_train_config
from ctrl_rl.app.evaluate import evaluate
from ctrl_rl.app.export import export
from ctrl_rl.app.train import train
from ctrl_rl.config import ConfigError
from ctrl_rl.deploy.runtime import OnnxPolicy
from ctrl_rl.nets.chunk import ChunkedActor, ChunkExecutor
from ctrl_rl.nets.residual import LinearController
from ctrl_rl.runners.episodes import run_episodes
from ctrl_rl.sims import make_env

WEAK_PD = [[-0.3, 0.0, -0.5, 0.0], [0.0, -0.3, 0.0, -0.5]]  # tune/residual_point_mass.yaml's base
SMALL = ["env.num_envs=32", "algo.num_steps_per_env=8", "algo.actor_hidden=[32]", "algo.critic_hidden=[32]",
         "runner.progress=false"]


def _algo(*overrides: str):
    cfg = load_train_config(["algo=residual", "task=point_mass", *overrides])
    return make_algorithm(cfg.algo, {"policy": 4, "critic": 8}, 2, 16, "cpu", seed=0, action_bounds=(-1.0, 1.0))


def test_step_zero_reproduces_the_base_exactly():
    alg = _algo()
    base = LinearController(torch.tensor(WEAK_PD), torch.zeros(2), (-1.0, 1.0))
    obs = {"policy": torch.randn(64, 4) * 3, "critic": torch.randn(64, 8)}
    expected = base(obs["policy"])
    assert torch.equal(alg.inference_policy()(obs["policy"]), expected)  # bit-exact, not approximately
    mean, std = alg.model.actor.distribution(alg.model.actor_input(obs))
    assert torch.equal(mean, expected)
    torch.testing.assert_close(std, torch.full_like(std, 0.1))  # residual_scale x init_std
    assert not any(p.requires_grad for p in alg.model.base.parameters())


def test_chunk_executor_plays_execute_actions_then_replans():
    # a "policy" whose chunk is [obs, 2 obs, 3 obs]: every action says which obs planned it and when
    chunker = ChunkedActor(LinearController(torch.tensor([[1.0], [2.0], [3.0]]), torch.zeros(3), None), 3, 1)
    ex = ChunkExecutor(chunker, execute=2)
    seen = [ex(torch.tensor([[10.0], [20.0]])).flatten().tolist()]
    seen.append(ex(torch.tensor([[11.0], [21.0]])).flatten().tolist())  # second action of the same chunk
    ex.reset(torch.tensor([False, True]))  # env 1's episode ended
    seen.append(ex(torch.tensor([[12.0], [22.0]])).flatten().tolist())  # both replan (env 0: chunk used up)
    seen.append(ex(torch.tensor([[13.0], [23.0]])).flatten().tolist())
    assert seen == [[10.0, 20.0], [20.0, 40.0], [12.0, 22.0], [24.0, 44.0]]
    assert ChunkExecutor(chunker, execute=0).execute == 3 and ChunkExecutor(chunker, execute=1).stateless


@pytest.mark.slow
def test_residual_ppo_improves_a_weak_pd_base(tmp_path):
    """Weak PD base (about -55) -> at least 15 better within 40 iterations (328k env steps)."""
    env = make_env("torch", "point_mass", 100, "cpu", seed=2024)
    base = LinearController(torch.tensor(WEAK_PD), torch.zeros(2), (-1.0, 1.0))
    r_base = float(run_episodes(env, lambda o: base(o["policy"]), 2024)[0].mean())
    run = train(["algo=residual", "task=point_mass", "runner.max_iterations=40", "runner.progress=false",
                 f"runner.log_root={tmp_path}"])
    r = evaluate(str(run), [], episodes=100, seed=2024)["mean_return"]
    assert r >= r_base + 15.0, (r_base, r)


def test_checkpoint_and_onnx_bases_export_composed(tmp_path):
    """A PPO checkpoint as the base (torch export of the whole), then that run's ONNX bundle as the
    base (graph splice): both bundles reproduce the torch residual policy."""
    base_run = train(["task=point_mass", "runner.max_iterations=2", f"runner.log_root={tmp_path}", *SMALL])
    base_bundle = export(str(base_run), [])
    obs = np.random.default_rng(0).normal(size=(32, 4)).astype(np.float32) * 2
    for base in (str(base_run), str(base_bundle)):
        run = train(["algo=residual", "task=point_mass", f"algo.base={base}", "runner.max_iterations=2",
                     f"runner.log_root={tmp_path}", "algo.residual_scale=1.0", *SMALL])
        state = torch.load(run / "model_2.pt", weights_only=False)
        cfg = config_from_dict(state["config"])
        alg = make_algorithm(cfg.algo, state["obs_dims"], 2, 1, "cpu", inference_only=True)
        alg.load_state_dict(state["algo"], restore_rng=False)
        policy = alg.inference_policy()
        with torch.no_grad():
            base_only = OnnxPolicy(base_bundle)(obs)
            expected = policy(torch.as_tensor(obs)).clamp(-1, 1).numpy()
        assert np.abs(expected - base_only).max() > 1e-3  # the residual has moved off its base
        np.testing.assert_allclose(OnnxPolicy(export(str(run), []))(obs), expected, atol=1e-5)


def test_bad_bases_name_the_fix(tmp_path):
    with pytest.raises(ConfigError, match="algo.base=linear needs the gain matrix"):
        load_train_config(["algo=residual", "algo.base=linear"])
    with pytest.raises(ValueError, match=r"algo.base_gain is \(1, 3\); this task needs \[2, 4\]"):
        _algo("algo.base=linear", "algo.base_gain=[[1,2,3]]")
    run = train(["task=pendulum", "runner.max_iterations=1", f"runner.log_root={tmp_path}", *SMALL])
    with pytest.raises(ValueError, match="train the base on this task"):
        _algo(f"algo.base={run}")
