"""Reward functions for robot logs of the quadruped velocity task (numpy only).

Real-robot episodes carry no rewards (``ctrl_rl.storage.robot_log``); these functions label
them afterwards from the recorded signals, with the training task's terms and weights
(``tasks/locomotion/locomotion.py``: legged_gym's Go1 reward, Isaac Lab's flat-terrain orientation
weight), each weighted term times the control period, as in training. Name them as
``ctrl_rl.robots.log_rewards:proprioceptive`` (``load_robot_logs``, ``dataset=robotlogs:...``).

Each is ``fn(states, actions, next_states, signals) -> [T]``; ``signals`` are ``[T+1, ...]``
arrays, row t measured with ``states[t]``: the reward of action t reads the command the policy
was given (row t) and what the robot did next (row t + 1). Not clipped at zero (training's
``only_positive_rewards`` keeps early falls from paying; in logs a fall is a terminal).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

CONTROL_DT = 0.02
"""ctrl_quad's control period (50 Hz). For another rate pass ``functools.partial(fn, dt=...)``."""
TRACKING_SIGMA = 0.25
"""exp(-err^2 / sigma) tracking kernels (legged_gym; ``locomotion.TRACKING_SIGMA``)."""
WEIGHTS = {"track_lin_vel_xy": 1.0, "track_ang_vel_z": 0.5, "lin_vel_z": -2.0, "ang_vel_xy": -0.05,
           "orientation": -5.0, "joint_acc": -2.5e-7, "action_rate": -0.01}
"""The terms of ``locomotion.DEFAULT_REWARDS`` computable from logs (tested equal). Left out:
torques (the node records no effort), feet air time (no contact sensing), joint-limit proximity
(the soft limits are not in the log)."""


def _need(signals: Mapping[str, np.ndarray], names: tuple[str, ...], fn: str) -> list[np.ndarray]:
    missing = [n for n in names if n not in signals]
    if missing:
        raise ValueError(f"{fn} needs signals {missing}; this log has {sorted(signals)}")
    return [np.asarray(signals[n], dtype=np.float64) for n in names]


def proprioceptive_terms(actions: np.ndarray, signals: Mapping[str, np.ndarray],
                         dt: float = CONTROL_DT) -> dict[str, np.ndarray]:
    """The unweighted ``[T]`` terms a robot measures itself: yaw-rate tracking (gyro), body
    rates and tilt (IMU), joint acceleration (encoders), action rate (the first step's previous
    action is zero: the policy resets when it takes over, as in training)."""
    gyro, grav, cmd, vel = _need(signals, ("imu_gyro", "projected_gravity", "command", "joint_vel"),
                                 "proprioceptive")
    a = np.asarray(actions, dtype=np.float64)
    prev = np.concatenate([np.zeros_like(a[:1]), a[:-1]])
    w_next, g_next = gyro[1:], grav[1:]
    return {
        "track_ang_vel_z": np.exp(-((cmd[:-1, 2] - w_next[:, 2]) ** 2) / TRACKING_SIGMA),
        "ang_vel_xy": (w_next[:, :2] ** 2).sum(-1),
        "orientation": (g_next[:, :2] ** 2).sum(-1),
        "joint_acc": (((vel[1:] - vel[:-1]) / dt) ** 2).sum(-1),
        "action_rate": ((a - prev) ** 2).sum(-1),
    }


def _weighted(terms: Mapping[str, np.ndarray], dt: float) -> np.ndarray:
    return sum(WEIGHTS[k] * dt * v for k, v in terms.items())


def proprioceptive(states: np.ndarray, actions: np.ndarray, next_states: np.ndarray,
                   signals: Mapping[str, np.ndarray], dt: float = CONTROL_DT) -> np.ndarray:
    """The velocity task's reward without linear-velocity terms (no robot measures its own base
    velocity without an estimator): yaw-rate tracking, upright and smooth. Works on every log the
    deploy node writes."""
    return _weighted(proprioceptive_terms(actions, signals, dt), dt)


def velocity_tracking(states: np.ndarray, actions: np.ndarray, next_states: np.ndarray,
                      signals: Mapping[str, np.ndarray], dt: float = CONTROL_DT) -> np.ndarray:
    """:func:`proprioceptive` plus linear-velocity tracking and vertical-velocity penalty, from
    ``signals/base_lin_vel`` (body frame, m/s): a state estimator's or motion capture's, added to
    the logs by the robot stack (the deploy node has none)."""
    terms = proprioceptive_terms(actions, signals, dt)
    v, cmd = _need(signals, ("base_lin_vel", "command"), "velocity_tracking (base_lin_vel: a body-frame "
                   "velocity estimate; without one use ctrl_rl.robots.log_rewards:proprioceptive)")
    terms["track_lin_vel_xy"] = np.exp(-((cmd[:-1, :2] - v[1:, :2]) ** 2).sum(-1) / TRACKING_SIGMA)
    terms["lin_vel_z"] = v[1:, 2] ** 2
    return _weighted(terms, dt)
