"""Would an owner put this gait on the robot? Train a legged robot with its task's one recipe, then judge it
as the owner does: the gait report in ``ctrl-rl eval`` and in ``ctrl-rl deploy sim2sim`` (20 s at 0.5 m/s
over the deploy node), every bar PASS.

The recipe is ``tune=ppo_quadruped_velocity_flat_fast`` (512 envs, symmetry augmentation, the task's gait
terms scaled by the robot's standing height, mass and torque limits, 600 iterations of which the last 100
polish: exploration noise capped, a jerk penalty and the action filter; docs/experiments/gait_recipe.md)
with only ``robot=`` changed: the same preset for ctrl_quad, the Unitree Go1 and ctrl_dog (a Go2-class
quadruped written to MuJoCo Menagerie's conventions). Pass bar (the gait issue): every bar of the report
in sim2sim, training <= 20 min on 2 cores (eval's verdict, under training's observation noise, is shown beside).
Bipeds (``--task humanoid_velocity_flat``) train with their own preset (the G1's for ``--robot unitree_g1``)
and have 120 min; a ``--checkpoint`` is judged on its own run's task, robot and seed.

Usage::

    python benchmarks/gait.py --robot unitree_go1 --seed 1          # train, eval, export, sim2sim
    python benchmarks/gait.py --robot ctrl_dog --iterations 5       # smoke run (the bars fail, the script runs)
    python benchmarks/gait.py --checkpoint logs/ppo/quadruped_velocity_flat/<run>   # judge a trained run
    python benchmarks/gait.py --task humanoid_velocity_flat --robot unitree_g1 --train-override threads=2
      # the G1 with its preset (1,500 it; 104 min on 2 idle cores, threads=2 to give the update both)
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import yaml
from quadruped_walk import train_or_load

from ctrl_rl.app.evaluate import evaluate
from ctrl_rl.app.export import export

TASK = "quadruped_velocity_flat"
RECIPE = "tune=ppo_quadruped_velocity_flat_fast"
EVAL = ["+task.kwargs.fixed_command=[0.5,0.0,0.0]", "+task.kwargs.push_velocity=0.0"]
BUDGET_MIN = {"quadruped_velocity_flat": 20.0, "humanoid_velocity_flat": 120.0}
"""Training minutes on 2 cores (the gait issue: 20 per quadruped, 120 for the G1)."""
PRESETS = {(TASK, None): RECIPE, ("humanoid_velocity_flat", "unitree_g1"): "tune=ppo_humanoid_velocity_flat_g1"}
"""``(task, robot)`` -> the preset it trains with (robot None: every robot of the task); any other pair takes its
task's own ``tune/ppo_<task>.yaml``, which ``ctrl-rl train`` picks by itself."""


def recipe(task: str, robot: str) -> list[str]:
    """The overrides that pick the task's one preset for ``robot`` (none: the task's own)."""
    preset = PRESETS.get((task, None)) or PRESETS.get((task, Path(robot).stem))
    return [preset] if preset else []


def sim2sim(bundle: Path, seconds: float, transport: str) -> dict[str, str]:
    """``ctrl-rl deploy sim2sim`` at 0.5 m/s straight ahead; its RESULT line as a dict."""
    cmd = [sys.executable, "-m", "ctrl_rl", "deploy", "sim2sim", str(bundle), "--duration", str(seconds),
           "--cmd-vel", "0.5", "0", "0", "--transport", transport]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds * 10 + 120)
    print(out.stdout[-6000:], end="")
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT sim2sim ")]
    if out.returncode != 0 or not lines:
        raise RuntimeError(f"sim2sim exited {out.returncode}: {out.stderr[-2000:]}")
    return dict(re.findall(r"(\w+)=(\S+)", lines[-1]))


def run_identity(run: Path) -> tuple[str, str, int]:
    """``(task, robot, seed)`` a run was trained with, from its ``params/config.yaml``."""
    run_dir = run if run.is_dir() else run.parent
    cfg = yaml.safe_load((run_dir / "params" / "config.yaml").read_text())
    return str(cfg["task"]["name"]), str(cfg["task"]["kwargs"]["robot"]), int(cfg["seed"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default=TASK, choices=tuple(BUDGET_MIN), help="the velocity task to train")
    parser.add_argument("--robot", default="ctrl_quad", help="shipped robot name or a robot YAML")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--iterations", type=int, default=None, help="PPO iterations (default: the recipe's)")
    parser.add_argument("--checkpoint", default=None, help="skip training: judge this run / model file")
    parser.add_argument("--episodes", type=int, default=32, help="eval episodes (20 s each)")
    parser.add_argument("--seconds", type=float, default=20.0, help="sim2sim duration")
    parser.add_argument("--transport", default="dds", choices=("dds", "unitree"))
    parser.add_argument("--train-override", action="append", default=[], help="extra training override (repeat)")
    args = parser.parse_args()

    overrides = [f"task={args.task}", *recipe(args.task, args.robot), f"task.kwargs.robot={args.robot}",
                 f"seed={args.seed}", f"runner.run_name=gait_{Path(args.robot).stem}_s{args.seed}",
                 *args.train_override]
    run, minutes = train_or_load(overrides, args.iterations, args.checkpoint)
    if args.checkpoint is not None:  # the run's own robot and seed, not the flags' defaults
        args.task, args.robot, args.seed = run_identity(run)
        if args.task not in BUDGET_MIN:
            parser.error(f"--checkpoint {run}: its task {args.task!r} is not one this benchmark judges "
                         f"({', '.join(BUDGET_MIN)})")
    result = evaluate(str(run), EVAL, episodes=args.episodes, seed=2024)
    bundle = export(str(run), [])
    sim = sim2sim(Path(bundle), args.seconds, args.transport)

    # the bar is sim2sim's report (the node in the loop, the MJCF's own physics); eval's adds training's
    # observation noise, which the policy answers tick by tick: its verdict is printed beside, not required
    passed = sim.get("gait") == "PASS" and not minutes > BUDGET_MIN[args.task]
    print(f"\n| robot | seed | train (min) | eval gait | eval vx | sim2sim gait | sim2sim vx | height | drift/10 m "
          f"| peak torque |\n|---|---:|---:|---|---:|---|---:|---:|---:|---:|\n| {args.robot} | {args.seed} | "
          f"{minutes:.1f} | {result.get('gait')} | {result['forward_velocity']:.3f} | {sim.get('gait')} | "
          f"{sim.get('forward_velocity')} | {sim.get('height_ratio')} | {sim.get('drift_per_10m')} | "
          f"{sim.get('peak_torque_frac')} |")
    print(f"RESULT robot={Path(args.robot).stem} seed={args.seed} train_minutes={minutes:.2f} "
          f"eval_gait={result.get('gait')} eval_velocity={result['forward_velocity']:.4f} "
          f"sim2sim_gait={sim.get('gait')} sim2sim_velocity={sim.get('forward_velocity')} "
          f"height_ratio={sim.get('height_ratio')} drift_per_10m={sim.get('drift_per_10m')} "
          f"peak_torque_frac={sim.get('peak_torque_frac')} passed={int(passed)}")


if __name__ == "__main__":
    main()
