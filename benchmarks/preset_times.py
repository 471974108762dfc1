"""How long does each quadruped preset take on this machine? Train each for a few iterations, then project
its full length from the measured rate.

A full run of every preset (600 iterations of 1,024 envs for the default, 500 of 512 for the recipe and the
Go1) is over an hour of the machine; the rate is steady after the first iterations (compilation, the
thread plan's first collection), so ``--iterations`` of each, with the first ``--warmup`` timed apart,
give the full run's minutes as ``warmup + (max_iterations - warmup) x seconds per steady iteration``. The
projection is what the README quotes, marked as such; a full run's own minutes are in its ``metrics.csv``.

Usage::

    python benchmarks/preset_times.py                         # default, fast and Go1 presets, 40 iterations each
    python benchmarks/preset_times.py --presets fast --iterations 4 --warmup 2   # smoke run
    python benchmarks/preset_times.py --presets fast_fp32 fast_bf16 --robot ctrl_dog  # the update in bfloat16, beside
    (``fast`` is the preset as shipped: ``algo.autocast=auto``, bfloat16 where the CPU has it in hardware)
"""

from __future__ import annotations

import argparse
import csv
import os
import tempfile
from pathlib import Path

from ctrl_rl.app.configure import load_train_config
from ctrl_rl.app.train import train

PRESETS = {
    "default": [],
    "fast": ["tune=ppo_quadruped_velocity_flat_fast"],
    "go1": ["tune=ppo_quadruped_velocity_flat_go1"],
    "fast_bf16": ["tune=ppo_quadruped_velocity_flat_fast", "algo.autocast=bf16"],
    "fast_fp32": ["tune=ppo_quadruped_velocity_flat_fast", "algo.autocast=none"],
}
"""``ctrl-rl train task=quadruped_velocity_flat`` plus these overrides."""


def stage_seconds(run: Path) -> list[tuple[float, float]]:
    """``(collection, update)`` seconds of each iteration of ``run`` (its ``metrics.csv``)."""
    with open(run / "metrics.csv", newline="") as f:
        return [(float(r["collection_time"]), float(r["learning_time"])) for r in csv.DictReader(f)]


def iteration_seconds(run: Path) -> list[float]:
    """Collection plus update seconds of each iteration of ``run``."""
    return [c + u for c, u in stage_seconds(run)]


def project(seconds: list[float], warmup: int, total: int) -> tuple[float, float]:
    """``(seconds per steady iteration, projected minutes of a run of total iterations)``."""
    steady = seconds[warmup:]
    if not steady:
        raise ValueError(f"--iterations must exceed --warmup ({warmup}) to measure a steady rate")
    per = sum(steady) / len(steady)
    return per, (sum(seconds[:warmup]) + per * (total - warmup)) / 60


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--presets", nargs="+", default=list(PRESETS), choices=list(PRESETS))
    parser.add_argument("--iterations", type=int, default=40, help="iterations trained of each preset")
    parser.add_argument("--warmup", type=int, default=5, help="first iterations timed apart (not in the rate)")
    parser.add_argument("--robot", default=None, help="task.kwargs.robot (default: the preset's)")
    args = parser.parse_args()

    rows, result = [], []
    with tempfile.TemporaryDirectory() as logs:
        for name in args.presets:
            robot = [f"task.kwargs.robot={args.robot}"] if args.robot else []
            overrides = ["task=quadruped_velocity_flat", *PRESETS[name], *robot, "runner.progress=false",
                         f"runner.log_root={logs}"]
            cfg = load_train_config(overrides, for_run=False)
            total = cfg.runner.max_iterations
            run = train([*overrides, f"runner.max_iterations={args.iterations}"])
            per, minutes = project(iteration_seconds(Path(run)), args.warmup, total)
            steady = stage_seconds(Path(run))[args.warmup:]
            rollout, update = (sum(x) / len(steady) for x in zip(*steady, strict=True))
            steps = cfg.env.num_envs * cfg.algo.num_steps_per_env
            rows.append((name, cfg.env.num_envs, total, rollout, update, per, steps / per, minutes))
            result.append(f"{name}_min={minutes:.1f}")
    print(f"\nquadruped presets on this machine ({os.cpu_count()} cores), {args.iterations} iterations each, "
          f"the first {args.warmup} apart" + (f", robot {args.robot}" if args.robot else ""))
    print("| preset | envs | iterations | rollout s | update s | s / iteration | env steps / s | projected run (min) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, envs, total, rollout, update, per, rate, minutes in rows:
        print(f"| {name} | {envs} | {total} | {rollout:.2f} | {update:.2f} | {per:.2f} | {rate:,.0f} | {minutes:.1f} |")
    print("RESULT " + " ".join(result))


if __name__ == "__main__":
    main()
