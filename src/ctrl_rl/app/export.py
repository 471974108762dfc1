"""``ctrl-rl export``: the deployable bundle, ``exported/policy.onnx`` with its metadata."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

import ctrl_rl
from ctrl_rl.app.configure import config_hash
from ctrl_rl.app.session import checked_env, load_policy, policy_fn
from ctrl_rl.config import TrainConfig
from ctrl_rl.deploy.arm_kinematics import chain_from_model
from ctrl_rl.deploy.arm_node import is_arm_bundle
from ctrl_rl.deploy.commands import bundle_robot
from ctrl_rl.export.onnx_policy import export_onnx
from ctrl_rl.nets.actor_critic import concat_groups
from ctrl_rl.nets.chunk import ChunkExecutor
from ctrl_rl.nets.memory import StatefulPolicy
from ctrl_rl.robots.packages import SCHEME
from ctrl_rl.runners.episodes import episodes_ended


def _check_exportable(policy: torch.nn.Module, cfg: TrainConfig) -> None:
    """Refuse (with the fix) a policy an ONNX graph cannot hold: a stateful chunk player."""
    for m in policy.modules():
        if isinstance(m, ChunkExecutor) and not m.stateless:
            raise ValueError(f"the base plays {m.execute} actions of each {m.chunk_size}-action chunk, which "
                             "needs state the graph does not keep; export the replan-every-step policy with "
                             "algo.base_execute=1")


def arm_bundle_metadata(meta: dict[str, Any], bundle: Path) -> dict[str, Any]:
    """An arm bundle's metadata beyond its task's: the kinematic chain from the arm's base to its end-effector
    site, read off the training model (the deploy node's forward kinematics, ``deploy/arm_kinematics.py``),
    and ``arm_config`` with its MJCF kept as a ``pkg:`` reference or made relative to ``bundle``'s folder (a
    run that moves together with its MJCF still runs in sim2sim)."""
    from ctrl_rl.robots.arm import build_arm_model, load_arm  # optional: mujoco (arm bundles only)

    config = dict(meta["arm_config"])
    with tempfile.TemporaryDirectory(prefix="ctrl_rl_export_") as tmp:
        arm = load_arm(bundle_robot({"arm_config": config}, Path(tmp)))
    model, _ = build_arm_model(arm)
    if not config["mjcf"].startswith(SCHEME):
        config["mjcf"] = os.path.relpath(arm.mjcf_path(), Path(bundle).resolve().parent)
    return {"arm_config": config,
            "kinematic_chain": chain_from_model(model, arm.base_body, arm.ee_site, list(arm.joint_names))}


def export(spec: str, overrides: list[str], output: str | None = None) -> Path:
    """Write ``<run>/exported/policy.onnx`` after the ONNX/torch parity check passes."""
    cfg, path, alg, state = load_policy(spec, overrides)
    out = Path(output) if output else path.parent / "exported" / "policy.onnx"
    env = checked_env(cfg, state, 16, cfg.seed + 1)
    recorded, starts = [], []
    obs = env.reset(seed=cfg.seed + 1)
    policy = policy_fn(alg)
    recurrent = isinstance(policy, StatefulPolicy)
    start = torch.ones(env.num_envs, dtype=torch.bool, device=env.device)
    with torch.no_grad():
        # observations the policy really meets, for the parity check; a recurrent policy's as sequences
        # longer than an episode where the task's episodes are short enough to end inside them
        for _ in range(max(256, min(env.max_episode_length + 56, 1024)) if recurrent else 64):
            recorded.append(concat_groups(obs, alg.model.actor_obs).cpu().numpy())
            starts.append(start.cpu().numpy())
            obs, _, terminated, truncated, _ = env.step(policy(obs))
            start = terminated | truncated
            episodes_ended(policy, start)
    obs_dims = {g: env.obs_dims[g] for g in alg.model.actor_obs}
    metadata = {
        "ctrl_rl_version": ctrl_rl.__version__, "task": cfg.task.name, "sim": cfg.sim.name,
        "algo": cfg.algo.name, "config_hash": config_hash(cfg), "checkpoint": path.name,
        "obs_groups": list(alg.model.actor_obs), "obs_dims": obs_dims,
        "action_dim": env.action_dim, "action_bounds": list(env.action_bounds) if env.action_bounds else None,
        "step_dt": env.step_dt,
        **env.deploy_metadata(),  # robot tasks: obs terms, joint order, default pose, gains, action clip
    }
    if is_arm_bundle(metadata):  # the node's forward kinematics; the arm's MJCF as a movable reference
        metadata.update(arm_bundle_metadata(metadata, out))
    bounds = env.action_bounds
    if bounds is None and metadata.get("action_clip") is not None:  # the task's own clip, in the graph
        bounds = (-float(metadata["action_clip"]), float(metadata["action_clip"]))
    policy = alg.inference_policy().cpu()
    _check_exportable(policy, cfg)
    info = export_onnx(policy, sum(obs_dims.values()), bounds, out, metadata,
                       recorded_obs=None if recurrent else np.concatenate(recorded),
                       recorded_sequences=(np.stack(recorded), np.stack(starts)) if recurrent else None)
    print(f"exported {out} (parity max abs diff {info['max_abs_diff']:.2e} over {info['num_probes']} observations)")
    print(f"RESULT path={out} max_abs_diff={info['max_abs_diff']:.3e}")
    return out
