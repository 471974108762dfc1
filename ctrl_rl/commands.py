"""What each CLI subcommand does, as plain functions (scriptable and testable)."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from ctrl_rl import distributed
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
from ctrl_rl.utils.interrupts import GracefulStop

log = logging.getLogger(__name__)


def _make_runner(cfg: TrainConfig):
    from ctrl_rl.runners.on_policy import make_runner

    return make_runner(build_env(cfg, seed=distributed.rank_seed(cfg.seed)), cfg)  # each rank: own episodes


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
    if checkpoint is not None and not checkpoint.strip():
        raise ValueError("--checkpoint is empty: give 'latest', a run directory or a model_<it>.pt "
                         "(or leave the option out to start a new run)")
    cfg = load_train_config(overrides)
    checkpoint = checkpoint or cfg.runner.checkpoint
    if print_cfg:
        from ctrl_rl.sims import check_task

        check_task(cfg.sim.name, cfg.task.name)  # what would fail at the env, said before printing
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
    device = distributed.setup(cfg.device)  # under torchrun: join the group, cuda:<LOCAL_RANK> per rank
    if device != cfg.device:
        cfg = dataclasses.replace(cfg, device=device)
    require_device(cfg.device)
    seed_everything(cfg.seed)  # the same on every rank: identical initial networks
    runner = _make_runner(cfg)  # env and learner first: config errors stop before any file is written
    main = distributed.is_main()
    if path is not None:
        run_dir = path.parent
        runner.load(path)
        if main:
            print(f"resuming {path} (run {run_dir.name}, seed {cfg.seed}) at iteration {runner.iteration} -> "
                  f"{runner.total_iterations()}")
            write_params(run_dir, cfg, overrides, prefix=f"resume_{runner.iteration}_")
    else:
        run_dir = new_run_dir(cfg) if main else None
        run_dir = distributed.broadcast_object(run_dir)  # every rank writes its replay file there
        if main:
            ranks = f" x {distributed.world_size()} processes" if distributed.enabled() else ""
            print(f"training {cfg.algo.name} on {cfg.task.name} ({cfg.sim.name}, {cfg.env.num_envs} envs{ranks}, "
                  f"{cfg.device}) -> {run_dir}")
            write_params(run_dir, cfg, overrides)
    runner.log_dir = run_dir
    with GracefulStop():  # Ctrl-C / SIGTERM: finish the iteration, write its checkpoint, exit 130 / 143
        runner.learn()
    # every rank waits for rank 0's last checkpoint: a rank leaving the group while another still
    # writes made gloo abort at exit ("terminate called without an active exception"), 1 run in ~5
    distributed.barrier()
    if main:
        print(f"done: {run_dir} (learning_curve.png, metrics.csv, model_{runner.iteration}.pt)")
    return run_dir


def _load_policy(spec: str, overrides: list[str]):
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
    """The learner's deterministic policy on an env's observation dict (what export writes)."""
    from ctrl_rl.nets.actor_critic import concat_groups

    policy, groups = alg.inference_policy().eval(), alg.model.actor_obs
    return lambda obs: policy(concat_groups(obs, groups))


def evaluate(spec: str, overrides: list[str], episodes: int = 100, seed: int = 12345) -> dict[str, float]:
    """Deterministic episodes with the checkpoint's policy; prints a ``RESULT`` line."""
    from ctrl_rl.evaluate import run_episodes

    if episodes <= 0:
        raise ValueError(f"--episodes must be > 0, got {episodes}")
    cfg, path, alg, state = _load_policy(spec, overrides)
    env = _checked_env(cfg, state, episodes, seed)
    metrics: dict[str, float] = {}
    returns, lengths = run_episodes(env, _policy_fn(alg), seed, metrics=metrics)
    result = {"mean_return": float(returns.mean()), "std_return": float(returns.std(unbiased=False)),
              "min_return": float(returns.min()), "max_return": float(returns.max()),
              "mean_length": float(lengths.double().mean()), "episodes": episodes, **metrics}
    print(f"evaluated {path} on {cfg.task.name}: {episodes} deterministic episodes (seed {seed})")
    print("RESULT " + " ".join(f"{k}={v:.4f}" if isinstance(v, float) else f"{k}={v}" for k, v in result.items()))
    return result


def _render_sims() -> list[str]:
    """Sims whose envs implement ``render_frame`` (the MuJoCo family), for error messages.

    Backends declare it with ``register_sim(..., renders=True)``.
    """
    from ctrl_rl.sims import SIMS

    return sorted(name for name, backend in SIMS.items() if backend.renders)


class _Pacer:
    """Sleeps so that successive :meth:`wait` calls are ``dt`` apart in wall time (``--realtime``)."""

    def __init__(self, dt: float) -> None:
        self.dt = dt
        self.next = time.perf_counter() + dt

    def wait(self) -> None:
        now = time.perf_counter()
        if self.next > now:
            time.sleep(self.next - now)
        elif now - self.next > self.dt:  # fell behind (slow render): do not burst to catch up
            self.next = now
        self.next += self.dt


@torch.no_grad()
def _play_loop(env, policy, seed: int, steps: int | None, on_episode: Callable[[int, float, int], None],
               on_step: Callable[[int], None]) -> tuple[list[float], list[int]]:
    """Step ``env``; return the returns and lengths of the episodes reported to ``on_episode``.

    Without ``steps``: each env's first episode, stopping when all have ended (as ``ctrl-rl eval``).
    With ``steps``: exactly that many control steps, reporting every episode that ends.
    ``on_step(t)`` runs after the reset (``t=0``) and after each step.
    """
    obs = env.reset(seed=seed)
    on_step(0)
    n = env.num_envs
    running = torch.zeros(n, dtype=torch.float64, device=env.device)
    length = torch.zeros(n, dtype=torch.long, device=env.device)
    seen = torch.zeros(n, dtype=torch.bool, device=env.device)  # finished a first episode
    returns: list[float] = []
    lengths: list[int] = []
    for t in range(1, (steps if steps is not None else env.max_episode_length + 1) + 1):
        obs, reward, terminated, truncated, _ = env.step(policy(obs))
        running += reward.double()
        length += 1
        ended = terminated | truncated
        report = ended if steps is not None else ended & ~seen
        for i in report.nonzero().flatten().tolist():
            returns.append(float(running[i]))
            lengths.append(int(length[i]))
            on_episode(i, returns[-1], lengths[-1])
        seen |= ended
        running[ended] = 0.0
        length[ended] = 0
        on_step(t)
        if steps is None and bool(seen.all()):
            break
    if steps is None and not bool(seen.all()):
        raise RuntimeError(f"{int((~seen).sum())} env(s) did not finish within max_episode_length="
                           f"{env.max_episode_length} steps; the env's time limit is not enforced")
    return returns, lengths


def play(spec: str | None, overrides: list[str], agent: str = "policy", episodes: int = 8, seed: int = 12345,
         video: str | None = None, realtime: bool = False, steps: int | None = None) -> None:
    """Run episodes and print each as it ends; ``agent=zero|random`` needs no checkpoint.

    ``video``: record env 0 to an H.264 MP4 at the control rate (every k-th step above 60 Hz).
    ``realtime``: pace steps to ``env.step_dt``. ``steps``: stop after that many control steps.
    """
    from ctrl_rl.evaluate import random_policy, zero_policy
    from ctrl_rl.utils.video import VideoWriter, check_video_path, video_fps

    if steps is not None and steps <= 0:
        raise ValueError(f"--steps must be > 0, got {steps}")
    out = check_video_path(video) if video else None  # before loading anything
    if spec is not None:  # the checkpoint's task, whatever the agent
        cfg, _, alg, state = _load_policy(spec, overrides)
        env = _checked_env(cfg, state, episodes, seed)
    elif agent == "policy":
        raise ValueError("play needs a checkpoint (or --agent zero|random with task=<id>)")
    else:
        cfg = load_train_config(overrides)
        require_device(cfg.device)
        env = build_env(cfg, num_envs=episodes, seed=seed)
    if out is not None and not env.supports_render:
        sims = _render_sims()
        env.close()
        raise ValueError(f"--video: sim '{cfg.sim.name}' (task '{cfg.task.name}') cannot render frames "
                         f"({type(env).__name__} has no render_frame); "
                         + (f"sims that render: {', '.join(sims)}" if sims else
                            "rendering needs a MuJoCo sim (sim=mujoco*), and none is registered here"))
    agents = {"policy": lambda: _policy_fn(alg), "zero": lambda: zero_policy(env),
              "random": lambda: random_policy(env, seed)}
    policy = agents[agent]()
    fps, stride = video_fps(env.step_dt) if out is not None else (0.0, 1)
    writer = VideoWriter(out, fps) if out is not None else None
    pacer = _Pacer(env.step_dt) if realtime else None

    def on_step(t: int) -> None:
        if writer is not None and t % stride == 0:
            writer.write(env.render_frame(0))
        if pacer is not None and t > 0:
            pacer.wait()

    limit = f", {steps} steps" if steps is not None else ""
    print(f"playing {agent} agent on {cfg.task.name} ({episodes} envs{limit}{', real time' if realtime else ''})")
    try:
        returns, _ = _play_loop(env, policy, seed, steps, on_step=on_step,
                                on_episode=lambda i, r, n: print(f"  env {i:3d}: return {r:10.3f}  length {n}"))
    except KeyboardInterrupt:
        if writer is not None and writer.frames:  # keep what was recorded
            print(f"video: {writer.close()} ({writer.frames} frames, {writer.duration:.2f} s at {fps:g} fps)")
        raise
    except BaseException:
        if writer is not None:
            writer.discard()
        raise
    finally:
        env.close()
    if writer is not None:
        print(f"video: {writer.close()} ({writer.frames} frames, {writer.duration:.2f} s at {fps:g} fps, env 0)")
    if returns:
        r = torch.tensor(returns, dtype=torch.float64)
        print(f"RESULT mean_return={float(r.mean()):.4f} std_return={float(r.std(unbiased=False)):.4f} "
              f"episodes={len(returns)}")
    else:
        print(f"RESULT episodes=0 steps={steps} (no episode ended)")


def _check_exportable(policy: torch.nn.Module, cfg: TrainConfig) -> None:
    """Refuse (with the fix) a policy an ONNX graph cannot hold: a stateful chunk player."""
    from ctrl_rl.nets.chunk import ChunkExecutor

    for m in policy.modules():
        if isinstance(m, ChunkExecutor) and not m.stateless:
            raise ValueError(f"the base plays {m.execute} actions of each {m.chunk_size}-action chunk, which "
                             "needs state the graph does not keep; export the replan-every-step policy with "
                             "algo.base_execute=1")


def collect(spec: str | None, overrides: list[str], output: str, steps: int = 1000, envs: int = 16,
            noise: float = 0.0, seed: int = 0, level: str | None = None, mix: str | None = None,
            fmt: str | None = None) -> str:
    """Roll a policy (checkpoint, exported bundle, random, or a D4RL-style level/mixture) plus Gaussian
    ``noise`` and write a D4RL HDF5 or Minari dataset; see :mod:`ctrl_rl.collect`."""
    from ctrl_rl.collect import collect as collect_levels

    return collect_levels(spec, overrides, output, steps=steps, envs=envs, noise=noise, seed=seed, level=level,
                          mix=mix, fmt=fmt)


def export(spec: str, overrides: list[str], output: str | None = None) -> Path:
    """Write ``<run>/exported/policy.onnx`` after the ONNX/torch parity check passes."""
    import ctrl_rl
    from ctrl_rl.deploy.export import export_onnx
    from ctrl_rl.nets.actor_critic import concat_groups

    cfg, path, alg, state = _load_policy(spec, overrides)
    out = Path(output) if output else path.parent / "exported" / "policy.onnx"
    env = _checked_env(cfg, state, 16, cfg.seed + 1)
    recorded = []
    obs = env.reset(seed=cfg.seed + 1)
    policy = _policy_fn(alg)
    with torch.no_grad():
        for _ in range(64):  # observations the policy really meets, for the parity check
            recorded.append(concat_groups(obs, alg.model.actor_obs).cpu().numpy())
            obs, *_ = env.step(policy(obs))
    obs_dims = {g: env.obs_dims[g] for g in alg.model.actor_obs}
    metadata = {
        "ctrl_rl_version": ctrl_rl.__version__, "task": cfg.task.name, "sim": cfg.sim.name,
        "algo": cfg.algo.name, "config_hash": config_hash(cfg), "checkpoint": path.name,
        "obs_groups": list(alg.model.actor_obs), "obs_dims": obs_dims,
        "action_dim": env.action_dim, "action_bounds": list(env.action_bounds) if env.action_bounds else None,
        "step_dt": env.step_dt,
        **env.deploy_metadata(),  # robot tasks: obs terms, joint order, default pose, gains, action clip
    }
    bounds = env.action_bounds
    if bounds is None and metadata.get("action_clip") is not None:  # the task's own clip, in the graph
        bounds = (-float(metadata["action_clip"]), float(metadata["action_clip"]))
    policy = alg.inference_policy().cpu()
    _check_exportable(policy, cfg)
    info = export_onnx(policy, sum(obs_dims.values()), bounds, out, metadata,
                       recorded_obs=np.concatenate(recorded))
    print(f"exported {out} (parity max abs diff {info['max_abs_diff']:.2e} over {info['num_probes']} observations)")
    print(f"RESULT path={out} max_abs_diff={info['max_abs_diff']:.3e}")
    return out
