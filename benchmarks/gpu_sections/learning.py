"""The learning sections of ``benchmarks/gpu_suite.py``, each trained from scratch on ``sim=mjwarp``
for a time budget and judged by the walk benchmarks' evaluation (0.5 m/s forward, pushes off):

* ``walk``: ctrl_quad with the GPU preset, once per ``--seeds``;
* ``humanoid``: ctrl_humanoid with its GPU preset, once per ``--humanoid-seeds``; then SAC with
  FastSAC's settings (``FASTSAC``) for ``--sac-seconds``;
* ``newrobot``: the gait recipe (``tune=ppo_quadruped_velocity_flat_fast``) on ``--newrobot`` (a
  Go2-class quadruped) at GPU sizes, for ``--newrobot-seconds``: the gait report must pass;
* ``rough``: the terrain curriculum with the height scan in the actor, on each ``--rough-robots``,
  for ``--rough-minutes``; crossings of stairs and slopes per height as
  ``benchmarks/quadruped_rough.py`` measures them.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

from .common import (
    HUMANOID_PRESET,
    QUAD_PRESET,
    RESULTS,
    TINY,
    TINY_EVAL,
    iterations_for,
    ppo_row,
    preset,
    result_line,
    table,
    train_for,
    walk_rows,
)

NOISE_FREE = ("+task.kwargs.obs_noise=0.0",)
"""The humanoid is evaluated without observation noise, as ``benchmarks/humanoid_walk.py`` does."""
GPU_SIM = ["sim=mjwarp", "sim.cuda_graph=true", "env.num_envs=4096", "algo.cudagraphs=true"]
"""What the GPU presets change for a recipe written for the CPU."""
FASTSAC = ["algo=sac", "env.num_envs=4096", "algo.batch_size=8192", "algo.num_updates=8", "algo.actor_update_every=4",
           "algo.gamma=0.97", "algo.tau=0.125", "algo.buffer_size=4194304", "algo.distributional=true",
           "algo.num_atoms=101", "algo.v_min=-20", "algo.v_max=20", "algo.num_critics=2",
           "algo.critic_aggregation=mean", "algo.critic_hidden=[768,768,768]", "algo.actor_hidden=[512,512,512]",
           "algo.layer_norm=true", "algo.init_alpha=0.001", "algo.target_entropy_scale=0.0", "algo.log_std_min=-5.0",
           "algo.log_std_max=0.0", "algo.learning_starts=40960", "algo.cudagraphs=true", "algo.autocast=bf16"]
"""FastSAC's humanoid settings (holosoma; /work/shared/REFERENCES.md, "SAC / FastSAC"): 4,096 envs, batch
8,192, 8 updates per env step, the policy every 4th, gamma 0.97, tau 0.125, 1,024 transitions per env,
C51 with 101 atoms on [-20, 20], 2 critics averaged (no clipped double-Q), critics 768 and actor 512
wide (3 layers here), LayerNorm, alpha from 0.001 toward entropy 0, log-std in [-5, 0], bf16 autocast;
10 env steps per env of random actions first. Not carried over: AdamW's weight decay (ours is Adam)
and the tanh bounds from joint limits."""
SAC_TINY = ["env.num_envs=16", "algo.batch_size=64", "algo.num_updates=1", "algo.buffer_size=4096",
            "algo.critic_hidden=[32,32]", "algo.actor_hidden=[32,32]", "algo.learning_starts=0",
            "algo.cudagraphs=false", "algo.autocast=none"]


def section_walk(args: argparse.Namespace) -> None:
    overrides = preset(args)
    iters = args.walk_iterations or iterations_for(args, overrides, args.walk_seconds,
                                                   RESULTS.get("_seconds_per_iteration"))
    result_line("walk", walk_rows(args, f"walk, ctrl_quad ({QUAD_PRESET})", overrides, iters, args.seeds))


def section_humanoid(args: argparse.Namespace) -> None:
    values: dict[str, Any] = {}
    if "ppo" in args.humanoid_algos:
        ppo = preset(args, "humanoid_velocity_flat", HUMANOID_PRESET)
        iters = args.humanoid_iterations or iterations_for(args, ppo, args.humanoid_seconds)
        values.update(walk_rows(args, f"humanoid PPO ({HUMANOID_PRESET})", ppo, iters, args.humanoid_seeds,
                                NOISE_FREE))
    if "sac" in args.humanoid_algos:
        values.update({f"sac_{k}": v for k, v in humanoid_sac(args).items()})
    result_line("humanoid", values)


def humanoid_sac(args: argparse.Namespace) -> dict[str, Any]:
    """SAC with FastSAC's settings on the humanoid for ``--sac-seconds``, one seed, judged by the walk bar."""
    sac = ["task=humanoid_velocity_flat", f"device={args.device}", "runner.progress=false", "sim=mjwarp",
           "sim.cuda_graph=true", *FASTSAC, *(SAC_TINY if args.tiny else [])]
    # the pace of learning, not of the random steps before it
    pace = None if args.tiny else ppo_row(args, [*sac, "algo.learning_starts=0"])["seconds_per_iteration"]
    sac_iters = iterations_for(args, sac, args.sac_seconds, pace)
    return walk_rows(args, "humanoid SAC, FastSAC's settings", sac, sac_iters, args.humanoid_seeds[:1], NOISE_FREE)


def mjcf_contact_throughout(robot: str) -> list[str]:
    """MuJoCo Warp compiles the friction cone into its step, so the recipe's polish cannot switch to the MJCF's
    contact model there (``task.kwargs.polish_contact``): the GPU run trains on it from the start, capped as the
    polish caps it (a GPU pays less for the elliptic cone than 2 CPU cores)."""
    from ctrl_rl.tasks.locomotion.polish_contact import polished_contact
    from ctrl_rl.tasks.locomotion.velocity_config import VelocityTaskConfig

    contact = polished_contact(VelocityTaskConfig(robot=robot, polish_contact="mjcf"))
    return ["task.kwargs.polish_contact=", f"task.kwargs.cone={contact['cone']}",
            f"task.kwargs.impratio={contact['impratio']}"]


def section_newrobot(args: argparse.Namespace) -> None:
    overrides = ["task=quadruped_velocity_flat", "tune=ppo_quadruped_velocity_flat_fast", f"device={args.device}",
                 "runner.progress=false", f"task.kwargs.robot={args.newrobot}", *GPU_SIM,
                 *mjcf_contact_throughout(args.newrobot), *(TINY if args.tiny else [])]
    iters = iterations_for(args, overrides, args.newrobot_seconds)
    values = walk_rows(args, f"gait recipe on {args.newrobot}, GPU sizes", overrides, iters, args.seeds[:1])
    values["passed"] = int(values["gait_passed"] == values["seeds"] and values["train_minutes"] <= 3.0)
    result_line("newrobot", values)


def section_rough(args: argparse.Namespace) -> None:
    import quadruped_rough as qr

    kinds = [(f"stairs up (pit) {h:.2f} m", "stairs_down", h, 0.0, f"stairs_up_{h:.2f}") for h in args.rough_stairs]
    kinds += [(f"stairs down (pyramid) {h:.2f} m", "stairs_up", h, 0.0, f"stairs_down_{h:.2f}")
              for h in args.rough_stairs]
    kinds += [(f"slope up (valley) {s}", "slope_down", 0.0, s, f"slope_up_{s}") for s in args.rough_slopes]
    kinds += [(f"slope down (pyramid) {s}", "slope_up", 0.0, s, f"slope_down_{s}") for s in args.rough_slopes]
    values: dict[str, Any] = {}
    rows, bar = [], []
    for robot in args.rough_robots:
        overrides = ["task=quadruped_velocity_rough", f"device={args.device}", "runner.progress=false",
                     f"task.kwargs.robot={robot}", "task.kwargs.actor_height_scan=true", *GPU_SIM,
                     "sim.cuda_graph=false",  # the height scan reads the terrain in the step: not graph-safe
                     *(TINY if args.tiny else [])]
        iters = iterations_for(args, overrides, args.rough_minutes * 60)
        run, minutes = train_for(args, overrides, iters, args.seeds[0])
        level = qr.terrain_level(run if run.is_dir() else run.parent)
        for label, kind, height, slope, key in kinds:
            r = qr.crossing(str(run), kind, args.episodes, height or 0.05, slope or 0.3, seed=2024,
                           extra=tuple(TINY_EVAL) if args.tiny else ())
            rows.append((robot, iters, minutes, level, label, r))
            values[f"{robot}_{key}"] = r["success"]
            if kind.startswith("stairs") and height >= 0.15:
                bar.append(r["success"])
        values.update({f"{robot}_train_minutes": minutes, f"{robot}_terrain_level": level})
    table("rough, height scan in the actor", ["iterations", "train min", "terrain level (of 9)", "case",
                                              "crossed", "falls", "forward velocity m/s"])
    for robot, iters, minutes, level, label, r in rows:
        print(f"| {robot} | {iters} | {minutes:.2f} | {level:.2f} | {label} | {100 * r['success']:.0f}% | "
              f"{r['falls']} | {r['forward_velocity']:.3f} |", flush=True)
    values["stairs_15cm_min_success"] = min(bar) if bar else math.nan
    result_line("rough", values)
