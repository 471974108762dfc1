"""SAC next to Stable-Baselines3's SAC on gymnasium tasks: return at equal env steps, wall clock.

Both frameworks train on the same gymnasium envs (ours through ``sim=gymnasium``, a
``gymnasium.make_vec`` sync vector env behind our VecEnv; SB3 on ``gymnasium.make`` in its
``DummyVecEnv``), each run alone in a fresh subprocess (this script with ``--child <json>``),
one after another, with ``torch.set_num_threads(--threads)`` and ``OMP_NUM_THREADS=--threads``
(default 1). Training wall clock is timed around the framework's own training call (ours:
``Runner.learn``, SB3: ``SAC.learn``); building the model and env, and every evaluation, are
outside the clock.

Part 1 (equal env steps): ours at 1 env against SB3 for a fixed env-step budget per task and
several seeds; then a deterministic evaluation of the final policy, ``--eval-episodes`` episodes
from fresh start states (sub-env ``i`` seeded ``--eval-seed + i``, the same for every run and never
used in training, where sub-env ``i`` gets ``seed + i``): SB3
with ``evaluate_policy(deterministic=True)`` on a ``DummyVecEnv`` of that many envs (one episode
each), ours with ``ctrl_rl.app.evaluate.evaluate`` on the final checkpoint. Every evaluation of every
run, both frameworks, starts its episodes from the same states.

Part 2 (parallel envs, Pendulum-v1): ours on a recipe for wall clock: ``--parallel-envs`` envs
(64), ``--parallel-updates`` gradient steps per iteration (32: one env step of every env, half a
gradient step per env step), nets ``--parallel-hidden`` (64, 64) and learning rate
``--parallel-lr`` (1e-3), evaluated as above every ``--eval-every`` env steps with the clock paused;
its wall clock to SB3's final return of part 1 (mean over SB3's seeds; first evaluation at or above
it) against SB3's mean training wall clock of part 1 (``wallclock_ratio``). SB3 runs the same
recipe as the control (``sb3 x64``: a ``DummyVecEnv`` of as many envs, ``gradient_steps`` as
ours): ``vs_sb3_same_recipe`` is its time over ours, the part of the ratio that is the framework
rather than the recipe. The Pendulum runs of part 1 get the same evaluation curve, so their time
to that return shows too.

Matched (both frameworks, every run): 1 env in part 1, batch 256, replay 1e6, gamma 0.99,
tau 0.005 (Polyak every gradient step), one Adam lr 3e-4 for actor, critics and temperature
(SB3 has one ``learning_rate``; ours sets ``actor_/critic_/alpha_learning_rate``),
``learning_starts`` uniform-random env steps (``--learning-starts``), then 1 gradient step per
env step (SB3 ``train_freq=1, gradient_steps=1``; ours ``num_steps_per_env=1, num_updates=1``),
actor and 2 critics of [256, 256] ReLU (min of the two in targets and the actor loss), automatic
entropy tuning in log space with target -|A| and initial alpha 1.0, 1-step TD targets,
truncations bootstrap from the true last observation (SB3 ``handle_timeout_termination``), no
gradient clipping, no observation normalization (ours ``algo.normalize_obs=false``; SB3 has none),
float32, CPU, the same eval protocol.

Not matched (each framework's own way of working, measured as is):

* log std bounds: ours squashes the actor's log std smoothly into [-5, 2] with tanh (CleanRL);
  SB3 clamps it to [-20, 2];
* update order: SB3 updates the temperature first, then critics, then actor; ours critics, then
  actor, then temperature (a one-step difference in which alpha each loss sees);
* critics: ours is one ensemble module (batched matmul per layer); SB3 two separate MLPs;
  actor head: ours one linear layer to (mean, log std), SB3 two (same function class);
* RNG streams (weights, exploration noise, replay sampling) differ, so seeds pair runs only by
  their env seed;
* per-step overhead: SB3 steps a ``DummyVecEnv`` and converts numpy <-> torch every step; ours
  converts at the gymnasium adapter; neither logs to disk (ours ``log_dir=None``: no TensorBoard
  or checkpoints while timed; SB3 ``verbose=0``, no ``tensorboard_log``).

Part 2 changes only the env count, gradient steps per iteration, hidden sizes and learning rate
(and the env-step budget), for both frameworks alike; every other setting is part 1's.

Usage::

    python benchmarks/sac_vs_sb3.py                 # the full default run (~30 min on 2 cores)
    python benchmarks/sac_vs_sb3.py --smoke         # tiny budgets, 1 seed: checks it runs
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import mean
from typing import Any

MARK = "BENCH_JSON "
HPARAMS = {"batch_size": 256, "buffer_size": 1_000_000, "gamma": 0.99, "tau": 0.005,
           "learning_rate": 3e-4, "hidden": [256, 256], "init_alpha": 1.0}
"""What both frameworks get (SB3's SAC defaults, with its lr given to all three of ours)."""


# ---------------------------------------------------------------------------------- children
def _recipe(spec: dict) -> tuple[list[int], float]:
    """(hidden sizes, learning rate) of this run: HPARAMS', or part 2's recipe where it sets them."""
    return list(spec.get("hidden", HPARAMS["hidden"])), float(spec.get("learning_rate", HPARAMS["learning_rate"]))


def _ours_overrides(spec: dict) -> list[str]:
    h = HPARAMS
    hidden_sizes, lr = _recipe(spec)
    hidden = "[" + ",".join(map(str, hidden_sizes)) + "]"
    return [
        "algo=sac", "sim=gymnasium", f"task={spec['task']}", f"env.num_envs={spec['num_envs']}",
        f"seed={spec['seed']}", "device=cpu", "runner.progress=false",
        "algo.num_steps_per_env=1", f"algo.num_updates={spec['num_updates']}",
        f"algo.batch_size={h['batch_size']}", f"algo.buffer_size={h['buffer_size']}",
        f"algo.learning_starts={spec['learning_starts']}", f"algo.gamma={h['gamma']}",
        f"algo.tau={h['tau']}", "algo.n_step=1", f"algo.actor_learning_rate={lr}",
        f"algo.critic_learning_rate={lr}", f"algo.alpha_learning_rate={lr}",
        f"algo.init_alpha={h['init_alpha']}", "algo.autotune_alpha=true",
        "algo.target_entropy_scale=1.0", "algo.actor_update_every=1", "algo.num_critics=2",
        "algo.critic_aggregation=min", "algo.distributional=false", "algo.layer_norm=false",
        f"algo.actor_hidden={hidden}", f"algo.critic_hidden={hidden}", "algo.activation=relu",
        "algo.max_grad_norm=0.0", "algo.normalize_obs=false", "algo.compile=false",
        "algo.exploration_scale_min=1.0", "algo.exploration_scale_max=1.0",
    ]


def _eval_seed(spec: dict) -> int:
    return spec["eval_seed"]


def run_ours(spec: dict) -> dict:
    from ctrl_rl.app.configure import load_train_config
    from ctrl_rl.app.evaluate import evaluate
    from ctrl_rl.app.session import build_env
    from ctrl_rl.app.train import seed_everything
    from ctrl_rl.runners import make_runner
    from ctrl_rl.runners.episodes import run_episodes

    cfg = load_train_config(_ours_overrides(spec))
    seed_everything(cfg.seed)
    n = spec["num_envs"]
    runner = make_runner(build_env(cfg), cfg, log_dir=None)
    total_it = spec["steps"] // n
    every_it = max(1, spec["eval_every"] // n) if spec["eval_every"] else total_it
    eval_env = build_env(cfg, num_envs=spec["eval_episodes"], seed=_eval_seed(spec)) \
        if spec["eval_every"] else None
    actor, model = runner.alg.model.actor, runner.alg.model
    curve: list[list[float]] = []
    train_s = 0.0
    while runner.iteration < total_it:
        target = min(total_it, runner.iteration + every_it)
        start = time.perf_counter()
        runner.learn(target)  # a total, not a count to add
        train_s += time.perf_counter() - start
        if eval_env is not None:  # the same deterministic policy `evaluate` runs, clock paused
            returns, _ = run_episodes(eval_env, lambda obs: actor(model.actor_input(obs)),
                                      _eval_seed(spec))
            curve.append([runner.iteration * n, train_s, float(returns.mean())])
    with tempfile.TemporaryDirectory() as tmp:
        path = runner.save(Path(tmp) / f"model_{runner.iteration}.pt")
        result = evaluate(str(path), [], episodes=spec["eval_episodes"], seed=_eval_seed(spec))
    return {"final_return": result["mean_return"], "std_return": result["std_return"],
            "train_s": train_s, "env_steps": runner.iteration * n,
            "grad_steps": runner.alg.num_updates, "curve": curve}


def run_sb3(spec: dict) -> dict:
    import gymnasium as gym
    import torch
    from stable_baselines3 import SAC
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.vec_env import DummyVecEnv

    h = HPARAMS
    hidden, lr = _recipe(spec)
    n = spec["num_envs"]
    if spec["eval_every"] % n:
        raise ValueError(f"--eval-every must be a multiple of the env count {n}")
    eval_env = DummyVecEnv([lambda: Monitor(gym.make(spec["task"]))] * spec["eval_episodes"])

    def evaluate(model: Any) -> tuple[float, float]:
        eval_env.seed(_eval_seed(spec))  # sub-env i starts from seed + i, as ours
        ret, std = evaluate_policy(model, eval_env, n_eval_episodes=spec["eval_episodes"],
                                   deterministic=True)
        return float(ret), float(std)

    curve: list[list[float]] = []

    class Curve(BaseCallback):
        """Deterministic evaluation every ``eval_every`` env steps, outside the clock."""

        def __init__(self) -> None:
            super().__init__()
            self.paused = 0.0
            self.start = 0.0

        def _on_training_start(self) -> None:
            self.start = time.perf_counter()

        def _on_step(self) -> bool:
            if spec["eval_every"] and self.num_timesteps % spec["eval_every"] == 0:
                t = time.perf_counter()
                ret, _ = evaluate(self.model)
                curve.append([self.num_timesteps, t - self.start - self.paused, ret])
                self.paused += time.perf_counter() - t
            return True

    model = SAC(
        "MlpPolicy", DummyVecEnv([lambda: Monitor(gym.make(spec["task"]))] * n), learning_rate=lr,
        buffer_size=h["buffer_size"], learning_starts=spec["learning_starts"],
        batch_size=h["batch_size"], tau=h["tau"], gamma=h["gamma"], train_freq=1,
        gradient_steps=spec["num_updates"], ent_coef=f"auto_{h['init_alpha']}", target_entropy="auto",
        policy_kwargs={"net_arch": hidden, "activation_fn": torch.nn.ReLU},
        seed=spec["seed"], device="cpu", verbose=0,
    )
    cb = Curve()
    start = time.perf_counter()
    model.learn(total_timesteps=spec["steps"], callback=cb)
    train_s = time.perf_counter() - start - cb.paused
    final, std = evaluate(model)
    return {"final_return": final, "std_return": std, "train_s": train_s,
            "env_steps": int(model.num_timesteps), "grad_steps": int(model._n_updates),
            "curve": curve}


RUNS = {"ours": run_ours, "sb3": run_sb3}


def child_main(spec: dict) -> None:
    import torch

    torch.set_num_threads(spec["threads"])
    try:
        out = RUNS[spec["framework"]](spec)
    except ImportError as exc:
        out = {"error": f"not installed: {exc}"}
    except Exception as exc:  # report it, so the table says why instead of the script crashing
        import traceback

        traceback.print_exc()
        out = {"error": f"{type(exc).__name__}: {exc}".splitlines()[0]}
    print(MARK + json.dumps(out), flush=True)


def run_child(spec: dict, timeout: float) -> dict:
    """One training run in a fresh interpreter; its numbers, or ``{"error": why}``."""
    env = {**os.environ, "OMP_NUM_THREADS": str(spec["threads"]),
           "MKL_NUM_THREADS": str(spec["threads"])}
    cmd = [sys.executable, __file__, "--child", json.dumps(spec)]
    started = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(MARK):
            out = json.loads(line[len(MARK):])
            out["process_s"] = time.perf_counter() - started
            if "error" in out:
                sys.stderr.write(proc.stderr[-3000:])
            return out
    tail = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    return {"error": tail[-1] if tail else f"exit code {proc.returncode}"}


# ---------------------------------------------------------------------------------- report
def _time_to(curve: list[list[float]], target: float) -> float:
    """Training seconds at the first evaluation at or above ``target``; nan if never."""
    for _, secs, ret in curve:
        if ret >= target:
            return secs
    return math.nan


def _steps_to(curve: list[list[float]], target: float) -> float:
    for steps, _, ret in curve:
        if ret >= target:
            return steps
    return math.nan


def _fmt(x: float, spec: str = ",.1f") -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def _mean(rows: list[dict], key: str) -> float:
    vals = [r[key] for r in rows if "error" not in r]
    return mean(vals) if vals else math.nan


def print_table(task: str, rows: list[tuple[str, int, dict]]) -> None:
    print(f"\n### {task}\n")
    print("| framework | seed | env steps | gradient steps | final return (mean ± std) "
          "| train wall s |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, seed, r in rows:
        if "error" in r:
            cells = ["failed: " + r["error"].replace("|", "\\|"), "—", "—", "—", "—"]
        else:
            cells = [f"{r['env_steps']:,}", f"{r['grad_steps']:,}",
                     f"{r['final_return']:.1f} ± {r['std_return']:.1f}", f"{r['train_s']:.1f}"]
        print(f"| {label} | {seed} | " + " | ".join(cells) + " |")
    by: dict[str, list[dict]] = {}
    for label, _, r in rows:
        by.setdefault(label, []).append(r)
    for label, rs in by.items():
        ok = [r for r in rs if "error" not in r]
        print(f"| **{label} mean** | {len(ok)} seeds | | | **{_fmt(_mean(rs, 'final_return'))}** "
              f"| **{_fmt(_mean(rs, 'train_s'))}** |")


def _key(task: str) -> str:
    return task.split("-")[0]


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    p.add_argument("--pendulum-steps", type=int, default=10_000)
    p.add_argument("--pendulum-seeds", type=int, nargs="+", default=[1, 2, 3])
    p.add_argument("--mujoco-task", default="InvertedDoublePendulum-v5",
                   help="a gymnasium MuJoCo id; 'none' skips it")
    p.add_argument("--mujoco-steps", type=int, default=10_000)
    p.add_argument("--mujoco-seeds", type=int, nargs="+", default=[1, 2])
    p.add_argument("--learning-starts", type=int, default=1000, help="both frameworks")
    p.add_argument("--parallel-envs", type=int, default=64)
    p.add_argument("--parallel-updates", type=int, default=32,
                   help="gradient steps per iteration (one env step of every env) at --parallel-envs")
    p.add_argument("--parallel-steps", type=int, default=16_384, help="env steps, all envs")
    p.add_argument("--parallel-seeds", type=int, nargs="+", default=[1, 2, 3])
    p.add_argument("--parallel-hidden", type=int, nargs="+", default=[64, 64],
                   help="part 2's actor and critic hidden sizes (both frameworks)")
    p.add_argument("--parallel-lr", type=float, default=1e-3,
                   help="part 2's learning rate of actor, critics and temperature (both frameworks)")
    p.add_argument("--no-sb3-parallel", action="store_true",
                   help="skip SB3 on part 2's recipe (the control that separates recipe from framework)")
    p.add_argument("--eval-episodes", type=int, default=10)
    p.add_argument("--eval-seed", type=int, default=12345, help="sub-env i of the eval env: this + i")
    p.add_argument("--eval-every", type=int, default=512,
                   help="env steps between evaluations of the Pendulum runs (learning curves)")
    p.add_argument("--tolerance", type=float, default=0.05,
                   help="second target: SB3's return minus this fraction of its magnitude")
    p.add_argument("--json-out", default=None, help="write every run's numbers and curve here")
    p.add_argument("--threads", type=int, default=1, help="torch/OpenMP threads per run")
    p.add_argument("--timeout", type=float, default=1800, help="seconds per run")
    p.add_argument("--smoke", action="store_true", help="tiny budgets, 1 seed (checks it runs)")
    args = p.parse_args(argv)
    if args.child is not None:
        child_main(json.loads(args.child))
        return
    if args.smoke:
        args.pendulum_steps, args.mujoco_steps, args.parallel_steps = 600, 400, 1280
        args.pendulum_seeds = args.mujoco_seeds = args.parallel_seeds = [1]
        args.learning_starts, args.eval_episodes, args.eval_every = 256, 2, 320
        args.parallel_updates = 2
    wall_start = time.perf_counter()
    base = {"learning_starts": args.learning_starts, "eval_episodes": args.eval_episodes,
            "eval_seed": args.eval_seed, "threads": args.threads}

    def run(framework: str, task: str, seed: int, steps: int, eval_every: int,
            num_envs: int = 1, num_updates: int = 1, recipe: dict | None = None) -> dict:
        spec = {**base, "framework": framework, "task": task, "seed": seed, "steps": steps,
                "eval_every": eval_every, "num_envs": num_envs, "num_updates": num_updates, **(recipe or {})}
        t = time.perf_counter()
        r = run_child(spec, args.timeout)
        status = r.get("error") or (f"return {r['final_return']:.1f}, train {r['train_s']:.1f} s")
        print(f"  {framework:>4} {task} seed {seed} x{num_envs} envs: {status} "
              f"({time.perf_counter() - t:.0f} s)", file=sys.stderr, flush=True)
        return r

    pend = "Pendulum-v1"
    # part 1: equal env steps, 1 env
    results: dict[str, list[tuple[str, int, dict]]] = {pend: []}
    for seed in args.pendulum_seeds:
        for fw in ("sb3", "ours"):
            results[pend].append((fw, seed, run(fw, pend, seed, args.pendulum_steps,
                                                args.eval_every)))
    mj = None if args.mujoco_task.lower() == "none" else args.mujoco_task
    if mj:
        results[mj] = []
        for seed in args.mujoco_seeds:
            for fw in ("sb3", "ours"):
                results[mj].append((fw, seed, run(fw, mj, seed, args.mujoco_steps, 0)))
    # part 2: ours at many envs on its recipe; SB3 on the same recipe as the control
    par_label, sb3_par_label = f"ours x{args.parallel_envs}", f"sb3 x{args.parallel_envs}"
    recipe = {"hidden": args.parallel_hidden, "learning_rate": args.parallel_lr}
    parallel: list[tuple[str, int, dict]] = []
    for seed in args.parallel_seeds:
        for fw, label in (("ours", par_label), ("sb3", sb3_par_label)):
            if fw == "sb3" and args.no_sb3_parallel:
                continue
            parallel.append((label, seed, run(fw, pend, seed, args.parallel_steps, args.eval_every,
                                              args.parallel_envs, args.parallel_updates, recipe)))
    total_wall = time.perf_counter() - wall_start
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(
            {"args": vars(args), "results": results, "parallel": parallel, "wall_s": total_wall}))

    hp = HPARAMS
    print(f"\nSAC: ours vs Stable-Baselines3, {args.threads} torch thread(s) per run; batch "
          f"{hp['batch_size']}, buffer {hp['buffer_size']:.0e}, gamma {hp['gamma']}, tau {hp['tau']}, "
          f"lr {hp['learning_rate']}, nets {hp['hidden']} ReLU, learning_starts "
          f"{args.learning_starts}; final return: {args.eval_episodes} deterministic episodes")
    for task, rows in results.items():
        print_table(task, rows)

    sb3_p = [r for fw, _, r in results[pend] if fw == "sb3" and "error" not in r]
    ours_p = [r for fw, _, r in results[pend] if fw == "ours" and "error" not in r]
    sb3_return = mean(r["final_return"] for r in sb3_p) if sb3_p else math.nan
    sb3_wall = mean(r["train_s"] for r in sb3_p) if sb3_p else math.nan
    ours_return = mean(r["final_return"] for r in ours_p) if ours_p else math.nan

    tol_target = sb3_return - args.tolerance * abs(sb3_return)
    pct = f"{args.tolerance:.0%}"
    print(f"\n### Pendulum-v1: wall clock to SB3's final return ({_fmt(sb3_return)}, mean of "
          f"{len(sb3_p)} seeds) and to within {pct} of it ({_fmt(tol_target)})\n")
    print("| run | seed | env steps | gradient steps | final return | train wall s "
          f"| env steps to target | wall s to target | env steps to within {pct} "
          f"| wall s to within {pct} |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    to_target: dict[str, list[float]] = {par_label: [], sb3_par_label: []}
    to_tol: dict[str, list[float]] = {par_label: [], sb3_par_label: []}
    for label, seed, r in [*results[pend], *parallel]:
        if "error" in r:
            print(f"| {label} | {seed} | failed: {r['error']} | | | | | | | |")
            continue
        secs, steps = _time_to(r["curve"], sb3_return), _steps_to(r["curve"], sb3_return)
        tsecs, tsteps = _time_to(r["curve"], tol_target), _steps_to(r["curve"], tol_target)
        if label in to_target:
            to_target[label].append(secs)
            to_tol[label].append(tsecs)
        print(f"| {label} | {seed} | {r['env_steps']:,} | {r['grad_steps']:,} | "
              f"{r['final_return']:.1f} | {r['train_s']:.1f} | {_fmt(steps, ',.0f')} | "
              f"{_fmt(secs)} | {_fmt(tsteps, ',.0f')} | {_fmt(tsecs)} |")
    par_ok = [r for label, _, r in parallel if label == par_label and "error" not in r]
    par_return = mean(r["final_return"] for r in par_ok) if par_ok else math.nan

    def summary(times: list[float]) -> tuple[int, float, float]:
        """(seeds that reached it, mean seconds if all did else nan, SB3 wall / that)."""
        reached = [t for t in times if not math.isnan(t)]
        secs = mean(times) if times and len(reached) == len(times) else math.nan
        return len(reached), secs, (sb3_wall / secs if secs and not math.isnan(secs) else math.nan)

    print(f"\nPart 2 recipe: {args.parallel_envs} envs, {args.parallel_updates} gradient steps per "
          f"iteration of {args.parallel_envs} env steps, nets {args.parallel_hidden}, lr {args.parallel_lr}; "
          f"against SB3's {_fmt(sb3_wall)} s of training in part 1:")
    times: dict[str, tuple[float, float]] = {}
    for label in (par_label, sb3_par_label):
        if not to_target[label]:
            continue
        n_reached, secs, ratio = summary(to_target[label])
        n_tol, tol_secs, tol_ratio = summary(to_tol[label])
        times[label] = (secs, tol_secs)
        print(f"  {label}: SB3's return reached in {n_reached}/{len(to_target[label])} seeds, mean "
              f"{_fmt(secs)} s, {_fmt(ratio, '.2f')}x; within {pct} of it in {n_tol}/"
              f"{len(to_tol[label])} seeds, mean {_fmt(tol_secs)} s, {_fmt(tol_ratio, '.2f')}x"
              f"{' (goal >= 3x)' if label == par_label else ''}")
    par_time, tol_time = times.get(par_label, (math.nan, math.nan))
    ratio, tol_ratio = sb3_wall / par_time, sb3_wall / tol_time
    sb3_par_time, sb3_tol_time = times.get(sb3_par_label, (math.nan, math.nan))
    print(f"Pendulum-v1 at {args.pendulum_steps:,} env steps: ours {_fmt(ours_return)} vs SB3 "
          f"{_fmt(sb3_return)} (goal: same or better)")
    print(f"whole benchmark: {total_wall:.0f} s")

    result = (f"RESULT task={pend} ours_return={ours_return:.1f} sb3_return={sb3_return:.1f} "
              f"ours_wall_s={_mean([r for fw, _, r in results[pend] if fw == 'ours'], 'train_s'):.1f} "
              f"sb3_wall_s={sb3_wall:.1f} ours{args.parallel_envs}_return={par_return:.1f} "
              f"ours{args.parallel_envs}_s_to_sb3_return={par_time:.1f} "
              f"wallclock_ratio={ratio:.3g} ours{args.parallel_envs}_s_to_within_{pct[:-1]}pct="
              f"{tol_time:.1f} wallclock_ratio_within_{pct[:-1]}pct={tol_ratio:.3g} "
              f"sb3_{args.parallel_envs}_s_to_sb3_return={sb3_par_time:.1f} "
              f"vs_sb3_same_recipe={sb3_par_time / par_time:.3g} "
              f"vs_sb3_same_recipe_within_{pct[:-1]}pct={sb3_tol_time / tol_time:.3g}")
    if mj:
        k = _key(mj)
        rows = results[mj]
        o = [r for fw, _, r in rows if fw == "ours"]
        s = [r for fw, _, r in rows if fw == "sb3"]
        result += (f" mujoco_task={mj} {k}_ours_return={_mean(o, 'final_return'):.1f} "
                   f"{k}_sb3_return={_mean(s, 'final_return'):.1f} "
                   f"{k}_ours_wall_s={_mean(o, 'train_s'):.1f} {k}_sb3_wall_s={_mean(s, 'train_s'):.1f}")
    print("\n" + result, flush=True)


if __name__ == "__main__":
    main()
