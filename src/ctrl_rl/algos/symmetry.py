"""Left/right symmetry for the PPO family (``algo.symmetry``): mirrored samples and the mirror loss.

Two ways to make a policy symmetric from the env's mirror maps (``ctrl_rl.mirror``), as rsl_rl
offers them:

* **augment**: every minibatch is trained on together with its mirror image: mirrored observations
  and actions, the old Gaussian mirrored with them, and the same advantages, returns, old values and
  old log-probabilities (a Gaussian's density is unchanged by a signed permutation of its axes, so
  the mirrored sample has exactly its twin's probability under the mirrored old policy);
* **loss**: ``symmetry_coef * mean((mu(mirror(s)) - mirror(mu(s)))^2)`` on the actor mean, the
  target side detached.

Both are pure functions of tensors, tested by hand in ``tests/test_symmetry.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch

from ctrl_rl.mirror import EnvMirror, SignedPerm
from ctrl_rl.storage.rollout import Minibatch


@dataclass(frozen=True)
class Symmetry:
    """The maps a learner's networks need: its actor's and critic's inputs, and the actions."""

    actor: SignedPerm
    critic: SignedPerm
    actions: SignedPerm
    augment: bool
    loss: bool

    @classmethod
    def build(cls, mirror: EnvMirror, actor_groups: Sequence[str], critic_groups: Sequence[str],
              mode: str) -> Symmetry:
        return cls(mirror.input(actor_groups), mirror.input(critic_groups), mirror.actions,
                   augment=mode in ("augment", "both"), loss=mode in ("loss", "both"))


def mirror_minibatch(mb: Minibatch, sym: Symmetry) -> Minibatch:
    """``mb`` followed by its mirror image (twice the samples)."""
    if mb.extra or mb.sequences is not None:
        raise ValueError("symmetry augmentation mirrors Gaussian, feed-forward minibatches only")
    cat = lambda a, b: torch.cat([a, b], 0)  # noqa: E731
    twice = lambda x: cat(x, x)  # noqa: E731
    perm = torch.as_tensor(sym.actions.perm, device=mb.old_std.device)
    return replace(
        mb,
        actor_obs=cat(mb.actor_obs, sym.actor(mb.actor_obs)),
        critic_obs=cat(mb.critic_obs, sym.critic(mb.critic_obs)),
        actions=cat(mb.actions, sym.actions(mb.actions)),
        old_log_prob=twice(mb.old_log_prob),
        old_mean=cat(mb.old_mean, sym.actions(mb.old_mean)),
        old_std=cat(mb.old_std, mb.old_std.index_select(-1, perm)),
        old_values=twice(mb.old_values),
        advantages=twice(mb.advantages),
        returns=twice(mb.returns),
        collected=len(mb.actions),
    )


def mirror_loss(mean: torch.Tensor, mirrored_mean: torch.Tensor, actions: SignedPerm) -> torch.Tensor:
    """``mean((mirrored_mean - mirror(mean))^2)``: ``mean = mu(s)``, ``mirrored_mean = mu(mirror(s))``; the
    gradient reaches ``mirrored_mean`` only (the policy's own action is the target)."""
    return ((mirrored_mean - actions(mean).detach()) ** 2).mean()
