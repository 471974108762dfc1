"""``runner.keep_best``: ``model_best.pt`` holds the iteration whose windowed mean of a logged value was the highest
(a fine-tuning run that peaks and then falls keeps its peak), chosen by a pure function of the run's history."""

from __future__ import annotations

import pytest
import torch

from ctrl_rl.app.train import train
from ctrl_rl.config import ConfigError, RunnerConfig
from ctrl_rl.utils.checkpoint_files import BEST_MODEL, new_best


def test_a_new_best_by_hand():
    assert new_best([0.5], 2) is None  # no full window yet
    assert new_best([0.5, 0.7], 2) == pytest.approx(0.6)  # the first full window is a best
    assert new_best([0.5, 0.7, 0.4], 2) is None  # 0.55 < 0.6
    assert new_best([0.5, 0.7, 0.4, 0.9], 2) == pytest.approx(0.65)
    assert new_best([0.5, 0.75, 0.25, 1.0], 2) is None  # a tie (0.625) is not better
    assert new_best([1.0, 0.0, 2.0], 1) == 2.0
    with pytest.raises(ConfigError, match="runner.best_window: must be > 0"):
        RunnerConfig(best_window=0)


def test_the_run_keeps_its_best_iteration(tmp_path):
    """Through ``ctrl-rl train`` on reach: ``model_best.pt`` is the checkpoint of the iteration whose 2-iteration
    mean of ``Reward/position_tracking`` was the highest; a tag the run does not log is refused with its tags."""
    common = ["task=reach", "env.num_envs=8", "algo.num_steps_per_env=16", "runner.max_iterations=6",
              "runner.progress=false", "algo.actor_hidden=[16]", "algo.critic_hidden=[16]",
              "runner.stagger_episodes=true", "runner.best_window=2", f"runner.log_root={tmp_path}"]
    run = train([*common, "runner.keep_best=Reward/position_tracking"])
    history = torch.load(run / "model_6.pt", weights_only=False)["history"]
    values = [row["Reward/position_tracking"] for row in history]
    means = [(a + b) / 2 for a, b in zip(values[:-1], values[1:], strict=True)]
    best = torch.load(run / BEST_MODEL, weights_only=False)
    assert best["iteration"] == 2 + means.index(max(means))
    with pytest.raises(ConfigError, match=r"runner.keep_best: this run logs no 'Metrics/sucess_rate'; it logs .*"
                                          r"'Metrics/success_rate'"):
        train([*common, "runner.keep_best=Metrics/sucess_rate", "runner.max_iterations=30"])


def test_pql_refuses_keep_best_by_name():
    import dataclasses

    from ctrl_rl.app.configure import load_train_config
    from ctrl_rl.app.session import build_env
    from ctrl_rl.runners import make_runner

    cfg = load_train_config(["algo=pql", "task=pendulum", "env.num_envs=16"])
    cfg = dataclasses.replace(cfg, runner=dataclasses.replace(cfg.runner, keep_best="Train/mean_reward"))
    with pytest.raises(ConfigError, match="runner.keep_best: PQL's loop .* drop runner.keep_best for algo=pql"):
        make_runner(build_env(cfg), cfg)
