"""One env builder: an offline runner's evaluation env is built as training's is, with the config's
``sim.*`` physics options (``tests/test_layering.py`` holds that nothing else calls ``make_env``)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from ctrl_rl.app.configure import load_train_config
from ctrl_rl.runners.offline import OfflineRunner
from ctrl_rl.sims import build

pytest.importorskip("mujoco_warp")


def test_an_offline_runners_evaluation_env_gets_the_sim_options(monkeypatch):
    """``algo.eval_episodes`` below ``env.num_envs`` evaluates in an env of its own: it has
    ``sim.nconmax`` / ``sim.njmax``, as the training env does (before: MuJoCo Warp's defaults)."""
    cfg = load_train_config(["algo=bc", "task=quadruped_velocity_flat", "sim=mjwarp", "device=cpu",
                             "sim.nconmax=16", "sim.njmax=90", "env.num_envs=8", "algo.eval_episodes=2",
                             "+task.kwargs.episode_length_s=0.1"], for_run=False)
    built = []
    make_env = build.make_env
    monkeypatch.setattr(build, "make_env", lambda *a, **kw: built.append(make_env(*a, **kw)) or built[-1])
    learner = SimpleNamespace(model=SimpleNamespace(actor_obs=("policy",)),
                              inference_policy=lambda: lambda x: torch.zeros(len(x), built[0].action_dim))
    runner = SimpleNamespace(cfg=cfg, alg=learner, iteration=0, env=SimpleNamespace(num_envs=cfg.env.num_envs))
    mean_return, mean_length, _ = OfflineRunner.evaluate(runner)  # the runner's own method, on a stand-in
    [env] = built
    assert env.num_envs == 2 and mean_length == env.max_episode_length
    assert (env.physics.nconmax, env.physics.njmax) == (16, 90)  # MuJoCo Warp would allocate (12, 72)
