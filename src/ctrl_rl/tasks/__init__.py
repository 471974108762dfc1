"""The tasks (``ctrl_rl.tasks``): one tree, one place per task.

Each family of tasks is a folder; a task's module holds its config, its registration and, beside it in
the family's ``tune/``, its tuned settings per learner (no file in ``configs/`` names a task)::

    tasks/
      __init__.py      this registry of the MuJoCo-family tasks (TASKS, register_task)
      locomotion/      velocity tracking on legged robots (sim=mujoco, sim=mjwarp): locomotion.py
                       (quadruped_velocity_flat), rough.py (quadruped_velocity_rough), humanoid.py
                       (humanoid_velocity_flat), their config (velocity_config.py) and helpers
                       (curriculum, height scan, gait rewards and signals, standing pose)
        tune/          <algo>_<task>[_<preset>].yaml
      manipulation/    arms (``ctrl_rl.robots.arm``; sim=mujoco, sim=mjwarp): reach.py (reach, an end-effector
                       pose target on i2rt's YAM), lift.py (lift, a cube to a target height), insert.py (insert,
                       a held peg into a hole with 1 mm of clearance per side), their configs, rewards, shared
                       base (arm_task.py) and scripted experts (experts.py)
        tune/
      classic/         pure-torch classic control (sim=torch): pendulum, cartpole, point_mass, bandit
        tune/
      <family>/        any other folder with an ``__init__.py`` (a family of its own), found by itself

Robot descriptions (robot YAMLs, MJCFs, observation terms, terrain) stay in ``ctrl_rl.robots``, the
torch sim's step machinery in ``ctrl_rl.sims.torch_backend``.

**Adding a MuJoCo-family task** (``tests/test_task_contract.py`` does it from one file): a config
dataclass with ``from_kwargs`` and ``apply_physics``, each field documented under its declaration,
and a task class that meet the task contract (``ctrl_rl.task``; no base class), or the existing
``VelocityTaskConfig`` / ``VelocityTask``; then one call at the bottom of the module::

    register_task("<id>", config=<Config>, task=<Task>, defaults={"robot": "<robot>"},
                  tune={"ppo": {"env.num_envs": 1024, ...}})

Then ``check_task("<id>")`` (``tests/task_conformance.py``) passes, and ``task=<id>`` runs on sim=mujoco
(its default sim) and sim=mjwarp, prints its parameters in ``ctrl-rl train task=<id> --help``, and trains,
evaluates and exports through the CLI. A module in a folder here is found by itself: the registries'
``load`` imports every module of every family, leaving out those whose simulator is not installed (a
robot computer: no torch, no MuJoCo). Its tuned settings per learner are the registration's ``tune``
or a file ``<family>/tune/<algo>_<id>.yaml`` (the file wins): hydra searches every family's folder
(``ctrl_rl.app.configure``). A torch task ends its module with ``ctrl_rl.sims.torch_backend.register_torch_task``.
"""

from __future__ import annotations

import ast
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
TREE = Path(__file__).resolve().parent
"""This folder: a subfolder with an ``__init__.py`` is a family of tasks."""
REGISTRARS = {"register_task": MUJOCO_SIMS[0], "register_torch_task": "torch"}
"""The functions a task's module registers with, and the sim each one's tasks run on by default."""


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
    ``<family>/tune/<algo>_<task>.yaml`` would hold (the file wins where both exist)."""

    def make_config(self, **kwargs: Any) -> MjTaskConfig:
        """The task's config from ``task.kwargs`` over this id's defaults; a wrong name is refused
        with the valid ones."""
        return self.config.from_kwargs(**{**self.defaults, **kwargs})


def load_tree() -> None:
    """Import every module of every family (each registers its tasks); where MuJoCo or torch is absent
    (the deploy runtime) the modules that need them are left out."""
    import_package_modules(__name__, skip_missing=True)  # a robot computer: no torch / mujoco, no tasks


TASKS: Registry[RobotTask] = Registry("task", load=load_tree, context=f" for sim '{MUJOCO_SIMS[0]}' or "
                                                                      f"'{MUJOCO_SIMS[1]}'")
"""Every MuJoCo-family task by id (``task=<id>``)."""


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


def families() -> list[Path]:
    """The family folders of the tree, in name order (hydra searches each for its ``tune/``)."""
    return sorted(p for p in TREE.iterdir() if (p / "__init__.py").is_file())


@cache
def declared_tasks() -> dict[str, str]:
    """``{task id: its default sim}`` for every ``register_task("<id>", ...)`` and
    ``register_torch_task("<id>", ...)`` in the tree's modules, read from their source, not imported:
    where a family's simulator is not installed here (no mujoco), its ids still compose a config
    (``--help``, ``--cfg``) and a run names the extra to install."""
    found: dict[str, str] = {}
    for path in sorted(TREE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if not any(f"{name}(" in text for name in REGISTRARS):  # most modules register nothing: no parse
            continue
        for node in ast.walk(ast.parse(text)):
            if (isinstance(node, ast.Call) and getattr(node.func, "id", None) in REGISTRARS and node.args
                    and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                found[node.args[0].value] = REGISTRARS[node.func.id]
    return found
