"""Gymnasium backend: conformance, and every autoreset mode hidden behind the same semantics."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode
from vecenv_conformance import Transition, check_vecenv

from ctrl_rl.sims import make_env
from ctrl_rl.sims.gymnasium_env import GymnasiumVecEnv

MODES = [AutoresetMode.SAME_STEP, AutoresetMode.NEXT_STEP, AutoresetMode.DISABLED]


def _pendulum_initial(obs: dict[str, torch.Tensor]) -> torch.Tensor:
    return obs["policy"][:, 2].abs() <= 1.0  # thdot ~ U[-1, 1] at reset


def _mountain_car_initial(obs: dict[str, torch.Tensor]) -> torch.Tensor:
    pos, vel = obs["policy"].unbind(1)
    return (pos >= -0.6) & (pos <= -0.4) & (vel == 0)  # reset: pos ~ U[-0.6, -0.4], v = 0


def _torque_maps_to_bounds(tr: Transition) -> None:
    """Pendulum's obs never leaves its box; nothing else to check row by row."""
    assert (tr.info["final_obs"]["policy"][:, 2].abs() <= 8.0 + 1e-6).all()


def test_conformance_pendulum() -> None:
    check_vecenv(
        lambda n, seed: make_env("gymnasium", "Pendulum-v1", n, seed=seed),
        num_envs=4,
        seed=1,
        is_initial_obs=_pendulum_initial,
        check_transition=_torque_maps_to_bounds,
    )


def test_conformance_mountain_car_continuous() -> None:
    # A 60-step limit so the conformance rollouts see many truncations quickly.
    check_vecenv(
        lambda n, seed: make_env(
            "gymnasium", "MountainCarContinuous-v0", n, seed=seed, max_episode_steps=60
        ),
        num_envs=4,
        seed=2,
        is_initial_obs=_mountain_car_initial,
    )


def test_spec_is_read_from_gymnasium() -> None:
    env = make_env("gymnasium", "Pendulum-v1", 2, seed=0)
    assert (env.max_episode_length, env.step_dt, env.action_dim, env.obs_dims) == (
        200,
        0.05,
        1,
        {"policy": 3},
    )
    assert env.action_bounds == (-1.0, 1.0)
    assert env.autoreset_mode == AutoresetMode.SAME_STEP  # requested by default
    car = make_env("gymnasium", "MountainCarContinuous-v0", 2, seed=0, max_episode_steps=60)
    assert car.max_episode_length == 60


def test_actions_are_mapped_onto_the_box() -> None:
    """a = 0.5 on Pendulum (torque box [-2, 2]) must be the torque 1.0, hand-checked."""
    env = make_env("gymnasium", "Pendulum-v1", 1, seed=0)
    ref = gymnasium.make("Pendulum-v1")
    ref.reset(seed=0)  # sub-env 0 of the adapter was seeded with seed + 0
    obs, reward, *_ = env.step(torch.tensor([[0.5]]))
    r_obs, r_reward, *_ = ref.step(np.array([1.0], dtype=np.float32))
    np.testing.assert_array_equal(obs["policy"][0].numpy(), r_obs)
    assert float(reward[0]) == np.float32(r_reward)


def _energy_pumping(obs: torch.Tensor) -> torch.Tensor:
    """MountainCar: push along the velocity; reaches the flag in 105-111 steps from its start.

    With a 105-step limit some episodes end truncated, others reach the flag exactly on the
    last step, where gymnasium reports both flags and contract 1 wants terminated only."""
    return torch.where(obs[:, 1:2] >= 0, 1.0, -1.0)


@pytest.mark.parametrize(
    ("env_id", "kwargs", "policy"),
    [
        ("Pendulum-v1", {"max_episode_steps": 17}, None),
        ("MountainCarContinuous-v0", {"max_episode_steps": 105}, _energy_pumping),
    ],
)
def test_autoreset_modes_give_identical_trajectories(env_id, kwargs, policy) -> None:
    """SAME_STEP, NEXT_STEP and DISABLED vector envs, same seed and actions: identical output."""
    n, steps = 5, 300
    envs = [
        GymnasiumVecEnv(
            gymnasium.make_vec(
                env_id, n, vectorization_mode="sync", vector_kwargs={"autoreset_mode": m}, **kwargs
            ),
            seed=4,
        )
        for m in MODES
    ]
    assert [e.autoreset_mode for e in envs] == MODES
    obs = [e.reset(seed=4) for e in envs]
    gen = torch.Generator().manual_seed(0)
    seen = {"terminated": 0, "truncated": 0, "terminal_on_last_step": 0}
    for t in range(steps):
        actions = torch.rand(n, 1, generator=gen) * 2 - 1 if policy is None else policy(obs[0]["policy"])
        results = [e.step(actions) for e in envs]
        ref_obs, ref_rew, ref_term, ref_trunc, ref_info = results[0]
        for mode, (o, r, te, tr, info) in zip(MODES[1:], results[1:], strict=True):
            where = f"{mode} step {t}"
            assert torch.equal(o["policy"], ref_obs["policy"]), where
            assert (
                torch.equal(r, ref_rew) and torch.equal(te, ref_term) and torch.equal(tr, ref_trunc)
            ), where
            assert torch.equal(info["final_obs"]["policy"], ref_info["final_obs"]["policy"]), where
            assert torch.equal(info["episode"]["length"], ref_info["episode"]["length"]), where
        done = ref_term | ref_trunc
        # Time limits are truncations; the flag is a termination (mountain car only).
        assert (ref_info["episode"]["length"][ref_trunc] == kwargs["max_episode_steps"]).all()
        assert (ref_info["episode"]["length"][done] <= kwargs["max_episode_steps"]).all()
        seen["terminated"] += int(ref_term.sum())
        seen["truncated"] += int(ref_trunc.sum())
        last = ref_info["episode"]["length"] == kwargs["max_episode_steps"]
        seen["terminal_on_last_step"] += int((ref_term & last).sum())
        obs = [res[0] for res in results]
    assert seen["truncated"] > 0
    if policy is not None:
        assert seen["terminated"] > 0  # the flag was reached: terminal final_obs compared too
        assert seen["terminal_on_last_step"] > 0
    for e in envs:
        e.close()


def test_next_step_raw_gymnasium_would_drop_an_action() -> None:
    """Why the adapter exists: raw NEXT_STEP returns the reset obs one step late, with
    reward 0 and the action ignored; through the adapter every step is a real step."""
    raw = gymnasium.make_vec("Pendulum-v1", 1, vectorization_mode="sync", max_episode_steps=2)
    assert raw.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
    raw.reset(seed=0)
    action = np.array([[1.0]], dtype=np.float32)
    raw.step(action)
    _, _, _, truncated, _ = raw.step(action)
    assert truncated[0]
    _, reward, _, _, _ = raw.step(action)
    assert reward[0] == 0.0  # the "reset step"
    raw.close()

    env = GymnasiumVecEnv(
        gymnasium.make_vec("Pendulum-v1", 1, vectorization_mode="sync", max_episode_steps=2), seed=0
    )
    lengths = []
    for _ in range(6):
        _, reward, _, truncated, info = env.step(torch.ones(1, 1))
        assert reward[0] != 0.0
        if truncated[0]:
            lengths.append(int(info["episode"]["length"][0]))
    assert lengths == [2, 2, 2]
    env.close()


def test_discrete_action_space_is_rejected() -> None:
    with pytest.raises(ValueError, match="CartPole-v1 has a Discrete action space; .*continuous"):
        make_env("gymnasium", "CartPole-v1", 2)


def test_built_vector_env_size_mismatch_is_rejected() -> None:
    vec = gymnasium.make_vec("Pendulum-v1", 2, vectorization_mode="sync")
    with pytest.raises(ValueError, match="num_envs=3 but the given vector env has 2"):
        GymnasiumVecEnv(vec, num_envs=3)
    vec.close()


def test_max_episode_length_sets_the_real_time_limit() -> None:
    env = make_env("gymnasium", "Pendulum-v1", 2, seed=0, max_episode_length=7)
    assert env.max_episode_length == 7
    for t in range(1, 8):
        _, _, terminated, truncated, info = env.step(torch.zeros(2, 1))
        assert bool(truncated.all()) == (t == 7) and not terminated.any()
    assert info["episode"]["length"].tolist() == [7, 7]


def test_state_is_not_supported() -> None:
    env = make_env("gymnasium", "Pendulum-v1", 2, seed=0)
    assert not env.supports_state
    with pytest.raises(NotImplementedError):
        env.get_state()


def test_sim_gymnasium_defaults_to_16_envs_and_an_override_wins():
    """gymnasium envs step one after another in this process: 16 by default, not the torch backends' 4096."""
    from ctrl_rl.app.configure import load_train_config

    assert load_train_config(["sim=gymnasium", "task=Pendulum-v1"]).env.num_envs == 16
    assert load_train_config(["sim=gymnasium", "task=Pendulum-v1", "env.num_envs=4"]).env.num_envs == 4
    assert load_train_config(["task=pendulum"]).env.num_envs == 512  # the torch task's tune file
