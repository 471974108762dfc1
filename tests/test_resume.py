"""Checkpoints: atomic writes, exact state round trip, and SIGKILL-then-resume equality."""

import csv
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from ctrl_rl.app.configure import load_train_config
from ctrl_rl.app.session import build_env
from ctrl_rl.app.train import train
from ctrl_rl.runners import make_runner
from ctrl_rl.utils.checkpoint_files import rng_state, save_atomic

SMALL = ["task=pendulum", "env.num_envs=32", "algo.num_steps_per_env=16", "algo.actor_hidden=[32,32]",
         "algo.critic_hidden=[32,32]", "algo.num_minibatches=4", "runner.save_interval=2", "runner.progress=false"]


def assert_same(a, b, path="state"):
    """Recursive exact equality of nested checkpoint contents."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b), path
    elif isinstance(a, dict):
        assert set(a) == set(b), f"{path}: keys {set(a) ^ set(b)}"
        for k in a:
            assert_same(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same(x, y, f"{path}[{i}]")
    else:
        import numpy as np

        if isinstance(a, np.ndarray):
            assert np.array_equal(a, b), path
        else:
            assert a == b, f"{path}: {a!r} != {b!r}"


def test_save_atomic_leaves_old_file_on_failure(tmp_path):
    path = tmp_path / "model_1.pt"
    save_atomic({"x": torch.ones(2)}, path)

    class Unpicklable:
        def __reduce__(self):
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        save_atomic({"x": Unpicklable()}, path)
    assert torch.equal(torch.load(path)["x"], torch.ones(2))
    assert [p.name for p in tmp_path.iterdir()] == ["model_1.pt"]  # no temp file left behind


def test_load_restores_every_tensor_counter_and_rng(tmp_path):
    cfg = load_train_config(SMALL + ["runner.max_iterations=3"])
    runner = make_runner(build_env(cfg), cfg, tmp_path)
    runner.learn(3)
    saved = runner.state_dict()
    save_atomic(saved, tmp_path / "ck.pt")
    torch.manual_seed(999)  # disturb the global RNG; load must restore it
    fresh = make_runner(build_env(cfg), cfg, None)
    fresh.load(tmp_path / "ck.pt")
    restored = fresh.state_dict()
    for key in ("algo", "env_state", "obs", "iteration", "env_steps", "history", "config"):
        assert_same(saved[key], restored[key], key)
    assert_same(saved["rng"], rng_state(), "rng")


def final_params(run_dir: Path, it: int) -> dict:
    return torch.load(run_dir / f"model_{it}.pt", weights_only=False)["algo"]["model"]


RECURRENT = ["algo.rnn_type=lstm", "algo.rnn_hidden_size=16", "task.kwargs.observe_velocity=false",
             "task.kwargs.history_length=2", "task.kwargs.max_episode_length=20"]
"""An LSTM policy on frame pairs, with episodes ending inside every rollout: memory states, their
rollout starts and the history stacks must all come back."""


@pytest.mark.slow
@pytest.mark.parametrize("extra", [[], RECURRENT], ids=["mlp", "lstm_history"])
def test_sigkill_then_resume_matches_uninterrupted_run(tmp_path, extra):
    total = 12
    small = SMALL + extra
    straight = train(small + [f"runner.max_iterations={total}", f"runner.log_root={tmp_path / 'a'}"])

    # the same run, killed with SIGKILL as soon as its first checkpoint exists
    root_b = tmp_path / "b"
    cmd = [sys.executable, "-m", "ctrl_rl", "train", *small, "runner.max_iterations=100000",
           f"runner.log_root={root_b}"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 240
    while not list(root_b.glob("ppo/pendulum/*/model_*.pt")):
        assert proc.poll() is None, proc.stderr.read().decode()
        assert time.time() < deadline, "no checkpoint written in time"
        time.sleep(0.005)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    run_b = next(root_b.glob("ppo/pendulum/*"))
    killed_at = max(int(p.stem.split("_")[1]) for p in run_b.glob("model_*.pt"))
    assert killed_at < total, "the killed run got too far; make iterations slower"

    time.sleep(1.1)  # TensorBoard orders event files by their creation second, then by name
    # the overrides are not repeated: a resume takes its config from the checkpoint
    resumed = train([f"runner.max_iterations={total}", f"runner.log_root={root_b}"], checkpoint="latest")
    assert resumed == run_b  # continues in the same run directory
    a, b = final_params(straight, total), final_params(run_b, total)
    assert set(a) == set(b)
    for k in a:
        assert torch.equal(a[k], b[k]), f"{k} differs after kill + resume"
    # the logs continue from the saved step: one row per iteration, none twice, none missing
    with open(run_b / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["iteration"]) for r in rows] == list(range(1, total + 1))
    with open(straight / "metrics.csv") as f:
        ref = list(csv.DictReader(f))
    for key in ("mean_reward", "value", "surrogate", "learning_rate"):
        assert [r.get(key) for r in rows] == [r.get(key) for r in ref], key
    # TensorBoard: what the killed run wrote past its checkpoint was purged, nothing is doubled
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_b)).Reload()
    assert [e.step for e in events.Scalars("Loss/value")] == list(range(1, total + 1))
    ref_events = EventAccumulator(str(straight)).Reload()
    assert [e.value for e in events.Scalars("Loss/value")] == [e.value for e in ref_events.Scalars("Loss/value")]
    assert "Perf/total_fps" in events.Tags()["scalars"] and "Policy/mean_std" in events.Tags()["scalars"]


def test_mujoco_quadruped_resume_matches_uninterrupted_run(tmp_path):
    """sim=mujoco checkpoints carry the physics state, randomized model fields, task buffers
    (commands, action history, air time) and the env's RNG: a resumed run is bit-exact."""
    quad = ["task=quadruped_velocity_flat", "env.num_envs=16", "algo.num_steps_per_env=8",
            "algo.actor_hidden=[32,32]", "algo.critic_hidden=[32,32]", "runner.save_interval=2",
            "runner.progress=false", "+task.kwargs.episode_length_s=0.5"]
    straight = train(quad + ["runner.max_iterations=4", f"runner.log_root={tmp_path / 'a'}"])
    half = train(quad + ["runner.max_iterations=2", f"runner.log_root={tmp_path / 'b'}"])
    resumed = train(["runner.max_iterations=4", f"runner.log_root={tmp_path / 'b'}"], checkpoint=str(half))
    assert resumed == half
    a, b = final_params(straight, 4), final_params(half, 4)
    for k in a:
        assert torch.equal(a[k], b[k]), f"{k} differs after resume"
    env_a = torch.load(straight / "model_4.pt", weights_only=False)["env_state"]
    env_b = torch.load(half / "model_4.pt", weights_only=False)["env_state"]
    assert_same(env_a, env_b, "env_state")


def test_a_resume_takes_task_kwargs_of_the_checkpoints_task(tmp_path):
    """``ctrl-rl train --checkpoint <run> task.kwargs.cone=elliptic``: the override is checked against the
    checkpoint's task (a quadruped's), not the default one (pendulum, which has no such parameter), and trains on."""
    quad = ["task=quadruped_velocity_flat", "env.num_envs=8", "algo.num_steps_per_env=4", "algo.actor_hidden=[16]",
            "algo.critic_hidden=[16]", "runner.progress=false", "runner.max_iterations=1",
            f"runner.log_root={tmp_path}"]
    run = train(quad)
    resumed = train(["task.kwargs.cone=elliptic", "task.kwargs.impratio=100"], checkpoint=str(run / "model_1.pt"),
                    more=1)
    assert resumed == run and (run / "model_2.pt").exists()
    saved = torch.load(run / "model_2.pt", weights_only=False)["config"]
    assert saved["task"]["kwargs"]["cone"] == "elliptic" and saved["task"]["kwargs"]["impratio"] == 100
    with pytest.raises(ValueError, match="task.kwargs.cone must be one of"):
        train(["task.kwargs.cone=round"], checkpoint=str(run / "model_2.pt"), more=1)
