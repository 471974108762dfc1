"""Gaussian actor and value critic over observation groups (asymmetric actor-critic)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import torch
from torch import nn

from ctrl_rl.nets.groups import GroupedModel
from ctrl_rl.nets.groups import concat_groups as concat_groups  # re-exported: callers import it from here
from ctrl_rl.nets.groups import resolve_groups as resolve_groups  # re-exported, as concat_groups
from ctrl_rl.nets.memory import Memory
from ctrl_rl.nets.mlp import mlp
from ctrl_rl.nets.normalizer import EmpiricalNormalizer

if TYPE_CHECKING:
    from ctrl_rl.config_onpolicy import PPOConfig

STD_TYPES = ("scalar", "state_dependent")


class GaussianActor(nn.Module):
    """Observation normalizer -> MLP -> mean, with a bounded standard deviation.

    ``std_type="scalar"``: a learned log-std per action dim, independent of the state (the
    rsl_rl/PPO default). ``"state_dependent"``: the MLP also outputs a log-std per dim.
    Std is parameterized in log space and clamped to ``[min_std, max_std]``, so it can never
    become negative or NaN through the optimizer (a classic rsl_rl crash).
    """

    def __init__(
        self,
        obs_dim: int,
        action_dim: int,
        hidden: Sequence[int],
        activation: str,
        init_std: float,
        std_type: str,
        min_std: float,
        max_std: float,
        normalize_obs: bool,
    ):
        super().__init__()
        if std_type not in STD_TYPES:
            raise ValueError(f"unknown std_type '{std_type}'; choose one of: {', '.join(STD_TYPES)}")
        self.action_dim = action_dim
        self.std_type = std_type
        self.min_log_std, self.max_log_std = float(torch.tensor(min_std).log()), float(torch.tensor(max_std).log())
        self.register_buffer("log_std_cap", torch.tensor(self.max_log_std), persistent=False)
        """The std's upper clamp in use: ``max_std``, or a polish's lower cap (:meth:`cap_std`; a tensor a
        captured or compiled step reads, not in checkpoints: the learner sets it from its schedule)."""
        self.normalizer: nn.Module = EmpiricalNormalizer(obs_dim) if normalize_obs else nn.Identity()
        out_dim = action_dim * (2 if std_type == "state_dependent" else 1)
        self.net = mlp(obs_dim, hidden, out_dim, activation, out_gain=0.01)
        init_log_std = torch.full((action_dim,), float(torch.tensor(init_std).log()))
        if std_type == "scalar":
            self.log_std = nn.Parameter(init_log_std)
        else:  # start the state-dependent head at init_std too
            with torch.no_grad():
                self.net[-1].bias[action_dim:] = init_log_std

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Deterministic action (the mean): what deployment runs."""
        return self.distribution(obs)[0]

    def distribution(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(mean, std)`` of the action distribution for raw (unnormalized) ``obs``."""
        out = self.net(self.normalizer(obs))
        if self.std_type == "scalar":
            mean, log_std = out, self.log_std.expand_as(out)
        else:
            mean, log_std = out.split(self.action_dim, dim=-1)
        return mean, log_std.clamp(min=self.min_log_std).minimum(self.log_std_cap).exp()

    def normalized_mean(self, x: torch.Tensor) -> torch.Tensor:
        """The mean action for already-normalized observations ``x``: the input the Lipschitz penalty
        (``algo.lipschitz_coef``) differentiates against, one observation std per unit."""
        return self.net(x)[..., : self.action_dim]

    @torch.no_grad()
    def cap_std(self, std: float) -> None:
        """Clamp the std at ``min(std, max_std)`` from now on (``algo.polish_max_std``); the learned log-std
        is kept, so lifting the cap gives the policy its own std back."""
        self.log_std_cap.fill_(min(float(torch.tensor(std).log()), self.max_log_std))

    @torch.no_grad()
    def reset_std(self, std: float) -> None:
        """Set the std to ``std`` in every state and leave the mean as it is: fresh exploration for a
        policy cloned from low-noise data (a state-dependent head loses its state dependence)."""
        log_std = float(torch.tensor(std).log())
        if self.std_type == "scalar":
            self.log_std.fill_(log_std)
        else:
            self.net[-1].weight[self.action_dim:] = 0.0
            self.net[-1].bias[self.action_dim:] = log_std


class ValueCritic(nn.Module):
    """Observation normalizer -> MLP -> scalar value ``[batch]``."""

    def __init__(self, obs_dim: int, hidden: Sequence[int], activation: str, normalize_obs: bool):
        super().__init__()
        self.normalizer: nn.Module = EmpiricalNormalizer(obs_dim) if normalize_obs else nn.Identity()
        self.net = mlp(obs_dim, hidden, 1, activation, out_gain=1.0)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.net(self.normalizer(obs)).squeeze(-1)


class ActorCritic(GroupedModel):
    """The PPO model: which observation groups feed the actor and the critic, and both nets.

    ``cfg`` is the algorithm's config (``PPOConfig`` or any config with the same model
    fields); ``make_actor(actor_obs_dim)`` replaces the Gaussian actor (FPO's flow actor).
    ``critic_obs=None`` there means the privileged ``critic`` group when the env
    has one, else the actor's groups.
    """

    def __init__(self, obs_dims: dict[str, int], action_dim: int, cfg: PPOConfig,
                 make_actor: Callable[[int], nn.Module] | None = None):
        super().__init__(obs_dims, cfg.actor_obs, cfg.critic_obs)
        rnn = cfg.rnn_type != "none"
        self.actor_memory = Memory(self.actor_dim, cfg.rnn_type, cfg.rnn_hidden_size, cfg.rnn_num_layers,
                                   cfg.normalize_obs) if rnn else None
        """The actor's recurrent core (``algo.rnn_type``), or None: a feed-forward actor."""
        self.critic_memory = Memory(self.critic_dim, cfg.rnn_type, cfg.rnn_hidden_size, cfg.rnn_num_layers,
                                    cfg.normalize_obs) if rnn and cfg.rnn_critic else None
        """The critic's own recurrent core (``algo.rnn_critic``), or None."""
        # behind a memory the MLPs read its features; the memory normalizes the raw observations
        actor_in = cfg.rnn_hidden_size if rnn else self.actor_dim
        critic_in = cfg.rnn_hidden_size if self.critic_memory is not None else self.critic_dim
        self.actor = make_actor(actor_in) if make_actor is not None else GaussianActor(
            actor_in, action_dim, cfg.actor_hidden, cfg.activation,
            cfg.init_std, cfg.std_type, cfg.min_std, cfg.max_std, cfg.normalize_obs and not rnn,
        )
        self.critic = ValueCritic(critic_in, cfg.critic_hidden, cfg.activation,
                                  cfg.normalize_obs and self.critic_memory is None)

    @property
    def actor_normalizer(self) -> nn.Module:
        return self.actor_memory.normalizer if self.actor_memory is not None else self.actor.normalizer

    @property
    def critic_normalizer(self) -> nn.Module:
        """The critic's input normalizer: inside its memory, or inside the value MLP."""
        return self.critic_memory.normalizer if self.critic_memory is not None else self.critic.normalizer
