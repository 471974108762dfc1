"""Observation groups: which env groups feed an actor and a critic, and the model base that wires them.

Every actor-critic model (PPO's, SAC's, PQL's) reads the same plumbing: the groups each net
takes, the input widths the storages are sized by, the concatenated inputs, and the step that
folds a batch into both observation normalizers. It lives here once, so asymmetric actor-critic
behaves the same in every learner.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from ctrl_rl.env import Obs
from ctrl_rl.nets.normalizer import observe


def concat_groups(obs: Obs, groups: Sequence[str]) -> torch.Tensor:
    """Concatenate observation groups into one network input (one group: no copy)."""
    if len(groups) == 1:
        return obs[groups[0]]
    return torch.cat([obs[g] for g in groups], dim=-1)


def resolve_groups(obs_dims: dict[str, int], actor_obs: Sequence[str],
                   critic_obs: Sequence[str] | None) -> tuple[list[str], list[str]]:
    """Actor and critic observation groups; ``critic_obs=None`` means the privileged ``critic``
    group when the env has one, else the actor's groups. Unknown groups are refused by name."""
    if critic_obs is None:
        critic_obs = ["critic"] if "critic" in obs_dims else list(actor_obs)
    for name, groups in (("actor_obs", actor_obs), ("critic_obs", critic_obs)):
        missing = [g for g in groups if g not in obs_dims]
        if missing:
            raise ValueError(f"algo.{name} names observation group(s) {missing} the env does not provide; "
                             f"available: {sorted(obs_dims)}")
    return list(actor_obs), list(critic_obs)


class GroupedModel(nn.Module):
    """Base of the actor-critic models: the actor's and the critic's observation groups and widths.

    Subclasses build ``actor`` (whose ``normalizer`` sees the actor's input) and provide
    ``critic_normalizer`` (the module that normalizes the critic's input) after calling
    ``super().__init__``.
    """

    actor: nn.Module

    def __init__(self, obs_dims: dict[str, int], actor_obs: Sequence[str], critic_obs: Sequence[str] | None):
        super().__init__()
        self.actor_obs, self.critic_obs = resolve_groups(obs_dims, actor_obs, critic_obs)
        self.actor_dim = sum(obs_dims[g] for g in self.actor_obs)
        """Width of the actor's input (what rollout and replay storage hold per step)."""
        self.critic_dim = sum(obs_dims[g] for g in self.critic_obs)
        """Width of the critic's input."""

    @property
    def actor_normalizer(self) -> nn.Module:
        """The module that normalizes the actor's raw input."""
        return self.actor.normalizer

    @property
    def shares_obs(self) -> bool:
        """Actor and critic read the same groups (storage then keeps one copy)."""
        return self.actor_obs == self.critic_obs

    def actor_input(self, obs: Obs) -> torch.Tensor:
        return concat_groups(obs, self.actor_obs)

    def critic_input(self, obs: Obs) -> torch.Tensor:
        return concat_groups(obs, self.critic_obs)

    @torch.no_grad()
    def update_normalizers(self, actor_in: torch.Tensor, critic_in: torch.Tensor) -> None:
        observe(((self.actor_normalizer, actor_in), (self.critic_normalizer, critic_in)))
