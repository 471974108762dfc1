"""The gait clock (``tasks/locomotion/gait_clock.py``): phase offsets from where the feet stand, the contact
schedule and its terms by hand, and a quadruped that trots to it from training to the deploy bundle."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ctrl_rl.sims import make_env
from ctrl_rl.tasks.locomotion.gait_clock import clock_rewards, foot_phase_offsets, gait_phase, stance_schedule
from ctrl_rl.tasks.locomotion.velocity_config import VelocityTaskConfig

QUAD = np.array([[0.2, -0.1, 0.0], [0.2, 0.1, 0.0], [-0.2, -0.1, 0.0], [-0.2, 0.1, 0.0]])  # FR, FL, RR, RL


def test_a_quadruped_trots_and_a_biped_alternates_whatever_the_foot_order():
    np.testing.assert_array_equal(foot_phase_offsets(QUAD), [0.5, 0.0, 0.0, 0.5])  # FL with RR, FR with RL
    np.testing.assert_array_equal(foot_phase_offsets(QUAD[[1, 3, 0, 2]]), [0.0, 0.5, 0.5, 0.0])
    np.testing.assert_array_equal(foot_phase_offsets(np.array([[0.0, -0.1, 0], [0.0, 0.1, 0]])), [0.5, 0.0])


@pytest.mark.parametrize("points", [QUAD[:3], np.array([[0.0, 0.1, 0], [0.0, 0.2, 0]]), QUAD * [1, 0, 1]])
def test_feet_the_clock_cannot_schedule_are_refused_by_position(points):
    with pytest.raises(ValueError, match="Set task.kwargs.gait_period=0 for no clock"):
        foot_phase_offsets(points)


def test_schedule_and_terms_by_hand():
    """Period 0.5 s at 50 Hz: 5 steps are phase 0.5. With stance_fraction 0.5, a foot with offset 0 is down
    in [0, 0.5) of the phase, one with offset 0.5 in [0.5, 1)."""
    phase = gait_phase(torch.tensor([0, 5, 12]), 0.02, 0.5)
    torch.testing.assert_close(phase, torch.tensor([[0.0], [0.2], [0.48]]))
    offsets = torch.tensor([0.5, 0.0, 0.0, 0.5])
    assert stance_schedule(phase, offsets, 0.5).tolist() == [[False, True, True, False]] * 3
    assert stance_schedule(torch.tensor([[0.75]]), offsets, 0.5).tolist() == [[True, False, False, True]]
    contact = torch.tensor([[False, True, True, False], [True, True, True, True]])
    lift = torch.tensor([[0.08, 0.0, 0.0, 0.05], [0.0, 0.0, 0.0, 0.0]])
    terms = clock_rewards(torch.tensor([[0.1], [0.1]]), offsets, 0.5, contact, lift, 0.08)
    torch.testing.assert_close(terms["gait_contact"], torch.tensor([4.0, 2.0]))  # all match; FR and RL should swing
    torch.testing.assert_close(terms["feet_swing_height"], torch.tensor([0.03 ** 2, 0.0]))  # RL 3 cm short


def test_clocked_terms_need_a_clock():
    with pytest.raises(ValueError, match=r"follow the gait clock.*task.kwargs.gait_period=0.5"):
        VelocityTaskConfig(rewards={**VelocityTaskConfig().rewards, "gait_contact": 0.25})
    with pytest.raises(ValueError, match="stance_fraction in"):
        VelocityTaskConfig(gait_period=0.5, stance_fraction=0.0)


def test_a_clocked_quadruped_observes_its_clock_and_rewards_the_trot():
    """ctrl_quad with a 0.5 s clock: the actor and critic observe sin/cos of the phase, the bundle carries the
    period, and standing on four feet matches half the trot's schedule (2 of 4 feet) at every phase."""
    env = make_env("mujoco", "quadruped_velocity_flat", 2, seed=0, gait_period=0.5, push_velocity=0.0,
                   init_base_vel=0.0, init_joint_noise=0.0, obs_noise=0.0, fixed_command=[0.0, 0.0, 0.0],
                   gait_terms_ramp_steps=0, rewards={**VelocityTaskConfig().rewards, "gait_contact": 0.25})
    obs = env.reset(seed=0)
    assert [t.name for t in env.task.obs_terms["policy"]][-1] == "gait_clock"
    torch.testing.assert_close(obs["policy"][:, -2:], torch.tensor([[0.0, 1.0]] * 2))
    assert env.deploy_metadata()["gait_period"] == 0.5
    for step in range(1, 8):
        obs, _, _, _, info = env.step(torch.zeros(2, env.action_dim))
        phase = step * 0.02 / 0.5
        torch.testing.assert_close(obs["critic"][0, -2:], torch.tensor([np.sin(2 * np.pi * phase),
                                                                       np.cos(2 * np.pi * phase)]).float(),
                                   atol=1e-6, rtol=0)
        torch.testing.assert_close(info["log"]["Reward/gait_contact"], torch.tensor(2 * 0.25 * 0.02), rtol=1e-5,
                                   atol=0)
    env.close()
