"""Parallel Q-Learning (Li, Liu, Chen, Agrawal, ICML 2023): the three roles' units of work.

PQL splits off-policy learning into an *actor* (collects with the latest policy plus mixed
per-env exploration noise), a *V-learner* (n-step clipped double-Q critic updates from the
replay, TD3 target smoothing, optional C51) and a *P-learner* (deterministic policy gradient on
a state-only buffer against the V-learner's latest critic). This module holds each role's unit
(:meth:`PQL.act` + :meth:`PQL.process_step`, :meth:`PQL.update_critic`, :meth:`PQL.update_policy`);
``ctrl_rl.runners.pql`` runs them in threads or interleaved, at fixed ratios.

No module is shared mutably between roles: the role that trains a network is its only writer,
and other roles read a snapshot through a :class:`WeightBox` (double-buffered, so a reader never
sees half an update). The replay and state buffers are guarded by a :class:`StreamLock`.
"""

from __future__ import annotations

import copy
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

from ctrl_rl.algos.offpolicy_losses import (
    categorical_mean,
    categorical_projection,
    categorical_support,
    categorical_td_loss,
    clipped_double_q,
    deterministic_actor_loss,
    lowest_mean_distribution,
    polyak_update,
    sac_critic_loss,
    td3_target_policy_noise,
)
from ctrl_rl.config import PQLConfig
from ctrl_rl.env import Obs
from ctrl_rl.nets.deterministic import PQLModel
from ctrl_rl.storage.replay import ReplayBatch, ReplayBuffer
from ctrl_rl.utils.guards import check_finite

log = logging.getLogger(__name__)

ROLES = ("actor", "critic", "policy")
"""PQL's roles: actor (collection), V-learner (critic), P-learner (policy)."""


def _stream(device: torch.device) -> torch.cuda.Stream | None:
    return torch.cuda.current_stream(device) if device.type == "cuda" else None


class StreamLock:
    """A mutex that also orders GPU work: entering makes the caller's CUDA stream wait for the
    kernels the previous holder queued inside the lock, and exiting marks where its own end.

    A plain lock is not enough on CUDA: kernels run after the Python code that queued them, so
    without the event a sampler on one stream could read replay rows the actor's stream is still
    writing. On CPU it is a plain lock.
    """

    def __init__(self, device: torch.device):
        self.device = device
        self._lock = threading.Lock()
        self._event = torch.cuda.Event() if device.type == "cuda" else None

    def __enter__(self) -> StreamLock:
        self._lock.acquire()
        if self._event is not None:
            _stream(self.device).wait_event(self._event)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._event is not None:
            self._event.record(_stream(self.device))
        self._lock.release()


class WeightBox:
    """Tear-free hand-off of one network from the role that trains it to the roles that read it.

    The box holds frozen copies ("slots") of the module. :meth:`publish` copies the writer's
    fresh weights into a spare slot nobody is reading, then swaps the ``current`` reference under
    a lock; :meth:`read` leases the current slot for the duration of a ``with`` block. A slot is
    never written while leased, so a reader sees one version from start to end. Two slots suffice
    while readers release quickly; a third is made only when a reader still holds the spare (at
    most ``readers + 2`` ever exist). On CUDA, events order the copy after the readers' kernels
    and the readers' kernels after the copy.
    """

    def __init__(self, module: nn.Module, device: torch.device):
        self.device = torch.device(device)
        self._lock = threading.Lock()
        self._slots: list[nn.Module] = [self._frozen_copy(module)]
        self._leases = [0]
        self._ready: list[Any] = [None]  # CUDA event: the slot's copy finished
        self._released: list[list[Any]] = [[]]  # CUDA events: readers' last use of the slot
        self._current = 0
        self.version = 0
        """Number of publishes so far (diagnostics and tests)."""

    @staticmethod
    def _frozen_copy(module: nn.Module) -> nn.Module:
        return copy.deepcopy(module).requires_grad_(False)

    @staticmethod
    def _tensors(module: nn.Module) -> list[torch.Tensor]:
        return [*module.parameters(), *module.buffers()]

    @property
    def num_slots(self) -> int:
        return len(self._slots)

    @torch.no_grad()
    def publish(self, module: nn.Module) -> None:
        """Make ``module``'s current weights what readers get from now on (call from the writer only)."""
        with self._lock:
            spare = next((i for i in range(len(self._slots)) if i != self._current and self._leases[i] == 0), None)
            if spare is None:  # every other slot is leased: grow rather than wait for a reader
                self._slots.append(self._frozen_copy(module))
                self._leases.append(0)
                self._ready.append(None)
                self._released.append([])
                spare = len(self._slots) - 1
            released, self._released[spare] = self._released[spare], []
        # Outside the lock: readers only lease the current slot, so nobody can start reading the spare.
        stream = _stream(self.device)
        for event in released:
            stream.wait_event(event)
        torch._foreach_copy_(self._tensors(self._slots[spare]), self._tensors(module))
        if stream is not None:
            self._ready[spare] = torch.cuda.Event()
            self._ready[spare].record(stream)
        with self._lock:
            self._current = spare
            self.version += 1

    @contextmanager
    def read(self) -> Iterator[nn.Module]:
        """Lease the newest published copy; do not keep references to it past the block."""
        with self._lock:
            slot = self._current
            self._leases[slot] += 1
            ready = self._ready[slot]
        stream = _stream(self.device)
        try:
            if ready is not None:
                stream.wait_event(ready)
            yield self._slots[slot]
        finally:
            event = None
            if stream is not None:
                event = torch.cuda.Event()
                event.record(stream)
            with self._lock:
                self._leases[slot] -= 1
                if event is not None:
                    self._released[slot].append(event)


class StateBuffer:
    """The P-learner's state-only ring (PQL §3.2): observations without actions or rewards.

    The policy objective ``max_a Q(s, μ(s))`` needs states only, so the P-learner samples its own
    buffer instead of contending with the V-learner for the replay. Capacity is rounded down to a
    whole number of env steps; each :meth:`add` writes one row per env.
    """

    def __init__(self, capacity: int, num_envs: int, actor_dim: int, critic_dim: int, device: torch.device,
                 share_critic_obs: bool):
        self.capacity = capacity // num_envs * num_envs
        if self.capacity == 0:
            raise ValueError(f"state buffer of {capacity} observations cannot hold one step of {num_envs} envs: "
                             f"raise algo.state_buffer_size")
        self.num_envs, self.share_critic_obs = num_envs, share_critic_obs
        self.actor_obs = torch.zeros(self.capacity, actor_dim, device=device)
        self.critic_obs = self.actor_obs if share_critic_obs else torch.zeros(self.capacity, critic_dim, device=device)
        self.ptr, self.size = 0, 0

    def add(self, actor_obs: torch.Tensor, critic_obs: torch.Tensor) -> None:
        p, n = self.ptr, self.num_envs
        self.actor_obs[p:p + n] = actor_obs
        if not self.share_critic_obs:
            self.critic_obs[p:p + n] = critic_obs
        self.ptr = (p + n) % self.capacity
        self.size = min(self.size + n, self.capacity)

    def __len__(self) -> int:
        return self.size

    def sample(self, batch_size: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """``(actor_obs, critic_obs)`` of ``batch_size`` stored states, uniform with replacement."""
        idx = torch.randint(self.size, (batch_size,), generator=generator, device=generator.device)
        idx = idx.to(self.actor_obs.device)
        actor_obs = self.actor_obs.index_select(0, idx)
        return actor_obs, actor_obs if self.share_critic_obs else self.critic_obs.index_select(0, idx)

    def state_dict(self) -> dict[str, Any]:
        rows = self.size  # the ring is filled from row 0, so the written rows are [0, size)
        return {"ptr": self.ptr, "size": self.size, "actor_obs": self.actor_obs[:rows].clone(),
                "critic_obs": None if self.share_critic_obs else self.critic_obs[:rows].clone()}

    def load_state_dict(self, d: dict[str, Any]) -> None:
        if d["size"] > self.capacity:
            raise ValueError(f"state buffer checkpoint holds {d['size']} observations, this buffer {self.capacity}: "
                             "resume with the same algo.state_buffer_size and env.num_envs")
        self.actor_obs[: d["size"]].copy_(d["actor_obs"])
        if not self.share_critic_obs:
            self.critic_obs[: d["size"]].copy_(d["critic_obs"])
        self.ptr, self.size = d["ptr"], d["size"]


class _StatsSink:
    """Per-update statistics summed on each learner's stream, read by the logging thread.

    Stays on the device (no host sync per update); on CUDA an event per learner lets the reader
    wait for exactly the kernels that produced the sums it takes.
    """

    def __init__(self, device: torch.device):
        self.device = device
        self._lock = threading.Lock()
        self._sums: dict[str, torch.Tensor] = {}
        self._counts: dict[str, int] = {}
        self._events: dict[str, Any] = {}

    def add(self, role: str, stats: dict[str, torch.Tensor]) -> None:
        with self._lock:
            for k, v in stats.items():
                self._sums[k] = self._sums[k] + v if k in self._sums else v.clone()
                self._counts[k] = self._counts.get(k, 0) + 1
            if self.device.type == "cuda":
                self._events[role] = torch.cuda.Event()
                self._events[role].record(_stream(self.device))

    def pop(self) -> dict[str, float]:
        """Means since the last pop (empty before the learners start)."""
        with self._lock:
            sums, counts, events = self._sums, self._counts, self._events
            self._sums, self._counts, self._events = {}, {}, {}
        for event in events.values():
            event.synchronize()
        return {k: float(v) / counts[k] for k, v in sums.items()}


class PQL:
    """Owns PQL's networks, optimizers, buffers and weight boxes; each role calls its own methods."""

    def __init__(self, cfg: PQLConfig, obs_dims: dict[str, int], action_dim: int, num_envs: int,
                 device: torch.device | str, seed: int = 0, action_bounds: tuple[float, float] | None = (-1.0, 1.0),
                 inference_only: bool = False):
        self.cfg = cfg
        self.device = torch.device(device)
        self.num_envs, self.action_dim = num_envs, action_dim
        self.model = PQLModel(obs_dims, action_dim, cfg, action_bounds).to(self.device)
        m = self.model
        self.actor_optimizer = torch.optim.AdamW(m.actor.net.parameters(), lr=cfg.actor_learning_rate,
                                                 weight_decay=cfg.weight_decay)
        self.critic_optimizer = torch.optim.AdamW(m.critic.parameters(), lr=cfg.critic_learning_rate,
                                                  weight_decay=cfg.weight_decay)
        self.support = categorical_support(cfg.v_min, cfg.v_max, cfg.num_atoms, device=self.device)
        # Mixed exploration (PQL §3.3): env i always explores with its own std, from nearly greedy to wide.
        self.noise_std = torch.linspace(cfg.noise_std_min, cfg.noise_std_max, num_envs, device=self.device)[:, None]
        self.env_steps = 0
        self.counts = dict.fromkeys(ROLES, 0)
        """Units each role has done since learning started; the ratio controller counts them."""
        self.generators = {}
        for i, role in enumerate(ROLES):  # one stream of randomness per role: threads never share one
            self.generators[role] = torch.Generator(device=self.device)
            self.generators[role].manual_seed(seed * len(ROLES) + i)
        self.stats = _StatsSink(self.device)
        self.replay: ReplayBuffer | None = None
        self.states: StateBuffer | None = None
        self._last: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None
        if inference_only:
            return
        actor_dim = sum(obs_dims[g] for g in m.actor_obs)
        critic_dim = sum(obs_dims[g] for g in m.critic_obs)
        shared = m.actor_obs == m.critic_obs
        self.replay = ReplayBuffer(num_envs, cfg.buffer_size, actor_dim, critic_dim, action_dim, self.device,
                                   n_step=cfg.n_step, gamma=cfg.gamma, share_critic_obs=shared)
        self.states = StateBuffer(cfg.state_buffer_size, num_envs, actor_dim, critic_dim, self.device, shared)
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
        actor_in, critic_in = m.actor_input(obs), m.critic_input(obs)
        m.update_normalizers(actor_in, critic_in)
        self.norm_box.publish(self._normalizers)
        gen = self.generators["actor"]
        if self.env_steps < self.cfg.learning_starts:
            action = torch.rand(actor_in.shape[0], self.action_dim, generator=gen, device=self.device) * 2 - 1
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
        m = self.model
        actor_in, critic_in, action = self._last
        final = info.get("final_obs", next_obs)
        with self.replay_lock:
            self.replay.add(actor_in, critic_in, action, rewards, terminated, truncated,
                            m.actor_input(final), m.critic_input(final))
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

    def _q_values(self, out: torch.Tensor) -> torch.Tensor:
        """``[E, B]`` expected values of the critics' outputs."""
        return categorical_mean(out.softmax(-1), self.support) if self.cfg.distributional else out.squeeze(-1)

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

    def _step(self, optimizer: torch.optim.Optimizer, loss: torch.Tensor, module: nn.Module) -> None:
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.cfg.max_grad_norm > 0:
            nn.utils.clip_grad_norm_(module.parameters(), self.cfg.max_grad_norm)
        optimizer.step()

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

    # ------------------------------------------------------------------ inference / io
    def inference_policy(self) -> nn.Module:
        """The deterministic policy (normalizer + MLP + tanh, in env units): what export runs."""
        return self.model.actor

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
            "model": self.model.state_dict(),
            "actor_optimizer": self.actor_optimizer.state_dict(),
            "critic_optimizer": self.critic_optimizer.state_dict(),
            "env_steps": self.env_steps,
            "counts": dict(self.counts),
            "generators": {role: g.get_state() for role, g in self.generators.items()},
        }

    def replay_state_dict(self) -> dict[str, Any]:
        """The replay and state buffers (saved beside the checkpoint by the runner, see ``Runner.save``)."""
        assert self.replay is not None and self.states is not None
        return {"buffer": self.replay.state_dict(), "states": self.states.state_dict(), "last": self._last}

    def load_replay_state_dict(self, state: dict[str, Any]) -> None:
        assert self.replay is not None and self.states is not None
        self.replay.load_state_dict(state["buffer"])
        self.states.load_state_dict(state["states"])
        last = state.get("last")
        self._last = None if last is None else tuple(t.to(self.device) for t in last)

    def load_state_dict(self, state: dict[str, Any], restore_rng: bool = True) -> None:
        """Restore a checkpoint; ``restore_rng=False`` for inference (eval/export on any device)."""
        self.model.load_state_dict(state["model"])
        self.env_steps = state["env_steps"]
        self.counts.update(state["counts"])
        self.publish_all()
        if not restore_rng:
            return
        self.actor_optimizer.load_state_dict(state["actor_optimizer"])
        self.critic_optimizer.load_state_dict(state["critic_optimizer"])
        try:
            for role, g in self.generators.items():
                g.set_state(state["generators"][role])
        except RuntimeError:
            log.warning("PQL RNG states come from another device type: reseeded")
