"""Learning tests on 2 CPU cores: each learner must reach a stated return within a stated budget.

Budgets are the tuned defaults (``tasks/<family>/tune/<algo>_<task>.yaml``), so these tests also
guard what ``ctrl-rl train task=<id>`` gives a user. Scores are deterministic-policy
evaluations on fresh seeds, in gymnasium's reward scale.
"""

import pytest

from ctrl_rl.app.configure import load_train_config
from ctrl_rl.app.evaluate import evaluate
from ctrl_rl.app.train import train


def train_and_evaluate(task: str, tmp_path, max_env_steps: int, algo: str = "ppo",
                       extra: tuple[str, ...] = ()) -> dict[str, float]:
    """Train ``task`` with its default config and ``extra`` overrides (checked to fit ``max_env_steps``),
    then evaluate."""
    overrides = [f"algo={algo}", f"task={task}", f"runner.log_root={tmp_path}", "runner.progress=false", *extra]
    cfg = load_train_config(overrides)
    assert cfg.env.num_envs * cfg.algo.num_steps_per_env * cfg.runner.max_iterations <= max_env_steps
    return evaluate(str(train(overrides)), [], episodes=100, seed=2024)


@pytest.mark.slow
def test_ppo_pendulum_swingup_reaches_minus_200_within_5M_steps(tmp_path):
    result = train_and_evaluate("pendulum", tmp_path, 5_000_000)
    assert result["mean_return"] >= -200.0, result


@pytest.mark.slow
def test_ppo_cartpole_balance_reaches_max_return_within_1M_steps(tmp_path):
    result = train_and_evaluate("cartpole_balance", tmp_path, 1_000_000)
    assert result["min_return"] == pytest.approx(500.0), result  # every episode survives 500 steps


@pytest.mark.slow
def test_sac_pendulum_swingup_reaches_minus_200_within_150k_steps(tmp_path):
    result = train_and_evaluate("pendulum", tmp_path, 150_000, algo="sac")
    assert result["mean_return"] >= -200.0, result


@pytest.mark.slow
def test_sac_cartpole_balance_reaches_max_return(tmp_path):
    result = train_and_evaluate("cartpole_balance", tmp_path, 1_000_000, algo="sac")
    assert result["min_return"] == pytest.approx(500.0), result


@pytest.mark.slow
def test_ppo_quadruped_return_rises_on_mujoco_cpu(tmp_path):
    """A short run on ctrl_quad (sim=mujoco): from falling within ~1 s to standing for ~10 s.

    The walking benchmark (BENCHMARKS.md) trains the full default budget; this guards, in
    about a minute, that rewards, terminations and the CPU backend give PPO a learnable task.
    """
    import csv

    overrides = ["task=quadruped_velocity_flat", f"runner.log_root={tmp_path}", "runner.progress=false",
                 "env.num_envs=512", "runner.max_iterations=40", "runner.save_interval=40", "seed=3"]
    with open(train(overrides) / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    first = [float(r["mean_reward"]) for r in rows[:5] if r["mean_reward"]]
    last = [float(r["mean_reward"]) for r in rows[-5:]]
    length_first = float(rows[2]["mean_episode_length"])
    length_last = float(rows[-1]["mean_episode_length"])
    # The gait recipe's penalties ramp in over the first 100 iterations (task.kwargs.gait_terms_ramp_steps),
    # so within 40 the clipped total stays small (seed 3: 0.015 -> 0.038 per step); standing is the signal:
    # episodes from 60 to 483 steps.
    assert sum(last) / len(last) > 1.5 * sum(first) / len(first), (first, last)
    assert length_last > 4.0 * length_first, (length_first, length_last)


@pytest.mark.slow
def test_fpo_pendulum_swingup_reaches_minus_250_within_2_5M_steps(tmp_path):
    """FPO's flow policy, deterministic (zero-noise) evaluation: tune/fpo_pendulum.yaml shortened from 200 to 150
    iterations (2.5M steps; its learning rate anneals to 0 over them) for the suite's time. BENCHMARKS.md's FPO
    table: 4 of 4 seeds past -250 by 2.46M steps; this run scored -156.7 when the cut was made."""
    result = train_and_evaluate("pendulum", tmp_path, 2_500_000, algo="fpo", extra=("runner.max_iterations=150",))
    assert result["mean_return"] >= -250.0, result


@pytest.mark.slow
def test_props_pendulum_swingup_reaches_minus_200_within_1M_steps(tmp_path):
    """PPO's settings (tune/props_pendulum.yaml extends tune/ppo_pendulum.yaml) at a fifth of PPO's budget, which
    the PPO test above guards: 60 iterations = 983k steps (BENCHMARKS.md, "PROPS vs PPO": 5 of 5 seeds past -200
    at 315k steps on average, -138 to -181 at 983k). PROPS's update costs twice PPO's per step."""
    result = train_and_evaluate("pendulum", tmp_path, 1_000_000, algo="props", extra=("runner.max_iterations=60",))
    assert result["mean_return"] >= -200.0, result


@pytest.mark.slow
def test_uni_o4_pendulum_offline_then_online_reaches_minus_200_within_330k_online_steps(tmp_path):
    """Uni-O4 (``tune/uni_o4_pendulum.yaml``) from a partially trained PPO policy's noisy data
    (deterministic about -640, data about -760): after 20 online iterations (330k env steps with the
    hand-over's) it swings up; PPO from scratch needs about 328k steps to pass -200 (BENCHMARKS.md)."""
    from ctrl_rl.app.collect import collect

    behavior = train(["task=pendulum", "seed=1", "runner.max_iterations=12", f"runner.log_root={tmp_path}",
                      "runner.progress=false"])
    data = collect(str(behavior / "model_12.pt"), [], str(tmp_path / "medium.hdf5"), steps=1000, envs=64,
                   noise=0.3, seed=101)
    overrides = ["algo=uni_o4", "task=pendulum", f"dataset={data}", "seed=1", "runner.max_iterations=20",
                 f"runner.log_root={tmp_path}", "runner.progress=false"]
    result = evaluate(str(train(overrides)), [], episodes=100, seed=2024)
    assert result["mean_return"] >= -200.0, result


BLIND_PENDULUM = ("task.kwargs.observe_velocity=false", "runner.max_iterations=150")
"""Pendulum with cos θ, sin θ only, at half the tuned budget (512 envs x 32 steps x 150 = 2.5M steps)."""


@pytest.mark.slow
def test_ppo_blind_pendulum_one_frame_mlp_stays_below_minus_400(tmp_path):
    """Without the velocity one frame cannot tell a swing from a fall: memory is needed."""
    result = train_and_evaluate("pendulum", tmp_path, 2_500_000, extra=BLIND_PENDULUM)
    assert result["mean_return"] < -400.0, result


@pytest.mark.slow
def test_ppo_blind_pendulum_three_frame_history_reaches_minus_250_within_2_5M_steps(tmp_path):
    extra = (*BLIND_PENDULUM, "task.kwargs.history_length=3")
    result = train_and_evaluate("pendulum", tmp_path, 2_500_000, extra=extra)
    assert result["mean_return"] >= -250.0, result


RECURRENT_PENDULUM = ("task.kwargs.observe_velocity=false", "runner.max_iterations=150", "env.num_envs=256",
                      "algo.num_minibatches=4", "algo.rnn_hidden_size=32")
"""A recurrent PPO on the blind pendulum: 256 envs x 32 steps x 150 = 1.2M steps, minibatches of 64 whole envs."""


@pytest.mark.slow
@pytest.mark.parametrize("rnn", ["gru", "lstm"])
def test_ppo_recurrent_blind_pendulum_reaches_minus_250_within_1_25M_steps(tmp_path, rnn):
    result = train_and_evaluate("pendulum", tmp_path, 1_250_000, extra=(*RECURRENT_PENDULUM, f"algo.rnn_type={rnn}"))
    assert result["mean_return"] >= -250.0, result
