"""The MuJoCo-family task contract (docs/architecture.md, contract 1: "the task contract").

A task is written once against :class:`PhysicsView` and runs unchanged on every MuJoCo-family
backend (``sim=mujoco``: CPU threads; ``sim=mjwarp``: MuJoCo Warp) through
``ctrl_rl.sims.mujoco_env.MjVecEnv``, which owns the VecEnv contract around it: decimation,
same-step auto-reset, ``final_obs``, episode statistics, state save/restore. The contract is
structural (no base class to inherit); ``tests/task_conformance.py: check_task`` checks a task
against it, and ``tests/test_task_contract.py`` runs that over every registered task and a task
defined in the test file.

Four parts, each listing exactly what the env and the commands read:

* :class:`MjTaskConfig`: the task's parameters (``task.kwargs``), a dataclass;
* :class:`MjTaskClass`: the class, which builds the model and then the task;
* :class:`MjTask`: the instance's attributes and step hooks;
* :class:`MjTaskExtras`: hooks the env looks for (``getattr``) and does without.

Call order (``N`` worlds; ``gen`` is the env's ``torch.Generator``, the only source of randomness
a hook may draw from, so a seed reproduces a run and a checkpoint resumes it; a hook draws the same
amount whatever the data, so a check skipped on a GPU does not shift the stream)::

    build   cfg = config.from_kwargs(**task.kwargs); robot = load_robot(cfg.robot) unless None
            model, layout = task_cls.build_model(cfg, robot); cfg.apply_physics(model, robot)
            physics = <backend>(model, N, device); task = task_cls(cfg, robot, model, layout, N, device)
    reset   randomize_model -> reset rows (all) -> sample_obs_noise -> observe
    step    sample_obs_noise -> joint_targets -> physics.step(ctrl, decimation) -> evaluate
            (then out_of_bounds, post_step_signals, metrics are read) -> observe(.., post_step_signals)
            = final_obs -> reset rows (ended) -> perturb -> observe (skipped on CPU when no row
            ended and perturb returned False: final_obs is returned again)
            every MjVecEnv.CHECK_EVERY steps: check_simulation
    reset rows(rows)   begin_reset -> sample_initial_state -> physics.write_rows(rows, ..) -> reset_rows
                       (every step, ``rows`` possibly all false: other rows must keep everything)
    state   get_state(physics) / set_state(state, physics), with the physics' own state
    commands  obs_terms, mirror (algo.symmetry), deploy_metadata (ctrl-rl export),
              gait_spec / gait_signals (ctrl-rl eval), render_model (play --video)

Nothing but the standard library is imported at run time: the deploy runtime has no torch or MuJoCo.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import mujoco
    import torch

    from ctrl_rl.mirror import EnvMirror


@runtime_checkable
class PhysicsView(Protocol):
    """What a task sees of the N worlds (``ctrl_rl.sims.mujoco_env.Physics`` on every backend). A task
    reads the views and changes the worlds only through :meth:`write_rows` and :meth:`set_model_field`."""

    model: mujoco.MjModel
    """The host model every world was built from (names, layout; never stepped)."""
    num_envs: int
    device: torch.device
    batched_rays: bool
    """Whether :meth:`cast_down` casts every world's rays in one native call (a scan can run every step)."""

    @property
    def qpos(self) -> torch.Tensor:
        """``[N, nq]``, read-only (float64 on CPU, float32 on warp)."""

    @property
    def qvel(self) -> torch.Tensor:
        """``[N, nv]``, read-only."""

    @property
    def sensordata(self) -> torch.Tensor:
        """``[N, nsensordata]``, read-only: after a step, the sensors of its last substep's start."""

    def write_rows(self, rows: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        """Set the worlds where ``rows[N]`` (bool) is true from full-size ``qpos``/``qvel``; their sensors follow."""

    def set_model_field(self, name: str, values: torch.Tensor) -> None:
        """Per-world model parameters, ``values[N, *field.shape]`` (domain randomization)."""

    def model_field(self, name: str) -> torch.Tensor:
        """``[N, *field.shape]``, the current per-world values (a copy)."""

    def cast_down(self, start: torch.Tensor) -> torch.Tensor:
        """``[N, R]`` distances straight down from ``start[N, R, 3]`` to the terrain, -1 for a miss."""


@runtime_checkable
class NamedTerm(Protocol):
    """One slice of an observation group (``ctrl_rl.robots.terms.ObsTerm`` is one)."""

    @property
    def name(self) -> str: ...

    @property
    def dim(self) -> int: ...


@runtime_checkable
class MjTaskConfig(Protocol):
    """A task's parameters: a dataclass whose fields are ``task.kwargs`` (each documented under its
    declaration: ``--help`` prints them), registered with ``ctrl_rl.tasks.register_task(config=...)``.
    Optional: a class attribute ``TRAINING_ONLY``, the names of fields that shape training alone (a start
    curriculum); a checkpoint's eval, play, export and collect set them back to their defaults."""

    @property
    def robot(self) -> str | None:
        """The robot (a shipped name or a robot YAML path), loaded and handed to ``build_model``,
        ``apply_physics`` and the task; None (a class attribute will do): the task needs no robot."""

    @classmethod
    def from_kwargs(cls, **kwargs: Any) -> MjTaskConfig:
        """The config from ``task.kwargs`` over the registration's ``defaults``; a ``ValueError`` naming
        the valid parameters for a wrong one (the command line fails before any work)."""

    def apply_physics(self, model: mujoco.MjModel, robot: Any) -> Any:
        """Set the task's physics profile (timestep, solver budget) on the compiled ``model``, which every
        backend then steps; runs once, before the physics is built."""


@runtime_checkable
class MjTaskClass(Protocol):
    """The class registered as ``register_task(task=...)``."""

    def build_model(self, cfg: Any, robot: Any) -> tuple[mujoco.MjModel, Any]:
        """(A classmethod.) The model the task runs on and a ``layout`` the constructor gets back (e.g. the
        sensors' slices of ``sensordata``). Runs when an env is built; the model does not depend on ``num_envs``."""

    def __call__(self, cfg: Any, robot: Any, model: mujoco.MjModel, layout: Any, num_envs: int,
                 device: torch.device) -> MjTask:
        """The task for ``num_envs`` worlds of ``model`` on ``device``; every buffer ``[num_envs, ...]``."""


@runtime_checkable
class MjTask(Protocol):
    """A task instance, as ``MjVecEnv`` drives it.

    The attributes up to ``action_bounds`` are read when the env is built (``decimation`` every step),
    ``robot`` by ``deploy_metadata``; ``out_of_bounds``, ``post_step_signals`` and ``metrics`` after every
    :meth:`evaluate`. ``physics`` is a
    :class:`PhysicsView`, ``rows`` a bool ``[N]`` mask, ``gen`` the env's generator; tensors stay on
    ``device``. A hook changes only its task's buffers and, where said, the physics.
    """

    action_dim: int
    """Columns of the policy's ``actions``."""
    obs_dims: Mapping[str, int]
    """Observation groups (``"policy"`` always; ``"critic"`` for privileged inputs) and their widths."""
    obs_terms: Mapping[str, Sequence[NamedTerm]]
    """Each group's terms in order; their ``dim`` sum to the group's width (observation history stacks them)."""
    max_episode_length: int
    """Control steps after which an episode is truncated."""
    step_dt: float
    """Seconds per control step: the model's timestep times :attr:`decimation`."""
    decimation: int
    """Physics steps per control step."""
    action_bounds: tuple[float, float] | None
    """The range the policy's actions are expected in (the env and the exported graph clip to it), or
    None for unbounded actions (a task that clips them itself exports ``action_clip``)."""
    robot: Any
    """The ``RobotConfig`` the task was built with, or None; the deploy bundle's ``robot_derived`` reads it."""
    out_of_bounds: torch.Tensor
    """Bool ``[N]``, set by :meth:`evaluate`: episodes cut short without a failure (time-outs: bootstrapped)."""
    post_step_signals: Any
    """Set by :meth:`evaluate`: what it read of the state, passed back to :meth:`observe` for ``final_obs``."""
    metrics: Mapping[str, torch.Tensor]
    """Set by :meth:`evaluate`: per-env ``[N]`` measures of the step (``info["metrics"]``; ``ctrl-rl eval``
    averages them over each env's episode)."""

    def randomize_model(self, physics: PhysicsView, gen: torch.Generator) -> None:
        """At every ``env.reset``: may set per-world model parameters (``physics.set_model_field``)."""

    def begin_reset(self, physics: PhysicsView, rows: torch.Tensor, gen: torch.Generator) -> None:
        """First of a reset, while ``rows``' final state is still in ``physics`` (a curriculum reads it):
        may change the task's buffers of ``rows``."""

    def sample_initial_state(self, physics: PhysicsView, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """Initial ``qpos [N, nq]`` and ``qvel [N, nv]`` for every row (the env writes the reset rows'); may
        keep what :meth:`reset_rows` needs of the draw (rough terrain: the spawn points)."""

    def reset_rows(self, rows: torch.Tensor, gen: torch.Generator) -> None:
        """After the reset rows' state was written: fresh buffers (commands, targets, last actions) for ``rows``,
        every other row's kept as it was."""

    def sample_obs_noise(self, gen: torch.Generator) -> Any:
        """Once per step (and reset): this step's observation noise, handed to both :meth:`observe` calls so
        ``final_obs`` and ``obs`` see the same noise; None when the task adds none."""

    def joint_targets(self, actions: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        """In a step, before the physics: ``ctrl [N, nu]`` that the physics holds for :attr:`decimation`
        substeps, from ``actions [N, action_dim]`` (any values: clip them to :attr:`action_bounds`); may keep
        the actions (a delay line, the last action)."""

    def evaluate(self, physics: PhysicsView, episode_length: torch.Tensor,
                 gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, Mapping[str, Any]]:
        """After the physics step, ``episode_length [N]`` already counting it: ``(reward [N] float32,
        terminated [N] bool, log)``, ``log`` scalars for TensorBoard. Sets :attr:`out_of_bounds`,
        :attr:`post_step_signals` and :attr:`metrics`; may advance the task's buffers. Reads the physics only."""

    def observe(self, physics: PhysicsView, noise: Any, signals: Any = None) -> dict[str, torch.Tensor]:
        """``{group: [N, obs_dims[group]] float32}`` of the current state with ``noise``; ``signals``: this
        state's :attr:`post_step_signals`, when given the same result as reading the physics again.
        Changes nothing."""

    def perturb(self, physics: PhysicsView, episode_length: torch.Tensor, gen: torch.Generator) -> bool | None:
        """After the resets: may move worlds (``physics.write_rows``: pushes). Returns False only when
        certainly none moved (on CPU the env then reuses ``final_obs``); None or True: observe again."""

    def check_simulation(self) -> None:
        """Every ``MjVecEnv.CHECK_EVERY`` steps, outside the step (a host read is fine): raise
        ``ctrl_rl.env.SimulationError`` naming the fix when the simulation cannot be right."""

    def get_state(self, physics: PhysicsView) -> dict[str, Any]:
        """Copies of every buffer a later step reads, and of the model fields the task randomized
        (the physics saves its own state): with them a restored env repeats the next steps exactly."""

    def set_state(self, state: dict[str, Any], physics: PhysicsView) -> None:
        """Restore :meth:`get_state` (after the physics' own state), copying, never aliasing ``state``."""

    def mirror(self) -> EnvMirror | None:
        """The left/right mirror maps of every term and of the actions (``algo.symmetry``), or None."""

    def deploy_metadata(self) -> dict[str, Any]:
        """JSON-serialisable entries of the exported bundle (``ctrl-rl export``): a robot task's observation
        terms, joint order, default pose, gains, limits, ``action_clip``, control dt; ``{}`` will do."""


@runtime_checkable
class MjTaskExtras(Protocol):
    """Hooks the env looks for with ``getattr``; a task without one gets what each says."""

    graph_safe: bool
    """The step hooks make no host reads and touch the physics only through ``write_rows`` and
    ``sensordata``, so ``sim.cuda_graph`` may replay them. Absent: False (``sim.cuda_graph`` is refused)."""
    episode_metrics: Mapping[str, torch.Tensor]
    """Set by :meth:`MjTask.evaluate`: per-env ``[N]`` measures of the episode as if it ended at this step
    (``success_rate``: 1 or 0); the env reports them as ``info["episode_metrics"]`` and ``ctrl-rl eval``
    averages the finished episodes' values (the reach task's success). Absent: none."""

    def gait_spec(self, model: mujoco.MjModel) -> dict[str, Any]:
        """A legged robot's constants for the gait report (``ctrl-rl eval``; ``tasks/locomotion/gait_signals.py``).
        Absent: the env records no gait (``record_gait()`` is None)."""

    def gait_signals(self) -> dict[str, torch.Tensor]:
        """This step's per-env gait signals, read after :meth:`MjTask.evaluate` once ``gait_spec`` was asked for."""

    def render_model(self) -> mujoco.MjModel:
        """The model to draw (same joints, more geoms: visual meshes). Absent: the physics' model."""
