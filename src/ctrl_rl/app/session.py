"""The env and the policy a command needs, from a config or a checkpoint (train, eval, play, export and
collect share them): the env checked against the machine's memory and the policy's spaces, the device
checked before any work."""

from __future__ import annotations

import os

import torch

from ctrl_rl.algos.checkpoints import find_checkpoint, inference_learner, load_checkpoint, on_this_machine
from ctrl_rl.app.configure import apply_overrides
from ctrl_rl.config import TrainConfig
from ctrl_rl.env import VecEnv
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
    threads.configure(cfg.threads)
    try:
        return make_env(cfg.sim.name, cfg.task.name, n, cfg.device, seed=cfg.seed if seed is None else seed,
                        physics=cfg.sim.physics(), **cfg.task.kwargs)
    except (RuntimeError, MemoryError) as e:  # torch's allocator, CUDA OOM
        if "alloc" not in str(e).lower() and not isinstance(e, MemoryError):
            raise
        raise ConfigError(f"env.num_envs={n}: building the env ran out of memory ({str(e).splitlines()[0][:120]}); "
                          "lower env.num_envs") from None


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
