"""The action low-pass (``robots/action_filter.py``) against hand-computed cases and its stated response."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ctrl_rl.robots.action_filter import check_action_filters, lowpass, lowpass_coefficients


def response(coefficients: tuple[float, ...], freq_hz: float, dt: float) -> complex:
    """The filter's transfer function at ``freq_hz``: (b0 + b1 z^-1 + b2 z^-2) / (1 + a1 z^-1 + a2 z^-2)."""
    b0, b1, b2, a1, a2 = coefficients
    z = np.exp(-2j * math.pi * freq_hz * dt)  # z^-1
    return (b0 + b1 * z + b2 * z * z) / (1 + a1 * z + a2 * z * z)


def run(coefficients: tuple[float, ...], x: np.ndarray) -> np.ndarray:
    """The recursion over a signal, from rest."""
    y = np.zeros_like(x)
    for t in range(len(x)):
        y[t] = lowpass(x[t], x[t - 1] if t > 0 else 0.0, x[t - 2] if t > 1 else 0.0,
                       y[t - 1] if t > 0 else 0.0, y[t - 2] if t > 1 else 0.0, coefficients)
    return y


def test_coefficients_at_a_quarter_of_the_rate_by_hand():
    """At fc = fs / 4 the pre-warped cutoff is tan(pi / 4) = 1: b0 = 1 / (2 + sqrt 2), a1 = 0,
    a2 = (2 - sqrt 2) / (2 + sqrt 2)."""
    b0, b1, b2, a1, a2 = lowpass_coefficients(12.5, 0.02)
    assert b0 == pytest.approx(1 / (2 + math.sqrt(2))) and b1 == pytest.approx(2 * b0) and b2 == pytest.approx(b0)
    assert a1 == pytest.approx(0.0, abs=1e-12) and a2 == pytest.approx((2 - math.sqrt(2)) / (2 + math.sqrt(2)))


@pytest.mark.parametrize("cutoff", [4.0, 8.0, 12.5, 20.0])
def test_unit_gain_at_rest_half_power_at_the_cutoff_and_nothing_at_nyquist(cutoff):
    c = lowpass_coefficients(cutoff, 0.02)
    assert abs(response(c, 0.0, 0.02)) == pytest.approx(1.0)
    assert abs(response(c, cutoff, 0.02)) == pytest.approx(1 / math.sqrt(2))
    assert abs(response(c, 25.0, 0.02)) == pytest.approx(0.0, abs=1e-12)


def test_a_step_settles_on_the_step_and_a_flip_dies_out():
    c = lowpass_coefficients(8.0, 0.02)
    assert run(c, np.ones(100))[-1] == pytest.approx(1.0, abs=1e-9)
    flip = run(c, np.where(np.arange(200) % 2 == 0, 1.0, -1.0))
    assert np.abs(flip[-20:]).max() < 1e-9  # the tick-to-tick flip is the Nyquist rate: removed


def test_the_docstrings_figures_trot_and_white_noise():
    """The module's claims at 50 Hz: fc = 8 passes a 3 Hz trot at 0.99 and leaves 0.16 of white noise's
    RMS second difference; the first-order filter with f = 0.7 leaves 0.20 (and passes the trot at 0.69)."""
    c = lowpass_coefficients(8.0, 0.02)
    assert abs(response(c, 3.0, 0.02)) == pytest.approx(0.99, abs=0.005)
    x = np.random.default_rng(0).standard_normal(100_000)
    jerk = lambda a: np.sqrt((np.diff(a, n=2) ** 2).mean())  # noqa: E731 - the gait report's measure
    assert jerk(run(c, x)) / jerk(x) == pytest.approx(0.16, abs=0.01)
    ema = np.zeros_like(x)
    for t in range(1, len(x)):
        ema[t] = 0.3 * x[t] + 0.7 * ema[t - 1]
    assert jerk(ema) / jerk(x) == pytest.approx(0.20, abs=0.01)
    assert abs(response((0.3, 0.0, 0.0, -0.7, 0.0), 3.0, 0.02)) == pytest.approx(0.69, abs=0.005)


@pytest.mark.parametrize(("cutoff", "dt"), [(25.0, 0.02), (-1.0, 0.02), (float("nan"), 0.02), (60.0, 0.01)])
def test_a_cutoff_outside_zero_to_nyquist_is_refused(cutoff, dt):
    with pytest.raises(ValueError, match=r"must be in \[0, "):
        lowpass_coefficients(cutoff, dt)


def test_the_two_filters_are_not_stacked():
    with pytest.raises(ValueError, match="set one of them to 0"):
        check_action_filters(0.5, 8.0)
    check_action_filters(0.5, 0.0)
    check_action_filters(0.0, 8.0)
