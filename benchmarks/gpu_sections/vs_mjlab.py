"""``gpu_suite.py --sections mjlab``: mjlab's Go1 flat velocity task beside ours on the same Go1, on
the same card in the same run.

Ours (this process): ``quadruped_velocity_flat robot=unitree_go1`` on ``sim=mjwarp``: ``VecEnv.step``
at each ``--worlds``, PPO with the GPU preset, and the walk (trained for ``--walk-seconds``,
evaluated at 0.5 m/s). mjlab (``mjlab_child.py`` in a subprocess, since mjlab pins MuJoCo and
MuJoCo Warp 3.11): its own env's step, the same through our ``sim=mjlab`` adapter, our PPO on it
and its walk by the same bar. The child runs ``--mjlab-python`` (default ``.venv-mjlab/bin/python``
where it exists, else this Python) with ``$CTRL_RL_MJLAB_PYTHONPATH`` (set by the kit's setup,
``scripts/mjlab_kit.sh``) in front of ``PYTHONPATH``. No mjlab there: the section prints why and
records ``mjlab_available=0``; the suite goes on.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from .common import QUAD_PRESET, iterations_for, ppo_row, preset, result_line, table, walk_rows

CHILD = Path(__file__).resolve().with_name("mjlab_child.py")
ROOT = Path(__file__).resolve().parents[2]


def mjlab_python(args: argparse.Namespace) -> str:
    """``--mjlab-python``, else ``.venv-mjlab/bin/python`` where it exists, else this Python."""
    venv = ROOT / ".venv-mjlab" / "bin" / "python"
    return args.mjlab_python or (str(venv) if venv.exists() else sys.executable)


def run_child(args: argparse.Namespace) -> dict[str, Any]:
    """``mjlab_child.py`` in mjlab's environment; its figures, or ``{"error": ...}``."""
    env = dict(os.environ)
    extra = env.get("CTRL_RL_MJLAB_PYTHONPATH")
    if extra:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (extra, env.get("PYTHONPATH")) if p)
    payload = {"device": str(args.device), "worlds": args.worlds, "seconds": args.seconds, "tiny": args.tiny,
               "ppo_iterations": args.ppo_iterations, "walk_seconds": args.walk_seconds, "seeds": args.seeds,
               "episodes": args.episodes, "log_root": args.log_root}
    try:
        proc = subprocess.run([mjlab_python(args), str(CHILD), json.dumps(payload)], env=env, text=True,
                              capture_output=True, timeout=args.mjlab_timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
    lines = proc.stdout.splitlines()
    for line in lines:
        if line.startswith("| mjlab"):
            print(line, flush=True)
    found = [ln for ln in lines if ln.startswith("MJLAB_JSON ")]
    if proc.returncode != 0 or not found:
        return {"error": f"exit {proc.returncode}: {(proc.stderr or proc.stdout)[-1500:]}"}
    return json.loads(found[-1].split(" ", 1)[1])


def section_mjlab(args: argparse.Namespace) -> None:
    from .throughput import TASKS, WarpRow, timed_row

    go1 = ["task.kwargs.robot=unitree_go1"]
    table("Go1 flat velocity, env step", ["worlds", "build s", "first step s", "env-steps/s", "physics steps/s"])
    values: dict[str, Any] = {}
    for n in args.worlds:
        sps = timed_row("ours: VecEnv.step, sim=mjwarp, sim.cuda_graph, robot=unitree_go1",
                        lambda n=n: WarpRow(TASKS["quad"], n, args.device, False, args.episode,
                                            {"robot": "unitree_go1"}, {"cuda_graph": True}), args.seconds, args.episode)
        values[f"ours_sps_{n}"] = sps
    child = run_child(args)
    if "error" in child:
        print(f"mjlab: not measured: {child['error']}", flush=True)
    values["mjlab_available"] = int("error" not in child)
    ours = [*preset(args), *go1]
    r = ppo_row(args, ours)
    values.update({"ours_ppo_sps": r["sps"], "ours_ppo_collect_s": r["collect_s"], "ours_ppo_update_s": r["update_s"]})
    iters = iterations_for(args, ours, args.walk_seconds, r["seconds_per_iteration"])
    walk = walk_rows(args, f"walk, ours on the Go1 ({QUAD_PRESET})", ours, iters, args.seeds[:1])
    values.update({f"ours_walk_{k}": walk[k] for k in ("iterations", "train_minutes", "forward_velocity", "falls")})
    values.update({f"mjlab_{k}": v for k, v in child.items() if k != "error"})
    table("Go1 flat velocity, PPO and walk", ["PPO env-steps/s (incl. update)", "collection s/it", "update s/it",
                                              "walk iterations", "train min", "forward velocity m/s", "falls"])
    for who in ("ours", "mjlab"):
        v = {k.split("_", 1)[1]: x for k, x in values.items() if k.startswith(who + "_")}
        if "ppo_sps" in v:
            print(f"| {who} | {v['ppo_sps']:,.0f} | {v['ppo_collect_s']:.3f} | {v['ppo_update_s']:.3f} | "
                  f"{v['walk_iterations']} | {v['walk_train_minutes']:.2f} | {v['walk_forward_velocity']:.3f} | "
                  f"{v['walk_falls']} |", flush=True)
    result_line("mjlab", values)
