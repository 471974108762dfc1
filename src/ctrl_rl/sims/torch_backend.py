"""The torch sim (``sim=torch``): the step / auto-reset / bookkeeping shared by all pure-torch tasks.

A task only writes its MDP as pure tensor functions (initial-state sampler, dynamics with
reward and termination, observation). :class:`TorchVecEnv` turns those into the
:class:`~ctrl_rl.env.VecEnv` contract for thousands of envs on any device. Every step
does the same tensor work whatever finished, so a GPU never waits on the host: finished
rows are reset with ``torch.where`` against fresh initial states sampled for *every* row
(cheap, and it makes the random stream independent of which rows finished).

The tasks live in the task tree (``ctrl_rl.tasks.classic``), each module ending in its
:func:`register_torch_task`.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from abc import abstractmethod
from typing import Any, ClassVar

import torch

from ctrl_rl.env import Obs, StepResult, VecEnv
from ctrl_rl.registry import Registry
from ctrl_rl.utils.modules import import_package_modules

State = dict[str, torch.Tensor]
"""Physics state: named tensors, each ``[num_envs]`` or ``[num_envs, k]`` (float32 unless a
task documents why it integrates in float64)."""

# Cody-Waite split of 2*pi: _TWO_PI_HI is float32(2*pi), _TWO_PI_LO the remainder, so
# ``x - k*HI - k*LO`` subtracts 2*pi*k with one rounding instead of two.
_TWO_PI_HI = float(torch.tensor(2.0 * math.pi, dtype=torch.float32))
_TWO_PI_LO = 2.0 * math.pi - _TWO_PI_HI


def wrap_to_pi(angle: torch.Tensor) -> torch.Tensor:
    """Map angles to [-pi, pi], bit-exactly the identity for ``|angle| <= pi``.

    Float32 angles that grow without bound lose precision (ulp(80 rad) ~ 8e-6), and a plain
    ``remainder(x + pi, 2pi) - pi`` rounds on every call; this version rounds only on the
    steps that actually wrap (exact for the subtraction of HI by Sterbenz's lemma).
    """
    turns = torch.round(angle / _TWO_PI_HI)
    return (angle - turns * _TWO_PI_HI) - turns * _TWO_PI_LO


def where_rows(rows: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``torch.where`` with a ``[N]`` row mask broadcast over trailing dims of ``a``/``b``."""
    if a.dim() > 1:
        rows = rows.view(rows.shape + (1,) * (a.dim() - 1))
    return torch.where(rows, a, b)


def task_number(name: str, value: object, minimum: float | None = None, strict: bool = False) -> float:
    """A task parameter (``task.kwargs.<name>``) as a finite float, checked where the task declares it:
    the message names the key and a valid example, instead of a ZeroDivisionError three frames down."""
    try:
        if isinstance(value, bool):
            raise TypeError
        v = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(f"task.kwargs.{name} must be a number, got {value!r} (e.g. +task.kwargs.{name}=1.0)") from None
    if not math.isfinite(v):
        raise ValueError(f"task.kwargs.{name} must be finite, got {value!r}")
    if minimum is not None and (v <= minimum if strict else v < minimum):
        bound = f"> {minimum:g}" if strict else f">= {minimum:g}"
        raise ValueError(f"task.kwargs.{name} must be {bound}, got {value!r}")
    return v


def task_choice(name: str, value: object, choices: dict[str, object]) -> object:
    """A task parameter that names one of ``choices`` (the value passes through if already one)."""
    if value in choices.values():
        return value
    if value not in choices:
        raise ValueError(f"task.kwargs.{name} must be one of {', '.join(choices)}, got {value!r}")
    return choices[value]  # type: ignore[index]


@dataclasses.dataclass
class TaskParams:
    """The parameters every pure-torch task takes (``task.kwargs.<name>``). A task declares its own
    as a subclass, each field documented under its declaration (``--help`` prints it) and checked
    in ``__post_init__`` with :func:`task_number` / :func:`task_choice`."""

    max_episode_length: int | None = None
    """Episode length in control steps (truncation); null: the task's own."""

    def __post_init__(self) -> None:
        if self.max_episode_length is not None:
            steps = task_number("max_episode_length", self.max_episode_length, 1.0)
            if not steps.is_integer():
                raise ValueError(f"task.kwargs.max_episode_length must be a whole number of steps, got "
                                 f"{self.max_episode_length!r}")
            self.max_episode_length = int(steps)

    @classmethod
    def make(cls, task: str, **kwargs: Any) -> TaskParams:
        """``cls(**kwargs)``, a wrong name refused naming the declared ones."""
        names = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(kwargs) - set(names))
        if unknown:
            raise ValueError(f"task {task!r} has no parameter {unknown[0]!r} (task.kwargs); valid: {', '.join(names)}")
        return cls(**kwargs)


class TorchVecEnv(VecEnv):
    """Base of the pure-torch tasks: subclasses define the MDP, this class the contract.

    Subclasses set the class attributes ``action_dim``, ``obs_dims``,
    ``max_episode_length`` and ``step_dt`` and implement :meth:`_initial_state`,
    :meth:`_dynamics` and :meth:`_observe`. Actions arrive clipped to ``[-1, 1]``; the
    subclass scales them to physical units.

    Parameters (``task.kwargs``) are the fields of the class's :attr:`Params`, built and checked
    before anything else and kept as ``self.params``; :meth:`_configure` derives what the task
    needs from them.

    Constructing with ``seed=s`` is the same as calling ``reset(seed=s)``; with no seed the
    generator is seeded non-deterministically (never from torch's global RNG).
    """

    Params: ClassVar[type[TaskParams]] = TaskParams

    def __init__(
        self,
        num_envs: int,
        device: str | torch.device = "cpu",
        seed: int | None = None,
        **params: Any,
    ) -> None:
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        self.params = self.Params.make(type(self).__name__, **params)
        self.num_envs = int(num_envs)
        self.device = torch.empty(0, device=device).device  # canonical, e.g. cuda -> cuda:0
        if self.params.max_episode_length is not None:
            self.max_episode_length = self.params.max_episode_length
        self._configure(self.params)
        self._generator = torch.Generator(device=self.device)
        if seed is None:
            self._generator.seed()
        self.reset(seed=seed)

    # ---- task hooks -------------------------------------------------------------------
    def _configure(self, params: Any) -> None:
        """Derive the task's constants from its checked ``params`` (before the first reset)."""

    @abstractmethod
    def _initial_state(self) -> State:
        """Sample an initial state for every row from ``self._generator``."""

    @abstractmethod
    def _dynamics(
        self, state: State, action: torch.Tensor
    ) -> tuple[State, torch.Tensor, torch.Tensor]:
        """``(next_state, reward[N] float32, terminated[N] bool)`` for ``action`` in [-1, 1].

        Pure: must not modify ``state`` in place (it is the env's current state).
        """

    @abstractmethod
    def _observe(self, state: State) -> Obs:
        """Observation groups of ``state``; keys and dims must match ``obs_dims``.

        Must be a deterministic row-wise function of the state (no batch statistics, no
        random noise): the base observes twice per step and relies on equal rows.
        """

    # ---- helpers for subclasses -------------------------------------------------------
    def _uniform(
        self, low: float, high: float, *trailing: int, dtype: torch.dtype = torch.float32
    ) -> torch.Tensor:
        """``U[low, high)`` of shape ``[num_envs, *trailing]`` from the env's generator."""
        out = torch.empty((self.num_envs, *trailing), dtype=dtype, device=self.device)
        return out.uniform_(low, high, generator=self._generator)

    # ---- VecEnv ---------------------------------------------------------------------
    def reset(self, seed: int | None = None) -> Obs:
        """Reset every env; a ``seed`` reseeds the env's generator (the whole batch)."""
        if seed is not None:
            self._generator.manual_seed(int(seed))
        self._state = self._initial_state()
        self._episode_length = torch.zeros(self.num_envs, dtype=torch.int64, device=self.device)
        self._episode_return = torch.zeros(self.num_envs, dtype=torch.float32, device=self.device)
        self._obs = self._observe(self._state)
        return self._obs

    def stagger_episodes(self) -> None:
        self._episode_length = torch.randint(0, self.max_episode_length, (self.num_envs,), generator=self._generator,
                                             device=self.device)

    def step(self, actions: torch.Tensor) -> StepResult:
        """One control step for all rows, with time limits and same-step auto-reset."""
        if actions.shape != (self.num_envs, self.action_dim):
            raise ValueError(
                f"actions must have shape ({self.num_envs}, {self.action_dim}), "
                f"got {tuple(actions.shape)}"
            )
        action = actions.to(device=self.device, dtype=torch.float32).clamp(-1.0, 1.0)
        next_state, reward, terminated = self._dynamics(self._state, action)

        length = self._episode_length + 1
        episode_return = self._episode_return + reward
        # A terminal state on the last step counts as terminated, never both (contract 1).
        truncated = (length >= self.max_episode_length) & ~terminated
        done = terminated | truncated

        final_obs = self._observe(next_state)
        initial = self._initial_state()
        self._state = {k: where_rows(done, initial[k], v) for k, v in next_state.items()}
        # Unfinished rows hold the same state as in next_state, so (observation being a
        # deterministic row-wise function) they equal final_obs bit for bit. Cheaper on CPU
        # than a torch.where over the [N, dim] observations.
        obs = self._observe(self._state)
        self._obs = obs
        self._episode_length = torch.where(done, 0, length)
        self._episode_return = torch.where(done, 0.0, episode_return)
        info: dict[str, Any] = {
            "final_obs": final_obs,
            "episode": {"return": episode_return, "length": length},
        }
        return obs, reward, terminated, truncated, info

    def get_state(self) -> dict[str, Any]:
        """Physics state, counters, returns, generator state and current obs (copies)."""
        return {
            "state": {k: v.clone() for k, v in self._state.items()},
            "episode_length": self._episode_length.clone(),
            "episode_return": self._episode_return.clone(),
            "generator": self._generator.get_state(),
            "obs": {k: v.clone() for k, v in self._obs.items()},
        }

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`get_state`'s output (possibly saved from another device).

        ``obs`` is restored as saved, not recomputed: recomputing may differ in the last bit
        (vectorised and scalar kernels round differently), and resuming must be exact.
        """
        expected = self._state.keys()
        if state["state"].keys() != expected:
            raise ValueError(
                f"state keys {sorted(state['state'])} do not match this task's {sorted(expected)}"
            )
        if tuple(state["episode_length"].shape) != (self.num_envs,):
            size = state["episode_length"].shape[0]
            raise ValueError(f"state is for {size} envs, this env has {self.num_envs}")
        dev = self.device
        # Cast to the task's own dtypes, so a hand-written state (tests, curricula) works too.
        self._state = {
            k: v.to(dev, self._state[k].dtype, copy=True) for k, v in state["state"].items()
        }
        self._episode_length = state["episode_length"].to(dev, copy=True)
        self._episode_return = state["episode_return"].to(dev, copy=True)
        try:
            self._generator.set_state(state["generator"])
        except RuntimeError:  # saved on another device type: CPU and CUDA states differ in layout
            logging.getLogger(__name__).warning(
                "env RNG state comes from another device type: reseeded (resume is exact only on "
                "the device that wrote the checkpoint)")
            self._generator.seed()
        self._obs = {k: v.to(dev, copy=True) for k, v in state["obs"].items()}

    @property
    def obs(self) -> Obs:
        """The current observation (what the last ``reset``/``step`` returned)."""
        return self._obs

    def __repr__(self) -> str:
        return f"{type(self).__name__}(num_envs={self.num_envs}, device={self.device})"


TASK_TREE = "ctrl_rl.tasks"
"""The package whose modules register the built-in tasks, imported by name before a read (registration by
import: the tasks are written on this module, so it does not import them)."""


def _load_tasks() -> None:
    import_package_modules(TASK_TREE, skip_missing=True)  # the family without its simulator is left out


TASKS: Registry[type[TorchVecEnv]] = Registry("task", load=_load_tasks, context=" for sim 'torch'")
"""Task id -> env class, called as ``cls(num_envs, device, seed, **task_kwargs)``; each task's module
registers it."""


def register_torch_task(name: str, cls: type[TorchVecEnv]) -> type[TorchVecEnv]:
    """Add (or replace) a pure-torch task: ``ctrl-rl train task=<name>`` then builds ``cls`` (the
    fields of its ``Params`` dataclass are the task's ``task.kwargs``, shown by ``--help``)."""
    if not (isinstance(cls, type) and issubclass(cls, TorchVecEnv)):
        raise TypeError(f"register_torch_task({name!r}): {cls!r} is not a TorchVecEnv subclass")
    return TASKS.register(name, cls)
