"""PPO: the on-policy learner (act, process_step, update) with rsl_rl's feature set.

Beyond rsl_rl: truncated episodes bootstrap from ``V(final_obs)`` (the true last state),
every epoch draws a fresh minibatch permutation, values can be learned in a normalized
target space, and the critic is evaluated once per rollout in two large batches instead
of once per env step.
"""

from __future__ import annotations

import logging
from typing import Any

import torch
from torch import nn

from ctrl_rl import distributed
from ctrl_rl.algos.diagnostics import sampling_error
from ctrl_rl.algos.graphs import CapturedStep
from ctrl_rl.algos.losses import (
    adaptive_kl_learning_rate,
    compute_gae,
    explained_variance,
    ppo_surrogate_loss,
    value_loss,
)
from ctrl_rl.config import PPOConfig
from ctrl_rl.env import Obs
from ctrl_rl.nets.actor_critic import ActorCritic
from ctrl_rl.nets.distributions import gaussian_entropy, gaussian_kl, gaussian_log_prob
from ctrl_rl.nets.normalizer import EmpiricalNormalizer
from ctrl_rl.storage.rollout import Minibatch, RolloutStorage, minibatches
from ctrl_rl.utils.guards import check_finite

log = logging.getLogger(__name__)


def normalize_advantages(adv: torch.Tensor) -> torch.Tensor:
    """``(A - mean) / (std + 1e-8)`` with the statistics of every rank's rollout under torchrun."""
    if not distributed.enabled():
        return (adv - adv.mean()) / (adv.std() + 1e-8)
    n, mean, var = distributed.batch_moments(adv.reshape(-1, 1))
    std = (var * (n / (n - 1))).sqrt().to(adv.dtype)  # unbiased, as torch.std
    return (adv - mean.to(adv.dtype)) / (std + 1e-8)


class PPO:
    """Owns the actor-critic, its optimizer, the rollout storage and the PPO update."""

    def __init__(self, cfg: PPOConfig, obs_dims: dict[str, int], action_dim: int, num_envs: int,
                 device: torch.device | str, seed: int = 0):
        self.cfg = cfg
        self.device = torch.device(device)
        self.model = self.make_model(obs_dims, action_dim).to(self.device)
        self.learning_rate = cfg.learning_rate
        self.optimizer = self.make_optimizer()
        self.value_normalizer = (
            EmpiricalNormalizer(1, eps=1e-8, clip=None).to(self.device) if cfg.normalize_value else None
        )
        actor_dim = self.model.actor_dim
        critic_dim = sum(obs_dims[g] for g in self.model.critic_obs)
        self.storage = RolloutStorage(cfg.num_steps_per_env, num_envs, actor_dim, critic_dim, action_dim, self.device,
                                      extra_shapes=self.extra_storage_shapes(action_dim))
        # Own RNG for action noise and minibatch order: reproducible, and saved in checkpoints.
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(seed)
        self.num_updates = 0  # completed updates (checkpointed: schedules keyed on it resume exactly)
        self.total_updates: int | None = None  # the run's length, set by the runner (``schedule=linear``)
        self.last_sampling_error: float | None = None
        self._loss = torch.compile(self.minibatch_loss) if cfg.compile else self.minibatch_loss
        self._step = CapturedStep(self._update_minibatch, self.device) if cfg.cudagraphs else self._update_minibatch

    def make_optimizer(self) -> torch.optim.Optimizer:
        """Adam over the actor-critic. With ``compile``/``cudagraphs`` its learning rate is a device
        tensor the adaptive schedule updates in place (capturable Adam on CUDA for graphs)."""
        graph_safe = self.cfg.compile or self.cfg.cudagraphs
        lr = torch.tensor(self.cfg.learning_rate, device=self.device) if graph_safe else self.cfg.learning_rate
        capturable = self.cfg.cudagraphs and self.device.type == "cuda"
        return torch.optim.Adam(self.model.parameters(), lr=lr, capturable=capturable)

    def make_model(self, obs_dims: dict[str, int], action_dim: int) -> ActorCritic:
        """The actor-critic (FPO swaps in a flow actor)."""
        return ActorCritic(obs_dims, action_dim, self.cfg)

    def extra_storage_shapes(self, action_dim: int) -> dict[str, tuple[int, ...]]:
        """Per-step tensors the learner stores beyond PPO's (``RolloutStorage.extra_shapes``)."""
        return {}

    # ------------------------------------------------------------------ rollout
    @property
    def behavior_actor(self) -> nn.Module:
        """The policy that collects: the one being trained (PROPS collects with another)."""
        return self.model.actor

    def rollouts(self) -> list[RolloutStorage]:
        """The rollouts the next update trains on: the one just collected (PROPS keeps several)."""
        return [self.storage]

    @torch.no_grad()
    def act(self, obs: Obs) -> torch.Tensor:
        """Sample actions for ``obs`` and record the step's inputs in storage."""
        actor_in, critic_in = self.model.actor_input(obs), self.model.critic_input(obs)
        self.update_normalizers(actor_in, critic_in)
        mean, std = self.behavior_actor.distribution(actor_in)
        noise = torch.randn(mean.shape, generator=self.generator, device=self.device)
        actions = mean + std * noise
        self.storage.add(actor_in, critic_in, actions, gaussian_log_prob(actions, mean, std), mean, std)
        return actions

    def update_normalizers(self, actor_in: torch.Tensor, critic_in: torch.Tensor) -> None:
        """Fold the step's observations into the running statistics (Uni-O4 keeps its dataset's)."""
        self.model.update_normalizers(actor_in, critic_in)

    @torch.no_grad()
    def process_step(self, next_obs: Obs, rewards: torch.Tensor, terminated: torch.Tensor,
                     truncated: torch.Tensor, info: dict[str, Any]) -> None:
        """Record the env's answer. ``info["final_obs"]`` feeds the truncation bootstrap."""
        next_critic = self.model.critic_input(next_obs)
        final_critic = self.model.critic_input(info["final_obs"]) if "final_obs" in info else next_critic
        self.storage.add_outcome(rewards, terminated, truncated, next_critic, final_critic)

    def _values(self, critic_in: torch.Tensor) -> torch.Tensor:
        v = self.model.critic(critic_in)
        return self.value_normalizer.denormalize(v.unsqueeze(-1)).squeeze(-1) if self.value_normalizer else v

    @torch.no_grad()
    def compute_returns(self) -> None:
        """GAE advantages and returns of every rollout the update will use, under the current critic."""
        for storage in self.rollouts():
            self._compute_returns(storage)

    def _compute_returns(self, s: RolloutStorage) -> None:
        """Evaluate the critic on the whole rollout and compute GAE advantages and returns.

        ``next_values[t] = V(s_{t+1})``, except where an episode ended at ``t``: there it is
        ``V(final_obs_t)``, the true last state (used only by truncations; terminations
        zero it inside :func:`compute_gae`).
        """
        check_finite("rewards", s.rewards, "the env's reward")
        check_finite("observations", s.critic_obs, "the env's observations")
        T, N = s.num_steps, s.num_envs
        all_values = self._values(s.critic_obs.reshape((T + 1) * N, -1)).reshape(T + 1, N)
        s.values.copy_(all_values[:-1])
        next_values = all_values[1:].clone()
        ended = s.dones.nonzero(as_tuple=True)  # one host sync per iteration, not per step
        if ended[0].numel() > 0:
            next_values[ended] = self._values(s.final_critic_obs[ended])
        adv, ret = compute_gae(s.rewards, s.values, next_values, s.terminated, s.dones, self.cfg.gamma, self.cfg.lam)
        s.advantages.copy_(adv)
        s.returns.copy_(ret)

    # ------------------------------------------------------------------ update
    def training_batch(self) -> dict[str, torch.Tensor]:
        """Every sample of :meth:`rollouts` flattened, keyed like ``Minibatch``'s fields."""
        flats = [s.flat() for s in self.rollouts()]
        return flats[0] if len(flats) == 1 else {k: torch.cat([f[k] for f in flats]) for k in flats[0]}

    def update(self) -> dict[str, float]:
        """PPO epochs over :meth:`training_batch`; returns mean losses and diagnostics."""
        cfg = self.cfg
        if cfg.schedule == "linear":
            self._anneal_learning_rate()
        batch = self.training_batch()
        out_pre: dict[str, float] = {}
        if cfg.sampling_error_steps > 0:  # measured on the data before it trains the policy
            if self.num_updates % cfg.sampling_error_interval == 0:
                self.last_sampling_error = sampling_error(self.model.actor, batch["actor_obs"], batch["actions"],
                                                          cfg.sampling_error_steps)
            out_pre["sampling_error"] = self.last_sampling_error
        adv = batch["advantages"]
        if cfg.normalize_advantage:
            batch["advantages"] = normalize_advantages(adv)
        if self.value_normalizer is not None:
            self.value_normalizer.update(batch["returns"].reshape(-1, 1))
        # the minibatch size stays PPO's when the update trains on several rollouts (PROPS)
        num_minibatches = cfg.num_minibatches * len(self.rollouts())
        totals: dict[str, torch.Tensor] = {}
        n = 0
        for _ in range(cfg.num_learning_epochs):
            for mb in minibatches(batch, num_minibatches, self.generator):
                stats = self._step(mb)
                for k, v in stats.items():
                    totals[k] = totals.get(k, 0.0) + v
                n += 1
        out = {k: float(v) / n for k, v in totals.items()}  # the update's one host read of its stats
        lr = self.optimizer.param_groups[0]["lr"]
        if isinstance(lr, torch.Tensor):
            self.learning_rate = float(lr)
        out["learning_rate"] = self.learning_rate
        if hasattr(self.model.actor, "distribution"):  # a Gaussian actor (a flow policy has no std)
            out["mean_std"] = float(batch["old_std"].mean())
        with torch.no_grad():
            out["explained_variance"] = float(explained_variance(batch["old_values"], batch["returns"]))
        for key in ("value", "surrogate"):
            check_finite(f"loss/{key}", torch.tensor(out[key]), "the PPO update",
                         hint="lower algo.learning_rate, keep algo.normalize_obs=true, "
                              "or check rewards for huge values")
        out.update(out_pre)
        out.update(self.after_update())
        self.num_updates += 1
        return out

    def _anneal_learning_rate(self) -> None:
        """``lr = learning_rate * (1 - k / K)`` at update k of K (CleanRL's anneal_lr): never 0."""
        if not self.total_updates:
            raise RuntimeError("schedule=linear needs the run's length: the runner sets PPO.total_updates")
        self.learning_rate = self.cfg.learning_rate * max(1.0 - self.num_updates / self.total_updates, 0.0)
        for group in self.scheduled_param_groups():
            if isinstance(group["lr"], torch.Tensor):
                group["lr"].fill_(self.learning_rate)
            else:
                group["lr"] = self.learning_rate

    def after_update(self) -> dict[str, float]:
        """Make room for the next rollout; returns extra stats to log (PROPS trains its behavior policy)."""
        self.storage.clear()
        return {}

    def policy_loss(self, mb: Minibatch) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """``(surrogate, entropy, stats)`` of the actor on ``mb``: Gaussian PPO. With the adaptive
        schedule ``stats["kl"]`` (no gradient) steers the learning rate (FPO replaces this with its
        flow-matching ratio)."""
        cfg = self.cfg
        mean, std = self.model.actor.distribution(mb.actor_obs)
        stats: dict[str, torch.Tensor] = {}
        if cfg.schedule == "adaptive":
            with torch.no_grad():
                stats["kl"] = gaussian_kl(mb.old_mean, mb.old_std, mean, std).mean()
        log_prob = gaussian_log_prob(mb.actions, mean, std)
        surrogate, clip_frac, approx_kl = ppo_surrogate_loss(log_prob, mb.old_log_prob, mb.advantages, cfg.clip_param)
        return surrogate, gaussian_entropy(std).mean(), {"approx_kl": approx_kl, "clip_fraction": clip_frac, **stats}

    def minibatch_loss(self, mb: Minibatch) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The PPO loss on ``mb`` and its detached statistics: a pure function of the networks'
        state (what ``compile`` compiles)."""
        cfg = self.cfg
        surrogate, entropy, stats = self.policy_loss(mb)
        v_loss = self.critic_loss(mb)
        loss = surrogate + cfg.value_loss_coef * v_loss - cfg.entropy_coef * entropy
        return loss, {"value": v_loss.detach(), "surrogate": surrogate.detach(), "entropy": entropy.detach(), **stats}

    def critic_loss(self, mb: Minibatch) -> torch.Tensor:
        """The (optionally clipped) value loss on ``mb``, in the critic's normalized units if any."""
        values = self.model.critic(mb.critic_obs)
        old_values, returns = mb.old_values, mb.returns
        if self.value_normalizer is not None:  # compare in the critic's normalized space
            norm = self.value_normalizer
            old_values = norm(old_values.unsqueeze(-1)).squeeze(-1)
            returns = norm(returns.unsqueeze(-1)).squeeze(-1)
        return value_loss(values, old_values, returns, self.cfg.clip_param if self.cfg.value_clip else None)

    def _update_minibatch(self, mb: Minibatch) -> dict[str, torch.Tensor]:
        """One gradient step: loss, backward, all-reduce (gradients and KL), the adaptive-KL learning
        rate, clip, Adam."""
        loss, stats = self._loss(mb)
        kl = stats.pop("kl", None)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        kl = distributed.all_reduce_grads(self.model.parameters(), extra=kl)  # every rank's KL, same collective
        if kl is not None:
            self._adapt_learning_rate(kl)
        nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.max_grad_norm)
        self.optimizer.step()
        return stats

    def _adapt_learning_rate(self, kl: torch.Tensor) -> None:
        """rsl_rl's adaptive schedule (``kl``: every rank's mean); on the device with a tensor learning rate."""
        cfg = self.cfg
        lr = self.optimizer.param_groups[0]["lr"]
        if isinstance(lr, torch.Tensor):  # compile / cudagraphs: no host sync per minibatch
            lr.copy_(adaptive_kl_learning_rate(lr, kl, cfg.desired_kl, 1.5, cfg.min_learning_rate,
                                               cfg.max_learning_rate))
            return
        self.learning_rate = adaptive_kl_learning_rate(self.learning_rate, float(kl), cfg.desired_kl, 1.5,
                                                       cfg.min_learning_rate, cfg.max_learning_rate)
        for group in self.scheduled_param_groups():
            group["lr"] = self.learning_rate

    def scheduled_param_groups(self) -> list[dict[str, Any]]:
        """The optimizer groups the learning-rate schedule steers (all; Uni-O4: the actor's only)."""
        return self.optimizer.param_groups

    # ------------------------------------------------------------------ inference / io
    def inference_policy(self) -> nn.Module:
        """The deterministic policy (normalizer + actor mean) on raw actor observations."""
        return self.model.actor

    def state_dict(self) -> dict[str, Any]:
        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "learning_rate": self.learning_rate,
            "value_normalizer": self.value_normalizer.state_dict() if self.value_normalizer else None,
            "generator": self.generator.get_state(),
            "num_updates": self.num_updates,
            "last_sampling_error": self.last_sampling_error,
        }

    def load_state_dict(self, state: dict[str, Any], restore_rng: bool = True) -> None:
        """Restore a checkpoint; ``restore_rng=False`` for inference (eval/export on any device)."""
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        for group in self.optimizer.param_groups:  # a checkpoint of the other lr kind (compile on/off)
            if self.cfg.compile or self.cfg.cudagraphs:
                group["lr"] = torch.as_tensor(group["lr"], dtype=torch.float32, device=self.device).clone()
            elif isinstance(group["lr"], torch.Tensor):
                group["lr"] = float(group["lr"])
        self.learning_rate = state["learning_rate"]
        self.num_updates = state.get("num_updates", 0)
        self.last_sampling_error = state.get("last_sampling_error")
        if self.value_normalizer is not None and state.get("value_normalizer") is not None:
            self.value_normalizer.load_state_dict(state["value_normalizer"])
        if restore_rng:
            try:
                self.generator.set_state(state["generator"])
            except RuntimeError:  # CPU and CUDA generator states differ in layout
                log.warning("action-noise RNG state comes from another device type: reseeded "
                            "(resume is exact only on the device that wrote the checkpoint)")
