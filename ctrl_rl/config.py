"""Typed configuration schemas, validated when built.

Hydra composes YAML from ``configs/``; the result is merged into these dataclasses
(unknown keys and wrong types are rejected by OmegaConf) and ``__post_init__`` checks
ranges, so a bad config fails before any work with a message naming the key and the fix.
Every field's docstring is its documentation (``ctrl-rl train --help`` prints them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional


class ConfigError(ValueError):
    """A config value is invalid; the message names the key and what would fix it."""


def _check(cond: bool, key: str, msg: str) -> None:
    if not cond:
        raise ConfigError(f"{key}: {msg}")


def _positive(obj: Any, prefix: str, *names: str) -> None:
    for n in names:
        v = getattr(obj, n)
        _check(v > 0, f"{prefix}.{n}", f"must be > 0, got {v} (e.g. {prefix}.{n}={max(1, abs(v) or 1)})")


@dataclass
class PPOConfig:
    """Proximal Policy Optimization (Schulman et al. 2017) with rsl_rl's defaults."""

    name: str = "ppo"
    """Algorithm id (``algo=<name>`` picks the config group)."""
    num_steps_per_env: int = 24
    """Rollout length per env per iteration; a batch is ``num_envs * num_steps_per_env``."""
    num_learning_epochs: int = 5
    """Passes over the batch per iteration, each with a fresh minibatch permutation."""
    num_minibatches: int = 4
    """Minibatches per epoch (gradient steps per iteration = epochs * minibatches)."""
    learning_rate: float = 1e-3
    """Adam step size (the start value when ``schedule=adaptive``)."""
    schedule: str = "adaptive"
    """``adaptive``: scale lr to keep the policy KL near ``desired_kl`` (rsl_rl); ``fixed``."""
    desired_kl: float = 0.01
    """Target KL(π_old || π) per minibatch for the adaptive schedule."""
    min_learning_rate: float = 1e-5
    """Lower bound of the adaptive schedule."""
    max_learning_rate: float = 1e-2
    """Upper bound of the adaptive schedule."""
    clip_param: float = 0.2
    """Surrogate clip ε: the ratio π/π_old is kept within [1-ε, 1+ε]."""
    value_clip: bool = True
    """Clip value updates to ±clip_param around the rollout values (PPO2 style)."""
    gamma: float = 0.99
    """Discount factor."""
    lam: float = 0.95
    """GAE λ (bias/variance trade-off of the advantage estimate)."""
    value_loss_coef: float = 1.0
    """Weight of the value loss in the total loss."""
    entropy_coef: float = 0.01
    """Weight of the entropy bonus (exploration)."""
    max_grad_norm: float = 1.0
    """Global gradient-norm clip."""
    normalize_advantage: bool = True
    """Standardize advantages over the whole batch before each update."""
    normalize_value: bool = False
    """Learn values in a running-normalized target space (helps large, drifting returns)."""
    normalize_obs: bool = True
    """Running mean/std observation normalization, saved and exported with the model."""
    actor_hidden: List[int] = field(default_factory=lambda: [512, 256, 128])
    """Actor MLP hidden sizes."""
    critic_hidden: List[int] = field(default_factory=lambda: [512, 256, 128])
    """Critic MLP hidden sizes."""
    activation: str = "elu"
    """Hidden activation: elu, relu, tanh, silu, gelu, leaky_relu."""
    init_std: float = 1.0
    """Initial action standard deviation."""
    std_type: str = "scalar"
    """``scalar``: learned state-independent std; ``state_dependent``: the actor outputs it."""
    min_std: float = 1e-3
    """Lower bound on the action std (keeps log-probs finite)."""
    max_std: float = 10.0
    """Upper bound on the action std."""
    actor_obs: List[str] = field(default_factory=lambda: ["policy"])
    """Observation groups concatenated into the actor's input."""
    critic_obs: Optional[List[str]] = None
    """Groups for the critic; ``None``: ``["critic"]`` if the env has that group, else the actor's."""

    def __post_init__(self) -> None:
        p = "algo"
        _positive(self, p, "num_steps_per_env", "num_learning_epochs", "num_minibatches", "learning_rate",
                  "desired_kl", "init_std", "min_std", "max_std", "max_grad_norm")
        _check(self.schedule in ("adaptive", "fixed"), f"{p}.schedule",
               f"must be one of: adaptive, fixed (got '{self.schedule}')")
        _check(0.0 < self.gamma <= 1.0, f"{p}.gamma", f"must be in (0, 1], got {self.gamma}")
        _check(0.0 <= self.lam <= 1.0, f"{p}.lam", f"must be in [0, 1], got {self.lam}")
        _check(self.clip_param > 0, f"{p}.clip_param", f"must be > 0, got {self.clip_param}")
        _check(self.min_std < self.max_std, f"{p}.min_std", "must be below algo.max_std")
        _check(self.min_learning_rate <= self.max_learning_rate, f"{p}.min_learning_rate",
               "must not exceed algo.max_learning_rate")
        _check(self.std_type in ("scalar", "state_dependent"), f"{p}.std_type",
               f"must be one of: scalar, state_dependent (got '{self.std_type}')")
        from ctrl_rl.nets.mlp import ACTIVATIONS

        _check(self.activation in ACTIVATIONS, f"{p}.activation",
               f"must be one of: {', '.join(ACTIVATIONS)} (got '{self.activation}')")
        _check(len(self.actor_obs) > 0, f"{p}.actor_obs", "needs at least one observation group, e.g. [policy]")


@dataclass
class TaskConfig:
    name: str = "pendulum"
    """Task id within the sim backend (``ctrl-rl list`` shows them)."""
    kwargs: Dict[str, Any] = field(default_factory=dict)
    """Task-specific constructor arguments (e.g. ``+task.kwargs.max_episode_length=500``)."""


@dataclass
class SimConfig:
    name: str = "torch"
    """Simulator backend: torch (batched pure-torch envs), mujoco (MuJoCo on CPU threads),
    mjwarp (MuJoCo Warp, GPU or CPU), gymnasium (any registered id), isaaclab or mjlab
    (Isaac Lab's RL API)."""


@dataclass
class EnvConfig:
    num_envs: int = 4096
    """Parallel environments."""

    def __post_init__(self) -> None:
        _check(self.num_envs > 0, "env.num_envs",
               f"must be a positive integer, got {self.num_envs} (e.g. env.num_envs=256)")


@dataclass
class RunnerConfig:
    max_iterations: int = 1500
    """Training iterations (each: one rollout of num_steps_per_env steps, then one update)."""
    save_interval: int = 50
    """Write ``model_<it>.pt`` every this many iterations (and at the end)."""
    log_root: str = "logs"
    """Runs go to ``<log_root>/<algo>/<task>/<date_time>[_<run_name>]/``."""
    run_name: str = ""
    """Optional suffix for the run directory."""
    checkpoint: Optional[str] = None
    """Resume from ``latest`` (newest run of this algo/task) or a run dir / ``model_<it>.pt``."""
    progress: bool = True
    """Show the live progress line (steps/s, ETA)."""

    def __post_init__(self) -> None:
        _positive(self, "runner", "max_iterations", "save_interval")


@dataclass
class TrainConfig:
    algo: PPOConfig = field(default_factory=PPOConfig)
    task: TaskConfig = field(default_factory=TaskConfig)
    sim: SimConfig = field(default_factory=SimConfig)
    env: EnvConfig = field(default_factory=EnvConfig)
    runner: RunnerConfig = field(default_factory=RunnerConfig)
    seed: int = 42
    """Seeds torch, numpy, python and the envs."""
    device: str = "cpu"
    """Torch device for envs and learner: cpu, cuda, cuda:1, ..."""

    def __post_init__(self) -> None:
        _check(self.seed >= 0, "seed", f"must be >= 0, got {self.seed}")
        batch = self.env.num_envs * self.algo.num_steps_per_env
        _check(batch >= 2 * self.algo.num_minibatches, "algo.num_minibatches",
               f"a batch of {batch} samples (env.num_envs x algo.num_steps_per_env) cannot fill "
               f"{self.algo.num_minibatches} minibatches of 2 or more; "
               "lower algo.num_minibatches or raise env.num_envs")
        _check(self.device == "cpu" or self.device.startswith("cuda") or self.device == "mps", "device",
               f"must be cpu, cuda or cuda:<index> (got '{self.device}')")


ALGO_SCHEMAS: dict[str, type] = {"ppo": PPOConfig}
"""Algorithm name -> config schema; later learners register here."""
