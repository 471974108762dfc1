"""Uni-O4: dynamics ensemble, OPE acceptance, the offline -> online hand-over, one curve, exact
resume in both phases, export of the offline policy, and config/dataset errors."""

from __future__ import annotations

import csv
import dataclasses
import shutil

import numpy as np
import pytest
import torch

from ctrl_rl.algos.uni_o4 import UniO4
from ctrl_rl.app.configure import load_train_config
from ctrl_rl.app.export import export
from ctrl_rl.app.session import build_env
from ctrl_rl.app.train import train
from ctrl_rl.config import ConfigError
from ctrl_rl.deploy.runtime import OnnxPolicy
from ctrl_rl.nets.dynamics import DynamicsEnsemble
from ctrl_rl.runners import make_runner
from ctrl_rl.runners.episodes import collect_dataset, random_policy
from ctrl_rl.runners.offline_to_online import best_candidate
from ctrl_rl.storage.dataset import Dataset

TINY = ["env.num_envs=8", "algo.num_steps_per_env=16", "algo.num_minibatches=2", "algo.pretrain_iterations=2",
        "algo.improve_iterations=2", "algo.updates_per_iteration=5", "algo.batch_size=64",
        "algo.dynamics_members=3", "algo.dynamics_elites=2", "algo.ope_states=32", "algo.ope_horizon=3",
        "algo.eval_interval=1", "runner.max_iterations=2", "runner.save_interval=2", "runner.progress=false"]


@pytest.fixture(scope="module")
def pendulum_data(tmp_path_factory) -> str:
    """Random-action pendulum transitions (8 envs x 300 steps, episodes of 200)."""
    env = build_env(load_train_config(["task=pendulum"]), num_envs=8, seed=3)
    path = tmp_path_factory.mktemp("data") / "pendulum_random.hdf5"
    return str(collect_dataset(env, random_policy(env, 3), 300, seed=3).save_hdf5(path))


def _run(tmp_path, data, *extra):
    return train(["task=pendulum", "algo=uni_o4", f"dataset={data}", *TINY, f"runner.log_root={tmp_path}", *extra])


def _algo(cfg, data: Dataset) -> UniO4:
    alg = UniO4(cfg.algo, {"policy": data.obs_dim}, data.action_dim, 8, "cpu", seed=0, action_bounds=(-2.0, 2.0))
    alg.set_dataset(data)
    return alg


def test_dynamics_ensemble_learns_a_linear_system():
    """s' = 0.9 s + 0.1 a, r = -|s|^2: held-out elites, and one-step predictions close to the truth."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    obs, act = torch.randn(4096, 2, generator=g), torch.rand(4096, 1, generator=g) * 2 - 1
    nxt, rew = 0.9 * obs + 0.1 * act, -obs.square().sum(-1)
    model = DynamicsEnsemble(2, 1, [64, 64], "elu", num_members=3, num_elites=2)
    model.fit_normalizers(obs, nxt, rew)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(600):
        idx = torch.randint(3584, (3, 256), generator=g)
        mean, log_var, logit = model(obs[idx], act[idx])
        target = model.targets(obs[idx], nxt[idx], rew[idx])
        loss = (((mean - target) ** 2) * torch.exp(-log_var) + log_var).mean() + \
            torch.nn.functional.binary_cross_entropy_with_logits(logit, torch.zeros_like(logit))
        opt.zero_grad()
        loss.backward()
        opt.step()
    err = model.select_elites(obs[3584:], act[3584:], nxt[3584:], rew[3584:])
    assert sorted(err.argsort()[:2].tolist()) == sorted(model.elites.tolist())
    pred_next, pred_rew, done = model.step(obs[3584:], act[3584:], g)
    # next states within 0.05 (states ~N(0, 1)), rewards within 0.15 (mean |r| = 2)
    assert (pred_next - nxt[3584:]).abs().mean() < 0.05 and (pred_rew - rew[3584:]).abs().mean() < 0.15
    assert not done.any()


def test_only_members_whose_ope_score_improves_are_accepted(pendulum_data):
    cfg = load_train_config(["task=pendulum", "algo=uni_o4", f"dataset={pendulum_data}", *TINY])
    alg = _algo(cfg, Dataset.load_hdf5(pendulum_data))
    off = alg.offline
    for _ in range(3):
        off.pretrain_step()
    off.finish_pretraining()
    for _ in range(3):
        off.improve_step(0)
    before = [a.state_dict() for a in off.accepted]
    off.best_scores.copy_(torch.tensor([torch.inf, -torch.inf, torch.inf, -torch.inf]))
    accepted, scores = off.accept_improved()
    assert accepted == 2 and torch.isfinite(scores).all()
    for i, (old, new, cur) in enumerate(zip(before, off.accepted, off.actors, strict=True)):
        kept = old if i in (0, 2) else cur.state_dict()  # members 1 and 3 improved on -inf
        assert all(torch.equal(kept[k], new.state_dict()[k]) for k in kept)
    assert off.best_scores[1] == scores[1] and off.best_scores[0] == torch.inf


@pytest.mark.parametrize("censor", [True, False])
def test_ensemble_bc_treats_actions_at_the_bounds_as_clipped(pendulum_data, censor):
    """With ``algo.censor_bounds`` a dataset action at the env's bound scores the mass beyond it:
    the BC loss on data pushed onto the bounds differs from the plain density's, and is the same
    as it when no action is at a bound."""
    data = Dataset.load_hdf5(pendulum_data)
    clipped = dataclasses.replace(data, actions=(2 * data.actions).clip(-1.0, 1.0))
    assert 0.3 < (np.abs(clipped.actions) == 1.0).mean() < 0.7

    def bc_loss(dataset, censor_bounds):
        cfg = load_train_config(["task=pendulum", "algo=uni_o4", f"dataset={pendulum_data}", *TINY,
                                 f"algo.censor_bounds={censor_bounds}"])
        torch.manual_seed(0)
        alg = UniO4(cfg.algo, {"policy": data.obs_dim}, data.action_dim, 8, "cpu", seed=0, action_bounds=(-1.0, 1.0))
        alg.set_dataset(dataset)
        return alg.offline.pretrain_step()["bc"]

    assert (bc_loss(clipped, censor) == bc_loss(clipped, False)) != censor
    assert bc_loss(data, censor) == bc_loss(data, False)


def test_one_command_runs_offline_then_online_on_one_curve(tmp_path, pendulum_data):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run = _run(tmp_path, pendulum_data)
    with open(run / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["iteration"]) for r in rows] == [1, 2, 3, 4, 5, 6]  # 4 offline + 2 online
    offline, online = rows[:4], rows[4:]
    assert all(float(r["env_steps"]) == 0 for r in offline)
    assert all(r["bc"] and r["dynamics"] for r in offline[:2])  # pretraining: BC, Q/V and dynamics
    assert all(r["ope_accepted"] for r in offline[2:])  # improvement iterations score by OPE
    selection = 4 * 3 * 200  # the hand-over: 3 deterministic episodes for each of the 4 candidates
    assert [int(float(r["env_steps"])) for r in online] == [selection + 128, selection + 256]
    assert all(r["approx_kl"] for r in online)
    reward = EventAccumulator(str(run)).Reload().Scalars("Train/mean_reward")
    steps = [e.step for e in reward]
    assert min(steps) <= 4 and max(steps) == 6  # one curve over both phases
    state = torch.load(run / "model_6.pt", weights_only=False)
    assert state["algo"]["phase"] == "online" and state["env_steps"] == selection + 256
    assert len(state["algo"]["selection_returns"]) == 4


def test_max_iterations_0_is_an_offline_only_run_that_more_continues_online(tmp_path, pendulum_data):
    """``runner.max_iterations=0``: the run stops after the offline stage and the hand-over's choice (its
    last checkpoint holds the chosen policy, no online iteration); ``--more N`` then trains N online
    iterations, through the runner's total (offline + online), and a count that would end inside the
    offline stage is refused naming the shortest one."""
    tiny = [o for o in TINY if not o.startswith("runner.max_iterations=")]
    run = train(["task=pendulum", "algo=uni_o4", f"dataset={pendulum_data}", *tiny, f"runner.log_root={tmp_path}",
                 "runner.max_iterations=0"])
    state = torch.load(run / "model_4.pt", weights_only=False)
    assert state["iteration"] == 4 and state["algo"]["phase"] == "online" and not (run / "model_5.pt").exists()
    assert state["env_steps"] == 4 * 3 * 200  # the hand-over's episodes only
    with pytest.raises(ConfigError, match=r"model_4.pt is at iteration 4 and the run ends at iteration 4 "
                                          r"\(runner.max_iterations=0 is a total.*add --more N"):
        train(["runner.progress=false"], checkpoint=str(run / "model_4.pt"))
    resumed = train(["runner.progress=false"], checkpoint=str(run / "model_4.pt"), more=2)
    state = torch.load(resumed / "model_6.pt", weights_only=False)
    assert state["iteration"] == 6 and state["config"]["runner"]["max_iterations"] == 2
    assert state["env_steps"] == 4 * 3 * 200 + 2 * 8 * 16
    with pytest.raises(ConfigError, match=r"--more 1: the run cannot end at iteration 3: .*ends at iteration 4 or "
                                          r"later \(2 or more past iteration 2\)"):
        train(["runner.progress=false"], checkpoint=str(run / "model_2.pt"), more=1)


def test_the_hand_over_scores_every_candidate_from_the_same_starts(pendulum_data):
    """Identical candidates get identical scores (paired starts, so the choice is not the draw of
    starts), a different one does not; every candidate's episodes count as env steps."""
    cfg = load_train_config(["task=pendulum", "algo=uni_o4", f"dataset={pendulum_data}", *TINY])
    runner = make_runner(build_env(cfg), cfg, log_dir=None)
    acc = runner.alg.offline.accepted
    runner.alg.candidates = lambda: [acc[0], acc[0], acc[0], acc[1]]
    runner.learn(cfg.algo.offline_iterations)
    scores = runner.alg.selection_returns
    assert runner.alg.phase == "online" and len(scores) == 4
    assert scores[0] == scores[1] == scores[2] != scores[3]
    assert runner.alg.selection_env_steps == 4 * 3 * 200
    assert runner.alg.selection_success == []  # pendulum scores no success


def test_the_hand_over_picks_by_success_then_return_then_ope():
    returns, ope = [10.0, 12.0, 12.0], [0.1, 0.3, 0.2]
    assert best_candidate(returns, ope) == 1  # returns tie between 1 and 2: the OPE score decides
    assert best_candidate([0.0, 0.0, 0.0], ope) == 1  # no evaluation episodes: OPE alone
    # a lift where member 0 finishes more often though its return is lower (it approaches more slowly)
    assert best_candidate(returns, ope, success=[0.75, 0.5, 0.5]) == 0
    assert best_candidate(returns, ope, success=[0.5, 0.5, 0.5]) == 1  # success ties: the return, then OPE


def test_online_phase_starts_from_the_offline_policy_and_value(pendulum_data):
    cfg = load_train_config(["task=pendulum", "algo=uni_o4", f"dataset={pendulum_data}", *TINY])
    alg = _algo(cfg, Dataset.load_hdf5(pendulum_data))
    while not alg.offline_done:
        alg.offline_update()
    with pytest.raises(RuntimeError, match="before start_online"):
        alg.act({"policy": torch.zeros(8, 3)})
    alg.start_online(2)
    obs = {"policy": torch.randn(8, 3)}
    torch.testing.assert_close(alg.model.actor(obs["policy"]), alg.offline.accepted[2](obs["policy"]), rtol=0, atol=0)
    torch.testing.assert_close(alg.model.critic(obs["policy"]), alg.offline.v(obs["policy"]), rtol=0, atol=0)
    norm = alg.model.actor.normalizer.mean.clone()
    alg.act({"policy": obs["policy"] + 100})  # the dataset's statistics stay (online_update_normalizer=false)
    assert torch.equal(alg.model.actor.normalizer.mean, norm)


@pytest.mark.parametrize("std_type", ["state_dependent", "scalar"])
def test_hand_over_options_reset_exploration_warm_up_the_critic_and_adapt_only_the_actor(pendulum_data, std_type):
    """``online_init_std`` keeps the offline mean and sets the std everywhere; during
    ``critic_warmup`` only the critic moves; then the adaptive schedule moves the actor's
    learning rate and leaves the critic's at ``critic_learning_rate``."""
    cfg = load_train_config(["task=pendulum", "algo=uni_o4", f"dataset={pendulum_data}", *TINY,
                             f"algo.std_type={std_type}", "algo.online_init_std=0.7", "algo.schedule=adaptive",
                             "algo.desired_kl=0.02", "algo.critic_warmup=1", "algo.learning_rate=2e-5",
                             "algo.critic_learning_rate=3e-4"])
    alg = _algo(cfg, Dataset.load_hdf5(pendulum_data))
    while not alg.offline_done:
        alg.offline_update()
    obs = torch.randn(8, 3) * torch.tensor([1.0, 1.0, 4.0])
    offline_mean, offline_std = alg.offline.accepted[1].distribution(obs)
    assert not torch.allclose(offline_std, torch.full_like(offline_std, 0.7))
    alg.start_online(1)
    mean, std = alg.model.actor.distribution(obs)
    torch.testing.assert_close(mean, offline_mean, rtol=0, atol=0)
    torch.testing.assert_close(std, torch.full_like(std, 0.7))

    g = torch.Generator().manual_seed(0)
    no = torch.zeros(8, dtype=torch.bool)

    def update() -> dict[str, float]:  # on a synthetic rollout
        for _ in range(cfg.algo.num_steps_per_env):
            alg.act({"policy": torch.randn(8, 3, generator=g)})
            alg.process_step({"policy": torch.randn(8, 3, generator=g)}, torch.randn(8, generator=g), no, no, {})
        alg.prepare_update()
        return alg.update()

    actor, critic = ({k: v.clone() for k, v in m.state_dict().items()} for m in (alg.model.actor, alg.model.critic))
    stats = update()  # warm-up: the critic alone
    assert stats["surrogate"] == 0.0 and stats["value"] > 0.0
    assert all(torch.equal(v, alg.model.actor.state_dict()[k]) for k, v in actor.items())
    assert not all(torch.equal(v, alg.model.critic.state_dict()[k]) for k, v in critic.items())
    actor_group, critic_group = alg.ppo.optimizer.param_groups
    assert actor_group["lr"] == 2e-5
    update()  # a 2e-5 step's KL is far below desired_kl: the actor's step grows, the critic's stays
    assert not all(torch.equal(v, alg.model.actor.state_dict()[k]) for k, v in actor.items())
    assert actor_group["lr"] > 2e-5 and actor_group["lr"] == alg.ppo.lr.value
    assert critic_group["lr"] == 3e-4


@pytest.mark.parametrize("at", [2, 4], ids=["offline", "online"])
def test_resume_is_exact_in_either_phase(tmp_path, pendulum_data, at):
    full = _run(tmp_path / "full", pendulum_data)
    part = tmp_path / "part"
    part.mkdir()
    shutil.copy(full / f"model_{at}.pt", part / f"model_{at}.pt")
    resumed = train(["runner.progress=false"], checkpoint=str(part / f"model_{at}.pt"))
    a = torch.load(full / "model_6.pt", weights_only=False)["algo"]
    b = torch.load(resumed / "model_6.pt", weights_only=False)["algo"]
    for key in ("model", "offline"):
        assert a[key].keys() == b[key].keys() and all(torch.equal(a[key][k], b[key][k]) for k in a[key])


def test_offline_policy_exports_and_matches_onnx(tmp_path, pendulum_data):
    run = _run(tmp_path, pendulum_data)
    state = torch.load(run / "model_4.pt", weights_only=False)  # right after the hand-over: no online update yet
    onnx = export(str(run / "model_4.pt"), [])
    cfg = load_train_config(["task=pendulum", "algo=uni_o4", f"dataset={pendulum_data}", *TINY])
    alg = _algo(cfg, Dataset.load_hdf5(pendulum_data))
    alg.load_state_dict(state["algo"], restore_rng=False)
    obs = torch.randn(64, 3) * torch.tensor([1.0, 1.0, 4.0])
    offline = alg.offline.accepted[state["algo"]["chosen"]](obs).detach().numpy()
    np.testing.assert_allclose(OnnxPolicy(str(onnx))(obs.numpy()), offline, atol=1e-5)


def test_config_and_dataset_errors_name_the_fix(tmp_path, pendulum_data):
    with pytest.raises(ConfigError, match="dataset: algo=uni_o4 trains from a dataset"):
        load_train_config(["algo=uni_o4", "task=pendulum"])
    with pytest.raises(ConfigError, match="algo.schedule: uni_o4 fine-tunes the actor at a fixed or KL-adaptive"):
        load_train_config(["algo=uni_o4", "task=pendulum", f"dataset={pendulum_data}", "algo.schedule=linear"])
    with pytest.raises(ConfigError, match=r"algo.online_init_std: must be null or within \[algo.min_std"):
        load_train_config(["algo=uni_o4", "task=pendulum", f"dataset={pendulum_data}", "algo.online_init_std=0"])
    with pytest.raises(ConfigError, match="algo.critic_obs: the online critic starts as the offline V.*fresh"):
        load_train_config(["algo=uni_o4", "task=pendulum", f"dataset={pendulum_data}", "algo.critic_obs=[critic]"])
    with pytest.raises(ConfigError, match="algo.online_critic: must be offline_v .* or fresh"):
        load_train_config(["algo=uni_o4", "task=pendulum", f"dataset={pendulum_data}", "algo.online_critic=new"])
    with pytest.raises(ConfigError, match="algo.normalize_value"):
        load_train_config(["algo=uni_o4", "task=pendulum", f"dataset={pendulum_data}", "algo.normalize_value=true"])
    with pytest.raises(ValueError, match="3-dim observations and 1-dim actions; the policy reads 4"):
        train(["task=point_mass", "algo=uni_o4", f"dataset={pendulum_data}", *TINY, f"runner.log_root={tmp_path}"])


def test_runs_on_a_mujoco_task_whose_critic_has_privileged_observations(tmp_path):
    """ctrl_quad (sim=mujoco): Q, V and the online critic read the actor's groups (the dataset's);
    with ``select_episodes=0`` the hand-over picks by OPE alone."""
    env = build_env(load_train_config(["task=quadruped_velocity_flat"]), num_envs=8, seed=0)
    data = collect_dataset(env, random_policy(env, 0), 60, seed=0)
    path = data.save_hdf5(tmp_path / "quad.hdf5")
    run = train(["task=quadruped_velocity_flat", "algo=uni_o4", f"dataset={path}", *TINY[1:],
                 "env.num_envs=8", "algo.num_steps_per_env=8", "algo.eval_interval=0", "algo.select_episodes=0",
                 f"runner.log_root={tmp_path}"])
    state = torch.load(run / "model_6.pt", weights_only=False)
    assert state["obs_dims"]["critic"] != state["obs_dims"]["policy"]
    assert state["algo"]["phase"] == "online"
    # select_episodes=0: the hand-over takes the best OPE score and spends no env steps
    assert state["env_steps"] == 2 * 8 * 8 and state["algo"]["selection_env_steps"] == 0
    ope = state["algo"]["offline"]["best_scores"]
    assert state["algo"]["chosen"] == int(ope.argmax())
    critic_in = state["algo"]["model"]["critic.normalizer.mean"].shape[0]
    assert critic_in == state["obs_dims"]["policy"] == data.obs_dim


def test_a_fresh_online_critic_reads_the_privileged_group_and_learns_its_own_statistics(tmp_path):
    """``online_critic=fresh`` on ctrl_quad: PPO's critic on the env's ``critic`` group (not the
    offline V), its normalizer fed online while the actor keeps the dataset's; with
    ``critic_warmup=1`` the actor is still the offline policy after the first online update
    (its std cloned: the quadruped's tune file would reset it to 0.3)."""
    env = build_env(load_train_config(["task=quadruped_velocity_flat"]), num_envs=8, seed=0)
    data = collect_dataset(env, random_policy(env, 0), 60, seed=0)
    path = data.save_hdf5(tmp_path / "quad.hdf5")
    run = train(["task=quadruped_velocity_flat", "algo=uni_o4", f"dataset={path}", *TINY[1:],
                 "env.num_envs=8", "algo.num_steps_per_env=8", "algo.eval_interval=0", "algo.select_episodes=0",
                 "algo.online_critic=fresh", "algo.critic_warmup=1", "algo.online_init_std=null",
                 "runner.save_interval=1",
                 f"runner.log_root={tmp_path}"])
    at_hand_over, warmed, tuned = (torch.load(run / f"model_{i}.pt", weights_only=False)["algo"] for i in (4, 5, 6))
    critic_in = warmed["model"]["critic.normalizer.mean"].shape[0]
    assert critic_in == at_hand_over["model"]["critic.normalizer.mean"].shape[0] > data.obs_dim
    assert warmed["model"]["critic.normalizer.count"] == at_hand_over["model"]["critic.normalizer.count"] + 8 * 8
    chosen = {k[len(f"accepted.{warmed['chosen']}."):]: v for k, v in warmed["offline"].items()
              if k.startswith(f"accepted.{warmed['chosen']}.")}
    actor = {k[len("actor."):]: v for k, v in warmed["model"].items() if k.startswith("actor.")}
    assert actor.keys() == chosen.keys() and all(torch.equal(actor[k], chosen[k]) for k in actor)
    assert not torch.equal(tuned["model"]["actor.net.0.weight"], actor["net.0.weight"])
    assert torch.equal(tuned["model"]["actor.normalizer.mean"], chosen["normalizer.mean"])
