"""Does ctrl_quad learn to walk on 2 CPU cores in 30 minutes? Train, evaluate, film.

Trains ``task=quadruped_velocity_flat`` on ``sim=mujoco`` with the task's default config
(or ``--iterations``), then evaluates the deterministic policy with every env commanded
0.5 m/s forward for full 20 s episodes (pushes off, the rest of the randomization on), and
records a video with ``ctrl-rl play``. Pass bar (issue 3): mean forward velocity >= 0.4 m/s,
no falls, training <= 30 min.

Usage::

    python benchmarks/quadruped_walk.py                   # default budget, ~30 min on 2 cores
    python benchmarks/quadruped_walk.py --iterations 20   # smoke run
    python benchmarks/quadruped_walk.py --train-override tune=ppo_quadruped_velocity_flat_fast \
        --budget-minutes 8                                # the 8-minute preset (issue 27)
    python benchmarks/quadruped_walk.py --checkpoint logs/ppo/quadruped_velocity_flat/<run>  # evaluate only
"""

from __future__ import annotations

import argparse
import csv
import re
import time
from pathlib import Path

from ctrl_rl.app.evaluate import evaluate
from ctrl_rl.app.play import play
from ctrl_rl.app.train import train

TASK = "quadruped_velocity_flat"
EVAL_KWARGS = ["+task.kwargs.fixed_command=[0.5,0.0,0.0]", "+task.kwargs.push_velocity=0.0"]


def logged_train_minutes(checkpoint: Path) -> float:
    """Training minutes up to ``checkpoint`` (a run: its latest ``model_<it>.pt``) from the run's
    ``metrics.csv``: the iterations' collection and update times summed, as a run of that length takes."""
    run_dir = checkpoint if checkpoint.is_dir() else checkpoint.parent
    models = [checkpoint] if checkpoint.is_file() else list(run_dir.glob("model_*.pt"))
    its = [int(m.group(1)) for f in models if (m := re.fullmatch(r"model_(\d+)\.pt", f.name))]
    if not its or not (run_dir / "metrics.csv").is_file():
        return float("nan")
    with open(run_dir / "metrics.csv", newline="") as f:
        rows = [r for r in csv.DictReader(f) if int(float(r["iteration"])) <= max(its)]
    return sum(float(r["collection_time"]) + float(r["learning_time"]) for r in rows) / 60


def train_or_load(overrides: list[str], iterations: int | None, checkpoint: str | None) -> tuple[Path, float]:
    """Train with ``overrides`` (``iterations``: the run's length) and time it, or take ``checkpoint`` and the
    minutes its run logged; returns ``(run, minutes)``."""
    if checkpoint is not None:
        return Path(checkpoint), logged_train_minutes(Path(checkpoint))
    if iterations is not None:
        overrides = [*overrides, f"runner.max_iterations={iterations}"]
    start = time.perf_counter()
    run = train(overrides)
    return run, (time.perf_counter() - start) / 60


def main(task: str = TASK, budget_minutes: float = 30.0, doc: str = __doc__, noise_free: bool = False) -> None:
    """Train ``task`` (or evaluate ``--checkpoint``), evaluate at 0.5 m/s, film; the bar: >= 0.4 m/s,
    no falls, training within ``budget_minutes``. ``noise_free``: evaluate without observation noise,
    as a deploy node feeds the policy (a policy whose motion the noise drives fails there)."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iterations", type=int, default=None, help="PPO iterations (default: the task config's)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--episodes", type=int, default=64, help="evaluation episodes (20 s each)")
    parser.add_argument("--checkpoint", default=None, help="skip training: evaluate this run / model file")
    parser.add_argument("--video-steps", type=int, default=500, help="control steps in the video (50 Hz)")
    parser.add_argument("--train-override", action="append", default=[], help="extra training override (repeat)")
    parser.add_argument("--budget-minutes", type=float, default=None,
                        help="the pass bar's training minutes (default: the task's, 30 for ctrl_quad)")
    args = parser.parse_args()

    overrides = [f"task={task}", f"seed={args.seed}", "runner.run_name=walk_benchmark", *args.train_override]
    run, train_minutes = train_or_load(overrides, args.iterations, args.checkpoint)
    eval_kwargs = EVAL_KWARGS + (["+task.kwargs.obs_noise=0.0"] if noise_free else [])
    result = evaluate(str(run), eval_kwargs, episodes=args.episodes, seed=2024)
    run_dir = run if run.is_dir() else run.parent
    video = run_dir / ("walk.mp4" if args.checkpoint is None else f"walk_{run.stem if run.is_file() else 'latest'}.mp4")
    play(str(run), eval_kwargs, episodes=1, video=str(video), steps=args.video_steps)

    velocity, falls = result["forward_velocity"], int(result["terminated"])
    budget = args.budget_minutes if args.budget_minutes is not None else budget_minutes
    passed = velocity >= 0.4 and falls == 0 and not train_minutes > budget
    print()
    print("| train (min) | episodes | mean forward velocity (m/s) | falls | velocity error (m/s) | return |")
    print("|---|---|---|---|---|---|")
    print(f"| {train_minutes:.1f} | {args.episodes} | {velocity:.3f} | {falls} | "
          f"{result['lin_vel_error']:.3f} | {result['mean_return']:.2f} |")
    print(f"run: {run_dir}  video: {video}  curve: {run_dir / 'learning_curve.png'}")
    print(f"RESULT train_minutes={train_minutes:.2f} forward_velocity={velocity:.4f} falls={falls} "
          f"lin_vel_error={result['lin_vel_error']:.4f} mean_return={result['mean_return']:.4f} "
          f"passed={int(passed)}")


if __name__ == "__main__":
    main()
