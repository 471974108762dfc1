"""Observation history: the per-term stacking (numpy = torch), same-step resets against a twin env
that is not reset, and the task options that turn it on."""

import numpy as np
import pytest
import torch

from ctrl_rl.robots.terms import ObsTerm, TermHistory
from ctrl_rl.sims import make_env


def test_term_history_by_hand_and_numpy_equals_torch():
    # term a: 2 values, 3 frames; term b: 1 value, 1 frame
    f0 = np.array([[1.0, 2.0, 9.0], [5.0, 6.0, 7.0]])
    f1 = f0 + 10.0
    f2 = f0 + 20.0
    for xp in (np, torch):
        as_x = (lambda a: a) if xp is np else torch.as_tensor
        h = TermHistory([2, 1], [3, 1])
        first = h.restart(as_x(f0))
        assert np.asarray(first).tolist()[0] == [1, 2, 1, 2, 1, 2, 9]  # the first frame in every slot
        np.testing.assert_array_equal(np.asarray(h.peek(as_x(f1)))[0], [1, 2, 1, 2, 11, 12, 19])
        h.push(as_x(f1))
        restart = as_x(np.array([False, True]))
        out = np.asarray(h.push(as_x(f2), restart))
        assert out[0].tolist() == [1, 2, 11, 12, 21, 22, 29]  # oldest first, term after term
        assert out[1].tolist() == [25, 26, 25, 26, 25, 26, 27]  # row 1 started over from its new frame
        assert h.out_dim == 7


def test_same_step_reset_history_equals_a_twin_that_is_not_reset():
    """Episodes of 5 steps against a twin with 50: until the cut both see the same states; at the cut
    ``final_obs`` carries the finished episode's frames, and the next obs is the first frame repeated."""
    kw = dict(observe_velocity=False, history_length=4)
    cut = make_env("torch", "pendulum", 3, seed=7, max_episode_length=5, **kw)
    twin = make_env("torch", "pendulum", 3, seed=7, max_episode_length=50, **kw)
    assert cut.obs_dims == {"policy": 8}
    a, b = cut.reset(seed=7), twin.reset(seed=7)
    gen = torch.Generator().manual_seed(0)
    for t in range(5):
        act = torch.rand(3, 1, generator=gen) * 2 - 1
        a, _, _, tr_a, info_a = cut.step(act)
        b, _, _, tr_b, info_b = twin.step(act)
        if t < 4:
            assert torch.equal(a["policy"], b["policy"]) and not bool(tr_a.any())
    assert bool(tr_a.all()) and not bool(tr_b.any())
    assert torch.equal(info_a["final_obs"]["policy"], b["policy"])  # the true last history
    first = a["policy"][:, -2:]
    assert torch.equal(a["policy"], first.repeat(1, 4))  # every slot holds the new episode's first frame


def test_quadruped_term_history_and_bundle_terms():
    names = ["projected_gravity", "velocity_commands", "joint_pos_rel", "joint_vel", "last_action"]
    env = make_env("mujoco", "quadruped_velocity_flat", 2, seed=0, policy_terms=names,
                   term_history={"joint_pos_rel": 3, "joint_vel": 3})
    assert env.obs_dims["policy"] == 3 + 3 + 3 * 12 + 3 * 12 + 12
    assert env.obs_dims["critic"] == 53  # the critic keeps every term, one frame
    terms = [ObsTerm.from_dict(t) for t in env.deploy_metadata()["obs_terms"]]
    assert [(t.name, t.history) for t in terms] == list(zip(names, [1, 1, 3, 3, 1], strict=True))
    obs = env.reset(seed=0)
    obs, *_ = env.step(torch.zeros(2, 12))
    assert obs["policy"].shape == (2, 90)


@pytest.mark.parametrize("kwargs, match", [
    ({"history_length": 0}, r"history_length.policy must be an integer >= 1"),
    ({"history_length": {"critic": 2}}, r"names group\(s\) \['critic'\]; this task has \['policy'\]"),
    ({"term_history": {"thdot": 2}}, r"names term\(s\) \['thdot'\]; the policy group has \['policy'\]"),
])
def test_history_options_are_checked_by_name(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_env("torch", "pendulum", 2, seed=0, **kwargs)


def test_quadruped_policy_terms_checked():
    with pytest.raises(ValueError, match="policy_terms must name some of"):
        make_env("mujoco", "quadruped_velocity_flat", 1, seed=0, policy_terms=["base_lin_vel"])


def test_history_env_passes_the_vecenv_conformance_suite():
    """Stacked groups keep every VecEnv guarantee: same-step resets, ``final_obs`` equal to a twin that
    is not cut, seeding, clipping, and an exact state round trip (the stacks included)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from vecenv_conformance import check_vecenv

    def pendulum(length):
        return lambda n, seed: make_env("torch", "pendulum", n, seed=seed, max_episode_length=length,
                                        observe_velocity=False, history_length=3)

    check_vecenv(pendulum(7), num_envs=4, seed=1, make_untruncated=pendulum(10_000))

    def quadruped(**kw):
        return lambda n, seed: make_env("mujoco", "quadruped_velocity_flat", n, seed=seed,
                                        history_length={"policy": 2, "critic": 2}, **{"episode_length_s": 0.4, **kw})

    check_vecenv(quadruped(), num_envs=4, seed=2, make_untruncated=quadruped(episode_length_s=1e9))
