"""How smooth is a policy an owner already trusts? A vendor's pre-trained quadruped policy, run by the vendor's own
MuJoCo sim2sim protocol, judged by this project's gait-report functions: the anchor for the report's bars.

unitree_rl_gym (Unitree's legged_gym fork) ships pre-trained policies with a MuJoCo deploy script
(``deploy/deploy_mujoco``): PD at the physics rate (2 ms), the policy at 50 Hz, ``target = default + 0.25 a``, and a
48-dimensional observation (base linear and angular velocity, projected gravity, the command, joint positions
and velocities, the last action, each with the config's scale). This script runs that protocol headless (no
viewer, no wall-clock pacing) for ``--seconds`` at a fixed command, reads the config, the TorchScript policy and
the MJCF from a checkout of that repository (visual meshes left out: they do not collide), and prints the
action smoothness (RMS second difference, the gait report's line, bar 0.20), the forward speed, the height and
the lateral drift, and the policy's sensitivity to each observation group (as ``gait_jitter.py`` prints ours).

Nothing is downloaded: point ``--repo`` at your own clone. The Go2 policy lives on a pull-request branch of
unitree_rl_gym (``deploy/pre_train/go2/motion.pt``, ``deploy/deploy_mujoco/configs/go2.yaml``,
``resources/robots/go2/go2.xml``); the main branch's humanoid policies use another observation (a gait phase).

Usage::

    python benchmarks/gait_reference.py --repo ~/unitree_rl_gym --config go2.yaml
"""

from __future__ import annotations

import argparse
import xml.etree.ElementTree as ET  # the scene file's <include>
from pathlib import Path

import mujoco
import numpy as np
import torch
import yaml

from ctrl_rl.deploy.gait_report import SETTLE_S, action_smoothness
from ctrl_rl.robots.mjcf_edits import strip_visual_meshes
from ctrl_rl.robots.terms import projected_gravity

GROUPS = {"base_lin_vel": slice(0, 3), "base_ang_vel": slice(3, 6), "projected_gravity": slice(6, 9),
          "velocity_commands": slice(9, 12), "joint_pos_rel": slice(12, 24), "joint_vel": slice(24, 36),
          "last_action": slice(36, 48)}
"""The 48-dimensional observation of unitree_rl_gym's quadruped deploy script, by this project's term names."""


def collision_model(mjcf: Path) -> mujoco.MjModel:
    """The MJCF without its visual meshes (:func:`strip_visual_meshes`: their files need not exist), on a floor
    plane (a robot file's ``scene.xml`` adds one)."""
    spec = mujoco.MjSpec.from_file(str(mjcf))
    strip_visual_meshes(spec)
    spec.worldbody.add_geom(name="floor", type=mujoco.mjtGeom.mjGEOM_PLANE, size=[0, 0, 0.05])
    return spec.compile()


def walk(cfg: dict, model: mujoco.MjModel, policy: torch.jit.ScriptModule, command: np.ndarray,
         seconds: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Roll the deploy protocol from the model's initial state; ``(actions [T, 12], base positions [T, 3],
    observations [T, 48])`` at the policy rate."""
    data = mujoco.MjData(model)
    model.opt.timestep = cfg["simulation_dt"]
    kp, kd = np.asarray(cfg["kps"], float), np.asarray(cfg["kds"], float)
    default = np.asarray(cfg["default_angles"], float)
    scales = np.r_[np.full(3, cfg["lin_vel_scale"]), np.full(3, cfg["ang_vel_scale"]), np.ones(3),
                   np.asarray(cfg["cmd_scale"], float), np.full(12, cfg["dof_pos_scale"]),
                   np.full(12, cfg["dof_vel_scale"]), np.ones(12)]
    action, target = np.zeros(12), default.copy()
    actions, base, observations = [], [], []
    for k in range(int(round(seconds / model.opt.timestep))):
        data.ctrl[:] = kp * (target - data.qpos[7:]) - kd * data.qvel[6:]
        mujoco.mj_step(model, data)
        if (k + 1) % cfg["control_decimation"]:
            continue
        raw = np.r_[data.qvel[:3], data.qvel[3:6], projected_gravity({"imu_quat": data.qpos[3:7]}), command,
                    data.qpos[7:] - default, data.qvel[6:], action]
        obs = (raw * scales).astype(np.float32)
        with torch.no_grad():
            action = policy(torch.from_numpy(obs)[None]).numpy()[0].astype(np.float64)
        target = default + cfg["action_scale"] * action
        actions.append(action)
        base.append(data.qpos[:3].copy())
        observations.append(obs)
    return np.array(actions), np.array(base), np.array(observations)


def sensitivity(policy: torch.jit.ScriptModule, observations: np.ndarray) -> dict[str, float]:
    """Mean squared Frobenius norm of the policy's Jacobian per group, per unit of the scaled observation."""
    x = torch.from_numpy(observations)
    jac = torch.autograd.functional.jacobian(lambda z: policy(z).sum(0), x).permute(1, 0, 2).numpy()
    return {name: float((jac[:, :, s] ** 2).sum((1, 2)).mean()) for name, s in GROUPS.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", type=Path, required=True, help="a checkout of unitree_rl_gym")
    parser.add_argument("--config", default="go2.yaml", help="deploy/deploy_mujoco/configs/<this>")
    parser.add_argument("--mjcf", default=None, help="the robot MJCF (default: the config's scene's robot file)")
    parser.add_argument("--command", type=float, nargs=3, default=None, help="vx vy yaw rate (default: the config's)")
    parser.add_argument("--seconds", type=float, default=22.0, help="the walk; the first SETTLE_S + 1 s are skipped")
    args = parser.parse_args()

    cfg = yaml.safe_load((args.repo / "deploy/deploy_mujoco/configs" / args.config).read_text())
    root = str(args.repo)
    if cfg.get("num_obs") != 48:
        parser.error(f"{args.config}: num_obs {cfg.get('num_obs')}; this script runs the 48-dim quadruped protocol")
    scene = Path(cfg["xml_path"].replace("{LEGGED_GYM_ROOT_DIR}", root))
    mjcf = Path(args.mjcf) if args.mjcf else scene.parent / ET.parse(scene).getroot().find("include").get("file")
    policy = torch.jit.load(cfg["policy_path"].replace("{LEGGED_GYM_ROOT_DIR}", root)).eval()
    command = np.asarray(args.command if args.command else cfg["cmd_init"], float)
    actions, base, observations = walk(cfg, collision_model(mjcf), policy, command, args.seconds)

    skip = int(round((SETTLE_S + 1.0) * 50))  # the stand from the model's initial pose, then one second
    a, pos = actions[skip:], base[skip:]
    forward, lateral = pos[-1, 0] - pos[0, 0], pos[-1, 1] - pos[0, 1]
    vx = forward / (len(a) / 50)
    smooth = action_smoothness(a)
    d2 = np.diff(a, n=2, axis=0)
    power = (np.abs(np.fft.rfft(d2, axis=0)) ** 2).sum(-1)
    above = float(power[np.fft.rfftfreq(len(d2), 0.02) > 10].sum() / power.sum())
    print(f"\n{cfg['policy_path'].split('}/')[-1]} at {command.tolist()} for {args.seconds:g} s "
          f"(skipping the first {skip / 50:g} s), {mjcf.name} without its visual meshes\n")
    print("| action smoothness (bar 0.20) | second difference above 10 Hz | vx (m/s) | base height (m) "
          "| lateral drift per 10 m |\n|---:|---:|---:|---:|---:|")
    drift = 10 * abs(lateral) / max(forward, 1e-6)
    print(f"| {smooth:.3f} | {above:.0%} | {vx:.3f} | {pos[:, 2].mean():.3f} | {drift:.2f} m |")
    sens = sensitivity(policy, observations[skip::5])
    print("\n| observation group | ‖∂a/∂obs‖² (per unit of the scaled observation) |\n|---|---:|")
    for name, v in sens.items():
        print(f"| {name} | {v:.1f} |")
    print(f"RESULT smoothness={smooth:.4f} share_above_10hz={above:.3f} vx={vx:.4f} height={pos[:, 2].mean():.4f} "
          f"drift_per_10m={drift:.3f}")


if __name__ == "__main__":
    main()
