"""The env and the policy a command needs, from a config or a checkpoint (train, eval, play, export and
collect share them): the env from the one builder (``ctrl_rl.sims.build``) checked against the policy's
spaces, the device checked before any work."""

from __future__ import annotations

from dataclasses import fields, replace

import torch

from ctrl_rl.algos.checkpoints import find_checkpoint, inference_learner, load_checkpoint, on_this_machine
from ctrl_rl.app.configure import apply_overrides
from ctrl_rl.config import ConfigError, TrainConfig
from ctrl_rl.nets.actor_critic import concat_groups
from ctrl_rl.nets.memory import RecurrentPolicy, StatefulPolicy
from ctrl_rl.sims.build import build_env
from ctrl_rl.tasks import MUJOCO_SIMS, task_entry, tasks


def require_device(device: str) -> None:
    """Fail before any work when ``device`` does not exist here."""
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
    cfg = apply_overrides(as_a_robot_starts(as_polished(on_this_machine(cfg), state), overrides), overrides)
    require_device(cfg.device)
    return cfg, path, inference_learner(cfg, state), state


def as_a_robot_starts(cfg: TrainConfig, overrides: list[str]) -> TrainConfig:
    """``cfg`` with its task's training-only keys (``TRAINING_ONLY`` of a MuJoCo-family task's config: a start
    curriculum) back at their defaults, each said once, unless ``overrides`` set them: inference judges a policy
    from the start a robot gives it."""
    entry = tasks().get(cfg.task.name) if cfg.sim.name in MUJOCO_SIMS else None
    kwargs = cfg.task.kwargs
    for key in getattr(entry.config, "TRAINING_ONLY", ()) if entry else ():
        default = next(f.default for f in fields(entry.config) if f.name == key)
        if key in kwargs and kwargs[key] != default and not any(o.lstrip("+").startswith(f"task.kwargs.{key}=")
                                                                for o in overrides):
            print(f"task.kwargs.{key}={kwargs[key]} shaped training only: episodes start as on a robot "
                  f"({key}={default}; task.kwargs.{key}=... to keep it)")
            kwargs = {k: v for k, v in kwargs.items() if k != key}
    return replace(cfg, task=replace(cfg.task, kwargs=kwargs))


POLISH_KEYS = ("polish_rewards", "polish_action_filter", "polish_start", "polish_contact", "polish_impratio_max")
"""The task kwargs of the gait recipe's late polish (``tasks/locomotion/velocity_config.py``)."""


def as_polished(cfg: TrainConfig, state: dict) -> TrainConfig:
    """``cfg`` as the checkpoint's policy last trained: past its polish's start (``task.kwargs.polish_start``
    control steps) with the polish's action filter and reward weights, before it without them. A fresh env counts
    its steps from 0, so inference (eval, export and the bundle's filter, play) takes the polish as settled."""
    kwargs = cfg.task.kwargs
    if not (kwargs.get("polish_rewards") or kwargs.get("polish_action_filter") or kwargs.get("polish_contact")):
        return cfg
    steps = int(state.get("iteration", 0)) * int(getattr(cfg.algo, "num_steps_per_env", 1))
    polished = steps > int(kwargs.get("polish_start", 0))  # model_<it> after at least one polished iteration
    kept = {k: v for k, v in kwargs.items() if k not in POLISH_KEYS}
    if polished:
        kept["rewards"] = {**kwargs.get("rewards", {}), **kwargs.get("polish_rewards", {})}
        if kwargs.get("polish_action_filter"):
            kept["action_filter"] = kwargs["polish_action_filter"]
        contact = _polished_contact(cfg.task.name, kwargs)
        kept.update(contact)
        contact = f", {contact['cone']} cone, impratio {contact['impratio']:g}" if contact else ""
        print(f"this checkpoint's last iterations trained with the polish (from control step "
              f"{kwargs.get('polish_start', 0)}): it runs with it (action_filter={kept.get('action_filter', 0.0)}"
              f"{contact})")
    return replace(cfg, task=replace(cfg.task, kwargs=kept))


def _polished_contact(task: str, kwargs: dict) -> dict:
    """``cone`` and ``impratio`` of the polish's contact model (``task.kwargs.polish_contact``) where it differs
    from the task's own; else nothing."""
    if not kwargs.get("polish_contact"):
        return {}
    from ctrl_rl.tasks.locomotion.polish_contact import polished_contact  # optional: mujoco reads the MJCF's

    contact = polished_contact(task_entry(task).make_config(**kwargs))
    own = (kwargs.get("cone", "pyramidal"), float(kwargs.get("impratio", 1.0)))
    return contact if (contact["cone"], contact["impratio"]) != own else {}


def checked_env(cfg: TrainConfig, state: dict, num_envs: int, seed: int):
    """The checkpoint's task, refusing an env whose observations or actions the policy cannot take."""
    env = build_env(cfg, num_envs=num_envs, seed=seed)
    if dict(env.obs_dims) != state["obs_dims"] or env.action_dim != state["action_dim"]:
        raise ConfigError(f"the policy expects observations {state['obs_dims']} and {state['action_dim']} action(s); "
                          f"task '{cfg.task.name}' gives {dict(env.obs_dims)} and {env.action_dim}: "
                          "evaluate on the task it was trained on")
    return env


def policy_fn(alg):
    """The learner's deterministic policy on an env's observation dict (what export writes)."""
    policy, groups = alg.inference_policy().eval(), alg.model.actor_obs
    if isinstance(policy, RecurrentPolicy):  # keeps each env's memory between calls
        return StatefulPolicy(policy, groups)
    return lambda obs: policy(concat_groups(obs, groups))
