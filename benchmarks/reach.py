"""Does PPO learn to reach with i2rt's YAM on 2 CPU cores within 10 minutes? Train, evaluate.

Trains ``task=reach`` (the YAM from mjlab's wheel, ``sim=mujoco``) with its tuned settings
(``tasks/manipulation/tune/ppo_reach.yaml``, or ``--iterations``), then evaluates the deterministic
policy on fresh targets: an episode succeeds when the end effector is within 2 cm and 0.1 rad of its
target for the episode's last 0.2 s (``ReachConfig``). Pass bar (issue 51): success_rate >= 0.95,
training <= 10 min.

Usage::

    python benchmarks/reach.py                      # the preset, ~4-6 min on 2 cores
    python benchmarks/reach.py --iterations 5       # smoke run
    python benchmarks/reach.py --checkpoint logs/ppo/reach/<run>   # evaluate only
"""

from __future__ import annotations

import argparse

from quadruped_walk import train_or_load

from ctrl_rl.app.evaluate import evaluate

TASK = "reach"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iterations", type=int, default=None, help="PPO iterations (default: the preset's)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--episodes", type=int, default=256, help="evaluation episodes (4 s each, one per env)")
    parser.add_argument("--checkpoint", default=None, help="skip training: evaluate this run / model file")
    parser.add_argument("--train-override", action="append", default=[], help="extra training override (repeat)")
    parser.add_argument("--budget-minutes", type=float, default=10.0, help="the pass bar's training minutes")
    args = parser.parse_args()

    overrides = [f"task={TASK}", f"seed={args.seed}", "runner.run_name=reach_benchmark", *args.train_override]
    run, train_minutes = train_or_load(overrides, args.iterations, args.checkpoint)
    result = evaluate(str(run), [], episodes=args.episodes, seed=2024)
    success = result["success_rate"]
    passed = success >= 0.95 and not train_minutes > args.budget_minutes
    run_dir = run if run.is_dir() else run.parent
    print()
    print("| task | train (min) | episodes | success rate | position error (m) | orientation error (rad) | return |")
    print("|---|---|---|---|---|---|---|")
    print(f"| {TASK} | {train_minutes:.1f} | {args.episodes} | {success:.3f} | {result['position_error']:.4f} | "
          f"{result['orientation_error']:.4f} | {result['mean_return']:.2f} |")
    print(f"run: {run_dir}  curve: {run_dir / 'learning_curve.png'}")
    print(f"RESULT task={TASK} seed={args.seed} episodes={args.episodes} success_rate={success:.4f} "
          f"train_minutes={train_minutes:.2f} position_error={result['position_error']:.4f} "
          f"orientation_error={result['orientation_error']:.4f} passed={int(passed)}")


if __name__ == "__main__":
    main()
