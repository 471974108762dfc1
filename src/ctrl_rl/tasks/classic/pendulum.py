"""Pendulum swing-up, step-for-step the same MDP as gymnasium's ``Pendulum-v1``.

Reference: ``gymnasium/envs/classic_control/pendulum.py`` (gymnasium 1.x)::

    cost     = angle_normalize(th)**2 + 0.1 * thdot**2 + 0.001 * u**2
    thdot'   = clip(thdot + (3g/(2l) sin th + 3/(m l^2) u) dt, -8, 8)
    th'      = th + thdot' dt
    obs      = [cos th, sin th, thdot]

Precision: the upright equilibrium is unstable, with rate sqrt(3g/(2l)) = 3.9/s, so a
rounding difference grows up to ~e^(3.9 t) over a 10 s episode. Integrated in float32, the
1e-7 differences to gymnasium's float64 reach O(1) in some episodes of a 2000-env batch
within 200 random-action steps. The state is therefore integrated in float64 by default
(``physics_dtype``), which keeps obs and reward within 1e-5 of gymnasium for full episodes;
obs and reward are returned in float32 as the contract asks. To compare with gymnasium, give
it float64 torques: with a float32 action it evaluates ``3/(m l^2) * u`` in float32 (NumPy 2
keeps a Python float times a float32 in float32), and that rounding alone makes the two
trajectories drift apart the same way.

``th`` is kept wrapped to [-pi, pi] (:func:`wrap_to_pi`), so ``angle_normalize(th)**2 ==
th**2`` (the square removes the sign ambiguity at +-pi) and long episodes lose no precision.

Task ``pendulum`` (``sim=torch``, 200-step episodes; tuned settings per learner:
``tune/<algo>_pendulum.yaml`` beside this module).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import torch

from ctrl_rl.env import Obs
from ctrl_rl.sims.torch_backend import (
    State,
    TaskParams,
    TorchVecEnv,
    register_torch_task,
    task_choice,
    task_number,
    wrap_to_pi,
)

from .draw import ACCENT, Canvas


@dataclasses.dataclass
class PendulumParams(TaskParams):
    """``task.kwargs`` of ``pendulum``."""

    g: float = 10.0
    """Gravity (m/s^2); gymnasium's default."""
    m: float = 1.0
    """Pendulum mass (kg)."""
    l: float = 1.0  # noqa: E741 - the reference's symbol
    """Pendulum length (m)."""
    physics_dtype: str = "float64"
    """``float64``: the state is integrated in double precision (gymnasium parity, module docstring);
    ``float32``: the same MDP, faster."""
    observe_velocity: bool = True
    """false: observations are (cos th, sin th) only, a partially observed task that needs memory (an
    observation history or a recurrent policy) to swing up."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.g = task_number("g", self.g)
        self.m = task_number("m", self.m, 0.0, strict=True)
        self.l = task_number("l", self.l, 0.0, strict=True)
        if isinstance(self.physics_dtype, torch.dtype):
            self.physics_dtype = str(self.physics_dtype).removeprefix("torch.")
        names = {"float32": "float32", "float64": "float64"}
        self.physics_dtype = task_choice("physics_dtype", self.physics_dtype, names)
        if not isinstance(self.observe_velocity, bool):
            raise ValueError(f"task.kwargs.observe_velocity must be true or false, got {self.observe_velocity!r}")


class PendulumEnv(TorchVecEnv):
    """Swing a torque-limited pendulum up and balance it; never terminates, 200 steps.

    The policy's action ``a`` in [-1, 1] is the torque ``u = max_torque * a`` (2 N m).
    """

    action_dim = 1
    obs_dims = {"policy": 3}
    max_episode_length = 200
    step_dt = 0.05

    max_speed = 8.0
    max_torque = 2.0

    Params = PendulumParams

    def _configure(self, params: PendulumParams) -> None:
        self.g, self.m, self.l = params.g, params.m, params.l
        self.observe_velocity = params.observe_velocity
        self.obs_dims = {"policy": 3 if params.observe_velocity else 2}
        self.physics_dtype = {"float32": torch.float32, "float64": torch.float64}[params.physics_dtype]
        # The reference's constant sub-expressions, folded once.
        self._gravity_coef = 3.0 * self.g / (2.0 * self.l)
        self._torque_coef = 3.0 / (self.m * self.l**2)

    def _initial_state(self) -> State:
        # Reference reset: th ~ U[-pi, pi], thdot ~ U[-1, 1].
        dtype = self.physics_dtype
        return {
            "th": self._uniform(-math.pi, math.pi, dtype=dtype),
            "thdot": self._uniform(-1.0, 1.0, dtype=dtype),
        }

    def _dynamics(
        self, state: State, action: torch.Tensor
    ) -> tuple[State, torch.Tensor, torch.Tensor]:
        th, thdot = state["th"], state["thdot"]
        u = action[:, 0].to(self.physics_dtype) * self.max_torque
        # Cost on the pre-step state; th is wrapped so angle_normalize(th)**2 == th**2.
        cost = (th * th).addcmul_(thdot, thdot, value=0.1).addcmul_(u, u, value=0.001)
        newthdot = torch.sin(th).mul_(self._gravity_coef).add_(u, alpha=self._torque_coef)
        newthdot = newthdot.mul_(self.step_dt).add_(thdot).clamp_(-self.max_speed, self.max_speed)
        newth = wrap_to_pi(th + newthdot * self.step_dt)
        reward = cost.neg_().to(torch.float32)
        terminated = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
        return {"th": newth, "thdot": newthdot}, reward, terminated

    def _observe(self, state: State) -> Obs:
        th = state["th"]
        parts = [torch.cos(th), torch.sin(th)] + ([state["thdot"]] if self.observe_velocity else [])
        obs = torch.stack(parts, dim=1)
        return {"policy": obs.to(torch.float32)}

    def render_frame(self, env_idx: int = 0) -> np.ndarray:
        """The pendulum from the front: pivot at the centre, ``th = 0`` straight up."""
        th = float(self._state["th"][env_idx])
        reach = 1.25 * self.l
        canvas = Canvas(-reach, reach, -reach, reach)
        tip = (self.l * math.sin(th), self.l * math.cos(th))
        canvas.segment((0.0, 0.0), tip, 0.08 * self.l, ACCENT)
        canvas.disc(tip, 0.09 * self.l, ACCENT)
        canvas.disc((0.0, 0.0), 0.05 * self.l)
        return canvas.rgb()


register_torch_task("pendulum", PendulumEnv)
