"""The deploy bundle's robot data for a legged_gym-style task (``IsaacGymVecEnv.deploy_metadata``).

A legged_gym policy commands PD position targets ``default + action_scale * action`` (``control_type
P``) and observes a fixed layout of scaled terms; both are read from the task, so the exported policy
is served by the deploy node like ctrl_quad's. Tasks whose observation differs from legged_gym's
layouts declare their own as ``ctrl_rl_obs_terms`` (a list of ``ObsTerm.to_dict()`` entries).
"""

from __future__ import annotations

import logging
from typing import Any

from ctrl_rl.robots.terms import ObsTerm

log = logging.getLogger(__name__)


def _list(x: Any) -> list:
    return x.detach().cpu().tolist() if hasattr(x, "detach") else list(x)


def observation_layout(env: Any) -> list[dict[str, Any]] | None:
    """The policy observation as ctrl_rl terms: the task's declaration, else legged_gym's
    ``LeggedRobot.compute_observations`` layout with or without ``base_lin_vel`` (unitree_rl_gym drops
    it), whichever matches ``num_obs``; None when neither does."""
    declared = getattr(env, "ctrl_rl_obs_terms", None)
    if declared is not None:
        return [ObsTerm.from_dict(t).to_dict() for t in declared]
    cfg, n = env.cfg, int(env.num_actions)
    s = cfg.normalization.obs_scales
    clip = float(cfg.normalization.clip_observations)
    proprio = [ObsTerm("base_ang_vel", 3, float(s.ang_vel), clip), ObsTerm("projected_gravity", 3, 1.0, clip),
               ObsTerm("velocity_commands", 3, (float(s.lin_vel), float(s.lin_vel), float(s.ang_vel)), clip),
               ObsTerm("joint_pos_rel", n, float(s.dof_pos), clip), ObsTerm("joint_vel", n, float(s.dof_vel), clip),
               ObsTerm("last_action", n, 1.0, clip)]
    heights = getattr(getattr(cfg, "terrain", None), "measure_heights", False)
    for layout in ([ObsTerm("base_lin_vel", 3, float(s.lin_vel), clip), *proprio], proprio):
        if heights:
            continue  # legged_gym's height terms are (height - 0.5 - h) * scale: declare them explicitly
        if sum(t.dim for t in layout) == int(env.num_obs):
            return [t.to_dict() for t in layout]
    log.warning("the task's observation (%d values) matches no legged_gym layout: the bundle has no obs_terms; "
                "declare ctrl_rl_obs_terms on the task to deploy it", env.num_obs)
    return None


def legged_gym_metadata(env: Any) -> dict[str, Any]:
    """Joint names in order, default angles, PD gains, action scale and clip, dt, decimation, limits,
    command ranges and the observation layout of a legged_gym-style task."""
    cfg = env.cfg
    control = cfg.control
    if getattr(control, "control_type", "P") != "P":
        raise ValueError(f"the task's control.control_type is {control.control_type!r}: only position control (P) "
                         "deploys through the node, which sends PD position targets")
    names = list(env.dof_names)
    defaults = cfg.init_state.default_joint_angles
    missing = [n for n in names if n not in defaults]
    if missing:
        raise ValueError(f"init_state.default_joint_angles lacks joint(s) {missing}")
    meta: dict[str, Any] = {
        "robot": getattr(getattr(cfg, "asset", None), "name", "") or type(env).__name__,
        "joint_names": names,
        "default_pose": [float(defaults[n]) for n in names],
        "kp": _list(env.p_gains), "kd": _list(env.d_gains),
        "action_scale": float(control.action_scale),
        "action_clip": float(cfg.normalization.clip_actions),
        "control_dt": float(env.dt), "decimation": int(control.decimation), "physics_dt": float(cfg.sim.dt),
        "source": "isaacgym",
    }
    if hasattr(env, "torque_limits"):
        meta["torque_limits"] = _list(env.torque_limits)
    if hasattr(env, "dof_pos_limits"):
        meta["joint_limits"] = _list(env.dof_pos_limits)
    ranges = getattr(getattr(cfg, "commands", None), "ranges", None)
    if ranges is not None:
        meta["command"] = {"names": ["lin_vel_x", "lin_vel_y", "ang_vel_yaw"],
                           "ranges": [list(ranges.lin_vel_x), list(ranges.lin_vel_y), list(ranges.ang_vel_yaw)]}
    terms = observation_layout(env)
    if terms is not None:
        meta["obs_terms"] = terms
    return meta
