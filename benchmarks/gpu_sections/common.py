"""What every section of ``benchmarks/gpu_suite.py`` shares: the ``RESULT`` lines and the figures
they collect, the GPU presets' overrides, one timed PPO runner (``ppo_row``), training for a time
budget (``iterations_for``, ``train_for``) and the walk bar's evaluation (``walk_eval``, ``walk_rows``)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import torch

RESULTS: dict[str, Any] = {}
"""Every figure of the run, ``<section>.<key>``; keys starting with ``_`` stay out of the JSON."""
QUAD_PRESET = "tune=ppo_quadruped_velocity_flat_gpu"
HUMANOID_PRESET = "tune=ppo_humanoid_velocity_flat_gpu"
EVAL_KWARGS = ["+task.kwargs.fixed_command=[0.5,0.0,0.0]", "+task.kwargs.push_velocity=0.0"]
"""``benchmarks/quadruped_walk.py``'s evaluation: 0.5 m/s straight ahead, pushes off."""
TINY = ["env.num_envs=16", "algo.num_steps_per_env=8", "algo.cudagraphs=false"]
"""Toy sizes for ``--tiny`` (CPU smoke): 16 envs, 8 steps, no CUDA graphs."""
TINY_EVAL = ["+task.kwargs.episode_length_s=1.0"]
"""``--tiny`` evaluations: episodes of 1 s instead of 20."""


def result_line(section: str, values: dict[str, Any]) -> None:
    """Record ``values`` under ``section`` and print them as one ``RESULT section=...`` line."""
    RESULTS.update({f"{section}.{k}": v for k, v in values.items()})
    cells = " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in values.items())
    print(f"RESULT section={section} {cells}", flush=True)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def table(title: str, columns: list[str]) -> None:
    """Print a markdown table's header: ``title`` heads the first column, the rest right-aligned."""
    print(f"\n| {title} | " + " | ".join(columns) + " |")
    print("|---|" + "---:|" * len(columns), flush=True)


def preset(args: argparse.Namespace, task: str = "quadruped_velocity_flat", tune: str = QUAD_PRESET) -> list[str]:
    """``task`` with the GPU preset ``tune`` on ``args.device`` (toy sizes with ``--tiny``)."""
    out = [f"task={task}", tune, f"device={args.device}", "runner.progress=false"]
    return out + (TINY if args.tiny else [])


def ppo_row(args: argparse.Namespace, overrides: list[str]) -> dict[str, Any]:
    """One fresh runner of ``overrides``: 2 warm-up iterations (kernels, graph captures), then
    ``args.ppo_iterations`` timed ones; with ``profile=true`` in ``overrides`` also the mean seconds
    per iteration of each stage (``Perf/time_<stage>``) as ``split``."""
    from ctrl_rl.app.configure import load_train_config
    from ctrl_rl.app.session import build_env
    from ctrl_rl.runners import make_runner

    cfg = load_train_config(overrides)
    env = build_env(cfg)
    runner = make_runner(env, cfg, log_dir=None)
    start = time.perf_counter()
    runner.learn(2)
    first = time.perf_counter() - start
    iters = args.ppo_iterations
    start = time.perf_counter()
    runner.learn(2 + iters)
    wall = time.perf_counter() - start
    rows = runner.history[-iters:]
    timer = runner.profiler
    split = {k: v / max(timer.iterations, 1) for k, v in timer.totals.items()} if timer.enabled else {}
    env.close()
    steps = cfg.env.num_envs * cfg.algo.num_steps_per_env
    return {"sps": iters * steps / wall, "collect_s": sum(r["collection_time"] for r in rows) / iters,
            "update_s": sum(r["learning_time"] for r in rows) / iters, "warmup_s": first,
            "num_envs": cfg.env.num_envs, "seconds_per_iteration": wall / iters, "split": split}


def iterations_for(args: argparse.Namespace, overrides: list[str], seconds: float,
                   per_iteration: float | None = None) -> int:
    """PPO iterations of ``overrides`` that fill about ``seconds``: ``seconds`` over the seconds per
    iteration (``per_iteration``, else measured by a short :func:`ppo_row`); 2 with ``--tiny``."""
    if args.tiny:
        return 2
    per_iteration = per_iteration or ppo_row(args, overrides)["seconds_per_iteration"]
    return max(int(seconds / per_iteration), 1)


def train_for(args: argparse.Namespace, overrides: list[str], iterations: int, seed: int) -> tuple[Path, float]:
    """Train ``overrides`` from scratch for ``iterations``; the run and the wall minutes of ``train()``
    (env build and checkpoint writes included)."""
    from ctrl_rl.app.train import train

    start = time.perf_counter()
    run = train([*overrides, f"runner.max_iterations={iterations}", f"runner.save_interval={iterations}",
                 f"runner.log_root={args.log_root}", f"seed={seed}"])
    return Path(run), (time.perf_counter() - start) / 60


def walk_eval(args: argparse.Namespace, run: Path, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    """``ctrl-rl eval`` at 0.5 m/s (pushes off), ``args.episodes`` episodes: forward velocity, falls,
    the gait report's verdict, and ``walks`` (>= 0.4 m/s, no falls: the bar of the walk benchmarks)."""
    from ctrl_rl.app.evaluate import evaluate

    r = evaluate(str(run), [*EVAL_KWARGS, *extra, *(TINY_EVAL if args.tiny else [])], episodes=args.episodes,
                 seed=2024)
    velocity, falls = float(r["forward_velocity"]), int(r["terminated"])
    return {"forward_velocity": velocity, "falls": falls, "gait": r.get("gait", "-"),
            "walks": velocity >= 0.4 and falls == 0}


def walk_rows(args: argparse.Namespace, label: str, overrides: list[str], iterations: int, seeds: list[int],
              extra_eval: tuple[str, ...] = ()) -> dict[str, Any]:
    """Train-then-evaluate ``overrides`` for ``iterations`` once per seed; prints a table row per
    seed and returns the summary a ``RESULT`` line gives: the slowest run's minutes, the lowest
    velocity, the falls summed and how many runs walked."""
    rows = []
    for seed in seeds:
        run, minutes = train_for(args, overrides, iterations, seed)
        rows.append((seed, iterations, minutes, walk_eval(args, run, extra_eval)))
    table(label, ["iterations", "train min (wall, incl. start)", "episodes", "forward velocity m/s", "falls",
                  "gait report"])
    for seed, iters, minutes, r in rows:
        print(f"| seed {seed} | {iters} | {minutes:.2f} | {args.episodes} | {r['forward_velocity']:.3f} | "
              f"{r['falls']} | {r['gait']} |", flush=True)
    return {"iterations": iterations, "seeds": len(rows), "train_minutes": max(r[2] for r in rows),
            "forward_velocity": min(r[3]["forward_velocity"] for r in rows),
            "falls": sum(r[3]["falls"] for r in rows), "walks": sum(r[3]["walks"] for r in rows),
            "gait_passed": sum(r[3]["gait"] == "PASS" for r in rows)}
