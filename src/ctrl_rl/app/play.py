"""``ctrl-rl play``: watch a policy (or a zero/random agent) episode by episode, live or as a video."""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

from ctrl_rl.app.configure import load_train_config
from ctrl_rl.app.session import build_env, checked_env, load_policy, policy_fn, require_device
from ctrl_rl.runners.episodes import episodes_ended


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
    episodes_ended(policy, None)
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
        episodes_ended(policy, ended)
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
    from ctrl_rl.runners.episodes import random_policy, zero_policy
    from ctrl_rl.utils.video import VideoWriter, check_video_path, video_fps

    if steps is not None and steps <= 0:
        raise ValueError(f"--steps must be > 0, got {steps}")
    out = check_video_path(video) if video else None  # before loading anything
    if spec is not None:  # the checkpoint's task, whatever the agent
        cfg, _, alg, state = load_policy(spec, overrides)
        env = checked_env(cfg, state, episodes, seed)
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
    agents = {"policy": lambda: policy_fn(alg), "zero": lambda: zero_policy(env),
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
