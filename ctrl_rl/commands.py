"""What each CLI subcommand does, as plain functions (scriptable and testable)."""

from __future__ import annotations

import logging
from pathlib import Path

import torch

from ctrl_rl.config import TrainConfig
from ctrl_rl.configure import config_hash, config_yaml, load_train_config
from ctrl_rl.session import (
    build_env,
    find_checkpoint,
    load_checkpoint,
    new_run_dir,
    report_config_drift,
    write_params,
)
from ctrl_rl.utils.checkpoint import seed_everything

log = logging.getLogger(__name__)


def _make_runner(cfg: TrainConfig):
    from ctrl_rl.runners.on_policy import OnPolicyRunner

    return OnPolicyRunner(build_env(cfg), cfg)


def train(overrides: list[str], checkpoint: str | None = None, print_cfg: bool = False) -> Path:
    """Train (or resume) and return the run directory."""
    cfg = load_train_config(overrides)
    checkpoint = checkpoint or cfg.runner.checkpoint
    if print_cfg:
        print(config_yaml(cfg), end="")
        return Path()
    seed_everything(cfg.seed)
    path = find_checkpoint(checkpoint, cfg) if checkpoint else None
    runner = _make_runner(cfg)  # env and learner first: config errors stop before any file is written
    if path is not None:
        saved, _ = load_checkpoint(path)
        drift = report_config_drift(saved, cfg)
        if drift:
            log.warning("config differs from the checkpoint's (resume is exact only without changes): %s",
                        "; ".join(drift))
        run_dir = path.parent
        runner.load(path)
        print(f"resuming {path} at iteration {runner.iteration} -> {cfg.runner.max_iterations}")
    else:
        run_dir = new_run_dir(cfg)
        print(f"training {cfg.algo.name} on {cfg.task.name} ({cfg.sim.name}, {cfg.env.num_envs} envs, "
              f"{cfg.device}) -> {run_dir}")
    runner.log_dir = run_dir
    write_params(run_dir, cfg, overrides)
    runner.learn(cfg.runner.max_iterations)
    print(f"done: {run_dir} (learning_curve.png, metrics.csv, model_{runner.iteration}.pt)")
    return run_dir


def _load_policy(spec: str, overrides: list[str]):
    """``(cfg, path, algorithm)`` with the checkpoint's weights; overrides may change env keys."""
    from ctrl_rl.algos.ppo import PPO

    path = find_checkpoint(spec)
    cfg, state = load_checkpoint(path)
    if overrides:  # e.g. device=cpu or task.kwargs.* for a different evaluation setting
        from omegaconf import OmegaConf

        from ctrl_rl.config import ConfigError
        from ctrl_rl.configure import _explain

        try:
            cfg = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(cfg), OmegaConf.from_dotlist(overrides)))
        except Exception as exc:
            raise ConfigError(_explain(exc)) from None
    alg = PPO(cfg.algo, state["obs_dims"], state["action_dim"], 1, cfg.device)
    alg.load_state_dict(state["algo"])
    return cfg, path, alg


def _policy_fn(alg):
    actor = alg.model.actor.eval()
    return lambda obs: actor(alg.model.actor_input(obs))


def evaluate(spec: str, overrides: list[str], episodes: int = 100, seed: int = 12345) -> dict[str, float]:
    """Deterministic episodes with the checkpoint's policy; prints a ``RESULT`` line."""
    from ctrl_rl.evaluate import run_episodes

    if episodes <= 0:
        raise ValueError(f"--episodes must be > 0, got {episodes}")
    cfg, path, alg = _load_policy(spec, overrides)
    env = build_env(cfg, num_envs=episodes, seed=seed)
    returns, lengths = run_episodes(env, _policy_fn(alg), seed)
    result = {"mean_return": float(returns.mean()), "std_return": float(returns.std(unbiased=False)),
              "min_return": float(returns.min()), "max_return": float(returns.max()),
              "mean_length": float(lengths.double().mean()), "episodes": episodes}
    print(f"evaluated {path} on {cfg.task.name}: {episodes} deterministic episodes (seed {seed})")
    print("RESULT " + " ".join(f"{k}={v:.4f}" if isinstance(v, float) else f"{k}={v}" for k, v in result.items()))
    return result


def play(spec: str | None, overrides: list[str], agent: str = "policy", episodes: int = 8, seed: int = 12345) -> None:
    """Run episodes and print each as it ends; ``agent=zero|random`` needs no checkpoint."""
    from ctrl_rl.evaluate import random_policy, run_episodes, zero_policy

    if agent == "policy":
        if spec is None:
            raise ValueError("play needs a checkpoint (or --agent zero|random with task=<id>)")
        cfg, _, alg = _load_policy(spec, overrides)
        env = build_env(cfg, num_envs=episodes, seed=seed)
        policy = _policy_fn(alg)
    else:
        cfg = load_train_config(overrides)
        env = build_env(cfg, num_envs=episodes, seed=seed)
        policy = zero_policy(env) if agent == "zero" else random_policy(env, seed)
    print(f"playing {agent} agent on {cfg.task.name} ({episodes} envs)")
    returns, _ = run_episodes(env, policy, seed,
                              on_episode=lambda i, r, n: print(f"  env {i:3d}: return {r:10.3f}  length {n}"))
    print(f"RESULT mean_return={float(returns.mean()):.4f} std_return={float(returns.std(unbiased=False)):.4f} "
          f"episodes={episodes}")


def export(spec: str, overrides: list[str], output: str | None = None) -> Path:
    """Write ``<run>/exported/policy.onnx`` after the ONNX/torch parity check passes."""
    import ctrl_rl
    from ctrl_rl.deploy.export import export_onnx

    cfg, path, alg = _load_policy(spec, overrides)
    out = Path(output) if output else path.parent / "exported" / "policy.onnx"
    env = build_env(cfg, num_envs=16, seed=cfg.seed + 1)
    recorded = []
    obs = env.reset(seed=cfg.seed + 1)
    policy = _policy_fn(alg)
    with torch.no_grad():
        for _ in range(64):  # observations the policy really meets, for the parity check
            recorded.append(alg.model.actor_input(obs).cpu().numpy())
            obs, *_ = env.step(policy(obs))
    obs_dims = {g: env.obs_dims[g] for g in alg.model.actor_obs}
    metadata = {
        "ctrl_rl_version": ctrl_rl.__version__, "task": cfg.task.name, "sim": cfg.sim.name,
        "algo": cfg.algo.name, "config_hash": config_hash(cfg), "checkpoint": path.name,
        "obs_groups": list(alg.model.actor_obs), "obs_dims": obs_dims,
        "action_dim": env.action_dim, "action_bounds": list(env.action_bounds) if env.action_bounds else None,
        "step_dt": env.step_dt,
    }
    import numpy as np

    info = export_onnx(alg.model.actor.cpu(), sum(obs_dims.values()), env.action_bounds, out, metadata,
                       recorded_obs=np.concatenate(recorded))
    print(f"exported {out} (parity max abs diff {info['max_abs_diff']:.2e} over {info['num_probes']} observations)")
    print(f"RESULT path={out} max_abs_diff={info['max_abs_diff']:.3e}")
    return out
