"""Uni-O4's offline phase: ensemble BC, IQL Q/V, a dynamics ensemble, and BPPO steps accepted by OPE.

Everything here trains on dataset tensors held on the training device; nothing touches the env.
``UniO4`` (``ctrl_rl/algos/uni_o4.py``) drives it and hands its result to online PPO.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch
from torch import nn

from ctrl_rl.algos.losses import ppo_surrogate_loss
from ctrl_rl.algos.offline_losses import (
    decayed_clip,
    ensemble_bc_loss,
    expectile_loss,
    gaussian_nll_loss,
    td_target,
    weighted_advantage,
)
from ctrl_rl.algos.offpolicy_losses import polyak_update
from ctrl_rl.config_offline import UniO4Config
from ctrl_rl.nets.actor_critic import GaussianActor, ValueCritic
from ctrl_rl.nets.distributions import censored_gaussian_log_prob, gaussian_entropy, gaussian_log_prob
from ctrl_rl.nets.dynamics import DynamicsEnsemble
from ctrl_rl.nets.normalizer import EmpiricalNormalizer
from ctrl_rl.nets.sac import QEnsemble
from ctrl_rl.storage.dataset import Dataset, DatasetError
from ctrl_rl.storage.sampler import DeviceSampler

BATCH_KEYS = ("observations", "actions", "rewards", "next_observations", "terminals")
HOLDOUT_FRACTION = 0.1
"""Share of transitions (at most 5000) the dynamics ensemble never trains on: its elites are chosen there."""


def transitions(data: Dataset) -> Dataset:
    """The rows of ``data`` with a known next state, ``next_observations`` filled in.

    Without stored ``next_observations`` the next row of the same episode is the next state, and
    a row that ends its episode by a timeout or by the file's end is dropped (no next state; a
    terminal row needs none: its target does not bootstrap).
    """
    if data.next_observations is not None:
        return data
    obs, term = data.observations, data.terminals
    keep = (~(data.episode_ends() & ~term)).nonzero()[0]
    if len(keep) == 0:
        raise DatasetError("dataset: no transition has a next state (store next_observations)")
    shifted = np.concatenate([obs[1:], obs[-1:]])  # the last row's "next" only serves a terminal
    return Dataset(observations=obs[keep], actions=data.actions[keep], rewards=data.rewards[keep],
                   terminals=term[keep], timeouts=data.timeouts[keep], next_observations=shifted[keep])


def rows(data: Dataset, index: np.ndarray) -> Dataset:
    """The rows ``index`` of ``data`` (transitions, ``next_observations`` present)."""
    return Dataset(observations=data.observations[index], actions=data.actions[index], rewards=data.rewards[index],
                   terminals=data.terminals[index], timeouts=data.timeouts[index],
                   next_observations=data.next_observations[index])


OPTIMIZERS = ("bc_opt", "bppo_opt", "q_opt", "v_opt", "dyn_opt")


class UniO4Offline(nn.Module):
    """The offline learners' networks and optimizers (a module, so one ``state_dict`` holds the nets)."""

    sentinel_buffers = ("best_scores",)
    """Buffers that hold -inf by design (no OPE score yet), not a divergence (``utils/guards.py``)."""

    def __init__(self, cfg: UniO4Config, obs_dim: int, action_dim: int, device: torch.device,
                 action_bounds: tuple[float, float] | None, generator: torch.Generator, seed: int = 0):
        super().__init__()
        self.cfg, self.device, self.g = cfg, device, generator
        self.bounds = action_bounds
        self.actors = nn.ModuleList([
            GaussianActor(obs_dim, action_dim, cfg.actor_hidden, cfg.activation, cfg.init_std, cfg.std_type,
                          cfg.min_std, cfg.max_std, cfg.normalize_obs) for _ in range(cfg.num_policies)])
        self.accepted = copy.deepcopy(self.actors).requires_grad_(False)
        """Each member's last accepted policy: BPPO's π_old, and what the offline phase hands over."""
        self.q_normalizer = EmpiricalNormalizer(obs_dim) if cfg.normalize_obs else nn.Identity()
        self.q = QEnsemble(obs_dim, action_dim, cfg.q_hidden, cfg.activation, 2)
        self.q_target = copy.deepcopy(self.q).requires_grad_(False)
        self.v = ValueCritic(obs_dim, cfg.critic_hidden, cfg.activation, cfg.normalize_obs)
        self.dynamics = DynamicsEnsemble(obs_dim, action_dim, cfg.dynamics_hidden, cfg.activation,
                                         cfg.dynamics_members, cfg.dynamics_elites)
        self.register_buffer("best_scores", torch.full((cfg.num_policies,), -torch.inf))
        self.to(device)
        self.bc_opt = torch.optim.Adam(self.actors.parameters(), lr=cfg.bc_learning_rate)
        self.bppo_opt = torch.optim.Adam(self.actors.parameters(), lr=cfg.bppo_learning_rate)
        self.q_opt = torch.optim.Adam(self.q.parameters(), lr=cfg.value_learning_rate)
        self.v_opt = torch.optim.Adam(self.v.parameters(), lr=cfg.value_learning_rate)
        self.dyn_opt = torch.optim.Adam(self.dynamics.parameters(), lr=cfg.dynamics_learning_rate)
        self.index_generator = torch.Generator().manual_seed(seed)
        """Draws dataset rows (on the host, so batches are the same on any device; checkpointed)."""
        self.sampler: DeviceSampler | None = None
        self.holdout: dict[str, torch.Tensor] = {}

    # ------------------------------------------------------------------ data
    def set_dataset(self, data: Dataset, fit_normalizers: bool) -> None:
        """Hold out ``HOLDOUT_FRACTION`` of the transitions (the dynamics elites are chosen there) and
        sample the rest through a :class:`DeviceSampler`: on the device when it fits
        ``algo.dataset_device_mb`` (``4 N (2 obs_dim + action_dim + 1) + 2 N`` bytes), else streamed
        batch by batch from host memory. Normalizers are fitted to the data on a fresh start."""
        data = transitions(data)
        n = len(data)
        perm = np.random.default_rng(0).permutation(n)
        n_hold = min(int(HOLDOUT_FRACTION * n), 5000)
        hold, train = rows(data, perm[:n_hold]), rows(data, perm[n_hold:])
        self.holdout = {k: torch.as_tensor(getattr(hold, k), device=self.device) for k in BATCH_KEYS}
        limit = None if self.cfg.dataset_device_mb < 0 else int(self.cfg.dataset_device_mb * 2**20)
        self.sampler = DeviceSampler(train, self.device, limit, self.index_generator)
        if fit_normalizers:
            obs = torch.as_tensor(train.observations, device=self.device)
            nxt, rew = (torch.as_tensor(a, device=self.device) for a in (train.next_observations, train.rewards))
            for module in [*(a.normalizer for a in self.actors), self.q_normalizer, self.v.normalizer]:
                if isinstance(module, EmpiricalNormalizer):
                    module.count.zero_()
                    module.update(obs)
            self.dynamics.fit_normalizers(obs, nxt, rew)
            self.accepted.load_state_dict(self.actors.state_dict())

    def _batch(self, size: int | None = None) -> dict[str, torch.Tensor]:
        b = self.sampler.sample(size or self.cfg.batch_size)
        return {k: b[k] for k in BATCH_KEYS}

    def _q(self, obs: torch.Tensor, actions: torch.Tensor, target: bool = False) -> torch.Tensor:
        """``min(Q_1, Q_2)`` (target nets when ``target``): ``[B]``."""
        q = (self.q_target if target else self.q)(self.q_normalizer(obs), actions)
        return q.min(dim=0).values.squeeze(-1)

    # ------------------------------------------------------------------ phase 1: BC, Q/V, dynamics
    def pretrain_step(self) -> dict[str, torch.Tensor]:
        """One gradient step of every offline model on its own minibatch."""
        cfg, b = self.cfg, self._batch()
        obs, actions = b["observations"], b["actions"]
        # V: expectile of the target Q over the data's actions; Q: r + γ V(s')
        with torch.no_grad():
            q_data = self._q(obs, actions, target=True)
            target = td_target(b["rewards"], b["terminals"], self.v(b["next_observations"]), cfg.gamma)
        v_loss = expectile_loss(q_data - self.v(obs), cfg.expectile)
        q_pred = self.q(self.q_normalizer(obs), actions).squeeze(-1)  # [2, B]
        q_loss = (q_pred - target).square().mean(-1).sum()
        # ensemble BC on the same rows
        censor = self.bounds if cfg.censor_bounds else None  # actions at the bounds were clipped
        log_probs = torch.stack([censored_gaussian_log_prob(actions, *a.distribution(obs), censor)
                                 for a in self.actors])
        bc_loss = ensemble_bc_loss(log_probs, cfg.bc_alpha).sum()
        # dynamics: each member its own bootstrap rows
        d = {k: v.reshape(cfg.dynamics_members, cfg.batch_size, *v.shape[1:])
             for k, v in self._batch(cfg.dynamics_members * cfg.batch_size).items()}
        mean, log_var, logit = self.dynamics(d["observations"], d["actions"])
        dyn = self.dynamics
        nll = gaussian_nll_loss(mean, log_var, dyn.targets(d["observations"], d["next_observations"],
                                                          d["rewards"])).sum()
        term = nn.functional.binary_cross_entropy_with_logits(logit, d["terminals"].float())
        dyn_loss = nll + term + 0.01 * (dyn.max_log_var.sum() - dyn.min_log_var.sum())
        for opt, loss in ((self.v_opt, v_loss), (self.q_opt, q_loss), (self.bc_opt, bc_loss), (self.dyn_opt, dyn_loss)):
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        polyak_update(self.q_target, self.q, cfg.target_tau)
        return {"value": v_loss.detach(), "q": q_loss.detach() / 2, "bc": bc_loss.detach() / cfg.num_policies,
                "dynamics": nll.detach() / cfg.dynamics_members}

    @torch.no_grad()
    def finish_pretraining(self) -> dict[str, float]:
        """Elites by held-out error; the cloned policies become the accepted ones, scored by OPE."""
        h = self.holdout
        err = self.dynamics.select_elites(h["observations"], h["actions"], h["next_observations"], h["rewards"])
        self.accepted.load_state_dict(self.actors.state_dict())
        self.best_scores.copy_(torch.stack([self.ope_score(a) for a in self.accepted]))
        return {"dynamics_holdout_mse": float(err[self.dynamics.elites].mean())}

    # ------------------------------------------------------------------ phase 2: BPPO + OPE
    def improve_step(self, step: int) -> dict[str, torch.Tensor]:
        """BPPO step ``step`` of every member against its accepted policy (the clip decays with it)."""
        cfg = self.cfg
        obs = self._batch()["observations"]
        clip = max(decayed_clip(cfg.bppo_clip, cfg.bppo_clip_decay, step), 1e-6)
        loss = torch.zeros((), device=self.device)
        stats: dict[str, torch.Tensor] = {"surrogate": loss.detach(), "entropy": loss.detach()}
        with torch.no_grad():
            v = self.v(obs)
        for actor, old in zip(self.actors, self.accepted, strict=True):
            with torch.no_grad():
                old_mean, old_std = old.distribution(obs)
                a = old_mean + old_std * torch.randn(old_mean.shape, generator=self.g, device=self.device)
                # Q of the action the env would execute: outside the bounds Q only extrapolates
                adv = self._q(obs, a if self.bounds is None else a.clamp(*self.bounds)) - v
                adv = weighted_advantage((adv - adv.mean()) / (adv.std() + 1e-8), cfg.omega)
                old_lp = gaussian_log_prob(a, old_mean, old_std)
            mean, std = actor.distribution(obs)
            surrogate, _, _ = ppo_surrogate_loss(gaussian_log_prob(a, mean, std), old_lp, adv, clip)
            entropy = gaussian_entropy(std).mean()
            loss = loss + surrogate - cfg.bppo_entropy_coef * entropy
            stats = {"surrogate": stats["surrogate"] + surrogate.detach() / cfg.num_policies,
                     "entropy": stats["entropy"] + entropy.detach() / cfg.num_policies}
        self.bppo_opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(self.actors.parameters(), 0.5)
        self.bppo_opt.step()
        return {**stats, "bppo_clip": torch.tensor(clip)}

    @torch.no_grad()
    def ope_score(self, actor: nn.Module) -> torch.Tensor:
        """Offline policy evaluation: mean ``Q(s, π(s))`` over ``ope_horizon`` steps of ``π``'s
        deterministic actions in the dynamics model, from ``ope_states`` dataset states (a state
        the model calls terminal ends its rollout)."""
        cfg = self.cfg
        obs = self._batch(cfg.ope_states)["observations"]
        alive = torch.ones(len(obs), dtype=torch.bool, device=self.device)
        total, count = torch.zeros((), device=self.device), torch.zeros((), device=self.device)
        for _ in range(cfg.ope_horizon):
            a = actor(obs)
            if self.bounds is not None:
                a = a.clamp(*self.bounds)
            total += torch.where(alive, self._q(obs, a), 0.0).sum()
            count += alive.sum()
            obs, _, done = self.dynamics.step(obs, a, self.g)
            alive &= ~done
        return total / count.clamp_min(1)

    @torch.no_grad()
    def accept_improved(self) -> tuple[int, torch.Tensor]:
        """Score every member; those that beat their best become their accepted policy.
        Returns how many were accepted and the scores."""
        scores = torch.stack([self.ope_score(a) for a in self.actors])
        better = scores > self.best_scores
        for i in better.nonzero().flatten().tolist():
            self.accepted[i].load_state_dict(self.actors[i].state_dict())
        self.best_scores.copy_(torch.where(better, scores, self.best_scores))
        return int(better.sum()), scores

    def optim_state_dict(self) -> dict[str, Any]:
        """Optimizers and the row sampler's RNG (what ``state_dict`` of the module leaves out)."""
        out = {k: getattr(self, k).state_dict() for k in OPTIMIZERS}
        return {**out, "index_generator": self.index_generator.get_state()}

    def load_optim_state_dict(self, state: dict[str, Any]) -> None:
        for k in OPTIMIZERS:
            getattr(self, k).load_state_dict(state[k])
        self.index_generator.set_state(state["index_generator"])
