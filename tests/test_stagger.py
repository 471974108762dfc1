"""``runner.stagger_episodes`` (rsl_rl's ``init_at_random_ep_len``): after a reset every fixed-length episode ends
on the same step, so a rollout shorter than an episode trains on one phase of it in every env. Staggered, each
env's first episode is cut at a random step of it, drawn from the env's own generator."""

from __future__ import annotations

import pytest
import torch

from ctrl_rl.app.train import train
from ctrl_rl.config import ConfigError
from ctrl_rl.sims import make_env
from ctrl_rl.sims.history import HistoryEnv


def first_ends(env, steps: int) -> torch.Tensor:
    """The step on which each env's first episode ended (0: none ended within ``steps``)."""
    ends = torch.zeros(env.num_envs, dtype=torch.long)
    for t in range(1, steps + 1):
        _, _, terminated, truncated, _ = env.step(torch.zeros(env.num_envs, env.action_dim))
        done = (terminated | truncated).cpu()
        ends = torch.where(done & (ends == 0), t, ends)
    return ends


@pytest.mark.parametrize("sim, task", [("mujoco", "reach"), ("torch", "pendulum")])
def test_staggered_episodes_end_apart_and_alike_for_a_seed(sim, task):
    env = make_env(sim, task, 32, seed=3)
    length = env.max_episode_length
    assert first_ends(env, length).unique().tolist() == [length]  # reset together, they all end together
    runs = []
    for _ in range(2):
        env.reset(seed=3)
        env.stagger_episodes()
        runs.append(first_ends(env, length))
    ends = runs[0]
    assert torch.equal(runs[0], runs[1])  # the env's own generator: one seed, one stagger
    assert bool((ends >= 1).all()) and bool((ends <= length).all())
    assert len(ends.unique()) >= 20  # 32 draws from `length` (>= 200) steps


def test_a_history_stack_staggers_its_env():
    env = make_env("torch", "pendulum", 8, seed=0)
    stacked = HistoryEnv(env, {"policy": [2]})
    stacked.reset(seed=0)
    stacked.stagger_episodes()
    assert stacked.supports_stagger and env.supports_stagger
    assert len(first_ends(stacked, env.max_episode_length).unique()) > 1


def test_the_runner_staggers_and_a_sim_that_cannot_is_refused(tmp_path):
    """Through ``ctrl-rl train`` on reach (250-step episodes, 4 rollouts of 32 steps): staggered, episodes end within
    the first iterations (``Train/mean_episode_length`` is logged at once); gymnasium keeps its own counter."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    common = ["task=reach", "env.num_envs=16", "algo.num_steps_per_env=32", "runner.max_iterations=4",
              "runner.progress=false", "algo.actor_hidden=[16]", "algo.critic_hidden=[16]",
              f"runner.log_root={tmp_path}"]
    lengths = {}
    for stagger in (False, True):
        ea = EventAccumulator(str(train([*common, f"runner.stagger_episodes={str(stagger).lower()}"])))
        ea.Reload()
        lengths[stagger] = [e.step for e in ea.Scalars("Train/mean_episode_length")] if \
            "Train/mean_episode_length" in ea.Tags()["scalars"] else []
    assert lengths[False] == [] and lengths[True] != []
    pytest.importorskip("gymnasium")
    with pytest.raises(ConfigError, match="runner.stagger_episodes: GymnasiumVecEnv keeps its episodes' step counter "
                                          "inside the simulator and cannot stagger them; set runner.stagger_episodes"):
        train(["sim=gymnasium", "task=Pendulum-v1", "env.num_envs=2", "algo.num_steps_per_env=4",
               "runner.max_iterations=1", "runner.progress=false", "runner.stagger_episodes=true",
               f"runner.log_root={tmp_path}"])
