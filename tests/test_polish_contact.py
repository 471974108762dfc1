"""The polish on the robot's own contact model (``task.kwargs.polish_contact``,
``tasks/locomotion/polish_contact.py``)."""

from __future__ import annotations

import mujoco
import pytest
import torch

from ctrl_rl.sims import make_env

ELLIPTIC, PYRAMIDAL = mujoco.mjtCone.mjCONE_ELLIPTIC, mujoco.mjtCone.mjCONE_PYRAMIDAL
KW = {"obs_noise": 0.0, "push_velocity": 0.0, "polish_contact": "mjcf", "polish_start": 3}


def _contact(env) -> set[tuple[int, float]]:
    """Every world's (cone, impratio): one pair when they all agree."""
    return {(int(m.opt.cone), float(m.opt.impratio)) for m in [env.physics.model, *env.physics.models]}


@pytest.mark.parametrize("robot, switches", [("ctrl_quad", False), ("unitree_go1", False), ("ctrl_dog", True)])
def test_only_an_mjcf_asking_for_another_contact_model_switches(robot, switches):
    """ctrl_quad's and the Go1's MJCFs ask for the profile's pyramidal cone at impratio 1: the recipe's
    ``polish_contact: mjcf`` leaves their training as it was; ctrl_dog's (elliptic, 100) switches, capped at 10."""
    env = make_env("mujoco", "quadruped_velocity_flat", 2, seed=0, robot=robot, **KW)
    assert env.task.switches_contact is switches
    if switches:
        assert env.task.polish_contact.after == ("elliptic", 10.0)


def test_the_cone_switches_at_polish_start_and_a_restored_state_takes_its_own():
    env = make_env("mujoco", "quadruped_velocity_flat", 2, seed=0, robot="ctrl_dog", **KW)
    early = env.get_state()
    seen = []
    for _ in range(5):
        seen.append(_contact(env))
        env.step(torch.zeros(2, env.action_dim))
    # steps 1-3 (control steps 0-2) on the profile's, from the 4th on the MJCF's with impratio capped at 10
    assert seen == [{(int(PYRAMIDAL), 1.0)}] * 3 + [{(int(ELLIPTIC), 10.0)}] * 2
    env.set_state(early)  # a checkpoint from before the polish: back on the profile's contact model
    assert _contact(env) == {(int(PYRAMIDAL), 1.0)}


def test_a_polished_checkpoint_evaluates_on_the_polish_contact_model():
    from ctrl_rl.app.configure import load_train_config
    from ctrl_rl.app.session import as_polished
    from ctrl_rl.sims.build import build_env

    cfg = load_train_config(["task=quadruped_velocity_flat", "tune=ppo_quadruped_velocity_flat_fast",
                             "robot=ctrl_dog", "env.num_envs=2"])
    assert cfg.task.kwargs["polish_contact"] == "mjcf" and cfg.task.kwargs["polish_start"] == 12000
    after, before = as_polished(cfg, {"iteration": 501}), as_polished(cfg, {"iteration": 500})
    assert not any(k.startswith("polish") for k in (*after.task.kwargs, *before.task.kwargs))
    assert (after.task.kwargs["cone"], after.task.kwargs["impratio"]) == ("elliptic", 10.0)
    assert "cone" not in before.task.kwargs
    assert _contact(build_env(after, num_envs=2)) == {(int(ELLIPTIC), 10.0)}
    assert _contact(build_env(before, num_envs=2)) == {(int(PYRAMIDAL), 1.0)}


def test_polish_contact_is_checked_and_refused_where_the_cone_is_compiled():
    from ctrl_rl.tasks.locomotion.velocity_config import VelocityTaskConfig

    with pytest.raises(ValueError, match="polish_contact must be '' .* or mjcf"):
        VelocityTaskConfig.from_kwargs(polish_contact="elliptic")
    with pytest.raises(ValueError, match="polish_impratio_max > 0"):
        VelocityTaskConfig.from_kwargs(polish_contact="mjcf", polish_impratio_max=0.0)
    pytest.importorskip("mujoco_warp")
    with pytest.raises(ValueError, match="polish_contact=mjcf changes the friction cone mid-run"):
        make_env("mjwarp", "quadruped_velocity_flat", 2, seed=0, robot="ctrl_dog", **KW)
