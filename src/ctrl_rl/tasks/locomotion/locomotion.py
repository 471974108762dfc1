"""Velocity tracking for legged robots on flat ground, in the legged_gym tradition.

Written once against the backend-neutral view of ``ctrl_rl.sims.mujoco_env.Physics``
(``qpos``, ``qvel``, named sensors), so it runs unchanged on MuJoCo CPU and MuJoCo Warp.
Observation terms come from ``ctrl_rl.robots.terms`` — the same definitions the deploy
runtime evaluates on the robot. Rewards are named terms with weights (per-second weights,
multiplied by the control dt as in legged_gym); each term's mean per-step contribution is
logged as ``Reward/<name>`` (TensorBoard), so one sees which term drives the total.

Task ``quadruped_velocity_flat``: ctrl_quad (12-DoF, ``robots/ctrl_quad.yaml``) tracking velocity
commands on flat ground, legged_gym-style rewards and randomization (``velocity_config.py`` documents
every ``task.kwargs``; ``--help`` lists them). Runs on sim=mujoco (CPU threads, its default) or
sim=mjwarp (GPU, or CPU for tests); tuned settings per learner: ``tune/<algo>_quadruped_velocity_flat.yaml``.
"""

from __future__ import annotations

import math
from typing import Any

import mujoco
import numpy as np
import torch

from ctrl_rl.env import SimulationError
from ctrl_rl.mirror import EnvMirror, SignedPerm
from ctrl_rl.robots.action_filter import ActionFilter
from ctrl_rl.robots.robot import RobotConfig, SensorLayout, build_model, joint_indices
from ctrl_rl.robots.terms import TERM_MIRRORS, ObsTerm, compute_obs, heading_hold, projected_gravity, yaw_angle
from ctrl_rl.tasks import register_task
from ctrl_rl.tasks.rewards import switched_weights, weighted_sum

from . import bundle, gait_signals, symmetry
from . import gait_rewards as gait
from .gait_clock import clock_rewards, foot_phase_offsets, gait_phase
from .polish_contact import PolishContact
from .standing import foot_rest_heights, pose_tolerance, settled_pose, standing_foot_points
from .velocity_config import (
    DEFAULT_REWARDS,
    FINE_TRACKING_SIGMA,
    GAIT_RECIPE_TERMS,
    TRACKING_SIGMA,
    VelocityTaskConfig,
    policy_terms,
)

__all__ = ["DEFAULT_REWARDS", "GAIT_RECIPE_TERMS", "TRACKING_SIGMA", "VelocityTask", "VelocityTaskConfig",
           "policy_terms"]

class VelocityTask:
    """Quadruped velocity tracking: commands, rewards, terminations, randomization."""

    action_bounds = None  # Gaussian actions, clipped at clip_actions inside the task
    graph_safe = True
    """Its step hooks make no host reads and call the physics only through ``write_rows`` and
    ``sensordata``, so ``sim.cuda_graph`` can replay them (``ctrl_rl.utils.cuda_graphs``)."""

    def __init__(self, cfg: VelocityTaskConfig, robot: RobotConfig, model: mujoco.MjModel,
                 layout: SensorLayout, num_envs: int, device: torch.device) -> None:
        self.cfg, self.robot, self.layout = cfg, robot, layout
        self.num_envs, self.device = num_envs, device
        nj = robot.num_joints
        self.action_index = torch.tensor(robot.action_index, dtype=torch.long, device=device)
        """Joints the policy moves (``robot.action_joints``); the others hold the default pose."""
        self.action_dim = len(robot.action_index)
        self.decimation = int(cfg.decimation)
        self.step_dt = float(model.opt.timestep) * self.decimation
        self.max_episode_length = int(math.ceil(cfg.episode_length_s / self.step_dt))
        qadr, vadr = joint_indices(model, robot)
        self.qadr = torch.as_tensor(qadr, device=device)
        self.vadr = torch.as_tensor(vadr, device=device)
        self.base_id = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, robot.base_body)
        self.qpos0 = torch.as_tensor(model.qpos0, dtype=torch.float32, device=device)
        self.default_pose = torch.tensor(robot.default_pose, device=device)
        self.action_scale = torch.tensor(robot.action_scales, device=device)
        lo, hi = model.jnt_range[[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, j)
                                  for j in robot.joint_names]].T
        self.joint_limits = np.stack([lo, hi], axis=1)
        self.soft_limits = tuple(torch.tensor(b, device=device, dtype=torch.float32)
                                 for b in gait.soft_joint_limits(lo, hi, cfg.joint_limit_margin))
        self.feet = [f"{g}_contact" for g in robot.foot_geoms]
        self.foot_points = standing_foot_points(model, robot)
        """``[feet, 3]`` foot geom centres in the base frame at the default pose (pairs them for mirroring)."""
        self.foot_vel_sensors = [f"{g}_vel" for g in robot.foot_geoms]
        self.foot_pos_sensors = [f"{g}_pos" for g in robot.foot_geoms]
        self.foot_rest_height = torch.tensor(foot_rest_heights(model, robot), device=device)
        self.foot_phase = torch.tensor(foot_phase_offsets(self.foot_points), dtype=torch.float32, device=device) \
            if cfg.gait_period > 0 else None
        """Each foot's lag behind the gait clock, in periods (``gait_clock.py``); None: no clock."""
        """A foot geom's centre height when it stands on flat ground (sphere: its radius; box: half height)."""
        self.pose_tolerance = torch.tensor(pose_tolerance(robot, cfg.pose_tolerance), device=device)
        self.torque_limits = torch.tensor(robot.torque_limits, device=device)
        self.mass = float(model.body_subtreemass[self.base_id])
        """The robot's mass (kg), for the ``power`` term's scale."""
        self.settled_qpos = torch.as_tensor(settled_pose(model, robot), dtype=torch.float32, device=device) \
            if cfg.settled_start_fraction > 0 else None
        """Where the PD gains alone settle the robot at the default pose (``settled_start_fraction``)."""
        self.torque_sensors = [f"{j}_torque" for j in robot.joint_names]
        self.joint_pos_sensors = [f"{j}_pos" for j in robot.joint_names]
        self.joint_vel_sensors = [f"{j}_vel" for j in robot.joint_names]
        every = tuple(ObsTerm(t.name, t.dim or (self.action_dim if t.name == "last_action" else nj), t.scale,
                              t.clip, t.noise) for t in policy_terms(cfg.obs_noise))
        pterms = tuple(t for t in every if cfg.policy_terms is None or t.name in cfg.policy_terms)
        pterms += self.extra_policy_terms()
        self.obs_terms: dict[str, tuple[ObsTerm, ...]] = {"policy": pterms}
        if cfg.privileged_critic:  # every measurable term (noise-free) and the privileged ones
            clean = tuple(ObsTerm(t.name, t.dim, t.scale, t.clip) for t in every)
            self.obs_terms["critic"] = clean + (ObsTerm("base_lin_vel", 3, scale=2.0), ObsTerm("base_height", 1),
                                                ObsTerm("foot_contact", len(self.feet))) + self.extra_critic_terms()
        self.obs_dims = {g: sum(t.dim for t in terms) for g, terms in self.obs_terms.items()}
        offsets = torch.tensor([0] + [t.dim for t in pterms]).cumsum(0).tolist()
        self._noise_slices = {t.name: slice(a, b) for t, a, b in zip(pterms, offsets, offsets[1:], strict=False)}
        """Where each policy term's noise sits in :meth:`sample_obs_noise`'s tensor."""
        self.push_every = int(round(cfg.push_interval_s / self.step_dt)) if cfg.push_velocity > 0 else 0
        self.resample_every = int(round(cfg.command_resample_s / self.step_dt))
        n, f = num_envs, len(self.feet)
        zeros = lambda *s: torch.zeros(*s, device=device)  # noqa: E731
        self.commands = zeros(n, 3)
        """What the policy is told and rewarded for: the operator's command with the heading hold's yaw rate."""
        self.user_commands = zeros(n, 3)
        """The operator's command (vx, vy, yaw rate): sampled, or ``fixed_command``."""
        self.heading_target = zeros(n)
        self.recipe_steps = torch.zeros((), device=device)
        """Control steps this env has taken: the gait terms' ramp (``gait_terms_ramp_steps``)."""
        self.heading_fresh = torch.ones(n, dtype=torch.bool, device=device)
        """Rows whose heading target is set from the yaw at their next step (a new episode)."""
        self.last_action = zeros(n, self.action_dim)
        self.action_before = zeros(n, self.action_dim)  # the applied action two steps back (action_smoothness)
        self.filter = ActionFilter(cfg.action_filter, cfg.action_lowpass_hz, self.step_dt,
                                   lambda: zeros(n, self.action_dim),
                                   first_order=cfg.action_filter > 0 or cfg.polish_action_filter > 0)
        """``task.kwargs.action_filter`` or ``action_lowpass_hz`` (``robots/action_filter.py``)."""
        self.last_joint_vel = zeros(n, nj)
        self.gait_steps = torch.zeros(n, dtype=torch.long, device=device)
        """Control steps since each env's episode began: the gait clock."""
        self.air_time = zeros(n, f)
        self.last_contact = torch.zeros(n, f, dtype=torch.bool, device=device)
        self.delay = torch.zeros(n, dtype=torch.long, device=device)
        self.action_history = zeros(n, cfg.max_action_delay + 1, self.action_dim)
        self.active_rewards = [k for k, w in cfg.rewards.items() if w != 0.0 or cfg.polish_rewards.get(k, 0.0) != 0.0]
        self.polish_contact = PolishContact(cfg, robot, model)
        self.switches_contact = self.polish_contact.switches  # read by MjVecEnv: a physics that can switch
        self.out_of_bounds = torch.zeros(n, dtype=torch.bool, device=device)
        """Envs whose episode is cut short without a failure (a time-out); never on flat ground."""
        self.metrics: dict[str, torch.Tensor] = {}
        """Per-env measures of the last step (``info["metrics"]``)."""
        self._nominal: dict[str, torch.Tensor] = {}
        self._below_ground = torch.zeros((), dtype=torch.bool, device=device)
        self._fixed_command = None if cfg.fixed_command is None else \
            torch.tensor(cfg.fixed_command, device=device, dtype=torch.float32)

    @classmethod
    def build_model(cls, cfg: VelocityTaskConfig, robot: RobotConfig,
                    visuals: bool = False) -> tuple[mujoco.MjModel, SensorLayout]:
        """The model this task runs on (the robot on flat ground; rough terrain adds its heightfield);
        ``visuals``: with the robot's visual meshes (rendering), else without."""
        return build_model(robot, visuals=visuals)

    def render_model(self) -> mujoco.MjModel:
        """The training model plus its visual meshes: the same bodies and joints, for rendering."""
        return type(self).build_model(self.cfg, self.robot, visuals=True)[0]

    def extra_policy_terms(self) -> tuple[ObsTerm, ...]:
        """Terms appended to the actor's observation: the gait clock's, when there is one."""
        return (ObsTerm("gait_clock", 2),) if self.cfg.gait_period > 0 else ()

    def extra_critic_terms(self) -> tuple[ObsTerm, ...]:
        """Privileged terms appended to the critic's observation (a variant adds its own): the gait clock's."""
        return (ObsTerm("gait_clock", 2),) if self.cfg.gait_period > 0 else ()

    def begin_reset(self, physics: Any, rows: torch.Tensor, gen: torch.Generator) -> None:
        """Before ``rows`` are re-initialized (their final state is still in ``physics``): nothing
        here; the terrain task moves envs between curriculum levels."""

    # -- helpers ----------------------------------------------------------------------------
    def _uniform(self, gen: torch.Generator, lo: float, hi: float, *shape: int) -> torch.Tensor:
        return torch.rand(*shape, generator=gen, device=self.device) * (hi - lo) + lo

    def signals(self, physics: Any) -> dict[str, torch.Tensor]:
        """The named signals the observation terms read (robot-measurable + privileged), plus
        ``_contact``, ``_torques``, ``_base_contact`` and ``_sensordata`` for rewards and terminations."""
        sd = physics.sensordata.to(torch.float32, copy=True)  # a snapshot: later writes (resets) leave it
        sensor = lambda name: sd[:, self.layout[name]]  # noqa: E731
        contact = torch.cat([sensor(f) for f in self.feet], -1) > 1.0
        clock = {} if self.foot_phase is None else \
            {"gait_phase": gait_phase(self.gait_steps, self.step_dt, self.cfg.gait_period)}
        return {
            **clock,
            "imu_quat": sensor("imu_quat"),
            "imu_gyro": sensor("imu_gyro"),
            "joint_pos": torch.cat([sensor(j) for j in self.joint_pos_sensors], -1),
            "joint_vel": torch.cat([sensor(j) for j in self.joint_vel_sensors], -1),
            "command": self.commands,
            "last_action": self.last_action,
            "default_pose": self.default_pose,
            "base_lin_vel": sensor("base_lin_vel"),
            "base_height": sensor("base_pos")[:, 2:3],
            "_base_pos": sensor("base_pos"),
            "foot_contact": contact.float(),
            "_contact": contact,
            "_torques": torch.cat([sensor(t) for t in self.torque_sensors], -1),
            "_base_contact": sensor("base_contact")[:, 0],
            "_sensordata": sd,  # for a variant's extra sensors (a humanoid's foot velocities)
        }

    # -- hooks called by MjVecEnv -------------------------------------------------------------
    def randomize_model(self, physics: Any, gen: torch.Generator) -> None:
        """Per-env friction, base mass, PD gains and motor strength (drawn at reset(seed))."""
        c, n = self.cfg, self.num_envs
        self.polish_contact.sync(physics, self.recipe_steps)  # a fresh eval env's, polished from its start
        if not self._nominal:
            for name in self._RANDOMIZED:
                self._nominal[name] = physics.model_field(name).to(self.device)
        friction = self._nominal["geom_friction"].clone()
        friction[..., 0] = self._uniform(gen, *c.friction, n, 1)
        mass = self._nominal["body_mass"].clone()
        mass[:, self.base_id] += self._uniform(gen, *c.added_base_mass, n)
        strength = self._uniform(gen, *c.motor_strength, n, 1)
        kp = self._uniform(gen, *c.kp_scale, n, 1) * strength
        kd = self._uniform(gen, *c.kd_scale, n, 1) * strength
        gain, bias = self._nominal["actuator_gainprm"].clone(), self._nominal["actuator_biasprm"].clone()
        gain[..., 0] *= kp
        bias[..., 1] *= kp
        bias[..., 2] *= kd
        for name, value in (("geom_friction", friction), ("body_mass", mass),
                            ("actuator_gainprm", gain), ("actuator_biasprm", bias)):
            physics.set_model_field(name, value)

    def sample_initial_state(self, physics: Any, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """Default pose at standing height with small joint and velocity noise (all rows)."""
        n, c = self.num_envs, self.cfg
        qpos = self.qpos0.expand(n, -1).clone()
        qpos[:, 2] = self.robot.init_height
        qpos[:, 3] = 1.0  # upright: the identity quaternion
        qpos[:, 4:7] = 0.0
        qpos[:, self.qadr] = self.default_pose + self._uniform(gen, -c.init_joint_noise, c.init_joint_noise,
                                                               n, self.robot.num_joints)
        if self.settled_qpos is not None:  # as the deploy node hands over: after a stand-up under PD alone
            settled = torch.rand(n, 1, generator=gen, device=self.device) < c.settled_start_fraction
            start = self.settled_qpos.expand(n, -1).clone()
            start[:, self.qadr] += qpos[:, self.qadr] - self.default_pose  # the same joint noise
            qpos = torch.where(settled, start, qpos)
        qvel = torch.zeros(n, physics.model.nv, device=self.device)
        qvel[:, :6] = self._uniform(gen, -c.init_base_vel, c.init_base_vel, n, 6)
        return qpos, qvel

    def reset_rows(self, rows: torch.Tensor, gen: torch.Generator) -> None:
        """Fresh commands, delays and buffers for the envs that start a new episode."""
        r = rows[:, None]
        self.user_commands = torch.where(r, self._sample_commands(gen), self.user_commands)
        self.commands = torch.where(r, self.user_commands, self.commands)
        self.heading_fresh = self.heading_fresh | rows
        self.last_action.masked_fill_(r, 0.0)
        self.action_before.masked_fill_(r, 0.0)
        self.filter.reset(rows)
        self.last_joint_vel.masked_fill_(r, 0.0)
        self.gait_steps.masked_fill_(rows, 0)
        self.air_time.masked_fill_(r, 0.0)
        self.last_contact.masked_fill_(r, False)
        self.action_history.masked_fill_(rows[:, None, None], 0.0)
        delay = torch.randint(0, self.cfg.max_action_delay + 1, (self.num_envs,), generator=gen, device=self.device)
        self.delay = torch.where(rows, delay, self.delay)

    def _sample_commands(self, gen: torch.Generator) -> torch.Tensor:
        c, n = self.cfg, self.num_envs
        if self._fixed_command is not None:
            return self._fixed_command.expand(n, 3).clone()
        cmd = torch.stack([self._uniform(gen, *c.lin_vel_x, n), self._uniform(gen, *c.lin_vel_y, n),
                           self._uniform(gen, *c.ang_vel_yaw, n)], -1)
        standing = torch.rand(n, 1, generator=gen, device=self.device) < c.standing_fraction
        return cmd.masked_fill(standing, 0.0)

    def _polishing(self) -> torch.Tensor:
        """1.0 from control step ``polish_start`` on, else 0.0 (a 0-d tensor: a captured step switches too)."""
        return (self.recipe_steps >= self.cfg.polish_start).float()

    def joint_targets(self, actions: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        """Clip, low-pass filter, delay (per-env latency) and scale actions into PD position targets (the
        joints the policy does not move keep their default pose)."""
        c = self.cfg
        actions = actions.clamp(-c.clip_actions, c.clip_actions)
        if c.polish_action_filter > 0:  # the polish's filter from polish_start (a tensor: no host read)
            self.filter.weight = c.action_filter + (c.polish_action_filter - c.action_filter) * self._polishing()
        actions = self.filter(actions, self.last_action, self.action_before)  # last_action: the last applied
        self.action_history = torch.cat([actions[:, None], self.action_history[:, :-1]], 1)
        applied = self.action_history[torch.arange(self.num_envs, device=self.device), self.delay]
        self._action = actions
        if self.action_dim == self.robot.num_joints:  # every joint acts: no scatter on the step's path
            return self.default_pose + self.action_scale * applied
        offsets = torch.zeros(self.num_envs, self.robot.num_joints, device=self.device)
        offsets[:, self.action_index] = applied
        return self.default_pose + self.action_scale * offsets

    def evaluate(self, physics: Any, episode_length: torch.Tensor,
                 gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, dict]:
        """Reward, termination and logs after a control step; updates the task's buffers."""
        s = self.signals(physics)
        self._below_ground |= (s["base_height"][:, 0] < -0.5).any()  # read by check_simulation
        c = self.cfg
        g = projected_gravity(s)
        terminated = self.failed(s, g)
        terms = self.reward_terms(s, g, terminated)
        ramp = (self.recipe_steps / c.gait_terms_ramp_steps).clamp(max=1.0) if c.gait_terms_ramp_steps > 0 else 1.0
        weights, scales = c.rewards, dict.fromkeys(GAIT_RECIPE_TERMS, ramp)
        if c.polish_rewards:  # the recipe's late polish (task.kwargs.polish_rewards from polish_start)
            weights, scales = switched_weights(weights, c.polish_rewards, self._polishing(), scales)
        self.recipe_steps += 1
        self.polish_contact.sync(physics, self.recipe_steps)  # for the next physics step
        reward, log = weighted_sum(terms, weights, self.active_rewards, self.step_dt, self.num_envs, self.device,
                                   scales=scales)
        if c.only_positive_rewards:
            reward = reward.clamp(min=0.0)
        self.action_before = self.last_action
        self.last_action = self._action
        self.last_joint_vel = s["joint_vel"]
        s["last_action"] = self.last_action
        if self.resample_every > 0:
            due = (episode_length % self.resample_every == 0)[:, None]
            self.user_commands = torch.where(due, self._sample_commands(gen), self.user_commands)
        self.commands = self._held_commands(s["imu_quat"])
        s["command"] = self.commands
        self.post_step_signals = s
        """This step's signals with the updated command and last action: ``final_obs`` reuses them."""
        # per env: evaluation averages each env over its own episode; TensorBoard gets the mean
        v = s["base_lin_vel"]
        self.metrics = {"lin_vel_error": (self.commands[:, :2] - v[:, :2]).norm(dim=-1),
                        "forward_velocity": v[:, 0]}  # base frame, m/s
        log.update({f"Metrics/{k}": m.mean() for k, m in self.metrics.items()})
        return reward, terminated, log

    def _held_commands(self, imu_quat: torch.Tensor) -> torch.Tensor:
        """The operator's command with the heading hold's yaw rate (``task.kwargs.heading_stiffness``).
        A new episode's first step takes its heading as the target, uncorrected; every later step
        advances the target by the operator's yaw rate (the deploy node does the same, tick by tick)."""
        user = self.user_commands
        if self.cfg.heading_stiffness <= 0:
            return user.clone()
        yaw = yaw_angle(imu_quat)
        self.heading_target = torch.where(self.heading_fresh, yaw, self.heading_target + user[:, 2] * self.step_dt)
        held = heading_hold(user[:, 2], self.heading_target, yaw, self.cfg.heading_stiffness, *self.cfg.ang_vel_yaw)
        held = torch.where(self.heading_fresh, user[:, 2], held)
        self.heading_fresh = torch.zeros_like(self.heading_fresh)
        return torch.cat([user[:, :2], held[:, None]], -1)

    def check_simulation(self) -> None:
        """A base 0.5 m below the ground fell through the world (no floor, or no collision with it):
        the env calls this every ``MjVecEnv.CHECK_EVERY`` control steps (one host read), so it is
        raised within 50 steps, never trained on."""
        if bool(self._below_ground):
            raise SimulationError(f"robot {self.robot.name}: the base is 0.5 m below the ground: it fell through "
                                  "the world. Give its feet (and base) collisions with the floor: contype/conaffinity "
                                  "in the MJCF")

    def failed(self, s: dict[str, torch.Tensor], g: torch.Tensor) -> torch.Tensor:
        """Terminations: the base touches the ground or tilts past ``max_tilt_deg``."""
        upright = -g[:, 2]  # cos(tilt)
        return (s["_base_contact"] > 1.0) | (upright < math.cos(math.radians(self.cfg.max_tilt_deg)))

    def tracked_velocity(self, s: dict[str, torch.Tensor]) -> torch.Tensor:
        """``[N, 2]``: the base's horizontal velocity that ``track_lin_vel_xy`` (and ``_fine``) compare with the
        command: in the base frame (legged_gym's)."""
        return s["base_lin_vel"][:, :2]

    def reward_terms(self, s: dict[str, torch.Tensor], g: torch.Tensor,
                     terminated: torch.Tensor) -> dict[str, torch.Tensor]:
        """Every reward term's per-step value (before its weight); advances the gait buffers."""
        dt = self.step_dt
        v, w = s["base_lin_vel"], s["imu_gyro"]
        contact = s["_contact"]
        first_contact = (self.air_time > 0) & (contact | self.last_contact)
        self.air_time += dt
        moving = (self.commands[:, :2].norm(dim=-1) > 0.1).float()
        torques = s["_torques"]
        q = s["joint_pos"]
        error = ((self.commands[:, :2] - self.tracked_velocity(s)) ** 2).sum(-1)
        terms = {
            "track_lin_vel_xy": torch.exp(-error / TRACKING_SIGMA),
            "track_lin_vel_xy_fine": torch.exp(-error / FINE_TRACKING_SIGMA),
            "track_ang_vel_z": torch.exp(-((self.commands[:, 2] - w[:, 2]) ** 2) / TRACKING_SIGMA),
            "lin_vel_z": v[:, 2] ** 2,
            "ang_vel_xy": (w[:, :2] ** 2).sum(-1),
            "orientation": (g[:, :2] ** 2).sum(-1),
            "torques": (torques ** 2).sum(-1),
            "joint_acc": (((s["joint_vel"] - self.last_joint_vel) / dt) ** 2).sum(-1),
            "action_rate": ((self._action - self.last_action) ** 2).sum(-1),
            "feet_air_time": ((self.air_time - 0.5) * first_contact).sum(-1) * moving,
            "joint_pos_limits": ((self.soft_limits[0] - q).clamp(min=0)
                                 + (q - self.soft_limits[1]).clamp(min=0)).sum(-1),
            "base_height": (s["base_height"][:, 0] - self.robot.init_height) ** 2,
            "termination": terminated.float(),
            **self.gait_terms(s, contact),
        }
        self.air_time *= ~(contact | self.last_contact)
        self.last_contact = contact
        return terms

    def gait_terms(self, s: dict[str, torch.Tensor], contact: torch.Tensor) -> dict[str, torch.Tensor]:
        """The recipe's posture, feet and effort terms (``tasks/locomotion/gait_rewards.py``), scaled by this
        robot, and the gait clock's (``gait_clock.py``), whose clock they advance."""
        sd, h0 = s["_sensordata"], self.robot.init_height
        foot_vel = torch.stack([sd[:, self.layout[k]][:, :2] for k in self.foot_vel_sensors], 1)
        lift = torch.stack([sd[:, self.layout[k]][:, 2] for k in self.foot_pos_sensors], -1) - self.foot_rest_height
        torques = s["_torques"]
        terms = {
            "joint_pose": gait.pose_deviation(s["joint_pos"], self.default_pose, self.pose_tolerance),
            "base_height_ratio": gait.height_ratio_error(s["base_height"][:, 0], h0),
            "feet_slide": gait.foot_slip(foot_vel, contact),
            "feet_clearance": gait.foot_clearance(lift, foot_vel.norm(dim=-1), self.cfg.foot_clearance * h0),
            "torque_limits": gait.torque_excess(torques, self.torque_limits, self.cfg.torque_soft_limit),
            "power": gait.mechanical_power(torques, s["joint_vel"], self.mass, h0),
            "action_smoothness": gait.action_jerk(self._action, self.last_action, self.action_before),
        }
        if self.foot_phase is not None:  # the clock of the state just reached (the next observation's)
            self.gait_steps += 1
            s["gait_phase"] = phase = gait_phase(self.gait_steps, self.step_dt, self.cfg.gait_period)
            terms.update(clock_rewards(phase, self.foot_phase, self.cfg.stance_fraction, contact, lift,
                                       self.cfg.swing_height))
        return terms

    def perturb(self, physics: Any, episode_length: torch.Tensor, gen: torch.Generator) -> bool:
        """Random base velocity kicks every ``push_interval_s`` of an episode. Returns whether any
        world may have been moved (False only when certainly none was)."""
        if self.push_every <= 0:
            return False
        rows = (episode_length % self.push_every == 0) & (episode_length > 0)
        kick = self._uniform(gen, -self.cfg.push_velocity, self.cfg.push_velocity, self.num_envs, 2)
        if self.device.type == "cpu" and not bool(rows.any()):
            return False  # the kick is still drawn: the generator's stream does not depend on the check
        qvel = physics.qvel.float().clone()
        qvel[:, :2] += kick
        physics.write_rows(rows, physics.qpos.float().clone(), qvel)
        return True

    def sample_obs_noise(self, gen: torch.Generator) -> torch.Tensor | None:
        """Uniform [-1, 1] noise for one step's policy observation (``None`` when off).

        Drawn once per step and shared by ``final_obs`` and ``obs``, so a row's last
        observation is exactly what it would have seen had the episode gone on.
        """
        if self.cfg.obs_noise <= 0:
            return None
        return torch.rand(self.num_envs, self.obs_dims["policy"], generator=gen, device=self.device) * 2 - 1

    def observe(self, physics: Any, noise: torch.Tensor | None,
                signals: dict[str, torch.Tensor] | None = None) -> dict[str, torch.Tensor]:
        """Observation groups; ``signals`` may be passed when already read for this state."""
        s = self.signals(physics) if signals is None else signals
        draw = None if noise is None else (lambda term: noise[:, self._noise_slices[term.name]])
        obs = {"policy": compute_obs(self.obs_terms["policy"], s, draw)}
        if "critic" in self.obs_terms:
            obs["critic"] = compute_obs(self.obs_terms["critic"], s)
        return obs

    def deploy_metadata(self) -> dict[str, Any]:
        """Observation layout and action mapping of the policy group, for the deploy bundle (``bundle.py``)."""
        return bundle.deploy_metadata(self)

    # -- symmetry -----------------------------------------------------------------------------
    def mirror_parts(self) -> dict[str, SignedPerm]:
        """The joints', actions' and feet's maps by name (``symmetry.py``; a variant adds its own, e.g. ``scan``)."""
        return symmetry.mirror_parts(self)

    def mirror(self) -> EnvMirror:
        """Every observation term's mirror map (its history frames included) and the actions' (the
        joints' map on the joints the policy moves: actions are offsets from the symmetric default pose)."""
        return EnvMirror.of_terms(self.obs_terms, TERM_MIRRORS, self.mirror_parts())

    # -- state ------------------------------------------------------------------------------
    _BUFFERS = ("commands", "last_action", "action_before", "last_joint_vel", "air_time", "last_contact", "delay",
                "action_history", "user_commands", "heading_target", "heading_fresh", "recipe_steps", "gait_steps")

    _RANDOMIZED = ("geom_friction", "body_mass", "actuator_gainprm", "actuator_biasprm")

    def get_state(self, physics: Any) -> dict[str, Any]:
        state = {k: getattr(self, k).clone() for k in self._BUFFERS}
        state["filter_inputs"] = [x.clone() for x in self.filter.inputs]
        state["model"] = {k: physics.model_field(k) for k in self._RANDOMIZED}
        return state

    def set_state(self, state: dict[str, Any], physics: Any) -> None:
        for k in self._BUFFERS:
            if k in state:  # a checkpoint from before the heading hold has no heading buffers: they start fresh
                setattr(self, k, state[k].to(self.device).clone())
        if "filter_inputs" in state:  # checkpoints from before the low-pass have none: it starts at rest
            self.filter.inputs = [x.to(self.device).clone() for x in state["filter_inputs"]]
        for k, v in state["model"].items():
            physics.set_model_field(k, v)
        self.polish_contact.sync(physics, self.recipe_steps)

    # -- gait report (ctrl-rl eval; ctrl_rl.deploy.gait_report) ---------------------------------
    def gait_spec(self, model: mujoco.MjModel) -> dict[str, Any]:
        """The robot's constants for the gait report (``tasks/locomotion/gait_signals.py``)."""
        return gait_signals.gait_spec(self, model)

    def gait_signals(self) -> dict[str, torch.Tensor]:
        """This step's per-env gait signals (``tasks/locomotion/gait_signals.py``), read after :meth:`evaluate`."""
        return gait_signals.step_signals(self)


register_task("quadruped_velocity_flat", config=VelocityTaskConfig, task=VelocityTask)
