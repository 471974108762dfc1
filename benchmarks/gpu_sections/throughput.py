"""The throughput sections of ``benchmarks/gpu_suite.py``: ``torch`` (PPO on the torch pendulum beside
rsl_rl), ``physics`` (MuJoCo Warp ``physics.step`` and ``VecEnv.step``, and MuJoCo Warp's options
one by one), ``alloc`` (contact and constraint buffers against measured maxima) and ``ppo`` (PPO on
``sim=mjwarp`` with its per-stage time split)."""

from __future__ import annotations

import argparse
import math
import time
from typing import Any

import torch

from .common import QUAD_PRESET, RESULTS, ppo_row, preset, result_line, sync, table

TASKS = {"quad": "quadruped_velocity_flat", "humanoid": "humanoid_velocity_flat"}
OLD = {"solver_iterations": 100, "ls_iterations": 50}
"""The MJCFs' solver budget, which the tasks ran with before issue 41 (with ``deterministic`` on)."""
OPTION_NAMES = ("baseline", "cg", "it4", "elliptic", "sap_tile", "graph_conditional_off", "sensors_off",
                "warmstart_off")
"""``--options``: :func:`option_variants`' names."""


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
    physics step alone (the task's PD targets), else the whole ``VecEnv.step``. ``opt``: MuJoCo
    Warp's ``Model.opt`` fields set after the build, before the first step captures its graph."""

    def __init__(self, task: str, n: int, device: torch.device, physics_only: bool, episode: int,
                 task_kwargs: dict | None = None, options: dict | None = None, opt: dict | None = None) -> None:
        from ctrl_rl.sims import make_env

        start = time.perf_counter()
        self.env = make_env("mjwarp", task, n, device=device, seed=0, physics=options or {}, **(task_kwargs or {}))
        for name, value in (opt or {}).items():
            setattr(self.env.physics.m.opt, name, value)
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
    from sim_rows import measure

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
    table("row", ["worlds", "build s", "first step s", "env-steps/s", "physics steps/s"])
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
    if args.options:
        values.update(physics_options(args))
    result_line("physics", values)


def option_variants() -> dict[str, tuple[dict, dict]]:
    """MuJoCo Warp's options for ctrl_quad, one change each from the task's settings (Newton, pyramidal
    cone, 10 / 20 iterations, NXN broadphase, conditional graphs, sensors on): name -> (task kwargs,
    ``Model.opt`` fields). Some change the physics (``cg``, ``elliptic``, ``it4``): read those as costs."""
    import mujoco
    import mujoco_warp as mjw

    return {"baseline": ({}, {}), "cg": ({}, {"solver": mjw.SolverType.CG}),
            "it4": ({"solver_iterations": 4, "ls_iterations": 8}, {}),
            "elliptic": ({}, {"cone": mjw.ConeType.ELLIPTIC}),
            "sap_tile": ({}, {"broadphase": mjw.BroadphaseType.SAP_TILE}),
            "graph_conditional_off": ({}, {"graph_conditional": False}),
            "sensors_off": ({}, {"disableflags": int(mujoco.mjtDisableBit.mjDSBL_SENSOR)}),
            "warmstart_off": ({}, {"disableflags": int(mujoco.mjtDisableBit.mjDSBL_WARMSTART)})}


def physics_options(args: argparse.Namespace) -> dict[str, float]:
    """``physics.step`` of ctrl_quad at the first ``--worlds`` once per ``--options`` variant."""
    variants = option_variants()
    n, values = args.worlds[0], {}
    for name in args.options:
        kw, opt = variants[name]
        sps = timed_row(f"quad physics.step, option {name}", lambda kw=kw, opt=opt: WarpRow(
            TASKS["quad"], n, args.device, True, args.episode, kw, opt=opt), args.seconds, args.episode)
        values[f"quad_physics_sps_{name}"] = sps
    return values


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


# ---- ppo: PPO on sim=mjwarp, and where an iteration's time goes -----------------------------
def section_ppo(args: argparse.Namespace) -> None:
    table(f"PPO on sim=mjwarp ({QUAD_PRESET})", ["num_envs", "env-steps/s (incl. update)", "collection s/it",
                                                  "update s/it", "warm-up s"])
    values: dict[str, Any] = {}
    split: dict[str, float] = {}
    for label, extra, name in (("ctrl_quad (preset: sim.cuda_graph)", [], ""),
                               ("ctrl_quad, sim.cuda_graph=false", ["sim.cuda_graph=false"], "_eager_env"),
                               ("ctrl_quad, profile=true (synchronized per stage)", ["profile=true"], "_profiled")):
        r = ppo_row(args, [*preset(args), *extra])
        print(f"| {label} | {r['num_envs']} | {r['sps']:,.0f} | {r['collect_s']:.3f} | {r['update_s']:.3f} | "
              f"{r['warmup_s']:.1f} |", flush=True)
        values.update({f"sps{name}": r["sps"], f"collect_s{name}": r["collect_s"], f"update_s{name}": r["update_s"]})
        split = r["split"] or split
        if not name:
            RESULTS["_seconds_per_iteration"] = r["seconds_per_iteration"]
            values["warmup_s"] = r["warmup_s"]
    total = sum(split.values()) or math.nan
    table("stage (profile=true, Perf/time_<stage>)", ["ms / iteration", "share"])
    for stage, seconds in split.items():
        print(f"| {stage} | {1e3 * seconds:.1f} | {100 * seconds / total:.1f}% |", flush=True)
        values[f"ms_{stage}"] = 1e3 * seconds
    result_line("ppo", values)
