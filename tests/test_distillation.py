"""Distillation: the loss and the teacher-mixing schedule by hand, and a student trained, exported, resumed."""

from __future__ import annotations

import math

import pytest
import torch

from ctrl_rl.algos.losses import distillation_loss, teacher_mix
from ctrl_rl.app.export import export
from ctrl_rl.app.train import train
from ctrl_rl.config import ConfigError

TINY = ["env.num_envs=8", "algo.num_steps_per_env=8", "runner.progress=false", "algo.actor_hidden=[32]"]


def test_distillation_loss_by_hand() -> None:
    s, t = torch.tensor([[1.0, 2.0], [0.0, 0.0]]), torch.tensor([[0.0, 2.0], [1.0, -1.0]])
    # squared errors 1, 0, 1, 1: mean 0.75
    assert distillation_loss(s, t, "mse").item() == pytest.approx(0.75)
    # KL(N(0, 2^2) || N(1, 1^2)) per dim: log(1/2) + (4 + 1) / 2 - 1/2 = 2 - log 2; two dims, one sample
    kl = distillation_loss(torch.tensor([[1.0, 1.0]]), torch.tensor([[0.0, 0.0]]), "kl",
                           torch.tensor([[1.0, 1.0]]), torch.tensor([[2.0, 2.0]]))
    assert kl.item() == pytest.approx(2 * (2 - math.log(2)), rel=1e-6)
    same = distillation_loss(t, t, "kl", torch.ones(2, 2), torch.ones(2, 2))
    assert same.item() == 0.0
    with pytest.raises(ValueError, match="needs both standard deviations"):
        distillation_loss(s, t, "kl")


def test_teacher_mix_schedule() -> None:
    assert [teacher_mix(i, 1.0, 4) for i in range(6)] == [1.0, 0.75, 0.5, 0.25, 0.0, 0.0]
    assert teacher_mix(0, 0.5, 2) == 0.5 and teacher_mix(1, 0.5, 2) == 0.25
    assert teacher_mix(0, 1.0, 0) == 0.0  # the student always acts


@pytest.fixture(scope="module")
def teacher(tmp_path_factory):
    """A privileged teacher: PPO whose actor reads the critic group (base velocity, contacts)."""
    root = tmp_path_factory.mktemp("teacher")
    return train(["task=quadruped_velocity_flat", "algo.actor_obs=[critic]", "runner.max_iterations=2",
                  "algo.critic_hidden=[32]", f"runner.log_root={root}", *TINY])


def test_student_learns_from_the_teacher_exports_and_resumes(teacher, tmp_path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from ctrl_rl.deploy.robot_policy import RobotPolicy

    common = ["algo=distillation", "task=quadruped_velocity_flat", f"algo.teacher={teacher}",
              "algo.teacher_mix_iterations=2", f"runner.log_root={tmp_path}", *TINY]
    run = train([*common, "runner.max_iterations=4", "runner.save_interval=2"])
    ea = EventAccumulator(str(run))
    ea.Reload()
    mix = [e.value for e in ea.Scalars("Loss/teacher_mix")]
    assert mix == [1.0, 0.5, 0.0, 0.0]
    loss = [e.value for e in ea.Scalars("Loss/distillation")]
    assert loss[-1] < loss[0]
    bundle = export(str(run), [])
    rp = RobotPolicy(bundle)  # the student reads the deployable group only
    assert rp.policy.obs_dim == 45
    # a resume from iteration 2 ends where the uninterrupted run did
    resumed = train([*common, "runner.max_iterations=4", f"runner.checkpoint={run}/model_2.pt"])
    a = torch.load(run / "model_4.pt", weights_only=False)["algo"]["model"]
    b = torch.load(resumed / "model_4.pt", weights_only=False)["algo"]["model"]
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=0, atol=0)


def test_a_recurrent_student_trains(teacher, tmp_path) -> None:
    run = train(["algo=distillation", "task=quadruped_velocity_flat", f"algo.teacher={teacher}", "algo.rnn_type=gru",
                 "algo.rnn_hidden_size=16", "algo.num_minibatches=2", "runner.max_iterations=2",
                 f"runner.log_root={tmp_path}", *TINY])
    assert (run / "model_2.pt").is_file()


def test_distillation_settings_are_checked(teacher, tmp_path) -> None:
    with pytest.raises(ConfigError, match="algo.teacher: is required"):
        train(["algo=distillation", "task=quadruped_velocity_flat", f"runner.log_root={tmp_path}", *TINY])
    with pytest.raises(ConfigError, match="algo.loss: must be mse or kl"):
        train(["algo=distillation", "task=quadruped_velocity_flat", f"algo.teacher={teacher}", "algo.loss=huber",
               f"runner.log_root={tmp_path}", *TINY])
    with pytest.raises(ValueError, match="teacher .* reads .* this env has"):
        train(["algo=distillation", "task=pendulum", f"algo.teacher={teacher}", f"runner.log_root={tmp_path}", *TINY])
