"""Training throughput across processes (torchrun) and with the GPU speed path.

CPU (any machine): PPO and SAC training env-steps/s with 1 process and with ``--procs`` processes
under ``torchrun`` (gloo), each process owning ``--envs`` envs (weak scaling, as one GPU per
process would). Scaling efficiency = K-process rate / (K x the 1-process rate at 1 thread); the
1-process run with K threads is shown too, since that is the alternative use of the same cores.

GPU (``--device cuda``): the same learners single-process at ``--gpu-envs`` envs with
``algo.compile`` / ``algo.cudagraphs`` off and on, and the raw stepping rate of the torch envs at
``--env-envs`` envs.

Every rate is a training run's own ``fps`` column (metrics.csv: all ranks' env steps over rank 0's
wall time per iteration), averaged after ``--skip`` warm-up iterations (compilation, capture).

Usage::

    python benchmarks/scaling.py                                 # CPU: 1 vs 2 processes
    python benchmarks/scaling.py --device cuda --procs 1         # one GPU: compile / cudagraphs
    python benchmarks/scaling.py --device cuda --procs 1 2 4     # several GPUs (NCCL)
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from env_throughput import time_torch_task

LEARNERS = {  # per-process settings: a rollout / update shape each learner is used with
    "ppo": ["algo=ppo", "task=pendulum", "algo.num_steps_per_env=32"],
    "sac": ["algo=sac", "task=pendulum", "algo.learning_starts=0", "algo.num_updates=2", "algo.batch_size=1024",
            "algo.buffer_size=1000000"],
}


def train_fps(algo: str, procs: int, threads: int, envs: int, iterations: int, skip: int, device: str,
              extra: list[str]) -> float:
    """Mean ``fps`` of a training run after ``skip`` iterations."""
    root = Path(tempfile.mkdtemp(prefix="scaling_"))
    args = ["-m", "ctrl_rl", "train", *LEARNERS[algo], f"env.num_envs={envs}", f"device={device}",
            f"runner.max_iterations={iterations}", f"runner.save_interval={iterations}", "runner.progress=false",
            f"runner.log_root={root}", *extra]
    cmd = [sys.executable, *args] if procs == 1 else \
        [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={procs}", *args]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
    if proc.returncode != 0:
        lines = [ln for ln in proc.stderr.splitlines() if not ln.startswith("W1")]  # not torchrun's warnings
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n" + "\n".join(lines))
    (metrics,) = root.glob("*/*/*/metrics.csv")
    with open(metrics) as f:
        fps = [float(r["fps"]) for r in csv.DictReader(f)][skip:]
    return sum(fps) / len(fps)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--procs", type=int, nargs="+", default=[1, 2], help="process counts (1 is the baseline)")
    p.add_argument("--algos", nargs="+", default=["ppo", "sac"], choices=list(LEARNERS))
    p.add_argument("--envs", type=int, default=512, help="envs per process (CPU scaling rows)")
    p.add_argument("--iterations", type=int, default=12)
    p.add_argument("--sac-iterations", type=int, default=60, help="SAC iterations (1 env step each)")
    p.add_argument("--skip", type=int, default=2, help="warm-up iterations left out of the mean")
    p.add_argument("--gpu-envs", type=int, default=4096, help="envs of the compile / cudagraphs rows")
    p.add_argument("--env-envs", type=int, default=65536, help="envs of the raw torch-env rows (GPU)")
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    result: dict[str, float] = {}
    print(f"device {args.device}; {os.cpu_count()} CPU cores\n")
    print("| learner | processes | threads each | envs each | env-steps/s | scaling efficiency |")
    print("|---|---:|---:|---:|---:|---:|")
    for algo in args.algos:
        its = args.iterations if algo == "ppo" else args.sac_iterations
        base = train_fps(algo, 1, 1, args.envs, its, args.skip, args.device, [])
        print(f"| {algo} | 1 | 1 | {args.envs} | {base:,.0f} | 1.00 |", flush=True)
        result[f"{algo}_fps_1"] = base
        for k in [k for k in args.procs if k > 1]:
            threads = train_fps(algo, 1, k, args.envs, its, args.skip, args.device, [])
            print(f"| {algo} | 1 | {k} | {args.envs} | {threads:,.0f} | — |", flush=True)
            fps = train_fps(algo, k, 1, args.envs, its, args.skip, args.device, [])
            eff = fps / (k * base)
            print(f"| {algo} | {k} | 1 | {args.envs} | {fps:,.0f} | {eff:.2f} |", flush=True)
            result.update({f"{algo}_fps_1x{k}threads": threads, f"{algo}_fps_{k}": fps, f"{algo}_efficiency_{k}": eff})
    if args.device.startswith("cuda"):
        print("\n| learner | envs | compile | cudagraphs | env-steps/s | speed-up |")
        print("|---|---:|---|---|---:|---:|")
        for algo in args.algos:
            its = args.iterations if algo == "ppo" else args.sac_iterations
            base = None
            for compile_, graphs in ((False, False), (True, False), (False, True), (True, True)):
                flags = [f"algo.compile={str(compile_).lower()}", f"algo.cudagraphs={str(graphs).lower()}"]
                fps = train_fps(algo, 1, 1, args.gpu_envs, its, max(args.skip, 4), args.device, flags)
                base = base or fps
                print(f"| {algo} | {args.gpu_envs} | {compile_} | {graphs} | {fps:,.0f} | {fps / base:.2f} |",
                      flush=True)
                result[f"{algo}_gpu_fps_compile{int(compile_)}_graphs{int(graphs)}"] = fps
        import torch

        from ctrl_rl.sims import list_tasks

        print("\n| torch env | envs | env-steps/s |\n|---|---:|---:|")
        for task in list_tasks("torch")["torch"]:
            rate = args.env_envs / time_torch_task(task, args.env_envs, 200, torch.device(args.device))
            print(f"| {task} | {args.env_envs} | {rate:,.0f} |", flush=True)
            result[f"env_{task}_fps"] = rate
    fields = " ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in result.items())
    print(f"\nRESULT device={args.device} {fields} seconds={time.perf_counter() - t0:.0f}")


if __name__ == "__main__":
    main()
