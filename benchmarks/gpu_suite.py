"""The GPU suite: issue 41's rows and issue 52's in unattended runs, each section printing its table
and a ``RESULT section=...`` line as it finishes, the last line one ``RESULT`` with the headline
figures. ``--tiny`` runs the same code at toy sizes on the CPU (CI's smoke test,
``tests/test_benchmarks_smoke.py``). The sections live in ``benchmarks/gpu_sections/``.

Sections (``--sections``, in this order):

* ``torch``: PPO on the torch pendulum (512-256-128, 24 steps, 5 epochs, 4 minibatches), ours
  eager and with ``algo.cudagraphs`` (fp32, bf16) beside rsl_rl as it ships and with TF32; each row
  a fresh process (``benchmarks/ppo_throughput.py``).
* ``physics``: MuJoCo Warp ``physics.step`` and ``VecEnv.step`` (eager and ``sim.cuda_graph``) for
  ctrl_quad and the humanoid at each ``--worlds``; ``--before``: the settings before issue 41;
  ``--options``: ctrl_quad's ``physics.step`` at the first size once per MuJoCo Warp option changed
  (solver CG, 4 / 8 iterations, elliptic cone, SAP broadphase, conditional graphs off, sensors off,
  warm start off; issue 52 item 2).
* ``alloc``: the chosen ``nconmax``/``njmax`` against the maxima measured while the robots flail.
* ``ppo``: PPO on ``sim=mjwarp`` (``tune=ppo_quadruped_velocity_flat_gpu``; also
  ``sim.cuda_graph=false``, and ``profile=true`` whose per-stage split, ``Perf/time_<stage>``, shows
  where an iteration goes: issue 52 item 1).
* ``walk``: that preset trained for ``--walk-seconds`` (or ``--walk-iterations``) per ``--seeds``,
  evaluated as ``benchmarks/quadruped_walk.py`` does (0.5 m/s, pushes off, 64 episodes of 20 s).
* ``mjlab``: mjlab's ``Mjlab-Velocity-Flat-Unitree-Go1`` beside ours on the Go1: env-steps/s at each
  ``--worlds`` (mjlab's env directly and through our ``sim=mjlab`` adapter), PPO env-steps/s, and the
  walk by the same bar (item 3); mjlab runs in its own environment (``gpu_sections/mjlab_child.py``).
* ``rough``: ``quadruped_velocity_rough`` with the terrain curriculum and the height scan in the
  actor, per ``--rough-robots``, for ``--rough-minutes``; crossings per stair height and slope (item 4).
* ``humanoid``: PPO with ``tune=ppo_humanoid_velocity_flat_gpu`` per ``--humanoid-seeds``, then SAC
  with FastSAC's settings for ``--sac-seconds`` (item 5).
* ``newrobot``: the gait recipe on ``--newrobot`` (ctrl_dog, Go2-class) at GPU sizes for
  ``--newrobot-seconds``: the gait report must pass within 3 minutes (item 6).

Issue 52's plan (docs/experiments/benchmarks_gpu.md, "Issue 52": minutes per section from the 11-27
H100 figures). Here first: ``bash ../shared/tools/device_kit.sh --warp`` and ``bash scripts/mjlab_kit.sh``.
Each lease: calls back to back on one warm machine (it goes back after ~30 s idle; /tmp stays while it is
held), each within 64 MiB; every call starts with ``. .device/setup.sh &&`` and ends with
``--json $OUT/<name>.json 2>&1 | tee $OUT/<name>.log``:

    # lease A (~13 of 15 min: items 1, 2, 6, 3)
    # A1 carry [.device, .device-w1], timeout_s 120: setup only                             ~0.5 min
    nvidia-smi
    # A2 carry [.device, .device-w2], timeout_s 480                                          ~5.5 min
    python3 benchmarks/gpu_suite.py --sections physics ppo newrobot --tasks quad --worlds 4096 --seconds 1.0 \
        --options baseline cg it4 elliptic sap_tile graph_conditional_off sensors_off warmstart_off \
        --newrobot-seconds 120
    # A3 carry [.device, .mjlab-kit], timeout_s 480                                          ~5.5 min
    . .mjlab-kit/setup.sh && python3 benchmarks/gpu_suite.py --sections mjlab --worlds 4096 16384 \
        --seconds 1.0 --walk-seconds 60
    # lease B (~13 min: item 5, PPO): B1 as A1; then carry [.device, .device-w2], timeout_s 560 and 300
    python3 benchmarks/gpu_suite.py --sections humanoid --humanoid-algos ppo --humanoid-seconds 160 --humanoid-seeds 0 1
    python3 benchmarks/gpu_suite.py --sections humanoid --humanoid-algos ppo --humanoid-seconds 160 --humanoid-seeds 2
    # lease C (~13.5 min: item 4, 3 of its 20 minutes): C1 as A1; then one call per robot, timeout_s 420 each
    python3 benchmarks/gpu_suite.py --sections rough --rough-robots ctrl_quad --rough-minutes 3
    python3 benchmarks/gpu_suite.py --sections rough --rough-robots unitree_go1 --rough-minutes 3
    # lease D (~11 min: item 5, SAC, 7 of FastSAC's 15 minutes): D1 as A1; then timeout_s 590
    python3 benchmarks/gpu_suite.py --sections humanoid --humanoid-algos sac --sac-seconds 420

Usage::

    python benchmarks/gpu_suite.py --device cuda --sections torch  # the part that needs no warp
    python benchmarks/gpu_suite.py --tiny                          # CPU smoke run, every section
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_sections import learning, throughput, vs_mjlab  # noqa: E402
from gpu_sections.common import RESULTS  # noqa: E402

SECTION_FNS = {"torch": throughput.section_torch, "physics": throughput.section_physics,
               "alloc": throughput.section_alloc, "ppo": throughput.section_ppo, "walk": learning.section_walk,
               "mjlab": vs_mjlab.section_mjlab, "rough": learning.section_rough, "humanoid": learning.section_humanoid,
               "newrobot": learning.section_newrobot}
SECTIONS = tuple(SECTION_FNS)
HEADLINE = ("physics.quad_physics_sps_4096", "physics.quad_vecenv_sps_4096", "physics.quad_vecenv_graph_sps_4096",
            "physics.humanoid_physics_sps_4096", "physics.humanoid_vecenv_sps_4096",
            "physics.humanoid_vecenv_graph_sps_4096", "ppo.sps", "torch.vs_rsl_rl_65536", "walk.train_minutes",
            "walk.forward_velocity", "walk.falls", "mjlab.mjlab_raw_sps_4096", "mjlab.ours_sps_4096",
            "rough.stairs_15cm_min_success", "humanoid.walks", "humanoid.sac_walks", "newrobot.passed")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line, with each size defaulted for a GPU run or, with ``--tiny``, for the CPU smoke."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--tiny", action="store_true", help="toy sizes on the CPU (CI smoke test)")
    p.add_argument("--sections", nargs="+", choices=SECTIONS, default=list(SECTIONS))
    p.add_argument("--tasks", nargs="+", choices=list(throughput.TASKS), default=None)
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
    p.add_argument("--options", nargs="*", default=None, choices=list(throughput.OPTION_NAMES),
                   help="physics: ctrl_quad physics.step once per MuJoCo Warp option changed (none by default)")
    p.add_argument("--mjlab-python", default=None, help="mjlab: the Python of mjlab's environment")
    p.add_argument("--mjlab-timeout", type=float, default=900.0, help="mjlab: seconds before its child is stopped")
    p.add_argument("--rough-robots", nargs="+", default=None, help="rough: robots trained (ctrl_quad unitree_go1)")
    p.add_argument("--rough-minutes", type=float, default=20.0, help="rough: training budget per robot")
    p.add_argument("--rough-stairs", type=float, nargs="+", default=None, help="rough: stair rises evaluated (m)")
    p.add_argument("--rough-slopes", type=float, nargs="*", default=None, help="rough: slopes evaluated (rise/run)")
    p.add_argument("--humanoid-seconds", type=float, default=600.0, help="humanoid: PPO budget per seed")
    p.add_argument("--humanoid-iterations", type=int, default=None, help="humanoid: fixed instead of the budget")
    p.add_argument("--humanoid-seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--humanoid-algos", nargs="+", choices=("ppo", "sac"), default=["ppo", "sac"])
    p.add_argument("--sac-seconds", type=float, default=900.0, help="humanoid: SAC budget (FastSAC's 15 min)")
    p.add_argument("--newrobot", default="ctrl_dog", help="newrobot: the Go2-class robot")
    p.add_argument("--newrobot-seconds", type=float, default=150.0, help="newrobot: training budget")
    p.add_argument("--before", action="store_true",
                   help="physics: also ctrl_quad with the settings before issue 41, and deterministic alone")
    p.add_argument("--json", default=None, help="write every figure to this file")
    args = p.parse_args(argv)
    args.device = torch.device(args.device)
    tiny = args.tiny
    args.tasks = args.tasks or (["quad"] if tiny else list(throughput.TASKS))
    args.worlds = args.worlds or ([8] if tiny else [4096, 16384])
    args.seconds = args.seconds or (0.2 if tiny else 1.5)
    args.alloc_steps = args.alloc_steps or (10 if tiny else 150)
    args.ppo_iterations = args.ppo_iterations or (1 if tiny else 5)
    args.episodes = args.episodes or (2 if tiny else 64)
    args.options = args.options if args.options is not None else (["baseline", "it4"] if tiny else [])
    args.rough_robots = args.rough_robots or (["ctrl_quad"] if tiny else ["ctrl_quad", "unitree_go1"])
    args.rough_stairs = args.rough_stairs or ([0.05] if tiny else [0.10, 0.15, 0.20])
    args.rough_slopes = args.rough_slopes if args.rough_slopes is not None else ([] if tiny else [0.3])
    if tiny:
        args.episode = min(args.episode, 10)
        args.walk_iterations = args.walk_iterations or 2
        args.seeds, args.humanoid_seeds = args.seeds[:1], args.humanoid_seeds[:1]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
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
    head = " ".join(f"{k.replace('.', '_')}={RESULTS[k]:.4g}" for k in HEADLINE if k in RESULTS)
    print(f"RESULT device={args.device_name.replace(' ', '_')} seconds={time.perf_counter() - start:.0f} "
          f"failed={','.join(failed) or 'none'} {head}".rstrip(), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
