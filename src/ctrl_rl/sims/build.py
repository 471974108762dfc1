"""The one env builder: every command and runner gets its env from :func:`build_env`, which applies
the config's ``sim.*`` physics options, refuses an env count the machine's memory cannot hold and
plans the CPU threads before calling :func:`ctrl_rl.sims.make_env` (``tests/test_layering.py`` holds
that nothing else in the package calls it)."""

from __future__ import annotations

import os

from ctrl_rl.config import ConfigError, TrainConfig
from ctrl_rl.env import VecEnv
from ctrl_rl.sims import make_env
from ctrl_rl.utils import threads

MIN_BYTES_PER_ENV_STEP = 64
"""A floor on what one env step costs in a rollout (observation, action, log-prob, value, reward,
flags: at least 16 float32s), for refusing an impossible ``env.num_envs`` before allocating."""


def physical_memory() -> int:
    """Bytes of RAM on this machine (0 where the OS does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0


def check_memory(cfg: TrainConfig, num_envs: int) -> None:
    """Refuse, with the numbers, a run whose env count cannot fit in this machine's memory."""
    steps = getattr(cfg.algo, "num_steps_per_env", 1) + 1
    need, have = num_envs * steps * MIN_BYTES_PER_ENV_STEP, physical_memory()
    if have and need > have:
        raise ConfigError(f"env.num_envs={num_envs}: its rollout alone needs at least {need / 2**30:.0f} GiB "
                          f"({num_envs} envs x {steps} steps x {MIN_BYTES_PER_ENV_STEP} B), and this machine has "
                          f"{have / 2**30:.0f} GiB; lower env.num_envs")


def build_env(cfg: TrainConfig, num_envs: int | None = None, seed: int | None = None) -> VecEnv:
    """The config's task on its sim with its physics options (``num_envs``, ``seed``: the config's unless
    given, e.g. for an evaluation env); an allocation that fails is a one-line error naming ``env.num_envs``."""
    n = num_envs or cfg.env.num_envs
    check_memory(cfg, n)
    threads.configure(cfg.threads, cfg.update_threads)
    try:
        return make_env(cfg.sim.name, cfg.task.name, n, cfg.device, seed=cfg.seed if seed is None else seed,
                        physics=cfg.sim.physics(), **cfg.task.kwargs)
    except (RuntimeError, MemoryError) as e:  # torch's allocator, CUDA OOM
        if "alloc" not in str(e).lower() and not isinstance(e, MemoryError):
            raise
        raise ConfigError(f"env.num_envs={n}: building the env ran out of memory ({str(e).splitlines()[0][:120]}); "
                          "lower env.num_envs") from None
