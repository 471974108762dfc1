"""PROPS: Proximal Robust On-Policy Sampling (Corrado & Hanna, "On-Policy Policy Gradient RL
Without On-Policy Sampling").

On-policy sampling is only on-policy in expectation: a finite batch over- and under-represents
actions by chance (sampling error), and PPO reusing the previous batch makes it worse. PROPS
keeps the newest ``b`` rollouts and, before each collection, adapts a *behavior* policy π_φ
(reset to the target π_θ) to make the actions the kept data is short of more likely, so the
buffer as a whole looks more like a sample from π_θ. The target is trained by PPO on the whole
buffer with log-probs, values and GAE recomputed under the current π_θ and critic.

PROPS is PPO with :class:`PROPSRollouts` as its rollout source; everything else is PPO's (storage,
losses, minibatching, checkpoints): this module adds only the ring of rollouts, the behavior
policy and its update. One simplification from the paper:
the behavior update runs once per collection phase, not every ``m`` env steps within it.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import nn

from ctrl_rl import distributed
from ctrl_rl.algos.heads import GaussianHead
from ctrl_rl.algos.losses import props_behavior_loss
from ctrl_rl.algos.ppo import PPO
from ctrl_rl.algos.registry import register_learner
from ctrl_rl.algos.rollouts import OneRollout
from ctrl_rl.config_onpolicy import PROPSConfig
from ctrl_rl.nets.distributions import gaussian_kl, gaussian_log_prob
from ctrl_rl.storage.rollout import RolloutStorage, minibatch_indices


class PROPSRollouts(OneRollout):
    """A ring of ``buffer_batches`` rollouts, collected by a behavior policy π_φ adapted after each update."""

    keeps_replay = True

    def __init__(self, storage: RolloutStorage, model: nn.Module, cfg: PROPSConfig):
        super().__init__(storage, model)
        self.cfg = cfg
        self.behavior = copy.deepcopy(model.actor)  # π_φ; reset to π_θ before each collection
        self.behavior_optimizer = torch.optim.Adam(self.behavior.parameters(), lr=cfg.props_learning_rate, eps=1e-5)
        self.ring = [storage] + [storage.new_like() for _ in range(cfg.buffer_batches - 1)]
        self.head = 0  # ring index of the rollout being collected (self.storage)
        self.num_kept = 0  # finished rollouts in the ring besides the head, newest at head - 1

    def behavior_actor(self, model: nn.Module) -> nn.Module:
        return self.behavior

    def _ring_before_head(self, count: int) -> list[RolloutStorage]:
        """The ``count`` rollouts before the head, oldest first."""
        b = len(self.ring)
        return [self.ring[(self.head - k) % b] for k in range(count, 0, -1)]

    def rollouts(self) -> list[RolloutStorage]:
        """The kept rollouts and the one just collected, oldest first."""
        return [*self._ring_before_head(self.num_kept), self.storage]

    def training_batch(self, model: nn.Module) -> dict[str, torch.Tensor]:
        """The buffer's samples with the "old" policy recomputed as the current π_θ: the PPO
        ratio measures the update's step from π_θ, whichever policy collected the data."""
        batch = super().training_batch(model)
        GaussianHead.as_old_policy(model.actor, batch)
        return batch

    def after_update(self, model: nn.Module, generator: torch.Generator) -> dict[str, float]:
        """Advance the ring (the oldest rollout makes room), then adapt π_φ to what stays."""
        self.num_kept = min(self.num_kept + 1, len(self.ring) - 1)
        self.head = (self.head + 1) % len(self.ring)
        self.storage = self.ring[self.head]
        self.storage.clear()
        return self.update_behavior(model.actor, self._ring_before_head(self.num_kept), generator)

    # ------------------------------------------------------------------ behavior update
    def update_behavior(self, target: nn.Module, kept: list[RolloutStorage],
                        generator: torch.Generator) -> dict[str, float]:
        """φ ← θ, then up to ``props_epochs`` epochs of the PROPS loss on the ``kept`` rollouts,
        stopping once KL(π_φ || π_θ) on a minibatch exceeds ``props_target_kl``."""
        cfg = self.cfg
        self.behavior.load_state_dict(target.state_dict())  # normalizer statistics too
        stats = {"props_loss": 0.0, "props_kl": 0.0, "props_epochs": 0.0}
        if cfg.props_epochs == 0 or not kept:
            return stats
        obs = torch.cat([s.actor_obs.reshape(-1, s.actor_obs.shape[-1]) for s in kept])
        actions = torch.cat([s.actions.reshape(-1, s.actions.shape[-1]) for s in kept])
        with torch.no_grad():
            t_mean, t_std = target.distribution(obs)
            t_log_prob = gaussian_log_prob(actions, t_mean, t_std)
        steps, loss_sum, kl = 0, 0.0, 0.0
        for epoch in range(cfg.props_epochs):
            batches = minibatch_indices(obs.shape[0], cfg.props_num_minibatches, generator, obs.device)
            for i, idx in enumerate(batches):
                mean, std = self.behavior.distribution(obs[idx])
                kl_per_state = gaussian_kl(mean, std, t_mean[idx], t_std[idx])
                # a host sync per minibatch: the early stop needs it (and all ranks must stop together)
                kl = float(distributed.mean(kl_per_state.detach().mean()))
                if kl > cfg.props_target_kl:  # far enough from π_θ: stop before moving further
                    return {"props_loss": loss_sum / max(steps, 1), "props_kl": kl,
                            "props_epochs": epoch + i / cfg.props_num_minibatches}
                loss = props_behavior_loss(gaussian_log_prob(actions[idx], mean, std), t_log_prob[idx],
                                           kl_per_state, cfg.props_clip, cfg.props_kl_coef)
                self.behavior_optimizer.zero_grad(set_to_none=True)
                loss.backward()
                distributed.all_reduce_grads(self.behavior.parameters())
                nn.utils.clip_grad_norm_(self.behavior.parameters(), cfg.props_max_grad_norm)
                self.behavior_optimizer.step()
                loss_sum += float(loss.detach())
                steps += 1
        return {"props_loss": loss_sum / max(steps, 1), "props_kl": kl, "props_epochs": float(cfg.props_epochs)}

    # ------------------------------------------------------------------ io
    def state_dict(self) -> dict[str, Any]:
        return {"behavior": self.behavior.state_dict(), "behavior_optimizer": self.behavior_optimizer.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.behavior.load_state_dict(state["behavior"])
        self.behavior_optimizer.load_state_dict(state["behavior_optimizer"])

    def replay_state_dict(self) -> dict[str, Any]:
        """The kept rollouts (the runner writes them to ``replay_<it>.pt`` beside the checkpoint)."""
        return {"head": self.head, "num_kept": self.num_kept, "ring": [s.state_dict() for s in self.ring]}

    def load_replay_state_dict(self, state: dict[str, Any]) -> None:
        self.head, self.num_kept = state["head"], state["num_kept"]
        for s, saved in zip(self.ring, state["ring"], strict=True):
            s.load_state_dict(saved)
        self.storage = self.ring[self.head]


def make_props(cfg: PROPSConfig, obs_dims: dict[str, int], action_dim: int, num_envs: int,
               device: torch.device | str, seed: int = 0, action_bounds: tuple[float, float] | None = (-1.0, 1.0),
               inference_only: bool = False) -> PPO:
    """PPO on a :class:`PROPSRollouts` ring."""
    return PPO(cfg, obs_dims, action_dim, num_envs, device, seed=seed,
               source=lambda storage, model: PROPSRollouts(storage, model, cfg))


register_learner("props", config=PROPSConfig, build=make_props, loop="online", torchrun=True)
