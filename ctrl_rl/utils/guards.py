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


def learner_tensors(alg: object) -> list[tuple[str, torch.Tensor]]:
    """Every floating tensor a learner's training depends on, named: parameters and buffers of its
    modules (normalizer statistics included), its optimizers' state, its own tensors (``log_alpha``)."""
    out: list[tuple[str, torch.Tensor]] = []
    seen: set[int] = set()

    def add(name: str, t: object) -> None:
        if isinstance(t, torch.Tensor) and t.is_floating_point() and id(t) not in seen:
            seen.add(id(t))
            out.append((name, t.detach()))

    for attr, obj in vars(alg).items():
        if isinstance(obj, torch.nn.Module):
            for n, t in obj.named_parameters():
                add(f"{attr}.{n}", t)
            for n, t in obj.named_buffers():
                add(f"{attr}.{n} (statistics)", t)
        elif isinstance(obj, torch.optim.Optimizer):
            for i, state in enumerate(obj.state.values()):
                for k, t in state.items():
                    add(f"{attr} state '{k}' of parameter {i}", t)
        else:
            add(attr, obj)
    return out


def check_learner_finite(alg: object, iteration: int) -> None:
    """Raise :class:`NonFiniteError` naming the first non-finite parameter, optimizer state or
    normalizer statistic. One flag per tensor, one host sync: cheap next to an update."""
    tensors = learner_tensors(alg)
    if not tensors:
        return
    device = tensors[0][1].device
    flags = torch.stack([torch.isfinite(t).all().to(device) for _, t in tensors])
    if bool(flags.all()):
        return
    bad = [name for (name, _), ok in zip(tensors, flags.tolist(), strict=True) if not ok]
    more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
    raise NonFiniteError(
        f"{bad[0]}{more} became NaN/inf in iteration {iteration}: training diverged. No checkpoint holding it is "
        "written; resume from the last one with a lower algo.learning_rate (or algo.max_grad_norm), and keep "
        "algo.normalize_obs=true")


class FiniteWatch:
    """Per-env flags of non-finite observations (per group) and rewards, accumulated on the device
    over an iteration's steps (no host sync per step) and checked once at its end."""

    def __init__(self) -> None:
        self.bad: dict[str, torch.Tensor] = {}

    def add(self, obs: dict[str, torch.Tensor], rewards: torch.Tensor) -> None:
        for name, x in (*((f"observation group '{k}'", v) for k, v in obs.items()), ("reward", rewards)):
            flags = ~torch.isfinite(x.reshape(x.shape[0], -1)).all(dim=1) if x.is_floating_point() else None
            if flags is None:
                continue
            prev = self.bad.get(name)
            self.bad[name] = flags if prev is None else prev | flags

    def check(self, iteration: int) -> None:
        """Raise naming the first group (or the reward) and the envs that produced NaN/inf."""
        if not self.bad:
            return
        names = list(self.bad)
        any_bad = torch.stack([f.any() for f in self.bad.values()])
        if bool(any_bad.any()):
            name = names[int(any_bad.nonzero()[0])]
            envs = self.bad[name].nonzero().flatten()
            self.bad.clear()
            raise NonFiniteError(
                f"the env returned NaN/inf in its {name} in iteration {iteration} (envs {envs[:8].tolist()}"
                f"{', ...' if envs.numel() > 8 else ''}). This usually indicates a bug in the env's step() or "
                "reset(), or exploding physics; no checkpoint holding it is written")
        self.bad.clear()
