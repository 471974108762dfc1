"""``ctrl-rl eval``: deterministic episodes of a checkpoint's policy, ending with a ``RESULT`` line.

It says what it measured (episodes, their length, the command) and, for a legged robot task, ends with
the gait report (``ctrl_rl.deploy.gait_report``: each line against its bar), written as JSON with a
PNG of env 0's traces next to it; ``require_gait`` (``--require-gait``) fails the command on any bar.
"""

from __future__ import annotations

import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ctrl_rl.app.session import checked_env, load_policy, policy_fn
from ctrl_rl.deploy.gait_files import write_report
from ctrl_rl.deploy.gait_report import GaitCheckFailed, GaitSpec, GaitTrace, gait_report
from ctrl_rl.runners.episodes import run_episodes


def evaluate(spec: str, overrides: list[str], episodes: int = 100, seed: int = 12345, summary: str | None = None,
             require_gait: bool = False) -> dict[str, Any]:
    """Deterministic episodes with the checkpoint's policy; prints what was measured, the gait report
    (robot tasks) and a ``RESULT`` line, last."""
    if episodes <= 0:
        raise ValueError(f"--episodes must be > 0, got {episodes}")
    cfg, path, alg, state = load_policy(spec, overrides)
    env = checked_env(cfg, state, episodes, seed)
    gait_spec = env.record_gait()
    if require_gait and gait_spec is None:
        raise ValueError(f"--require-gait: task {cfg.task.name} has no gait to report (it is not a legged robot task)")
    steps: list[dict[str, torch.Tensor]] | None = [] if gait_spec is not None else None
    metrics: dict[str, float] = {}
    returns, lengths = run_episodes(env, policy_fn(alg), seed, metrics=metrics, gait=steps)
    result = {"mean_return": float(returns.mean()), "std_return": float(returns.std(unbiased=False)),
              "min_return": float(returns.min()), "max_return": float(returns.max()),
              "mean_length": float(lengths.double().mean()), "episodes": episodes, **metrics}
    print(f"evaluated {path} on {cfg.task.name}: {episodes} deterministic episodes (seed {seed})")
    print(measured(env.max_episode_length, env.step_dt, lengths, int(metrics.get("terminated", 0))))
    report = None
    if steps is not None:
        traces = gait_traces(steps, lengths)
        print(command_text(traces))
        gspec = GaitSpec(**gait_spec)
        report = gait_report(traces, gspec)
        print("\n".join(report.table()))
        result.update(report.result_fields())
        out = Path(summary) if summary else Path(path).parent / "eval" / f"gait_{Path(path).stem}_" \
            f"{time.strftime('%Y-%m-%d_%H-%M-%S')}.json"
        data = {"checkpoint": str(path), "task": cfg.task.name, "seed": seed, "result": result}
        print("\n".join(write_report(out, data, report, traces[0], gspec, f"{cfg.task.name}, env 0 ({path})")))
    print("RESULT " + " ".join(f"{k}={v:.4f}" if isinstance(v, float) else f"{k}={v}" for k, v in result.items()))
    if require_gait and report is not None and not report.passed:
        raise GaitCheckFailed(f"{len(report.failed())} bar(s) of the gait report failed: {', '.join(report.failed())}")
    return result


def measured(max_length: int, dt: float, lengths: torch.Tensor, terminated: int) -> str:
    """What the figures are over, within 100 columns."""
    text = (f"measured: {len(lengths)} episodes (one per env, from reset), each up to {max_length * dt:.1f} s "
            f"({max_length} steps at {1 / dt:.0f} Hz), mean {float(lengths.double().mean()) * dt:.1f} s; "
            f"{terminated} ended in a terminal state (a fall for robot tasks); per-step metrics are means over "
            "these episodes' steps, episode metrics (a task's success_rate) over the episodes")
    return textwrap.fill(text, 100, subsequent_indent="  ")


def command_text(traces: list[Any]) -> str:
    """The velocity command the episodes were given: one fixed command, or its range over the envs."""
    cmd = np.concatenate([t.command for t in traces])
    lo, hi = cmd.min(0), cmd.max(0)
    if np.allclose(lo, hi):
        return f"command: vx {lo[0]:.2f} m/s, vy {lo[1]:.2f} m/s, yaw rate {lo[2]:.2f} rad/s in every episode"
    return textwrap.fill(f"command: sampled per env, vx {lo[0]:.2f}..{hi[0]:.2f} m/s, vy {lo[1]:.2f}..{hi[1]:.2f} "
                         f"m/s, yaw rate {lo[2]:.2f}..{hi[2]:.2f} rad/s (one for all: "
                         "task.kwargs.fixed_command=[vx,vy,yaw_rate])", 100, subsequent_indent="  ")


def gait_traces(steps: list[dict[str, torch.Tensor]], lengths: torch.Tensor) -> list[Any]:
    """Each env's first episode as a ``GaitTrace`` from the per-step ``info["gait"]`` records."""
    stacked = {k: torch.stack([s[k] for s in steps]).cpu().numpy() for k in steps[0]}  # [T, N, ...]
    traces = []
    for i, n in enumerate(lengths.tolist()):
        fields = {k: v[:n, i] for k, v in stacked.items() if k != "terminated"}
        traces.append(GaitTrace(**fields, fell=bool(stacked["terminated"][n - 1, i])))
    return traces
