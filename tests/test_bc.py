"""Behavior cloning: the loss by hand, chunk heads, config and dataset errors, exact resume, and
the learning test: Gaussian and flow BC reach >= 90% of the source policy's (normalized) return."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from ctrl_rl.algos.bc import BC, gaussian_nll
from ctrl_rl.app.configure import load_train_config
from ctrl_rl.app.evaluate import evaluate
from ctrl_rl.app.export import export
from ctrl_rl.app.train import train
from ctrl_rl.config import ConfigError
from ctrl_rl.config_offline import BCConfig
from ctrl_rl.deploy.runtime import OnnxPolicy
from ctrl_rl.nets.chunk import ChunkedActor
from ctrl_rl.nets.distributions import censored_gaussian_log_prob, gaussian_log_prob
from ctrl_rl.nets.residual import LinearController
from ctrl_rl.runners.episodes import collect_dataset, run_episodes
from ctrl_rl.sims import make_env

# a well-tuned PD law on point_mass's [p - target, v]: the source policy (about -20 per episode)
EXPERT_GAIN = torch.tensor([[-10.0, 0.0, -3.0, 0.0], [0.0, -10.0, 0.0, -3.0]])
EVAL_SEED = 2024


def expert(obs):
    return (obs["policy"] @ EXPERT_GAIN.T).clamp(-1, 1)


@pytest.fixture(scope="module")
def expert_data(tmp_path_factory):
    """20 envs x 400 steps (40 episodes) of the expert with action noise 0.1."""
    env = make_env("torch", "point_mass", 20, "cpu", seed=0)
    path = tmp_path_factory.mktemp("data") / "point_mass_expert.hdf5"
    collect_dataset(env, expert, 400, seed=0, noise_std=0.1).save_hdf5(path, attrs={"task": "point_mass"})
    return path


def _returns(policy) -> float:
    env = make_env("torch", "point_mass", 100, "cpu", seed=EVAL_SEED)
    return float(run_episodes(env, policy, EVAL_SEED)[0].mean())


def test_gaussian_nll_by_hand():
    mean, std, a = torch.tensor([[0.0, 1.0]]), torch.tensor([[1.0, 2.0]]), torch.tensor([[1.0, 1.0]])
    # -log N(1|0,1) - log N(1|1,2) = (0.5 + 0.5 log 2π) + (log 2 + 0.5 log 2π)
    expected = 0.5 + math.log(2.0) + math.log(2 * math.pi)
    torch.testing.assert_close(gaussian_nll(mean, std, a), torch.tensor(expected))


@pytest.mark.parametrize(("censor", "bounds", "censored"), [(True, (-1.0, 1.0), True), (False, (-1.0, 1.0), False),
                                                           (True, None, False)])
def test_gaussian_bc_treats_actions_at_the_env_bounds_as_clipped(censor, bounds, censored):
    """``algo.censor_bounds`` (default) with an env that clips: an action at a bound scores the
    Gaussian's mass beyond it; without either, its density."""
    torch.manual_seed(0)
    bc = BC(BCConfig(actor_hidden=[8], censor_bounds=censor), {"policy": 3}, 2, 1, "cpu", action_bounds=bounds)
    obs, target = torch.randn(4, 3), torch.tensor([[1.0, 0.3], [-1.0, 0.0], [0.5, 1.0], [0.2, -0.2]])
    mean, std = bc.model.head.distribution(obs)
    plain, clipped = -gaussian_log_prob(target, mean, std), -censored_gaussian_log_prob(target, mean, std, (-1, 1))
    torch.testing.assert_close(bc.loss(obs, target), (clipped if censored else plain).mean())
    assert not torch.allclose(plain, clipped)


def test_chunked_actor_returns_the_first_action_of_its_chunk():
    inner = LinearController(torch.arange(12.0).reshape(6, 2), torch.zeros(6), None)  # k=3 chunks of 2
    actor = ChunkedActor(inner, 3, 2)
    obs = torch.randn(4, 2)
    chunk = actor.chunk(obs)
    assert chunk.shape == (4, 3, 2)
    torch.testing.assert_close(chunk.reshape(4, 6), inner(obs))
    torch.testing.assert_close(actor(obs), chunk[:, 0])


def _bc(tmp_path, data, *extra):
    return ["algo=bc", "task=point_mass", f"dataset={data}", "env.num_envs=100", "algo.num_passes=0",
            "runner.max_iterations=20",
            "runner.save_interval=10", "runner.progress=false", f"runner.log_root={tmp_path}", *extra]


@pytest.mark.parametrize("head", ["gaussian", "flow"])
def test_bc_reaches_90_percent_of_the_source_policy(tmp_path, expert_data, head):
    """Normalized score (R_bc - R_zero) / (R_expert - R_zero) >= 0.9 after 4,000 gradient steps."""
    run = train(_bc(tmp_path, expert_data, f"algo.head={head}"))
    r_bc = evaluate(str(run), [], episodes=100, seed=EVAL_SEED)["mean_return"]
    r_expert, r_zero = _returns(expert), _returns(lambda obs: torch.zeros(len(obs["policy"]), 2))
    score = (r_bc - r_zero) / (r_expert - r_zero)
    assert score >= 0.9, (r_bc, r_expert, r_zero)
    bundle = OnnxPolicy(export(str(run), []))  # parity-checked inside export
    obs = np.random.default_rng(0).normal(size=(8, 4)).astype(np.float32)
    assert bundle(obs).shape == (8, 2)


def test_bc_resume_is_exact(tmp_path, expert_data):
    full = train(_bc(tmp_path / "a", expert_data, "runner.max_iterations=4", "runner.save_interval=2",
                     "algo.updates_per_iteration=20", "algo.chunk_size=3"))
    part = train(_bc(tmp_path / "b", expert_data, "runner.max_iterations=2", "runner.save_interval=2",
                     "algo.updates_per_iteration=20", "algo.chunk_size=3"))
    resumed = train(["runner.max_iterations=4"], checkpoint=str(part / "model_2.pt"))
    a = torch.load(full / "model_4.pt", weights_only=False)["algo"]["model"]
    b = torch.load(resumed / "model_4.pt", weights_only=False)["algo"]["model"]
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_run_length_is_passes_over_the_dataset(tmp_path, expert_data):
    """``algo.num_passes``: ceil(passes x rows / (batch_size x updates_per_iteration)) iterations, so
    the run fits the dataset; 0: ``runner.max_iterations``."""
    from ctrl_rl.app.session import build_env
    from ctrl_rl.runners import make_runner

    small = ["algo.batch_size=100", "algo.updates_per_iteration=10"]
    cfg = load_train_config(_bc(tmp_path, expert_data, *small, "algo.num_passes=3"))
    runner = make_runner(build_env(cfg), cfg)
    rows = len(runner.dataset)
    assert runner.total_iterations() == -(-3 * rows // 1000)
    cfg = load_train_config(_bc(tmp_path, expert_data, *small))  # _bc sets num_passes=0
    assert make_runner(build_env(cfg), cfg).total_iterations() == 20
    default = load_train_config(["algo=bc", "task=point_mass", f"dataset={expert_data}"]).algo
    assert default.num_passes == 100 and default.eval_episodes == 16


def test_offline_evaluation_runs_eval_episodes_in_an_env_of_their_own(tmp_path, expert_data):
    """``algo.eval_episodes`` below env.num_envs: that many episodes in an env built for them, seeded
    like the training env's evaluation (so the scores equal a direct run); 0: one per training env."""
    from ctrl_rl.app.session import build_env
    from ctrl_rl.nets.actor_critic import concat_groups
    from ctrl_rl.runners import make_runner

    for n, expected_envs in ((7, 7), (0, 100), (500, 100)):
        cfg = load_train_config(_bc(tmp_path, expert_data, f"algo.eval_episodes={n}"))
        runner = make_runner(build_env(cfg), cfg, log_dir=None)
        runner.iteration = 3
        policy = runner.alg.inference_policy()
        seed = cfg.seed + 10_000 + 3
        env = make_env("torch", "point_mass", expected_envs, "cpu", seed=seed)
        returns, lengths = run_episodes(env, lambda obs, pi=policy: pi(concat_groups(obs, ["policy"])), seed=seed)
        assert runner.evaluate() == (float(returns.mean()), float(lengths.double().mean()), {})  # no episode metrics
    with pytest.raises(ConfigError, match="algo.eval_episodes: must be >= 0"):
        load_train_config(_bc(tmp_path, expert_data, "algo.eval_episodes=-1"))


def test_config_and_dataset_errors_name_the_fix(tmp_path, expert_data):
    with pytest.raises(ConfigError, match="dataset: algo=bc trains from a dataset: pass dataset=<file.hdf5 "):
        load_train_config(["algo=bc", "task=point_mass"])
    with pytest.raises(ConfigError, match="algo.head: must be one of: gaussian, flow"):
        load_train_config(["algo=bc", "algo.head=diffusion", f"dataset={expert_data}"])
    with pytest.raises(ValueError, match="4-dim observations and 2-dim actions; the policy reads 3"):
        train(_bc(tmp_path, expert_data, "task=pendulum"))
