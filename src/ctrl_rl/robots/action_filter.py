"""Low-pass filters on a policy's actions, shared by the training env and the deploy node (numpy or torch).

A legged policy's targets chatter tick to tick; the motors turn that into vibration and heat. Two
filters sit between the clipped actions and the PD targets, trained with and exported to the node, so
the motors on the robot see what they saw in training:

- ``action_filter=f``: first order, ``y_t = (1 - f) x_t + f y_(t-1)``. Its state is the last applied
  action, which the ``last_action`` term observes. It attenuates the gait as much as the chatter: at
  50 Hz, ``f = 0.7`` passes a 3 Hz trot at 0.69 and a tick-to-tick flip at 0.18.
- ``action_lowpass_hz=fc``: second-order Butterworth (bilinear transform, pre-warped to ``fc``). Flat in
  its pass band and zero at the Nyquist rate: at 50 Hz with ``fc = 8`` it passes a 3 Hz trot at 0.99 and
  removes a tick-to-tick flip entirely. On white noise it leaves 0.16 of the RMS second difference (the
  gait report's ``action smoothness``), against 0.20 for ``f = 0.7`` and 0.37 for ``f = 0.5``. Its state is
  the last two inputs and the last two outputs; the outputs are the ``last_action`` term and the action
  before it.

Both start from rest (state zero) when an episode starts, on the env and on the node.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def lowpass_coefficients(cutoff_hz: float, control_dt: float) -> tuple[float, float, float, float, float]:
    """``(b0, b1, b2, a1, a2)`` of the second-order Butterworth low-pass at ``cutoff_hz`` for a signal
    sampled every ``control_dt`` seconds: ``y_t = b0 x_t + b1 x_(t-1) + b2 x_(t-2) - a1 y_(t-1) - a2 y_(t-2)``.
    Unit gain at rest, ``1/sqrt(2)`` at the cutoff, zero at the Nyquist rate."""
    check_lowpass(cutoff_hz, control_dt, "cutoff_hz")
    k = math.tan(math.pi * cutoff_hz * control_dt)  # the bilinear transform's pre-warped cutoff
    norm = 1.0 / (1.0 + math.sqrt(2.0) * k + k * k)
    b0 = k * k * norm
    return b0, 2.0 * b0, b0, 2.0 * (k * k - 1.0) * norm, (1.0 - math.sqrt(2.0) * k + k * k) * norm


def lowpass(x: T, x1: T, x2: T, y1: T, y2: T, coefficients: tuple[float, ...]) -> T:
    """One step of the filter: this input ``x``, the last two inputs ``x1, x2`` and outputs ``y1, y2``
    (arrays or tensors of one shape)."""
    b0, b1, b2, a1, a2 = coefficients
    return b0 * x + b1 * x1 + b2 * x2 - a1 * y1 - a2 * y2


def check_lowpass(cutoff_hz: float, control_dt: float, key: str = "task.kwargs.action_lowpass_hz") -> None:
    """A cutoff must lie between 0 and the Nyquist rate ``1 / (2 control_dt)``, or be 0 (off)."""
    nyquist = 0.5 / control_dt
    if not (math.isfinite(cutoff_hz) and 0.0 <= cutoff_hz < nyquist):
        raise ValueError(f"{key} must be in [0, {nyquist:g}) Hz at a {1 / control_dt:g} Hz control rate "
                         f"(0: off; e.g. 8 for a 2-3 Hz gait), got {cutoff_hz}")


def check_action_filters(action_filter: float, lowpass_hz: float, key: str = "task.kwargs") -> None:
    """The first-order filter's weight lies in [0, 1); the two filters are not stacked."""
    if not 0.0 <= action_filter < 1.0:
        raise ValueError(f"{key}.action_filter must be in [0, 1) (0: off; 0.5: half the last action), "
                         f"got {action_filter}")
    if action_filter > 0 and lowpass_hz > 0:
        raise ValueError(f"{key}: action_filter={action_filter} and action_lowpass_hz={lowpass_hz} are two "
                         "filters on the same actions; set one of them to 0")


class ActionFilter:
    """The configured filter (first order, low-pass, or none) with its input state, on a batch of actions:
    torch tensors in the training env, numpy arrays on the deploy node, the same arithmetic on both. The
    output state, the last two applied actions, is the caller's (the ``last_action`` term and the one
    before it); the input state, the last two clipped actions, is kept here."""

    def __init__(self, action_filter: float, lowpass_hz: float, control_dt: float, zeros: Callable[[], Any],
                 first_order: bool | None = None):
        self.weight: Any = action_filter
        """The first-order filter's weight of the last applied action (0: off); a caller that switches it during
        training (the gait recipe's polish) sets a 0-d tensor here."""
        self.first_order = action_filter > 0 if first_order is None else first_order
        """Whether the first-order filter runs (True while ``weight`` may become non-zero)."""
        self.coefficients = lowpass_coefficients(lowpass_hz, control_dt) if lowpass_hz > 0 else None
        """The low-pass's ``(b0, b1, b2, a1, a2)``; None: off."""
        self.inputs = [zeros(), zeros()]
        """The last two clipped actions (the low-pass's input state)."""

    def __call__(self, x: T, y1: T, y2: T) -> T:
        """The action to apply for the clipped action ``x``, after the applied ``y1`` (last) and ``y2``."""
        if self.first_order:
            return (1.0 - self.weight) * x + self.weight * y1
        if self.coefficients is None:
            return x
        y = lowpass(x, self.inputs[0], self.inputs[1], y1, y2, self.coefficients)
        self.inputs = [x, self.inputs[0]]
        return y

    def reset(self, rows: Any = None) -> None:
        """Back to rest: every row (numpy or torch), or the rows of the ``[N]`` bool tensor ``rows`` (no host
        read: the env's step stays graph-safe)."""
        if self.coefficients is None:
            return  # the inputs are only the low-pass's state
        for state in self.inputs:
            if rows is None:
                state[...] = 0.0
            else:
                state.masked_fill_(rows[:, None], 0.0)
