"""``ctrl_rl.utils.cuda_graphs`` and ``sim.cuda_graph`` on CPU.

The capture itself needs a GPU (benchmarks/gpu_suite.py runs it); here: the pieces a capture relies
on (attributes rebound inside a step end up in the tensors the graph reads; aliases are separated
first) and the segmented env step, which must be the plain step exactly.
"""

from __future__ import annotations

import pytest
import torch

from ctrl_rl.config import ConfigError, SimConfig
from ctrl_rl.sims import make_env
from ctrl_rl.utils.cuda_graphs import CapturedStep, rebind_in_place, separate_aliases, tensor_attributes


class _Task:
    def __init__(self) -> None:
        self.count = torch.zeros(3)
        self.current = torch.ones(3)
        self.last = self.current  # an alias, as ``self.last_action = self._action`` leaves one

    def step(self, x: torch.Tensor) -> torch.Tensor:
        self.last = self.current
        self.current = x * 2
        self.count = self.count + 1
        return self.current - self.last


def test_rebound_attributes_land_in_the_tensors_a_replay_reads() -> None:
    task = _Task()
    assert separate_aliases([task]) == ["_Task.last"] and task.last is not task.current
    before = tensor_attributes([task])
    ids = {k: id(v) for k, v in vars(task).items()}
    task.step(torch.full((3,), 5.0))
    assert sorted(rebind_in_place([task], before)) == ["_Task.count", "_Task.current", "_Task.last"]
    assert {k: id(v) for k, v in vars(task).items()} == ids  # the same tensor objects...
    assert task.current.tolist() == [10.0] * 3 and task.last.tolist() == [1.0] * 3  # ...with the new values
    assert task.count.tolist() == [1.0] * 3
    before = tensor_attributes([task])
    task.count = torch.zeros(4)
    with pytest.raises(ValueError, match=r"_Task.count changed from \(3,\).*to \(4,\)"):
        rebind_in_place([task], before)


def test_captured_step_is_the_function_on_cpu() -> None:
    task = _Task()
    step = CapturedStep(task.step, "cpu", owners=[task])
    assert torch.equal(step(torch.ones(3)), torch.ones(3)) and not step.captured


def _trajectory(cuda_graph: bool) -> list[torch.Tensor]:
    env = make_env("mjwarp", "quadruped_velocity_flat", 3, "cpu", seed=3, physics={"cuda_graph": cuda_graph},
                   episode_length_s=0.2, push_interval_s=0.1, push_velocity=0.5)
    assert env.cuda_graph is cuda_graph
    g = torch.Generator().manual_seed(0)
    out = []
    for t in range(15):  # 10-step episodes and pushes every 5 steps: resets and pushes inside the run
        if t == 12:
            commands = env.task.commands
            out.append(env.reset()["policy"])
            assert (env.task.commands is commands) is cuda_graph  # what a captured graph reads stays bound
        obs, reward, terminated, truncated, info = env.step(torch.randn(3, env.action_dim, generator=g))
        out += [obs["policy"], obs["critic"], reward, truncated.float(), info["final_obs"]["policy"],
                info["episode"]["return"], info["log"]["Reward/track_lin_vel_xy"][None]]
    return out


def test_segmented_env_step_is_the_plain_step() -> None:
    """``sim.cuda_graph`` splits the step into targets / physics / rewards+resets / observation; on
    CPU the segments run eagerly and must give the plain step's bits (resets and pushes included)."""
    for a, b in zip(_trajectory(True), _trajectory(False), strict=True):
        assert torch.equal(a, b)


def test_cuda_graph_is_refused_where_it_cannot_apply() -> None:
    with pytest.raises(ConfigError, match="sim.cuda_graph: applies to sim=mjwarp"):
        SimConfig("mujoco", cuda_graph=True)
    with pytest.raises(ValueError, match="not graph-safe.*height scans.*sim.cuda_graph=false"):
        make_env("mjwarp", "quadruped_velocity_rough", 2, "cpu", seed=0, physics={"cuda_graph": True})
