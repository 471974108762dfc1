"""Recurrent PPO next to rsl_rl's recurrent PPO on the blind pendulum: speed and return at equal steps.

The task is ctrl_rl's torch ``pendulum`` with its angular velocity hidden (``observe_velocity=False``:
cos θ, sin θ only), so a policy needs memory. Both frameworks train the same env (rsl_rl through the
adapter of ``ppo_throughput.py``), each seed of each framework alone in a fresh subprocess, one after
another, with ``torch.set_num_threads(--threads)``. Training wall clock is timed around the
framework's own ``learn`` call; env-steps/s = env steps / that wall clock (everything included:
collection, memory over rollouts, updates). Then both final policies are evaluated the same way:
``--eval-episodes`` deterministic episodes in a fresh env seeded ``--eval-seed`` (every env one
episode from the same start states), each policy's memory starting from zeros.

Matched: env and its implementation, ``--num-envs``, rollout length, epochs, minibatches (rsl_rl
and ours both split the envs, so each minibatch holds whole env trajectories), an actor and a
critic each with its own ``--rnn`` of ``--rnn-hidden`` units in front of an ELU MLP of ``--hidden``,
observation normalization before the memory, Gaussian with a state-independent std starting at 1,
Adam at lr 1e-3 with the adaptive-KL schedule (desired KL ``--desired-kl``, bounds 1e-5..1e-2), clip
0.2, clipped value loss, gamma ``--gamma``, lambda 0.95, value coef 1, no entropy bonus, grad clip 1,
float32, CPU.

Not matched (each framework's own way): rsl_rl evaluates the critic every step and recomputes
hidden states in its storage; ours evaluates it once per rollout with a loop over the rollout;
rsl_rl keeps its per-step NaN check; RNG streams differ (seeds pair runs only by the env seed).

Usage::

    python benchmarks/recurrent_ppo.py                     # lstm, 3 seeds (~1 h on 2 cores)
    python benchmarks/recurrent_ppo.py --smoke             # tiny budget, one seed: checks it runs
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from pathlib import Path
from statistics import mean
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ppo_throughput import MARK, _version, rsl_rl_env  # noqa: E402

FRAMEWORKS = ("ours", "rsl_rl")


def _env(args: argparse.Namespace, num_envs: int, seed: int) -> Any:
    from ctrl_rl.sims import make_env

    return make_env("torch", "pendulum", num_envs, device="cpu", seed=seed, observe_velocity=False)


def _evaluate(args: argparse.Namespace, act: Any, reset: Any) -> float:
    """Mean return of one deterministic episode per env, from the memory's zero state."""
    from ctrl_rl.runners.episodes import run_episodes

    env = _env(args, args.eval_episodes, args.eval_seed)
    reset()
    returns, _ = run_episodes(env, act, args.eval_seed)
    return float(returns.mean())


def bench_ours(args: argparse.Namespace) -> dict:
    from ctrl_rl.app.configure import load_train_config
    from ctrl_rl.app.session import policy_fn
    from ctrl_rl.runners import make_runner

    hidden = "[" + ",".join(map(str, args.hidden)) + "]"
    cfg = load_train_config([
        "task=pendulum", "task.kwargs.observe_velocity=false", f"env.num_envs={args.num_envs}",
        f"seed={args.seed}", "runner.progress=false", f"algo.num_steps_per_env={args.steps}",
        f"algo.num_learning_epochs={args.epochs}", f"algo.num_minibatches={args.minibatches}",
        f"algo.actor_hidden={hidden}", f"algo.critic_hidden={hidden}", "algo.activation=elu",
        f"algo.rnn_type={args.rnn}", f"algo.rnn_hidden_size={args.rnn_hidden}", "algo.rnn_critic=true",
        "algo.normalize_obs=true", "algo.normalize_value=false", "algo.schedule=adaptive",
        f"algo.desired_kl={args.desired_kl}", "algo.max_learning_rate=1e-2", "algo.min_learning_rate=1e-5",
        "algo.learning_rate=1e-3", "algo.clip_param=0.2", "algo.value_clip=true", f"algo.gamma={args.gamma}",
        "algo.lam=0.95", "algo.value_loss_coef=1.0", "algo.entropy_coef=0.0", "algo.max_grad_norm=1.0",
    ])
    runner = make_runner(_env(args, args.num_envs, args.seed), cfg, log_dir=None)
    start = time.perf_counter()
    runner.learn(args.iterations)
    wall = time.perf_counter() - start
    policy = policy_fn(runner.alg)
    with torch.no_grad():
        ret = _evaluate(args, policy, lambda: policy.episodes_ended(None))
    return {"wall_s": wall, "final_return": ret}


def bench_rsl_rl(args: argparse.Namespace) -> dict:
    from rsl_rl.runners import OnPolicyRunner as RslRunner
    from tensordict import TensorDict

    rnn = {"class_name": "RNNModel", "hidden_dims": list(args.hidden), "activation": "elu",
           "obs_normalization": True, "rnn_type": args.rnn, "rnn_hidden_dim": args.rnn_hidden,
           "rnn_num_layers": 1}
    gaussian = {"class_name": "GaussianDistribution", "init_std": 1.0, "std_type": "scalar"}
    cfg = {
        "num_steps_per_env": args.steps, "save_interval": 10**9,
        "obs_groups": {"actor": ["policy"], "critic": ["policy"]},
        "actor": {**rnn, "distribution_cfg": gaussian}, "critic": dict(rnn),
        "algorithm": {
            "class_name": "PPO", "num_learning_epochs": args.epochs, "num_mini_batches": args.minibatches,
            "schedule": "adaptive", "desired_kl": args.desired_kl, "learning_rate": 1e-3, "clip_param": 0.2,
            "use_clipped_value_loss": True, "gamma": args.gamma, "lam": 0.95, "value_loss_coef": 1.0,
            "entropy_coef": 0.0, "max_grad_norm": 1.0, "normalize_advantage_per_mini_batch": False,
            "rnd_cfg": None, "symmetry_cfg": None,
        },
    }
    torch.manual_seed(args.seed)
    runner = RslRunner(rsl_rl_env(_env(args, args.num_envs, args.seed), args.seed), cfg, log_dir=None,
                       device="cpu")
    start = time.perf_counter()
    runner.learn(num_learning_iterations=args.iterations)
    wall = time.perf_counter() - start
    policy = runner.get_inference_policy(device="cpu")

    def act(obs: dict[str, torch.Tensor]) -> torch.Tensor:
        return policy(TensorDict(obs, batch_size=[obs["policy"].shape[0]]))

    with torch.no_grad():
        ret = _evaluate(args, act, lambda: policy.reset())
    return {"wall_s": wall, "final_return": ret}


BENCHES = {"ours": bench_ours, "rsl_rl": bench_rsl_rl}
ARGS = ("num_envs", "steps", "epochs", "minibatches", "iterations", "rnn", "rnn_hidden", "gamma", "desired_kl",
        "eval_episodes", "eval_seed", "threads")


def run_child(name: str, seed: int, args: argparse.Namespace) -> dict:
    """One framework and seed in a fresh interpreter; its numbers, or ``{"error": why}``."""
    cmd = [sys.executable, __file__, "--only", name, "--seed", str(seed), "--hidden", *map(str, args.hidden)]
    for key in ARGS:
        cmd += ["--" + key.replace("_", "-"), str(getattr(args, key))]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(MARK):
            return json.loads(line[len(MARK):])
    tail = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    return {"error": tail[-1] if tail else f"exit code {proc.returncode}"}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rnn", choices=("lstm", "gru"), default="lstm")
    p.add_argument("--rnn-hidden", type=int, default=32)
    p.add_argument("--hidden", type=int, nargs="+", default=[64, 64], help="both MLPs, after the memory")
    p.add_argument("--num-envs", type=int, default=256)
    p.add_argument("--steps", type=int, default=32, help="rollout length per env and iteration")
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--minibatches", type=int, default=4)
    p.add_argument("--iterations", type=int, default=150, help="training iterations (the env-step budget)")
    p.add_argument("--gamma", type=float, default=0.98)
    p.add_argument("--desired-kl", type=float, default=0.005)
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    p.add_argument("--eval-episodes", type=int, default=100)
    p.add_argument("--eval-seed", type=int, default=2024)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--smoke", action="store_true", help="4 iterations, 32 envs, one seed")
    p.add_argument("--seed", type=int, default=1, help=argparse.SUPPRESS)
    p.add_argument("--only", choices=FRAMEWORKS, help=argparse.SUPPRESS)  # the child process
    args = p.parse_args(argv)
    if args.only:
        torch.set_num_threads(args.threads)
        try:
            out = BENCHES[args.only](args)
        except Exception as exc:  # the table says why instead of the script crashing
            out = {"error": f"{type(exc).__name__}: {exc}".splitlines()[0]}
        print(MARK + json.dumps(out), flush=True)
        return
    if args.smoke:
        args.iterations, args.num_envs, args.seeds, args.eval_episodes = 4, 32, args.seeds[:1], 8

    steps = args.num_envs * args.steps * args.iterations
    print(f"torch={torch.__version__} rsl-rl-lib={_version('rsl-rl-lib')} device=cpu threads={args.threads} "
          f"task=pendulum(observe_velocity=false) rnn={args.rnn}{args.rnn_hidden} mlp={args.hidden} "
          f"envs={args.num_envs} rollout={args.steps} iterations={args.iterations} env_steps={steps:,}", flush=True)
    rows: dict[str, list[dict]] = {n: [] for n in FRAMEWORKS}
    for seed in args.seeds:
        for name in FRAMEWORKS:  # one after another, never side by side
            print(f"running {name} seed {seed} ...", file=sys.stderr, flush=True)
            rows[name].append({"seed": seed, **run_child(name, seed, args)})
    print()
    print("| framework | seed | env steps | train wall s | env-steps/s | final return |")
    print("|---|---:|---:|---:|---:|---:|")
    for name in FRAMEWORKS:
        for r in rows[name]:
            if "error" in r:
                print(f"| {name} | {r['seed']} | {steps:,} | failed: {r['error']} | — | — |")
            else:
                print(f"| {name} | {r['seed']} | {steps:,} | {r['wall_s']:.1f} | {steps / r['wall_s']:,.0f} "
                      f"| {r['final_return']:.1f} |")
    ok = {n: [r for r in rows[n] if "error" not in r] for n in FRAMEWORKS}
    sps = {n: mean(steps / r["wall_s"] for r in ok[n]) if ok[n] else math.nan for n in FRAMEWORKS}
    ret = {n: mean(r["final_return"] for r in ok[n]) if ok[n] else math.nan for n in FRAMEWORKS}
    print()
    print(f"RESULT ours_sps={sps['ours']:.0f} rsl_rl_sps={sps['rsl_rl']:.0f} "
          f"vs_rsl_rl={sps['ours'] / sps['rsl_rl']:.3g} "
          f"ours_return={ret['ours']:.1f} rsl_rl_return={ret['rsl_rl']:.1f} env_steps={steps}", flush=True)


if __name__ == "__main__":
    main()
