"""``ctrl-rl collect``: offline datasets from policies, at D4RL's levels and in mixtures.

Levels (Fu et al. 2020, D4RL):

- ``random``: uniform actions in the action bounds; no policy, the task comes from ``task=...``.
- ``scripted``: the task's scripted expert (``ctrl_rl.tasks.manipulation.experts``: inverse kinematics and,
  for lift, a grasp state machine), privileged (it reads the simulator's state); the task comes from
  ``task=...``. Demonstrations: ``--episodes N`` collects whole episodes until N are kept,
  ``--successful-only`` keeps only those the task scores a success (its ``success_rate`` episode metric),
  ``--noise`` perturbs the executed (and recorded) actions.
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
from ctrl_rl.env import Obs, VecEnv
from ctrl_rl.nets.actor_critic import concat_groups
from ctrl_rl.runners.episodes import Policy, collect_dataset, random_policy
from ctrl_rl.sims.build import build_env
from ctrl_rl.storage.dataset import Dataset
from ctrl_rl.storage.formats import check_output, save_dataset
from ctrl_rl.utils.checkpoint_files import checkpoint_iteration

log = logging.getLogger(__name__)

LEVELS = ("random", "medium", "expert", "medium-replay", "mixed", "scripted")
POLICYLESS = ("random", "scripted")
"""Segments that act without a checkpoint: the task comes from ``task=...``."""
MAX_ROUNDS = 50
"""``--episodes``: the most rounds (one episode per env each) before giving up on the episodes asked for."""


@dataclass
class Segment:
    """A part of the dataset: who acts, under which label, for which share of the steps."""

    level: str
    """random, scripted, medium, expert, medium-replay, or ``policy`` (a policy given without a level)."""
    policy: str
    """``random``, ``scripted``, or the checkpoint / bundle path as given."""
    fraction: float
    """Share of the steps per env."""


@dataclass
class Source:
    """A loaded segment policy: its env config, its action function and what it reads."""

    cfg: TrainConfig | None
    """None for ``random`` and ``scripted`` (they act in whatever task the others, or ``task=``, name)."""
    act: Callable[[Obs], torch.Tensor] | None
    groups: tuple[str, ...] = ("policy",)
    obs_dims: dict[str, int] | None = None
    action_dim: int | None = None
    name: str = "random"


def _expand(text: str, fraction: float) -> list[Segment]:
    """``[level:]policy`` -> segments; ``medium-replay:<run>`` -> one per checkpoint of the run."""
    if text in POLICYLESS:
        return [Segment(text, text, fraction)]
    level, _, policy = text.partition(":")
    if level not in LEVELS[1:4] or not policy:
        level, policy = "policy", text
    if level != "medium-replay":
        return [Segment(level, policy, fraction)]
    run = find_checkpoint(policy).parent
    models = sorted((m for m in run.glob("model_*.pt") if checkpoint_iteration(m) >= 0), key=checkpoint_iteration)
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
                         "or 'scripted' (or --level random|scripted) with task=..., or --mix")
    if level in POLICYLESS or policy in (None, *POLICYLESS):
        kind = level or policy
        if policy not in (None, kind) or level not in (None, kind):
            raise ValueError("--level random and --level scripted take no policy; other levels need one (a "
                             "checkpoint, run or policy.onnx)")
        return [Segment(kind, kind, 1.0)]
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
    if segment.policy in POLICYLESS:
        return Source(None, None, name=segment.policy)
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


def segment_policy(segment: Segment, source: Source, env: VecEnv, task: str, seed: int) -> Policy:
    """Who acts in a segment: the loaded policy, the task's scripted expert, or uniform actions."""
    if source.act is not None:
        return source.act
    if segment.level == "scripted":
        from ctrl_rl.tasks.manipulation.experts import EXPERTS  # optional: mujoco (the arm tasks' experts)

        return EXPERTS[task](env)
    return random_policy(env, seed)


def select_rows(data: Dataset, rows: np.ndarray) -> Dataset:
    """The rows ``rows`` (indices or a mask) of ``data``, in order."""
    arrays = {k: getattr(data, k)[rows] for k in ("observations", "actions", "rewards", "terminals", "timeouts")}
    nxt = None if data.next_observations is None else data.next_observations[rows]
    return Dataset(**arrays, next_observations=nxt, infos={k: v[rows] for k, v in data.infos.items()})


class FirstEpisodes:
    """``collect_dataset``'s ``on_step``: the step each env's first episode ended at (-1: not yet) and whether
    the task scored it a success (its ``success_rate`` episode metric)."""

    def __init__(self, num_envs: int) -> None:
        self.end, self.success = np.full(num_envs, -1), np.zeros(num_envs, dtype=bool)
        self.step, self.scored = 0, False

    def __call__(self, info: dict, ended: torch.Tensor) -> None:
        first = ended.cpu().numpy() & (self.end < 0)
        self.end[first] = self.step
        outcome = info.get("episode_metrics", {}).get("success_rate")
        if outcome is not None:
            self.success[first], self.scored = outcome.cpu().numpy()[first] > 0.5, True
        self.step += 1


def collect_episodes(env: VecEnv, act: Policy, episodes: int, seed: int, noise: float, groups: tuple[str, ...],
                     successful_only: bool = False) -> tuple[Dataset, dict[str, int]]:
    """Whole episodes, in rounds of one episode per env (``env.max_episode_length`` steps from ``reset(seed +
    round)``), until ``episodes`` are kept (every finished one, or with ``successful_only`` those whose
    ``success_rate`` episode metric is 1). Returns the first ``episodes`` kept and the counts of episodes
    ``tried``, ``succeeded`` and ``kept``."""
    n, steps = env.num_envs, env.max_episode_length
    kept: Dataset | None = None
    count = {"tried": 0, "succeeded": 0, "kept": 0}
    for r in range(MAX_ROUNDS):
        first = FirstEpisodes(n)
        part = collect_dataset(env, act, steps, seed + r, noise, groups, on_step=first)
        if successful_only and not first.scored:
            raise ValueError("--successful-only: this task reports no success_rate episode metric; drop the flag")
        end, success = first.end, first.success
        done = end >= 0
        count["tried"] += int(done.sum())
        count["succeeded"] += int((done & success).sum())
        keep = np.flatnonzero(done & (success | (not successful_only)))
        if len(keep):
            part = select_rows(part, np.concatenate([np.arange(i * steps, i * steps + end[i] + 1) for i in keep]))
            kept = part if kept is None else kept.concatenate(part)
        count["kept"] += len(keep)
        if count["kept"] >= episodes:
            last = np.flatnonzero(kept.episode_ends())[episodes - 1]
            return select_rows(kept, np.arange(last + 1)), {**count, "kept": episodes}
    raise RuntimeError(f"--episodes {episodes}: only {count['kept']} kept of {count['tried']} tried in {MAX_ROUNDS} "
                       f"rounds ({count['succeeded']} successes); lower --noise or --episodes, or drop "
                       "--successful-only")


def collect(policy: str | None, overrides: list[str], output: str, steps: int = 1000, envs: int = 16,
            noise: float = 0.0, seed: int = 0, level: str | None = None, mix: str | None = None,
            fmt: str | None = None, episodes: int | None = None, successful_only: bool = False) -> str:
    """Roll the planned segments and write one dataset; prints a ``RESULT`` line, returns where it went.
    ``episodes``: whole episodes of one source instead of ``steps`` per env (:func:`collect_episodes`)."""
    if steps <= 0 or envs <= 0 or noise < 0 or (episodes is not None and episodes <= 0):
        raise ValueError(f"--steps, --envs and --episodes must be > 0 and --noise >= 0 (got {steps}, {envs}, "
                         f"{episodes}, {noise})")
    if successful_only and episodes is None:
        raise ValueError("--successful-only keeps whole episodes: give --episodes N")
    fmt = check_output(output, fmt)  # before any work
    segments = plan(policy, level, mix)
    if episodes is not None and len(segments) != 1:
        raise ValueError("--episodes collects whole episodes of one source; with --mix or medium-replay use --steps")
    shares = split_steps([s.fraction for s in segments], steps)
    if min(shares) < 1:
        raise ValueError(f"--steps {steps} is too few for {len(segments)} segments ({shares} steps per env each)")
    sources = [load_source(s, overrides) for s in segments]
    base = next((s for s in sources if s.cfg is not None), None)
    if base is None:  # only random or scripted segments: the task comes from the overrides
        if not any(o.lstrip("+").startswith("task=") for o in overrides):
            raise ConfigError(f"{segments[0].level} actions need a task: add task=<id> (e.g. task=lift; "
                              "`ctrl-rl list`)")
        base = Source(load_train_config(overrides), None, name=segments[0].level)
    require_device(base.cfg.device)
    env = build_env(base.cfg, num_envs=envs, seed=seed)
    for src in sources:
        _check_compatible(base, src, env)
    data, parts, counts = None, [], {}
    for i, (seg, src, n) in enumerate(zip(segments, sources, shares, strict=True)):
        act = segment_policy(seg, src, env, base.cfg.task.name, seed + i)
        seg_noise = noise if seg.level != "random" else 0.0
        if episodes is None:
            part = collect_dataset(env, act, n, seed + i, seg_noise, base.groups)
        else:
            part, counts = collect_episodes(env, act, episodes, seed + i, seg_noise, base.groups, successful_only)
        start = 0 if data is None else len(data)
        data = part if data is None else data.concatenate(part)
        parts.append({"level": seg.level, "policy": src.name, "steps_per_env": n if episodes is None else None,
                      "rows": [start, len(data)]})
        log.info("segment %d/%d: %s %s, %d envs", i + 1, len(segments), seg.level, src.name, envs)
    env.close()
    label = level or ("mixed" if mix else segments[0].level)
    attrs = {"task": base.cfg.task.name, "sim": base.cfg.sim.name, "level": label,
             "policy": ";".join(dict.fromkeys(p["policy"] for p in parts)), "noise_std": noise, "seed": seed,
             "obs_groups": ",".join(base.groups), "num_envs": envs, "segments": json.dumps(parts)}
    if episodes is not None:
        rate = counts["succeeded"] / max(1, counts["tried"])
        attrs.update({"episodes_tried": counts["tried"], "episodes_succeeded": counts["succeeded"],
                      "episodes_kept": counts["kept"], "behavior_success_rate": rate,
                      "successful_only": successful_only})
    fmt, out = save_dataset(data, output, attrs, fmt, action_bounds=env.action_bounds)
    returns = data.episode_returns()
    what = f"{envs} envs x {steps} steps" if episodes is None else \
        f"{counts['kept']} kept of {counts['tried']} tried, {counts['succeeded']} successes"
    print(f"collected {len(data)} transitions ({len(returns)} episodes, {what}, {len(segments)} segment(s), "
          f"level {label}, noise {noise}) -> {out}")
    extra = "" if episodes is None else f" behavior_success_rate={attrs['behavior_success_rate']:.4f}"
    print(f"RESULT path={out} format={fmt} level={label} transitions={len(data)} episodes={len(returns)} "
          f"mean_episode_return={returns.mean():.4f}{extra}")
    return out
