"""SAC for massively parallel envs: the off-policy learner (act, process_step, update).

Haarnoja et al. 2018 (v2: learned temperature) with the large-batch machinery of FastSAC /
FastTD3: a critic ensemble (clipped double-Q or ensemble mean), an optional C51 critic, LayerNorm,
n-step returns from per-env replay rings, several updates per collection step, per-env
exploration levels, and an asymmetric critic. Truncated episodes bootstrap from the true last
observation (``info["final_obs"]``), never from the next episode's first one.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import torch

from ctrl_rl import distributed
from ctrl_rl.algos.offpolicy_common import OffPolicyLearner
from ctrl_rl.algos.offpolicy_losses import (
    categorical_projection,
    categorical_td_loss,
    clipped_double_q,
    lowest_mean_distribution,
    polyak_update,
    sac_actor_loss,
    sac_critic_loss,
    soft_q_target,
    squashed_gaussian_sample,
    temperature_loss,
)
from ctrl_rl.algos.precision import update_precision
from ctrl_rl.algos.registry import register_learner
from ctrl_rl.config_offpolicy import SACConfig
from ctrl_rl.env import Obs
from ctrl_rl.nets.sac import SACModel
from ctrl_rl.storage.replay import ReplayBatch
from ctrl_rl.utils.cuda_graphs import CapturedStep
from ctrl_rl.utils.guards import check_finite

log = logging.getLogger(__name__)


class SAC(OffPolicyLearner[SACConfig, SACModel]):
    """Owns the actor, critics, temperature, their optimizers, the replay buffer and the update."""

    model_class = SACModel

    def _setup(self, seed: int, inference_only: bool) -> None:
        cfg, m = self.cfg, self.model
        capturable = cfg.cudagraphs and self.device.type == "cuda"  # Adam's step count stays on the GPU
        self.actor_optimizer = torch.optim.Adam(m.actor.parameters(), lr=cfg.actor_learning_rate, capturable=capturable)
        self.critic_optimizer = torch.optim.Adam(m.critic.parameters(), lr=cfg.critic_learning_rate,
                                                 capturable=capturable)
        self.log_alpha = torch.tensor(math.log(cfg.init_alpha), device=self.device, requires_grad=True)
        self.alpha_optimizer = torch.optim.Adam([self.log_alpha], lr=cfg.alpha_learning_rate, capturable=capturable)
        self.target_entropy = -cfg.target_entropy_scale * self.action_dim
        # Per-env exploration: env i samples with its std scaled by levels[i] (PQL's mixed exploration).
        self.exploration = torch.linspace(cfg.exploration_scale_min, cfg.exploration_scale_max, self.num_envs,
                                          device=self.device)[:, None]
        if not inference_only:
            self.replay = self._new_replay()
            log.info("%s", self.replay.describe())
        self.num_updates = 0
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(seed)
        step = torch.compile(self._update_step) if cfg.compile else self._update_step
        if cfg.cudagraphs:  # one graph with the actor step, one without
            graphs = {a: CapturedStep(lambda b, a=a: step(b, a), self.device, generators=[self.generator])
                      for a in (True, False)}
            self._update = lambda batch, update_actor: graphs[update_actor](batch)
        else:
            self._update = step

    @property
    def alpha(self) -> torch.Tensor:
        return self.log_alpha.detach().exp()

    # ------------------------------------------------------------------ collection
    @torch.no_grad()
    def act(self, obs: Obs) -> torch.Tensor:
        """Env actions for ``obs``: uniform random until ``learning_starts``, then the squashed
        Gaussian with each env's exploration level."""
        m = self.model
        actor_in, critic_in = self._observe(obs)
        if self.env_steps < self.cfg.learning_starts:
            squashed = self._uniform_actions(actor_in.shape[0], self.generator)
        else:
            mean, log_std = m.actor.distribution(actor_in)
            noise = torch.randn(mean.shape, generator=self.generator, device=self.device) * self.exploration
            squashed, _ = squashed_gaussian_sample(mean, log_std, noise)
        self._last = (actor_in, critic_in, squashed)
        return m.actor.to_env(squashed)

    @torch.no_grad()
    def process_step(self, next_obs: Obs, rewards: torch.Tensor, terminated: torch.Tensor,
                     truncated: torch.Tensor, info: dict[str, Any]) -> None:
        """Store the transition; where an episode ended, the next observation is ``final_obs``."""
        assert self.replay is not None and self._last is not None, "act() first (and not inference_only)"
        actor_in, critic_in, squashed = self._last
        self.replay.add(actor_in, critic_in, squashed, rewards, terminated, truncated,
                        *self._next_inputs(next_obs, info))
        self.env_steps += actor_in.shape[0] * distributed.world_size()  # all ranks step together

    # ------------------------------------------------------------------ update
    def update(self) -> dict[str, float]:
        """``num_updates`` gradient steps (none before ``learning_starts``); mean stats."""
        cfg = self.cfg
        assert self.replay is not None
        if self.env_steps < cfg.learning_starts or self.replay.num_sampleable == 0:
            return {"alpha": float(self.alpha), "buffer_size": float(len(self.replay))}
        totals: dict[str, torch.Tensor] = {}
        with update_precision(cfg, self.device):  # algo.tf32 / algo.autocast
            for _ in range(cfg.num_updates):
                batch = self.replay.sample(cfg.batch_size, self.generator)
                update_actor = self.num_updates % cfg.actor_update_every == 0
                stats = self._update(batch, update_actor)
                self.num_updates += 1
                for k, v in stats.items():
                    totals[k] = totals.get(k, 0.0) + v
        out = {k: float(v) / cfg.num_updates for k, v in totals.items()}
        if "actor" in out:  # the actor runs every actor_update_every steps only
            n_actor = sum(1 for i in range(self.num_updates - cfg.num_updates, self.num_updates)
                          if i % cfg.actor_update_every == 0)
            for k in ("actor", "alpha_loss", "entropy"):
                out[k] = float(totals[k]) / max(1, n_actor)
        out["alpha"] = float(self.alpha)
        out["buffer_size"] = float(len(self.replay))
        check_finite("loss/critic", torch.tensor(out["critic"]), "the SAC update",
                     hint="lower algo.critic_learning_rate, keep algo.normalize_obs=true, enable "
                          "algo.layer_norm, or check rewards for huge values")
        return out

    def _target(self, batch: ReplayBatch) -> torch.Tensor:
        """TD target: soft Bellman backup of the target critics (a projected distribution for C51)."""
        cfg, m = self.cfg, self.model
        mean, log_std = m.actor.distribution(batch.next_actor_obs)
        noise = torch.randn(mean.shape, generator=self.generator, device=self.device)
        next_a, next_logp = squashed_gaussian_sample(mean, log_std, noise)
        out = m.critic_target(m.critic_normalizer(batch.next_critic_obs), next_a)
        alpha = self.alpha
        if not cfg.distributional:
            next_q = clipped_double_q(out.squeeze(-1), cfg.critic_aggregation)
            return soft_q_target(batch.rewards, batch.discount, next_q, next_logp, alpha)
        probs = out.softmax(-1)
        probs = lowest_mean_distribution(probs, self.support) if cfg.critic_aggregation == "min" else probs.mean(0)
        # r + d (z - alpha logp) = (r - d alpha logp) + d z: the entropy bonus shifts the target support
        return categorical_projection(probs, batch.rewards - batch.discount * alpha * next_logp, batch.discount,
                                      cfg.v_min, cfg.v_max)

    def _update_step(self, batch: ReplayBatch, update_actor: bool) -> dict[str, torch.Tensor]:
        cfg, m = self.cfg, self.model
        critic_in = m.critic_normalizer(batch.critic_obs)
        with torch.no_grad():
            target = self._target(batch)
        out = m.critic(critic_in, batch.actions)
        if cfg.distributional:
            critic_loss = categorical_td_loss(out, target)
        else:
            critic_loss = sac_critic_loss(out.squeeze(-1), target)
        self._step(self.critic_optimizer, critic_loss, m.critic)
        stats = {"critic": critic_loss.detach(), "q_mean": self._q_values(out.detach()).mean()}
        if update_actor:
            mean, log_std = m.actor.distribution(batch.actor_obs)
            noise = torch.randn(mean.shape, generator=self.generator, device=self.device)
            actions, log_prob = squashed_gaussian_sample(mean, log_std, noise)
            q = clipped_double_q(self._q_values(m.critic(critic_in, actions)), cfg.critic_aggregation)
            actor_loss = sac_actor_loss(log_prob, q, self.alpha)
            self._step(self.actor_optimizer, actor_loss, m.actor)
            stats.update(actor=actor_loss.detach(), entropy=-log_prob.detach().mean())
            if cfg.autotune_alpha:
                alpha_loss = temperature_loss(self.log_alpha, log_prob.detach(), self.target_entropy)
                self._step(self.alpha_optimizer, alpha_loss, None)
                stats["alpha_loss"] = alpha_loss.detach()
            else:
                stats["alpha_loss"] = torch.zeros((), device=self.device)
        polyak_update(m.critic_target, m.critic, cfg.tau)
        return stats

    # ------------------------------------------------------------------ io
    def state_dict(self) -> dict[str, Any]:
        return {
            **super().state_dict(),
            "alpha_optimizer": self.alpha_optimizer.state_dict(),
            "log_alpha": self.log_alpha.detach().clone(),
            "num_updates": self.num_updates,
            "generator": self.generator.get_state(),
        }

    def load_state_dict(self, state: dict[str, Any], restore_rng: bool = True) -> None:
        """Restore a checkpoint; ``restore_rng=False`` for inference (eval/export on any device)."""
        super().load_state_dict(state, restore_rng)
        with torch.no_grad():
            self.log_alpha.copy_(state["log_alpha"])
        self.num_updates = state["num_updates"]
        if restore_rng:
            self.alpha_optimizer.load_state_dict(state["alpha_optimizer"])
            self._load_generators({"generator": self.generator}, state)



register_learner("sac", config=SACConfig, build=SAC, loop="online", torchrun=True)
