"""The GPU suite: every GPU row of issue 41 in one unattended run (<= 8 minutes on one GPU, kernel
compilation included), each section printing its table and a ``RESULT section=...`` line as it
finishes, the last line one ``RESULT`` with the headline figures. ``--tiny`` runs the same code
at toy sizes on the CPU (CI's smoke test, ``tests/test_benchmarks_smoke.py``).

Sections (``--sections``, in this order):

* ``torch``: PPO on the torch pendulum (512-256-128, 24 steps, 5 epochs, 4 minibatches),
  env-steps/s including the update, ours (TF32 on CUDA by default) eager and with
  ``algo.cudagraphs`` (also in full float32 and with bf16 autocast) beside rsl_rl as it ships and
  with TF32 on; each row a fresh process (``benchmarks/ppo_throughput.py``).
* ``physics``: MuJoCo Warp ``physics.step`` and the whole ``VecEnv.step`` (observations, rewards,
  resets, randomization, pushes), eager and with ``sim.cuda_graph``, for ctrl_quad and the humanoid
  at each ``--worlds``, with the tasks' solver budget (10 iterations, 20 line-search) and the
  model-sized ``nconmax``/``njmax``. With ``--before``, ctrl_quad at the first size also runs the
  settings before issue 41 (the MJCF's 100 / 50 iterations, ``deterministic`` on) and
  ``deterministic`` alone: what each costs.
* ``alloc``: the chosen ``nconmax``/``njmax`` against the maxima measured while the robots flail
  (random actions 3x the policy's scale: falls included), with the solver's iterations.
* ``ppo``: PPO on ``sim=mjwarp`` (the GPU preset ``tune=ppo_quadruped_velocity_flat_gpu``, and the
  same with ``sim.cuda_graph=false``), env-steps/s including the update, collection and update
  seconds per iteration.
* ``walk``: that preset trained from scratch for as many iterations as ``--walk-seconds`` allows at
  the throughput ``ppo`` measured (or ``--walk-iterations``), once per ``--seeds``, each evaluated as
  ``benchmarks/quadruped_walk.py`` does (0.5 m/s forward command, pushes off, 64 episodes of 20 s):
  forward velocity and falls; RESULT gives the slowest run's minutes, the lowest velocity, the falls
  summed and how many runs walked.

Usage::

    python benchmarks/gpu_suite.py --device cuda                   # everything, ~8 min on one H100
    python benchmarks/gpu_suite.py --device cuda --sections torch  # the part that needs no warp
    python benchmarks/gpu_suite.py --device cuda --sections walk --walk-iterations 385 --seeds 0 1 2
    python benchmarks/gpu_suite.py --tiny                          # CPU smoke run
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

SECTIONS = ("torch", "physics", "alloc", "ppo", "walk")
TASKS = {"quad": "quadruped_velocity_flat", "humanoid": "humanoid_velocity_flat"}
PRESET = "tune=ppo_quadruped_velocity_flat_gpu"
OLD = {"solver_iterations": 100, "ls_iterations": 50}
"""The MJCFs' solver budget, which the tasks ran with before issue 41 (with ``deterministic`` on)."""
EVAL_KWARGS = ["+task.kwargs.fixed_command=[0.5,0.0,0.0]", "+task.kwargs.push_velocity=0.0"]

RESULTS: dict[str, Any] = {}


def result_line(section: str, values: dict[str, Any]) -> None:
    RESULTS.update({f"{section}.{k}": v for k, v in values.items()})
    cells = " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in values.items())
    print(f"RESULT section={section} {cells}", flush=True)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# ---- torch: PPO on the pendulum beside rsl_rl -------------------------------------------------
def section_torch(args: argparse.Namespace) -> None:
    import ppo_throughput as pt

    rows = pt.GPU_FRAMEWORKS if not args.tiny else ("ours_cudagraphs", "ours_cudagraphs_bf16", "rsl_rl")
    sizes = [(4096, 10), (65536, 5)] if not args.tiny else [(64, 1)]
    print("\n| pendulum PPO | num_envs | env-steps/s (incl. update) | collection s/it | update s/it | ÷ rsl_rl |")
    print("|---|---:|---:|---:|---:|---:|", flush=True)
    values: dict[str, Any] = {}
    for n, iters in sizes:
        base = pt.argparse.Namespace(num_envs=n, steps=24 if not args.tiny else 8, epochs=5, minibatches=4,
                                     hidden=[512, 256, 128] if not args.tiny else [32, 32], iterations=iters,
                                     sb3_iterations=None, threads=1 if args.tiny else 4, seed=0,
                                     device=str(args.device), timeout=240)
        got = {name: pt.run_child(name, base) for name in rows if not (n == 4096 and name.endswith(("fp32", "bf16")))}
        rsl = got.get("rsl_rl", {}).get("sps", math.nan)
        for name, r in got.items():
            if "error" in r:
                print(f"| {name} | {n} | failed: {r['error'][:160]} | | | |", flush=True)
                continue
            print(f"| {name} | {n} | {r['sps']:,.0f} | {r['collect_s']:.3f} | {r['update_s']:.3f} | "
                  f"{r['sps'] / rsl:.2f}x |", flush=True)
            values[f"{name}_sps_{n}"] = r["sps"]
        best = max((got[k].get("sps", math.nan) for k in got if k.startswith("ours")), default=math.nan)
        values[f"vs_rsl_rl_{n}"] = best / rsl
        if "rsl_rl_tf32" in got:
            values[f"vs_rsl_rl_tf32_{n}"] = best / got["rsl_rl_tf32"].get("sps", math.nan)
    result_line("torch", values)


# ---- physics: MuJoCo Warp physics.step and VecEnv.step ---------------------------------------
class WarpRow:
    """``make_env("mjwarp", task, n)`` with task kwargs and physics options; ``physics`` times the
    physics step alone (the task's PD targets), else the whole ``VecEnv.step``."""

    def __init__(self, task: str, n: int, device: torch.device, physics_only: bool, episode: int,
                 task_kwargs: dict | None = None, options: dict | None = None) -> None:
        from ctrl_rl.sims import make_env

        start = time.perf_counter()
        self.env = make_env("mjwarp", task, n, device=device, seed=0, physics=options or {}, **(task_kwargs or {}))
        self.build_s = time.perf_counter() - start
        g = torch.Generator(device="cpu").manual_seed(0)
        actions = torch.rand(episode, n, self.env.action_dim, generator=g) * 2 - 1
        self.actions = actions.to(device)
        task_ = self.env.task
        self.targets = (task_.default_pose + task_.action_scale * self.actions).to(device)
        self.physics_only, self.device, self.n = physics_only, device, n

    def reset(self) -> None:
        self.env.reset(seed=0)

    def step(self, k: int) -> None:
        if self.physics_only:
            self.env.physics.step(self.targets[k], self.env.task.decimation)
        else:
            self.env.step(self.actions[k])

    def sync(self) -> None:
        sync(self.device)

    def close(self) -> None:
        self.env.close()


def timed_row(label: str, make: Any, seconds: float, episode: int) -> float:
    """Build (compiles or loads kernels), first step (graph capture), then steady env-steps/s."""
    from sim_throughput import measure

    try:
        row = make()
        start = time.perf_counter()
        row.step(0)
        row.sync()
        first = time.perf_counter() - start
        sps = measure(row, row.n, seconds, episode)
        decimation = row.env.task.decimation
        row.close()
    except Exception as exc:  # noqa: BLE001 - one failed row costs its line, not the suite
        print(f"| {label} | failed: {type(exc).__name__}: {str(exc)[:200]} | | | | |", flush=True)
        return math.nan
    print(f"| {label} | {row.n} | {row.build_s:.1f} | {first:.2f} | {sps:,.0f} | {sps * decimation:,.0f} |",
          flush=True)
    return sps


def section_physics(args: argparse.Namespace) -> None:
    print(f"\nMuJoCo Warp on {args.device_name}: build = make_env (compiles kernels on first use), first step = "
          "graph capture; both excluded from env-steps/s")
    print("\n| row | worlds | build s | first step s | env-steps/s | physics steps/s |")
    print("|---|---:|---:|---:|---:|---:|", flush=True)
    values: dict[str, Any] = {}
    ep, sec = args.episode, args.seconds
    for key in args.tasks:
        task = TASKS[key]
        for n in args.worlds:
            for what, physics_only, opts, name in (("physics.step", True, {}, "physics"),
                                                   ("VecEnv.step", False, {}, "vecenv"),
                                                   ("VecEnv.step, sim.cuda_graph", False, {"cuda_graph": True},
                                                    "vecenv_graph")):
                sps = timed_row(f"{key} {what}", lambda n=n, p=physics_only, t=task, o=opts: WarpRow(
                    t, n, args.device, p, ep, options=o), sec, ep)
                values[f"{key}_{name}_sps_{n}"] = sps
            if key == "quad" and n == args.worlds[0] and args.before:
                for label, kw, opts in (("quad physics.step, before: MJCF 100/50 iterations + deterministic",
                                         OLD, {"deterministic": True}),
                                        ("quad physics.step, deterministic", {}, {"deterministic": True})):
                    sps = timed_row(label, lambda n=n, kw=kw, o=opts, t=task: WarpRow(
                        t, n, args.device, True, ep, kw, o), sec, ep)
                    values["quad_physics_sps_old" if kw else "quad_physics_sps_deterministic"] = sps
    result_line("physics", values)


# ---- alloc: chosen buffers against measured maxima -------------------------------------------
def section_alloc(args: argparse.Namespace) -> None:
    from ctrl_rl.sims import make_env

    print("\n| task | worlds | nconmax | contacts max | contacts mean | njmax | rows max | solver it mean | "
          "solver it max | at iteration limit | how |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|", flush=True)
    values: dict[str, Any] = {}
    n = args.worlds[0]
    for key in args.tasks:
        env = make_env("mjwarp", TASKS[key], n, device=args.device, seed=1)
        phys, g = env.physics, torch.Generator(device=args.device).manual_seed(1)
        worst: dict[str, float] = {}
        for _ in range(args.alloc_steps):
            env.step(3.0 * torch.randn(n, env.action_dim, device=args.device, generator=g))
            for k, v in phys.usage().items():  # maxima of the maxima, means of the means
                worst[k] = worst.get(k, 0.0) + v / args.alloc_steps if k.endswith("mean") else max(worst.get(k, 0.0), v)
        phys.check_overflow()
        print(f"| {key} | {n} | {phys.nconmax} | {worst['contacts_max']:.0f} | {worst['contacts_mean']:.2f} | "
              f"{phys.njmax} | {worst['rows_max']:.0f} | {worst['solver_iter_mean']:.2f} | "
              f"{worst['solver_iter_max']:.0f} | {worst['iter_limit_frac']:.4f} | {phys.allocation_source} |",
              flush=True)
        values.update({f"{key}_nconmax": phys.nconmax, f"{key}_contacts_max": worst["contacts_max"],
                       f"{key}_njmax": phys.njmax, f"{key}_rows_max": worst["rows_max"],
                       f"{key}_solver_iter_max": worst["solver_iter_max"]})
        env.close()
    result_line("alloc", values)


# ---- ppo and walk: training on sim=mjwarp -----------------------------------------------------
def preset(args: argparse.Namespace) -> list[str]:
    out = ["task=quadruped_velocity_flat", PRESET, f"device={args.device}", "runner.progress=false"]
    return out + (["env.num_envs=16", "algo.num_steps_per_env=8", "algo.cudagraphs=false"] if args.tiny else [])


def ppo_row(args: argparse.Namespace, extra: list[str]) -> dict[str, float]:
    """One fresh runner of the preset: 2 warm-up iterations (kernels, graph captures), then timed ones."""
    from ctrl_rl.app.configure import load_train_config
    from ctrl_rl.app.session import build_env
    from ctrl_rl.runners import make_runner

    cfg = load_train_config([*preset(args), *extra])
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
    env.close()
    steps = cfg.env.num_envs * cfg.algo.num_steps_per_env
    return {"sps": iters * steps / wall, "collect_s": sum(r["collection_time"] for r in rows) / iters,
            "update_s": sum(r["learning_time"] for r in rows) / iters, "warmup_s": first,
            "num_envs": cfg.env.num_envs, "seconds_per_iteration": wall / iters}


def section_ppo(args: argparse.Namespace) -> None:
    print(f"\n| PPO on sim=mjwarp ({PRESET}) | num_envs | env-steps/s (incl. update) | collection s/it | "
          "update s/it | warm-up s |")
    print("|---|---:|---:|---:|---:|---:|", flush=True)
    values: dict[str, Any] = {}
    for label, extra, name in (("ctrl_quad (preset: sim.cuda_graph)", [], ""),
                               ("ctrl_quad, sim.cuda_graph=false", ["sim.cuda_graph=false"], "_eager_env")):
        r = ppo_row(args, extra)
        print(f"| {label} | {r['num_envs']} | {r['sps']:,.0f} | {r['collect_s']:.3f} | {r['update_s']:.3f} | "
              f"{r['warmup_s']:.1f} |", flush=True)
        values.update({f"sps{name}": r["sps"], f"collect_s{name}": r["collect_s"], f"update_s{name}": r["update_s"]})
        if not name:
            RESULTS["_seconds_per_iteration"] = r["seconds_per_iteration"]
            values["warmup_s"] = r["warmup_s"]
    result_line("ppo", values)


def section_walk(args: argparse.Namespace) -> None:
    from ctrl_rl.app.evaluate import evaluate
    from ctrl_rl.app.train import train

    per_it = RESULTS.get("_seconds_per_iteration", math.nan)
    iters = args.walk_iterations or (int(min(max(args.walk_seconds / per_it, 1), 1000)) if per_it == per_it else 100)
    rows = []
    for seed in args.seeds:
        overrides = [*preset(args), f"runner.max_iterations={iters}", f"runner.save_interval={iters}",
                     f"runner.log_root={args.log_root}", f"seed={seed}"]
        start = time.perf_counter()
        run = train(overrides)
        minutes = (time.perf_counter() - start) / 60
        result = evaluate(str(run), EVAL_KWARGS, episodes=args.episodes, seed=2024)
        rows.append((seed, minutes, result["forward_velocity"], int(result["terminated"])))
    print(f"\n| walk ({PRESET}) | iterations | train min (wall, incl. start) | episodes | forward velocity m/s | "
          "falls |")
    print("|---|---:|---:|---:|---:|---:|")
    for seed, minutes, velocity, falls in rows:
        print(f"| ctrl_quad, seed {seed} | {iters} | {minutes:.2f} | {args.episodes} | {velocity:.3f} | {falls} |")
    walks = [v >= 0.4 and f == 0 for _, _, v, f in rows]
    result_line("walk", {"iterations": iters, "seeds": len(rows), "train_minutes": max(r[1] for r in rows),
                         "forward_velocity": min(r[2] for r in rows), "falls": sum(r[3] for r in rows),
                         "walks": sum(walks)})


SECTION_FNS = {"torch": section_torch, "physics": section_physics, "alloc": section_alloc,
               "ppo": section_ppo, "walk": section_walk}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--tiny", action="store_true", help="toy sizes on the CPU (CI smoke test)")
    p.add_argument("--sections", nargs="+", choices=SECTIONS, default=list(SECTIONS))
    p.add_argument("--tasks", nargs="+", choices=list(TASKS), default=None)
    p.add_argument("--worlds", type=int, nargs="+", default=None, help="MuJoCo Warp world counts")
    p.add_argument("--seconds", type=float, default=None, help="timed seconds per physics row")
    p.add_argument("--episode", type=int, default=50, help="control steps between untimed resets")
    p.add_argument("--alloc-steps", type=int, default=None)
    p.add_argument("--ppo-iterations", type=int, default=None)
    p.add_argument("--walk-seconds", type=float, default=110.0, help="training time the walk section aims at")
    p.add_argument("--walk-iterations", type=int, default=None, help="fixed instead of --walk-seconds")
    p.add_argument("--episodes", type=int, default=None, help="evaluation episodes of the walk section")
    p.add_argument("--seeds", type=int, nargs="+", default=[42], help="walk section: one training run per seed")
    p.add_argument("--log-root", default="logs")
    p.add_argument("--before", action="store_true",
                   help="physics: also ctrl_quad with the settings before issue 41, and deterministic alone")
    p.add_argument("--json", default=None, help="write every figure to this file")
    args = p.parse_args(argv)
    args.device = torch.device(args.device)
    tiny = args.tiny
    args.tasks = args.tasks or (["quad"] if tiny else list(TASKS))
    args.worlds = args.worlds or ([8] if tiny else [4096, 16384])
    args.seconds = args.seconds or (0.2 if tiny else 1.5)
    args.alloc_steps = args.alloc_steps or (10 if tiny else 150)
    args.ppo_iterations = args.ppo_iterations or (1 if tiny else 5)
    args.episodes = args.episodes or (2 if tiny else 64)
    if tiny:
        args.episode = min(args.episode, 10)
        args.walk_iterations = args.walk_iterations or 2
    args.device_name = torch.cuda.get_device_name(args.device) if args.device.type == "cuda" else "cpu"
    if args.device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False  # each learner sets its own (algo.tf32, rsl_rl_tf32)
    print(f"gpu_suite on {args.device_name}: torch {torch.__version__}, sections {' '.join(args.sections)}",
          flush=True)
    failed = []
    start = time.perf_counter()
    for name in args.sections:
        t0 = time.perf_counter()
        try:
            SECTION_FNS[name](args)
        except Exception:  # noqa: BLE001 - the remaining sections still run; the exit code says it
            traceback.print_exc()
            failed.append(name)
        print(f"[{name}: {time.perf_counter() - t0:.0f} s]", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({k: v for k, v in RESULTS.items() if not k.startswith("_")}, indent=1))
    keys = ("physics.quad_physics_sps_4096", "physics.quad_vecenv_sps_4096", "physics.quad_vecenv_graph_sps_4096",
            "physics.humanoid_physics_sps_4096", "physics.humanoid_vecenv_sps_4096",
            "physics.humanoid_vecenv_graph_sps_4096", "ppo.sps", "torch.vs_rsl_rl_65536", "walk.train_minutes",
            "walk.forward_velocity", "walk.falls")
    head = " ".join(f"{k.split('.', 1)[1]}={RESULTS[k]:.4g}" for k in keys if k in RESULTS)
    print(f"RESULT device={args.device_name.replace(' ', '_')} seconds={time.perf_counter() - start:.0f} "
          f"failed={','.join(failed) or 'none'} {head}".rstrip(), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
