"""Deterministic evaluation: each env runs exactly one episode with the policy's mean action."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ctrl_rl.env import Obs, VecEnv
from ctrl_rl.nets.actor_critic import concat_groups
from ctrl_rl.nets.memory import StatefulPolicy
from ctrl_rl.sims.build import build_env
from ctrl_rl.storage.dataset import Dataset

Policy = Callable[[Obs], torch.Tensor]


def episodes_ended(policy: Policy, dones: torch.Tensor | None) -> None:
    """Tell a recurrent policy (:class:`~ctrl_rl.nets.memory.StatefulPolicy`) that envs ``dones`` start
    new episodes (None: the whole batch was reset); a feed-forward policy keeps no state."""
    if isinstance(policy, StatefulPolicy):
        policy.episodes_ended(dones)


@torch.no_grad()
def run_episodes(env: VecEnv, policy: Policy, seed: int,
                 on_episode: Callable[[int, float, int], None] | None = None,
                 metrics: dict[str, float] | None = None,
                 gait: list[dict[str, torch.Tensor]] | None = None,
                 episode_metrics: dict[str, float] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Run one episode in every env of ``env``; return ``(returns, lengths)`` per env.

    Episodes that start after an env's first one are ignored, so the result does not
    favour short episodes. ``on_episode(env_index, return, length)`` is called as each
    finishes (``ctrl-rl play`` prints them live). A ``metrics`` dict receives
    ``terminated`` (episodes that ended in a terminal state, e.g. falls) and, for every
    per-env measure in ``info["metrics"]``, its mean over the steps of the evaluated episodes, and for
    every measure of a whole episode in ``info["episode_metrics"]`` (a success), its mean over them. A
    ``gait`` list receives every step's ``info["gait"]`` (:meth:`VecEnv.record_gait`) with the step's
    ``terminated``: env ``i``'s episode is its first ``lengths[i]`` steps. An ``episode_metrics`` dict receives
    only the means of ``info["episode_metrics"]`` (what training logs as ``Metrics/<name>``).
    """
    obs = env.reset(seed=seed)
    episodes_ended(policy, None)
    n = env.num_envs
    returns = torch.zeros(n, dtype=torch.float64, device=env.device)
    lengths = torch.zeros(n, dtype=torch.long, device=env.device)
    finished = torch.zeros(n, dtype=torch.bool, device=env.device)
    n_terminated = torch.zeros((), dtype=torch.long, device=env.device)
    sums: dict[str, torch.Tensor] = {}
    counts: dict[str, torch.Tensor] = {}
    ended_keys: set[str] = set()
    for _ in range(env.max_episode_length + 1):
        obs, reward, terminated, truncated, info = env.step(policy(obs))
        episodes_ended(policy, terminated | truncated)
        if gait is not None:
            gait.append({**info["gait"], "terminated": terminated.clone()})
        active = ~finished
        if metrics is not None:
            for name, v in info.get("metrics", {}).items():
                sums[name] = sums.get(name, 0.0) + torch.where(active, v.double(), 0.0).sum()
                counts[name] = counts.get(name, 0) + active.sum()
        n_terminated += (terminated & active).sum()
        returns += torch.where(active, reward.double(), 0.0)
        lengths += active.long()
        newly = (terminated | truncated) & active
        if metrics is not None or episode_metrics is not None:
            for name, v in info.get("episode_metrics", {}).items():
                ended_keys.add(name)
                sums[name] = sums.get(name, 0.0) + torch.where(newly, v.double(), 0.0).sum()
                counts[name] = counts.get(name, 0) + newly.sum()
        if on_episode is not None:
            for i in newly.nonzero().flatten().tolist():
                on_episode(i, float(returns[i]), int(lengths[i]))
        finished |= newly
        if bool(finished.all()):
            break
    if not bool(finished.all()):
        raise RuntimeError(f"{int((~finished).sum())} env(s) did not finish within max_episode_length="
                           f"{env.max_episode_length} steps; the env's time limit is not enforced")
    if metrics is not None:
        metrics["terminated"] = int(n_terminated)
        metrics.update({k: float(v) / max(1, int(counts[k])) for k, v in sums.items()})
    if episode_metrics is not None:
        episode_metrics.update({k: float(sums[k]) / max(1, int(counts[k])) for k in sorted(ended_keys)})
    return returns, lengths


def zero_policy(env: VecEnv) -> Policy:
    return lambda obs: torch.zeros(env.num_envs, env.action_dim, device=env.device)


def random_policy(env: VecEnv, seed: int) -> Policy:
    g = torch.Generator(device=env.device)
    g.manual_seed(seed)
    lo, hi = env.action_bounds or (-1.0, 1.0)
    return lambda obs: torch.rand(env.num_envs, env.action_dim, generator=g, device=env.device) * (hi - lo) + lo


def with_action_noise(env: VecEnv, policy: Policy, noise_std: float, seed: int) -> Policy:
    """``policy`` plus Gaussian action noise (its own generator, seeded), clipped to the env's
    bounds: how a dataset's behavior policy acts, and how it is scored with its noise."""
    g = torch.Generator(device=env.device)
    g.manual_seed(seed)

    def act(obs):
        actions = policy(obs)
        if noise_std > 0:
            actions = actions + noise_std * torch.randn(actions.shape, generator=g, device=env.device)
        return actions if env.action_bounds is None else actions.clamp(*env.action_bounds)

    return act


@torch.no_grad()
def collect_dataset(env: VecEnv, policy: Policy, steps_per_env: int, seed: int, noise_std: float = 0.0,
                    actor_obs: tuple[str, ...] = ("policy",),
                    on_step: Callable[[dict[str, Any], torch.Tensor], None] | None = None):
    """Roll ``policy`` (plus Gaussian action noise, clipped to the env's bounds) for
    ``steps_per_env`` steps in every env and return a D4RL-layout :class:`Dataset`;
    ``on_step(info, ended)`` sees each step's ``info`` and which envs' episodes ended in it.

    Rows are grouped by env, each env's steps in order, so episodes are contiguous. The
    episode an env is in when collection stops is marked as a timeout on its last row (it was
    cut, not terminated: a learner bootstraps it from ``next_observations``).
    """
    behavior = with_action_noise(env, policy, noise_std, seed)
    obs = env.reset(seed=seed)
    episodes_ended(policy, None)
    cols: dict[str, list[torch.Tensor]] = {k: [] for k in ("obs", "act", "rew", "term", "trunc", "next")}
    for _ in range(steps_per_env):
        actions = behavior(obs)
        cols["obs"].append(concat_groups(obs, actor_obs))
        obs, reward, terminated, truncated, info = env.step(actions)
        nxt = concat_groups(obs, actor_obs)
        ended = terminated | truncated
        episodes_ended(policy, ended)
        if on_step is not None:
            on_step(info, ended)
        if "final_obs" in info and bool(ended.any()):
            nxt = torch.where(ended.unsqueeze(-1), concat_groups(info["final_obs"], actor_obs), nxt)
        for k, v in (("act", actions), ("rew", reward), ("term", terminated), ("trunc", truncated), ("next", nxt)):
            cols[k].append(v)
    # [T, N, ...] -> env-major rows [N * T, ...]
    arr = {k: torch.stack(v, 1).flatten(0, 1).cpu().numpy() for k, v in cols.items()}
    trunc = arr["trunc"].reshape(env.num_envs, steps_per_env)
    trunc[:, -1] |= ~arr["term"].reshape(env.num_envs, steps_per_env)[:, -1]
    return Dataset(observations=arr["obs"], actions=arr["act"], rewards=arr["rew"], terminals=arr["term"],
                   timeouts=trunc.reshape(-1), next_observations=arr["next"])


def episodes_in_own_env(cfg: Any, num_envs: int, seed: int, *policies: Policy,
                        episode_metrics: list[dict[str, float]] | None = None,
                        ) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """:func:`run_episodes` (one episode per env) of each policy in turn, in one env of ``num_envs``
    of the config's task built for them and closed after, so evaluations neither step the training
    env nor take its size. Every policy starts from ``reset(seed)``: the same start states and
    commands, so the policies' returns are paired (their differences are not the draw of starts). The env
    comes from the one builder, with the config's ``sim.*`` options, as training's does. ``episode_metrics``
    receives each policy's episode-metric means (:func:`run_episodes`), in order."""
    env = build_env(cfg, num_envs=num_envs, seed=seed)
    results = []
    try:
        for policy in policies:
            means: dict[str, float] = {}
            results.append(run_episodes(env, policy, seed=seed, episode_metrics=means))
            if episode_metrics is not None:
                episode_metrics.append(means)
        return results
    finally:
        env.close()
