"""Concurrent Teacher-Student: the role split, the latent routing and the student's export, and a run."""

from __future__ import annotations

import pytest
import torch

from ctrl_rl.app.export import export
from ctrl_rl.app.train import train
from ctrl_rl.config import ConfigError
from ctrl_rl.config_onpolicy import CTSConfig
from ctrl_rl.nets.cts import CTSActor, StudentPolicy, teacher_rows


def test_the_first_envs_are_the_teachers() -> None:
    assert teacher_rows(4, 0.5, "cpu")[:, 0].tolist() == [1.0, 1.0, 0.0, 0.0]
    assert teacher_rows(8, 0.75, "cpu")[:, 0].tolist() == [1.0] * 6 + [0.0] * 2


def test_each_role_reads_its_own_encoder_and_the_student_exports_alone() -> None:
    torch.manual_seed(0)
    cfg = CTSConfig(actor_hidden=[16], encoder_hidden=[8], latent_dim=4, normalize_obs=True)
    actor = CTSActor(3, 2, 2, cfg)
    actor.normalizer.update(torch.randn(64, 6) * 3 + 1)  # non-trivial statistics
    s, p = torch.randn(5, 3), torch.randn(5, 2)
    as_student = actor.distribution(torch.cat([s, p, torch.zeros(5, 1)], -1))[0]
    as_teacher = actor.distribution(torch.cat([s, p, torch.ones(5, 1)], -1))[0]
    assert not torch.allclose(as_student, as_teacher)
    # the student's action does not depend on the privileged input; the teacher's does
    other = actor.distribution(torch.cat([s, p + 1.0, torch.zeros(5, 1)], -1))[0]
    torch.testing.assert_close(other, as_student)
    # by hand: the teacher's latent, then the shared MLP on [latent, normalized student obs]
    y = actor.normalizer(torch.cat([s, p, torch.ones(5, 1)], -1))
    z = actor.teacher_encoder(y[:, 3:5])
    torch.testing.assert_close(as_teacher, actor.policy(torch.cat([z, y[:, :3]], -1)))
    # the exported student: the policy group alone, equal to the student's path in training
    torch.testing.assert_close(StudentPolicy(actor)(s), as_student)


def test_the_student_encoder_learns_from_the_latent_regression_alone() -> None:
    """The paper's split: the policy gradient trains the privileged encoder (and the shared MLP), never
    the student's encoder; the latent regression trains the student's encoder, never the teacher's."""
    torch.manual_seed(0)
    actor = CTSActor(3, 2, 2, CTSConfig(actor_hidden=[16], encoder_hidden=[8], latent_dim=4, normalize_obs=False))
    x = torch.cat([torch.randn(6, 5), teacher_rows(6, 0.5, "cpu")], -1)  # 3 teacher rows, 3 student rows

    def grads(loss: torch.Tensor) -> dict[str, float]:
        actor.zero_grad(set_to_none=True)
        loss.backward()
        return {name: sum(p.grad.abs().sum().item() for p in getattr(actor, name).parameters() if p.grad is not None)
                for name in ("student_encoder", "teacher_encoder", "policy")}

    surrogate = grads(actor.distribution(x)[0].square().sum())  # any function of both roles' actions
    assert surrogate["student_encoder"] == 0.0 and surrogate["teacher_encoder"] > 0 and surrogate["policy"] > 0
    latent = grads(actor.latent_loss(x))
    assert latent["student_encoder"] > 0 and latent["teacher_encoder"] == 0.0 and latent["policy"] == 0.0


def test_cts_trains_logs_the_latent_loss_and_exports_the_student(tmp_path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from ctrl_rl.deploy.robot_policy import RobotPolicy

    run = train(["algo=cts", "task=quadruped_velocity_flat", "env.num_envs=8", "algo.num_steps_per_env=8",
                 "runner.max_iterations=3", "runner.progress=false", "algo.actor_hidden=[32]",
                 "algo.critic_hidden=[32]", "algo.encoder_hidden=[16]", f"runner.log_root={tmp_path}"])
    ea = EventAccumulator(str(run))
    ea.Reload()
    assert len(ea.Scalars("Loss/latent")) == 3
    bundle = export(str(run), [])  # export checks ONNX against torch on recorded observations
    assert RobotPolicy(bundle).policy.obs_dim == 45  # the policy group: what the robot measures


def test_cts_settings_are_checked(tmp_path) -> None:
    with pytest.raises(ConfigError, match="algo.teacher_fraction: must be in \\(0, 1\\)"):
        train(["algo=cts", "task=quadruped_velocity_flat", "algo.teacher_fraction=1.0", f"runner.log_root={tmp_path}"])
    with pytest.raises(ConfigError, match="algo.symmetry: cts has no mirrored policy update"):
        train(["algo=cts", "task=quadruped_velocity_flat", "algo.symmetry=both", f"runner.log_root={tmp_path}"])
