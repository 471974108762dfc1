"""MuJoCo stepping throughput: our CPU backend next to gymnasium's vector envs and the hardware limit.

Every row steps the *same* model, the ``ctrl_quad`` quadruped (``--task humanoid_velocity_flat``:
the ``ctrl_humanoid`` humanoid) compiled by
``ctrl_rl.robots.robot.build_model``, with the task's decimation (4 physics steps of 5 ms per
control step) and the same PD targets: ``default_pose + action_scale * a`` with ``a`` drawn
once, uniform in [-1, 1], per (control step, env). Work is cut into episodes of ``--episode``
control steps (default 50 = 1 s) that all start from the standing default pose; resets happen
outside the timer, so every row simulates the same mix of standing and stumbling robots (the
contact count, hence the cost of a step, depends on it).

Rows (``benchmarks/sim_rows.py``), per env count (all timed as best of ``--repeats`` interleaved rounds
of ``--seconds``: on a shared machine the slower rounds measure the neighbours):

* ``limit``: single-thread ``mj_step`` rate on one ``MjData`` (continuous, warm-started) x
  ``--cores``: what perfect scaling of plain MuJoCo would give; no implementation beats it.
  (Our backend starts each control step's solver cold; on this model that costs nothing:
  2.82 vs 2.86 Newton iterations per step, cold vs warm.)
* ``python loop over MjData``: one thread, a Python loop over N ``MjData``, ``mj_step(nstep=4)``;
* ``rollout nstep=4 x1`` / ``rollout nstep=1 x4``: a ``mujoco.rollout.Rollout`` pool of
  ``--cores`` threads over the batch state array, one call per control step vs one call per
  physics step (the latter pays the pool hand-off and the state copies four times);
* ``ours: CpuPhysics.step``: the shipped backend's physics alone (torch targets in, torch views
  out); ``+ per-env models`` is the same with one ``MjModel`` copy per env, which is what domain
  randomization (``set_model_field``) turns it into;
* ``ours: mujoco VecEnv.step``: ``make_env("mujoco", "quadruped_velocity_flat", N)``, task
  included (action delay, observations, rewards, terminations and their same-step resets,
  per-env randomized models); its periodic full reset is untimed like every row's;
* ``+ policy``: the same with the actor PPO trains on the task (ctrl_quad: 256-128-64 ELU) run
  on every step's observation first, as collection does (its output discarded: same physics);
* ``gymnasium SyncVectorEnv`` / ``AsyncVectorEnv``: a minimal ``gymnasium.Env`` (``sim_rows.py``)
  (``MjData`` + ``mj_step(nstep=4)``, observation = qpos and qvel, no reward logic) in
  ``SyncVectorEnv`` (N sub-envs, one process) and ``AsyncVectorEnv`` (``shared_memory=True``,
  one worker process per core, each stepping N / cores ``MjData`` in a loop: the only sane way
  to put 1024 envs on a few cores with gymnasium); up to ``--async-per-env-max`` envs also
  gymnasium's usual ``AsyncVectorEnv`` with one worker process per env.

Rough terrain (``--no-terrain`` skips it), at the largest ``--envs``: the flat and the rough task's
``VecEnv.step`` (rough: the default 10 x 10 grid, limb colliders, the critic's 187-ray height
scan, curriculum), the rough task without limb colliders, and the height scan alone, by the
terrain lookup the CPU backend uses and by ``mj_ray`` per ray (at 16 envs). RESULT adds
``rough_sps``, ``rough_vs_flat``, ``scan_us`` (µs per env-step) and ``scan_frac`` (of the rough step).

``--variants`` adds rollout rows with other ``chunk_size`` / ``nthread`` settings. If sim
``mjwarp`` is registered, MuJoCo Warp runs at ``--warp-worlds`` on ``--device`` (building the
env, which compiles or loads the kernels, and the first step are timed separately, excluded).

env-steps/s = control steps x envs / timed seconds; physics steps/s = that x decimation. The
``RESULT`` line is taken at the largest ``--envs``: ``ours_sps`` is ``CpuPhysics.step`` (physics
only, like the gymnasium env it is compared with), ``frac_of_limit = ours_sps / limit_sps``,
``vs_async = ours_sps / async_sps`` (the batched-worker AsyncVectorEnv); ``vecenv_sps``,
``sync_sps``, ``policy_sps`` (the VecEnv with the policy in the loop) and
``policy_frac_of_limit = policy_sps / limit_sps`` follow, then ``async1_*``: gymnasium's usual one-process-per-env
``AsyncVectorEnv``, at the largest ``--envs`` up to ``--async-per-env-max`` (64: each worker
process costs ~80 MB), with ``vs_async1`` = ours at that size ÷ it.

Usage::

    python benchmarks/sim_throughput.py --envs 64 256 1024 --seconds 3
    python benchmarks/sim_throughput.py --device cuda --warp-worlds 4096,16384
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

import gymnasium
import mujoco
from sim_rows import (
    TASK,
    GymVector,
    OursPhysics,
    OursVecEnv,
    OursVecEnvPolicy,
    PythonLoop,
    RolloutRow,
    Row,
    ScanRow,
    Setup,
    SingleThreadLimit,
    TerrainVecEnv,
    WarpPhysicsRow,
    make_setup,
    measure,
)


# ---- driver --------------------------------------------------------------------------------
def cpu_rows(s: Setup, n: int, cores: int, variants: bool, async_per_env_max: int) -> list[Callable[[], Row]]:
    """Factories of the rows at ``n`` envs, in table order (built one at a time)."""
    dec = s.decimation
    rows: list[Callable[[], Row]] = [
        lambda: PythonLoop(s, n),
        lambda: RolloutRow(s, n, cores, dec),
        lambda: RolloutRow(s, n, cores, 1),
    ]
    if variants:
        for chunk in (1, 4, 16, max(1, n // cores)):
            rows.append(lambda chunk=chunk: RolloutRow(s, n, cores, dec, chunk_size=chunk))
        rows.append(lambda: RolloutRow(s, n, cores + 1, dec))
        rows.append(lambda: RolloutRow(s, n, 1, dec))
    rows += [
        lambda: OursPhysics(s, n, cores),
        lambda: OursPhysics(s, n, cores, model_copies=True),
        lambda: OursVecEnv(s, n, workers=os.cpu_count() or 1),  # make_env's CpuPhysics: all cores
        lambda: OursVecEnvPolicy(s, n, workers=os.cpu_count() or 1),
        lambda: GymVector(s, n, None),
        lambda: GymVector(s, n, cores),
    ]
    if n <= async_per_env_max:  # gymnasium's usual layout; ~80 MB per worker process
        rows.append(lambda: GymVector(s, n, n))
    return rows


def terrain_section(s: Setup, n: int, seconds: float, episode: int, repeats: int, ray_envs: int) -> dict[str, str]:
    """Rough terrain vs flat ground through the whole VecEnv on ``sim=mujoco``, and the scan's cost."""
    print()
    print(f"Rough terrain on sim=mujoco at {n} envs (default grid: 10 x 10 sub-terrains of 8 m, 0.1 m heightfield; "
          "random actions, so robots stumble and reset as in early training)")
    print()
    print("| row | envs | env-steps/s | µs per env-step | vs flat |")
    print("|---|---:|---:|---:|---:|")
    rows: list[Row] = []
    try:
        rows = [TerrainVecEnv(s, n, TASK, "flat task VecEnv.step"),
                TerrainVecEnv(s, n, "quadruped_velocity_rough", "rough task VecEnv.step"),
                TerrainVecEnv(s, n, "quadruped_velocity_rough", "rough task, no limb colliders",
                              limb_collisions=False),
                ScanRow(n, "lookup"), ScanRow(ray_envs, "ray")]
        sizes = [n, n, n, n, ray_envs]
        best = [0.0] * len(rows)
        for _ in range(repeats):
            for i, (row, size) in enumerate(zip(rows, sizes, strict=True)):
                best[i] = max(best[i], measure(row, size, seconds, episode))
    finally:
        for row in rows:
            row.close()
    for row, size, sps in zip(rows, sizes, best, strict=True):
        print(f"| {row.name} | {size} | {sps:,.0f} | {1e6 / sps:.2f} | {sps / best[0]:.2f}x |", flush=True)
    scan_us, rough_us = 1e6 / best[3], 1e6 / best[1]
    print(f"\nheight scan (187 rays, lookup) = {scan_us:.2f} µs per env-step = {100 * scan_us / rough_us:.1f}% of the "
          f"rough step; mj_ray per ray from Python = {1e6 / best[4]:.0f} µs per env-step")
    return {"rough_envs": str(n), "flat_vecenv_sps": f"{best[0]:.0f}", "rough_sps": f"{best[1]:.0f}",
            "rough_vs_flat": f"{best[1] / best[0]:.2f}", "scan_us": f"{scan_us:.2f}",
            "scan_frac": f"{scan_us / rough_us:.3f}", "ray_scan_us": f"{1e6 / best[4]:.0f}"}


def warp_section(s: Setup, worlds: list[int], device: str, seconds: float, episode: int) -> None:
    """MuJoCo Warp through our ``mjwarp`` sim: build and compile times, then steady state."""
    from ctrl_rl.sims import SIMS

    print()
    if "mjwarp" not in SIMS:
        print("mjwarp: sim 'mjwarp' is not registered in ctrl_rl.sims.SIMS; MuJoCo Warp rows skipped")
        return
    print(f"MuJoCo Warp on {device}: build = make_env (loads, or on first use compiles, every kernel; warp "
          "caches them on disk), first step = graph capture; both excluded from env-steps/s")
    print()
    print("| row | worlds | build s | first step s | env-steps/s | physics steps/s |")
    print("|---|---:|---:|---:|---:|---:|")
    for n in worlds:
        for name, make in (("ours: mjwarp physics.step", lambda n=n: WarpPhysicsRow(s, n, device)),
                           ("ours: mjwarp VecEnv.step", lambda n=n: OursVecEnv(s, n, "mjwarp", device))):
            try:  # a backend failure costs its rows, not the CPU table's RESULT line
                row = make()
                start = time.perf_counter()
                row.step(0)
                row.sync()
                first_s = time.perf_counter() - start
                sps = measure(row, n, seconds, episode)
                row.close()
            except Exception as exc:  # noqa: BLE001 - reported in the table
                print(f"| {name} | {n} | failed: {type(exc).__name__}: {str(exc)[:200]} | | | |", flush=True)
                continue
            print(f"| {name} | {n} | {row.build_s:.2f} | {first_s:.2f} | {sps:,.0f} | "
                  f"{sps * s.decimation:,.0f} |", flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", type=int, nargs="+", default=[64, 256, 1024])
    parser.add_argument("--seconds", type=float, default=2.0, help="timed seconds per row and round")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved rounds; each row reports its best")
    parser.add_argument("--episode", type=int, default=50, help="control steps between (untimed) resets")
    parser.add_argument("--cores", type=int, default=os.cpu_count() or 1,
                        help="limit multiplier, rollout threads, async workers (default: os.cpu_count())")
    parser.add_argument("--variants", action="store_true", help="add rollout chunk_size / nthread rows")
    parser.add_argument("--async-per-env-max", type=int, default=64,
                        help="run AsyncVectorEnv with one process per env up to this many envs (memory)")
    parser.add_argument("--device", default="cpu", help="MuJoCo Warp device (cpu or cuda)")
    parser.add_argument("--warp-worlds", default=None,
                        help="comma list (default 4,16,64 on cpu, 4 with --quick; 4096,16384 on cuda)")
    parser.add_argument("--no-terrain", action="store_true", help="skip the rough-terrain rows")
    parser.add_argument("--task", default=TASK, help="the flat task whose robot every row steps (e.g. "
                        "humanoid_velocity_flat); the rough-terrain rows run for the quadruped only")
    parser.add_argument("--quick", action="store_true", help="0.2 s per row, short episodes (smoke test)")
    args = parser.parse_args(argv)
    if args.quick:
        args.seconds, args.repeats, args.episode = 0.2, 1, min(args.episode, 10)
    sizes = sorted(args.envs)
    cpu_worlds = "4" if args.quick else "4,16,64"
    worlds_arg = args.warp_worlds or ("4096,16384" if args.device.startswith("cuda") else cpu_worlds)
    worlds = [int(w) for w in worlds_arg.split(",")]
    s = make_setup(max(sizes + worlds), args.episode, task=args.task)

    import torch

    print(f"mujoco={mujoco.__version__} gymnasium={gymnasium.__version__} torch={torch.__version__} "
          f"task={args.task} cores={args.cores} torch_threads={torch.get_num_threads()} decimation={s.decimation} "
          f"timestep={s.model.opt.timestep} episode={args.episode} seconds/row={args.seconds} "
          f"repeats={args.repeats} (best of, interleaved)")
    print()
    print("| row | envs | threads/procs | env-steps/s | physics steps/s | ms per control step "
          "| % of limit | ours ÷ this |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    result: dict[str, str] = {}
    async1: dict[str, str] = {}
    for n in sizes:
        rows: list[Row] = [SingleThreadLimit(s)]
        try:
            for make in cpu_rows(s, n, args.cores, args.variants, args.async_per_env_max):
                rows.append(make())
            best = [0.0] * len(rows)
            for _ in range(args.repeats):  # interleaved rounds, best of: neighbours only slow a row down
                for i, row in enumerate(rows):
                    best[i] = max(best[i], measure(row, 1 if i == 0 else n, args.seconds, args.episode))
        finally:
            for row in rows:
                row.close()
        limit_sps = best[0] * args.cores  # one env on one core -> x cores
        by_name = {row.name: sps for row, sps in zip(rows[1:], best[1:], strict=True)}
        ours = by_name["ours: CpuPhysics.step"]
        cells = [(f"limit: 1-thread mj_step ({1e6 / (best[0] * s.decimation):.1f} µs) x cores", args.cores,
                  limit_sps)]
        cells += [(row.name, row.workers, sps) for row, sps in zip(rows[1:], best[1:], strict=True)]
        for name, workers, sps in cells:
            print(f"| {name} | {n} | {workers} | {sps:,.0f} | {sps * s.decimation:,.0f} | {n / sps * 1e3:.2f} "
                  f"| {100 * sps / limit_sps:.0f}% | {ours / sps:.2f}x |", flush=True)
        async_sps = next(sps for name, sps in by_name.items() if name.startswith("gymnasium Async")
                         and "per env" not in name)
        per_env = by_name.get("gymnasium AsyncVectorEnv (1 proc per env)")
        if per_env is not None:
            async1 = {"async1_envs": str(n), "async1_sps": f"{per_env:.0f}", "vs_async1": f"{ours / per_env:.2f}"}
        result = {"envs": str(n), "ours_sps": f"{ours:.0f}", "async_sps": f"{async_sps:.0f}",
                  "limit_sps": f"{limit_sps:.0f}", "frac_of_limit": f"{ours / limit_sps:.3f}",
                  "vs_async": f"{ours / async_sps:.2f}",
                  "vecenv_sps": f"{by_name['ours: mujoco VecEnv.step']:.0f}",
                  "policy_sps": f"{by_name['ours: mujoco VecEnv.step + policy']:.0f}",
                  "policy_frac_of_limit": f"{by_name['ours: mujoco VecEnv.step + policy'] / limit_sps:.3f}",
                  "sync_sps": f"{by_name['gymnasium SyncVectorEnv']:.0f}"}
    result.update(async1)
    if not args.no_terrain and args.task == TASK:
        result.update(terrain_section(s, sizes[-1], args.seconds, args.episode, args.repeats,
                                      ray_envs=4 if args.quick else 16))
    warp_section(s, worlds, args.device, args.seconds, args.episode)
    print()
    print("RESULT " + " ".join(f"{k}={v}" for k, v in result.items()))


if __name__ == "__main__":
    main()
