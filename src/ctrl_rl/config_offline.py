"""Typed configs of the learners that train from a dataset (``dataset=<file>``): behavior cloning
and Uni-O4 (offline, then online PPO).

Same conventions as ``ctrl_rl/config.py`` (validated when built, every field documented where it
is declared); each learner's module registers its schema (``ctrl_rl.algos.registry``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Dict, List, Optional

from ctrl_rl.config import GaussianPolicyConfig, _check, _positive
from ctrl_rl.config_onpolicy import PPOConfig

BC_HEADS = ("gaussian", "flow")


@dataclass
class BCConfig(GaussianPolicyConfig):
    """Behavior cloning: maximum likelihood of the dataset's actions (Gaussian head) or
    conditional flow matching (flow head), optionally on chunks of the next ``chunk_size`` actions."""

    requires_dataset: ClassVar[bool] = True
    runner_docs: ClassVar[Dict[str, str]] = {
        "max_iterations": "The run's length in iterations (each: updates_per_iteration gradient steps on the "
                          "dataset) when algo.num_passes=0; otherwise num_passes sets it. A total: --more N with "
                          "--checkpoint trains N past the checkpoint."}

    name: str = "bc"
    head: str = "gaussian"
    """``gaussian``: a Gaussian policy trained by negative log-likelihood (deploys its mean);
    ``flow``: a flow-matching policy (FPO's actor) trained by the CFM loss; keeps multimodal data multimodal."""
    chunk_size: int = 1
    """k: the policy predicts the next k actions of its episode (action chunking; a residual
    learner executes ``algo.base_execute`` of them before asking again). 1: one action."""
    learning_rate: float = 1e-3
    """Adam step size."""
    weight_decay: float = 0.0
    """Adam(W) weight decay."""
    batch_size: int = 256
    """Dataset rows per gradient step (drawn uniformly with replacement)."""
    updates_per_iteration: int = 200
    """Gradient steps per iteration (an iteration = these steps, then maybe an evaluation, then maybe a checkpoint)."""
    num_passes: float = 100.0
    """The run's length in passes over the dataset: ``ceil(num_passes * rows / (batch_size *
    updates_per_iteration))`` iterations, so a small dataset trains for minutes, not for
    ``runner.max_iterations``; 0: ``runner.max_iterations`` iterations."""
    max_grad_norm: float = 1.0
    """Global gradient-norm clip; 0 = off."""
    eval_interval: int = 5
    """Evaluate every this many iterations: one deterministic episode in each of the env.num_envs
    envs, logged as ``Train/mean_reward``; 0 = only after the last iteration."""
    eval_episodes: int = 16
    """Episodes per evaluation, in an env of that many built for it (the training env may hold
    thousands); 0 or >= env.num_envs: one in each of the env.num_envs envs."""
    std_type: str = "state_dependent"
    """Gaussian head: ``state_dependent`` std (heteroscedastic data) or ``scalar``."""
    min_std: float = 1e-2
    """Gaussian head: lower bound of the std (keeps the likelihood of near-deterministic data finite)."""
    flow_steps: int = 10
    """Flow head: Euler steps from noise to action."""
    time_features: int = 4
    """Flow head: sin/cos frequencies of the time embedding."""
    normalize_obs: bool = True
    """Normalize observations by the dataset's mean/std (saved and exported with the policy)."""
    censor_bounds: bool = True
    """Gaussian head: a dataset action at (or beyond) the env's action bounds counts as clipped
    (its likelihood is the Gaussian's mass beyond the bound), so the clone keeps a source that
    pushes against the bounds as strong as it was; false = the plain density. No effect without
    bounds."""
    actor_obs: List[str] = field(default_factory=lambda: ["policy"])
    """Observation groups the policy reads; the dataset's ``observations`` are these, concatenated."""

    def __post_init__(self) -> None:
        super().__post_init__()
        p = "algo"
        _positive(self, p, "chunk_size", "learning_rate", "batch_size", "updates_per_iteration", "flow_steps",
                  "time_features")
        _check(self.num_passes >= 0, f"{p}.num_passes",
               f"must be >= 0 (0: runner.max_iterations sets the length), got {self.num_passes}")
        _check(self.head in BC_HEADS, f"{p}.head", f"must be one of: {', '.join(BC_HEADS)} (got '{self.head}')")
        _check(self.eval_interval >= 0, f"{p}.eval_interval",
               f"must be >= 0 (0: only at the end), got {self.eval_interval}")
        _check(self.eval_episodes >= 0, f"{p}.eval_episodes",
               f"must be >= 0 (0: one per env), got {self.eval_episodes}")
        _check(self.weight_decay >= 0 and self.max_grad_norm >= 0, f"{p}.weight_decay",
               "algo.weight_decay and algo.max_grad_norm must be >= 0")



@dataclass
class UniO4Config(PPOConfig):
    """Uni-O4 (Lei et al., ICLR 2024): offline phase on ``dataset=``, then PPO online from its result.

    Offline (``pretrain_iterations + improve_iterations`` iterations of ``updates_per_iteration``
    gradient steps, no env steps): an ensemble of Gaussian policies is cloned from the data,
    Q and V are fitted by IQL's expectile regression and a dynamics ensemble by likelihood; then
    each policy takes BPPO steps (PPO-clip on ``A = Q - V`` of actions its last accepted policy
    samples), and every iteration a policy's step is accepted only if its offline policy
    evaluation score (mean Q along rollouts in the dynamics model) beats its best. Online: the
    accepted policy with the best success rate (where the task scores one), then return, over
    ``select_episodes`` deterministic episodes (ties: OPE score) and the offline V start PPO
    (``runner.max_iterations`` more iterations; 0: the run stops after the offline stage and the
    hand-over's choice) with Uni-O4's conservative settings below. The PPO fields are the online phase's.
    """

    requires_dataset: ClassVar[bool] = True
    min_iterations: ClassVar[int] = 0
    runner_docs: ClassVar[Dict[str, str]] = {
        "max_iterations": "Online PPO iterations only, after the algo.pretrain_iterations + "
                          "algo.improve_iterations offline ones (the run ends at their sum); 0: stop after the "
                          "offline stage and the hand-over's choice of policy (an offline-only run). A total, not a "
                          "count to add: --more N with --checkpoint trains N past the checkpoint."}

    recurrent: ClassVar[bool] = False
    name: str = "uni_o4"
    # --- online PPO (Uni-O4's fine-tuning defaults) ---
    learning_rate: float = 2e-5
    """Online actor step size (low: fine-tune, do not relearn)."""
    critic_learning_rate: Optional[float] = 2e-4
    """Online critic step size (the offline V needs to move to the new policy's values faster)."""
    schedule: str = "fixed"
    """Online actor step-size schedule: ``fixed`` (Uni-O4) or ``adaptive`` (rsl_rl's KL rule, starting
    at ``learning_rate`` within ``[min_learning_rate, max_learning_rate]``); the critic keeps
    ``critic_learning_rate`` either way."""
    clip_param: float = 0.05
    """Online PPO clip (small: the first updates stay near the offline policy)."""
    value_clip: bool = False
    """PPO2's value clip, off: the critic starts as the offline V in raw return units (no value
    normalization) and must move to the online policy's returns; a ±clip_param box (0.05 of a
    return in the hundreds) around the rollout values would hold it still."""
    entropy_coef: float = 0.0
    """Online entropy bonus (none: the std, cloned or reset by ``online_init_std``, is the exploration)."""
    actor_hidden: List[int] = field(default_factory=lambda: [256, 256])
    """Policy MLP hidden sizes (offline ensemble and online actor)."""
    critic_hidden: List[int] = field(default_factory=lambda: [256, 256])
    """V hidden sizes (offline V, then the online critic)."""
    std_type: str = "state_dependent"
    """Policy std: state-dependent (cloned from heteroscedastic data) or ``scalar``."""
    min_std: float = 1e-2
    """Lower bound of the policy std."""
    online_init_std: Optional[float] = None
    """Hand-over: reset the online actor's std to this in every state (its mean is kept); ``null``
    keeps the std cloned from the data (Uni-O4), which explores only as much as the data's noise.
    The tune files set it per task (why: docs/experiments/uni_o4.md)."""
    online_critic: str = "offline_v"
    """The online critic: ``offline_v`` (Uni-O4: the offline V, on the actor's observations) or
    ``fresh`` (a new critic on ``critic_obs``, by default the env's privileged ``critic`` group as
    PPO's, its normalizer fed online; pair it with ``critic_warmup`` so the actor waits
    while it learns the online policy's values)."""
    online_update_normalizer: bool = False
    """Keep updating the observation normalizer online; false keeps the dataset's statistics, so
    the online phase starts from exactly the offline policy's function."""
    # --- offline phase ---
    num_policies: int = 4
    """Ensemble size K (cloned policies, each improved on its own)."""
    bc_alpha: float = 0.1
    """Weight α of the ensemble BC disagreement term ``-α (log π_i - max_{j≠i} log π_j)``."""
    censor_bounds: bool = True
    """Ensemble BC: a dataset action at (or beyond) the env's action bounds counts as clipped (its
    likelihood is the Gaussian's mass beyond the bound, ``censored_gaussian_log_prob``); false =
    the plain density, as Uni-O4's code. No effect without bounds."""
    bc_learning_rate: float = 1e-3
    """Behavior cloning step size."""
    value_learning_rate: float = 3e-4
    """Q and V step size (IQL)."""
    expectile: float = 0.7
    """τ of V's expectile regression on Q: 0.5 = the behavior policy's values (SARSA-style), 0.7 = IQL."""
    target_tau: float = 0.005
    """Polyak rate of the target Q."""
    q_hidden: List[int] = field(default_factory=lambda: [256, 256])
    """Q hidden sizes (two Q networks, the minimum is used)."""
    batch_size: int = 512
    """Dataset rows per offline gradient step."""
    updates_per_iteration: int = 100
    """Gradient steps per offline iteration; during improvement, one OPE round per iteration."""
    pretrain_iterations: int = 100
    """Offline iterations of BC, Q/V and dynamics training."""
    improve_iterations: int = 20
    """Offline iterations of BPPO improvement with OPE acceptance."""
    bppo_learning_rate: float = 1e-4
    """BPPO step size."""
    bppo_clip: float = 0.25
    """BPPO clip at the first improvement step."""
    bppo_clip_decay: float = 0.96
    """The clip is multiplied by this every improvement step (BPPO's reference code; 1 = constant).
    Uni-O4's code decays clip and step size linearly instead (docs/experiments/uni_o4.md)."""
    omega: float = 0.7
    """Asymmetric advantage weight: ω for A > 0, 1 - ω otherwise (0.5 = off)."""
    bppo_entropy_coef: float = 0.0
    """Entropy bonus of the BPPO steps."""
    dynamics_members: int = 7
    """Dynamics ensemble size."""
    dynamics_elites: int = 5
    """Members with the lowest held-out error used for OPE rollouts."""
    dynamics_hidden: List[int] = field(default_factory=lambda: [200, 200, 200])
    """Dynamics model hidden sizes."""
    dynamics_learning_rate: float = 1e-3
    """Dynamics model step size."""
    ope_horizon: int = 20
    """Model rollout length of one OPE score."""
    ope_states: int = 1000
    """Start states (drawn from the dataset) of one OPE score."""
    select_episodes: int = 3
    """Hand-over: deterministic episodes per candidate, every candidate from the same starts (an env
    of ``select_episodes`` envs, reset alike for each; counted as env steps), to pick the one PPO
    starts from; 0 = by OPE score alone."""
    dataset_device_mb: float = -1.0
    """Device memory the dataset may take (MB); larger datasets stay in host memory and stream to
    the device batch by batch (``DeviceSampler``). -1: half the free CUDA memory, unlimited on CPU."""
    eval_interval: int = 10
    """Offline phase: evaluate (one deterministic episode per env) every this many iterations; 0 = never."""
    eval_episodes: int = 64
    """Offline phase: deterministic episodes per evaluation, in an env of their own (0 or >= env.num_envs:
    one in each training env). The online env is sized for PPO (4096 for the quadruped), too many to
    evaluate every few offline iterations."""

    def __post_init__(self) -> None:
        super().__post_init__()
        p = "algo"
        _positive(self, p, "critic_learning_rate", "num_policies", "bc_learning_rate", "value_learning_rate",
                  "target_tau", "batch_size", "updates_per_iteration", "pretrain_iterations", "bppo_learning_rate",
                  "bppo_clip", "dynamics_members", "dynamics_elites", "dynamics_learning_rate", "ope_horizon",
                  "ope_states")
        _check(0.0 < self.bppo_clip_decay <= 1.0, f"{p}.bppo_clip_decay",
               f"must be in (0, 1], got {self.bppo_clip_decay}")
        _check(self.improve_iterations >= 0, f"{p}.improve_iterations", "must be >= 0 (0: BC only)")
        _check(self.schedule in ("fixed", "adaptive"), f"{p}.schedule",
               f"uni_o4 fine-tunes the actor at a fixed or KL-adaptive step size; got '{self.schedule}': "
               "use algo.schedule=fixed or algo.schedule=adaptive")
        _check(self.online_init_std is None or self.min_std <= self.online_init_std <= self.max_std,
               f"{p}.online_init_std", f"must be null or within [algo.min_std, algo.max_std] = "
               f"[{self.min_std}, {self.max_std}], got {self.online_init_std}")
        _check(not self.normalize_value, f"{p}.normalize_value",
               "the online critic starts as the offline V, which predicts raw returns: keep algo.normalize_value=false")
        _check(0.0 < self.expectile < 1.0, f"{p}.expectile", f"must be in (0, 1), got {self.expectile}")
        _check(0.0 < self.omega < 1.0, f"{p}.omega", f"must be in (0, 1), got {self.omega}")
        _check(self.bc_alpha >= 0 and self.bppo_entropy_coef >= 0, f"{p}.bc_alpha",
               "algo.bc_alpha and algo.bppo_entropy_coef must be >= 0")
        _check(self.dynamics_elites <= self.dynamics_members, f"{p}.dynamics_elites",
               f"must not exceed algo.dynamics_members={self.dynamics_members}")
        _check(self.eval_interval >= 0, f"{p}.eval_interval", f"must be >= 0, got {self.eval_interval}")
        _check(self.eval_episodes >= 0, f"{p}.eval_episodes",
               f"must be >= 0 (0: one per env), got {self.eval_episodes}")
        _check(self.select_episodes >= 0, f"{p}.select_episodes",
               f"must be >= 0 (0: by OPE score), got {self.select_episodes}")
        _check(self.online_critic in ("offline_v", "fresh"), f"{p}.online_critic",
               f"must be offline_v (Uni-O4) or fresh (a new critic on algo.critic_obs), got '{self.online_critic}'")
        if self.online_critic == "offline_v":
            if self.critic_obs is None:
                self.critic_obs = list(self.actor_obs)
            _check(list(self.critic_obs) == list(self.actor_obs), f"{p}.critic_obs",
                   "the online critic starts as the offline V, which reads the dataset's observations (the "
                   f"actor's groups): set algo.critic_obs={list(self.actor_obs)} or leave it null, or use "
                   "algo.online_critic=fresh for a critic on other groups")

    @property
    def offline_iterations(self) -> int:
        return self.pretrain_iterations + self.improve_iterations

