"""Runners: the training loops. A learner names the loop that drives it when it registers
(``register_learner(..., loop="online")``); ``make_runner`` resolves that name here, so learners
never import runners."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ctrl_rl import distributed
from ctrl_rl.algos.registry import learner, learners
from ctrl_rl.config import ConfigError
from ctrl_rl.registry import Registry
from ctrl_rl.utils.modules import import_package_modules

LOOPS: Registry[type] = Registry("loop", load=lambda: import_package_modules(__name__))
"""Loop name -> runner class; each runner's module registers its own. ``online``: collect
``num_steps_per_env`` steps, let the learner prepare and run its update (on-policy rollouts and
off-policy replay alike: what differs is the learner's); ``offline``: updates from a dataset with
periodic evaluation; ``offline_to_online``: offline then online; ``pql``: actor, V- and P-learner
as three concurrent roles."""


def runner_class(loop: str) -> type:
    """The runner class of ``loop`` (a name in :data:`LOOPS`)."""
    return LOOPS[loop]


def make_runner(env: Any, cfg: Any, log_dir: Path | None = None) -> Any:
    """The runner of the loop ``cfg.algo.name`` registered, after checking the learner supports this launch."""
    entry = learner(cfg.algo.name)
    if distributed.enabled() and not entry.torchrun:
        able = ", ".join(n for n, e in learners().items() if e.torchrun)
        raise ConfigError(f"algo={cfg.algo.name} does not train under torchrun yet ({able} do): launch it as "
                          "one process")
    return runner_class(entry.loop)(env, cfg, log_dir)
