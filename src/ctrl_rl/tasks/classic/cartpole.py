"""Cart-pole balance and swing-up on gymnasium ``CartPole-v1``'s physics, with a continuous force.

Reference: ``gymnasium/envs/classic_control/cartpole.py`` (Barto, Sutton & Anderson 1983,
equations as corrected in Florian 2007, "Correct equations for the dynamics of the
cart-pole system")::

    temp     = (F + m_p l thdot^2 sin th) / (m_c + m_p)
    thacc    = (g sin th - cos th temp) / (l (4/3 - m_p cos^2 th / (m_c + m_p)))
    xacc     = temp - m_p l thacc cos th / (m_c + m_p)
    Euler:   x += tau xdot; xdot += tau xacc; th += tau thdot; thdot += tau thacc

with ``l`` the half pole length. The policy's action ``a`` in [-1, 1] is the force
``F = 10 a`` N, so ``a = +-1`` is exactly gymnasium's discrete push right / left.

Tasks (``sim=torch``; tuned settings per learner: ``tune/<algo>_<task>.yaml`` beside this module):
``cartpole_balance``, 500-step episodes: max return 500; ``cartpole_swingup``,
starting hanging down, a smooth upright reward in [0, 1] per step, 500 steps.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ctrl_rl.env import Obs
from ctrl_rl.sims.torch_backend import State, TorchVecEnv, register_torch_task, wrap_to_pi

from .draw import ACCENT, Canvas

GRAVITY = 9.8
MASS_CART = 1.0
MASS_POLE = 0.1
TOTAL_MASS = MASS_POLE + MASS_CART
HALF_LENGTH = 0.5
POLEMASS_LENGTH = MASS_POLE * HALF_LENGTH
FORCE_MAG = 10.0
TAU = 0.02
X_THRESHOLD = 2.4
THETA_THRESHOLD = 12 * 2 * math.pi / 360


def cartpole_euler_step(state: State, force: torch.Tensor) -> State:
    """One explicit-Euler step of the reference equations (module docstring); pure."""
    x, x_dot, theta, theta_dot = state["x"], state["x_dot"], state["theta"], state["theta_dot"]
    costheta, sintheta = torch.cos(theta), torch.sin(theta)
    temp = (force + POLEMASS_LENGTH * theta_dot.square() * sintheta) / TOTAL_MASS
    thetaacc = (GRAVITY * sintheta - costheta * temp) / (
        HALF_LENGTH * (4.0 / 3.0 - MASS_POLE * costheta.square() / TOTAL_MASS)
    )
    xacc = temp - POLEMASS_LENGTH * thetaacc * costheta / TOTAL_MASS
    return {
        "x": x + TAU * x_dot,
        "x_dot": x_dot + TAU * xacc,
        "theta": theta + TAU * theta_dot,
        "theta_dot": theta_dot + TAU * thetaacc,
    }


def draw_cartpole(state: State, env_idx: int) -> np.ndarray:
    """The cart on its track (ends at +-2.4 m) and the pole (drawn at full length, 2 ``HALF_LENGTH``)."""
    x, theta = float(state["x"][env_idx]), float(state["theta"][env_idx])
    canvas = Canvas(-X_THRESHOLD - 0.3, X_THRESHOLD + 0.3, -0.6, 1.4)
    canvas.segment((-X_THRESHOLD, -0.1), (X_THRESHOLD, -0.1), 0.02)
    for end in (-X_THRESHOLD, X_THRESHOLD):
        canvas.segment((end, -0.2), (end, 0.0), 0.03)
    canvas.box((x, 0.0), (0.25, 0.08))
    tip = (x + 2 * HALF_LENGTH * math.sin(theta), 2 * HALF_LENGTH * math.cos(theta))
    canvas.segment((x, 0.0), tip, 0.05, ACCENT)
    return canvas.rgb()


class CartpoleBalanceEnv(TorchVecEnv):
    """Keep the pole within 12 deg and the cart within 2.4 m; reward 1 per step, 500 steps.

    Same MDP as ``CartPole-v1`` (start ``U[-0.05, 0.05]^4``, terminal step still rewarded
    1, so the best return is 500), obs ``[x, x_dot, theta, theta_dot]``.
    """

    action_dim = 1
    obs_dims = {"policy": 4}
    max_episode_length = 500
    step_dt = TAU

    def _initial_state(self) -> State:
        return {k: self._uniform(-0.05, 0.05) for k in ("x", "x_dot", "theta", "theta_dot")}

    def _dynamics(
        self, state: State, action: torch.Tensor
    ) -> tuple[State, torch.Tensor, torch.Tensor]:
        nxt = cartpole_euler_step(state, FORCE_MAG * action[:, 0])
        terminated = (nxt["x"].abs() > X_THRESHOLD) | (nxt["theta"].abs() > THETA_THRESHOLD)
        reward = torch.ones(self.num_envs, dtype=torch.float32, device=self.device)
        return nxt, reward, terminated

    def _observe(self, state: State) -> Obs:
        keys = ("x", "x_dot", "theta", "theta_dot")
        return {"policy": torch.stack([state[k] for k in keys], dim=1)}

    def render_frame(self, env_idx: int = 0) -> np.ndarray:
        return draw_cartpole(self._state, env_idx)


def _gaussian_tolerance(x: torch.Tensor, margin: float) -> torch.Tensor:
    """dm_control ``rewards.tolerance(x, bounds=(0, 0), margin, sigmoid='gaussian')``.

    With ``value_at_margin = 0.1`` the Gaussian ``exp(-(d s)^2 / 2)``, ``s^2 = -2 ln 0.1``,
    simplifies to ``0.1 ** (x / margin)^2``.
    """
    return torch.exp((x / margin).square() * math.log(0.1))


class CartpoleSwingupEnv(TorchVecEnv):
    """Swing the pole up from hanging down and keep it upright with the cart centred.

    Same physics as :class:`CartpoleBalanceEnv` without the angle limit. The cart still
    lives on a 2.4 m half-track: leaving it *terminates* the episode (rather than clamping,
    which would need a wall impulse on the pole to be physical). Because the reward is in
    [0, 1], termination costs the rewards the episode would still have earned.

    Reward (dm_control ``cartpole`` swing-up, smooth variant; Tassa et al. 2018) in [0, 1]::

        upright * (1 + centered) / 2 * (4 + small_control) / 5 * (1 + small_velocity) / 2
        upright        = (cos th + 1) / 2
        centered       = tolerance(x, margin=2)
        small_control  = max(0, 1 - a^2)          (quadratic tolerance, margin 1, a in [-1, 1])
        small_velocity = tolerance(thdot, margin=5)

    Obs ``[x, x_dot, cos th, sin th, theta_dot]`` with ``th = 0`` upright; 500 steps.
    """

    action_dim = 1
    obs_dims = {"policy": 5}
    max_episode_length = 500
    step_dt = TAU

    def _initial_state(self) -> State:
        theta = wrap_to_pi(self._uniform(-0.05, 0.05) + math.pi)
        return {
            "x": self._uniform(-0.05, 0.05),
            "x_dot": self._uniform(-0.05, 0.05),
            "theta": theta,
            "theta_dot": self._uniform(-0.05, 0.05),
        }

    def _dynamics(
        self, state: State, action: torch.Tensor
    ) -> tuple[State, torch.Tensor, torch.Tensor]:
        a = action[:, 0]
        nxt = cartpole_euler_step(state, FORCE_MAG * a)
        # Keep theta in [-pi, pi]: a spinning pole would otherwise lose float32 precision.
        nxt["theta"] = wrap_to_pi(nxt["theta"])
        terminated = nxt["x"].abs() > X_THRESHOLD
        upright = (torch.cos(nxt["theta"]) + 1.0) / 2.0
        centered = (1.0 + _gaussian_tolerance(nxt["x"], 2.0)) / 2.0
        small_control = (4.0 + (1.0 - a.square()).clamp_(min=0.0)) / 5.0
        small_velocity = (1.0 + _gaussian_tolerance(nxt["theta_dot"], 5.0)) / 2.0
        reward = upright * centered * small_control * small_velocity
        return nxt, reward, terminated

    def _observe(self, state: State) -> Obs:
        theta = state["theta"]
        cols = (state["x"], state["x_dot"], torch.cos(theta), torch.sin(theta), state["theta_dot"])
        return {"policy": torch.stack(cols, dim=1)}

    def render_frame(self, env_idx: int = 0) -> np.ndarray:
        return draw_cartpole(self._state, env_idx)


register_torch_task("cartpole_balance", CartpoleBalanceEnv)
register_torch_task("cartpole_swingup", CartpoleSwingupEnv)
