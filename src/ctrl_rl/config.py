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
from typing import Any, ClassVar, Dict, List, Optional


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


ACTIVATIONS = ("elu", "relu", "tanh", "silu", "gelu", "leaky_relu")
"""``algo.activation`` choices (``ctrl_rl.nets.mlp`` builds each)."""
RNN_TYPES = ("none", "lstm", "gru")
"""``algo.rnn_type`` choices (``ctrl_rl.nets.memory`` builds each)."""


@dataclass
class LearnerConfig:
    """What every learner's config has; a learner's schema derives from it (``ctrl_rl.algos.registry``)."""

    requires_dataset: ClassVar[bool] = False
    """Learners that train from ``dataset=`` say so (checked once the whole config is composed)."""
    min_iterations: ClassVar[int] = 1
    """The smallest ``runner.max_iterations`` this learner runs (Uni-O4: 0, its offline stage alone)."""
    runner_docs: ClassVar[Dict[str, str]] = {}
    """What a ``runner.<key>`` means for this learner where ``RunnerConfig``'s description does not
    hold (``ctrl-rl train --help`` prints this one instead)."""

    name: str = ""
    """Algorithm id (``algo=<name>`` picks the learner and this schema)."""
    actor_obs: List[str] = field(default_factory=lambda: ["policy"])
    """Observation groups concatenated into the actor's input."""
    normalize_obs: bool = True
    """Running mean/std observation normalization, saved and exported with the policy."""

    def __post_init__(self) -> None:
        _check(len(self.actor_obs) > 0, "algo.actor_obs", "needs at least one observation group, e.g. [policy]")

    def check_env(self, num_envs: int) -> None:
        """Checks that need the env size (called by ``TrainConfig``); none by default."""

    def check_complete(self) -> None:
        """Keys the schema's defaults leave empty that a run needs (checked once the whole config is
        composed, not when the schema is built); none by default."""


@dataclass
class PolicyNetConfig(LearnerConfig):
    """The policy network's shape."""

    actor_hidden: List[int] = field(default_factory=lambda: [256, 256])
    """Actor MLP hidden sizes."""
    activation: str = "elu"
    """Hidden activation: elu, relu, tanh, silu, gelu, leaky_relu."""

    def __post_init__(self) -> None:
        super().__post_init__()
        _check(self.activation in ACTIVATIONS, "algo.activation",
               f"must be one of: {', '.join(ACTIVATIONS)} (got '{self.activation}')")


@dataclass
class ActorCriticConfig(PolicyNetConfig):
    """A policy and a critic, each on its own observation groups."""

    critic_hidden: List[int] = field(default_factory=lambda: [256, 256])
    """Critic MLP hidden sizes."""
    critic_obs: Optional[List[str]] = None
    """Groups for the critic; ``None``: ``["critic"]`` if the env has that group, else the actor's."""


@dataclass
class GaussianPolicyConfig(PolicyNetConfig):
    """A Gaussian policy's standard deviation."""

    init_std: float = 1.0
    """Initial action standard deviation."""
    std_type: str = "scalar"
    """``scalar``: learned state-independent std; ``state_dependent``: the actor outputs it."""
    min_std: float = 1e-3
    """Lower bound on the action std (keeps log-probs finite)."""
    max_std: float = 10.0
    """Upper bound on the action std."""

    def __post_init__(self) -> None:
        super().__post_init__()
        _positive(self, "algo", "init_std", "min_std", "max_std")
        _check(self.min_std < self.max_std, "algo.min_std", "must be below algo.max_std")
        _check(self.std_type in ("scalar", "state_dependent"), "algo.std_type",
               f"must be one of: scalar, state_dependent (got '{self.std_type}')")


@dataclass
class MemoryConfig:
    """A recurrent core in front of the actor's MLP (and the critic's): rsl_rl's recurrent actor-critic."""

    rnn_type: str = "none"
    """``lstm`` or ``gru``: the policy carries a memory across control steps (exported with its state
    as an ONNX input/output); ``none``: a feed-forward policy on the current observation."""
    rnn_hidden_size: int = 256
    """Width of the recurrent state (and of the features the MLPs read)."""
    rnn_num_layers: int = 1
    """Stacked recurrent layers."""
    rnn_critic: bool = True
    """The critic has a memory of its own; false: a feed-forward critic (enough when it sees privileged state)."""

    def __post_init__(self) -> None:
        _check(self.rnn_type in RNN_TYPES, "algo.rnn_type",
               f"must be one of: {', '.join(RNN_TYPES)} (got '{self.rnn_type}')")
        _positive(self, "algo", "rnn_hidden_size", "rnn_num_layers")
        super().__post_init__()  # type: ignore[misc]


@dataclass
class AcceleratedConfig:
    """How the update runs (not what it computes: both options are tested equal to eager)."""

    compile: bool = False
    """``torch.compile`` the update (forward and backward graphs); learning rates become device
    tensors updated on the device (no host sync per minibatch)."""
    cudagraphs: bool = False
    """Capture one whole gradient step as a CUDA graph and replay it (LeanRL's recipe; Adam becomes
    capturable). CUDA only: on cpu the same graph-safe step runs uncaptured."""
    tf32: bool = True
    """CUDA: the update's float32 matrix products run on TF32 tensor cores (float32 range and
    accumulation, 10-bit mantissa inputs), as Isaac Lab's and mjlab's train scripts set it; false:
    full float32. No effect on CPU, or on collection (the policy acting runs in float32)."""
    autocast: str = "none"
    """``bf16``: the update's forward and backward passes run under ``torch.autocast`` in bfloat16
    (parameters, Adam's state and the optimizer step stay float32; FastSAC's setting); PPO with a Gaussian,
    feed-forward actor first recomputes the old policy and values in the same arithmetic, so the ratio
    starts at 1 (``precision.rebase_in_update_precision``). On a GPU it halves the update's memory
    traffic; on a CPU with bfloat16 instructions (AVX512-BF16 or AMX: Zen 4, Sapphire Rapids) one core
    multiplies 3x faster than in float32, and the gait recipe's update took 0.78 against 1.31 s per
    iteration (docs/experiments/threads.md); on other CPUs it is emulated and slower (a warning says
    so). A different arithmetic is a different training. ``auto``: bf16 on a device with bfloat16 in
    hardware, float32 elsewhere (said once in the log; the gait recipe's setting). ``none``: off."""

    def __post_init__(self) -> None:
        _check(self.autocast in ("none", "bf16", "auto"), "algo.autocast",
               f"must be one of: none, bf16, auto (got '{self.autocast}')")
        parent = getattr(super(), "__post_init__", None)
        if parent is not None:
            parent()


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
    (Isaac Lab's RL API), isaacgym (legged_gym-style tasks)."""
    deterministic: bool = False
    """mjwarp: sorted contacts and constraint rows and order-invariant atomics, so a GPU run
    reproduces bit for bit (resume included); costs GPU speed (BENCHMARKS.md, "GPU"). Warp's CPU
    kernels are deterministic either way."""
    nconmax: Optional[int] = None
    """mjwarp: contacts allocated per world (None: the model's upper bound, ``sims/warp_alloc.py``).
    An overflow stops the run with an error naming this key."""
    njmax: Optional[int] = None
    """mjwarp: constraint rows allocated per world (None: the model's upper bound)."""
    cuda_graph: bool = False
    """mjwarp on CUDA: replay the env step's torch work (targets, rewards, resets, observations) as
    three CUDA graphs around the physics' own, instead of launching hundreds of small kernels from
    Python each step (BENCHMARKS.md, "GPU"). Flat-ground tasks only; on CPU the same code runs eagerly."""

    PHYSICS_KEYS: ClassVar[tuple[str, ...]] = ("deterministic", "nconmax", "njmax", "cuda_graph")

    def __post_init__(self) -> None:
        for key in ("nconmax", "njmax"):
            value = getattr(self, key)
            _check(value is None or value > 0, f"sim.{key}", f"must be a positive integer or null, got {value}")
        if self.name != "mjwarp":
            for key in self.PHYSICS_KEYS:
                _check(getattr(self, key) in (None, False), f"sim.{key}",
                       f"applies to sim=mjwarp (MuJoCo Warp) only; sim={self.name} takes no such setting")

    def physics(self) -> dict[str, Any]:
        """The set physics options, for ``make_env(..., physics=...)``."""
        return {k: getattr(self, k) for k in self.PHYSICS_KEYS if getattr(self, k) not in (None, False)}


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
    """The run's length in iterations (each: num_steps_per_env steps of every env, then one update),
    a total: a resume trains up to it; ``--more N`` with ``--checkpoint`` trains N past the checkpoint."""
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
    stagger_episodes: bool = False
    """Start each env's first episode at a random step of it (rsl_rl's ``init_at_random_ep_len``,
    ``VecEnv.stagger_episodes``), so episodes end at different steps. Tasks with fixed-length episodes need
    it (the arm tasks: every env otherwise resets on the same step, and each 24-step rollout trains on one
    phase of the episode); sims whose episode counter lives inside the simulator (gymnasium) refuse it."""
    keep_best: str = ""
    """A logged value to keep the best model by (a TensorBoard tag, higher is better, e.g.
    ``Metrics/success_rate``): ``model_best.pt`` is written whenever its mean over the last ``best_window``
    iterations that logged it is the highest yet (SB3's ``EvalCallback`` and robomimic keep a best model too).
    A fine-tuning run whose success peaks and then falls keeps its peak: evaluate or export
    ``<run>/model_best.pt``. "": off."""
    best_window: int = 10
    """Iterations of ``keep_best`` averaged per score (one iteration's success rate counts a few episodes)."""
    keep_heap: bool = True
    """On CPU (glibc), keep freed memory in the heap instead of returning large blocks to the kernel,
    so the update's large tensors do not page-fault at every step (``ctrl_rl/utils/heap.py``)."""

    def __post_init__(self) -> None:
        _positive(self, "runner", "save_interval")  # max_iterations: by TrainConfig, for its learner
        _positive(self, "runner", "best_window")


@dataclass
class TrainConfig:
    algo: Any = field(default_factory=LearnerConfig)
    """The algorithm's config; its schema is the registered learner's (``ctrl_rl.algos.registry``)."""
    task: TaskConfig = field(default_factory=TaskConfig)
    sim: SimConfig = field(default_factory=SimConfig)
    env: EnvConfig = field(default_factory=EnvConfig)
    runner: RunnerConfig = field(default_factory=RunnerConfig)
    seed: int = 42
    """Seeds torch, numpy, python and the envs."""
    device: str = "cpu"
    """Torch device for envs and learner: cpu, cuda, cuda:1, ... (under torchrun each rank takes
    ``cuda:<LOCAL_RANK>``)."""
    threads: Optional[int] = None
    """CPU threads for torch's operators and MuJoCo's worker pool; null: torch 1, MuJoCo every core
    (torch's thread team collapses when anything else runs on the machine; ``utils/threads.py``).
    The run header prints the choice."""
    update_threads: Optional[int] = None
    """Torch threads for the learner's update alone (null: ``threads``' plan). On an idle machine its big
    matmuls gain from every core (an option: the gait recipe's preset stays at 1, its rows are measured there;
    the two counts do not give bit-identical updates); on a busy one keep null."""
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
        for key in ("threads", "update_threads"):
            value = getattr(self, key)
            _check(value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 1),
                   key, f"must be a positive integer or null, got {value!r} (e.g. {key}=2)")
        for key, value in _floats(self):
            _check(not math.isnan(value), key, "must be a number, got nan")
        least = self.algo.min_iterations
        _check(self.runner.max_iterations >= least, "runner.max_iterations",
               (f"must be >= {least} for algo={self.algo.name}" if least != 1 else "must be a positive integer")
               + f", got {self.runner.max_iterations} (e.g. runner.max_iterations=1500)")
        self.algo.check_env(self.env.num_envs)
        kw, updates = self.task.kwargs, getattr(self.algo, "polish_start", 0)
        if updates and (kw.get("polish_rewards") or kw.get("polish_action_filter") or kw.get("polish_contact")):
            # the gait recipe's polish has a task half (rewards, filter, contact) and a learner half (std): one start
            want = updates * self.algo.num_steps_per_env
            if not kw.get("polish_start"):  # derived, so a changed algo.num_steps_per_env keeps them together
                self.task.kwargs = {**kw, "polish_start": want}
            _check(self.task.kwargs["polish_start"] == want, "task.kwargs.polish_start",
                   f"counts control steps and must be algo.polish_start x algo.num_steps_per_env = {want} so that "
                   f"both halves of the polish start together (or leave it out: it is derived), got "
                   f"{self.task.kwargs['polish_start']}")

    def check_complete(self, inputs: bool = True) -> None:
        """Keys the defaults leave empty but this run needs (checked once the whole config is composed).
        ``inputs=False`` (``--help``, ``--cfg``): not the run's inputs (``dataset=``, ``algo.teacher``)."""
        if inputs:
            self.algo.check_complete()
        if inputs and self.algo.requires_dataset:
            _check(bool(self.dataset), "dataset",
                   f"algo={self.algo.name} trains from a dataset: pass "
                   "dataset=<file.hdf5 | minari:<id> | robotlogs:<dir>> "
                   "(record one with `ctrl-rl collect <checkpoint> --output data.hdf5`)")
        _check(self.device == "cpu" or self.device.startswith("cuda") or self.device == "mps", "device",
               f"must be cpu, cuda or cuda:<index> (got '{self.device}')")
