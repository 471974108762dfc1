"""PPO: the on-policy learner (act, process_step, update) with rsl_rl's feature set.

Beyond rsl_rl: truncated episodes bootstrap from ``V(final_obs)`` (the true last state),
every epoch draws a fresh minibatch permutation, values can be learned in a normalized
target space, and the critic is evaluated once per rollout in two large batches instead
of once per env step.

Its family is built by composition, not subclassing: a policy head (``algos/heads.py``:
Gaussian; FPO's flow; the residual on a frozen base) owns sampling and the surrogate, a rollout
source (``algos/rollouts.py``: one rollout; PROPS's ring with a behavior policy) owns what the
update trains on, and a :class:`~ctrl_rl.algos.schedule.LearningRate` owns the step size.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import torch
from torch import nn

from ctrl_rl import distributed
from ctrl_rl.algos.base import Learner
from ctrl_rl.algos.diagnostics import sampling_error
from ctrl_rl.algos.heads import GaussianHead, PolicyHead
from ctrl_rl.algos.losses import (
    action_smoothness_loss,
    compute_gae,
    explained_variance,
    jacobian_penalty,
    smoothness_neighbours,
    value_loss,
)
from ctrl_rl.algos.precision import rebase_in_update_precision, update_precision, uses_bf16
from ctrl_rl.algos.registry import register_learner
from ctrl_rl.algos.rollouts import OneRollout
from ctrl_rl.algos.schedule import LearningRate, adapt_weight, gated_ramp, ramp_weight
from ctrl_rl.algos.symmetry import Symmetry, mirror_loss, mirror_minibatch
from ctrl_rl.config_onpolicy import PPOConfig
from ctrl_rl.env import Obs, term_mask
from ctrl_rl.mirror import EnvMirror
from ctrl_rl.nets.actor_critic import ActorCritic
from ctrl_rl.nets.memory import MemoryStates, RecurrentPolicy, through_memory
from ctrl_rl.nets.normalizer import EmpiricalNormalizer, observe
from ctrl_rl.storage.rollout import Minibatch, RolloutStorage, env_minibatches, minibatches
from ctrl_rl.utils.cuda_graphs import CapturedStep
from ctrl_rl.utils.guards import check_finite

log = logging.getLogger(__name__)

_NEIGHBOURS = ("smooth_prev_obs", "smooth_next_obs", "smooth_valid")
"""The training batch's extras for ``algo.smoothness_coef``: each sample's neighbouring observations."""


def normalize_advantages(adv: torch.Tensor) -> torch.Tensor:
    """``(A - mean) / (std + 1e-8)`` with the statistics of every rank's rollout under torchrun."""
    if not distributed.enabled():
        return (adv - adv.mean()) / (adv.std() + 1e-8)
    n, mean, var = distributed.batch_moments(adv.reshape(-1, 1))
    std = (var * (n / (n - 1))).sqrt().to(adv.dtype)  # unbiased, as torch.std
    return (adv - mean.to(adv.dtype)) / (std + 1e-8)


class PPO(Learner):
    """Owns the actor-critic, its optimizer, the rollout source and the PPO update."""

    def __init__(self, cfg: PPOConfig, obs_dims: dict[str, int], action_dim: int, num_envs: int,
                 device: torch.device | str, seed: int = 0, action_bounds: tuple[float, float] | None = (-1.0, 1.0),
                 inference_only: bool = False, *, model: ActorCritic | None = None, head: PolicyHead | None = None,
                 source: Callable[[RolloutStorage, nn.Module], OneRollout] = OneRollout,
                 observe: tuple[str, ...] = ("actor", "critic")):
        """``model``, ``head`` and ``source`` compose a variant (defaults: Gaussian PPO on one rollout);
        ``source(storage, model)`` builds the rollout source around the first storage. ``observe``:
        whose observation normalizers the collected data updates (a fine-tuning hand-over may keep
        the actor's statistics fixed: ``()`` or ``("critic",)``)."""
        self.cfg = cfg
        self.obs_dims = dict(obs_dims)
        self.device = torch.device(device)
        self.model = (model or ActorCritic(obs_dims, action_dim, cfg)).to(self.device)
        self.head = head or GaussianHead()
        self.optimizer, self.lr = self._make_optimizer()
        self.value_normalizer = (
            EmpiricalNormalizer(1, eps=1e-8, clip=None).to(self.device) if cfg.normalize_value else None
        )
        unknown = set(observe) - {"actor", "critic"}
        if unknown:
            raise ValueError(f"observe names {sorted(unknown)}; choose from: actor, critic")
        self.observed_groups = observe
        critic_dim = sum(obs_dims[g] for g in self.model.critic_obs)
        storage = RolloutStorage(cfg.num_steps_per_env, num_envs, self.model.actor_dim, critic_dim, action_dim,
                                 self.device, extra_shapes=self.head.storage_shapes(action_dim))
        # Own RNG for action noise and minibatch order: reproducible, and saved in checkpoints.
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(seed)
        self.source = source(storage, self.model)
        self.memory = MemoryStates(self.model, num_envs, self.device) if self.model.actor_memory is not None else None
        """Per-env recurrent states while collecting (``algo.rnn_type``), or None for a feed-forward policy."""
        self.num_updates = 0  # completed updates (checkpointed: schedules keyed on it resume exactly)
        self.total_updates: int | None = None  # the run's length (``schedule=linear``)
        self.last_sampling_error: float | None = None
        if cfg.smoothness_coef > 0 and not self.head.gaussian:
            raise ValueError(f"algo.smoothness_coef: {cfg.name}'s policy has no Gaussian mean to smooth; set it to 0")
        if cfg.lipschitz_coef > 0 and not hasattr(self.model.actor, "normalized_mean"):
            raise ValueError(f"algo.lipschitz_coef: {cfg.name}'s actor has no Gaussian mean on its observation to "
                             "differentiate; set it to 0")
        self.smoothness_weight = torch.tensor(float(cfg.smoothness_coef), device=self.device)
        """The smoothness loss's weight: ``smoothness_coef``, steered by ``smoothness_target`` (a device tensor a
        compiled loss reads as an input, updated in place; checkpointed)."""
        self.lipschitz_weight = torch.zeros((), device=self.device)
        """The Lipschitz penalty's weight this update (``algo.lipschitz_*``; a device tensor a captured step reads)."""
        self.lipschitz_ref = torch.zeros((), device=self.device)
        """``lipschitz_relative``'s reference: the penalty on the first penalized minibatch (0 until then)."""
        self.lipschitz_mask: torch.Tensor | None = None
        """1 per actor input the penalty differentiates, 0 for ``lipschitz_exclude``'s terms (None: all)."""
        self.lipschitz_gated = 0.0
        """``lipschitz_gate``'s ramp: the fraction of ``lipschitz_coef`` it has reached (checkpointed)."""
        self.lipschitz_gate_value: float | None = None
        """The gate's value in the last rollout (:meth:`observe_logs`)."""
        self.lipschitz_active = False
        """Whether this update adds the penalty: from ``lipschitz_start`` on; always with CUDA graphs (one graph)."""
        if cfg.polish_max_std is not None and not hasattr(self.model.actor, "cap_std"):
            raise ValueError(f"algo.polish_max_std: {cfg.name}'s actor has no Gaussian std to cap; set it to null")
        self._polish()
        self.symmetry: Symmetry | None = None
        """The mirror maps of ``algo.symmetry`` (set by :meth:`set_mirror`), None without it."""
        self._loss = torch.compile(self.minibatch_loss) if cfg.compile else self.minibatch_loss
        self._step = CapturedStep(self._update_minibatch, self.device) if cfg.cudagraphs else self._update_minibatch

    def _make_optimizer(self) -> tuple[torch.optim.Optimizer, LearningRate]:
        """Adam over the actor-critic, the critic in a group of its own when ``critic_learning_rate``
        is set (outside the schedule). With ``compile``/``cudagraphs`` the scheduled step size is a
        device tensor (capturable Adam on CUDA for graphs)."""
        cfg, model = self.cfg, self.model
        on_device = cfg.compile or cfg.cudagraphs
        if cfg.critic_learning_rate is None:
            groups = [{"params": list(model.parameters())}]
        else:
            groups = [{"params": list(model.actor.parameters())},
                      {"params": list(model.critic.parameters()), "lr": cfg.critic_learning_rate}]
        capturable = cfg.cudagraphs and self.device.type == "cuda"
        optimizer = torch.optim.Adam(groups, lr=cfg.learning_rate, capturable=capturable)
        return optimizer, LearningRate(cfg, optimizer, 1, self.device, on_device)

    @property
    def storage(self) -> RolloutStorage:
        """The rollout being collected."""
        return self.source.storage

    def set_run_length(self, updates: int) -> None:
        self.total_updates = updates

    def set_mirror(self, mirror: Callable[[], EnvMirror | None]) -> None:
        if self.cfg.symmetry == "none":
            return
        if not self.head.gaussian:
            raise ValueError(f"algo.symmetry: {self.cfg.name}'s policy is not a Gaussian on the env's observations; "
                             "set algo.symmetry=none")
        maps = mirror()
        if maps is None:
            raise ValueError("algo.symmetry: this env declares no mirror maps (VecEnv.mirror); robot tasks take "
                             "them from the robot YAML's `mirror` list. Add one, or set algo.symmetry=none")
        self.symmetry = Symmetry.build(maps, self.model.actor_obs, self.model.critic_obs, self.cfg.symmetry)

    def set_obs_terms(self, obs_terms: Callable[[], dict[str, list[tuple[str, int]]]]) -> None:
        if self.cfg.lipschitz_coef > 0 and self.cfg.lipschitz_exclude:
            mask = term_mask(obs_terms(), self.model.actor_obs, self.cfg.lipschitz_exclude, "algo.lipschitz_exclude")
            inputs = sum(self.obs_dims[g] for g in self.model.actor_obs)
            if len(mask) != inputs:
                raise ValueError(f"algo.lipschitz_exclude: the env's terms add up to {len(mask)} inputs, the policy "
                                 f"has {inputs} (an observation history stacks frames its term list does not show); "
                                 "set it to []")
            self.lipschitz_mask = mask.to(self.device)

    def observe_logs(self, logs: dict[str, float]) -> None:
        gate = self.cfg.lipschitz_gate
        if self.cfg.lipschitz_coef > 0 and gate:
            if gate not in logs:
                raise ValueError(f"algo.lipschitz_gate: this run logs no {gate!r}; it logs {sorted(logs)}")
            self.lipschitz_gate_value = logs[gate]

    # ------------------------------------------------------------------ rollout
    @torch.no_grad()
    def act(self, obs: Obs) -> torch.Tensor:
        """Sample actions for ``obs`` from the collecting policy and record the step in storage."""
        actor_in, critic_in = self.model.actor_input(obs), self.model.critic_input(obs)
        self._observe(actor_in, critic_in)
        policy_in = actor_in if self.memory is None else self.memory.actor_features(actor_in, self.storage.step == 0)
        actions, log_prob, mean, std, extra = self.head.sample(self.source.behavior_actor(self.model), policy_in,
                                                               self.generator)
        self.storage.add(actor_in, critic_in, actions, log_prob, mean, std, **extra)
        return actions

    def _observe(self, actor_in: torch.Tensor, critic_in: torch.Tensor) -> None:
        """Fold the step's observations into the running statistics of the ``observe`` normalizers."""
        m = self.model
        observe(pair for name, pair in (("actor", (m.actor_normalizer, actor_in)),
                                        ("critic", (m.critic_normalizer, critic_in))) if name in self.observed_groups)

    @torch.no_grad()
    def process_step(self, next_obs: Obs, rewards: torch.Tensor, terminated: torch.Tensor,
                     truncated: torch.Tensor, info: dict[str, Any]) -> None:
        """Record the env's answer. ``info["final_obs"]`` feeds the truncation bootstrap."""
        next_critic = self.model.critic_input(next_obs)
        final_critic = self.model.critic_input(info["final_obs"]) if "final_obs" in info else next_critic
        self.storage.add_outcome(rewards, terminated, truncated, next_critic, final_critic)
        self.head.episodes_ended(self.model, terminated | truncated)
        if self.memory is not None:
            self.memory.episodes_ended(terminated | truncated)

    def _values(self, critic_in: torch.Tensor) -> torch.Tensor:
        v = self.model.critic(critic_in)
        return self.value_normalizer.denormalize(v.unsqueeze(-1)).squeeze(-1) if self.value_normalizer else v

    @torch.no_grad()
    def prepare_update(self) -> None:
        """GAE advantages and returns of every rollout the update will use, under the current critic."""
        for storage in self.source.rollouts():
            self._compute_returns(storage)


    def _compute_returns(self, s: RolloutStorage) -> None:
        """Evaluate the critic on the whole rollout and compute GAE advantages and returns.

        ``next_values[t] = V(s_{t+1})``, except where an episode ended at ``t``: there it is
        ``V(final_obs_t)``, the true last state (used only by truncations; terminations
        zero it inside :func:`compute_gae`). A recurrent critic reads ``final_obs_t`` with its state
        after step t, before the episode's reset.
        """
        check_finite("rewards", s.rewards, "the env's reward")
        check_finite("observations", s.critic_obs, "the env's observations")
        T, N = s.num_steps, s.num_envs
        critic_in, final_in = s.critic_obs, s.final_critic_obs
        if self.memory is not None and self.model.critic_memory is not None:
            critic_in, final_in = self.memory.critic_rollout(s.critic_obs, s.dones, s.final_critic_obs)
        all_values = self._values(critic_in.reshape((T + 1) * N, -1)).reshape(T + 1, N)
        s.values.copy_(all_values[:-1])
        next_values = all_values[1:].clone()
        ended = s.dones.nonzero(as_tuple=True)  # one host sync per iteration, not per step
        if ended[0].numel() > 0:
            next_values[ended] = self._values(final_in[ended])
        adv, ret = compute_gae(s.rewards, s.values, next_values, s.terminated, s.dones, self.cfg.gamma, self.cfg.lam)
        s.advantages.copy_(adv)
        s.returns.copy_(ret)

    # ------------------------------------------------------------------ update
    def update(self) -> dict[str, float]:
        """PPO epochs over the source's training batch; returns mean losses and diagnostics."""
        cfg = self.cfg
        self.lr.anneal(self.num_updates, self.total_updates)
        batch = self.source.training_batch(self.model)
        if uses_bf16(cfg, self.device) and self.head.gaussian and self.memory is None:
            rebase_in_update_precision(batch, self.model.actor, self._values, cfg, self.device)
        smoothing = cfg.smoothness_coef > 0 and self.num_updates >= cfg.smoothness_start
        if smoothing:
            batch.update(self._neighbours())
        if cfg.lipschitz_coef > 0:
            weight = self._lipschitz_schedule()
            self.lipschitz_weight.fill_(weight)
            self.lipschitz_active = weight > 0 or cfg.cudagraphs
        out_pre: dict[str, float] = {}
        if cfg.sampling_error_steps > 0:  # measured on the data before it trains the policy
            if self.num_updates % cfg.sampling_error_interval == 0:
                self.last_sampling_error = sampling_error(self.model.actor, batch["actor_obs"], batch["actions"],
                                                          cfg.sampling_error_steps)
            out_pre["sampling_error"] = self.last_sampling_error
        if cfg.normalize_advantage:
            batch["advantages"] = normalize_advantages(batch["advantages"])
        if self.value_normalizer is not None:
            self.value_normalizer.update(batch["returns"].reshape(-1, 1))
        # the minibatch size stays PPO's when the update trains on several rollouts (PROPS)
        num_minibatches = cfg.num_minibatches * len(self.source.rollouts())
        totals: dict[str, torch.Tensor] = {}
        n = 0
        with update_precision(cfg, self.device):  # algo.tf32 / algo.autocast
            for _ in range(cfg.num_learning_epochs):
                for mb in self._minibatches(batch, num_minibatches):
                    stats = self._step(mb)
                    for k, v in stats.items():
                        totals[k] = totals.get(k, 0.0) + v
                    n += 1
        out = {k: float(v) / n for k, v in totals.items()}  # the update's one host read of its stats
        if self.symmetry is not None and not self.symmetry.loss:
            out["symmetry"] = self._asymmetry(batch["actor_obs"][::num_minibatches])
        out["learning_rate"] = self.lr.read()
        if self.head.gaussian:
            out["mean_std"] = float(batch["old_std"].mean())
        with torch.no_grad():
            out["explained_variance"] = float(explained_variance(batch["old_values"], batch["returns"]))
        for key in ("value", "surrogate"):
            check_finite(f"loss/{key}", torch.tensor(out[key]), "the PPO update",
                         hint="lower algo.learning_rate, keep algo.normalize_obs=true, "
                              "or check rewards for huge values")
        if smoothing and cfg.smoothness_target is not None:
            out["smoothness_coef"] = float(self.smoothness_weight)  # the weight this update trained with
            self.smoothness_weight.fill_(adapt_weight(out["smoothness_coef"], out["smoothness"], cfg.smoothness_target))
        if cfg.lipschitz_gate:
            out["lipschitz_weight"] = float(self.lipschitz_weight)  # the weight this update trained with
        out.update(out_pre)
        out.update(self.source.after_update(self.model, self.generator))
        self.num_updates += 1
        self._polish()
        return out

    def _polish(self) -> None:
        """``algo.polish_max_std`` on the actor from update ``polish_start`` on (the cap for the next rollout)."""
        cfg = self.cfg
        if cfg.polish_max_std is not None:
            polishing = self.num_updates >= cfg.polish_start
            if polishing and self.num_updates == cfg.polish_start and cfg.polish_start > 0:
                log.info("polish: the policy's std is capped at %g from iteration %d", cfg.polish_max_std,
                         cfg.polish_start + 1)
            self.model.actor.cap_std(cfg.polish_max_std if polishing else cfg.max_std)

    def _lipschitz_schedule(self) -> float:
        """The Lipschitz penalty's weight this update: the fixed ramp, or ``lipschitz_gate``'s."""
        cfg = self.cfg
        if not cfg.lipschitz_gate:
            return ramp_weight(cfg.lipschitz_coef, self.num_updates, cfg.lipschitz_start, cfg.lipschitz_ramp)
        value = self.lipschitz_gate_value
        passed = value is not None and value <= cfg.lipschitz_gate_below
        self.lipschitz_gated = gated_ramp(self.lipschitz_gated, self.num_updates, cfg.lipschitz_start,
                                          cfg.lipschitz_ramp, passed)
        return cfg.lipschitz_coef * self.lipschitz_gated

    def _neighbours(self) -> dict[str, torch.Tensor]:
        """:data:`_NEIGHBOURS` of every sample, flattened in the training batch's order."""
        parts = [smoothness_neighbours(s.actor_obs, s.dones) for s in self.source.rollouts()]
        flat = lambda x: torch.cat([p.reshape(-1, *p.shape[2:]) for p in x])  # noqa: E731
        return dict(zip(_NEIGHBOURS, (flat(column) for column in zip(*parts, strict=True)), strict=True))

    def _minibatches(self, batch: dict[str, torch.Tensor], num_minibatches: int) -> Iterator[Minibatch]:
        """One epoch: random samples, or (recurrent) whole envs with their trajectories."""
        if self.memory is None:
            return minibatches(batch, num_minibatches, self.generator)
        s = self.storage
        return env_minibatches(batch, s.num_steps, s.dones, self.memory.start, num_minibatches, self.generator)

    def minibatch_loss(self, mb: Minibatch, critic_only: bool = False) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The PPO loss on ``mb`` and its detached statistics: a pure function of the networks'
        state (what ``compile`` compiles: it reads no counter, so one graph serves every update).
        ``critic_only`` (the first ``critic_warmup`` updates): the critic's loss alone."""
        cfg, sym = self.cfg, self.symmetry
        mb = through_memory(self.model, mb)
        original_obs = mb.actor_obs
        neighbours = [mb.extra[k] for k in _NEIGHBOURS] if _NEIGHBOURS[0] in mb.extra else None
        if neighbours is not None:
            mb = replace(mb, extra={k: v for k, v in mb.extra.items() if k not in _NEIGHBOURS})
        if sym is not None and sym.augment:
            mb = mirror_minibatch(mb, sym)
        v_loss = self.critic_loss(mb)
        if critic_only:
            zero = v_loss.new_zeros(())
            return cfg.value_loss_coef * v_loss, {"value": v_loss.detach(), "surrogate": zero, "entropy": zero}
        surrogate, entropy, stats = self.head.loss(self.model.actor, mb, cfg)
        loss = surrogate + cfg.value_loss_coef * v_loss - cfg.entropy_coef * entropy
        aux = stats.pop("aux", None)  # a head's extra actor loss (CTS's latent regression)
        if aux is not None:
            loss = loss + aux
        if sym is not None and sym.loss:  # augmentation alone measures it once per update (_asymmetry)
            sym_loss = self._mirror_loss(original_obs)
            loss = loss + cfg.symmetry_coef * sym_loss
            stats["symmetry"] = sym_loss.detach()
        if neighbours is not None:
            prev_obs, next_obs, valid = neighbours
            mean = lambda obs: self.model.actor.distribution(obs)[0]  # noqa: E731
            smooth = action_smoothness_loss(mean(prev_obs), mean(original_obs), mean(next_obs), valid)
            loss = loss + self.smoothness_weight * smooth
            stats["smoothness"] = smooth.detach()
        return loss, {"value": v_loss.detach(), "surrogate": surrogate.detach(), "entropy": entropy.detach(), **stats}

    def _mirror_loss(self, obs: torch.Tensor) -> torch.Tensor:
        """``algo.symmetry``'s mirror loss of the actor mean on ``obs`` (``symmetry.mirror_loss``)."""
        actor, sym = self.model.actor, self.symmetry
        return mirror_loss(actor.distribution(obs)[0], actor.distribution(sym.actor(obs))[0], sym.actions)

    @torch.no_grad()
    def _asymmetry(self, obs: torch.Tensor) -> float:
        """``Loss/symmetry`` with augmentation alone: the updated policy's mirror loss on one minibatch's
        worth of the batch (every ``num_minibatches``-th sample), once per update. Measured in every
        minibatch, as the loss term is, its two extra actor passes cost ~4 % of the gait recipe's update
        (1.61 against 1.54 s per iteration on ctrl_dog, bit-identical weights)."""
        return float(self._mirror_loss(obs))

    def lipschitz_penalty(self, mb: Minibatch) -> torch.Tensor:
        """``algo.lipschitz_coef``'s penalty on ``mb`` (as collected): the actor mean's squared Jacobian norm
        per unit of the normalized observation, probed with each sample's exploration noise
        ``(a - mu_old) / sigma_old ~ N(0, I)`` (``losses.jacobian_penalty``). Eager, outside the compiled
        loss: ``torch.compile`` has no double backward."""
        actor, n = self.model.actor, max(1, int(len(mb.actions) * self.cfg.lipschitz_fraction))
        x = actor.normalizer(mb.actor_obs[:n]).detach().requires_grad_(True)
        return jacobian_penalty(actor.normalized_mean(x), x, (mb.actions[:n] - mb.old_mean[:n]) / mb.old_std[:n],
                                self.lipschitz_mask)

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
        critic_only = self.num_updates < self.cfg.critic_warmup
        loss, stats = self._loss(mb, critic_only)
        if self.lipschitz_active and not critic_only:
            lipschitz = self.lipschitz_penalty(mb)
            weight = self.lipschitz_weight
            if self.cfg.lipschitz_relative:  # device ops only: a captured step sets the reference too
                first = (self.lipschitz_ref == 0) & (weight > 0)
                self.lipschitz_ref.copy_(torch.where(first, lipschitz.detach(), self.lipschitz_ref))
                weight = weight / self.lipschitz_ref.clamp_min(1e-8)
            loss = loss + weight * lipschitz
            stats["lipschitz"] = lipschitz.detach()
        kl = stats.pop("kl", None)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        kl = distributed.all_reduce_grads(self.model.parameters(), extra=kl)  # every rank's KL, same collective
        if kl is not None:
            self.lr.adapt(kl)
        nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.max_grad_norm)
        self.optimizer.step()
        return stats

    # ------------------------------------------------------------------ inference / io
    def inference_policy(self) -> nn.Module:
        """The deterministic policy on raw actor observations (with a memory: on observations and the
        memory state, returning the next state too)."""
        actor = self.head.inference_policy(self.model)
        return actor if self.model.actor_memory is None else RecurrentPolicy(self.model.actor_memory, actor)

    def state_dict(self) -> dict[str, Any]:
        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "learning_rate": self.lr.read(),
            "value_normalizer": self.value_normalizer.state_dict() if self.value_normalizer else None,
            "generator": self.generator.get_state(),
            "num_updates": self.num_updates,
            "smoothness_weight": float(self.smoothness_weight),
            "lipschitz_ref": float(self.lipschitz_ref),
            "lipschitz_gated": self.lipschitz_gated,
            "last_sampling_error": self.last_sampling_error,
            **self.source.state_dict(),
            "episode_state": self.head.episode_state(self.model),
            "memory_states": self.memory.state_dict() if self.memory is not None else None,
        }

    def load_state_dict(self, state: dict[str, Any], restore_rng: bool = True) -> None:
        """Restore a checkpoint; ``restore_rng=False`` for inference (eval/export on any device)."""
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.lr.set(state["learning_rate"])  # either lr form, whichever the checkpoint was written with
        self.num_updates = state.get("num_updates", 0)
        self.smoothness_weight.fill_(state.get("smoothness_weight", self.cfg.smoothness_coef))
        self.lipschitz_ref.fill_(state.get("lipschitz_ref", 0.0))
        self.lipschitz_gated = state.get("lipschitz_gated", 0.0)
        self.last_sampling_error = state.get("last_sampling_error")
        self._polish()
        if self.value_normalizer is not None and state.get("value_normalizer") is not None:
            self.value_normalizer.load_state_dict(state["value_normalizer"])
        self.source.load_state_dict(state)
        if restore_rng:
            if state.get("episode_state"):  # training resume: where each env's policy state is
                self.head.load_episode_state(self.model, state["episode_state"])
            if self.memory is not None:
                self.memory.load_state_dict(state["memory_states"])
            try:
                self.generator.set_state(state["generator"])
            except RuntimeError:  # CPU and CUDA generator states differ in layout
                log.warning("action-noise RNG state comes from another device type: reseeded "
                            "(resume is exact only on the device that wrote the checkpoint)")

    @property
    def keeps_replay(self) -> bool:  # type: ignore[override]
        return self.source.keeps_replay

    def replay_state_dict(self) -> dict[str, Any]:
        return self.source.replay_state_dict()

    def load_replay_state_dict(self, state: dict[str, Any]) -> None:
        self.source.load_replay_state_dict(state)


register_learner("ppo", config=PPOConfig, build=PPO, loop="online", torchrun=True)
