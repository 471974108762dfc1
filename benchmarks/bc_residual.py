"""Behavior cloning and residual PPO on pendulum swing-up, from a PPO expert.

1. Train the expert: PPO with the tuned pendulum settings (``--expert-iterations``, seed 1).
2. Collect ``--envs`` x ``--steps`` transitions of the expert with action noise ``--noise``
   (the "full" dataset) and ``--few`` clean episodes (the "few demos" dataset).
3. Per seed: Gaussian and flow BC on the full dataset, Gaussian BC on the few demos (a weak
   base), residual PPO on that weak base for ``--residual-iterations``, and PPO from scratch for
   the same number of iterations for reference.

Every policy is scored like ``ctrl-rl eval``: deterministic episodes (``--eval-episodes`` from the
fixed eval seed 2024) and reported as a return and as a normalized score
``(R - R_zero) / (R_expert - R_zero)`` (D4RL's convention, the zero-action policy as the floor).

Usage::

    python benchmarks/bc_residual.py                      # 3 seeds (~25 min on 2 cores)
    python benchmarks/bc_residual.py --seeds 1 --expert-iterations 2 --bc-iterations 1 \\
        --residual-iterations 2 --envs 2 --steps 50 --few 1 --eval-episodes 4    # smoke
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from statistics import mean

import torch

from ctrl_rl.algos import make_algorithm
from ctrl_rl.algos.checkpoints import load_checkpoint
from ctrl_rl.app.configure import load_train_config
from ctrl_rl.app.session import build_env
from ctrl_rl.app.train import train
from ctrl_rl.nets.actor_critic import concat_groups
from ctrl_rl.runners.episodes import collect_dataset, run_episodes

EVAL_SEED = 2024


def _eval(run: Path, episodes: int) -> float:
    """Mean return of ``episodes`` deterministic episodes from the fixed eval seed (as ``ctrl-rl eval``)."""
    env = build_env(load_train_config(["task=pendulum"]), num_envs=episodes, seed=EVAL_SEED)
    return float(run_episodes(env, _policy(run), EVAL_SEED)[0].mean())


def _policy(run: Path):
    """The run's deterministic policy on an observation dict."""
    path = sorted(run.glob("model_*.pt"), key=lambda p: int(p.stem.split("_")[1]))[-1]
    cfg, state = load_checkpoint(path)
    alg = make_algorithm(cfg.algo, state["obs_dims"], state["action_dim"], 1, "cpu", inference_only=True)
    alg.load_state_dict(state["algo"], restore_rng=False)
    policy, groups = alg.inference_policy().eval(), alg.model.actor_obs
    return lambda obs: policy(concat_groups(obs, groups))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--expert-iterations", type=int, default=300)
    ap.add_argument("--bc-iterations", type=int, default=25, help="x 200 gradient steps")
    ap.add_argument("--residual-iterations", type=int, default=60, help="x 512 envs x 32 steps")
    ap.add_argument("--envs", type=int, default=16)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--noise", type=float, default=0.1)
    ap.add_argument("--few", type=int, default=2, help="clean expert episodes in the few-demos dataset")
    ap.add_argument("--eval-episodes", type=int, default=100)
    ap.add_argument("--root", default=None, help="where runs and datasets go (default: a temp dir)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    root = Path(args.root or tempfile.mkdtemp(prefix="bc_residual_"))
    common = ["task=pendulum", "runner.progress=false", f"runner.log_root={root}"]
    t0 = time.perf_counter()

    expert = train(["algo=ppo", "seed=1", f"runner.max_iterations={args.expert_iterations}", *common])
    r_expert = _eval(expert, args.eval_episodes)
    cfg = load_train_config(["task=pendulum"])
    env = build_env(cfg, num_envs=args.eval_episodes, seed=EVAL_SEED)
    r_zero = float(run_episodes(env, lambda o: torch.zeros(env.num_envs, 1), EVAL_SEED)[0].mean())
    score = lambda r: (r - r_zero) / (r_expert - r_zero)  # noqa: E731
    policy = _policy(expert)
    full, few = root / "expert_noise.hdf5", root / "expert_few.hdf5"
    data = collect_dataset(build_env(cfg, num_envs=args.envs, seed=7), policy, args.steps, 7, args.noise)
    data.save_hdf5(full, attrs={"task": "pendulum", "noise_std": args.noise})
    small = collect_dataset(build_env(cfg, num_envs=args.few, seed=8), policy, 200, 8, 0.0)
    small.save_hdf5(few, attrs={"task": "pendulum", "noise_std": 0.0})
    print(f"expert {r_expert:.1f}, zero-action {r_zero:.1f}; datasets: {len(data)} transitions "
          f"({len(data.episode_returns())} episodes, noise {args.noise}), few demos: {len(small)} transitions")

    rows: dict[str, list[float]] = {}
    bc = ["algo=bc", "env.num_envs=100", "algo.num_passes=0", f"runner.max_iterations={args.bc_iterations}", *common]
    for seed in range(1, args.seeds + 1):
        runs = {
            "BC gaussian (full)": train([*bc, f"dataset={full}", f"seed={seed}"]),
            "BC flow (full)": train([*bc, f"dataset={full}", "algo.head=flow", f"seed={seed}"]),
            "BC gaussian (few demos)": train([*bc, f"dataset={few}", f"seed={seed}"]),
        }
        weak = runs["BC gaussian (few demos)"]
        runs["residual PPO on few-demo BC"] = train(["algo=residual", f"algo.base={weak}", f"seed={seed}",
                                                     f"runner.max_iterations={args.residual_iterations}", *common])
        runs["PPO from scratch, same budget"] = train(["algo=ppo", f"seed={seed}",
                                                       f"runner.max_iterations={args.residual_iterations}", *common])
        for name, run in runs.items():
            rows.setdefault(name, []).append(_eval(run, args.eval_episodes))

    steps = args.residual_iterations * 512 * 32
    print(f"\npendulum, expert PPO {r_expert:.1f} ({args.expert_iterations} iterations), zero action {r_zero:.1f}; "
          f"BC {args.bc_iterations * 200} gradient steps; residual / scratch PPO {steps / 1e6:.2f}M env steps")
    print("| policy | return per seed | mean | normalized score |\n|---|---|---|---|")
    for name, values in rows.items():
        per = ", ".join(f"{v:.1f}" for v in values)
        print(f"| {name} | {per} | {mean(values):.1f} | {score(mean(values)):.3f} |")
    keys = {"bc_gaussian": "BC gaussian (full)", "bc_flow": "BC flow (full)", "bc_few": "BC gaussian (few demos)",
            "residual": "residual PPO on few-demo BC", "scratch": "PPO from scratch, same budget"}
    print("RESULT " + " ".join([f"expert={r_expert:.2f}", f"zero={r_zero:.2f}"] +
                               [f"{k}={mean(rows[v]):.2f}" for k, v in keys.items()] +
                               [f"seconds={time.perf_counter() - t0:.0f}"]))


if __name__ == "__main__":
    main()
