"""Typed configs of the learners that train from a dataset (``dataset=<file>``): behavior cloning.

Same conventions as ``ctrl_rl/config.py`` (validated when built, every field documented where it
is declared); importing ``ctrl_rl.config`` registers them in ``ALGO_SCHEMAS``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, List

from ctrl_rl.config import ALGO_SCHEMAS, _check, _positive

BC_HEADS = ("gaussian", "flow")


@dataclass
class BCConfig:
    """Behavior cloning: maximum likelihood of the dataset's actions (Gaussian head) or
    conditional flow matching (flow head), optionally on chunks of the next ``chunk_size`` actions."""

    requires_dataset: ClassVar[bool] = True

    name: str = "bc"
    """Algorithm id."""
    head: str = "gaussian"
    """``gaussian``: a Gaussian policy trained by negative log-likelihood (deploys its mean);
    ``flow``: a flow-matching policy (FPO's actor) trained by the CFM loss; keeps multimodal data multimodal."""
    chunk_size: int = 1
    """k: the policy predicts the next k actions of its episode (action chunking; a residual
    learner executes ``algo.base_execute`` of them before asking again). 1: one action."""
    actor_hidden: List[int] = field(default_factory=lambda: [256, 256])
    """Policy MLP hidden sizes."""
    activation: str = "elu"
    """Hidden activation: elu, relu, tanh, silu, gelu, leaky_relu."""
    learning_rate: float = 1e-3
    """Adam step size."""
    weight_decay: float = 0.0
    """Adam(W) weight decay."""
    batch_size: int = 256
    """Dataset rows per gradient step (drawn uniformly with replacement)."""
    updates_per_iteration: int = 200
    """Gradient steps per iteration (an iteration = these steps, then maybe an evaluation, then maybe a checkpoint)."""
    max_grad_norm: float = 1.0
    """Global gradient-norm clip; 0 = off."""
    eval_interval: int = 5
    """Evaluate every this many iterations: one deterministic episode in each of the env.num_envs
    envs, logged as ``Train/mean_reward``; 0 = only after the last iteration."""
    init_std: float = 1.0
    """Gaussian head: initial action std."""
    std_type: str = "state_dependent"
    """Gaussian head: ``state_dependent`` std (heteroscedastic data) or ``scalar``."""
    min_std: float = 1e-2
    """Gaussian head: lower bound of the std (keeps the likelihood of near-deterministic data finite)."""
    max_std: float = 10.0
    """Gaussian head: upper bound of the std."""
    flow_steps: int = 10
    """Flow head: Euler steps from noise to action."""
    time_features: int = 4
    """Flow head: sin/cos frequencies of the time embedding."""
    normalize_obs: bool = True
    """Normalize observations by the dataset's mean/std (saved and exported with the policy)."""
    actor_obs: List[str] = field(default_factory=lambda: ["policy"])
    """Observation groups the policy reads; the dataset's ``observations`` are these, concatenated."""

    def __post_init__(self) -> None:
        p = "algo"
        _positive(self, p, "chunk_size", "learning_rate", "batch_size", "updates_per_iteration", "init_std",
                  "min_std", "max_std", "flow_steps", "time_features")
        _check(self.head in BC_HEADS, f"{p}.head", f"must be one of: {', '.join(BC_HEADS)} (got '{self.head}')")
        _check(self.eval_interval >= 0, f"{p}.eval_interval",
               f"must be >= 0 (0: only at the end), got {self.eval_interval}")
        _check(self.weight_decay >= 0 and self.max_grad_norm >= 0, f"{p}.weight_decay",
               "algo.weight_decay and algo.max_grad_norm must be >= 0")
        _check(self.min_std < self.max_std, f"{p}.min_std", "must be below algo.max_std")
        _check(self.std_type in ("scalar", "state_dependent"), f"{p}.std_type",
               f"must be one of: scalar, state_dependent (got '{self.std_type}')")
        from ctrl_rl.nets.mlp import ACTIVATIONS

        _check(self.activation in ACTIVATIONS, f"{p}.activation",
               f"must be one of: {', '.join(ACTIVATIONS)} (got '{self.activation}')")
        _check(len(self.actor_obs) > 0, f"{p}.actor_obs", "needs at least one observation group, e.g. [policy]")

    def check_env(self, num_envs: int) -> None:
        """Nothing depends on the env count (it is the number of evaluation episodes)."""


ALGO_SCHEMAS.update(bc=BCConfig)
