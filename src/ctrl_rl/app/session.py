"""Building the pieces a command needs from a config or a checkpoint (shared by the CLI)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import os
from pathlib import Path
from typing import Any

import torch

from ctrl_rl.algos.checkpoints import find_checkpoint, inference_learner, load_checkpoint, on_this_machine, task_root
from ctrl_rl.app.configure import apply_overrides, config_yaml
from ctrl_rl.config import TrainConfig
from ctrl_rl.env import VecEnv

MIN_BYTES_PER_ENV_STEP = 64
"""A floor on what one env step costs in a rollout (observation, action, log-prob, value, reward,
flags: at least 16 float32s), for refusing an impossible ``env.num_envs`` before allocating."""


log = logging.getLogger(__name__)

def physical_memory() -> int:
    """Bytes of RAM on this machine (0 where the OS does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0


def check_memory(cfg: TrainConfig, num_envs: int) -> None:
    """Refuse, with the numbers, a run whose env count cannot fit in this machine's memory."""
    from ctrl_rl.config import ConfigError

    steps = getattr(cfg.algo, "num_steps_per_env", 1) + 1
    need, have = num_envs * steps * MIN_BYTES_PER_ENV_STEP, physical_memory()
    if have and need > have:
        raise ConfigError(f"env.num_envs={num_envs}: its rollout alone needs at least {need / 2**30:.0f} GiB "
                          f"({num_envs} envs x {steps} steps x {MIN_BYTES_PER_ENV_STEP} B), and this machine has "
                          f"{have / 2**30:.0f} GiB; lower env.num_envs")


def build_env(cfg: TrainConfig, num_envs: int | None = None, seed: int | None = None) -> VecEnv:
    """The config's task; an allocation that fails is a one-line error naming ``env.num_envs``."""
    from ctrl_rl.config import ConfigError
    from ctrl_rl.sims import make_env

    n = num_envs or cfg.env.num_envs
    check_memory(cfg, n)
    try:
        return make_env(cfg.sim.name, cfg.task.name, n, cfg.device, seed=cfg.seed if seed is None else seed,
                        physics=cfg.sim.physics(), **cfg.task.kwargs)
    except (RuntimeError, MemoryError) as e:  # torch's allocator, CUDA OOM
        if "alloc" not in str(e).lower() and not isinstance(e, MemoryError):
            raise
        raise ConfigError(f"env.num_envs={n}: building the env ran out of memory ({str(e).splitlines()[0][:120]}); "
                          "lower env.num_envs") from None


def new_run_dir(cfg: TrainConfig) -> Path:
    stamp = dt.datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
    name = f"{stamp}_{cfg.runner.run_name}" if cfg.runner.run_name else stamp
    run = task_root(cfg) / name
    suffix = 1
    while run.exists():  # two runs started in the same second
        run = task_root(cfg) / f"{name}_{suffix}"
        suffix += 1
    try:
        (run / "params").mkdir(parents=True)
    except OSError as e:  # read-only or full log root: one line naming where, and the key to change
        raise OSError(e.errno, f"{e.strerror} (creating the run directory; set runner.log_root=<a writable "
                               "directory>)", e.filename) from None
    return run


def write_params(run_dir: Path, cfg: TrainConfig, overrides: list[str], prefix: str = "") -> None:
    """``params/<prefix>config.yaml`` and ``<prefix>overrides.yaml`` (a resume adds its own pair)."""
    params = run_dir / "params"
    params.mkdir(parents=True, exist_ok=True)
    (params / f"{prefix}config.yaml").write_text(config_yaml(cfg))
    (params / f"{prefix}overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides) or "[]\n")


def report_config_drift(saved: TrainConfig, current: TrainConfig) -> list[str]:
    """Keys whose value differs between a checkpoint's config and the one resuming it."""
    ignore = {"runner.checkpoint", "runner.max_iterations", "runner.progress"}

    def flat(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in d.items():
            key = f"{prefix}{k}"
            out.update(flat(v, key + ".") if isinstance(v, dict) else {key: v})
        return out

    a, b = flat(dataclasses.asdict(saved)), flat(dataclasses.asdict(current))
    return [f"{k}: {a.get(k)} -> {b.get(k)}" for k in sorted(set(a) | set(b))
            if k not in ignore and a.get(k) != b.get(k)]


def require_device(device: str) -> None:
    """Fail before any work when ``device`` does not exist here."""
    from ctrl_rl.config import ConfigError

    if device.startswith("cuda"):
        index = int(device.split(":")[1]) if ":" in device else 0
        if not torch.cuda.is_available() or index >= torch.cuda.device_count():
            raise ConfigError(f"device: '{device}' is not available on this machine "
                              f"({torch.cuda.device_count()} CUDA device(s)); use device=cpu")


def load_policy(spec: str, overrides: list[str]):
    """``(cfg, path, algorithm, checkpoint)`` for inference; overrides may change env keys
    (e.g. ``task.kwargs.*`` for a different evaluation setting)."""
    path = find_checkpoint(spec)
    cfg, state = load_checkpoint(path)
    cfg = apply_overrides(on_this_machine(cfg), overrides)
    require_device(cfg.device)
    return cfg, path, inference_learner(cfg, state), state


def checked_env(cfg: TrainConfig, state: dict, num_envs: int, seed: int):
    """The checkpoint's task, refusing an env whose observations or actions the policy cannot take."""
    from ctrl_rl.config import ConfigError

    env = build_env(cfg, num_envs=num_envs, seed=seed)
    if dict(env.obs_dims) != state["obs_dims"] or env.action_dim != state["action_dim"]:
        raise ConfigError(f"the policy expects observations {state['obs_dims']} and {state['action_dim']} action(s); "
                          f"task '{cfg.task.name}' gives {dict(env.obs_dims)} and {env.action_dim}: "
                          "evaluate on the task it was trained on")
    return env


def policy_fn(alg):
    """The learner's deterministic policy on an env's observation dict (what export writes)."""
    from ctrl_rl.nets.actor_critic import concat_groups
    from ctrl_rl.nets.memory import RecurrentPolicy, StatefulPolicy

    policy, groups = alg.inference_policy().eval(), alg.model.actor_obs
    if isinstance(policy, RecurrentPolicy):  # keeps each env's memory between calls
        return StatefulPolicy(policy, groups)
    return lambda obs: policy(concat_groups(obs, groups))
