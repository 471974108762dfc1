"""SAC: the learner's bookkeeping, compiled vs eager, exact resume, export parity."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from ctrl_rl.algos.sac import SAC
from ctrl_rl.app.configure import load_train_config
from ctrl_rl.app.evaluate import evaluate
from ctrl_rl.app.export import export
from ctrl_rl.app.train import train
from ctrl_rl.config import ConfigError
from ctrl_rl.config_offpolicy import SACConfig

SMALL = ["algo=sac", "task=pendulum", "env.num_envs=8", "algo.learning_starts=16", "algo.batch_size=32",
         "algo.num_updates=2", "algo.actor_hidden=[16]", "algo.critic_hidden=[16]", "algo.buffer_size=4096",
         "runner.progress=false"]


def fill(alg: SAC, steps: int, obs_dim: int = 3, seed: int = 0) -> None:
    g = torch.Generator().manual_seed(seed)
    obs = {"policy": torch.randn(alg.num_envs, obs_dim, generator=g)}
    for t in range(steps):
        alg.act(obs)
        nxt = {"policy": torch.randn(alg.num_envs, obs_dim, generator=g)}
        done = torch.zeros(alg.num_envs, dtype=torch.bool)
        done[0] = t % 7 == 6
        alg.process_step(nxt, torch.randn(alg.num_envs, generator=g), done, torch.zeros_like(done),
                         {"final_obs": nxt})
        obs = nxt


def test_random_actions_until_learning_starts_then_policy_actions_in_bounds():
    cfg = SACConfig(learning_starts=16, batch_size=8, buffer_size=256, actor_hidden=[8], critic_hidden=[8])
    alg = SAC(cfg, {"policy": 3}, 2, 4, "cpu", action_bounds=(-2.0, 2.0))
    assert alg.update() == {"alpha": 1.0, "buffer_size": 0.0}  # nothing to learn from yet
    fill(alg, 4)
    assert alg.env_steps == 16
    a = alg.act({"policy": torch.randn(4, 3)})
    assert a.shape == (4, 2) and bool((a.abs() <= 2.0).all())
    fill(alg, 4)
    stats = alg.update()
    assert {"critic", "actor", "alpha", "alpha_loss", "entropy", "q_mean"} <= set(stats)
    assert stats["alpha"] < 1.0  # one temperature step taken (entropy starts above -|A|)


def test_exploration_levels_are_spread_over_envs():
    cfg = SACConfig(exploration_scale_min=0.5, exploration_scale_max=2.0, buffer_size=64)
    alg = SAC(cfg, {"policy": 3}, 1, 4, "cpu")
    np.testing.assert_allclose(alg.exploration.squeeze(-1).numpy(), [0.5, 1.0, 1.5, 2.0])


@pytest.mark.parametrize("distributional, aggregation", [(False, "min"), (True, "min"), (True, "mean")])
def test_update_reduces_the_critic_loss_on_a_fixed_batch(distributional, aggregation):
    """Sanity of the wiring: repeated updates fit the critic to its (slowly moving) targets."""
    torch.manual_seed(0)
    cfg = SACConfig(learning_starts=0, batch_size=64, buffer_size=512, num_updates=1, actor_hidden=[32],
                    critic_hidden=[32], distributional=distributional, critic_aggregation=aggregation,
                    v_min=-10, v_max=10, num_atoms=21, layer_norm=True, n_step=3)
    alg = SAC(cfg, {"policy": 3}, 1, 8, "cpu")
    fill(alg, 40)
    first = alg.update()["critic"]
    for _ in range(150):
        last = alg.update()["critic"]
    assert np.isfinite(last) and last < first


@pytest.mark.parametrize("flag", ["compile", "cudagraphs"])
def test_compiled_update_matches_eager(flag):
    """``algo.compile`` and ``algo.cudagraphs`` (its graph-safe step; captured only on CUDA) vs eager."""
    cfg = SACConfig(learning_starts=0, batch_size=32, buffer_size=512, actor_hidden=[16], critic_hidden=[16])
    runs = []
    for on in (False, True):
        torch.manual_seed(0)
        alg = SAC(dataclasses.replace(cfg, **{flag: on}), {"policy": 3}, 1, 4, "cpu", seed=1)
        fill(alg, 20)
        stats = [alg.update() for _ in range(3)]
        runs.append((stats, [p.detach().clone() for p in alg.model.parameters()]))
    (s0, p0), (s1, p1) = runs
    for a, b in zip(s0, s1, strict=True):
        assert a.keys() == b.keys()
        for k in a:
            assert a[k] == pytest.approx(b[k], rel=1e-4, abs=1e-5), k
    for a, b in zip(p0, p1, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_bf16_autocast_reaches_the_update():
    """``algo.autocast=bf16``: SAC's gradient steps compute their layers in bfloat16 (FastSAC's setting),
    acting stays float32 and the parameters keep float32."""
    cfg = SACConfig(learning_starts=0, batch_size=32, buffer_size=512, actor_hidden=[16], critic_hidden=[16],
                    autocast="bf16")
    alg = SAC(cfg, {"policy": 3}, 1, 4, "cpu", seed=1)
    seen: list[tuple[bool, torch.dtype]] = []
    hook = torch.nn.modules.module.register_module_forward_hook(
        lambda m, i, o: seen.append((torch.is_grad_enabled(), o.dtype)) if isinstance(m, torch.nn.Linear) else None)
    try:
        fill(alg, 20)
        acting = len(seen)
        stats = alg.update()
    finally:
        hook.remove()
    assert acting > 0 and {d for _, d in seen[:acting]} == {torch.float32}
    assert torch.bfloat16 in {d for grad, d in seen[acting:] if grad}
    assert all(p.dtype == torch.float32 for p in alg.model.parameters())
    assert all(np.isfinite(v) for v in stats.values())


def test_each_loss_backpropagates_into_its_own_parameters_only():
    """The actor's loss runs through the critics: its backward must leave their gradients as the
    critic step made them (no wasted weight-gradient matmuls, nothing added to the critic's)."""
    cfg = SACConfig(learning_starts=0, batch_size=32, buffer_size=512, actor_hidden=[16], critic_hidden=[16])
    alg = SAC(cfg, {"policy": 3}, 1, 4, "cpu", seed=1)
    fill(alg, 20)
    critic_grads: list[list[torch.Tensor]] = []
    real_step = alg._step

    def step(optimizer, loss, module):
        real_step(optimizer, loss, module)
        critic_grads.append([p.grad.clone() for p in alg.model.critic.parameters()])

    alg._step = step
    alg.update()
    assert len(critic_grads) == 3  # critic, actor, temperature
    for after_critic, after_actor in zip(critic_grads[0], critic_grads[1], strict=True):
        torch.testing.assert_close(after_actor, after_critic, rtol=0, atol=0)
    assert all(p.grad is not None for p in alg.model.actor.parameters() if p.requires_grad)


def test_config_errors_name_the_fix():
    with pytest.raises(ConfigError, match="algo.critic_aggregation: must be one of: min, mean"):
        load_train_config(["algo=sac", "algo.critic_aggregation=max"])
    with pytest.raises(ConfigError, match="raise algo.buffer_size to at least"):
        load_train_config(["algo=sac", "algo.buffer_size=100", "env.num_envs=64"])
    with pytest.raises(ConfigError, match=r"unknown config key 'algo.clip_param'; valid keys: name, .* more: "
                                          r"`ctrl-rl train algo=sac --help`\)"):  # SAC's keys, all listed there
        load_train_config(["algo=sac", "algo.clip_param=0.2"])


@pytest.mark.slow
def test_resume_is_exact_and_export_matches_torch(tmp_path):
    """Kill-free version of the resume guarantee: 6 iterations straight vs 3 + resume + 3."""
    common = SMALL + [f"runner.log_root={tmp_path}", "runner.save_interval=3"]
    full = train(common + ["runner.max_iterations=6", "runner.run_name=full"])
    half = train(common + ["runner.max_iterations=3", "runner.run_name=half"])
    assert [f.name for f in half.glob("replay*.pt")] == ["replay_3.pt"]  # beside the newest checkpoint only
    assert "replay" not in torch.load(half / "model_3.pt", weights_only=False)["algo"]
    resumed = train(common + ["runner.max_iterations=6"], checkpoint=str(half / "model_3.pt"))
    a = torch.load(full / "model_6.pt", weights_only=False)["algo"]
    b = torch.load(resumed / "model_6.pt", weights_only=False)["algo"]
    for k, v in a["model"].items():
        torch.testing.assert_close(v, b["model"][k], rtol=0, atol=0, msg=k)
    assert a["env_steps"] == b["env_steps"] and a["num_updates"] == b["num_updates"]
    bundle = export(str(full), [])
    assert bundle.is_file()
    result = evaluate(str(full), [], episodes=4)
    assert np.isfinite(result["mean_return"])


@pytest.mark.parametrize("task", ["task=cartpole_swingup", "task=quadruped_velocity_flat env.num_envs=4",
                                  "sim=gymnasium task=Pendulum-v1 env.num_envs=2"])
def test_sac_trains_on_every_kind_of_task(tmp_path, task):
    """Torch, MuJoCo (Gaussian-space actions: tanh in [-1, 1]) and gymnasium envs, a few updates each."""
    run = train(["algo=sac", *task.split(), "runner.max_iterations=12", "algo.learning_starts=8",
                 "algo.batch_size=16", "algo.buffer_size=2048", "algo.actor_hidden=[16]", "algo.critic_hidden=[16]",
                 "runner.progress=false", f"runner.log_root={tmp_path}"] + ([] if "num_envs" in task else
                                                                           ["env.num_envs=4"]))
    assert (run / "model_12.pt").is_file()
