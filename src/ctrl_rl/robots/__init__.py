"""Robot descriptions and tasks (``ctrl_rl.robots``).

Backend-neutral robot definitions (MJCF, joint order, default pose, PD gains; see
``robot.py``) and tasks written against the state view every MuJoCo-family backend
exposes (``ctrl_rl.sims.mujoco_env.Physics``). Observation terms (``terms.py``) import
numpy only: the deploy runtime evaluates the very same definitions on the robot.
The classic-control tasks of the foundation live with their pure-torch dynamics in
``ctrl_rl.sims.torch_envs``.

A task registers itself where it is defined, once::

    register_task("quadruped_velocity_flat", config=VelocityTaskConfig, task=VelocityTask)

and is then ``task=<id>`` on every MuJoCo-family backend, with or without a file in ``configs/``.
The shipped robots (the YAMLs of this folder) are :data:`ROBOTS`, ``robot=<name>``. Both are
:class:`ctrl_rl.registry.Registry`, the mechanism of every registry.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from ctrl_rl.registry import Registry
from ctrl_rl.task import MjTaskClass, MjTaskConfig
from ctrl_rl.utils.modules import import_package_modules

MUJOCO_SIMS = ("mujoco", "mjwarp")
"""The backends that step a registered robot task (CPU threads first: the default)."""


@dataclass(frozen=True)
class RobotTask:
    """One registered MuJoCo-family task."""

    name: str
    """``task=<name>`` on the command line."""
    config: type[MjTaskConfig]
    """Its parameters: a dataclass with ``from_kwargs`` (``task.kwargs.<field>``), documented per field."""
    task: MjTaskClass
    """The task class (``build_model``, the step hooks): the contract of ``ctrl_rl.task``."""
    defaults: Mapping[str, Any] = field(default_factory=dict)
    """Parameter values of this id that differ from the config's (e.g. ``{"robot": "path/to/robot.yaml"}``)."""
    tune: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Tuned settings per learner, ``{"ppo": {"env.num_envs": 256, ...}}``: what a
    ``configs/tune/<algo>_<task>.yaml`` would hold (the file wins where both exist)."""

    def make_config(self, **kwargs: Any) -> MjTaskConfig:
        """The task's config from ``task.kwargs`` over this id's defaults; a wrong name is refused
        with the valid ones."""
        return self.config.from_kwargs(**{**self.defaults, **kwargs})


def _load_tasks() -> None:
    """The built-in tasks register when their modules are imported; where MuJoCo or torch is absent
    (the deploy runtime) there are none."""
    import_package_modules(__name__, skip_missing=True)  # a robot computer: no torch / mujoco, no tasks


TASKS: Registry[RobotTask] = Registry("task", load=_load_tasks, context=f" for sim '{MUJOCO_SIMS[0]}' or "
                                                                          f"'{MUJOCO_SIMS[1]}'")
"""Every MuJoCo-family task by id (``task=<id>``)."""


@cache
def _shipped_robots() -> None:
    for path in sorted(Path(__file__).resolve().parent.glob("*.yaml")):
        ROBOTS.register(path.stem, path)


ROBOTS: Registry[Path] = Registry("robot", load=_shipped_robots, also="a robot YAML path")
"""Robot YAMLs by name (``robot=<name>``): the shipped ones of this folder, and any a user registers."""


def register_task(name: str, *, config: type[MjTaskConfig], task: MjTaskClass,
                  defaults: Mapping[str, Any] | None = None,
                  tune: Mapping[str, Mapping[str, Any]] | None = None) -> RobotTask:
    """Add (or replace) MuJoCo-family task ``name``: ``config`` and ``task`` meet ``ctrl_rl.task``'s
    ``MjTaskConfig`` and ``MjTaskClass`` (``tests/task_conformance.py`` checks one); returns its entry."""
    if not hasattr(config, "from_kwargs"):
        raise TypeError(f"register_task({name!r}): config {config.__name__} needs a from_kwargs classmethod")
    return TASKS.register(name, RobotTask(name=name, config=config, task=task, defaults=dict(defaults or {}),
                                          tune={k: dict(v) for k, v in (tune or {}).items()}))


def tasks() -> dict[str, RobotTask]:
    """Every registered task by id, the built-ins loaded first."""
    return TASKS.entries()


def task_entry(name: str) -> RobotTask:
    """The entry of task ``name``; :class:`~ctrl_rl.registry.UnknownNameError` otherwise."""
    return TASKS[name]
