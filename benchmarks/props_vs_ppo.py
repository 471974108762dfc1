"""PROPS next to PPO on pendulum swing-up: env steps to a return threshold, several seeds.

Both learners run with the tuned pendulum settings (``src/ctrl_rl/tasks/classic/tune/ppo_pendulum.yaml``; PROPS's
``tune/props_pendulum.yaml`` starts from it and keeps PROPS's own defaults: buffer of 2
rollouts, behavior update of up to 16 epochs x 16 minibatches, ε_P 0.3, λ 0.3, KL stop 0.05).
Every ``--eval-every`` iterations the deterministic policy (the mean action) runs
``--eval-episodes`` episodes from fixed start states (eval seed ``--eval-seed``, never used in
training), with the clock paused. Reported per run: env steps and training seconds to the first
evaluation at or above ``--threshold``, the final evaluation, and PROPS's mean sampling error.
Each run is one process after another in this interpreter, ``--threads`` torch threads.

``--part sampling`` measures the sampling error itself where it is large (8 envs x 32 steps,
30 iterations, a 100-step maximum-likelihood fit every iteration), mean over the run, for PPO
(one rollout), on-policy sampling into PROPS's 2-rollout buffer (``props_epochs=0``) and PROPS,
each also with the target frozen (learning rate 1e-12), so only the sampling differs.

Usage::

    python benchmarks/props_vs_ppo.py                    # 5 seeds each (~40 min on 2 cores)
    python benchmarks/props_vs_ppo.py --max-iterations 60 --eval-every 2   # to 1M steps, finer
    python benchmarks/props_vs_ppo.py --part sampling    # the sampling-error table (~6 min)
    python benchmarks/props_vs_ppo.py --seeds 1 --max-iterations 4 --eval-every 2   # smoke
    python benchmarks/props_vs_ppo.py --algos fpo --seeds 1 2 3 --threshold -250 --eval-every 25 \\
        --max-iterations 300                            # FPO's pendulum result (~15 min)
"""

from __future__ import annotations

import argparse
import math
import time
from statistics import mean, median

import torch

from ctrl_rl.app.configure import load_train_config
from ctrl_rl.app.session import build_env
from ctrl_rl.app.train import seed_everything
from ctrl_rl.runners import make_runner
from ctrl_rl.runners.episodes import run_episodes


def run(algo: str, seed: int, args: argparse.Namespace) -> dict:
    """Train ``algo`` on ``args.task`` with its tuned config; evaluate along the way."""
    overrides = [f"algo={algo}", f"task={args.task}", f"seed={seed}", "runner.progress=false"]
    if args.max_iterations:
        overrides.append(f"runner.max_iterations={args.max_iterations}")
    cfg = load_train_config(overrides + args.override)
    seed_everything(cfg.seed)
    runner = make_runner(build_env(cfg), cfg, log_dir=None)
    eval_env = build_env(cfg, num_envs=args.eval_episodes, seed=args.eval_seed)
    model = runner.alg.model
    curve: list[tuple[int, float, float]] = []
    train_s = 0.0
    total = cfg.runner.max_iterations
    while runner.iteration < total:
        start = time.perf_counter()
        runner.learn(min(total, runner.iteration + args.eval_every))
        train_s += time.perf_counter() - start
        returns, _ = run_episodes(eval_env, lambda obs: model.actor(model.actor_input(obs)), args.eval_seed)
        curve.append((runner.iteration * runner.steps_per_iteration, train_s, float(returns.mean())))
    hit = next(((steps, secs) for steps, secs, ret in curve if ret >= args.threshold), (math.nan, math.nan))
    errors = [h["sampling_error"] for h in runner.history if "sampling_error" in h]
    return {"steps_to": hit[0], "secs_to": hit[1], "final": curve[-1][2], "best": max(r for _, _, r in curve),
            "train_s": train_s, "env_steps": curve[-1][0], "sampling_error": mean(errors) if errors else math.nan}


SAMPLING = ["task=pendulum", "env.num_envs=8", "algo.num_steps_per_env=32", "algo.actor_hidden=[64,64]",
            "algo.critic_hidden=[64,64]", "algo.sampling_error_steps=100", "algo.sampling_error_interval=1",
            "runner.max_iterations=30", "runner.progress=false"]
SAMPLERS = {"PPO (1 rollout)": ["algo=ppo"], "on-policy into a 2-rollout buffer": ["algo=props", "algo.props_epochs=0"],
            "PROPS": ["algo=props"]}
FROZEN = ["algo.schedule=fixed", "algo.learning_rate=1e-12", "algo.normalize_obs=false"]


def sampling_part(seeds: list[int]) -> None:
    """Mean logged sampling error per sampler, learning and with the target frozen."""
    print("\n### Sampling error on pendulum, 8 envs x 32 steps, 30 iterations (mean over the run)\n")
    print("| sampler | target | " + " | ".join(f"seed {s}" for s in seeds) + " | mean |")
    print("|---|---|" + "---:|" * (len(seeds) + 1))
    means = {}
    for frozen in (False, True):
        for name, extra in SAMPLERS.items():
            vals = []
            for seed in seeds:
                cfg = load_train_config(SAMPLING + extra + (FROZEN if frozen else []) + [f"seed={seed}"])
                seed_everything(cfg.seed)
                runner = make_runner(build_env(cfg), cfg, log_dir=None)
                hist = runner.learn()
                vals.append(mean(h["sampling_error"] for h in hist[1:] if h.get("sampling_error") is not None))
            means[(name, frozen)] = mean(vals)
            print(f"| {name} | {'frozen' if frozen else 'learning'} | " + " | ".join(f"{v:.4f}" for v in vals)
                  + f" | **{mean(vals):.4f}** |", flush=True)
    print(f"\nRESULT part=sampling ppo={means[('PPO (1 rollout)', False)]:.4f} "
          f"buffer_on_policy={means[('on-policy into a 2-rollout buffer', False)]:.4f} "
          f"props={means[('PROPS', False)]:.4f} "
          f"frozen_buffer_on_policy={means[('on-policy into a 2-rollout buffer', True)]:.4f} "
          f"frozen_props={means[('PROPS', True)]:.4f}")


def _fmt(x: float, spec: str = ",.0f") -> str:
    return "—" if math.isnan(x) else format(x, spec)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", default="pendulum")
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    p.add_argument("--threshold", type=float, default=-200.0, help="the learning test's return")
    p.add_argument("--eval-every", type=int, default=10, help="iterations between evaluations")
    p.add_argument("--eval-episodes", type=int, default=50)
    p.add_argument("--eval-seed", type=int, default=2024)
    p.add_argument("--max-iterations", type=int, default=0, help="0: the tuned budget")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--override", nargs="*", default=[], help="extra overrides for both learners")
    p.add_argument("--part", choices=("learning", "sampling"), default="learning")
    p.add_argument("--algos", nargs="+", default=["ppo", "props"],
                   help="learners to compare (any on-policy one, e.g. fpo); the steps ratio is second/first")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    if args.part == "sampling":
        sampling_part(args.seeds[:3])
        return
    rows: dict[str, list[dict]] = {algo: [] for algo in args.algos}
    for seed in args.seeds:
        for algo in rows:
            t = time.perf_counter()
            r = run(algo, seed, args)
            rows[algo].append(r)
            print(f"  {algo:>5} seed {seed}: {_fmt(r['steps_to'])} steps to {args.threshold:g}, final "
                  f"{r['final']:.1f} ({time.perf_counter() - t:.0f} s)", flush=True)

    print(f"\n### {args.task}: env steps to a deterministic return of {args.threshold:g} "
          f"({args.eval_episodes} episodes every {args.eval_every} iterations)\n")
    print("| learner | seed | env steps to threshold | train s to threshold | final return | best return "
          "| train s | mean sampling error |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for algo, rs in rows.items():
        for seed, r in zip(args.seeds, rs, strict=True):
            print(f"| {algo} | {seed} | {_fmt(r['steps_to'])} | {_fmt(r['secs_to'], '.1f')} | {r['final']:.1f} | "
                  f"{r['best']:.1f} | {r['train_s']:.1f} | {_fmt(r['sampling_error'], '.2e')} |")
    summary = {}
    for algo, rs in rows.items():
        steps = [r["steps_to"] for r in rs]
        reached = [s for s in steps if not math.isnan(s)]
        summary[algo] = {"reached": len(reached), "median": median(steps) if len(reached) == len(steps) else math.nan,
                         "mean": mean(steps) if len(reached) == len(steps) else math.nan,
                         "final": mean(r["final"] for r in rs)}
        print(f"| **{algo}** | {len(reached)}/{len(rs)} reached | median **{_fmt(summary[algo]['median'])}**, "
              f"mean {_fmt(summary[algo]['mean'])} | | **{summary[algo]['final']:.1f}** | | | |")
    fields = [f"task={args.task}", f"seeds={len(args.seeds)}", f"threshold={args.threshold:g}"]
    for algo, sm in summary.items():
        fields += [f"{algo}_reached={sm['reached']}", f"{algo}_mean_steps={sm['mean']:.0f}",
                   f"{algo}_final={sm['final']:.1f}"]
    if len(args.algos) > 1:
        fields.append(f"steps_ratio={summary[args.algos[1]]['mean'] / summary[args.algos[0]]['mean']:.3f}")
    print("\nRESULT " + " ".join(fields))


if __name__ == "__main__":
    main()
