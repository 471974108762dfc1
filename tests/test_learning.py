"""Learning tests on 2 CPU cores: PPO must reach a stated return within a stated budget.

Budgets are the task configs' own defaults (``configs/task/*.yaml``), so these tests also
guard what ``ctrl-rl train task=<id>`` gives a user. Scores are deterministic-policy
evaluations on fresh seeds, in gymnasium's reward scale.
"""

import pytest

from ctrl_rl.commands import evaluate, train
from ctrl_rl.configure import load_train_config


def train_and_evaluate(task: str, tmp_path, max_env_steps: int) -> dict[str, float]:
    """Train ``task`` with its default config (checked to fit ``max_env_steps``), then evaluate."""
    overrides = [f"task={task}", f"runner.log_root={tmp_path}", "runner.progress=false"]
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
