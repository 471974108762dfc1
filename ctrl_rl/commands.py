"""What each CLI subcommand does, as plain functions (scriptable and testable)."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import torch

from ctrl_rl.config import TrainConfig
from ctrl_rl.configure import apply_overrides, config_hash, config_yaml, load_train_config
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


def require_device(device: str) -> None:
    """Fail before any work when ``device`` does not exist here."""
    from ctrl_rl.config import ConfigError

    if device.startswith("cuda"):
        index = int(device.split(":")[1]) if ":" in device else 0
        if not torch.cuda.is_available() or index >= torch.cuda.device_count():
            raise ConfigError(f"device: '{device}' is not available on this machine "
                              f"({torch.cuda.device_count()} CUDA device(s)); use device=cpu")


def train(overrides: list[str], checkpoint: str | None = None, print_cfg: bool = False) -> Path:
    """Train (or resume) and return the run directory.

    A resumed run takes its config from the checkpoint; ``overrides`` then change only the
    keys they name (a warning lists them, since changes make the resume inexact).
    """
    cfg = load_train_config(overrides)
    checkpoint = checkpoint or cfg.runner.checkpoint
    if print_cfg:
        print(config_yaml(cfg), end="")
        return Path()
    path = find_checkpoint(checkpoint, cfg) if checkpoint else None
    if path is not None:
        saved, _ = load_checkpoint(path)
        cfg = apply_overrides(saved, overrides)
        drift = report_config_drift(saved, cfg)
        if drift:
            log.warning("config differs from the checkpoint's (resume is exact only without changes): %s",
                        "; ".join(drift))
    require_device(cfg.device)
    seed_everything(cfg.seed)
    runner = _make_runner(cfg)  # env and learner first: config errors stop before any file is written
    if path is not None:
        run_dir = path.parent
        runner.load(path)
        print(f"resuming {path} at iteration {runner.iteration} -> {cfg.runner.max_iterations}")
        write_params(run_dir, cfg, overrides, prefix=f"resume_{runner.iteration}_")
    else:
        run_dir = new_run_dir(cfg)
        print(f"training {cfg.algo.name} on {cfg.task.name} ({cfg.sim.name}, {cfg.env.num_envs} envs, "
              f"{cfg.device}) -> {run_dir}")
        write_params(run_dir, cfg, overrides)
    runner.log_dir = run_dir
    runner.learn(cfg.runner.max_iterations)
    print(f"done: {run_dir} (learning_curve.png, metrics.csv, model_{runner.iteration}.pt)")
    return run_dir


def _load_policy(spec: str, overrides: list[str]):
    """``(cfg, path, algorithm, checkpoint)`` for inference; overrides may change env keys."""
    from ctrl_rl.algos.ppo import PPO

    path = find_checkpoint(spec)
    cfg, state = load_checkpoint(path)
    if cfg.device.startswith("cuda") and not torch.cuda.is_available():
        log.info("checkpoint was trained on %s; running on cpu here", cfg.device)
        cfg = apply_overrides(cfg, ["device=cpu"])
    cfg = apply_overrides(cfg, overrides)  # e.g. task.kwargs.* for a different evaluation setting
    require_device(cfg.device)
    alg = PPO(cfg.algo, state["obs_dims"], state["action_dim"], 1, cfg.device)
    alg.load_state_dict(state["algo"], restore_rng=False)
    return cfg, path, alg, state


def _checked_env(cfg: TrainConfig, state: dict, num_envs: int, seed: int):
    """The checkpoint's task, refusing an env whose observations or actions the policy cannot take."""
    from ctrl_rl.config import ConfigError

    env = build_env(cfg, num_envs=num_envs, seed=seed)
    if dict(env.obs_dims) != state["obs_dims"] or env.action_dim != state["action_dim"]:
        raise ConfigError(f"the policy expects observations {state['obs_dims']} and {state['action_dim']} action(s); "
                          f"task '{cfg.task.name}' gives {dict(env.obs_dims)} and {env.action_dim}: "
                          "evaluate on the task it was trained on")
    return env


def _policy_fn(alg):
    actor = alg.model.actor.eval()
    return lambda obs: actor(alg.model.actor_input(obs))


def evaluate(spec: str, overrides: list[str], episodes: int = 100, seed: int = 12345) -> dict[str, float]:
    """Deterministic episodes with the checkpoint's policy; prints a ``RESULT`` line."""
    from ctrl_rl.evaluate import run_episodes

    if episodes <= 0:
        raise ValueError(f"--episodes must be > 0, got {episodes}")
    cfg, path, alg, state = _load_policy(spec, overrides)
    env = _checked_env(cfg, state, episodes, seed)
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

    if spec is not None:  # the checkpoint's task, whatever the agent
        cfg, _, alg, state = _load_policy(spec, overrides)
        env = _checked_env(cfg, state, episodes, seed)
    elif agent == "policy":
        raise ValueError("play needs a checkpoint (or --agent zero|random with task=<id>)")
    else:
        cfg = load_train_config(overrides)
        require_device(cfg.device)
        env = build_env(cfg, num_envs=episodes, seed=seed)
    agents = {"policy": lambda: _policy_fn(alg), "zero": lambda: zero_policy(env),
              "random": lambda: random_policy(env, seed)}
    policy = agents[agent]()
    print(f"playing {agent} agent on {cfg.task.name} ({episodes} envs)")
    returns, _ = run_episodes(env, policy, seed,
                              on_episode=lambda i, r, n: print(f"  env {i:3d}: return {r:10.3f}  length {n}"))
    print(f"RESULT mean_return={float(returns.mean()):.4f} std_return={float(returns.std(unbiased=False)):.4f} "
          f"episodes={episodes}")


def export(spec: str, overrides: list[str], output: str | None = None) -> Path:
    """Write ``<run>/exported/policy.onnx`` after the ONNX/torch parity check passes."""
    import ctrl_rl
    from ctrl_rl.deploy.export import export_onnx

    cfg, path, alg, state = _load_policy(spec, overrides)
    out = Path(output) if output else path.parent / "exported" / "policy.onnx"
    env = _checked_env(cfg, state, 16, cfg.seed + 1)
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
    info = export_onnx(alg.model.actor.cpu(), sum(obs_dims.values()), env.action_bounds, out, metadata,
                       recorded_obs=np.concatenate(recorded))
    print(f"exported {out} (parity max abs diff {info['max_abs_diff']:.2e} over {info['num_probes']} observations)")
    print(f"RESULT path={out} max_abs_diff={info['max_abs_diff']:.3e}")
    return out
