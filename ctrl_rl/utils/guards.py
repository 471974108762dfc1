"""Catch NaN/inf where it appears, with a message that says what to try."""

from __future__ import annotations

import torch


class NonFiniteError(FloatingPointError):
    """A tensor that must be finite is not; the message names the source and a fix."""


def check_finite(name: str, tensor: torch.Tensor, source: str, hint: str | None = None) -> None:
    """Raise :class:`NonFiniteError` naming ``name``, where it came from and what to try.

    One reduction and one host sync: call it per iteration, not per env step.
    """
    finite = torch.isfinite(tensor)
    if bool(finite.all()):
        return
    bad = (~finite).nonzero()
    first = bad[:5].tolist()
    hint = hint or "This usually indicates a bug in the env's step() or reset(), or exploding physics"
    raise NonFiniteError(
        f"{name} contains NaN/inf ({bad.shape[0]} entries; first indices {first}) coming from {source}. {hint}."
    )
