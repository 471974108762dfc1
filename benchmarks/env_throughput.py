"""Raw stepping throughput of the pure-torch tasks next to gymnasium's own vector envs.

Random actions, auto-resets included (the torch envs do their reset work every step).
The gymnasium reference for each task, at the same batch size:

* ``pendulum``: ``Pendulum-v1`` has no native vector env, so ``make_vec(..., "sync")``
  (a Python loop over sub-envs, i.e. what gymnasium users get);
* ``cartpole_*``: ``CartPole-v1``'s native numpy ``CartPoleVectorEnv`` (same physics,
  discrete actions);
* ``point_mass``: none.

Gymnasium sizes whose estimated run time (from the measured per-env-step cost at a smaller
size) exceeds ``--gym-budget`` seconds are skipped and marked in the table.

Usage::

    python benchmarks/env_throughput.py --device cpu --envs 1 256 4096 65536 --steps 200
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from ctrl_rl.sims import list_tasks, make_env

GYM_REFERENCE = {
    "pendulum": ("Pendulum-v1", "sync"),
    "cartpole_balance": ("CartPole-v1", "vector_entry_point"),
    "cartpole_swingup": ("CartPole-v1", "vector_entry_point"),
}


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_torch_task(
    task: str, num_envs: int, steps: int, device: torch.device, repeats: int = 3
) -> float:
    """Seconds per batch step: the best of ``repeats`` means over ``steps`` (after a warm-up).

    Best-of, as ``timeit`` does: on a shared machine the slower repeats measure the
    neighbours, not the env.
    """
    env = make_env("torch", task, num_envs, device=device, seed=0)
    gen = torch.Generator(device=device).manual_seed(0)
    # A pool of actions drawn up front, so the timing is the env's, not the sampler's.
    pool = [
        torch.rand(num_envs, env.action_dim, generator=gen, device=device) * 2 - 1 for _ in range(8)
    ]
    for i in range(10):
        env.step(pool[i % 8])
    best = float("inf")
    for _ in range(repeats):
        _sync(device)
        start = time.perf_counter()
        for i in range(steps):
            env.step(pool[i % 8])
        _sync(device)
        best = min(best, (time.perf_counter() - start) / steps)
    return best


def time_gym(env_id: str, mode: str, num_envs: int, steps: int) -> tuple[float, float]:
    """(seconds per batch step, seconds to build) for a gymnasium vector env."""
    import gymnasium

    start = time.perf_counter()
    vec = gymnasium.make_vec(env_id, num_envs, vectorization_mode=mode)
    build = time.perf_counter() - start
    vec.reset(seed=0)
    rng = np.random.default_rng(0)
    space = vec.action_space
    if isinstance(space, gymnasium.spaces.MultiDiscrete):
        pool = [rng.integers(0, space.nvec) for _ in range(8)]
    else:
        pool = [rng.uniform(space.low, space.high).astype(space.dtype) for _ in range(8)]
    for i in range(3):
        vec.step(pool[i % 8])
    start = time.perf_counter()
    for i in range(steps):
        vec.step(pool[i % 8])
    per_step = (time.perf_counter() - start) / steps
    vec.close()
    return per_step, build


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--envs", type=int, nargs="+", default=[1, 256, 4096, 65536])
    parser.add_argument("--steps", type=int, default=200, help="timed batch steps per repeat")
    parser.add_argument("--repeats", type=int, default=3, help="torch timings: best of N")
    parser.add_argument("--tasks", nargs="+", default=list_tasks("torch")["torch"])
    parser.add_argument(
        "--gym-budget", type=float, default=20.0, help="max seconds per gymnasium size"
    )
    parser.add_argument("--no-gym", action="store_true", help="skip the gymnasium references")
    parser.add_argument(
        "--threads", type=int, default=None, help="torch intra-op threads (default: torch's)"
    )
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    sizes = sorted(args.envs)

    if args.threads is not None:
        torch.set_num_threads(args.threads)
    threads = torch.get_num_threads()
    print(
        f"device={device} torch={torch.__version__} threads={threads} "
        f"steps={args.steps} repeats={args.repeats} (torch: best of repeats)"
    )
    print()
    header = ["task", "num_envs", "env-steps/s", "µs per batch step"]
    header += ["gymnasium env-steps/s", "ratio vs gymnasium"]
    print("| " + " | ".join(header) + " |")
    print("|---|---:|---:|---:|---:|---:|")
    result: dict[str, str] = {}
    for task in args.tasks:
        gym_ref = None if args.no_gym else GYM_REFERENCE.get(task)
        cost_per_env_step: float | None = None  # gymnasium seconds per env-step, for estimates
        for n in sizes:
            per_step = time_torch_task(task, n, args.steps, device, args.repeats)
            sps = n / per_step
            result[f"{task}_{n}_sps"] = f"{sps:.4g}"
            gym_cell, ratio_cell = "n/a", "n/a"
            if gym_ref is not None:
                gym_steps = max(3, min(args.steps, 200_000 // n))  # fewer steps for huge batches
                estimate = (
                    None if cost_per_env_step is None else cost_per_env_step * n * (gym_steps + 3)
                )
                if estimate is not None and estimate > args.gym_budget:
                    gym_cell = f"skipped (~{estimate:.0f} s)"
                    ratio_cell = "—"
                else:
                    gym_per_step, build = time_gym(*gym_ref, n, gym_steps)
                    cost_per_env_step = (gym_per_step + build / (gym_steps + 3)) / n
                    gym_sps = n / gym_per_step
                    gym_cell = f"{gym_sps:,.0f} ({gym_ref[1]})"
                    ratio_cell = f"{sps / gym_sps:.1f}x"
                    result[f"{task}_vs_gymnasium_{n}"] = f"{sps / gym_sps:.3g}"
            row = [task, str(n), f"{sps:,.0f}", f"{per_step * 1e6:,.1f}", gym_cell, ratio_cell]
            print("| " + " | ".join(row) + " |", flush=True)
    # The headline keys for pendulum, as BENCHMARKS.md quotes them.
    for n in sizes:
        if f"pendulum_vs_gymnasium_{n}" in result:
            result[f"vs_gymnasium_{n}"] = result[f"pendulum_vs_gymnasium_{n}"]
    print()
    print("RESULT " + " ".join(f"{k}={v}" for k, v in result.items()))


if __name__ == "__main__":
    main()
