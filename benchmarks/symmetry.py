"""Does ``algo.symmetry`` make ctrl_quad's gait symmetric without costing return? (issue 26)

Trains PPO on ``quadruped_velocity_flat`` with each ``--modes`` entry (default ``none`` and
``augment``) for the same iterations (equal env steps) and ``--seeds`` seeds, then measures on the
deterministic policy, every env commanded 0.5 m/s straight ahead for 20 s (pushes off):

* ``gait_asymmetry`` (rad): for each left/right joint pair ``(a, b, s)`` of the robot's mirror map,
  ``|mean_t q_a - s mean_t q_b| + |std_t q_a - std_t q_b|``, averaged over pairs and envs. A gait
  whose left legs do what the right legs do (half a stride later) scores 0; the metric is blind to
  the phase, so it needs no stride detection;
* ``policy_mirror_error``: ``mean((pi(mirror s) - mirror pi(s))^2)`` over the visited states, the
  mirror loss of ``src/ctrl_rl/algos/symmetry.py`` measured on the policy's own states;
* ``lateral_drift`` (m/s): mean |v_y| at a straight command;
* the evaluation return (``ctrl-rl eval``'s, 64 episodes).

Usage::

    python benchmarks/symmetry.py                                   # 2 modes x 3 seeds x 300 iterations
    python benchmarks/symmetry.py --iterations 2 --seeds 0 --episodes 4    # smoke run
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch

from ctrl_rl.app.evaluate import evaluate
from ctrl_rl.app.session import checked_env, load_policy, policy_fn
from ctrl_rl.app.train import train

TASK = "quadruped_velocity_flat"
EVAL = ["+task.kwargs.fixed_command=[0.5,0.0,0.0]", "+task.kwargs.push_velocity=0.0"]


@torch.no_grad()
def gait_measures(run: str, envs: int, steps: int, seed: int = 7) -> dict[str, float]:
    """Gait asymmetry, the policy's mirror error and lateral drift of ``run``'s deterministic policy."""
    cfg, _, alg, state = load_policy(run, [f"env.num_envs={envs}", *EVAL])
    env = checked_env(cfg, state, envs, seed)
    mirror = env.mirror()
    pi = policy_fn(alg)
    groups = alg.model.actor_obs
    obs_map, act_map = mirror.input(groups), mirror.actions
    policy = alg.inference_policy().eval()
    obs = env.reset(seed=seed)
    q, vy, err = [], [], []
    for _ in range(steps):
        x = torch.cat([obs[g] for g in groups], -1)
        err.append(((policy(obs_map(x)) - act_map(policy(x))) ** 2).mean().item())
        obs, _, _, _, info = env.step(pi(obs))
        s = env.task.post_step_signals
        q.append(s["joint_pos"].clone())
        vy.append(s["base_lin_vel"][:, 1].abs().mean().item())
    traj = torch.stack(q)  # [T, envs, joints]
    mean, std = traj.mean(0), traj.std(0)
    pairs = [(env.task.robot.joint_names.index(a), env.task.robot.joint_names.index(b), float(s))
             for a, b, s in env.task.robot.mirror]
    asym = [((mean[:, a] - s * mean[:, b]).abs() + (std[:, a] - std[:, b]).abs()).mean().item() for a, b, s in pairs]
    env.close()
    return {"gait_asymmetry": float(np.mean(asym)), "policy_mirror_error": float(np.mean(err)),
            "lateral_drift": float(np.mean(vy))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--modes", default="none,augment", help="algo.symmetry values, comma-separated")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--iterations", type=int, default=300)
    parser.add_argument("--episodes", type=int, default=64)
    parser.add_argument("--gait-envs", type=int, default=16)
    parser.add_argument("--gait-steps", type=int, default=500, help="control steps of the gait measurement (50 Hz)")
    parser.add_argument("--train-override", action="append", default=[], help="extra training override (repeat)")
    args = parser.parse_args()
    modes, seeds = args.modes.split(","), [int(s) for s in args.seeds.split(",")]
    rows: dict[str, list[dict[str, float]]] = {m: [] for m in modes}
    for seed in seeds:
        for mode in modes:
            start = time.perf_counter()
            run = train([f"task={TASK}", f"seed={seed}", f"algo.symmetry={mode}",
                         f"runner.max_iterations={args.iterations}", f"runner.run_name=symmetry_{mode}_s{seed}",
                         *args.train_override])
            minutes = (time.perf_counter() - start) / 60
            result = evaluate(str(run), EVAL, episodes=args.episodes, seed=2024)
            row = {"train_minutes": minutes, "return": result["mean_return"],
                   "forward_velocity": result["forward_velocity"], "falls": result["terminated"],
                   **gait_measures(str(run), args.gait_envs, args.gait_steps)}
            rows[mode].append(row)
            print(f"{mode} seed {seed}: " + " ".join(f"{k}={v:.4g}" for k, v in row.items()), flush=True)
    keys = ["return", "gait_asymmetry", "policy_mirror_error", "lateral_drift", "forward_velocity", "falls",
            "train_minutes"]
    print()
    print("| algo.symmetry | " + " | ".join(keys) + " |")
    print("|---|" + "---|" * len(keys))
    for mode in modes:
        cells = []
        for k in keys:
            values = [r[k] for r in rows[mode]]
            spread = f" ± {statistics.stdev(values):.3g}" if len(values) > 1 else ""
            cells.append(f"{statistics.mean(values):.4g}{spread}")
        print(f"| {mode} | " + " | ".join(cells) + " |")
    mean = {m: {k: statistics.mean(r[k] for r in rows[m]) for k in keys} for m in modes}
    base = modes[0]
    print("RESULT " + " ".join(f"{m}_{k}={mean[m][k]:.5g}" for m in modes for k in ("return", "gait_asymmetry"))
          + " " + " ".join(f"asymmetry_ratio_{m}={mean[m]['gait_asymmetry'] / mean[base]['gait_asymmetry']:.4f}"
                           for m in modes[1:]) + f" seeds={len(seeds)} iterations={args.iterations}")


if __name__ == "__main__":
    main()
