"""Policy heads of PPO's family: what a policy samples, stores per step and optimizes.

A head owns the policy-specific half of PPO: how an action is drawn (and what of it the update
needs again), the surrogate and entropy of a minibatch, and the policy's episode state. The rest
(storage, GAE, value loss, minibatching, schedules, checkpoints) is PPO's and does not change.
FPO's flow head lives in ``algos/fpo.py``, the residual head in ``algos/residual.py``.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ctrl_rl.algos.losses import ppo_surrogate_loss
from ctrl_rl.nets.distributions import gaussian_entropy, gaussian_kl, gaussian_log_prob
from ctrl_rl.storage.rollout import Minibatch

Sample = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]
"""``(actions, log_prob, mean, std, extra)``: one step's actions and what the storage keeps of them."""


class PolicyHead:
    """What every head provides; the episode-state hooks default to a stateless policy."""

    gaussian: bool = False
    """Has a closed-form Gaussian density: the adaptive-KL schedule, ``mean_std`` and PROPS work on it."""

    def storage_shapes(self, action_dim: int) -> dict[str, tuple[int, ...]]:
        """Per-step tensors beyond PPO's (``RolloutStorage.extra_shapes``)."""
        return {}

    def sample(self, actor: nn.Module, actor_in: torch.Tensor, generator: torch.Generator) -> Sample:
        """One step's actions from ``actor`` and what the storage keeps of them."""
        raise NotImplementedError

    def loss(self, actor: nn.Module, mb: Minibatch, cfg: Any) -> tuple[torch.Tensor, torch.Tensor,
                                                                      dict[str, torch.Tensor]]:
        """``(surrogate, entropy, stats)`` of the actor on ``mb``. Two keys of ``stats`` are not logged
        as they are: ``kl`` (no gradient) steers the adaptive learning rate; ``aux``, an actor loss
        beside the surrogate with its gradient (CTS's latent regression), is added to PPO's loss,
        computed in the same forward pass as the surrogate's."""
        raise NotImplementedError

    # ------------------------------------------------------------------ episode state
    def episodes_ended(self, model: nn.Module, dones: torch.Tensor) -> None:
        """Envs ``dones`` start new episodes (a stateful policy resets their state)."""

    def episode_state(self, model: nn.Module) -> dict[str, Any]:
        """Per-env policy state a checkpoint keeps for an exact resume; none here."""
        return {}

    def load_episode_state(self, model: nn.Module, state: dict[str, Any]) -> None:
        """Restore :meth:`episode_state`."""

    def inference_policy(self, model: nn.Module) -> nn.Module:
        """The deterministic policy on raw actor observations."""
        return model.actor


class GaussianHead(PolicyHead):
    """A Gaussian policy (the actor's ``distribution``): PPO's likelihood-ratio surrogate."""

    gaussian = True

    def sample(self, actor: nn.Module, actor_in: torch.Tensor, generator: torch.Generator) -> Sample:
        mean, std = actor.distribution(actor_in)
        actions = mean + std * torch.randn(mean.shape, generator=generator, device=mean.device)
        return actions, gaussian_log_prob(actions, mean, std), mean, std, {}

    @staticmethod
    @torch.no_grad()
    def as_old_policy(actor: nn.Module, batch: dict[str, torch.Tensor]) -> None:
        """Set ``batch``'s old policy (``old_mean``, ``old_std``, ``old_log_prob``, float32) to ``actor``'s
        Gaussian on its observations, in the arithmetic of the caller's context: PROPS's ratio measured from
        the current policy, bf16's from the policy in the update's own rounding."""
        mean, std = actor.distribution(batch["actor_obs"])
        batch["old_mean"], batch["old_std"] = mean.float(), std.float()
        batch["old_log_prob"] = gaussian_log_prob(batch["actions"], batch["old_mean"], batch["old_std"])

    def loss(self, actor: nn.Module, mb: Minibatch, cfg: Any) -> tuple[torch.Tensor, torch.Tensor,
                                                                      dict[str, torch.Tensor]]:
        """``(surrogate, entropy, stats)`` on ``mb``; with the adaptive schedule ``stats["kl"]`` (no
        gradient) steers the learning rate."""
        return self.surrogate(*actor.distribution(mb.actor_obs), mb, cfg)

    @staticmethod
    def surrogate(mean: torch.Tensor, std: torch.Tensor, mb: Minibatch,
                  cfg: Any) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """:meth:`loss` of the policy's Gaussian ``(mean, std)`` on ``mb``'s observations. The KL and the
        entropy read the collected samples only (``mb.collected``); the surrogate reads them all."""
        n = mb.collected if mb.collected is not None else len(mean)
        stats: dict[str, torch.Tensor] = {}
        if cfg.schedule == "adaptive":
            with torch.no_grad():
                stats["kl"] = gaussian_kl(mb.old_mean[:n], mb.old_std[:n], mean[:n], std[:n]).mean()
        log_prob = gaussian_log_prob(mb.actions, mean, std)
        surrogate, clip_frac, approx_kl = ppo_surrogate_loss(log_prob, mb.old_log_prob, mb.advantages, cfg.clip_param)
        return surrogate, gaussian_entropy(std[:n]).mean(), {"approx_kl": approx_kl, "clip_fraction": clip_frac,
                                                              **stats}
