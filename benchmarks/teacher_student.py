"""A deployable student from a privileged teacher: two stages (PPO teacher, then distillation) against
Concurrent Teacher-Student at equal env steps (issue 26).

1. Teacher: PPO whose actor reads the privileged ``critic`` group (true base velocity, height, foot
   contacts; on rough terrain also the height scan), ``--teacher-iterations``.
2. Student, per seed: ``algo=distillation`` from that teacher, on the ``policy`` group with a
   ``--history``-frame observation history (what the robot measures), ``--student-iterations``.
3. CTS, per seed: ``algo=cts`` with the same student observation, for the two stages' iterations
   together (the same env steps in total).

Each policy is evaluated deterministically with ``ctrl-rl eval``'s settings of the task (64 episodes,
random commands); the table gives each student's return as a fraction of the teacher's. Pass bar of
issue 26: the distilled student reaches >= 90% of the teacher's return.

Usage::

    python benchmarks/teacher_student.py                                    # quadruped flat, 3 seeds
    python benchmarks/teacher_student.py --task quadruped_velocity_rough --teacher-iterations 700
    python benchmarks/teacher_student.py --teacher-iterations 2 --student-iterations 2 --seeds 0 --episodes 4
"""

from __future__ import annotations

import argparse
import statistics
import time

from ctrl_rl.app.evaluate import evaluate
from ctrl_rl.app.train import train


def timed_train(overrides: list[str]) -> tuple[str, float]:
    start = time.perf_counter()
    run = train(overrides)
    return str(run), (time.perf_counter() - start) / 60


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="quadruped_velocity_flat")
    parser.add_argument("--teacher-iterations", type=int, default=300)
    parser.add_argument("--student-iterations", type=int, default=100)
    parser.add_argument("--history", type=int, default=5, help="frames of the student's observation history")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--cts-seeds", default=None, help="seeds of the CTS runs (default: --seeds)")
    parser.add_argument("--episodes", type=int, default=64)
    parser.add_argument("--teacher", default=None, help="skip stage 1: use this teacher run")
    parser.add_argument("--train-override", action="append", default=[], help="extra training override (repeat)")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    cts_seeds = seeds if args.cts_seeds is None else [int(s) for s in args.cts_seeds.split(",")]
    student_obs = [f"task.kwargs.history_length={args.history}", *args.train_override]

    teacher, teacher_minutes = args.teacher, float("nan")
    if teacher is None:
        teacher, teacher_minutes = timed_train([f"task={args.task}", "algo.actor_obs=[critic]", "seed=42",
                                                f"runner.max_iterations={args.teacher_iterations}",
                                                "runner.run_name=teacher", *args.train_override])
    teacher_return = evaluate(teacher, [], episodes=args.episodes, seed=2024)["mean_return"]
    print(f"teacher {teacher}: return {teacher_return:.3f} ({teacher_minutes:.1f} min)", flush=True)

    results: dict[str, list[tuple[float, float]]] = {"distillation": [], "cts": []}
    for seed in seeds:
        student, minutes = timed_train([f"task={args.task}", "algo=distillation", f"algo.teacher={teacher}",
                                        f"seed={seed}", f"runner.max_iterations={args.student_iterations}",
                                        f"runner.run_name=student_s{seed}", *student_obs])
        ret = evaluate(student, [], episodes=args.episodes, seed=2024)["mean_return"]
        results["distillation"].append((ret, minutes))
        print(f"distillation seed {seed}: return {ret:.3f} ({ret / teacher_return:.3f} of the teacher)", flush=True)
    for seed in cts_seeds:
        total = args.teacher_iterations + args.student_iterations
        cts, minutes = timed_train([f"task={args.task}", "algo=cts", f"seed={seed}", f"runner.max_iterations={total}",
                                    f"runner.run_name=cts_s{seed}", *student_obs])
        ret = evaluate(cts, [], episodes=args.episodes, seed=2024)["mean_return"]
        results["cts"].append((ret, minutes))
        print(f"cts seed {seed}: return {ret:.3f} ({ret / teacher_return:.3f} of the two-stage teacher)", flush=True)

    print()
    print("| student | env steps (iterations) | seeds | return | fraction of the teacher's | train minutes |")
    print("|---|---|---|---|---|---|")
    print(f"| teacher (privileged PPO) | {args.teacher_iterations} | 42 | {teacher_return:.3f} | 1 "
          f"| {teacher_minutes:.1f} |")
    stages = f"{args.teacher_iterations} + {args.student_iterations}"
    for name, label in (("distillation", f"{stages} (two stages)"),
                        ("cts", f"{args.teacher_iterations + args.student_iterations} (one run)")):
        rets = [r for r, _ in results[name]]
        spread = f" ± {statistics.stdev(rets):.3f}" if len(rets) > 1 else ""
        minutes = statistics.mean(m for _, m in results[name])
        run_seeds = ",".join(map(str, seeds if name == "distillation" else cts_seeds))
        print(f"| {name} | {label} | {run_seeds} | {statistics.mean(rets):.3f}{spread} | "
              f"{statistics.mean(rets) / teacher_return:.3f} | {minutes:.1f} |")
    frac = {k: statistics.mean(r for r, _ in v) / teacher_return for k, v in results.items()}
    print(f"RESULT teacher_return={teacher_return:.4f} distillation_fraction={frac['distillation']:.4f} "
          f"cts_fraction={frac['cts']:.4f} cts_seeds={len(cts_seeds)} min_distillation_fraction="
          f"{min(r for r, _ in results['distillation']) / teacher_return:.4f} seeds={len(seeds)} "
          f"passed={int(min(r for r, _ in results['distillation']) >= 0.9 * teacher_return)}")


if __name__ == "__main__":
    main()
