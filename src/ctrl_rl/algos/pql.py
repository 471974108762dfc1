"""Parallel Q-Learning (Li, Liu, Chen, Agrawal, ICML 2023): the three roles' units of work.

PQL splits off-policy learning into an *actor* (collects with the latest policy plus mixed
per-env exploration noise), a *V-learner* (n-step clipped double-Q critic updates from the
replay, TD3 target smoothing, optional C51) and a *P-learner* (deterministic policy gradient on
a state-only buffer against the V-learner's latest critic). This module holds each role's unit
(:meth:`PQL.act` + :meth:`PQL.process_step`, :meth:`PQL.update_critic`, :meth:`PQL.update_policy`);
``ctrl_rl.runners.pql`` runs them in threads or interleaved, at fixed ratios.

No module is shared mutably between roles: the role that trains a network is its only writer,
and other roles read a snapshot through a :class:`~ctrl_rl.algos.pql_concurrency.WeightBox`
(double-buffered, so a reader never sees half an update). The replay and state buffers are
guarded by a :class:`~ctrl_rl.algos.pql_concurrency.StreamLock`.
"""

from __future__ import annotations

import logging
from typing import Any

import torch
from torch import nn

from ctrl_rl.algos.offpolicy_common import OffPolicyLearner
from ctrl_rl.algos.offpolicy_losses import (
    categorical_projection,
    categorical_td_loss,
    clipped_double_q,
    deterministic_actor_loss,
    lowest_mean_distribution,
    polyak_update,
    sac_critic_loss,
    td3_target_policy_noise,
)
from ctrl_rl.algos.pql_concurrency import StatsSink, StreamLock, WeightBox
from ctrl_rl.algos.registry import register_learner
from ctrl_rl.config_offpolicy import PQLConfig
from ctrl_rl.env import Obs
from ctrl_rl.nets.deterministic import PQLModel
from ctrl_rl.storage.replay import ReplayBatch
from ctrl_rl.storage.state_buffer import StateBuffer
from ctrl_rl.utils.guards import check_finite

log = logging.getLogger(__name__)

ROLES = ("actor", "critic", "policy")
"""PQL's roles: actor (collection), V-learner (critic), P-learner (policy)."""


class PQL(OffPolicyLearner[PQLConfig, PQLModel]):
    """Owns PQL's networks, optimizers, buffers and weight boxes; each role calls its own methods."""

    model_class = PQLModel

    def _setup(self, seed: int, inference_only: bool) -> None:
        cfg, m = self.cfg, self.model
        self.actor_optimizer = torch.optim.AdamW(m.actor.net.parameters(), lr=cfg.actor_learning_rate,
                                                 weight_decay=cfg.weight_decay)
        self.critic_optimizer = torch.optim.AdamW(m.critic.parameters(), lr=cfg.critic_learning_rate,
                                                  weight_decay=cfg.weight_decay)
        # Mixed exploration (PQL §3.3): env i always explores with its own std, from nearly greedy to wide.
        self.noise_std = torch.linspace(cfg.noise_std_min, cfg.noise_std_max, self.num_envs,
                                        device=self.device)[:, None]
        self.counts = dict.fromkeys(ROLES, 0)
        """Units each role has done since learning started; the ratio controller counts them."""
        self.generators = {}
        for i, role in enumerate(ROLES):  # one stream of randomness per role: threads never share one
            self.generators[role] = torch.Generator(device=self.device)
            self.generators[role].manual_seed(seed * len(ROLES) + i)
        self.stats = StatsSink(self.device)
        self.states: StateBuffer | None = None
        if inference_only:
            return
        self.replay = self._new_replay()
        self.states = StateBuffer(cfg.state_buffer_size, self.num_envs, m.actor_dim, m.critic_dim, self.device,
                                  m.shares_obs)
        log.info("%s; state buffer: %d observations", self.replay.describe(), self.states.capacity)
        self.replay_lock, self.states_lock = StreamLock(self.device), StreamLock(self.device)
        # the normalizers as one module, so the actor role publishes both statistics in one snapshot
        self._normalizers = nn.ModuleDict({"actor": m.actor.normalizer, "critic": m.critic_normalizer})
        self.actor_box = WeightBox(m.actor.net, self.device)  # P-learner -> actor role
        self.target_box = WeightBox(m.actor_target, self.device)  # P-learner -> V-learner
        self.critic_box = WeightBox(m.critic, self.device)  # V-learner -> P-learner
        self.norm_box = WeightBox(self._normalizers, self.device)  # actor role -> both learners

    @property
    def learning_started(self) -> bool:
        """Whether the learners may run: warm-up done and both buffers can be sampled."""
        return (self.replay is not None and self.states is not None and self.env_steps >= self.cfg.learning_starts
                and self.replay.num_sampleable > 0 and len(self.states) > 0)

    # ------------------------------------------------------------------ actor role
    @torch.no_grad()
    def act(self, obs: Obs) -> torch.Tensor:
        """Env actions: uniform until ``learning_starts``, then ``clip(μ(s) + σ_i ε, -1, 1)`` with the
        latest published policy and env ``i``'s exploration std ``σ_i``."""
        m = self.model
        actor_in, critic_in = self._observe(obs)
        self.norm_box.publish(self._normalizers)
        gen = self.generators["actor"]
        if self.env_steps < self.cfg.learning_starts:
            action = self._uniform_actions(actor_in.shape[0], gen)
        else:
            with self.actor_box.read() as net:
                mean = torch.tanh(net(m.actor.normalizer(actor_in)))
            noise = torch.randn(mean.shape, generator=gen, device=self.device) * self.noise_std
            action = (mean + noise).clamp(-1.0, 1.0)
        self._last = (actor_in, critic_in, action)
        return m.actor.to_env(action)

    @torch.no_grad()
    def process_step(self, next_obs: Obs, rewards: torch.Tensor, terminated: torch.Tensor,
                     truncated: torch.Tensor, info: dict[str, Any]) -> None:
        """Store the transition (next obs = ``final_obs`` where an episode ended) and the state."""
        assert self.replay is not None and self.states is not None and self._last is not None, \
            "act() first (and not inference_only)"
        actor_in, critic_in, action = self._last
        with self.replay_lock:
            self.replay.add(actor_in, critic_in, action, rewards, terminated, truncated,
                            *self._next_inputs(next_obs, info))
        with self.states_lock:
            self.states.add(actor_in, critic_in)
        self.env_steps += actor_in.shape[0]

    # ------------------------------------------------------------------ V-learner
    def update_critic(self) -> None:
        """One critic step on an n-step replay batch; publishes the new critic to the P-learner."""
        cfg, m = self.cfg, self.model
        assert self.replay is not None
        with self.replay_lock:
            batch = self.replay.sample(cfg.batch_size, self.generators["critic"])
        with self.norm_box.read() as norms:
            critic_in = norms["critic"](batch.critic_obs)
            with torch.no_grad(), self.target_box.read() as target_net:
                target = self._td_target(batch, norms, target_net)
        out = m.critic(critic_in, batch.actions)
        loss = categorical_td_loss(out, target) if cfg.distributional else sac_critic_loss(out.squeeze(-1), target)
        self._step(self.critic_optimizer, loss, m.critic)
        polyak_update(m.critic_target, m.critic, cfg.tau)
        self.critic_box.publish(m.critic)
        self.stats.add("critic", {"critic": loss.detach(), "q_mean": self._q_values(out.detach()).mean()})

    def _td_target(self, batch: ReplayBatch, norms: nn.ModuleDict, target_net: nn.Module) -> torch.Tensor:
        """``r + γ^m (1 - d) min_i Q̄_i(s', clip(μ̄(s') + clip(ε), -1, 1))`` (TD3), or its C51 projection."""
        cfg, m = self.cfg, self.model
        next_a = torch.tanh(target_net(norms["actor"](batch.next_actor_obs)))
        next_a = td3_target_policy_noise(next_a, cfg.target_noise, cfg.target_noise_clip, self.generators["critic"])
        out = m.critic_target(norms["critic"](batch.next_critic_obs), next_a)
        if not cfg.distributional:
            return batch.rewards + batch.discount * clipped_double_q(out.squeeze(-1), "min")
        probs = lowest_mean_distribution(out.softmax(-1), self.support)
        return categorical_projection(probs, batch.rewards, batch.discount, cfg.v_min, cfg.v_max)

    # ------------------------------------------------------------------ P-learner
    def update_policy(self) -> None:
        """One deterministic policy-gradient step against the latest published critic; publishes the
        policy (to the actor role) and the target policy (to the V-learner)."""
        cfg, m = self.cfg, self.model
        assert self.states is not None
        with self.states_lock:
            actor_obs, critic_obs = self.states.sample(cfg.batch_size, self.generators["policy"])
        with self.norm_box.read() as norms, self.critic_box.read() as critic:
            actions = torch.tanh(m.actor.net(norms["actor"](actor_obs)))
            q = clipped_double_q(self._q_values(critic(norms["critic"](critic_obs), actions)), "min")
            loss = deterministic_actor_loss(q)
            self._step(self.actor_optimizer, loss, m.actor.net)  # backward inside the lease: it reads the critic
        polyak_update(m.actor_target, m.actor.net, cfg.tau)
        self.actor_box.publish(m.actor.net)
        self.target_box.publish(m.actor_target)
        self.stats.add("policy", {"actor": loss.detach()})

    def pop_stats(self) -> dict[str, float]:
        """Mean losses since the last call, plus buffer fill (called once per iteration)."""
        out = self.stats.pop()
        if "critic" in out:
            check_finite("loss/critic", torch.tensor(out["critic"]), "the PQL V-learner",
                         hint="lower algo.critic_learning_rate, keep algo.normalize_obs=true, or check rewards "
                              "for huge values")
        if self.replay is not None:
            out["buffer_size"] = float(len(self.replay))
        return out

    # ------------------------------------------------------------------ io
    def publish_all(self) -> None:
        """Refill every weight box from the model (after loading a checkpoint)."""
        if self.replay is None:
            return
        m = self.model
        self.actor_box.publish(m.actor.net)
        self.target_box.publish(m.actor_target)
        self.critic_box.publish(m.critic)
        self.norm_box.publish(self._normalizers)

    def state_dict(self) -> dict[str, Any]:
        """Everything to resume exactly; call while the learners are parked (the runner pauses them)."""
        return {
            **super().state_dict(),
            "counts": dict(self.counts),
            "generators": {role: g.get_state() for role, g in self.generators.items()},
        }

    def replay_state_dict(self) -> dict[str, Any]:
        """The replay and state buffers (saved beside the checkpoint by the runner, see ``Runner.save``)."""
        assert self.states is not None
        return {**super().replay_state_dict(), "states": self.states.state_dict()}

    def load_replay_state_dict(self, state: dict[str, Any]) -> None:
        super().load_replay_state_dict(state)
        assert self.states is not None
        self.states.load_state_dict(state["states"])

    def load_state_dict(self, state: dict[str, Any], restore_rng: bool = True) -> None:
        """Restore a checkpoint; ``restore_rng=False`` for inference (eval/export on any device)."""
        super().load_state_dict(state, restore_rng)
        self.counts.update(state["counts"])
        self.publish_all()
        if restore_rng:
            self._load_generators(self.generators, state["generators"])


register_learner("pql", config=PQLConfig, build=PQL, loop="pql")
