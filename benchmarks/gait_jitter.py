"""Where does a walking policy's jitter come from? The gait report's ``action smoothness`` (RMS second difference of
the applied actions) of one checkpoint in its own training env, with training's observation noise and action delay
each on or off, split into the gait's band and the chatter above it, beside the policy's sensitivity to each
observation term.

The gait report judges sim2sim, where the node applies each action at once and reads clean state; training draws
each env's action delay from ``0..max_action_delay`` ticks and adds observation noise. A policy that is smooth on
what training showed it can chatter on what the robot shows it: this table says which condition moves the figure.

Usage::

    python benchmarks/gait_jitter.py --checkpoint logs/ppo/quadruped_velocity_flat/<run>
    python benchmarks/gait_jitter.py --checkpoint <run> --envs 4 --seconds 4     # smoke run
"""

from __future__ import annotations

import argparse

import numpy as np
import torch
from gait import EVAL

from ctrl_rl.app.evaluate import gait_traces
from ctrl_rl.app.session import checked_env, load_policy, policy_fn
from ctrl_rl.deploy.gait_report import SETTLE_S, action_smoothness
from ctrl_rl.nets.groups import concat_groups
from ctrl_rl.runners.episodes import run_episodes

CONDITIONS = {
    "training (noise, delay 0-1)": [],
    "no observation noise": ["task.kwargs.obs_noise=0.0"],
    "no action delay": ["task.kwargs.max_action_delay=0"],
    "neither (as sim2sim)": ["task.kwargs.obs_noise=0.0", "task.kwargs.max_action_delay=0"],
}
GAIT_BAND_HZ = 8.0
"""Below it: the gait (a 2-4 Hz trot and its first harmonics); above it: tick-to-tick chatter."""


def band_split(actions: np.ndarray, dt: float, cutoff_hz: float = GAIT_BAND_HZ) -> tuple[float, float]:
    """``(smoothness of the part below cutoff_hz, share of the second difference's power above it)`` of ``[T, A]``
    actions: the second difference's power spectrum is the actions' times ``(2 - 2 cos w)^2``."""
    a = actions - actions.mean(0)
    spectrum = np.fft.rfft(a, axis=0)
    f = np.fft.rfftfreq(len(a), dt)
    gain = (2 - 2 * np.cos(2 * np.pi * f * dt)) ** 2
    power = (np.abs(spectrum) ** 2).sum(-1) * gain
    share_above = float(power[f > cutoff_hz].sum() / max(power.sum(), 1e-12))
    low = np.fft.irfft(np.where((f <= cutoff_hz)[:, None], spectrum, 0), len(a), axis=0)
    return action_smoothness(low), share_above


def jitter(run: str, overrides: list[str], envs: int, seed: int) -> dict[str, float]:
    """The condition's smoothness over every env's walking (after the first second), its gait-band part and the
    share above the band, averaged over the envs."""
    cfg, _, alg, state = load_policy(run, [*EVAL, *overrides])
    env = checked_env(cfg, state, envs, seed)
    spec = env.record_gait()
    steps: list[dict[str, torch.Tensor]] = []
    _, lengths = run_episodes(env, policy_fn(alg), seed, gait=steps)
    skip = int(round(SETTLE_S / spec["dt"]))
    rows = []
    for trace in gait_traces(steps, lengths):
        a = trace.actions[skip:]
        if len(a) > 8:
            rows.append((action_smoothness(a), *band_split(a, spec["dt"])))
    return dict(zip(("smoothness", "gait_band", "share_above"), np.mean(rows, 0), strict=True))


def sensitivity(run: str, envs: int, seed: int, steps: int = 200) -> dict[str, float]:
    """Mean squared Frobenius norm of the deterministic policy's Jacobian per observation term (action units per
    unit of the raw term), at the states it visits with clean observations and no delay."""
    cfg, _, alg, state = load_policy(run, [*EVAL, *CONDITIONS["neither (as sim2sim)"]])
    env = checked_env(cfg, state, envs, seed)
    policy, groups = alg.inference_policy().eval(), alg.model.actor_obs
    names, sizes = zip(*[t for g in groups for t in env.obs_terms()[g]], strict=True)
    edges = np.cumsum((0, *sizes))
    obs = env.reset()
    norms = np.zeros(len(names))
    probes = 0
    for t in range(steps):
        x = concat_groups(obs, groups)
        if t >= steps // 2 and t % 10 == 0:
            jac = torch.autograd.functional.jacobian(lambda z: policy(z[None])[0], x[0].detach()).numpy()
            norms += [np.square(jac[:, lo:hi]).sum() for lo, hi in zip(edges[:-1], edges[1:], strict=True)]
            probes += 1
        with torch.no_grad():
            obs = env.step(policy(x))[0]
    return dict(zip(names, norms / max(probes, 1), strict=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", required=True, help="a run directory or model file")
    parser.add_argument("--envs", type=int, default=16, help="episodes per condition (20 s each)")
    parser.add_argument("--seconds", type=float, default=None, help="episode length (default: the task's)")
    parser.add_argument("--seed", type=int, default=2024)
    args = parser.parse_args()
    length = [f"task.kwargs.episode_length_s={args.seconds}"] if args.seconds else []

    rows = {name: jitter(args.checkpoint, [*length, *ov], args.envs, args.seed) for name, ov in CONDITIONS.items()}
    print(f"\naction smoothness of {args.checkpoint} at 0.5 m/s ({args.envs} envs, after the first {SETTLE_S:g} s; "
          f"gait band: below {GAIT_BAND_HZ:g} Hz)\n")
    print("| condition | smoothness (bar 0.20) | its gait-band part | second difference above the band |")
    print("|---|---:|---:|---:|")
    for name, r in rows.items():
        print(f"| {name} | {r['smoothness']:.3f} | {r['gait_band']:.3f} | {r['share_above']:.0%} |")
    sens = sensitivity(args.checkpoint, min(args.envs, 4), args.seed)
    print("\n| observation term | ‖∂a/∂obs‖² (raw units) |\n|---|---:|")
    for name, v in sens.items():
        print(f"| {name} | {v:.2f} |")
    key = {"training": "training (noise, delay 0-1)", "no_noise": "no observation noise",
           "no_delay": "no action delay", "neither": "neither (as sim2sim)"}
    print("RESULT " + " ".join(f"{k}={rows[v]['smoothness']:.4f}" for k, v in key.items())
          + f" neither_share_above={rows[key['neither']]['share_above']:.3f}")


if __name__ == "__main__":
    main()
