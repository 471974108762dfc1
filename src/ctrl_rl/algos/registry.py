"""Learners by name: the one list the CLI, ``--help``, the config composition, the runner choice,
torchrun support and the tests read.

A learner registers itself from its own module::

    register_learner("ppo", config=PPOConfig, build=PPO, loop="online", torchrun=True)

``build(cfg, obs_dims, action_dim, num_envs, device, seed=, action_bounds=, inference_only=)``
returns a :class:`~ctrl_rl.algos.base.Learner`; ``loop`` names the training loop that drives it,
which ``ctrl_rl.runners`` resolves (``ctrl_rl.runners.LOOPS``): learners never import runners.
The built-in learners are the modules of ``ctrl_rl.algos``, imported the first time the registry
is read; a learner defined anywhere else (a test file, a user package) calls
:func:`register_learner` before the CLI runs. :data:`LEARNERS` is a :class:`ctrl_rl.registry.Registry`,
the mechanism of the tasks', sims', robots' and loops' registries too (:func:`ctrl_rl.sims.register_sim`,
:func:`ctrl_rl.sims.torch_backend.register_torch_task`, :func:`ctrl_rl.tasks.register_task`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ctrl_rl.config import LearnerConfig
from ctrl_rl.registry import Registry
from ctrl_rl.utils.modules import import_package_modules


@dataclass(frozen=True)
class LearnerEntry:
    """One registered learner."""

    name: str
    """``algo=<name>`` on the command line; the config's ``name`` field defaults to it."""
    config: type
    """Its config schema: a dataclass derived from :class:`~ctrl_rl.config.LearnerConfig`, the only
    place its defaults live."""
    build: Callable[..., Any]
    """``build(cfg, obs_dims, action_dim, num_envs, device, seed=, action_bounds=, inference_only=)``."""
    loop: str
    """The loop that drives it, by name (``ctrl_rl.runners.LOOPS``): ``online`` (collect, then update:
    the PPO family and SAC), ``offline``, ``offline_to_online`` or ``pql`` (three concurrent roles)."""
    torchrun: bool = False
    """Whether it trains under torchrun (gradients averaged over processes)."""

    @property
    def summary(self) -> str:
        """The first sentence of the config's docstring (``ctrl-rl list``), whatever its line breaks."""
        paragraph = " ".join((self.config.__doc__ or "").strip().split("\n\n")[0].split())
        return re.split(r"(?<!\bal)\.\s", paragraph, maxsplit=1)[0].rstrip(".") + "." if paragraph else ""


DEFAULT_LEARNER = "ppo"
"""``algo=`` when the command line names none."""


def _load_builtin() -> None:
    """Import every module of ``ctrl_rl.algos`` once: each registers what it defines (this module and
    ``checkpoints.py`` register nothing)."""
    import_package_modules("ctrl_rl.algos")


LEARNERS: Registry[LearnerEntry] = Registry("algo", load=_load_builtin)
"""Every learner by name (``algo=<name>``), in registration order; the built-ins load on the first read."""


def register_learner(name: str, *, config: type, build: Callable[..., Any], loop: str,
                     torchrun: bool = False) -> LearnerEntry:
    """Add (or replace) learner ``name``; returns its entry."""
    if not (dataclasses.is_dataclass(config) and issubclass(config, LearnerConfig)):
        raise TypeError(f"register_learner({name!r}): config must be a dataclass derived from LearnerConfig")
    default_name = config.__dataclass_fields__["name"].default
    if default_name != name:
        raise ValueError(f"register_learner({name!r}): {config.__name__}.name defaults to {default_name!r}; "
                         f"set it to {name!r}")
    if not isinstance(loop, str):
        raise TypeError(f"register_learner({name!r}): loop names the loop that drives it (one of "
                        f"ctrl_rl.runners.LOOPS, e.g. 'online'), got {loop!r}")
    return LEARNERS.register(name, LearnerEntry(name=name, config=config, build=build, loop=loop, torchrun=torchrun))


def learners() -> dict[str, LearnerEntry]:
    """Every registered learner by name, in registration order."""
    return LEARNERS.entries()


def learner(name: str) -> LearnerEntry:
    """The entry of ``name``; :class:`~ctrl_rl.registry.UnknownNameError` naming the closest or the choices."""
    return LEARNERS[name]
