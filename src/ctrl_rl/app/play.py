"""``ctrl-rl play``: watch a policy (or a zero/random agent) episode by episode, live or as a video."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

import torch

from ctrl_rl.app.configure import load_train_config
from ctrl_rl.app.session import checked_env, load_policy, policy_fn, require_device
from ctrl_rl.config import TrainConfig
from ctrl_rl.env import VecEnv
from ctrl_rl.runners.episodes import episodes_ended, random_policy, zero_policy
from ctrl_rl.sims import SIMS
from ctrl_rl.sims.build import build_env
from ctrl_rl.utils.logger import eta_seconds, format_duration
from ctrl_rl.utils.video import VideoWriter, check_video_path, video_fps


def _render_sims() -> list[str]:
    """Sims whose envs implement ``render_frame`` (the MuJoCo family), for error messages.

    Backends declare it with ``register_sim(..., renders=True)``.
    """
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


class _Progress:
    """Where a recording stands, with an ETA (``utils/logger.py: eta_seconds`` over the recent steps):
    one line redrawn in place on a terminal, else a line each time another ``every`` of ``total`` is done."""

    def __init__(self, total: int, tty: bool | None = None, every: float = 0.2) -> None:
        self.total, self.every = max(total, 1), every
        self.tty = sys.stdout.isatty() if tty is None else tty
        self.start = self.last = self.drawn = time.perf_counter()
        self.durations: list[float] = []
        self.mark = every  # the next fraction a line is printed at (not on a terminal)
        self.pending = False  # a line in place on the terminal that the next print must clear first

    def update(self, done: int) -> None:
        """After step ``done``."""
        now = time.perf_counter()
        self.durations.append(now - self.last)
        self.last = now
        if self.tty and (now - self.drawn >= 0.25 or done >= self.total):  # at most 4 redraws a second
            sys.stdout.write("\r" + self.line(done) + "\033[K")
            sys.stdout.flush()
            self.drawn, self.pending = now, True
        elif not self.tty and done >= self.mark * self.total - 1e-9:
            print(self.line(done), flush=True)
            while self.mark * self.total <= done + 1e-9:
                self.mark += self.every

    def line(self, done: int) -> str:
        elapsed, shown = self.last - self.start, min(done, self.total)
        eta = eta_seconds(self.durations, self.total - shown, window=50)
        rate = done / max(elapsed, 1e-9)
        return (f"  step {shown}/{self.total} ({100 * shown // self.total}%) | {rate:.1f} steps/s | "
                f"elapsed {format_duration(elapsed)} | ETA {'?' if eta is None else format_duration(eta)}")

    def clear(self) -> None:
        """Before another line is printed: end the line drawn in place (on a terminal)."""
        if self.pending:
            sys.stdout.write("\r\033[K")
            self.pending = False


@torch.no_grad()
def _play_loop(env, policy, seed: int, steps: int | None, on_episode: Callable[[int, float, int], None],
               on_state: Callable[[int], None], on_step: Callable[[int], None]) -> tuple[list[float], list[int]]:
    """Step ``env``; return the returns and lengths of the episodes reported to ``on_episode``.

    Without ``steps``: each env's first episode, stopping when all have ended (as ``ctrl-rl eval``).
    With ``steps``: exactly that many control steps, reporting every episode that ends.
    ``on_state(t)`` runs before control step ``t`` (from 0, right after the reset): the env holds the
    state the policy acts on, once per step taken. ``on_step(t)`` runs after step ``t`` (from 1).
    """
    obs = env.reset(seed=seed)
    episodes_ended(policy, None)
    n = env.num_envs
    running = torch.zeros(n, dtype=torch.float64, device=env.device)
    length = torch.zeros(n, dtype=torch.long, device=env.device)
    seen = torch.zeros(n, dtype=torch.bool, device=env.device)  # finished a first episode
    returns: list[float] = []
    lengths: list[int] = []
    for t in range(1, (steps if steps is not None else env.max_episode_length + 1) + 1):
        on_state(t - 1)
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


def _env_and_policy(spec: str | None, overrides: list[str], agent: str, num_envs: int, seed: int,
                    video: bool) -> tuple[TrainConfig, VecEnv, Callable]:
    """``(cfg, env, policy)``: the checkpoint's task (whatever the agent; the checkpoint it picked is
    printed) or the overrides' task for a zero/random agent; an env that cannot draw frames for
    ``video`` is refused before any step."""
    if spec is not None:
        cfg, path, alg, state = load_policy(spec, overrides)
        print(f"checkpoint: {path}" + (" (the newest run under logs/)" if spec == "latest" else ""), flush=True)
        env = checked_env(cfg, state, num_envs, seed)
    elif agent == "policy":
        raise ValueError("play needs a checkpoint (or --agent zero|random with task=<id>)")
    else:
        cfg = load_train_config(overrides)
        require_device(cfg.device)
        env = build_env(cfg, num_envs=num_envs, seed=seed)
    if video and not env.supports_render:
        sims = _render_sims()
        env.close()
        raise ValueError(f"--video: sim '{cfg.sim.name}' (task '{cfg.task.name}') cannot render frames "
                         f"({type(env).__name__} has no render_frame); "
                         + (f"sims that render: {', '.join(sims)}" if sims else
                            "rendering needs a MuJoCo sim (sim=mujoco*), and none is registered here"))
    agents = {"policy": lambda: policy_fn(alg), "zero": lambda: zero_policy(env),
              "random": lambda: random_policy(env, seed)}
    return cfg, env, agents[agent]()


def play(spec: str | None, overrides: list[str], agent: str = "policy", episodes: int | None = None,
         seed: int = 12345, video: str | None = None, realtime: bool = False, steps: int | None = None) -> None:
    """Run episodes and print each as it ends; ``agent=zero|random`` needs no checkpoint.

    ``episodes``: envs run side by side (default 8; 1 with ``video``, which films env 0 only).
    ``video``: record env 0 to an H.264 MP4, one frame per control step (the state the policy acts
    on; every k-th step above 60 Hz), at the control rate: ``steps`` steps are ``steps * step_dt``
    seconds of video; a progress line with an ETA while it records.
    ``realtime``: pace steps to ``env.step_dt``. ``steps``: stop after that many control steps.
    """
    if steps is not None and steps <= 0:
        raise ValueError(f"--steps must be > 0, got {steps}")
    out = check_video_path(video) if video else None  # before loading anything
    num_envs = episodes if episodes is not None else (1 if out is not None else 8)
    cfg, env, policy = _env_and_policy(spec, overrides, agent, num_envs, seed, video=out is not None)
    fps, stride = video_fps(env.step_dt) if out is not None else (0.0, 1)
    writer = VideoWriter(out, fps) if out is not None else None
    pacer = _Pacer(env.step_dt) if realtime else None
    progress = _Progress(steps or env.max_episode_length) if writer is not None else None

    def on_state(t: int) -> None:
        if writer is not None and t % stride == 0:
            writer.write(env.render_frame(0))

    def on_step(t: int) -> None:
        if progress is not None:
            progress.update(t)
        if pacer is not None:
            pacer.wait()

    def on_episode(i: int, ret: float, length: int) -> None:
        if progress is not None:
            progress.clear()
        print(f"  env {i:3d}: return {ret:10.3f}  length {length}")

    limit = f", {steps} steps" if steps is not None else ""
    print(f"playing {agent} agent on {cfg.task.name} ({num_envs} env{'s' if num_envs != 1 else ''}{limit}"
          f"{', real time' if realtime else ''}{f', recording env 0 to {out}' if out is not None else ''})")
    try:
        returns, _ = _play_loop(env, policy, seed, steps, on_episode=on_episode, on_state=on_state, on_step=on_step)
    except KeyboardInterrupt:
        if writer is not None and writer.frames:  # keep what was recorded
            progress.clear()
            print(f"video: {writer.close()} ({writer.frames} frames, {writer.duration:.2f} s at {fps:g} fps)")
        raise
    except BaseException:
        if writer is not None:
            writer.discard()
        raise
    finally:
        env.close()
    if writer is not None:
        progress.clear()
        wall = time.perf_counter() - progress.start
        print(f"video: {writer.close()} ({writer.frames} frames, {writer.duration:.2f} s at {fps:g} fps, env 0; "
              f"made in {wall:.1f} s)")
    if returns:
        r = torch.tensor(returns, dtype=torch.float64)
        print(f"RESULT mean_return={float(r.mean()):.4f} std_return={float(r.std(unbiased=False)):.4f} "
              f"episodes={len(returns)}")
    else:
        print(f"RESULT episodes=0 steps={steps} (no episode ended)")
