"""The quickstart's training on an idle machine and beside CPU burners, with and without the thread plan.

Each row runs the README quickstart's command, ``ctrl-rl train task=pendulum`` (its tune file's
iterations unless ``--iterations``), as a fresh subprocess, timed from start to exit, while
``--burners`` processes (``python -c "while True: pass"``, the issue's stand-in for other work on a
laptop) spin on the machine. ``threads=null`` is the plan of ``ctrl_rl/utils/threads.py`` (torch 1,
MuJoCo every core); ``threads=<cores>`` is what every process got before it (torch's OpenMP team
on every core), for comparison.

Usage::

    python benchmarks/busy_machine.py --threads null           # the full quickstart, plan only: ~10 min on 2 cores
    python benchmarks/busy_machine.py --iterations 20          # plan vs all cores, 20 iterations: ~4 min
    python benchmarks/busy_machine.py --iterations 2 --smoke   # checks it runs
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _train(threads: str, iterations: int | None, log_root: str) -> float:
    cmd = [sys.executable, "-m", "ctrl_rl", "train", "task=pendulum", f"threads={threads}",
           "runner.progress=false", f"runner.log_root={log_root}"]
    if iterations:
        cmd.append(f"runner.max_iterations={iterations}")
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
    return time.perf_counter() - t0


def _with_burners(n: int, fn, *args):
    """``fn(*args)`` while ``n`` busy loops spin."""
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        time.sleep(0.5)
        return fn(*args)
    finally:
        for b in burners:
            b.kill()
            b.wait()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--iterations", type=int, default=None, help="training iterations (default: the quickstart's)")
    p.add_argument("--burners", type=int, nargs="+", default=None,
                   help="burner counts to run beside it (default: 1 and one per core)")
    p.add_argument("--threads", nargs="+", default=None,
                   help="threads= settings to compare (default: null, the plan, and the core count, the old default)")
    p.add_argument("--smoke", action="store_true", help="only the plan's rows, one burner")
    args = p.parse_args()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    burners = args.burners or ([1] if args.smoke else sorted({1, cores}))
    settings = args.threads or (["null"] if args.smoke else ["null", str(cores)])
    rows = []
    with tempfile.TemporaryDirectory() as logs:
        for threads in settings:
            idle = _train(threads, args.iterations, logs)
            rows.append((threads, 0, idle, 1.0))
            for n in burners:
                busy = _with_burners(n, _train, threads, args.iterations, logs)
                rows.append((threads, n, busy, busy / idle))
    print(f"quickstart training (task=pendulum, {args.iterations or 'tune file'} iterations), {cores} cores")
    print("| threads | burners | wall s | x idle |")
    print("|---|---:|---:|---:|")
    for threads, n, wall, ratio in rows:
        print(f"| {threads} | {n} | {wall:.1f} | {ratio:.2f} |")
    fields = []
    for threads, n, wall, ratio in rows:
        key = f"threads_{threads}"
        fields.append(f"{key}_idle_s={wall:.1f}" if n == 0 else f"{key}_x_{n}burners={ratio:.2f}")
    print("RESULT " + " ".join(fields))


if __name__ == "__main__":
    main()
