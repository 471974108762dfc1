"""Typed configs of the off-policy learners: SAC and PQL (replay, n-step critics, ensembles, C51).

The conventions are ``ctrl_rl/config.py``'s: validated when built, every field documented where it
is declared (a field redeclared here with another default keeps the shared block's description).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Dict, List

from ctrl_rl.config import AcceleratedConfig, ActorCriticConfig, _check, _positive


@dataclass
class OffPolicyConfig(ActorCriticConfig):
    """What SAC and PQL share: a replay of (s, a, r, s', d) rings per env, an ensemble of n-step
    critics (optionally C51) and Polyak-averaged targets."""

    num_steps_per_env: int = 1
    """Env steps per env per iteration (logs and checkpoints count iterations)."""
    batch_size: int = 256
    """Transitions per critic gradient step."""
    buffer_size: int = 1_000_000
    """Replay capacity in transitions, split evenly over the envs (per-env rings)."""
    learning_starts: int = 5000
    """Env steps (all envs together) of uniform random actions before learning starts."""
    gamma: float = 0.99
    """Discount factor."""
    n_step: int = 1
    """n-step returns for the critic (cut at episode ends; truncations bootstrap from the true final obs)."""
    tau: float = 0.005
    """Polyak rate of the target networks: target <- (1 - tau) target + tau online."""
    actor_learning_rate: float = 3e-4
    """Step size of the actor."""
    critic_learning_rate: float = 1e-3
    """Step size of the critics."""
    num_critics: int = 2
    """Critics in the ensemble (2 = clipped double-Q)."""
    distributional: bool = False
    """C51 categorical critic on a fixed support [v_min, v_max] instead of a scalar Q."""
    num_atoms: int = 101
    """Atoms of the categorical critic."""
    v_min: float = -250.0
    """Lowest return of the categorical support (scale it to the task's discounted returns)."""
    v_max: float = 250.0
    """Highest return of the categorical support."""
    max_grad_norm: float = 0.0
    """Gradient-norm clip of each network; 0 = off."""

    def __post_init__(self) -> None:
        super().__post_init__()
        p = "algo"
        _positive(self, p, "num_steps_per_env", "batch_size", "buffer_size", "n_step", "actor_learning_rate",
                  "critic_learning_rate", "num_critics", "num_atoms")
        _check(self.learning_starts >= 0, f"{p}.learning_starts", f"must be >= 0, got {self.learning_starts}")
        _check(0.0 < self.gamma <= 1.0, f"{p}.gamma", f"must be in (0, 1], got {self.gamma}")
        _check(0.0 < self.tau <= 1.0, f"{p}.tau", f"must be in (0, 1], got {self.tau}")
        _check(self.v_min < self.v_max, f"{p}.v_min", "must be below algo.v_max")
        _check(self.num_atoms >= 2 or not self.distributional, f"{p}.num_atoms", "needs at least 2 atoms")
        _check(self.max_grad_norm >= 0, f"{p}.max_grad_norm", "must be >= 0 (0 = off)")

    def check_env(self, num_envs: int) -> None:
        _check(self.buffer_size // num_envs >= self.n_step + 1, "algo.buffer_size",
               f"{self.buffer_size} transitions over {num_envs} envs leave fewer than n_step + 1 per env; "
               f"raise algo.buffer_size to at least {(self.n_step + 1) * num_envs}")


@dataclass
class SACConfig(AcceleratedConfig, OffPolicyConfig):
    """Soft Actor-Critic (Haarnoja et al. 2018, v2: learned temperature) for many parallel envs,
    with FastSAC/FastTD3's large-batch options (ensemble critics, distributional C51 critic,
    LayerNorm, n-step returns, several updates per env step)."""

    name: str = "sac"
    activation: str = "relu"
    num_updates: int = 1
    """Gradient steps per iteration: the update-to-data ratio is ``num_updates / (num_envs * num_steps_per_env)``
    per transition collected."""
    batch_size: int = 256
    """Transitions per gradient step (FastSAC uses tens of thousands on a GPU); under torchrun per
    process (gradients are averaged, so K processes step on K x batch_size transitions)."""
    buffer_size: int = 1_000_000
    """Replay capacity in transitions, split evenly over the envs (per-env rings); under torchrun
    each process holds this many (its own envs')."""
    learning_starts: int = 5000
    """Env steps (all envs together, of every process under torchrun) of uniform random actions
    before learning starts."""
    alpha_learning_rate: float = 3e-4
    """Adam step size of log(alpha)."""
    init_alpha: float = 1.0
    """Initial entropy temperature."""
    autotune_alpha: bool = True
    """Learn alpha so the policy entropy tracks ``target_entropy``; false keeps ``init_alpha``."""
    target_entropy_scale: float = 1.0
    """Target entropy = -scale * action_dim (SAC's heuristic at scale 1)."""
    actor_update_every: int = 1
    """Update actor and alpha every this many critic updates (delayed policy updates)."""
    critic_aggregation: str = "min"
    """``min`` over the ensemble (clipped double-Q) or ``mean`` (FastSAC's ensemble mean)."""
    layer_norm: bool = False
    """LayerNorm after every hidden layer of the critics (stabilizes large-batch, high-UTD training)."""
    log_std_min: float = -5.0
    """Lower bound of the actor's log std."""
    log_std_max: float = 2.0
    """Upper bound of the actor's log std."""
    exploration_scale_min: float = 1.0
    """Per-env exploration: env i samples with its std scaled by a level spread evenly over
    [exploration_scale_min, exploration_scale_max] (PQL's mixed exploration; 1, 1 = plain SAC)."""
    exploration_scale_max: float = 1.0
    """Upper end of the per-env std scales."""

    def __post_init__(self) -> None:
        super().__post_init__()
        p = "algo"
        _positive(self, p, "num_updates", "alpha_learning_rate", "init_alpha", "actor_update_every")
        _check(self.critic_aggregation in ("min", "mean"), f"{p}.critic_aggregation",
               f"must be one of: min, mean (got '{self.critic_aggregation}')")
        _check(self.log_std_min < self.log_std_max, f"{p}.log_std_min", "must be below algo.log_std_max")
        _check(0 < self.exploration_scale_min <= self.exploration_scale_max, f"{p}.exploration_scale_min",
               "must be > 0 and <= algo.exploration_scale_max")


@dataclass
class PQLConfig(OffPolicyConfig):
    """Parallel Q-Learning (Li et al. 2023): an actor, a V-learner and a P-learner running
    concurrently, their speeds held at fixed ratios. Deterministic actor with mixed per-env
    exploration noise, n-step double-Q (optionally C51) critic, TD3 target smoothing."""

    runner_docs: ClassVar[Dict[str, str]] = {
        "max_iterations": "The run's length in iterations (each: num_steps_per_env steps of every env; the V- and "
                          "P-learners update concurrently, at their ratios), a total: --more N with --checkpoint "
                          "trains N past the checkpoint."}

    name: str = "pql"
    actor_hidden: List[int] = field(default_factory=lambda: [512, 256, 128])
    critic_hidden: List[int] = field(default_factory=lambda: [512, 256, 128])
    batch_size: int = 8192
    """Transitions per V-learner gradient step, and observations per P-learner step."""
    buffer_size: int = 5_000_000
    learning_starts: int = 10000
    n_step: int = 3
    tau: float = 0.05
    actor_learning_rate: float = 5e-4
    """AdamW step size of the P-learner (policy)."""
    critic_learning_rate: float = 5e-4
    """AdamW step size of the V-learner (critics)."""
    max_grad_norm: float = 0.5
    num_atoms: int = 51
    distributional: bool = False
    """C51 critic on [v_min, v_max] (the target is the distribution of the critic with the lowest mean)."""
    state_buffer_size: int = 5_000_000
    """Capacity in observations of the P-learner's state-only buffer (a ring over all envs)."""
    weight_decay: float = 0.0
    """AdamW weight decay of both learners."""
    target_noise: float = 0.8
    """Std of TD3's target-policy smoothing noise, in [-1, 1] action units (PQL's value)."""
    target_noise_clip: float = 0.2
    """Clip of the target smoothing noise."""
    noise_std_min: float = 0.05
    """Mixed exploration: env i adds Gaussian noise with std linspace(noise_std_min, noise_std_max)[i]."""
    noise_std_max: float = 0.8
    """Upper end of the per-env exploration std."""
    beta_actor_critic: float = 8.0
    """V-learner updates per actor step (PQL's β_{a:v} = 1:8)."""
    beta_policy_critic: float = 2.0
    """V-learner updates per P-learner update (PQL's β_{p:v} = 1:2)."""
    ratio_slack: float = 0.0
    """How far, in V-learner updates, a role may run ahead of the slowest before it waits; values
    below the largest per-step weight (beta_actor_critic, beta_policy_critic, 1) are raised to it,
    the smallest slack that cannot deadlock. Larger: more overlap between roles, looser ratios."""
    concurrent: bool = True
    """Run actor, V-learner and P-learner in threads (CUDA: each on its own stream); false = one
    thread interleaving them at exactly the configured ratios (deterministic, exact resume)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        p = "algo"
        _positive(self, p, "state_buffer_size", "beta_actor_critic", "beta_policy_critic")
        _check(0 <= self.noise_std_min <= self.noise_std_max, f"{p}.noise_std_min",
               "must be >= 0 and <= algo.noise_std_max")
        _check(self.target_noise >= 0 and self.target_noise_clip >= 0, f"{p}.target_noise",
               "algo.target_noise and algo.target_noise_clip must be >= 0")
        _check(self.weight_decay >= 0, f"{p}.weight_decay", f"must be >= 0, got {self.weight_decay}")
        _check(self.ratio_slack >= 0, f"{p}.ratio_slack", "must be >= 0 (0 = the smallest safe slack)")

    def check_env(self, num_envs: int) -> None:
        super().check_env(num_envs)
        _check(self.state_buffer_size >= num_envs, "algo.state_buffer_size",
               f"must hold at least one step of every env: raise it to at least {num_envs}")
