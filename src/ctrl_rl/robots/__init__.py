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
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ctrl_rl.utils.modules import import_package_modules

MUJOCO_SIMS = ("mujoco", "mjwarp")
"""The backends that step a registered robot task (CPU threads first: the default)."""


@dataclass(frozen=True)
class RobotTask:
    """One registered MuJoCo-family task."""

    name: str
    """``task=<name>`` on the command line."""
    config: type
    """Its parameters: a dataclass with ``from_kwargs`` (``task.kwargs.<field>``), documented per field."""
    task: type
    """The task class (``build_model``, the step hooks; see ``ctrl_rl.sims.mujoco_env``)."""
    defaults: Mapping[str, Any] = field(default_factory=dict)
    """Parameter values of this id that differ from the config's (e.g. ``{"robot": "path/to/robot.yaml"}``)."""
    tune: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Tuned settings per learner, ``{"ppo": {"env.num_envs": 256, ...}}``: what a
    ``configs/tune/<algo>_<task>.yaml`` would hold (the file wins where both exist)."""

    def make_config(self, **kwargs: Any) -> Any:
        """The task's config from ``task.kwargs`` over this id's defaults; a wrong name is refused
        with the valid ones."""
        return self.config.from_kwargs(**{**self.defaults, **kwargs})


_TASKS: dict[str, RobotTask] = {}


def register_task(name: str, *, config: type, task: type, defaults: Mapping[str, Any] | None = None,
                  tune: Mapping[str, Mapping[str, Any]] | None = None) -> RobotTask:
    """Add (or replace) MuJoCo-family task ``name``; returns its entry."""
    if not hasattr(config, "from_kwargs"):
        raise TypeError(f"register_task({name!r}): config {config.__name__} needs a from_kwargs classmethod")
    entry = RobotTask(name=name, config=config, task=task, defaults=dict(defaults or {}),
                      tune={k: dict(v) for k, v in (tune or {}).items()})
    _TASKS[name] = entry
    return entry


def tasks() -> dict[str, RobotTask]:
    """Every registered task by id. The built-in ones register when their modules are imported, the
    first time this is read; where MuJoCo or torch is absent (the deploy runtime) there are none."""
    import_package_modules(__name__, skip_missing=True)  # a robot computer: no torch / mujoco, no tasks
    return dict(_TASKS)


def task_entry(name: str) -> RobotTask:
    """The entry of task ``name``; ``ValueError`` naming the registered ones otherwise."""
    entries = tasks()
    if name not in entries:
        raise ValueError(f"unknown MuJoCo task {name!r}; choose one of: {', '.join(sorted(entries))}")
    return entries[name]
