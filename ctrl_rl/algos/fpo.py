"""FPO: Flow Policy Optimization (McAllister et al., "Flow Matching Policy Gradients").

PPO's clipped surrogate trains a flow-matching policy, whose likelihood has no closed form.
At rollout each action gets ``num_cfm_samples`` pairs (ε_i, t_i) and their conditional
flow-matching losses ℓ_old,i under the acting policy; in the update the same pairs are scored
under the current policy and ``ρ = exp(mean ℓ_old − mean ℓ_θ)`` stands in for π_θ/π_old
(:func:`ctrl_rl.algos.losses.fpo_log_ratio`). No entropy term: exploration is the sampler's
noise. Storage, GAE, minibatching, value loss, checkpoints: PPO's, unchanged.
"""

from __future__ import annotations

import torch

from ctrl_rl.algos.losses import fpo_log_ratio, ppo_surrogate_loss
from ctrl_rl.algos.ppo import PPO
from ctrl_rl.config_onpolicy import FPOConfig
from ctrl_rl.env import Obs
from ctrl_rl.nets.actor_critic import ActorCritic
from ctrl_rl.nets.flow import FlowActor
from ctrl_rl.storage.rollout import Minibatch


class FPO(PPO):
    """PPO with a :class:`~ctrl_rl.nets.flow.FlowActor` and the flow-matching likelihood ratio.

    Sampled actions are clipped to the env's action bounds before they are stored and scored: the
    flow learns the action the env executed. Unclipped, nothing stops a bang-bang task's actions
    from drifting far outside the bounds (pendulum: mean |a| 8.5 after 5M steps), where the CFM
    losses, and with them the ratio, blow up.
    """

    cfg: FPOConfig

    def __init__(self, cfg: FPOConfig, obs_dims: dict[str, int], action_dim: int, num_envs: int,
                 device: torch.device | str, seed: int = 0,
                 action_bounds: tuple[float, float] | None = (-1.0, 1.0)):
        super().__init__(cfg, obs_dims, action_dim, num_envs, device, seed=seed)
        self.action_bounds = action_bounds

    def make_model(self, obs_dims: dict[str, int], action_dim: int) -> ActorCritic:
        cfg = self.cfg
        return ActorCritic(obs_dims, action_dim, cfg, make_actor=lambda obs_dim: FlowActor(
            obs_dim, action_dim, cfg.actor_hidden, cfg.activation, cfg.normalize_obs, cfg.flow_steps,
            cfg.time_features))

    def extra_storage_shapes(self, action_dim: int) -> dict[str, tuple[int, ...]]:
        n = self.cfg.num_cfm_samples
        return {"cfm_eps": (n, action_dim), "cfm_t": (n,), "cfm_loss": (n,)}

    @torch.no_grad()
    def act(self, obs: Obs) -> torch.Tensor:
        """Sample ``a = flow(obs, ε)``, draw the (ε_i, t_i) pairs and store their CFM losses."""
        actor_in, critic_in = self.model.actor_input(obs), self.model.critic_input(obs)
        self.update_normalizers(actor_in, critic_in)
        actor: FlowActor = self.model.actor
        N, A, n, K = actor_in.shape[0], actor.action_dim, self.cfg.num_cfm_samples, self.cfg.flow_steps
        g, dev = self.generator, self.device
        actions = actor(actor_in, torch.randn(N, A, generator=g, device=dev))
        if self.action_bounds is not None:
            actions = actions.clamp(*self.action_bounds)
        eps = torch.randn(N, n, A, generator=g, device=dev)
        if self.cfg.cfm_time == "grid":  # the sampler's Euler times
            t = torch.randint(1, K + 1, (N, n), generator=g, device=dev).float() / K
        else:
            t = torch.rand(N, n, generator=g, device=dev)
        loss = actor.cfm_loss(actor_in, actions, eps, t, self.cfg.cfm_target)
        zeros = torch.zeros_like(actions)
        self.storage.add(actor_in, critic_in, actions, zeros[:, 0], zeros, zeros, cfm_eps=eps, cfm_t=t, cfm_loss=loss)
        return actions

    def policy_loss(self, mb: Minibatch) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        cfg = self.cfg
        cfm_new = self.model.actor.cfm_loss(mb.actor_obs, mb.actions, mb.extra["cfm_eps"], mb.extra["cfm_t"],
                                            cfg.cfm_target)
        log_ratio = fpo_log_ratio(mb.extra["cfm_loss"], cfm_new, cfg.ratio_mode, cfg.per_sample_clip)
        adv = mb.advantages if log_ratio.dim() == 1 else mb.advantages.unsqueeze(-1).expand_as(log_ratio)
        surrogate, clip_frac, approx_kl = ppo_surrogate_loss(log_ratio, torch.zeros_like(log_ratio), adv,
                                                             cfg.clip_param)
        return surrogate, torch.zeros((), device=self.device), {
            "approx_kl": approx_kl, "clip_fraction": clip_frac, "cfm_loss": cfm_new.detach().mean()}
