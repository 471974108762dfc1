"""Lift with i2rt's YAM: ours (``task=lift``) beside mjlab's own ``Mjlab-Lift-Cube-Yam`` through the ``mjlab``
adapter, the same learner at the same wall clock on the same machine, each scored by its own task's success.

Both are PPO from scratch with our lift preset's settings (``tune/ppo_lift.yaml``: 256 envs, [256, 256]
networks, staggered episodes, ``model_best.pt`` kept by the training success rate), run one after the other
(never side by side) for ``--minutes`` each and stopped by SIGTERM (the runner writes its checkpoint), then
scored by ``ctrl-rl eval`` over ``--episodes`` deterministic episodes. mjlab pins MuJoCo 3.11, so its run goes
through ``.venv-mjlab`` (``bash scripts/setup_mjlab_env.sh``), on MuJoCo Warp's CPU backend.

The two success rules differ, each the task's own:

- ours: the cube's centre within 2 cm of the target height for the episode's last 0.2 s (5 s episodes);
- mjlab's: its lift command's ``episode_success``, the cube within 5 cm of a 3-D target at some step since the
  target was drawn (20 s episodes, a new target every 8-12 s), which the adapter reports as ``success_rate``.

Usage::

    python benchmarks/lift_mjlab.py --minutes 8
    python benchmarks/lift_mjlab.py --minutes 0.3 --episodes 4 --envs 16   # smoke
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHONS = {"ours": ROOT / ".venv" / "bin", "mjlab": ROOT / ".venv-mjlab" / "bin"}
TASKS = {"ours": ["task=lift"], "mjlab": ["sim=mjlab", "device=cpu", "task=Mjlab-Lift-Cube-Yam"]}
PRESET = ["algo=ppo", "algo.actor_hidden=[256,256]", "algo.critic_hidden=[256,256]", "runner.stagger_episodes=true",
          "runner.keep_best=Metrics/success_rate", "runner.max_iterations=100000", "runner.progress=false"]
"""tune/ppo_lift.yaml's settings, spelled out so that mjlab's task gets them too (it has no preset of ours)."""
RULES = {"ours": "cube within 2 cm of the target height, last 0.2 s",
         "mjlab": "cube within 5 cm of the target, latched"}


def train_for(side: str, minutes: float, envs: int, seed: int, root: Path) -> tuple[Path, float, int]:
    """Train ``side`` until SIGTERM after ``minutes``; its run directory, wall clock (min) and iterations."""
    log_root = root / side
    cmd = [str(PYTHONS[side] / "ctrl-rl"), "train", *TASKS[side], *PRESET, f"env.num_envs={envs}", f"seed={seed}",
           f"runner.log_root={log_root}"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        proc.wait(timeout=minutes * 60)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)
    out = proc.communicate(timeout=600)[0]
    wall = (time.perf_counter() - start) / 60
    runs = sorted(p.parent for p in log_root.glob("*/*/*/params"))
    if proc.returncode not in (0, 143) or len(runs) != 1:
        raise SystemExit(f"{side}: `{' '.join(cmd)}` exited {proc.returncode}:\n{out[-3000:]}")
    run = runs[0]
    iterations = max(int(m.stem.split("_")[1]) for m in run.glob("model_[0-9]*.pt"))
    return run, wall, iterations


def score(side: str, run: Path, episodes: int) -> dict[str, str]:
    """``ctrl-rl eval`` of the run's kept model: its RESULT line's fields."""
    best = run / "model_best.pt"
    model = best if best.is_file() else max(run.glob("model_[0-9]*.pt"), key=lambda m: int(m.stem.split("_")[1]))
    proc = subprocess.run([str(PYTHONS[side] / "ctrl-rl"), "eval", str(model), "--episodes", str(episodes),
                           "--seed", "2024"], capture_output=True, text=True, timeout=1800)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"{side}: eval of {model} exited {proc.returncode}:\n{proc.stdout[-2000:]}"
                         f"{proc.stderr[-2000:]}")
    fields = dict(re.findall(r"(\S+)=(\S+)", lines[-1]))
    fields["model"] = model.name
    return fields


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=8.0, help="wall clock of each training")
    ap.add_argument("--envs", type=int, default=256)
    ap.add_argument("--episodes", type=int, default=64)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--root", default=None, help="where the runs go (default: a temp dir)")
    args = ap.parse_args()
    if not (PYTHONS["mjlab"] / "ctrl-rl").exists():
        raise SystemExit(".venv-mjlab is missing: run `bash scripts/setup_mjlab_env.sh`")
    root = Path(args.root or tempfile.mkdtemp(prefix="lift_mjlab_"))
    rows = {}
    for side in ("ours", "mjlab"):
        run, wall, iterations = train_for(side, args.minutes, args.envs, args.seed, root)
        rows[side] = (run, wall, iterations, score(side, run, args.episodes))
    print(f"\nlift, PPO from scratch, {args.envs} envs, {args.minutes:g} min each, seed {args.seed}; "
          f"{args.episodes} eval episodes")
    print("| task | success rule | iterations | wall (min) | scored model | success rate | run |")
    print("|---|---|---:|---:|---|---:|---|")
    for side, (run, wall, iterations, fields) in rows.items():
        name = "ours, task=lift" if side == "ours" else "mjlab, Mjlab-Lift-Cube-Yam"
        print(f"| {name} | {RULES[side]} | {iterations} | {wall:.1f} | {fields['model']} | "
              f"{float(fields.get('success_rate', 'nan')):.3f} | {run} |")
    ours, mjlab = (rows[s][3].get("success_rate", "nan") for s in ("ours", "mjlab"))
    print(f"RESULT minutes={args.minutes:g} envs={args.envs} seed={args.seed} ours_success={float(ours):.4f} "
          f"mjlab_success={float(mjlab):.4f} ours_iterations={rows['ours'][2]} mjlab_iterations={rows['mjlab'][2]}")


if __name__ == "__main__":
    main()
