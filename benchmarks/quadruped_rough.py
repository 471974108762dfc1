"""ctrl_quad on rough terrain, trained blind with the terrain curriculum on 2 CPU cores: train, evaluate, film.

Trains ``task=quadruped_velocity_rough`` (``sim=mujoco``; blind actor, height scan in the critic)
for ``--iterations`` (default: the tune file's), then evaluates the deterministic policy at a
0.5 m/s forward command, pushes off, on fixed evaluation terrain (no curriculum; each robot
spawns at the centre of its sub-terrain with a random heading):

* ``stairs_up`` / ``stairs_down``: climbing out of a stair pit / down from a stair pyramid with
  steps of ``--step-height`` (0.30 m run);
* ``slope_up`` / ``slope_down``: walking up out of a valley / down from a pyramid of ``--slope``
  (rise over run);
* ``flat``: mean forward velocity and falls, as ``quadruped_walk.py`` measures them.

A crossing succeeds when the base gets within 0.3 m of its sub-terrain's edge (past the last step
or the end of the slope, 3 m from the platform) before the robot falls; each case runs
``--episodes`` robots for one 20 s episode. The mean terrain level is the curriculum's
``Curriculum/terrain_level`` over the last 10 iterations (rows 0..9, difficulty 0..1).

Usage::

    python benchmarks/quadruped_rough.py                      # the default budget (see BENCHMARKS.md)
    python benchmarks/quadruped_rough.py --iterations 3 --episodes 8  # smoke run
    python benchmarks/quadruped_rough.py --checkpoint logs/ppo/quadruped_velocity_rough/<run>
"""

from __future__ import annotations

import argparse
import csv
import math
import time
from pathlib import Path

import torch

TASK = "quadruped_velocity_rough"
COMMAND = ["task.kwargs.fixed_command=[0.5,0.0,0.0]", "task.kwargs.push_velocity=0.0",
           "task.kwargs.curriculum=false", "task.kwargs.spawn_radius=0.0"]


def eval_overrides(kind: str, step_height: float, slope: float) -> list[str]:
    """A 1 x 4 grid of one terrain type at the stated height or grade."""
    terrain = (f"task.kwargs.terrain={{num_rows: 1, num_cols: 4, border: 3.0, proportions: {{{kind}: 1.0}}, "
               f"step_height: [{step_height}, {step_height}], slope: [{slope}, {slope}]}}")
    return [*COMMAND, terrain]


@torch.no_grad()
def crossing(run: str, kind: str, episodes: int, step_height: float, slope: float, seed: int,
             extra: tuple[str, ...] = ()) -> dict[str, float]:
    """Success rate of crossing ``kind`` (one episode per robot), mean forward velocity and falls;
    ``extra``: more evaluation overrides (``benchmarks/gpu_suite.py --tiny`` shortens the episode)."""
    from ctrl_rl.app.session import checked_env, load_policy, policy_fn
    from ctrl_rl.runners.episodes import episodes_ended

    cfg, _, alg, state = load_policy(run, [*eval_overrides(kind, step_height, slope), *extra])
    env = checked_env(cfg, state, episodes, seed)
    policy = policy_fn(alg)
    task = env.task
    obs = env.reset(seed=seed)
    episodes_ended(policy, None)
    centre = task.origins[task.curriculum.levels, task.curriculum.types][:, :2]
    edge = task.cfg.terrain.size / 2 - 0.3
    active = torch.ones(episodes, dtype=torch.bool)
    reached = torch.zeros(episodes, dtype=torch.bool)
    falls = torch.zeros(episodes, dtype=torch.bool)
    speed, steps = torch.zeros(episodes), torch.zeros(episodes)
    for _ in range(env.max_episode_length):
        obs, _, terminated, truncated, info = env.step(policy(obs))
        episodes_ended(policy, terminated | truncated)
        pos = task.post_step_signals["_base_pos"][:, :2]  # before this step's resets
        far = (pos - centre).abs().max(-1).values >= edge
        reached |= far & active & ~terminated
        falls |= terminated & active
        speed += torch.where(active, info["metrics"]["forward_velocity"], 0.0)
        steps += active.float()
        active &= ~(terminated | truncated)
        if not bool(active.any()):
            break
    env.close()
    return {"success": float(reached.float().mean()), "falls": int(falls.sum()),
            "forward_velocity": float((speed / steps.clamp(min=1)).mean())}


def terrain_level(run_dir: Path) -> float:
    """Mean ``Curriculum/terrain_level`` over the last 10 logged iterations."""
    with open(run_dir / "metrics.csv") as f:
        rows = [r for r in csv.DictReader(f) if r.get("Curriculum/terrain_level")]
    values = [float(r["Curriculum/terrain_level"]) for r in rows[-10:]]
    return sum(values) / len(values) if values else math.nan


def write_curve(run_dir: Path, path: Path) -> None:
    """Mean episode return and mean terrain level (with the hardest types) against env steps."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with open(run_dir / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    steps = [float(r["env_steps"]) / 1e6 for r in rows]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.6))
    ax1.plot(steps, [float(r.get("mean_reward") or "nan") for r in rows])  # absent before an episode ends
    ax1.set(xlabel="env steps (M)", ylabel="mean episode return", title="return")
    for key, label in (("Curriculum/terrain_level", "all"), ("Curriculum/terrain_level/stairs_down", "stairs up (pit)"),
                       ("Curriculum/terrain_level/stairs_up", "stairs down"),
                       ("Curriculum/terrain_level/slope_down", "slope up (valley)")):
        if key in rows[0]:
            ax2.plot(steps, [float(r.get(key) or "nan") for r in rows], label=label, lw=2 if label == "all" else 1)
    ax2.set(xlabel="env steps (M)", ylabel="mean row (0 easiest .. 9)", title="terrain curriculum")
    ax2.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iterations", type=int, default=None, help="PPO iterations (default: the tune file's)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--episodes", type=int, default=64, help="robots per evaluation case (one 20 s episode each)")
    parser.add_argument("--step-height", type=float, default=0.08, help="evaluation stair rise (m)")
    parser.add_argument("--slope", type=float, default=0.3, help="evaluation slope, rise over run (0.3 = 16.7 deg)")
    parser.add_argument("--checkpoint", default=None, help="skip training: evaluate this run / model file")
    parser.add_argument("--video-steps", type=int, default=600, help="control steps in the video (50 Hz)")
    parser.add_argument("--train-override", action="append", default=[], help="extra training override (repeat)")
    args = parser.parse_args()

    from ctrl_rl.app.play import play
    from ctrl_rl.app.train import train

    train_minutes = math.nan
    if args.checkpoint is None:
        overrides = [f"task={TASK}", f"seed={args.seed}", "runner.run_name=rough_benchmark", *args.train_override]
        if args.iterations is not None:
            overrides.append(f"runner.max_iterations={args.iterations}")
        start = time.perf_counter()
        run = Path(train(overrides))
        train_minutes = (time.perf_counter() - start) / 60
    else:
        run = Path(args.checkpoint)
    run_dir = run if run.is_dir() else run.parent
    level = terrain_level(run_dir)
    cases = {kind: crossing(str(run), kind, args.episodes, args.step_height, args.slope, seed=2024)
             for kind in ("stairs_down", "stairs_up", "slope_down", "slope_up", "flat")}
    write_curve(run_dir, run_dir / "rough_curve.png")
    video = run_dir / "rough_stairs.mp4"
    play(str(run), eval_overrides("stairs_down", args.step_height, args.slope), episodes=1, video=str(video),
         steps=args.video_steps)

    angle = math.degrees(math.atan(args.slope))
    print()
    print(f"Evaluation at a 0.5 m/s command, {args.episodes} robots per case, one 20 s episode each; stairs "
          f"{args.step_height:.2f} m rise, slopes {args.slope} ({angle:.1f} deg)")
    print()
    print("| case | crossed | falls | mean forward velocity (m/s) |")
    print("|---|---:|---:|---:|")
    names = {"stairs_down": "stairs up (out of a pit)", "stairs_up": "stairs down (off a pyramid)",
             "slope_down": "slope up (out of a valley)", "slope_up": "slope down (off a pyramid)", "flat": "flat"}
    for kind, r in cases.items():
        crossed = "-" if kind == "flat" else f"{100 * r['success']:.0f}%"
        print(f"| {names[kind]} | {crossed} | {r['falls']} | {r['forward_velocity']:.3f} |")
    print(f"\ntrain: {train_minutes:.1f} min; mean terrain level (last 10 iterations): {level:.2f} of 9")
    print(f"run: {run_dir}  video: {video}  curves: {run_dir / 'rough_curve.png'}")
    print(f"RESULT train_minutes={train_minutes:.2f} terrain_level={level:.3f} "
          f"stairs_up_success={cases['stairs_down']['success']:.3f} "
          f"stairs_down_success={cases['stairs_up']['success']:.3f} "
          f"slope_up_success={cases['slope_down']['success']:.3f} "
          f"slope_down_success={cases['slope_up']['success']:.3f} step_height={args.step_height} "
          f"slope_deg={angle:.1f} flat_forward_velocity={cases['flat']['forward_velocity']:.4f} "
          f"flat_falls={cases['flat']['falls']}")


if __name__ == "__main__":
    main()
