"""Rollout sources of PPO's family: which rollouts an update trains on, and which policy collects them."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ctrl_rl.storage.rollout import RolloutStorage


class OneRollout:
    """PPO's source: the policy being trained collects one rollout; the update trains on it, then
    it is cleared. PROPS's ring of rollouts with a behavior policy (``algos/props.py``) extends it."""

    def __init__(self, storage: RolloutStorage, model: nn.Module):
        """``model``: the learner's actor-critic (a behavior policy starts as its actor)."""
        self.storage = storage
        """The rollout being collected."""

    def behavior_actor(self, model: nn.Module) -> nn.Module:
        """The policy that collects."""
        return model.actor

    def rollouts(self) -> list[RolloutStorage]:
        """The rollouts the next update trains on, oldest first."""
        return [self.storage]

    def training_batch(self, model: nn.Module) -> dict[str, torch.Tensor]:
        """Every sample of :meth:`rollouts` flattened, keyed like ``Minibatch``'s fields."""
        flats = [s.flat() for s in self.rollouts()]
        return flats[0] if len(flats) == 1 else {k: torch.cat([f[k] for f in flats]) for k in flats[0]}

    def after_update(self, model: nn.Module, generator: torch.Generator) -> dict[str, float]:
        """Make room for the next rollout; returns statistics to log."""
        self.storage.clear()
        return {}

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Nothing beyond the learner's own state."""

    keeps_replay = False
    """Whether rollouts are kept across updates (here: no, the one rollout is consumed by its update)."""

    def replay_state_dict(self) -> dict[str, Any]:
        raise RuntimeError("PPO keeps no rollouts across updates")

    def load_replay_state_dict(self, state: dict[str, Any]) -> None:
        raise RuntimeError("PPO keeps no rollouts across updates")
