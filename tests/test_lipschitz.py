"""``algo.lipschitz_coef``: LCP's Lipschitz penalty on the actor's mean (the squared norm of its Jacobian with
respect to the normalized observation), a smoothness prior that does not read the rollout's neighbours."""

from __future__ import annotations

import pytest
import torch
from test_smoothness import fill_alternating, steep_ppo

from ctrl_rl.algos.losses import jacobian_penalty
from ctrl_rl.algos.ppo import PPO
from ctrl_rl.algos.schedule import gated_ramp, ramp_weight
from ctrl_rl.app.train import train
from ctrl_rl.config import ConfigError
from ctrl_rl.config_onpolicy import PPOConfig
from ctrl_rl.env import term_mask

W = torch.tensor([[1.0, 2.0], [3.0, 4.0]])


def linear(x: torch.Tensor) -> torch.Tensor:
    return x @ W.T


def test_the_penalty_of_a_linear_map_by_hand():
    x = torch.randn(3, 2, requires_grad=True)  # a linear map's Jacobian is W wherever it is taken
    e0 = torch.tensor([[1.0, 0.0]]).expand(3, 2)
    assert jacobian_penalty(linear(x), x, e0).item() == pytest.approx(1 + 4)  # ||W[0]||^2
    assert jacobian_penalty(linear(x), x, e0.flip(-1)).item() == pytest.approx(9 + 16)  # ||W[1]||^2
    # probe (1, 1): W^T v = (4, 6) -> 52; per-sample probes average over the batch: (5 + 25 + 52) / 3
    probe = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    assert jacobian_penalty(linear(x), x, probe).item() == pytest.approx((5 + 25 + 52) / 3)
    # a mask keeps only the first input's column: W[0, 0]^2 = 1, W[1, 0]^2 = 9
    keep_first = torch.tensor([1.0, 0.0])
    assert jacobian_penalty(linear(x), x, e0, keep_first).item() == pytest.approx(1)
    assert jacobian_penalty(linear(x), x, e0.flip(-1), keep_first).item() == pytest.approx(9)


def test_normal_probes_estimate_the_frobenius_norm():
    x = torch.zeros(20000, 2, requires_grad=True)
    probe = torch.randn(20000, 2, generator=torch.Generator().manual_seed(0))
    assert jacobian_penalty(linear(x), x, probe).item() == pytest.approx(30.0, rel=0.03)  # ||W||_F^2 = 30


def test_each_sample_is_differentiated_at_its_own_input():
    """A nonlinear map: the penalty with basis probes equals the exact per-sample Jacobian rows, and it
    has a gradient with respect to the map's weights (it trains the network)."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    x = torch.randn(4, 3, requires_grad=True)
    probe = torch.tensor([[1.0, 0.0]] * 4)
    exact = torch.stack([torch.autograd.functional.jacobian(net, x[b])[0] for b in range(4)])  # [4, 3]
    penalty = jacobian_penalty(net(x), x, probe)
    assert penalty.item() == pytest.approx(float(exact.square().sum(-1).mean()), rel=1e-5)
    penalty.backward()
    assert net[0].weight.grad is not None and float(net[0].weight.grad.abs().sum()) > 0


def test_settings_are_checked():
    with pytest.raises(ConfigError, match="algo.lipschitz_coef: must be >= 0"):
        PPOConfig(lipschitz_coef=-1.0)
    with pytest.raises(ConfigError, match="algo.lipschitz_coef: differentiates a feed-forward"):
        PPOConfig(lipschitz_coef=1.0, rnn_type="gru")


def test_the_penalty_flattens_a_steep_policy():
    """No reward to chase: the penalty alone takes a linear policy of slope 0.5 (penalty = 0.25 E[eps^2])
    towards slope 0, and the PPO stats report it."""
    alg = steep_ppo(lipschitz_coef=1.0)
    fill_alternating(alg, 8, 4)
    first = alg.update()["lipschitz"]
    assert 0.05 < first < 1.0  # 0.25 x the mean squared exploration noise of 32 samples
    for _ in range(30):
        fill_alternating(alg, 8, 4)
        alg.update()
    assert abs(alg.model.actor.net[-1].weight.item()) < 0.1


def test_the_weight_waits_and_ramps():
    assert [ramp_weight(0.02, u, 3, 4) for u in (0, 2)] == [0.0, 0.0]
    assert [ramp_weight(0.02, u, 3, 4) for u in (3, 4, 6, 50)] == pytest.approx([0.005, 0.01, 0.02, 0.02])
    assert ramp_weight(0.02, 3, 3, 0) == 0.02  # no ramp: at once
    with pytest.raises(ConfigError, match="algo.lipschitz_start: lipschitz_start and lipschitz_ramp must be >= 0"):
        PPOConfig(lipschitz_ramp=-1)
    with pytest.raises(ConfigError, match=r"algo.lipschitz_fraction: must be in \(0, 1\]"):
        PPOConfig(lipschitz_fraction=0.0)
    with pytest.raises(ConfigError, match="algo.lipschitz_exclude: leaves terms out of the Lipschitz penalty, which"):
        PPOConfig(lipschitz_exclude=["velocity_commands"])


def test_the_penalty_starts_at_its_update():
    cfg = PPOConfig(num_steps_per_env=8, actor_hidden=[], critic_hidden=[8], normalize_obs=False,
                    lipschitz_coef=0.5, lipschitz_start=2, lipschitz_ramp=2, learning_rate=1e-4)
    alg = PPO(cfg, {"policy": 1}, 1, num_envs=4, device="cpu")
    seen = []
    for _ in range(4):
        fill_alternating(alg, 8, 4)
        seen.append(("lipschitz" in alg.update(), float(alg.lipschitz_weight)))
    assert seen == [(False, 0.0), (False, 0.0), (True, 0.25), (True, 0.5)]


def test_a_fraction_of_the_minibatch_estimates_the_same_penalty():
    """A linear policy has one Jacobian everywhere: on a quarter of the samples the estimate is the same up to
    the probes' sampling noise (slope 0.5: 0.25 x E[eps^2] = 0.25)."""
    for fraction in (1.0, 0.25):
        cfg = PPOConfig(num_steps_per_env=64, actor_hidden=[], critic_hidden=[8], normalize_obs=False,
                        lipschitz_coef=1e-6, lipschitz_fraction=fraction, num_minibatches=1, num_learning_epochs=1)
        alg = PPO(cfg, {"policy": 1}, 1, num_envs=64, device="cpu", seed=3)
        with torch.no_grad():
            alg.model.actor.net[-1].weight.fill_(0.5)
        fill_alternating(alg, 64, 64)
        assert alg.update()["lipschitz"] == pytest.approx(0.25, rel=0.15)


def test_the_relative_weight_is_per_unit_of_the_policys_own_penalty():
    """``lipschitz_relative``: the first penalized minibatch's penalty becomes the reference (held, and kept by
    a checkpoint), and the step it takes is the absolute penalty's with ``lipschitz_coef / reference``."""
    rel = steep_ppo(lipschitz_coef=1.0, lipschitz_relative=True)
    fill_alternating(rel, 8, 4)
    first = rel.update()["lipschitz"]
    assert float(rel.lipschitz_ref) == pytest.approx(first)  # one minibatch, one epoch: the same estimate
    absolute = steep_ppo(lipschitz_coef=1.0 / first)
    fill_alternating(absolute, 8, 4)
    absolute.update()
    assert rel.model.actor.net[-1].weight.item() == pytest.approx(absolute.model.actor.net[-1].weight.item())
    fill_alternating(rel, 8, 4)
    rel.update()
    assert float(rel.lipschitz_ref) == pytest.approx(first)  # held, not re-measured
    restored = steep_ppo(lipschitz_coef=1.0, lipschitz_relative=True)
    restored.load_state_dict(rel.state_dict())
    assert float(restored.lipschitz_ref) == pytest.approx(first)


def test_excluded_terms_are_left_out_of_the_penalty():
    """``lipschitz_exclude`` names terms of ``VecEnv.obs_terms``: their inputs get mask 0 (across the actor's
    groups, in order); a name the input lacks, or a term list that does not add up to the input, is refused."""
    terms = {"policy": [("base_ang_vel", 3), ("velocity_commands", 3)], "extra": [("scan", 2)]}
    assert term_mask(terms, ["policy", "extra"], ["velocity_commands"], "k").tolist() == [1, 1, 1, 0, 0, 0, 1, 1]
    with pytest.raises(ValueError, match=r"k: no observation term \['scan'\] in the policy's input \['policy'\]"):
        term_mask(terms, ["policy"], ["scan"], "k")
    cfg = PPOConfig(num_steps_per_env=8, actor_hidden=[], critic_hidden=[8], lipschitz_coef=1.0,
                    lipschitz_exclude=["velocity_commands"])
    alg = PPO(cfg, {"policy": 6}, 1, num_envs=4, device="cpu")
    alg.set_obs_terms(lambda: {"policy": terms["policy"]})
    assert alg.lipschitz_mask.tolist() == [1, 1, 1, 0, 0, 0]
    with pytest.raises(ValueError, match="lipschitz_exclude: the env.s terms add up to 8 inputs, the policy has 6"):
        alg.set_obs_terms(lambda: {"policy": [("base_ang_vel", 5), ("velocity_commands", 3)]})


def test_the_runner_hands_the_envs_terms_to_the_penalty(tmp_path):
    """Through ``ctrl-rl train``: pendulum's one term (named after its group) excluded leaves nothing to penalize;
    a term the env does not have is refused with the env's names."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    common = ["task=pendulum", "env.num_envs=8", "algo.num_steps_per_env=8", "runner.max_iterations=2",
              "runner.progress=false", "algo.actor_hidden=[16]", "algo.critic_hidden=[16]", "algo.lipschitz_coef=1.0",
              f"runner.log_root={tmp_path}"]
    ea = EventAccumulator(str(train([*common, "algo.lipschitz_exclude=[policy]"])))
    ea.Reload()
    assert [e.value for e in ea.Scalars("Loss/lipschitz")] == [0.0, 0.0]
    with pytest.raises(ValueError, match=r"lipschitz_exclude: no observation term \['command'\] .* its terms: policy"):
        train([*common, "algo.lipschitz_exclude=[command]"])


def test_the_gated_ramp_by_hand():
    """``lipschitz_gate``: 0 before the start; then up a step where the gate passed, down where it did not,
    within [0, 1]. Passed every time it is the fixed ramp."""
    f, seen = 0.0, []
    for update, passed in [(0, True), (1, True), (2, True), (3, False), (4, True), (5, True), (6, True), (7, True)]:
        f = gated_ramp(f, update, 1, 4, passed)
        seen.append(f)
    assert seen == pytest.approx([0.0, 0.25, 0.5, 0.25, 0.5, 0.75, 1.0, 1.0])
    assert gated_ramp(0.25, 9, 1, 4, False) == 0.0 and gated_ramp(0.0, 9, 1, 4, False) == 0.0
    assert [gated_ramp(0.0, 3, 3, 0, True), gated_ramp(1.0, 4, 3, 0, False)] == [1.0, 0.0]  # no ramp: all or nothing
    f = 0.0
    for u in range(12):
        f = gated_ramp(f, u, 3, 4, True)
        assert 0.02 * f == pytest.approx(ramp_weight(0.02, u, 3, 4))
    with pytest.raises(ConfigError, match="algo.lipschitz_gate: gates the Lipschitz penalty, which is off"):
        PPOConfig(lipschitz_gate="Metrics/lin_vel_error", lipschitz_gate_below=0.2)
    with pytest.raises(ConfigError, match="algo.lipschitz_gate_below: the gate 'Metrics/lin_vel_error' needs its bar"):
        PPOConfig(lipschitz_coef=0.01, lipschitz_gate="Metrics/lin_vel_error")


def test_the_gate_follows_the_logged_value_and_is_checkpointed():
    cfg = PPOConfig(num_steps_per_env=8, actor_hidden=[], critic_hidden=[8], normalize_obs=False, lipschitz_coef=0.5,
                    lipschitz_start=1, lipschitz_ramp=2, lipschitz_gate="Metrics/err", lipschitz_gate_below=0.2,
                    learning_rate=1e-4)
    alg = PPO(cfg, {"policy": 1}, 1, num_envs=4, device="cpu")
    weights = []
    for err in (0.1, 0.1, 0.1, 0.3, 0.2, 0.5, 0.5):
        fill_alternating(alg, 8, 4)
        alg.observe_logs({"Metrics/err": err, "Reward/x": 1.0})
        stats = alg.update()
        weights.append(stats["lipschitz_weight"])
        assert ("lipschitz" in stats) == (stats["lipschitz_weight"] > 0)
    assert weights == pytest.approx([0.0, 0.25, 0.5, 0.25, 0.5, 0.25, 0.0])  # at the bar counts as passed
    alg.lipschitz_gated = 0.5
    restored = PPO(cfg, {"policy": 1}, 1, num_envs=4, device="cpu")
    restored.load_state_dict(alg.state_dict())
    assert restored.lipschitz_gated == 0.5
    with pytest.raises(ValueError, match=r"lipschitz_gate: this run logs no 'Metrics/err'; it logs \['Reward/x'\]"):
        alg.observe_logs({"Reward/x": 1.0})


def test_the_runner_gates_the_penalty_on_the_tasks_log(tmp_path):
    """Through ``ctrl-rl train`` on reach: a bar its position error always meets ramps the weight in, one it never
    meets keeps it at 0; a value the run does not log is refused with the run's own tags."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    common = ["task=reach", "env.num_envs=4", "algo.num_steps_per_env=8", "runner.max_iterations=2",
              "runner.progress=false", "algo.actor_hidden=[16]", "algo.critic_hidden=[16]", "algo.lipschitz_coef=1.0",
              "algo.lipschitz_ramp=2", f"runner.log_root={tmp_path}"]
    for below, expected in ((100.0, [0.5, 1.0]), (1e-9, [0.0, 0.0])):
        run = train([*common, "algo.lipschitz_gate=Metrics/position_error", f"algo.lipschitz_gate_below={below}"])
        ea = EventAccumulator(str(run))
        ea.Reload()
        assert [e.value for e in ea.Scalars("Loss/lipschitz_weight")] == pytest.approx(expected)
    with pytest.raises(ValueError, match=r"lipschitz_gate: this run logs no 'Metrics/lin_vel_error'; it logs \[.*"
                                         r"'Metrics/position_error'"):
        train([*common, "algo.lipschitz_gate=Metrics/lin_vel_error", "algo.lipschitz_gate_below=0.2"])
