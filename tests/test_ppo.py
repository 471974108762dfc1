"""PPO's use of the rollout: truncation bootstraps from V(final_obs), value normalization, NaN guard."""

import dataclasses
import math

import pytest
import torch

from ctrl_rl.algos.ppo import PPO
from ctrl_rl.config_onpolicy import PPOConfig
from ctrl_rl.utils.guards import NonFiniteError


def linear_critic_ppo(**overrides) -> PPO:
    """PPO on 1-d obs whose critic is exactly V(x) = x (a single linear layer set by hand)."""
    cfg = PPOConfig(num_steps_per_env=2, actor_hidden=[4], critic_hidden=[], normalize_obs=False,
                    gamma=0.5, lam=0.5, normalize_advantage=False, **overrides)
    alg = PPO(cfg, {"policy": 1}, 1, num_envs=2, device="cpu")
    lin = alg.model.critic.net[-1]
    with torch.no_grad():
        lin.weight.fill_(1.0)
        lin.bias.zero_()
    return alg


def obs(*xs):
    return {"policy": torch.tensor(xs, dtype=torch.float32).unsqueeze(-1)}


def run_two_steps(alg: PPO, final_env0: float, terminated: bool):
    # env 0 ends at step 0 (final obs = final_env0, reset obs 0.0); env 1 never ends
    alg.act(obs(1.0, 1.0))
    t = torch.tensor([terminated, False])
    alg.process_step(obs(0.0, 2.0), torch.tensor([1.0, 1.0]), t, ~t & torch.tensor([True, False]),
                     {"final_obs": obs(final_env0, 2.0)})
    alg.act(obs(0.0, 2.0))
    alg.process_step(obs(5.0, 3.0), torch.tensor([1.0, 1.0]), torch.tensor([False, False]),
                     torch.tensor([False, False]), {"final_obs": obs(5.0, 3.0)})
    alg.prepare_update()
    return alg.storage.advantages


def test_truncation_bootstraps_from_final_obs_not_reset_obs():
    alg = linear_critic_ppo()
    adv = run_two_steps(alg, final_env0=4.0, terminated=False)
    # env 0, t=0 truncated: δ = 1 + .5 * V(final=4) - V(1) = 2.0 ; trace cut -> A = 2.0
    # env 0, t=1: δ = 1 + .5 * V(5) - V(0) = 3.5
    # env 1: δ1 = 1 + .5*3 - 2 = .5 ; δ0 = 1 + .5*2 - 1 = 1 ; A0 = 1 + .25*.5 = 1.125
    assert torch.allclose(adv, torch.tensor([[2.0, 1.125], [3.5, 0.5]]))


def test_termination_ignores_final_obs_value():
    alg = linear_critic_ppo()
    adv = run_two_steps(alg, final_env0=4.0, terminated=True)
    # env 0, t=0 terminated: δ = 1 - V(1) = 0
    assert adv[0, 0].item() == pytest.approx(0.0)


def test_value_normalization_reports_values_in_return_units():
    alg = linear_critic_ppo(normalize_value=True)
    alg.value_normalizer.mean.fill_(10.0)
    alg.value_normalizer.var.fill_(4.0)
    run_two_steps(alg, final_env0=4.0, terminated=False)
    # critic output x -> value 10 + 2x (denormalized): V(1) = 12 at step 0
    assert alg.storage.values[0, 0].item() == pytest.approx(12.0, abs=1e-4)
    stats = alg.update()
    assert all(torch.isfinite(torch.tensor(v)) for v in stats.values())


def test_nan_reward_raises_actionable_error():
    alg = linear_critic_ppo()
    alg.act(obs(1.0, 1.0))
    alg.process_step(obs(0.0, 2.0), torch.tensor([float("nan"), 1.0]), torch.tensor([False, False]),
                     torch.tensor([False, False]), {"final_obs": obs(0.0, 2.0)})
    alg.act(obs(0.0, 2.0))
    alg.process_step(obs(0.0, 2.0), torch.tensor([1.0, 1.0]), torch.tensor([False, False]),
                     torch.tensor([False, False]), {"final_obs": obs(0.0, 2.0)})
    with pytest.raises(NonFiniteError, match="rewards contains NaN.*env's reward.*step\\(\\)"):
        alg.prepare_update()


def test_config_rejects_bad_values_with_key_names():
    from ctrl_rl.config import ConfigError

    with pytest.raises(ConfigError, match="algo.num_minibatches: must be > 0"):
        PPOConfig(num_minibatches=0)
    with pytest.raises(ConfigError, match="algo.schedule: must be one of: adaptive, fixed"):
        PPOConfig(schedule="cosine")
    assert dataclasses.asdict(PPOConfig())["clip_param"] == 0.2


def test_asymmetric_actor_critic_uses_privileged_critic_group():
    from ctrl_rl.sims import make_env

    env = make_env("torch", "point_mass", 8, seed=0)
    assert "critic" in env.obs_dims and env.obs_dims["critic"] != env.obs_dims["policy"]
    cfg = PPOConfig(num_steps_per_env=4, actor_hidden=[8], critic_hidden=[8], num_minibatches=2)
    alg = PPO(cfg, env.obs_dims, env.action_dim, env.num_envs, "cpu")
    assert alg.model.critic_obs == ["critic"]  # picked automatically (critic_obs=None)
    assert alg.model.critic.net[0].in_features == env.obs_dims["critic"]
    assert alg.model.actor.net[0].in_features == env.obs_dims["policy"]
    obs = env.reset(seed=0)
    for _ in range(4):
        actions = alg.act(obs)
        obs, r, term, trunc, info = env.step(actions)
        alg.process_step(obs, r, term, trunc, info)
    alg.prepare_update()
    stats = alg.update()
    assert all(torch.isfinite(torch.tensor(v)) for v in stats.values())
    # explicit groups: both nets on the policy group
    sym = PPO(PPOConfig(critic_obs=["policy"], actor_hidden=[8], critic_hidden=[8]), env.obs_dims, 2, 8, "cpu")
    assert sym.model.critic.net[0].in_features == env.obs_dims["policy"]


def test_linear_schedule_anneals_by_update_count():
    """``schedule=linear``: lr = lr0 (1 - k / K) at update k of K, set before the update's steps."""
    alg = linear_critic_ppo(schedule="linear", learning_rate=1e-3, num_minibatches=1)
    with pytest.raises(RuntimeError, match="the runner calls set_run_length first"):
        run_two_steps(alg, 0.0, False)
        alg.update()
    alg.storage.clear()
    alg.set_run_length(4)
    seen = []
    for _ in range(3):
        run_two_steps(alg, 0.0, False)
        seen.append(alg.update()["learning_rate"])
        assert alg.optimizer.param_groups[0]["lr"] == seen[-1]
    assert seen == pytest.approx([1e-3, 7.5e-4, 5e-4])


def _train_pendulum(iterations: int, **algo_flags) -> tuple[list[torch.Tensor], list[dict[str, float]]]:
    """A few PPO iterations on the torch pendulum (adaptive KL on, value normalization on)."""
    from ctrl_rl.app.configure import load_train_config
    from ctrl_rl.app.session import build_env
    from ctrl_rl.app.train import seed_everything
    from ctrl_rl.runners import make_runner

    cfg = load_train_config(["task=pendulum", "env.num_envs=32", "runner.progress=false", "seed=5"])
    cfg = dataclasses.replace(cfg, algo=dataclasses.replace(cfg.algo, **algo_flags))
    seed_everything(cfg.seed)
    runner = make_runner(build_env(cfg), cfg)
    history = runner.learn(iterations)
    return [t.detach().clone() for t in runner.alg.model.state_dict().values()], history


@pytest.mark.parametrize("flag", ["compile", "cudagraphs"])
def test_graph_safe_update_matches_eager(flag):
    """``algo.compile`` (compiled loss, tensor lr, on-device adaptive KL) and ``algo.cudagraphs``
    (the graph-safe step; captured only on CUDA) train like the eager update on CPU."""
    eager_params, eager_hist = _train_pendulum(3, desired_kl=2e-3)  # a low target: the lr moves
    params, hist = _train_pendulum(3, desired_kl=2e-3, **{flag: True})
    for a, b in zip(eager_params, params, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    for a, b in zip(eager_hist, hist, strict=True):
        for k in ("value", "surrogate", "entropy", "learning_rate", "approx_kl"):
            assert a[k] == pytest.approx(b[k], rel=1e-3, abs=1e-6), k
    assert len({h["learning_rate"] for h in eager_hist}) > 1  # the adaptive schedule acted


def test_compiled_update_crosses_the_critic_warmup_like_eager():
    """``critic_warmup`` reaches the compiled loss as an argument: the critic-only updates and the
    full ones after them match eager (a counter read inside the graph would freeze at its first value)."""
    eager_params, eager_hist = _train_pendulum(3, critic_warmup=1)
    params, hist = _train_pendulum(3, critic_warmup=1, compile=True)
    for a, b in zip(eager_params, params, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    assert [h["surrogate"] for h in eager_hist][0] == 0.0 and eager_hist[1]["surrogate"] != 0.0
    for a, b in zip(eager_hist, hist, strict=True):
        for k in ("value", "surrogate", "entropy"):
            assert a[k] == pytest.approx(b[k], rel=1e-3, abs=1e-6), k


def test_adaptive_learning_rate_tensor_form_matches_float_form():
    from ctrl_rl.algos.losses import adaptive_kl_learning_rate

    for lr, kl in [(1e-3, 0.05), (1e-3, 0.001), (1e-3, 0.0), (1e-3, 0.01), (9e-3, 0.0001), (2e-5, 0.5)]:
        want = adaptive_kl_learning_rate(lr, kl, 0.01, 1.5, 1e-5, 1e-2)
        got = adaptive_kl_learning_rate(torch.tensor(lr, dtype=torch.float64), torch.tensor(kl), 0.01, 1.5, 1e-5, 1e-2)
        assert float(got) == pytest.approx(want, rel=1e-12), (lr, kl)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA (host syncs only exist on a device)")
@pytest.mark.parametrize("algo", ["ppo", "sac"])
def test_rollout_loop_never_syncs_with_the_host_on_cuda(algo):
    """Collection (act, env step, process_step, episode stats) under CUDA's sync debug mode."""
    from ctrl_rl.app.configure import load_train_config
    from ctrl_rl.app.session import build_env
    from ctrl_rl.runners import make_runner
    from ctrl_rl.utils.logger import EpisodeStats

    cfg = load_train_config([f"algo={algo}", "task=pendulum", "env.num_envs=64", "device=cuda"])
    if algo == "sac":  # past the random-action phase
        cfg = dataclasses.replace(cfg, algo=dataclasses.replace(cfg.algo, learning_starts=0))
    runner = make_runner(build_env(cfg), cfg)
    alg, env, episodes = runner.alg, runner.env, EpisodeStats(torch.device("cuda"))
    obs = env.reset(seed=0)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(8):
            actions = alg.act(obs)
            obs, rewards, terminated, truncated, info = env.step(actions)
            alg.process_step(obs, rewards, terminated, truncated, info)
            episodes.add(terminated, truncated, info)
    finally:
        torch.cuda.set_sync_debug_mode("default")


def test_precision_flags_reach_the_update():
    """``algo.tf32`` and ``algo.autocast`` (config -> learner -> update): on CUDA the update runs with
    TF32 matrix products (``allow_tf32``) and restores the caller's setting after; with ``autocast=bf16``
    the update's layers compute in bfloat16 while collection stays float32, and the graph-safe step
    (``algo.cudagraphs``, uncaptured on CPU) computes what the eager bf16 step does."""
    from types import SimpleNamespace

    from ctrl_rl.algos.precision import update_precision
    from ctrl_rl.app.configure import load_train_config

    matmul = torch.backends.cuda.matmul
    before = matmul.allow_tf32
    for tf32 in (True, False):
        with update_precision(SimpleNamespace(tf32=tf32, autocast="none"), "cuda"):  # a flag only: no CUDA needed
            assert matmul.allow_tf32 is tf32
        assert matmul.allow_tf32 == before
    with update_precision(SimpleNamespace(tf32=not before, autocast="none"), "cpu"):
        assert matmul.allow_tf32 == before  # CPU: untouched
    cfg = load_train_config(["task=pendulum", "algo.autocast=bf16", "algo.tf32=false"])
    assert (cfg.algo.autocast, cfg.algo.tf32) == ("bf16", False)
    with pytest.raises(ValueError, match="algo.autocast: must be one of: none, bf16, auto"):
        load_train_config(["task=pendulum", "algo.autocast=fp16"])

    seen: list[tuple[bool, torch.dtype]] = []
    hook = torch.nn.modules.module.register_module_forward_hook(
        lambda m, i, o: seen.append((torch.is_grad_enabled(), o.dtype)) if isinstance(m, torch.nn.Linear) else None)
    try:
        params, hist = _train_pendulum(1, autocast="bf16")
    finally:
        hook.remove()
    assert {d for grad, d in seen if grad} == {torch.bfloat16}  # the update's passes
    assert torch.float32 in {d for grad, d in seen if not grad}  # acting (no grad) stays float32
    assert all(p.dtype != torch.bfloat16 for p in params)  # parameters and buffers keep their dtypes
    assert all(math.isfinite(v) for v in hist[0].values())
    graph_params, _ = _train_pendulum(1, autocast="bf16", cudagraphs=True)  # the graph-safe step, same casts
    for a, b in zip(params, graph_params, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("native", [True, False])
def test_autocast_auto_follows_the_hardware(native, monkeypatch, caplog):
    """``algo.autocast=auto``: bfloat16 where the device has it in hardware, float32 where it would be
    emulated, said once in the log; ``bf16`` and ``none`` ignore the hardware. The choice reaches the
    update's layers (PPO on pendulum)."""
    from types import SimpleNamespace

    from ctrl_rl.algos import precision

    monkeypatch.setattr(precision, "bf16_native", lambda device: native)
    precision._auto_bf16.cache_clear()
    try:
        with caplog.at_level("INFO", logger=precision.__name__):
            assert precision.uses_bf16(SimpleNamespace(autocast="auto"), "cpu") is native
            assert precision.uses_bf16(SimpleNamespace(autocast="auto"), torch.device("cpu")) is native
        said = [r.getMessage() for r in caplog.records if "algo.autocast=auto" in r.getMessage()]
        assert said == [f"algo.autocast=auto: the update runs in {'bfloat16' if native else 'float32'} on cpu "
                        f"({'bfloat16 in hardware' if native else 'no bfloat16 instructions'})"]
        assert precision.uses_bf16(SimpleNamespace(autocast="bf16"), "cpu")
        assert not precision.uses_bf16(SimpleNamespace(autocast="none"), "cpu")
        seen: set[torch.dtype] = set()
        hook = torch.nn.modules.module.register_module_forward_hook(
            lambda m, i, o: seen.add(o.dtype) if isinstance(m, torch.nn.Linear) and torch.is_grad_enabled() else None)
        try:
            _train_pendulum(1, autocast="auto")
        finally:
            hook.remove()
        assert seen == {torch.bfloat16 if native else torch.float32}
    finally:
        precision._auto_bf16.cache_clear()


def _first_minibatch_ratio(rebase: bool, monkeypatch) -> dict[str, float]:
    """approx_kl and clip_fraction of the first minibatch of a bf16 update, on a rollout collected in
    float32 by a policy with means of order 1 and std 0.05 (a polished gait's regime)."""
    import ctrl_rl.algos.ppo as ppo_module

    if not rebase:
        monkeypatch.setattr(ppo_module, "rebase_in_update_precision", lambda *a, **k: None)
    torch.manual_seed(0)
    cfg = PPOConfig(num_steps_per_env=16, actor_hidden=[256, 128], critic_hidden=[64], init_std=0.05,
                    num_learning_epochs=1, num_minibatches=1, autocast="bf16", normalize_obs=False)
    alg = PPO(cfg, {"policy": 32}, 12, num_envs=64, device="cpu", seed=1)
    with torch.no_grad():
        alg.model.actor.net[-1].weight.mul_(300.0)  # means of order 1: bf16's rounding is then visible
    for _ in range(cfg.num_steps_per_env):
        alg.act({"policy": torch.randn(64, 32)})
        alg.process_step({"policy": torch.randn(64, 32)}, torch.randn(64), torch.zeros(64, dtype=torch.bool),
                         torch.zeros(64, dtype=torch.bool), {})
    alg.prepare_update()
    seen: list[dict[str, torch.Tensor]] = []
    loss = alg.head.loss
    monkeypatch.setattr(alg.head, "loss", lambda *a: seen.append(loss(*a)[2]) or loss(*a))
    alg.update()
    return {k: float(seen[0][k]) for k in ("approx_kl", "clip_fraction")}


def test_bf16_update_starts_from_the_policy_in_its_own_arithmetic(monkeypatch):
    """``algo.autocast=bf16`` recomputes the old policy in the update's arithmetic: before any step the
    ratio is 1 (KL 0, nothing clipped). Compared with the rollout's float32 log-probabilities instead,
    bf16's rounding alone moves the ratio of a low-noise policy before it has learned anything."""
    with monkeypatch.context() as m:
        stale = _first_minibatch_ratio(rebase=False, monkeypatch=m)
    fresh = _first_minibatch_ratio(rebase=True, monkeypatch=monkeypatch)
    assert stale["clip_fraction"] > 0.01 and abs(stale["approx_kl"]) > 1e-3, stale
    assert fresh["clip_fraction"] == 0.0 and abs(fresh["approx_kl"]) < 1e-5, fresh


def test_bf16_on_a_cpu_without_bfloat16_instructions_warns_once(monkeypatch, caplog):
    """Emulated bfloat16 is slower than float32: the first bf16 update on such a CPU says so, once."""
    from types import SimpleNamespace

    from ctrl_rl.algos import precision

    precision._warn_slow_bf16_cpu.cache_clear()
    monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: False)
    cfg = SimpleNamespace(tf32=False, autocast="bf16")
    with caplog.at_level("WARNING", logger="ctrl_rl.algos.precision"):
        for _ in range(2):
            with precision.update_precision(cfg, "cpu"):
                pass
    precision._warn_slow_bf16_cpu.cache_clear()
    assert [r.getMessage().count("without bfloat16 instructions") for r in caplog.records] == [1]
    assert "set algo.autocast=auto (or none)" in caplog.records[0].getMessage()
