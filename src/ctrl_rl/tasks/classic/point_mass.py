"""2-D point mass reaching a random target: the smallest task with a privileged critic.

A ``mass`` kg point in a square arena ``[-1, 1]^2`` m is pushed by a force
``F = max_force * a``, ``a`` in [-1, 1]^2, against linear damping. Semi-implicit Euler
(velocity first, then position with the new velocity)::

    v' = v + dt (F / m - c v)
    p' = clip(p + dt v', -1, 1)      walls are inelastic: the blocked component of v' -> 0

Reward ``-|p' - target| - ctrl_cost |a|^2`` (as dm_control ``point_mass``, but dense
distance instead of a target-zone bonus); never terminates, 200 steps of 0.05 s.

The policy sees only the relative position and the velocity, ``[p - target, v]``; the
``"critic"`` group adds the absolute position and target ``[p - target, v, p, target]``,
privileged in the sense that the actor does not get it, so asymmetric actor-critic code has
a cheap task to be tested on.

Task ``point_mass`` (``sim=torch``; tuned settings per learner: ``tune/<algo>_point_mass.yaml`` beside
this module).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from ctrl_rl.env import Obs
from ctrl_rl.sims.torch_backend import State, TaskParams, TorchVecEnv, register_torch_task, task_number

from .draw import ACCENT, TARGET, Canvas


@dataclasses.dataclass
class PointMassParams(TaskParams):
    """``task.kwargs`` of ``point_mass``."""

    mass: float = 1.0
    """Mass of the point (kg)."""
    max_force: float = 1.0
    """Force per unit action (N): ``F = max_force * a``."""
    damping: float = 0.5
    """Linear velocity damping ``c`` (1/s)."""
    ctrl_cost: float = 0.01
    """Weight of the ``|a|^2`` penalty in the reward."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.mass = task_number("mass", self.mass, 0.0, strict=True)
        self.max_force = task_number("max_force", self.max_force, 0.0, strict=True)
        self.damping = task_number("damping", self.damping, 0.0)
        self.ctrl_cost = task_number("ctrl_cost", self.ctrl_cost, 0.0)


class PointMassEnv(TorchVecEnv):
    """Reach a target drawn in ``[-0.8, 0.8]^2`` from a start drawn in ``[-1, 1]^2`` at rest."""

    action_dim = 2
    obs_dims = {"policy": 4, "critic": 8}
    max_episode_length = 200
    step_dt = 0.05

    arena = 1.0
    target_range = 0.8

    Params = PointMassParams

    def _configure(self, params: PointMassParams) -> None:
        self.mass, self.max_force = params.mass, params.max_force
        self.damping, self.ctrl_cost = params.damping, params.ctrl_cost

    def _initial_state(self) -> State:
        return {
            "pos": self._uniform(-self.arena, self.arena, 2),
            "vel": torch.zeros(self.num_envs, 2, device=self.device),
            "target": self._uniform(-self.target_range, self.target_range, 2),
        }

    def _dynamics(
        self, state: State, action: torch.Tensor
    ) -> tuple[State, torch.Tensor, torch.Tensor]:
        pos, vel, target = state["pos"], state["vel"], state["target"]
        accel = action * (self.max_force / self.mass) - self.damping * vel
        vel = vel + self.step_dt * accel
        unclipped = pos + self.step_dt * vel
        pos = unclipped.clamp(-self.arena, self.arena)
        vel = torch.where(pos == unclipped, vel, 0.0)
        distance = torch.linalg.vector_norm(pos - target, dim=1)
        reward = -distance - self.ctrl_cost * action.square().sum(dim=1)
        terminated = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
        return {"pos": pos, "vel": vel, "target": target}, reward, terminated

    def _observe(self, state: State) -> Obs:
        pos, vel, target = state["pos"], state["vel"], state["target"]
        policy = torch.cat((pos - target, vel), dim=1)
        return {"policy": policy, "critic": torch.cat((policy, pos, target), dim=1)}

    def render_frame(self, env_idx: int = 0) -> np.ndarray:
        """The arena from above: the point (orange) and its target (green)."""
        pos, target = self._state["pos"][env_idx].tolist(), self._state["target"][env_idx].tolist()
        margin = 1.1 * self.arena
        canvas = Canvas(-margin, margin, -margin, margin)
        canvas.outline((0.0, 0.0), (self.arena, self.arena), 0.02)
        canvas.disc(tuple(target), 0.06, TARGET)
        canvas.disc(tuple(pos), 0.05, ACCENT)
        return canvas.rgb()


register_torch_task("point_mass", PointMassEnv)
