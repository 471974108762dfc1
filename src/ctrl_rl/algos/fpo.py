"""FPO: Flow Policy Optimization (McAllister et al., "Flow Matching Policy Gradients").

PPO's clipped surrogate trains a flow-matching policy, whose likelihood has no closed form.
At rollout each action gets ``num_cfm_samples`` pairs (ε_i, t_i) and their conditional
flow-matching losses ℓ_old,i under the acting policy; in the update the same pairs are scored
under the current policy and ``ρ = exp(mean ℓ_old − mean ℓ_θ)`` stands in for π_θ/π_old
(:func:`ctrl_rl.algos.losses.fpo_log_ratio`). No entropy term: exploration is the sampler's
noise. FPO is PPO with this head and a flow actor; storage, GAE, minibatching, value loss and
checkpoints are PPO's, unchanged.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ctrl_rl.algos.heads import PolicyHead, Sample
from ctrl_rl.algos.losses import fpo_log_ratio, ppo_surrogate_loss
from ctrl_rl.algos.ppo import PPO
from ctrl_rl.algos.registry import register_learner
from ctrl_rl.config_onpolicy import FPOConfig
from ctrl_rl.nets.actor_critic import ActorCritic
from ctrl_rl.nets.flow import FlowActor
from ctrl_rl.storage.rollout import Minibatch


class FlowHead(PolicyHead):
    """A :class:`~ctrl_rl.nets.flow.FlowActor` and the flow-matching likelihood ratio.

    Sampled actions are clipped to the env's action bounds before they are stored and scored: the
    flow learns the action the env executed. Unclipped, nothing stops a bang-bang task's actions
    from drifting far outside the bounds, where the CFM losses, and with them the ratio, blow up.
    """

    def __init__(self, cfg: FPOConfig, action_bounds: tuple[float, float] | None):
        self.cfg, self.action_bounds = cfg, action_bounds

    def storage_shapes(self, action_dim: int) -> dict[str, tuple[int, ...]]:
        n = self.cfg.num_cfm_samples
        return {"cfm_eps": (n, action_dim), "cfm_t": (n,), "cfm_loss": (n,)}

    def sample(self, actor: nn.Module, actor_in: torch.Tensor, generator: torch.Generator) -> Sample:
        """``a = flow(obs, ε)``, then the (ε_i, t_i) pairs and their CFM losses under the acting policy."""
        cfg, dev = self.cfg, actor_in.device
        N, A, n, K = actor_in.shape[0], actor.action_dim, cfg.num_cfm_samples, cfg.flow_steps
        actions = actor(actor_in, torch.randn(N, A, generator=generator, device=dev))
        if self.action_bounds is not None:
            actions = actions.clamp(*self.action_bounds)
        eps = torch.randn(N, n, A, generator=generator, device=dev)
        if cfg.cfm_time == "grid":  # the sampler's Euler times
            t = torch.randint(1, K + 1, (N, n), generator=generator, device=dev).float() / K
        else:
            t = torch.rand(N, n, generator=generator, device=dev)
        loss = actor.cfm_loss(actor_in, actions, eps, t, cfg.cfm_target)
        zeros = torch.zeros_like(actions)
        return actions, zeros[:, 0], zeros, zeros, {"cfm_eps": eps, "cfm_t": t, "cfm_loss": loss}

    def loss(self, actor: nn.Module, mb: Minibatch, cfg: Any) -> tuple[torch.Tensor, torch.Tensor,
                                                                      dict[str, torch.Tensor]]:
        cfm_new = actor.cfm_loss(mb.actor_obs, mb.actions, mb.extra["cfm_eps"], mb.extra["cfm_t"], cfg.cfm_target)
        log_ratio = fpo_log_ratio(mb.extra["cfm_loss"], cfm_new, cfg.ratio_mode, cfg.per_sample_clip)
        adv = mb.advantages if log_ratio.dim() == 1 else mb.advantages.unsqueeze(-1).expand_as(log_ratio)
        surrogate, clip_frac, approx_kl = ppo_surrogate_loss(log_ratio, torch.zeros_like(log_ratio), adv,
                                                             cfg.clip_param)
        return surrogate, surrogate.new_zeros(()), {
            "approx_kl": approx_kl, "clip_fraction": clip_frac, "cfm_loss": cfm_new.detach().mean()}


def make_fpo(cfg: FPOConfig, obs_dims: dict[str, int], action_dim: int, num_envs: int, device: torch.device | str,
        seed: int = 0, action_bounds: tuple[float, float] | None = (-1.0, 1.0), inference_only: bool = False) -> PPO:
    """PPO with a flow actor and :class:`FlowHead`."""
    model = ActorCritic(obs_dims, action_dim, cfg, make_actor=lambda obs_dim: FlowActor(
        obs_dim, action_dim, cfg.actor_hidden, cfg.activation, cfg.normalize_obs, cfg.flow_steps, cfg.time_features))
    return PPO(cfg, obs_dims, action_dim, num_envs, device, seed=seed, model=model,
               head=FlowHead(cfg, action_bounds))


register_learner("fpo", config=FPOConfig, build=make_fpo, loop="online", torchrun=True)
