"""Gymnasium's MuJoCo suite (v5) through the gymnasium adapter, on the installed mujoco.

Why a file of its own: these envs need ``gymnasium[mujoco]`` (of which only ``imageio`` is not
already pulled in by ``mujoco``), and they are the first gymnasium envs with contacts,
termination on falling (Hopper, Walker2d, Humanoid), observation blocks beyond qpos/qvel (Ant,
Humanoid) and action boxes other than [-1, 1] (Humanoid: [-0.4, 0.4]). The checks are the cheap
conformance ones, with short time limits so truncations happen within a few dozen steps.
"""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
import torch
from vecenv_conformance import check_vecenv

from ctrl_rl.sims import list_tasks, make_env

# id -> (obs dim, action dim, step_dt): gymnasium 1.x v5 defaults.
SUITE = {
    "HalfCheetah-v5": (17, 6, 0.05),
    "Hopper-v5": (11, 3, 0.008),
    "Walker2d-v5": (17, 6, 0.008),
    "Ant-v5": (105, 8, 0.05),
    "Humanoid-v5": (348, 17, 0.015),
}
LIMIT = 20
"""Time limit for the conformance rollouts (the suite's own is 1000 steps)."""


def _is_initial(env_id: str):
    """Reset obs test: the qpos block is ``init_qpos`` (minus the skipped x / xy) +- the noise scale."""
    ref = gymnasium.make(env_id).unwrapped
    skip = ref.observation_structure["skipped_qpos"]
    qpos0 = torch.tensor(ref.init_qpos[skip:], dtype=torch.float32)
    scale = float(ref._reset_noise_scale)
    ref.close()

    def check(obs: dict[str, torch.Tensor]) -> torch.Tensor:
        qpos = obs["policy"][:, : qpos0.numel()]
        return ((qpos - qpos0).abs() <= scale + 1e-5).all(dim=1)

    return check


def test_suite_is_listed() -> None:
    assert set(SUITE) <= set(list_tasks("gymnasium")["gymnasium"])


@pytest.mark.parametrize("env_id", list(SUITE))
def test_spec_is_read_from_gymnasium(env_id: str) -> None:
    obs_dim, action_dim, dt = SUITE[env_id]
    env = make_env("gymnasium", env_id, 2, seed=0)
    assert env.obs_dims == {"policy": obs_dim}
    assert env.action_dim == action_dim
    assert env.step_dt == pytest.approx(dt)
    assert env.max_episode_length == 1000
    assert env.action_bounds == (-1.0, 1.0)
    env.close()


@pytest.mark.parametrize("env_id", list(SUITE))
def test_conformance(env_id: str) -> None:
    """Rollout semantics (with truncations at LIMIT), seeding, action clipping."""
    check_vecenv(
        lambda n, seed: make_env("gymnasium", env_id, n, seed=seed, max_episode_length=LIMIT),
        num_envs=3,
        num_steps=LIMIT + 15,
        seed=3,
        is_initial_obs=_is_initial(env_id),
    )


@pytest.mark.parametrize("env_id", list(SUITE))
def test_matches_gymnasium_step_for_step(env_id: str) -> None:
    """Sub-env ``i`` (seed + i) fed mapped actions equals a plain ``gymnasium.make`` twin, bit for bit.

    Humanoid's box is [-0.4, 0.4], so this also checks the affine action map off the unit box.
    """
    n, seed, steps = 2, 11, 12
    env = make_env("gymnasium", env_id, n, seed=seed)
    twins = [gymnasium.make(env_id) for _ in range(n)]
    for i, twin in enumerate(twins):
        twin.reset(seed=seed + i)
    low, high = twins[0].action_space.low.astype(np.float64), twins[0].action_space.high.astype(np.float64)
    gen = torch.Generator().manual_seed(0)
    live = [True] * n  # a finished row is reset by the adapter; its twin stops being compared
    for t in range(steps):
        actions = torch.rand(n, env.action_dim, generator=gen) * 2 - 1
        obs, reward, terminated, truncated, _ = env.step(actions)
        for i, twin in enumerate(twins):
            if not live[i]:
                continue
            a = (high + low) / 2 + (high - low) / 2 * actions[i].double().numpy()
            r_obs, r_rew, r_term, r_trunc, _ = twin.step(a.astype(twin.action_space.dtype))
            where = f"{env_id} env {i} step {t}"
            np.testing.assert_array_equal(obs["policy"][i].numpy(), r_obs.astype(np.float32), err_msg=where)
            assert float(reward[i]) == np.float32(r_rew), where
            assert (bool(terminated[i]), bool(truncated[i])) == (r_term, r_trunc), where
            live[i] = not (r_term or r_trunc)
    for twin in twins:
        twin.close()
    env.close()
