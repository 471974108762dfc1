"""Training's episode statistics (``utils/logger.py: EpisodeStats``): a task's per-episode metrics (success)
are averaged over the episodes that ended and logged as ``Metrics/<name>``."""

from __future__ import annotations

import csv

import pytest
import torch
from toy_arm import write_toy_arm

from ctrl_rl.utils.logger import EpisodeStats


def test_episode_metrics_average_over_the_episodes_that_ended():
    stats = EpisodeStats(torch.device("cpu"))
    no, yes = torch.tensor([False, False, False]), torch.tensor([True, False, True])
    stats.add(no, no, {"episode_metrics": {"success_rate": torch.tensor([1.0, 1.0, 1.0])}})  # nobody ended
    assert "Metrics/success_rate" not in stats.read()[2]
    stats.add(yes, no, {"episode_metrics": {"success_rate": torch.tensor([1.0, 1.0, 0.0])}})  # envs 0 and 2
    stats.add(no, torch.tensor([False, True, False]), {"episode_metrics": {"success_rate": torch.tensor([0., 1., 0.])}})
    ret, length, logs = stats.read()
    assert ret is None and length is None  # no "episode" entry: returns are not invented
    assert logs == {"Metrics/success_rate": pytest.approx(2 / 3)}  # (1 + 0 + 1) over 3 ended episodes
    stats.reset()
    assert stats.read()[2] == {}


def test_an_offline_evaluations_summary_carries_its_episode_metrics():
    """An offline learner's evaluation arrives as means (``add_summary``); its success rate is logged as training's."""
    stats = EpisodeStats(torch.device("cpu"))
    stats.add_summary(-10.0, 250.0, metrics={"success_rate": 0.75})
    stats.add_summary(-20.0, 150.0, metrics={"success_rate": 0.25})
    assert stats.read() == (pytest.approx(-15.0), pytest.approx(200.0), {"Metrics/success_rate": pytest.approx(0.5)})


def test_a_reach_run_logs_its_success_rate(tmp_path):
    from ctrl_rl.app.train import train

    arm = write_toy_arm(tmp_path / "arm")
    run = train(["task=reach", f"+task.kwargs.arm={arm}", "+task.kwargs.episode_length_s=0.2", "env.num_envs=8",
                 "algo.num_steps_per_env=16", "runner.max_iterations=2", f"runner.log_root={tmp_path}",
                 "runner.progress=false"])
    with open(run / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2 and all(0.0 <= float(r["Metrics/success_rate"]) <= 1.0 for r in rows), rows


def test_the_progress_line_shows_episode_metrics_only(tmp_path, capsys):
    """A manipulation run's progress line ends with its success rate; per-step logs (a velocity task's
    ``Metrics/lin_vel_error``) stay in TensorBoard."""
    from ctrl_rl.utils.logger import TrainLogger

    stats = EpisodeStats(torch.device("cpu"))
    done = torch.tensor([True, True])
    stats.add(done, ~done, {"episode_metrics": {"success_rate": torch.tensor([1.0, 0.0])},
                            "log": {"Metrics/lin_vel_error": torch.tensor(0.3)}})
    logger = TrainLogger(None, total_iterations=1, steps_per_iteration=2)
    logger.log_iteration(1, {}, stats, 0.1, 0.1)
    line = capsys.readouterr().out.strip()
    assert line.endswith("| success_rate 0.50") and "lin_vel_error" not in line, line
