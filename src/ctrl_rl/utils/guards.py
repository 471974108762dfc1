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
    modules (normalizer statistics included), its optimizers' state, its own tensors (``log_alpha``),
    and the same of the parts it is composed of (a rollout source's behavior policy, the PPO a
    hand-over trains: objects of ``ctrl_rl.algos`` it holds)."""
    out: list[tuple[str, torch.Tensor]] = []
    seen: set[int] = set()

    def add(name: str, t: object) -> None:
        if isinstance(t, torch.Tensor) and t.is_floating_point() and id(t) not in seen:
            seen.add(id(t))
            out.append((name, t.detach()))

    def walk(owner: object, prefix: str) -> None:
        seen.add(id(owner))
        for attr, obj in vars(owner).items():
            name = prefix + attr
            if isinstance(obj, torch.nn.Module):
                for n, t in obj.named_parameters():
                    add(f"{name}.{n}", t)
                for mod_name, mod in obj.named_modules():  # a module may name buffers whose inf is a sentinel
                    skip = getattr(mod, "sentinel_buffers", ())
                    for n, t in mod.named_buffers(recurse=False):
                        if n not in skip:
                            add(f"{name}.{mod_name + '.' if mod_name else ''}{n} (statistics)", t)
            elif isinstance(obj, torch.optim.Optimizer):
                for i, state in enumerate(obj.state.values()):
                    for k, t in state.items():
                        add(f"{name} state '{k}' of parameter {i}", t)
            elif type(obj).__module__.startswith("ctrl_rl.algos") and id(obj) not in seen:
                walk(obj, name + ".")
            else:
                add(name, obj)

    walk(alg, "")
    return out


def check_learner_finite(alg: object, iteration: int) -> None:
    """Raise :class:`NonFiniteError` naming the first non-finite parameter, optimizer state or
    normalizer statistic. One sum per tensor, one host sync: cheap next to an update."""
    tensors = learner_tensors(alg)
    if not tensors:
        return
    device = tensors[0][1].device
    # A sum is finite only if every element is (NaN and inf survive it): one small kernel per
    # tensor. An overflowing sum of finite values is told apart by the exact check below.
    if bool(torch.stack([t.sum().to(device) for _, t in tensors]).isfinite().all()):
        return
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
    """Per env, the first step of an iteration at which its observations (per group) or rewards were
    NaN/inf. Each step keeps one row sum per group (NaN and inf survive a sum; one op per group, no
    host sync), checked once at the iteration's end. The first step matters: a NaN observation
    feeds the normalizer and the policy, and a few steps later every env is NaN; the env that
    started it is the one to report."""

    def __init__(self) -> None:
        self.sums: dict[str, list[torch.Tensor]] = {}

    def add(self, obs: dict[str, torch.Tensor], rewards: torch.Tensor) -> None:
        for name, x in (*((f"observation group '{k}'", v) for k, v in obs.items()), ("reward", rewards)):
            if x.is_floating_point():
                self.sums.setdefault(name, []).append(x.reshape(x.shape[0], -1).sum(dim=1))

    def check(self, iteration: int) -> None:
        """Raise naming the earliest group (or the reward) and the envs that produced NaN/inf first."""
        sums, self.sums = self.sums, {}
        if not sums:
            return
        bad = {name: ~torch.isfinite(torch.stack(rows)) for name, rows in sums.items()}  # [steps, envs]
        if not bool(torch.stack([b.any() for b in bad.values()]).any()):
            return
        step, name = min((int(b.any(dim=1).nonzero()[0]), name) for name, b in bad.items() if bool(b.any()))
        envs = bad[name][step].nonzero().flatten()
        raise NonFiniteError(
            f"the env returned NaN/inf in its {name} in iteration {iteration}, step {step} (envs "
            f"{envs[:8].tolist()}{', ...' if envs.numel() > 8 else ''}). This usually indicates a bug in the env's "
            "step() or reset(), or exploding physics; no checkpoint holding it is written")
