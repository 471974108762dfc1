"""Typed configs of PPO and its variants: PROPS, FPO and residual PPO (same runner, storage and update loop).

The conventions are ``ctrl_rl/config.py``'s: validated when built, every field documented where it
is declared, shared blocks (networks, Gaussian std, compile) composed from there. Each learner's
module registers its schema (``ctrl_rl.algos.registry``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, List, Optional

from ctrl_rl.config import (
    AcceleratedConfig,
    ActorCriticConfig,
    GaussianPolicyConfig,
    MemoryConfig,
    _check,
    _positive,
)


@dataclass
class PPOConfig(MemoryConfig, AcceleratedConfig, GaussianPolicyConfig, ActorCriticConfig):
    """Proximal Policy Optimization (Schulman et al. 2017) with rsl_rl's defaults."""

    recurrent: ClassVar[bool] = True
    """Takes ``algo.rnn_type``: the learners whose extra networks (PROPS's behavior policy, FPO's flow, a
    residual's base) read raw observations say no."""

    name: str = "ppo"
    actor_hidden: List[int] = field(default_factory=lambda: [512, 256, 128])
    critic_hidden: List[int] = field(default_factory=lambda: [512, 256, 128])
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
    critic_learning_rate: Optional[float] = None
    """The critic's own Adam step size, outside the schedule (fine-tuning a pretrained actor slowly
    while its critic catches up); ``null``: one step size for both, as rsl_rl."""
    critic_warmup: int = 0
    """Updates at the start that train the critic only (the actor waits while a critic that was not
    trained on this policy's returns learns them); 0 = none."""
    sampling_error_steps: int = 0
    """Log ``sampling_error`` (KL of a maximum-likelihood fit of the training batch from the policy,
    see ``ctrl_rl/algos/diagnostics.py``) fitted with this many Adam steps per update; 0: off."""
    sampling_error_interval: int = 1
    """Measure the sampling error every this many iterations (the fit costs as much as a few PPO
    epochs); iterations in between log the last measurement."""
    symmetry: str = "none"
    """Left/right symmetry from the env's mirror maps (a robot YAML's ``mirror``): ``augment`` trains on
    each minibatch and its mirror image, ``loss`` adds the mirror loss on the actor mean, ``both``, or
    ``none`` (rsl_rl's symmetry options; ``ctrl_rl/algos/symmetry.py``)."""
    symmetry_coef: float = 1.0
    """Weight of the mirror loss ``mean((mu(mirror s) - mirror mu(s))^2)`` (``symmetry=loss|both``)."""
    smoothness_coef: float = 0.0
    """Weight of the temporal smoothness loss on the actor's mean action: the mean squared second
    difference ``mu(s_{t+1}) - 2 mu(s_t) + mu(s_{t-1})`` along each env's rollout (CAPS's temporal term,
    ``algos/losses.py: action_smoothness_loss``); what the gait report's ``action smoothness`` measures.
    0: off (rsl_rl has none). Feed-forward Gaussian policies."""
    smoothness_start: int = 0
    """Updates before the smoothness loss starts (the policy first learns to walk: on the rollouts of a
    policy still exploring at std ~1, the loss holds the mean still against the states' jolts and the
    policy does not learn to balance; measured in docs/experiments/gait_recipe.md)."""
    smoothness_target: Optional[float] = None
    """Adapt the smoothness weight after each update to hold the loss near this value (x1.5 above twice
    it, /1.5 below half of it; adaptive KL's rule), starting from ``smoothness_coef``; null: a fixed
    weight. A target needs no tuning per robot: the weight falls away while the policy learns to walk
    (its mean barely moves) and rises once it starts to jitter."""

    lipschitz_coef: float = 0.0
    """Weight of the Lipschitz penalty on the actor's mean (LCP, Chen et al. 2024): the squared Frobenius
    norm of its Jacobian with respect to the normalized observation, probed with each sample's exploration
    noise (``algos/losses.py: jacobian_penalty``). A policy that cannot answer small changes of its
    observation sharply cannot chatter tick to tick on a clean state: what the gait report's ``action
    smoothness`` measures. 0: off (rsl_rl has none). Feed-forward Gaussian policies."""
    lipschitz_start: int = 0
    """Updates before the Lipschitz penalty starts (the policy first learns to stand and walk)."""
    lipschitz_ramp: int = 0
    """Updates over which its weight then rises linearly to ``lipschitz_coef`` (LCP's schedule); 0: at once."""
    lipschitz_relative: bool = False
    """Divide the penalty by the policy's own squared Jacobian norm when it starts (measured on the first
    penalized minibatch, then held and checkpointed): ``lipschitz_coef`` is then the weight per unit of the
    policy's own sensitivity, one number for robots whose walking policies need different gains (at iteration
    230 the soft-PD Go1's reference was 14, the stiff ctrl_quad's 7.6)."""
    lipschitz_exclude: List[str] = field(default_factory=list)
    """Observation terms the penalty leaves out (``VecEnv.obs_terms`` names, e.g. ``[velocity_commands]``):
    the policy may answer those sharply. A velocity command is what tells a walker to walk: with it left out,
    a weight that had stopped the Go1 walking left it walking (docs/experiments/gait_recipe.md, run 33)."""
    lipschitz_gate: str = ""
    """A logged per-step mean (a TensorBoard tag, e.g. ``Metrics/lin_vel_error``) that gates the ramp: from
    ``lipschitz_start`` on, the weight rises by ``lipschitz_coef / lipschitz_ramp`` after each rollout where
    the value is at or below ``lipschitz_gate_below`` and falls by as much after each where it is above. The
    penalty then waits until the policy walks, and gives way when it stops walking ("": the fixed ramp)."""
    lipschitz_gate_below: float = 0.0
    """The gate's bar (in the logged value's units: m/s for ``Metrics/lin_vel_error``)."""
    lipschitz_fraction: float = 1.0
    """Fraction of each minibatch the penalty is estimated on (its first samples; minibatches are drawn at
    random): the estimate stays unbiased and its double backward costs that fraction."""

    polish_max_std: Optional[float] = None
    """From update ``polish_start`` on, the policy's std is capped at this (the gait recipe's late polish, beside
    ``task.kwargs.polish_rewards``: the rollouts then show the mean's own jitter, which a penalty on the applied
    actions can see; docs/experiments/gait_recipe.md). null: ``max_std`` throughout. Gaussian policies."""
    polish_start: int = 0
    """Updates before ``polish_max_std`` applies (the recipe: 500 of 600)."""

    symmetric: ClassVar[bool] = True
    """Takes ``algo.symmetry``: the learners whose policy is not a Gaussian on the env's observations say no."""

    def __post_init__(self) -> None:
        super().__post_init__()
        p = "algo"
        _check(self.symmetry in ("none", "augment", "loss", "both"), f"{p}.symmetry",
               f"must be one of: none, augment, loss, both (got '{self.symmetry}')")
        _check(self.symmetry_coef >= 0, f"{p}.symmetry_coef", f"must be >= 0, got {self.symmetry_coef}")
        if self.symmetry != "none":
            _check(self.symmetric, f"{p}.symmetry", f"{self.name} has no mirrored policy update; use algo=ppo "
                   "or algo=props with symmetry")
            _check(self.rnn_type == "none", f"{p}.symmetry",
                   "mirrors feed-forward minibatches; with a recurrent policy (algo.rnn_type) set it to none, or "
                   "use an observation history (task.kwargs.history_length=<frames>)")
        _check(self.smoothness_coef >= 0, f"{p}.smoothness_coef", f"must be >= 0 (0 turns it off), got "
               f"{self.smoothness_coef}")
        _check(self.smoothness_coef == 0 or self.rnn_type == "none", f"{p}.smoothness_coef",
               "pairs each step with its neighbours in a feed-forward minibatch; with a recurrent policy "
               "(algo.rnn_type) set it to 0")
        _check(self.lipschitz_coef >= 0, f"{p}.lipschitz_coef", f"must be >= 0 (0 turns it off), got "
               f"{self.lipschitz_coef}")
        _check(self.lipschitz_coef == 0 or self.rnn_type == "none", f"{p}.lipschitz_coef",
               "differentiates a feed-forward actor's mean; with a recurrent policy (algo.rnn_type) set it to 0")
        _check(self.lipschitz_start >= 0 and self.lipschitz_ramp >= 0, f"{p}.lipschitz_start",
               f"lipschitz_start and lipschitz_ramp must be >= 0, got {self.lipschitz_start}, {self.lipschitz_ramp}")
        _check(not self.lipschitz_exclude or self.lipschitz_coef > 0, f"{p}.lipschitz_exclude",
               "leaves terms out of the Lipschitz penalty, which is off: set algo.lipschitz_coef > 0 too")
        _check(not self.lipschitz_gate or self.lipschitz_coef > 0, f"{p}.lipschitz_gate",
               "gates the Lipschitz penalty, which is off: set algo.lipschitz_coef > 0 too")
        _check(not self.lipschitz_gate or self.lipschitz_gate_below > 0, f"{p}.lipschitz_gate_below",
               f"the gate {self.lipschitz_gate!r} needs its bar: set algo.lipschitz_gate_below > 0 (e.g. 0.2 for "
               "Metrics/lin_vel_error, m/s)")
        _check(0 < self.lipschitz_fraction <= 1, f"{p}.lipschitz_fraction",
               f"must be in (0, 1], got {self.lipschitz_fraction}")
        _check(self.smoothness_start >= 0, f"{p}.smoothness_start", f"must be >= 0, got {self.smoothness_start}")
        _check(self.polish_max_std is None or self.min_std <= self.polish_max_std <= self.max_std,
               f"{p}.polish_max_std", f"must be null or within [algo.min_std, algo.max_std] = [{self.min_std}, "
               f"{self.max_std}], got {self.polish_max_std} (e.g. 0.1)")
        _check(self.polish_start >= 0 and (self.polish_start == 0 or self.polish_max_std is not None),
               f"{p}.polish_start", f"must be >= 0 and needs algo.polish_max_std (e.g. 0.1), got {self.polish_start}")
        _check(self.smoothness_target is None or (self.smoothness_target > 0 and self.smoothness_coef > 0),
               f"{p}.smoothness_target", "must be > 0 (or null), with algo.smoothness_coef > 0 as its starting "
               f"weight; got target {self.smoothness_target}, coef {self.smoothness_coef}")
        _check(self.sampling_error_steps >= 0, f"{p}.sampling_error_steps",
               f"must be >= 0 (0 turns it off), got {self.sampling_error_steps}")
        _positive(self, p, "sampling_error_interval", "num_steps_per_env", "num_learning_epochs", "num_minibatches",
                  "learning_rate", "desired_kl", "max_grad_norm")
        _check(self.schedule in ("adaptive", "fixed", "linear"), f"{p}.schedule",
               f"must be one of: adaptive, fixed, linear (got '{self.schedule}')")
        _check(0.0 < self.gamma <= 1.0, f"{p}.gamma", f"must be in (0, 1], got {self.gamma}")
        _check(0.0 <= self.lam <= 1.0, f"{p}.lam", f"must be in [0, 1], got {self.lam}")
        _check(self.clip_param > 0, f"{p}.clip_param", f"must be > 0, got {self.clip_param}")
        _check(self.min_learning_rate <= self.max_learning_rate, f"{p}.min_learning_rate",
               "must not exceed algo.max_learning_rate")
        _check(self.critic_learning_rate is None or self.critic_learning_rate > 0, f"{p}.critic_learning_rate",
               f"must be > 0 or null (the actor's step size), got {self.critic_learning_rate}")
        _check(self.critic_warmup >= 0, f"{p}.critic_warmup", f"must be >= 0 (0: none), got {self.critic_warmup}")
        if self.rnn_type != "none":
            _check(self.recurrent, f"{p}.rnn_type",
                   f"{self.name} trains feed-forward policies; use algo=ppo for a recurrent one, or an observation "
                   "history (task.kwargs.history_length=<frames>) with this learner")
            _check(self.sampling_error_steps == 0, f"{p}.sampling_error_steps",
                   "measures a feed-forward policy; with a recurrent one (algo.rnn_type) set it to 0")
            _check(not self.cudagraphs, f"{p}.cudagraphs",
                   "replays fixed shapes, and a recurrent minibatch's number of trajectories varies; set it to false")

    def check_env(self, num_envs: int) -> None:
        """Checks that need the env size (called by ``TrainConfig``)."""
        batch = num_envs * self.num_steps_per_env
        _check(batch >= 2 * self.num_minibatches, "algo.num_minibatches",
               f"a batch of {batch} samples (env.num_envs x algo.num_steps_per_env) cannot fill "
               f"{self.num_minibatches} minibatches of 2 or more; "
               "lower algo.num_minibatches or raise env.num_envs")
        if self.rnn_type != "none":  # a recurrent update's minibatches are sets of whole envs
            _check(num_envs >= self.num_minibatches, "algo.num_minibatches",
                   f"a recurrent policy's minibatches are whole envs: {num_envs} env(s) cannot fill "
                   f"{self.num_minibatches}; lower algo.num_minibatches or raise env.num_envs")


@dataclass
class PROPSConfig(PPOConfig):
    """PROPS (Corrado & Hanna 2024): PPO on the newest ``buffer_batches`` rollouts, collected by a
    behavior policy adapted before each collection to sample the actions the buffer is short of,
    so the buffer looks more on-policy than on-policy sampling makes it (lower sampling error)."""

    recurrent: ClassVar[bool] = False
    name: str = "props"
    buffer_batches: int = 2
    """b: rollouts the PPO update trains on (the newest b), with log-probs and GAE recomputed
    under the current policy and critic."""
    props_epochs: int = 16
    """Most epochs of the behavior update per collection phase; 0: the behavior policy stays the
    target policy (on-policy sampling into the same buffer: the paper's PPO-with-buffer baseline)."""
    props_num_minibatches: int = 16
    """Minibatches per behavior epoch."""
    props_learning_rate: float = 1e-4
    """Adam step size of the behavior update (Adam eps 1e-5)."""
    props_clip: float = 0.3
    """ε_P: the behavior loss ``max(r, clip(r, 1-ε_P, 1+ε_P))`` stops pushing r = π_φ/π_θ below 1-ε_P."""
    props_kl_coef: float = 0.3
    """λ: weight of KL(π_φ || π_θ), keeping the behavior policy near the target."""
    props_target_kl: float = 0.05
    """Stop the behavior update once KL(π_φ || π_θ) on a minibatch exceeds this."""
    props_max_grad_norm: float = 0.5
    """Gradient-norm clip of the behavior update."""
    sampling_error_steps: int = 16
    """As PPO's, on by default here: PROPS exists to lower it."""
    sampling_error_interval: int = 10
    """As PPO's: every 10th iteration by default (each fit costs about a third of an iteration)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        p = "algo"
        _positive(self, p, "buffer_batches", "props_num_minibatches", "props_learning_rate", "props_max_grad_norm",
                  "props_target_kl")
        _check(self.props_epochs >= 0, f"{p}.props_epochs", f"must be >= 0, got {self.props_epochs}")
        _check(0.0 < self.props_clip < 1.0, f"{p}.props_clip", f"must be in (0, 1), got {self.props_clip}")
        _check(self.props_kl_coef >= 0.0, f"{p}.props_kl_coef", f"must be >= 0, got {self.props_kl_coef}")

    def check_env(self, num_envs: int) -> None:
        super().check_env(num_envs)
        batch = num_envs * self.num_steps_per_env
        _check(batch >= 2 * self.props_num_minibatches, "algo.props_num_minibatches",
               f"a rollout of {batch} samples cannot fill {self.props_num_minibatches} minibatches of 2 or more; "
               "lower algo.props_num_minibatches")


@dataclass
class FPOConfig(PPOConfig):
    """FPO (McAllister et al. 2025, "Flow Matching Policy Gradients"): PPO's clipped surrogate
    with a flow-matching policy, the likelihood ratio replaced by exp(old CFM loss − new CFM loss)."""

    recurrent: ClassVar[bool] = False
    symmetric: ClassVar[bool] = False
    name: str = "fpo"
    clip_param: float = 0.05
    """Surrogate clip ε (the paper's 0.05; its Gaussian baseline used 0.3)."""
    schedule: str = "fixed"
    """``fixed`` or ``linear``; not ``adaptive``: that schedule measures a Gaussian KL, which a flow policy has not."""
    learning_rate: float = 3e-4
    """Adam step size."""
    entropy_coef: float = 0.0
    """Must be 0: a flow policy has no closed-form entropy (exploration comes from the noise)."""
    value_loss_coef: float = 0.25
    """Weight of the value loss (the paper's 0.25)."""
    activation: str = "silu"
    """Hidden activation of both networks."""
    flow_steps: int = 10
    """Euler steps from noise (t = 1) to action (t = 0), when acting and in the exported graph."""
    num_cfm_samples: int = 8
    """(ε, t) pairs drawn per action at rollout; their CFM losses are the "old" side of the ratio."""
    ratio_mode: str = "mean"
    """``mean``: ρ = exp(mean_i ℓ_old,i − mean_i ℓ_θ,i) (the paper's default); ``per_sample``:
    ρ_i = exp(clip(ℓ_old,i − ℓ_θ,i, ±per_sample_clip)), each pair its own clipped term."""
    per_sample_clip: float = 3.0
    """Clamp of each pair's log-ratio in ``per_sample`` mode."""
    time_features: int = 4
    """Sin/cos frequencies of the time embedding fed to the velocity network."""
    cfm_target: str = "eps"
    """What the CFM losses of the ratio measure: ``eps`` (the reference code's default: the error of
    the implied noise, i.e. the velocity error weighted by (1 - t)²) or ``velocity`` (unweighted)."""
    cfm_time: str = "uniform"
    """How each pair's t is drawn: ``uniform`` on (0, 1) (the reference code's default) or ``grid``
    (the sampler's Euler times 1/K, ..., 1)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        p = "algo"
        _positive(self, p, "flow_steps", "num_cfm_samples", "per_sample_clip", "time_features")
        _check(self.cfm_target in ("eps", "velocity"), f"{p}.cfm_target",
               f"must be one of: eps, velocity (got '{self.cfm_target}')")
        _check(self.cfm_time in ("uniform", "grid"), f"{p}.cfm_time",
               f"must be one of: uniform, grid (got '{self.cfm_time}')")
        _check(self.schedule != "adaptive", f"{p}.schedule",
               "FPO needs algo.schedule=fixed or linear: the adaptive schedule measures a Gaussian KL")
        _check(self.entropy_coef == 0.0, f"{p}.entropy_coef",
               f"FPO has no entropy term: set algo.entropy_coef=0 (got {self.entropy_coef})")
        _check(self.sampling_error_steps == 0, f"{p}.sampling_error_steps",
               "measures a Gaussian policy's sampling error; FPO's flow policy has no closed-form density: set it to 0")
        _check(self.ratio_mode in ("mean", "per_sample"), f"{p}.ratio_mode",
               f"must be one of: mean, per_sample (got '{self.ratio_mode}')")


@dataclass
class ResidualConfig(PPOConfig):
    """Residual PPO (ResiP, Ankile et al. 2024): a frozen base policy plus a Gaussian residual
    actor that sees ``[observation, base action]``; the action is ``a_base + residual_scale * r``.
    The residual's mean layer starts at exactly zero, so the first policy *is* the base."""

    recurrent: ClassVar[bool] = False
    symmetric: ClassVar[bool] = False
    name: str = "residual"
    base: str = "zero"
    """The frozen base: ``zero`` (zero action: on a position-controlled robot task that is the PD
    stand controller holding the default pose), ``linear`` (a classical controller ``clip(K obs + b)``,
    e.g. a PD law, from ``base_gain``/``base_bias``), a ctrl_rl checkpoint or run dir (BC, PPO, ...), or an exported
    ``policy.onnx``. A checkpoint's weights are copied into this run's checkpoints; the path must
    still exist to evaluate or export it (the base's architecture is read from it)."""
    base_gain: Optional[List[Any]] = None
    """``linear`` base: K, one row per action, one column per actor observation (a list of number lists)."""
    base_bias: Optional[List[float]] = None
    """``linear`` base: b, one per action (default zeros)."""
    base_execute: int = 0
    """A chunking base (BC with ``chunk_size`` k) is asked every this many steps and its chunk
    executed meanwhile (ResiP: predict 32, execute 8); 0: the whole chunk."""
    residual_scale: float = 0.1
    """The residual's output scale (ResiP's 0.1): small corrections around the base."""
    entropy_coef: float = 0.0
    """ResiP trains without an entropy bonus."""

    def __post_init__(self) -> None:
        super().__post_init__()
        p = "algo"
        _positive(self, p, "residual_scale")
        _check(self.base_execute >= 0, f"{p}.base_execute",
               f"must be >= 0 (0: the whole chunk), got {self.base_execute}")
        _check(bool(self.base), f"{p}.base", "must name a base: zero, linear, a checkpoint/run dir or a policy.onnx")
        if self.base == "linear":
            _check(self.base_gain is not None and len(self.base_gain) > 0, f"{p}.base_gain",
                   "algo.base=linear needs the gain matrix, one row per action, e.g. "
                   "'algo.base_gain=[[0,-2,-0.5]]'; or set algo.base=<checkpoint|policy.onnx>")
            _check(all(isinstance(row, (list, tuple)) and all(isinstance(x, (int, float)) for x in row)
                       for row in self.base_gain), f"{p}.base_gain",
                   f"must be a list of number lists (one per action), got {self.base_gain}")
            widths = {len(row) for row in self.base_gain}
            _check(len(widths) == 1, f"{p}.base_gain", f"rows must have equal length, got lengths {sorted(widths)}")
            if self.base_bias is not None:
                _check(len(self.base_bias) == len(self.base_gain), f"{p}.base_bias",
                       f"needs one entry per gain row ({len(self.base_gain)}), got {len(self.base_bias)}")



@dataclass
class DistillationConfig(MemoryConfig, GaussianPolicyConfig):
    """Teacher-student distillation (rsl_rl's ``Distillation``; DAgger, Ross et al. 2011): a student on
    the deployable groups learns the frozen teacher's actions on the states it visits itself."""

    recurrent: ClassVar[bool] = True
    name: str = "distillation"
    teacher: str = ""
    """The frozen teacher: a run directory or ``model_<it>.pt`` of a Gaussian PPO-family policy trained on
    this task (any observation groups, e.g. ``algo.actor_obs=[critic]``: privileged). Required."""
    actor_hidden: List[int] = field(default_factory=lambda: [256, 128, 64])
    """The student's MLP (after its memory, with ``algo.rnn_type``)."""
    loss: str = "mse"
    """``mse``: the mean squared error of the student's mean to the teacher's (rsl_rl's default);
    ``kl``: KL(teacher || student) of the two Gaussians, which fits the student's std too."""
    teacher_mix: float = 1.0
    """DAgger's beta at the first iteration: the probability that an env executes the teacher's action
    instead of the student's at a step, falling linearly to 0 over ``teacher_mix_iterations``."""
    teacher_mix_iterations: int = 20
    """Iterations over which the teacher's share of the executed actions falls to 0 (0: the student
    always acts)."""
    num_steps_per_env: int = 24
    """Rollout length per env per iteration."""
    num_learning_epochs: int = 5
    """Passes over the rollout per iteration, each with a fresh minibatch permutation."""
    num_minibatches: int = 4
    """Minibatches per epoch (a recurrent student's are sets of whole envs)."""
    learning_rate: float = 1e-3
    """Adam step size."""
    max_grad_norm: float = 1.0
    """Global gradient-norm clip."""

    def __post_init__(self) -> None:
        super().__post_init__()
        p = "algo"
        _check(self.loss in ("mse", "kl"), f"{p}.loss", f"must be mse or kl (got '{self.loss}')")
        _check(0.0 <= self.teacher_mix <= 1.0, f"{p}.teacher_mix", f"must be in [0, 1], got {self.teacher_mix}")
        _check(self.teacher_mix_iterations >= 0, f"{p}.teacher_mix_iterations",
               f"must be >= 0 (0: the student always acts), got {self.teacher_mix_iterations}")
        _positive(self, p, "num_steps_per_env", "num_learning_epochs", "num_minibatches", "learning_rate",
                  "max_grad_norm")

    def check_complete(self) -> None:
        _check(bool(self.teacher), "algo.teacher", "is required: the run directory or model_<it>.pt of the teacher "
               "(e.g. algo.teacher=logs/ppo/<task>/<run>)")

    def check_env(self, num_envs: int) -> None:
        _check(num_envs * self.num_steps_per_env >= 2 * self.num_minibatches, "algo.num_minibatches",
               "cannot be filled by env.num_envs x algo.num_steps_per_env samples; lower it")
        if self.rnn_type != "none":
            _check(num_envs >= self.num_minibatches, "algo.num_minibatches",
                   f"a recurrent student's minibatches are whole envs: {num_envs} env(s) cannot fill "
                   f"{self.num_minibatches}; lower algo.num_minibatches")


@dataclass
class CTSConfig(PPOConfig):
    """Concurrent Teacher-Student (Wang et al. 2024): one PPO run in which a share of the envs is driven
    through a teacher encoder of privileged observations and the rest through a student encoder of what
    the robot measures; actor MLP and critic are shared, and the student's latent is regressed onto the
    teacher's. The student alone is exported."""

    recurrent: ClassVar[bool] = False
    symmetric: ClassVar[bool] = False
    name: str = "cts"
    teacher_obs: List[str] = field(default_factory=lambda: ["critic"])
    """Groups the teacher encoder reads (privileged: the ``critic`` group of robot tasks)."""
    teacher_fraction: float = 0.75
    """Share of the envs (the first ones) the teacher drives; the others are the student's (3:1 as the
    public CTS implementations split them)."""
    latent_dim: int = 32
    """Width of both encoders' latent, which the shared actor MLP reads beside the ``actor_obs`` groups."""
    encoder_hidden: List[int] = field(default_factory=lambda: [256, 128])
    """Hidden layers of each encoder."""
    latent_coef: float = 1.0
    """Weight of the latent regression ``mean((z_student - sg(z_teacher))^2)`` in the actor's loss: the
    only gradient the student's encoder gets (its latent enters the policy detached)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        _check(0.0 < self.teacher_fraction < 1.0, "algo.teacher_fraction",
               f"must be in (0, 1): both teacher and student need envs, got {self.teacher_fraction}")
        _check(len(self.teacher_obs) > 0, "algo.teacher_obs", "needs at least one group, e.g. [critic]")
        _positive(self, "algo", "latent_dim")
        _check(self.latent_coef >= 0, "algo.latent_coef", f"must be >= 0, got {self.latent_coef}")
