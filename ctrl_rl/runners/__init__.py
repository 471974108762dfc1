"""Runners: the training loops. ``make_runner`` picks the one the learner registered."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ctrl_rl import distributed


def make_runner(env: Any, cfg: Any, log_dir: Path | None = None) -> Any:
    """The runner ``cfg.algo.name`` registered, after checking the learner supports this launch."""
    from ctrl_rl.config import ConfigError
    from ctrl_rl.registry import learner, learners

    entry = learner(cfg.algo.name)
    if distributed.enabled() and not entry.torchrun:
        able = ", ".join(n for n, e in learners().items() if e.torchrun)
        raise ConfigError(f"algo={cfg.algo.name} does not train under torchrun yet ({able} do): launch it as "
                          "one process")
    return entry.runner(env, cfg, log_dir)
