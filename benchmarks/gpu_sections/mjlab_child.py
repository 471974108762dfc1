"""The mjlab half of ``gpu_suite.py --sections mjlab``, run in mjlab's own environment (mjlab 1.6 pins
MuJoCo and MuJoCo Warp 3.11: ``.venv-mjlab/bin/python`` here, or ``python3`` with
``PYTHONPATH=/tmp/site-mjlab:/tmp/site`` from ``scripts/mjlab_kit.sh`` on a GPU machine).

On mjlab's ``Mjlab-Velocity-Flat-Unitree-Go1``: mjlab's own ``ManagerBasedRlEnv.step`` at each world
count; the same through our ``sim=mjlab`` adapter; our PPO on it (the GPU preset's sizes); and the
walk: that PPO trained for ``walk_seconds`` at the pace PPO measured, then evaluated as ours is (0.5 m/s forward, pushes
off, one 20 s episode per robot): forward velocity in the base frame and falls. Prints its table
rows and, last, one ``MJLAB_JSON {...}`` line for the parent.

Usage (the parent builds it): ``python mjlab_child.py '<json of the parent's args>'``
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from gpu_sections.common import TINY, TINY_EVAL, iterations_for, ppo_row, sync, train_for  # noqa: E402

GO1 = "Mjlab-Velocity-Flat-Unitree-Go1"
PPO = ["sim=mjlab", f"task={GO1}", "env.num_envs=4096", "algo.actor_hidden=[256,128,64]",
       "algo.critic_hidden=[256,128,64]", "algo.critic_obs=[critic]", "algo.cudagraphs=true", "runner.progress=false"]
"""Our PPO on mjlab's Go1 with the sizes of ``tune=ppo_quadruped_velocity_flat_gpu``."""
EVAL = ["+task.kwargs.commands={twist: {ranges: {lin_vel_x: [0.5, 0.5], lin_vel_y: [0.0, 0.0], ang_vel_z: [0.0, 0.0], "
        "heading: null}, heading_command: false, rel_standing_envs: 0.0, rel_heading_envs: 0.0}}",
        "+task.kwargs.events={push_robot: null}"]
"""mjlab's command and events set to our walk evaluation: 0.5 m/s straight ahead, no pushes."""


def step_rate(env, n: int, device: torch.device, seconds: float, adapter: bool) -> float:
    """Env-steps/s of ``env.step`` with small random joint offsets (after 5 untimed steps)."""
    dim = env.action_dim if adapter else env.action_manager.total_action_dim
    actions = [0.3 * (torch.rand(n, dim, device=device) * 2 - 1) for _ in range(16)]
    for k in range(5):
        env.step(actions[k])
    sync(device)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        env.step(actions[steps % 16])
        steps += 1
    sync(device)
    return steps * n / (time.perf_counter() - start)


def raw_env(n: int, device: torch.device):
    """mjlab's own env, as ``sims/mjlab.py`` builds it, without our adapter."""
    import mjlab.tasks  # noqa: F401 - registers the task ids
    from mjlab.envs import ManagerBasedRlEnv
    from mjlab.tasks.registry import load_env_cfg

    from ctrl_rl.sims.isaaclab import device_str

    cfg = load_env_cfg(GO1)
    cfg.scene.num_envs, cfg.seed = n, 0
    env = ManagerBasedRlEnv(cfg, device=device_str(device))
    env.reset(seed=0)
    return env


@torch.no_grad()
def walk_eval(run: Path, episodes: int, tiny: bool) -> dict[str, float]:
    """One 20 s episode (1 s with ``tiny``) per robot at 0.5 m/s: mean forward velocity (base frame)
    while upright, and falls."""
    from ctrl_rl.app.session import checked_env, load_policy, policy_fn

    cfg, _, alg, state = load_policy(str(run), [*EVAL, *(TINY_EVAL if tiny else [])])
    env = checked_env(cfg, state, episodes, 2024)
    policy, robot = policy_fn(alg), env.env.scene["robot"]
    obs = env.reset(seed=2024)
    active = torch.ones(episodes, dtype=torch.bool, device=env.device)
    falls = torch.zeros_like(active)
    speed = torch.zeros(episodes, device=env.device)
    steps = torch.zeros(episodes, device=env.device)
    for _ in range(env.max_episode_length):
        obs, _, terminated, truncated, _ = env.step(policy(obs))
        speed += torch.where(active, robot.data.root_link_lin_vel_b[:, 0], 0.0)
        steps += active.float()
        falls |= terminated & active
        active &= ~(terminated | truncated)
        if not bool(active.any()):
            break
    env.close()
    return {"forward_velocity": float((speed / steps.clamp(min=1)).mean()), "falls": int(falls.sum())}


def main() -> None:
    args = argparse.Namespace(**json.loads(sys.argv[1]))
    device = args.device = torch.device(args.device)
    out: dict[str, float] = {}
    for n in args.worlds:
        start = time.perf_counter()
        env = raw_env(n, device)
        build = time.perf_counter() - start
        out[f"raw_sps_{n}"] = step_rate(env, n, device, args.seconds, adapter=False)
        env.close()
        print(f"| mjlab ManagerBasedRlEnv.step (mjlab {_version()}) | {n} | {build:.1f} | "
              f"- | {out[f'raw_sps_{n}']:,.0f} | - |", flush=True)
    from ctrl_rl.sims import make_env

    n = args.worlds[0]
    env = make_env("mjlab", GO1, n, device=device, seed=0)
    out[f"adapter_sps_{n}"] = step_rate(env, n, device, args.seconds, adapter=True)
    env.close()
    print(f"| mjlab through our sim=mjlab adapter | {n} | - | - | {out[f'adapter_sps_{n}']:,.0f} | - |", flush=True)
    overrides = [*PPO, f"device={device}", *(TINY if args.tiny else [])]
    r = ppo_row(args, overrides)
    out.update({"ppo_sps": r["sps"], "ppo_collect_s": r["collect_s"], "ppo_update_s": r["update_s"],
                "ppo_num_envs": r["num_envs"]})
    iters = iterations_for(args, overrides, args.walk_seconds, r["seconds_per_iteration"])
    run, minutes = train_for(args, overrides, iters, args.seeds[0])
    out.update({"walk_iterations": iters, "walk_train_minutes": minutes, **{
        f"walk_{k}": v for k, v in walk_eval(run, args.episodes, args.tiny).items()}})
    print("MJLAB_JSON " + json.dumps(out), flush=True)


def _version() -> str:
    import importlib.metadata as md

    return md.version("mjlab")


if __name__ == "__main__":
    main()
