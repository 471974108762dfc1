"""``ctrl-rl collect``: offline datasets from policies, at D4RL's levels and in mixtures.

Levels (Fu et al. 2020, D4RL):

- ``random``: uniform actions in the action bounds; no policy, the task comes from ``task=...``.
- ``medium`` / ``expert``: the given checkpoint or exported ``policy.onnx``. Which of your
  checkpoints is "medium" (D4RL: about a third of the expert's return, e.g. an early
  ``model_<it>.pt``) and which "expert" is your choice; the label is recorded with the data.
- ``medium-replay``: D4RL's is the replay buffer of a run up to medium performance. Here it is
  approximated by the run's saved checkpoints ``model_*.pt`` in order, each collecting an equal
  share of the steps.
- ``mixed``: ``--mix SPEC=FRACTION,...`` concatenates segments, each collecting its fraction of
  the steps; D4RL's medium-expert is ``--mix medium:<ckpt>=0.5,expert:<ckpt>=0.5``.

A segment's SPEC is ``random``, a policy (``latest``, run directory, ``model_<it>.pt`` or
``policy.onnx``) optionally prefixed by its level (``expert:<ckpt>``), or ``medium-replay:<run>``.
Every segment runs ``--envs`` parallel envs of one task; each env's episodes are contiguous and
the episode cut at a segment's end is a timeout.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ctrl_rl.algos.checkpoints import find_checkpoint
from ctrl_rl.app.configure import load_train_config
from ctrl_rl.app.session import load_policy, policy_fn, require_device
from ctrl_rl.config import ConfigError, TrainConfig
from ctrl_rl.deploy.runtime import OnnxPolicy
from ctrl_rl.env import Obs
from ctrl_rl.nets.actor_critic import concat_groups
from ctrl_rl.runners.episodes import collect_dataset, random_policy
from ctrl_rl.sims.build import build_env
from ctrl_rl.storage.formats import check_output, save_dataset
from ctrl_rl.utils.checkpoint_files import checkpoint_iteration

log = logging.getLogger(__name__)

LEVELS = ("random", "medium", "expert", "medium-replay", "mixed")


@dataclass
class Segment:
    """A part of the dataset: who acts, under which label, for which share of the steps."""

    level: str
    """random, medium, expert, medium-replay, or ``policy`` (a policy given without a level)."""
    policy: str
    """``random``, or the checkpoint / bundle path as given."""
    fraction: float
    """Share of the steps per env."""


@dataclass
class Source:
    """A loaded segment policy: its env config, its action function and what it reads."""

    cfg: TrainConfig | None
    """None for ``random`` (it acts in whatever task the others, or ``task=``, name)."""
    act: Callable[[Obs], torch.Tensor] | None
    groups: tuple[str, ...] = ("policy",)
    obs_dims: dict[str, int] | None = None
    action_dim: int | None = None
    name: str = "random"


def _expand(text: str, fraction: float) -> list[Segment]:
    """``[level:]policy`` -> segments; ``medium-replay:<run>`` -> one per checkpoint of the run."""
    if text == "random":
        return [Segment("random", "random", fraction)]
    level, _, policy = text.partition(":")
    if level not in LEVELS[1:4] or not policy:
        level, policy = "policy", text
    if level != "medium-replay":
        return [Segment(level, policy, fraction)]
    run = find_checkpoint(policy).parent
    models = sorted(run.glob("model_*.pt"), key=checkpoint_iteration)
    return [Segment(level, str(m), fraction / len(models)) for m in models]


def parse_mix(text: str) -> list[tuple[str, float]]:
    """``random=0.3,expert:run/model_50.pt=0.7`` -> ``[("random", 0.3), ("expert:...", 0.7)]``."""
    items = []
    for item in text.split(","):
        spec, sep, frac = item.strip().rpartition("=")
        try:
            value = float(frac)
        except ValueError:
            value = float("nan")
        if not sep or not spec or not value > 0:
            raise ValueError(f"--mix: '{item}' is not SPEC=FRACTION with a fraction > 0 (e.g. random=0.3)")
        items.append((spec, value))
    total = sum(f for _, f in items)
    if abs(total - 1.0) > 1e-6:
        raise ValueError(f"--mix: fractions must sum to 1, got {total:g}")
    return items


def plan(policy: str | None, level: str | None, mix: str | None) -> list[Segment]:
    """The segments a command line asks for (see the module docstring)."""
    if mix is not None:
        if policy is not None or level not in (None, "mixed"):
            raise ValueError("--mix names the policies itself: give no POLICY and no --level other than mixed")
        return [s for spec, frac in parse_mix(mix) for s in _expand(spec, frac)]
    if level == "mixed":
        raise ValueError("--level mixed needs --mix SPEC=FRACTION,... (e.g. --mix random=0.5,expert:latest=0.5)")
    if policy is None and level is None:
        raise ValueError("collect needs a policy ('latest', a run, a model_<it>.pt or policy.onnx), 'random' "
                         "(or --level random) with task=..., or --mix")
    if level == "random" or policy in (None, "random"):
        if policy not in (None, "random") or level not in (None, "random"):
            raise ValueError("--level random takes no policy; other levels need one (a checkpoint, run or "
                             "policy.onnx)")
        return [Segment("random", "random", 1.0)]
    return _expand(f"{level}:{policy}" if level else policy, 1.0)


def split_steps(fractions: list[float], steps: int) -> list[int]:
    """Steps per env of each segment: ``steps`` cut at the rounded cumulative fractions."""
    bounds = np.rint(np.concatenate([[0.0], np.cumsum(fractions)]) / sum(fractions) * steps).astype(int)
    return np.diff(bounds).tolist()


def _bundle_source(path: str, overrides: list[str]) -> Source:
    """An exported ``policy.onnx`` run by onnxruntime (batched); its metadata names task and sim."""
    if not Path(path).is_file():
        raise FileNotFoundError(f"exported policy '{path}' not found")
    bundle = OnnxPolicy(path)
    meta = bundle.metadata
    if not meta.get("task") or not meta.get("obs_dims"):
        raise ValueError(f"{path}: the bundle's metadata has no task/obs_dims; re-export it with `ctrl-rl export`")
    own = {"task": str(meta["task"]), "sim": str(meta.get("sim") or "torch")}
    for o in overrides:
        key, _, value = o.lstrip("+").partition("=")
        if key in own and value != own[key]:
            raise ConfigError(f"{o} conflicts with the bundle, which is for {key} '{own[key]}'")
    rest = [o for o in overrides if o.lstrip("+").partition("=")[0] not in own]
    cfg = load_train_config([f"sim={own['sim']}", f"task={own['task']}", *rest])
    groups = tuple(meta.get("obs_groups") or ["policy"])

    def act(obs: Obs) -> torch.Tensor:
        x = concat_groups(obs, groups)
        return torch.as_tensor(bundle(x.cpu().numpy()), device=x.device)

    return Source(cfg, act, groups, dict(meta["obs_dims"]), int(meta["action_dim"]), path)


def _checkpoint_source(spec: str, overrides: list[str]) -> Source:
    cfg, path, alg, state = load_policy(spec, overrides)
    groups = tuple(alg.model.actor_obs)
    policy, device = policy_fn(alg), torch.device(cfg.device)

    def act(obs: Obs) -> torch.Tensor:  # env and policy may sit on different devices
        env_device = next(iter(obs.values())).device
        return policy({k: v.to(device) for k, v in obs.items()}).to(env_device)

    obs_dims = {g: state["obs_dims"][g] for g in groups}
    return Source(cfg, act, groups, obs_dims, int(state["action_dim"]), str(path))


def load_source(segment: Segment, overrides: list[str]) -> Source:
    if segment.policy == "random":
        return Source(None, None)
    if segment.policy.endswith(".onnx"):
        return _bundle_source(segment.policy, overrides)
    return _checkpoint_source(segment.policy, overrides)


def _check_compatible(base: Source, src: Source, env) -> None:
    """All segments act in the same task and record the same observation layout."""
    if src.cfg is None:
        return
    if src.cfg.task.name != base.cfg.task.name or src.groups != base.groups:
        raise ConfigError(f"mixed policies must share a task and observation groups: {base.name} is for "
                          f"{base.cfg.task.name} {list(base.groups)}, {src.name} for {src.cfg.task.name} "
                          f"{list(src.groups)}")
    dims = {g: env.obs_dims.get(g) for g in src.groups}
    if dims != src.obs_dims or env.action_dim != src.action_dim:
        raise ConfigError(f"{src.name} expects observations {src.obs_dims} and {src.action_dim} action(s); task "
                          f"'{base.cfg.task.name}' gives {dims} and {env.action_dim}: collect on its own task")


def collect(policy: str | None, overrides: list[str], output: str, steps: int = 1000, envs: int = 16,
            noise: float = 0.0, seed: int = 0, level: str | None = None, mix: str | None = None,
            fmt: str | None = None) -> str:
    """Roll the planned segments and write one dataset; prints a ``RESULT`` line, returns where it went."""
    if steps <= 0 or envs <= 0 or noise < 0:
        raise ValueError(f"--steps and --envs must be > 0 and --noise >= 0 (got {steps}, {envs}, {noise})")
    fmt = check_output(output, fmt)  # before any work
    segments = plan(policy, level, mix)
    shares = split_steps([s.fraction for s in segments], steps)
    if min(shares) < 1:
        raise ValueError(f"--steps {steps} is too few for {len(segments)} segments ({shares} steps per env each)")
    sources = [load_source(s, overrides) for s in segments]
    base = next((s for s in sources if s.cfg is not None), None)
    if base is None:  # only random segments: the task comes from the overrides
        if not any(o.lstrip("+").startswith("task=") for o in overrides):
            raise ConfigError("random actions need a task: add task=<id> (e.g. task=pendulum; `ctrl-rl list`)")
        base = Source(load_train_config(overrides), None, name="random")
    require_device(base.cfg.device)
    env = build_env(base.cfg, num_envs=envs, seed=seed)
    for src in sources:
        _check_compatible(base, src, env)
    data, parts = None, []
    for i, (seg, src, n) in enumerate(zip(segments, sources, shares, strict=True)):
        act = src.act if src.act is not None else random_policy(env, seed + i)
        part = collect_dataset(env, act, n, seed + i, noise if src.act is not None else 0.0, base.groups)
        start = 0 if data is None else len(data)
        data = part if data is None else data.concatenate(part)
        parts.append({"level": seg.level, "policy": src.name, "steps_per_env": n, "rows": [start, len(data)]})
        log.info("segment %d/%d: %s %s, %d steps x %d envs", i + 1, len(segments), seg.level, src.name, n, envs)
    env.close()
    label = level or ("mixed" if mix else segments[0].level)
    attrs = {"task": base.cfg.task.name, "sim": base.cfg.sim.name, "level": label,
             "policy": ";".join(dict.fromkeys(p["policy"] for p in parts)), "noise_std": noise, "seed": seed,
             "obs_groups": ",".join(base.groups), "num_envs": envs, "segments": json.dumps(parts)}
    fmt, out = save_dataset(data, output, attrs, fmt, action_bounds=env.action_bounds)
    returns = data.episode_returns()
    print(f"collected {len(data)} transitions ({len(returns)} episodes, {envs} envs x {steps} steps, "
          f"{len(segments)} segment(s), level {label}, noise {noise}) -> {out}")
    print(f"RESULT path={out} format={fmt} level={label} transitions={len(data)} episodes={len(returns)} "
          f"mean_episode_return={returns.mean():.4f}")
    return out
