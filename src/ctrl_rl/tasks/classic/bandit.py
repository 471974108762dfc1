"""A one-step bandit with two equally good actions: the test of a policy's expressiveness.

Every episode is one decision: the policy always sees ``[1]`` (the terminal state, seen only
as ``final_obs``, is ``[0]``), the action ``a`` is 1-D in [-1, 1], and the reward is a sum of
two equal Gaussian bumps at ``±mode``::

    r(a) = exp(-((a - mode) / width)^2 / 2) + exp(-((a + mode) / width)^2 / 2)

Both peaks pay the same (≈ 1), the midpoint ``a = 0`` pays ``2 exp(-(mode/width)^2 / 2)``
(≈ 0.02 at the defaults). A unimodal Gaussian policy can only sit on one peak (or straddle
them at the mean); a flow policy can put its mass on both (FPO's GridWorld result, in 1-D).
Task ``bimodal_bandit`` (``sim=torch``): reward peaks of equal height at a = ±0.6, can the policy keep
both modes?
"""

from __future__ import annotations

import dataclasses

import torch

from ctrl_rl.env import Obs
from ctrl_rl.sims.torch_backend import State, TaskParams, TorchVecEnv, register_torch_task, task_number


@dataclasses.dataclass
class BanditParams(TaskParams):
    """``task.kwargs`` of ``bimodal_bandit``."""

    mode: float = 0.6
    """The two reward peaks sit at ``a = ±mode`` (0 < mode <= 1)."""
    width: float = 0.2
    """Standard deviation of each Gaussian bump (action units)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.mode = task_number("mode", self.mode, 0.0, strict=True)
        self.width = task_number("width", self.width, 0.0, strict=True)
        if self.mode > 1.0:
            raise ValueError(f"task.kwargs.mode must be <= 1, got {self.mode!r}")


class BimodalBanditEnv(TorchVecEnv):
    """One-step episodes (terminated after every action); reward peaks at ``a = ±mode``."""

    action_dim = 1
    obs_dims = {"policy": 1}
    max_episode_length = 1
    step_dt = 1.0

    Params = BanditParams

    def _configure(self, params: BanditParams) -> None:
        self.mode, self.width = params.mode, params.width

    def _initial_state(self) -> State:
        return {"t": torch.zeros(self.num_envs, device=self.device)}

    def _dynamics(self, state: State, action: torch.Tensor) -> tuple[State, torch.Tensor, torch.Tensor]:
        a = action[:, 0]
        bump = lambda c: torch.exp(-0.5 * ((a - c) / self.width).square())  # noqa: E731
        reward = bump(self.mode) + bump(-self.mode)
        terminated = torch.ones(self.num_envs, dtype=torch.bool, device=self.device)
        return {"t": state["t"] + 1.0}, reward, terminated

    def _observe(self, state: State) -> Obs:
        return {"policy": (1.0 - state["t"]).unsqueeze(1)}


register_torch_task("bimodal_bandit", BimodalBanditEnv)
