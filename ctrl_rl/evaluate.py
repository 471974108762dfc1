"""Deterministic evaluation: each env runs exactly one episode with the policy's mean action."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ctrl_rl.env import Obs, VecEnv

Policy = Callable[[Obs], torch.Tensor]


@torch.no_grad()
def run_episodes(env: VecEnv, policy: Policy, seed: int,
                 on_episode: Callable[[int, float, int], None] | None = None,
                 metrics: dict[str, float] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Run one episode in every env of ``env``; return ``(returns, lengths)`` per env.

    Episodes that start after an env's first one are ignored, so the result does not
    favour short episodes. ``on_episode(env_index, return, length)`` is called as each
    finishes (``ctrl-rl play`` prints them live). A ``metrics`` dict receives
    ``terminated`` (episodes that ended in a terminal state, e.g. falls) and, for every
    per-env measure in ``info["metrics"]``, its mean over the steps of the evaluated episodes.
    """
    obs = env.reset(seed=seed)
    n = env.num_envs
    returns = torch.zeros(n, dtype=torch.float64, device=env.device)
    lengths = torch.zeros(n, dtype=torch.long, device=env.device)
    finished = torch.zeros(n, dtype=torch.bool, device=env.device)
    n_terminated = torch.zeros((), dtype=torch.long, device=env.device)
    sums: dict[str, torch.Tensor] = {}
    counts: dict[str, torch.Tensor] = {}
    for _ in range(env.max_episode_length + 1):
        obs, reward, terminated, truncated, info = env.step(policy(obs))
        active = ~finished
        if metrics is not None:
            for name, v in info.get("metrics", {}).items():
                sums[name] = sums.get(name, 0.0) + torch.where(active, v.double(), 0.0).sum()
                counts[name] = counts.get(name, 0) + active.sum()
        n_terminated += (terminated & active).sum()
        returns += torch.where(active, reward.double(), 0.0)
        lengths += active.long()
        newly = (terminated | truncated) & active
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
    return returns, lengths


def zero_policy(env: VecEnv) -> Policy:
    return lambda obs: torch.zeros(env.num_envs, env.action_dim, device=env.device)


def random_policy(env: VecEnv, seed: int) -> Policy:
    g = torch.Generator(device=env.device)
    g.manual_seed(seed)
    lo, hi = env.action_bounds or (-1.0, 1.0)
    return lambda obs: torch.rand(env.num_envs, env.action_dim, generator=g, device=env.device) * (hi - lo) + lo
