"""Building the pieces a command needs from a config or a checkpoint (shared by the CLI)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import os
from pathlib import Path
from typing import Any

import torch

from ctrl_rl.app.configure import apply_overrides, config_from_dict, config_yaml
from ctrl_rl.config import TrainConfig
from ctrl_rl.env import VecEnv
from ctrl_rl.utils.checkpoint import CheckpointError, load_file, resolve_checkpoint

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


def task_root(cfg: TrainConfig) -> Path:
    """``logs/<algo>/<task>``: where runs of this algo and task live."""
    return Path(cfg.runner.log_root) / cfg.algo.name / cfg.task.name.replace("/", "_")


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


def find_checkpoint(spec: str, cfg: TrainConfig | None = None, log_root: str = "logs") -> Path:
    """``latest`` searches this algo/task's runs when ``cfg`` is given, else every run."""
    if spec != "latest" or cfg is not None:
        return resolve_checkpoint(spec, task_root(cfg) if cfg is not None else None)
    candidates = [p for p in Path(log_root).glob("*/*/*/model_*.pt")]
    if not candidates:
        raise FileNotFoundError(f"no checkpoints under '{log_root}/'; train first (ctrl-rl train)")
    newest_run = max(candidates, key=lambda p: p.stat().st_mtime).parent
    return resolve_checkpoint(str(newest_run))


def load_checkpoint(path: Path) -> tuple[TrainConfig, dict[str, Any]]:
    """The config and state of a checkpoint; a torn or foreign file is one error naming it."""
    state = load_file(path)
    if "config" not in state or "algo" not in state:
        raise CheckpointError(f"checkpoint {path} has no config/learner state: it was not written by ctrl-rl train")
    return config_from_dict(state["config"]), state


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
    """``(cfg, path, algorithm, checkpoint)`` for inference; overrides may change env keys."""
    from ctrl_rl.algos import make_algorithm

    path = find_checkpoint(spec)
    cfg, state = load_checkpoint(path)
    if cfg.device.startswith("cuda") and not torch.cuda.is_available():
        log.info("checkpoint was trained on %s; running on cpu here", cfg.device)
        cfg = apply_overrides(cfg, ["device=cpu"])
    cfg = apply_overrides(cfg, overrides)  # e.g. task.kwargs.* for a different evaluation setting
    require_device(cfg.device)
    bounds = state.get("action_bounds", (-1.0, 1.0))
    alg = make_algorithm(cfg.algo, state["obs_dims"], state["action_dim"], 1, cfg.device, action_bounds=bounds,
                         inference_only=True)
    alg.load_state_dict(state["algo"], restore_rng=False)
    return cfg, path, alg, state


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
