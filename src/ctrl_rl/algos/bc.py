"""Behavior cloning: fit a policy to a dataset's actions.

Gaussian head: minimize the negative log-likelihood ``-log N(a | μ(s), σ(s))`` of the dataset's
action (or action chunk); the policy deploys μ. Flow head: the conditional flow-matching loss
``E_{t~U(0,1), ε~N(0,I)} |v(s, t ε + (1-t) a, t) - (ε - a)|²`` (the same flow actor FPO trains
online); the policy deploys the flow integrated from ε = 0. Observations are normalized by the
dataset's statistics, fitted once before the first step. The result is an ordinary ctrl_rl
checkpoint: ``ctrl-rl eval``/``export`` take it, and residual PPO takes it as its base.
"""

from __future__ import annotations

import torch
from torch import nn

from ctrl_rl.algos.base import SupervisedLearner
from ctrl_rl.algos.registry import register_learner
from ctrl_rl.config_offline import BCConfig
from ctrl_rl.env import Obs
from ctrl_rl.nets.actor_critic import GaussianActor, concat_groups, resolve_groups
from ctrl_rl.nets.chunk import ChunkedActor
from ctrl_rl.nets.distributions import censored_gaussian_log_prob
from ctrl_rl.nets.flow import FlowActor
from ctrl_rl.nets.normalizer import EmpiricalNormalizer
from ctrl_rl.storage.dataset import Dataset
from ctrl_rl.utils.guards import check_finite


def gaussian_nll(mean: torch.Tensor, std: torch.Tensor, actions: torch.Tensor,
                 bounds: tuple[float, float] | None = None) -> torch.Tensor:
    """Mean over the batch of ``-log N(actions | mean, std)`` (summed over action dims); with
    ``bounds``, actions at a bound score the mass beyond it (``censored_gaussian_log_prob``)."""
    return -censored_gaussian_log_prob(actions, mean, std, bounds).mean()


class BCModel(nn.Module):
    """The policy and which observation groups it reads (the part of PPO's model BC has)."""

    def __init__(self, obs_dims: dict[str, int], action_dim: int, cfg: BCConfig):
        super().__init__()
        self.actor_obs, _ = resolve_groups(obs_dims, cfg.actor_obs, None)
        self.actor_dim = sum(obs_dims[g] for g in self.actor_obs)
        out = action_dim * cfg.chunk_size
        if cfg.head == "gaussian":
            self.head: nn.Module = GaussianActor(self.actor_dim, out, cfg.actor_hidden, cfg.activation, cfg.init_std,
                                                 cfg.std_type, cfg.min_std, cfg.max_std, cfg.normalize_obs)
        else:
            self.head = FlowActor(self.actor_dim, out, cfg.actor_hidden, cfg.activation, cfg.normalize_obs,
                                  cfg.flow_steps, cfg.time_features)
        self.actor = self.head if cfg.chunk_size == 1 else ChunkedActor(self.head, cfg.chunk_size, action_dim)

    def actor_input(self, obs: Obs) -> torch.Tensor:
        return concat_groups(obs, self.actor_obs)


class BC(SupervisedLearner):
    """Owns the policy, its optimizer and the dataset on the training device."""

    def __init__(self, cfg: BCConfig, obs_dims: dict[str, int], action_dim: int, num_envs: int,
                 device: torch.device | str, seed: int = 0, action_bounds: tuple[float, float] | None = None,
                 inference_only: bool = False):
        self.cfg, self.device, self.action_dim = cfg, torch.device(device), action_dim
        self.censor = tuple(action_bounds) if cfg.censor_bounds and action_bounds is not None else None
        """The bounds the dataset's actions were clipped to, when the likelihood treats them as censored."""
        self.model = BCModel(obs_dims, action_dim, cfg).to(self.device)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=cfg.learning_rate, weight_decay=cfg.weight_decay)
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(seed)
        self.num_updates = 0
        self.obs: torch.Tensor | None = None
        self.targets: torch.Tensor | None = None

    def set_dataset(self, data: Dataset) -> None:
        """Put the dataset on the device (``4 N (obs_dim + k action_dim)`` bytes) and, before the
        first step, fit the observation normalizer to it."""
        if data.obs_dim != self.model.actor_dim or data.action_dim != self.action_dim:
            raise ValueError(f"the dataset has {data.obs_dim}-dim observations and {data.action_dim}-dim actions; "
                             f"the policy reads {self.model.actor_dim} (groups {self.model.actor_obs}) and acts in "
                             f"{self.action_dim}: collect the dataset on this task")
        self.obs = torch.as_tensor(data.observations, device=self.device)
        chunks = data.action_chunks(self.cfg.chunk_size)
        self.targets = torch.as_tensor(chunks.reshape(len(data), -1), device=self.device)
        norm = self.model.head.normalizer
        if isinstance(norm, EmpiricalNormalizer) and self.num_updates == 0:
            norm.count.zero_()
            norm.update(self.obs)

    def loss(self, obs: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        head = self.model.head
        if isinstance(head, GaussianActor):
            return gaussian_nll(*head.distribution(obs), target, self.censor)
        b, g = target.shape[0], self.generator
        eps = torch.randn(b, 1, target.shape[1], generator=g, device=self.device)
        t = torch.rand(b, 1, generator=g, device=self.device)
        return head.cfm_loss(obs, target, eps, t).mean()

    def update(self) -> dict[str, float]:
        """``updates_per_iteration`` minibatch steps; returns the mean loss."""
        if self.obs is None:
            raise RuntimeError("BC.update before set_dataset: no data to learn from")
        cfg, total = self.cfg, torch.zeros((), device=self.device)
        for _ in range(cfg.updates_per_iteration):
            idx = torch.randint(len(self.obs), (cfg.batch_size,), generator=self.generator, device=self.device)
            loss = self.loss(self.obs[idx], self.targets[idx])
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if cfg.max_grad_norm > 0:
                nn.utils.clip_grad_norm_(self.model.parameters(), cfg.max_grad_norm)
            self.optimizer.step()
            total += loss.detach()
        self.num_updates += 1
        out = {"bc": float(total) / cfg.updates_per_iteration, "learning_rate": cfg.learning_rate}
        check_finite("loss/bc", torch.tensor(out["bc"]), "the BC update",
                     hint="lower algo.learning_rate or check the dataset for huge values")
        return out

    def inference_policy(self) -> nn.Module:
        """The deterministic policy (mean / zero-noise flow; a chunk policy's first action) on raw obs."""
        return self.model.actor



register_learner("bc", config=BCConfig, build=BC, loop="offline")
