"""Typed configuration schemas, validated when built.

Hydra composes YAML from ``configs/``; the result is merged into these dataclasses
(unknown keys and wrong types are rejected by OmegaConf) and ``__post_init__`` checks
ranges, so a bad config fails before any work with a message naming the key and the fix.
Every field's docstring is its documentation (``ctrl-rl train --help`` prints them).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional


class ConfigError(ValueError):
    """A config value is invalid; the message names the key and what would fix it."""


def _check(cond: bool, key: str, msg: str) -> None:
    if not cond:
        raise ConfigError(f"{key}: {msg}")


def _floats(obj: Any, prefix: str = "") -> list[tuple[str, float]]:
    """Every float field of a config and its nested configs, with its dotted key (NaN is never a
    setting: a NaN loss weight or learning rate would pass every ``>`` check silently)."""
    out: list[tuple[str, float]] = []
    for f in dataclasses.fields(obj):
        v = getattr(obj, f.name)
        if dataclasses.is_dataclass(v):
            out += _floats(v, f"{prefix}{f.name}.")
        elif isinstance(v, float):
            out.append((f"{prefix}{f.name}", v))
    return out


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
    """``adaptive``: scale lr to keep the policy KL near ``desired_kl`` (rsl_rl); ``fixed``;
    ``linear``: anneal from ``learning_rate`` towards 0 over ``runner.max_iterations`` (CleanRL's anneal_lr)."""
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
    sampling_error_steps: int = 0
    """Log ``sampling_error`` (KL of a maximum-likelihood fit of the training batch from the policy,
    see ``ctrl_rl/algos/diagnostics.py``) fitted with this many Adam steps per update; 0: off."""
    sampling_error_interval: int = 1
    """Measure the sampling error every this many iterations (the fit costs as much as a few PPO
    epochs); iterations in between log the last measurement."""
    compile: bool = False
    """``torch.compile`` the minibatch loss (forward and backward graphs); the learning rate becomes
    a device tensor and the adaptive-KL step runs on the device (no host sync per minibatch)."""
    cudagraphs: bool = False
    """Capture one whole minibatch update (loss, backward, all-reduce, clip, Adam) as a CUDA graph
    and replay it (LeanRL's recipe; Adam becomes capturable). CUDA only: on cpu the same graph-safe
    update runs uncaptured."""

    def __post_init__(self) -> None:
        p = "algo"
        _check(self.sampling_error_steps >= 0, f"{p}.sampling_error_steps",
               f"must be >= 0 (0 turns it off), got {self.sampling_error_steps}")
        _positive(self, p, "sampling_error_interval", "num_steps_per_env", "num_learning_epochs", "num_minibatches",
                  "learning_rate", "desired_kl", "init_std", "min_std", "max_std", "max_grad_norm")
        _check(self.schedule in ("adaptive", "fixed", "linear"), f"{p}.schedule",
               f"must be one of: adaptive, fixed, linear (got '{self.schedule}')")
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

    def check_env(self, num_envs: int) -> None:
        """Checks that need the env size (called by ``TrainConfig``)."""
        batch = num_envs * self.num_steps_per_env
        _check(batch >= 2 * self.num_minibatches, "algo.num_minibatches",
               f"a batch of {batch} samples (env.num_envs x algo.num_steps_per_env) cannot fill "
               f"{self.num_minibatches} minibatches of 2 or more; "
               "lower algo.num_minibatches or raise env.num_envs")


@dataclass
class SACConfig:
    """Soft Actor-Critic (Haarnoja et al. 2018, v2: learned temperature) for many parallel envs,
    with FastSAC/FastTD3's large-batch options (ensemble critics, distributional C51 critic,
    LayerNorm, n-step returns, several updates per env step)."""

    name: str = "sac"
    """Algorithm id."""
    num_steps_per_env: int = 1
    """Env steps per env per iteration (an iteration = collect, then ``num_updates`` updates)."""
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
    gamma: float = 0.99
    """Discount factor."""
    n_step: int = 1
    """n-step returns (stop at episode ends; truncations bootstrap with gamma^m)."""
    tau: float = 0.005
    """Polyak rate of the target critics: target <- (1 - tau) target + tau online."""
    actor_learning_rate: float = 3e-4
    """Adam step size of the actor."""
    critic_learning_rate: float = 3e-4
    """Adam step size of the critics."""
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
    num_critics: int = 2
    """Critics in the ensemble (2 = clipped double-Q)."""
    critic_aggregation: str = "min"
    """``min`` over the ensemble (clipped double-Q) or ``mean`` (FastSAC's ensemble mean)."""
    distributional: bool = False
    """C51 categorical critic on a fixed support [v_min, v_max] instead of a scalar Q."""
    num_atoms: int = 101
    """Atoms of the categorical critic."""
    v_min: float = -250.0
    """Lowest return of the categorical support (scale it to the task's returns)."""
    v_max: float = 250.0
    """Highest return of the categorical support."""
    layer_norm: bool = False
    """LayerNorm after every hidden layer of the critics (stabilizes large-batch, high-UTD training)."""
    actor_hidden: List[int] = field(default_factory=lambda: [256, 256])
    """Actor MLP hidden sizes."""
    critic_hidden: List[int] = field(default_factory=lambda: [256, 256])
    """Critic MLP hidden sizes."""
    activation: str = "relu"
    """Hidden activation: elu, relu, tanh, silu, gelu, leaky_relu."""
    log_std_min: float = -5.0
    """Lower bound of the actor's log std."""
    log_std_max: float = 2.0
    """Upper bound of the actor's log std."""
    exploration_scale_min: float = 1.0
    """Per-env exploration: env i samples with its std scaled by a level spread evenly over
    [exploration_scale_min, exploration_scale_max] (PQL's mixed exploration; 1, 1 = plain SAC)."""
    exploration_scale_max: float = 1.0
    """Upper end of the per-env std scales."""
    max_grad_norm: float = 0.0
    """Global gradient-norm clip of each network; 0 = off."""
    normalize_obs: bool = True
    """Running mean/std observation normalization (updated from collected data, exported with the actor)."""
    compile: bool = False
    """``torch.compile`` the update step (a test checks it matches eager)."""
    cudagraphs: bool = False
    """Replay each gradient step (critic, actor, temperature, target lerp) from a CUDA graph, with
    capturable Adam. CUDA only: on cpu the same step runs uncaptured."""
    actor_obs: List[str] = field(default_factory=lambda: ["policy"])
    """Observation groups concatenated into the actor's input."""
    critic_obs: Optional[List[str]] = None
    """Groups for the critics; ``None``: ``["critic"]`` if the env has that group, else the actor's."""

    def __post_init__(self) -> None:
        p = "algo"
        _positive(self, p, "num_steps_per_env", "num_updates", "batch_size", "buffer_size", "n_step",
                  "actor_learning_rate", "critic_learning_rate", "alpha_learning_rate", "init_alpha",
                  "actor_update_every", "num_critics", "num_atoms")
        _check(self.learning_starts >= 0, f"{p}.learning_starts", f"must be >= 0, got {self.learning_starts}")
        _check(0.0 < self.gamma <= 1.0, f"{p}.gamma", f"must be in (0, 1], got {self.gamma}")
        _check(0.0 < self.tau <= 1.0, f"{p}.tau", f"must be in (0, 1], got {self.tau}")
        _check(self.critic_aggregation in ("min", "mean"), f"{p}.critic_aggregation",
               f"must be one of: min, mean (got '{self.critic_aggregation}')")
        _check(self.v_min < self.v_max, f"{p}.v_min", "must be below algo.v_max")
        _check(self.num_atoms >= 2 or not self.distributional, f"{p}.num_atoms", "needs at least 2 atoms")
        _check(self.log_std_min < self.log_std_max, f"{p}.log_std_min", "must be below algo.log_std_max")
        _check(0 < self.exploration_scale_min <= self.exploration_scale_max, f"{p}.exploration_scale_min",
               "must be > 0 and <= algo.exploration_scale_max")
        _check(self.max_grad_norm >= 0, f"{p}.max_grad_norm", "must be >= 0 (0 = off)")
        from ctrl_rl.nets.mlp import ACTIVATIONS

        _check(self.activation in ACTIVATIONS, f"{p}.activation",
               f"must be one of: {', '.join(ACTIVATIONS)} (got '{self.activation}')")
        _check(len(self.actor_obs) > 0, f"{p}.actor_obs", "needs at least one observation group, e.g. [policy]")

    def check_env(self, num_envs: int) -> None:
        _check(self.buffer_size // num_envs >= self.n_step + 1, "algo.buffer_size",
               f"{self.buffer_size} transitions over {num_envs} envs leave fewer than n_step + 1 per env; "
               f"raise algo.buffer_size to at least {(self.n_step + 1) * num_envs}")


@dataclass
class PQLConfig:
    """Parallel Q-Learning (Li et al. 2023): an actor, a V-learner and a P-learner running
    concurrently, their speeds held at fixed ratios. Deterministic actor with mixed per-env
    exploration noise, n-step double-Q (optionally C51) critic, TD3 target smoothing."""

    name: str = "pql"
    """Algorithm id."""
    num_steps_per_env: int = 1
    """Actor steps (one env step of every env each) per iteration; logs and checkpoints count iterations."""
    batch_size: int = 8192
    """Transitions per V-learner gradient step, and observations per P-learner step."""
    buffer_size: int = 5_000_000
    """Replay capacity in transitions (the V-learner's (s, a, r, s', d) rings, split over envs)."""
    state_buffer_size: int = 5_000_000
    """Capacity in observations of the P-learner's state-only buffer (a ring over all envs)."""
    learning_starts: int = 10000
    """Env steps (all envs together) of uniform random actions before the learners start."""
    gamma: float = 0.99
    """Discount factor."""
    n_step: int = 3
    """n-step returns for the critic (cut at episode ends; truncations bootstrap from the true final obs)."""
    tau: float = 0.05
    """Polyak rate of the target actor and target critics: target <- (1 - tau) target + tau online."""
    actor_learning_rate: float = 5e-4
    """AdamW step size of the P-learner (policy)."""
    critic_learning_rate: float = 5e-4
    """AdamW step size of the V-learner (critics)."""
    weight_decay: float = 0.0
    """AdamW weight decay of both learners."""
    max_grad_norm: float = 0.5
    """Gradient-norm clip of each network; 0 = off."""
    num_critics: int = 2
    """Critics in the ensemble; targets and the policy objective use their minimum (clipped double-Q)."""
    distributional: bool = False
    """C51 critic on [v_min, v_max] (the target is the distribution of the critic with the lowest mean)."""
    num_atoms: int = 51
    """Atoms of the categorical critic."""
    v_min: float = -250.0
    """Lowest return of the categorical support (scale it to the task's discounted returns)."""
    v_max: float = 250.0
    """Highest return of the categorical support."""
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
    actor_hidden: List[int] = field(default_factory=lambda: [512, 256, 128])
    """Actor MLP hidden sizes."""
    critic_hidden: List[int] = field(default_factory=lambda: [512, 256, 128])
    """Critic MLP hidden sizes."""
    activation: str = "elu"
    """Hidden activation: elu, relu, tanh, silu, gelu, leaky_relu."""
    normalize_obs: bool = True
    """Running mean/std observation normalization (statistics from collected data, exported with the actor)."""
    actor_obs: List[str] = field(default_factory=lambda: ["policy"])
    """Observation groups concatenated into the actor's input."""
    critic_obs: Optional[List[str]] = None
    """Groups for the critics; ``None``: ``["critic"]`` if the env has that group, else the actor's."""

    def __post_init__(self) -> None:
        p = "algo"
        _positive(self, p, "num_steps_per_env", "batch_size", "buffer_size", "state_buffer_size", "n_step",
                  "actor_learning_rate", "critic_learning_rate", "num_critics", "num_atoms", "beta_actor_critic",
                  "beta_policy_critic")
        _check(self.learning_starts >= 0, f"{p}.learning_starts", f"must be >= 0, got {self.learning_starts}")
        _check(0.0 < self.gamma <= 1.0, f"{p}.gamma", f"must be in (0, 1], got {self.gamma}")
        _check(0.0 < self.tau <= 1.0, f"{p}.tau", f"must be in (0, 1], got {self.tau}")
        _check(0 <= self.noise_std_min <= self.noise_std_max, f"{p}.noise_std_min",
               "must be >= 0 and <= algo.noise_std_max")
        _check(self.target_noise >= 0 and self.target_noise_clip >= 0, f"{p}.target_noise",
               "algo.target_noise and algo.target_noise_clip must be >= 0")
        _check(self.v_min < self.v_max, f"{p}.v_min", "must be below algo.v_max")
        _check(self.num_atoms >= 2 or not self.distributional, f"{p}.num_atoms", "needs at least 2 atoms")
        _check(self.weight_decay >= 0, f"{p}.weight_decay", f"must be >= 0, got {self.weight_decay}")
        _check(self.max_grad_norm >= 0, f"{p}.max_grad_norm", "must be >= 0 (0 = off)")
        _check(self.ratio_slack >= 0, f"{p}.ratio_slack", "must be >= 0 (0 = the smallest safe slack)")
        from ctrl_rl.nets.mlp import ACTIVATIONS

        _check(self.activation in ACTIVATIONS, f"{p}.activation",
               f"must be one of: {', '.join(ACTIVATIONS)} (got '{self.activation}')")
        _check(len(self.actor_obs) > 0, f"{p}.actor_obs", "needs at least one observation group, e.g. [policy]")

    def check_env(self, num_envs: int) -> None:
        _check(self.buffer_size // num_envs >= self.n_step + 1, "algo.buffer_size",
               f"{self.buffer_size} transitions over {num_envs} envs leave fewer than n_step + 1 per env; "
               f"raise algo.buffer_size to at least {(self.n_step + 1) * num_envs}")
        _check(self.state_buffer_size >= num_envs, "algo.state_buffer_size",
               f"must hold at least one step of every env: raise it to at least {num_envs}")


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
    algo: Any = field(default_factory=PPOConfig)
    """The algorithm's config; its schema is picked by ``algo.name`` (see ``ALGO_SCHEMAS``)."""
    task: TaskConfig = field(default_factory=TaskConfig)
    sim: SimConfig = field(default_factory=SimConfig)
    env: EnvConfig = field(default_factory=EnvConfig)
    runner: RunnerConfig = field(default_factory=RunnerConfig)
    seed: int = 42
    """Seeds torch, numpy, python and the envs."""
    device: str = "cpu"
    """Torch device for envs and learner: cpu, cuda, cuda:1, ... (under torchrun each rank takes
    ``cuda:<LOCAL_RANK>``)."""
    profile: bool = False
    """Time each iteration's stages (sim step, policy inference, storage, update, logging): logged as
    ``Perf/time_<stage>`` and printed as a table at the end. Synchronizes the GPU at each stage."""
    dataset: Optional[str] = None
    """Learners that train from data (``algo=bc``, ``algo=uni_o4``): a D4RL-layout ``.hdf5`` file,
    ``minari:<namespace>/<name>-vN`` (or a Minari dataset directory), or robot logs
    ``robotlogs:<dir>?reward=module:function`` (``ctrl_rl/storage/formats.py``); ``ctrl-rl collect``
    writes the first two."""

    def __post_init__(self) -> None:
        _check(self.seed >= 0, "seed", f"must be >= 0, got {self.seed}")
        for key, value in _floats(self):
            _check(not math.isnan(value), key, "must be a number, got nan")
        self.algo.check_env(self.env.num_envs)

    def check_complete(self) -> None:
        """Keys the defaults leave empty but this run needs (checked once the whole config is composed)."""
        if getattr(self.algo, "requires_dataset", False):
            _check(bool(self.dataset), "dataset",
                   f"algo={self.algo.name} trains from a dataset: pass "
                   "dataset=<file.hdf5 | minari:<id> | robotlogs:<dir>> "
                   "(record one with `ctrl-rl collect <checkpoint> --output data.hdf5`)")
        _check(self.device == "cpu" or self.device.startswith("cuda") or self.device == "mps", "device",
               f"must be cpu, cuda or cuda:<index> (got '{self.device}')")


ALGO_SCHEMAS: dict[str, type] = {"ppo": PPOConfig, "sac": SACConfig, "pql": PQLConfig}
"""Algorithm name -> config schema; later learners register here."""

import ctrl_rl.config_offline  # noqa: E402,F401  registers BC
import ctrl_rl.config_onpolicy  # noqa: E402,F401  registers PROPS, FPO and residual PPO (they extend PPOConfig above)
