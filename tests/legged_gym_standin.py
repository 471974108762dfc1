"""A stand-in for a legged_gym task: legged_gym's buffers and step/reset order, without Isaac Gym.

``sim=isaacgym`` adapts legged_gym's ``LeggedRobot`` interface (``ctrl_rl.sims.isaacgym``). Isaac Gym
needs Python 3.8 and an NVIDIA GPU, so the adapter is tested against this class, which reproduces
what the adapter depends on, in legged_gym's order:

``step(actions)``: clip the actions, ``decimation`` PD sub-steps, then ``post_physics_step``:
``episode_length_buf += 1``, commands resampled on schedule, ``check_termination`` (a fall, or
``episode_length_buf > max_episode_length``: ``time_out_buf``), ``compute_reward`` (per-term
``episode_sums``), ``reset_idx(env_ids)`` (fills ``extras["episode"]`` and ``extras["time_outs"]``),
``compute_observations()``, ``last_actions = actions``; returns ``obs_buf, privileged_obs_buf,
rew_buf, reset_buf, extras``. Randomness comes from torch's global generator, as legged_gym's.

The body is a toy, not a robot: 12 joints follow PD targets through a first-order inertia; the
base's forward/lateral velocity follows the legs' mean "stride" (the difference of front and rear
joint velocities) and its roll/pitch a leaning term, falling past 0.8 rad. The robot data (joint
names, default angles, gains, action scale, decimation, dt) are ctrl_quad's, so the exported bundle
is a quadruped's.
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import torch

JOINTS = [f"{leg}_{j}_joint" for leg in ("FL", "FR", "RL", "RR") for j in ("hip", "thigh", "calf")]
DEFAULT_ANGLES = {n: (0.1 if n.startswith(("FL", "RL")) else -0.1) if "hip" in n else (0.8 if "thigh" in n else -1.5)
                  for n in JOINTS}


def legged_cfg() -> SimpleNamespace:
    """The stand-in's config, nested as legged_gym's ``LeggedRobotCfg`` (the fields the adapter reads)."""
    ns = SimpleNamespace
    return ns(
        env=ns(num_envs=64, num_observations=45, num_privileged_obs=48, num_actions=12, episode_length_s=4.0,
               send_timeouts=True),
        init_state=ns(default_joint_angles=dict(DEFAULT_ANGLES)),
        control=ns(control_type="P", stiffness={"joint": 20.0}, damping={"joint": 0.5}, action_scale=0.25,
                   decimation=4),
        sim=ns(dt=0.005),
        normalization=ns(obs_scales=ns(lin_vel=2.0, ang_vel=0.25, dof_pos=1.0, dof_vel=0.05),
                         clip_observations=100.0, clip_actions=100.0),
        commands=ns(resampling_time=2.0, ranges=ns(lin_vel_x=[-1.0, 1.0], lin_vel_y=[-0.5, 0.5],
                                                   ang_vel_yaw=[-1.0, 1.0])),
        rewards=ns(scales=ns(tracking_lin_vel=1.0, action_rate=-0.01, termination=-1.0), tracking_sigma=0.25),
        noise=ns(add_noise=False),
        asset=ns(name="standin_quad"),
        terrain=ns(mesh_type="plane"),
    )


class StandInLeggedRobot:
    """legged_gym's ``LeggedRobot`` surface on a toy body (module docstring)."""

    def __init__(self, cfg: SimpleNamespace, device: str | torch.device = "cpu") -> None:
        self.cfg, self.device = cfg, torch.device(device)
        e = cfg.env
        self.num_envs, self.num_obs, self.num_privileged_obs = e.num_envs, e.num_observations, e.num_privileged_obs
        self.num_actions = e.num_actions
        self.dt = cfg.control.decimation * cfg.sim.dt
        self.max_episode_length_s = e.episode_length_s
        self.max_episode_length = math.ceil(e.episode_length_s / self.dt)
        self.dof_names = list(JOINTS)
        n, j = self.num_envs, self.num_actions
        z = lambda *s: torch.zeros(*s, device=self.device)  # noqa: E731
        self.default_dof_pos = torch.tensor([DEFAULT_ANGLES[k] for k in JOINTS], device=self.device)
        self.p_gains = torch.full((j,), cfg.control.stiffness["joint"], device=self.device)
        self.d_gains = torch.full((j,), cfg.control.damping["joint"], device=self.device)
        self.torque_limits = torch.full((j,), 23.7, device=self.device)
        self.dof_pos_limits = torch.stack([self.default_dof_pos - 1.0, self.default_dof_pos + 1.0], -1)
        self.dof_pos, self.dof_vel = z(n, j), z(n, j)
        self.base_lin_vel, self.base_ang_vel, self.tilt = z(n, 3), z(n, 3), z(n, 2)
        self.commands = z(n, 3)
        self.actions, self.last_actions = z(n, j), z(n, j)
        self.obs_buf, self.privileged_obs_buf = z(n, self.num_obs), z(n, self.num_privileged_obs)
        self.rew_buf = z(n)
        self.reset_buf = torch.ones(n, dtype=torch.long, device=self.device)
        self.time_out_buf = torch.zeros(n, dtype=torch.bool, device=self.device)
        self.episode_length_buf = torch.zeros(n, dtype=torch.long, device=self.device)
        self.scales = {k: v * self.dt for k, v in vars(cfg.rewards.scales).items() if v != 0}
        self.episode_sums = {k: z(n) for k in self.scales}
        self.extras: dict[str, Any] = {}

    # -- legged_gym's public surface ------------------------------------------------------
    def reset(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Reset all envs, then one zero-action step (legged_gym's ``BaseTask.reset``)."""
        self.reset_idx(torch.arange(self.num_envs, device=self.device))
        obs, priv, _, _, _ = self.step(torch.zeros(self.num_envs, self.num_actions, device=self.device))
        return obs, priv

    def step(self, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict]:
        clip = self.cfg.normalization.clip_actions
        self.actions = torch.clip(actions, -clip, clip).to(self.device)
        for _ in range(self.cfg.control.decimation):
            self._physics_step()
        self.post_physics_step()
        clip_obs = self.cfg.normalization.clip_observations
        self.obs_buf = torch.clip(self.obs_buf, -clip_obs, clip_obs)
        self.privileged_obs_buf = torch.clip(self.privileged_obs_buf, -clip_obs, clip_obs)
        return self.obs_buf, self.privileged_obs_buf, self.rew_buf, self.reset_buf, self.extras

    def post_physics_step(self) -> None:
        self.episode_length_buf += 1
        every = int(self.cfg.commands.resampling_time / self.dt)
        self._resample_commands((self.episode_length_buf % every == 0).nonzero(as_tuple=False).flatten())
        self.check_termination()
        self.compute_reward()
        env_ids = self.reset_buf.nonzero(as_tuple=False).flatten()
        self.reset_idx(env_ids)
        self.compute_observations()
        self.last_actions[:] = self.actions[:]

    def check_termination(self) -> None:
        fell = (self.tilt.abs() > 0.8).any(-1)
        self.time_out_buf = self.episode_length_buf > self.max_episode_length
        self.reset_buf = (fell | self.time_out_buf).long()

    def compute_reward(self) -> None:
        err = ((self.commands[:, :2] - self.base_lin_vel[:, :2]) ** 2).sum(-1)
        terms = {"tracking_lin_vel": torch.exp(-err / self.cfg.rewards.tracking_sigma),
                 "action_rate": ((self.last_actions - self.actions) ** 2).sum(-1),
                 "termination": (self.reset_buf.bool() & ~self.time_out_buf).float()}
        self.rew_buf[:] = 0.0
        for name, scale in self.scales.items():
            r = terms[name] * scale
            self.rew_buf += r
            self.episode_sums[name] += r

    def reset_idx(self, env_ids: torch.Tensor) -> None:
        if len(env_ids) == 0:
            return
        k = len(env_ids)
        self.dof_pos[env_ids] = self.default_dof_pos * (0.5 + torch.rand(k, self.num_actions, device=self.device))
        self.dof_vel[env_ids] = 0.0
        self.base_lin_vel[env_ids] = (torch.rand(k, 3, device=self.device) - 0.5) * 0.2
        self.base_ang_vel[env_ids] = 0.0
        self.tilt[env_ids] = 0.0
        self._resample_commands(env_ids)
        self.last_actions[env_ids] = 0.0
        self.extras["episode"] = {}
        for key in self.episode_sums:
            mean = torch.mean(self.episode_sums[key][env_ids])
            self.extras["episode"]["rew_" + key] = mean / self.max_episode_length_s
            self.episode_sums[key][env_ids] = 0.0
        self.episode_length_buf[env_ids] = 0
        self.reset_buf[env_ids] = 1
        if self.cfg.env.send_timeouts:
            self.extras["time_outs"] = self.time_out_buf

    def compute_observations(self) -> None:
        s = self.cfg.normalization.obs_scales
        gravity = torch.stack([torch.sin(self.tilt[:, 1]), -torch.sin(self.tilt[:, 0]),
                               -torch.cos(self.tilt[:, 0]) * torch.cos(self.tilt[:, 1])], -1)
        command_scale = torch.tensor([s.lin_vel, s.lin_vel, s.ang_vel], device=self.device)
        proprio = [self.base_ang_vel * s.ang_vel, gravity, self.commands * command_scale,
                   (self.dof_pos - self.default_dof_pos) * s.dof_pos, self.dof_vel * s.dof_vel, self.actions]
        self.obs_buf = torch.cat(proprio, -1)
        self.privileged_obs_buf = torch.cat([self.base_lin_vel * s.lin_vel, *proprio], -1)

    # -- the toy body ---------------------------------------------------------------------
    def _physics_step(self) -> None:
        dt = self.cfg.sim.dt
        target = self.actions * self.cfg.control.action_scale + self.default_dof_pos
        torques = (self.p_gains * (target - self.dof_pos) - self.d_gains * self.dof_vel).clamp(
            -self.torque_limits, self.torque_limits)
        self.dof_vel += dt * (torques - 0.5 * self.dof_vel) / 0.05
        self.dof_pos += dt * self.dof_vel
        legs = self.dof_vel.view(-1, 4, 3)[:, :, 1]  # thigh velocities: FL, FR, RL, RR
        stride = torch.stack([legs[:, [0, 3]].mean(-1) - legs[:, [1, 2]].mean(-1),
                              legs[:, :2].mean(-1) - legs[:, 2:].mean(-1)], -1)
        self.base_lin_vel[:, :2] += dt * (0.2 * stride - 2.0 * self.base_lin_vel[:, :2])
        lean = (self.dof_pos - self.default_dof_pos).view(-1, 4, 3)[:, :, 0].mean(-1, keepdim=True)
        self.base_ang_vel[:, :2] += dt * (2.0 * lean - 1.0 * self.tilt - 0.5 * self.base_ang_vel[:, :2])
        self.base_ang_vel[:, 2] += dt * (0.1 * (legs[:, 0] - legs[:, 1]) - 2.0 * self.base_ang_vel[:, 2])
        self.tilt += dt * self.base_ang_vel[:, :2]

    def _resample_commands(self, env_ids: torch.Tensor) -> None:
        if len(env_ids) == 0:
            return
        r = self.cfg.commands.ranges
        lo = torch.tensor([r.lin_vel_x[0], r.lin_vel_y[0], r.ang_vel_yaw[0]], device=self.device)
        hi = torch.tensor([r.lin_vel_x[1], r.lin_vel_y[1], r.ang_vel_yaw[1]], device=self.device)
        self.commands[env_ids] = lo + (hi - lo) * torch.rand(len(env_ids), 3, device=self.device)

    # -- state (the stand-in's own, for exact tests; legged_gym has none) ---------------------
    _STATE = ("dof_pos", "dof_vel", "base_lin_vel", "base_ang_vel", "tilt", "commands", "actions", "last_actions",
              "episode_length_buf", "episode_sums")

    def get_state(self) -> dict[str, Any]:
        return {k: _copy(getattr(self, k)) for k in self._STATE}

    def set_state(self, state: dict[str, Any]) -> None:
        for k in self._STATE:
            setattr(self, k, _copy(state[k]))


def _copy(v: Any) -> Any:
    return {n: t.clone() for n, t in v.items()} if isinstance(v, dict) else v.clone()


def _make_standin(num_envs: int, device: torch.device, kwargs: dict[str, Any]) -> StandInLeggedRobot:
    from ctrl_rl.sims.isaacgym import set_config

    cfg = legged_cfg()
    set_config(cfg, kwargs)
    cfg.env.num_envs = num_envs
    return StandInLeggedRobot(cfg, device)


def register() -> None:
    """Make the stand-in ``sim=isaacgym task=legged_standin`` (what the adapter's tests train on)."""
    from ctrl_rl.sims.isaacgym import register_isaacgym_task

    register_isaacgym_task("legged_standin", _make_standin)


register()
