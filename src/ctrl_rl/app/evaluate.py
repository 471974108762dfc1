"""``ctrl-rl eval``: deterministic episodes of a checkpoint's policy, ending with a ``RESULT`` line."""

from __future__ import annotations

from ctrl_rl.app.session import checked_env, load_policy, policy_fn
from ctrl_rl.runners.episodes import run_episodes


def evaluate(spec: str, overrides: list[str], episodes: int = 100, seed: int = 12345) -> dict[str, float]:
    """Deterministic episodes with the checkpoint's policy; prints a ``RESULT`` line."""
    if episodes <= 0:
        raise ValueError(f"--episodes must be > 0, got {episodes}")
    cfg, path, alg, state = load_policy(spec, overrides)
    env = checked_env(cfg, state, episodes, seed)
    metrics: dict[str, float] = {}
    returns, lengths = run_episodes(env, policy_fn(alg), seed, metrics=metrics)
    result = {"mean_return": float(returns.mean()), "std_return": float(returns.std(unbiased=False)),
              "min_return": float(returns.min()), "max_return": float(returns.max()),
              "mean_length": float(lengths.double().mean()), "episodes": episodes, **metrics}
    print(f"evaluated {path} on {cfg.task.name}: {episodes} deterministic episodes (seed {seed})")
    print("RESULT " + " ".join(f"{k}={v:.4f}" if isinstance(v, float) else f"{k}={v}" for k, v in result.items()))
    return result
