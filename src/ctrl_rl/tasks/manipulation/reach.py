"""Reach: an arm brings its end effector to a pose target (position and orientation) and holds it there.

Written against the task contract (``ctrl_rl.task``) on an arm robot (``ctrl_rl.robots.arm``), so it runs
on every MuJoCo-family backend. The target is drawn in the arm's workspace box (base frame) at each reset
and on a timer; the arm starts from its default pose with random joint offsets. The policy observes the
terms of ``ctrl_rl.robots.terms`` a deploy node computes too (joint positions relative to the default pose,
joint velocities, the pose command, the last action); the critic also the end effector's pose error.
Rewards are the terms of ``rewards.py`` with per-second weights (times the control dt, as the locomotion
tasks weigh theirs), each logged as ``Reward/<name>``. Success is a named metric: ``success_rate``, judged
at each episode's end (``ReachConfig``'s docstring states the rule), which ``ctrl-rl eval`` prints.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import mujoco
import torch

from ctrl_rl.robots.arm import ArmRobot, arm_indices, build_arm_model, default_ee_pose, load_arm, rest_qpos
from ctrl_rl.robots.robot import SensorLayout
from ctrl_rl.robots.terms import ObsTerm, compute_obs, quat_angle, quat_mul
from ctrl_rl.tasks import register_task
from ctrl_rl.tasks.rewards import weighted_sum

from .reach_config import ReachConfig
from .rewards import held_steps, reach_terms


class ArmLayout(NamedTuple):
    """What ``build_model`` hands the task: the arm it loaded and its sensors' slices of ``sensordata``."""

    arm: ArmRobot
    sensors: SensorLayout


def axis_quat(angle: torch.Tensor, axis: int) -> torch.Tensor:
    """``[N, 4]`` quaternions (w, x, y, z) of rotations by ``angle [N]`` about coordinate axis ``axis``."""
    q = torch.zeros(*angle.shape, 4, dtype=angle.dtype, device=angle.device)
    q[..., 0] = torch.cos(angle / 2)
    q[..., 1 + axis] = torch.sin(angle / 2)
    return q


class ReachTask:
    """Reach a sampled end-effector pose in the arm's workspace and hold it."""

    action_bounds = None  # Gaussian actions, clipped at clip_actions inside the task
    graph_safe = True
    """No host reads in the step hooks; the physics only through ``write_rows`` and ``sensordata``."""
    robot = None  # an arm has no legged robot's derived size (the bundle carries ``arm_config``)

    def __init__(self, cfg: ReachConfig, robot: None, model: mujoco.MjModel, layout: ArmLayout, num_envs: int,
                 device: torch.device) -> None:
        self.cfg, self.arm, self.sensors = cfg, layout.arm, layout.sensors
        self.num_envs, self.device = num_envs, device
        arm, n_arm = self.arm, len(self.arm.arm_joints)
        self.action_dim = n_arm
        self.decimation = int(cfg.decimation)
        self.step_dt = float(model.opt.timestep) * self.decimation
        self.max_episode_length = int(math.ceil(cfg.episode_length_s / self.step_dt))
        self.resample_every = int(round(cfg.target_resample_s / self.step_dt))
        tensor = lambda x: torch.as_tensor(x, dtype=torch.float32, device=device)  # noqa: E731
        self.rest_qpos = tensor(rest_qpos(model, arm))
        self.arm_qadr = torch.as_tensor(arm_indices(model, arm.arm_joints)[0], device=device)
        self.default_pose = tensor(arm.default_pose)
        self.action_scale = tensor(arm.action_scales[:n_arm])
        self.joint_limits = model.jnt_range[[model.joint(j).id for j in arm.joint_names]]
        self.arm_limits = tensor(self.joint_limits[:n_arm]).T  # [2, n_arm]
        ee_pos, self.ee_quat0 = (tensor(v) for v in default_ee_pose(model, self.sensors, arm))
        box = cfg.workspace or arm.workspace
        if not box:
            raise ValueError(f"arm {arm.name} declares no workspace; give its YAML one or set task.kwargs.workspace")
        self.workspace = tensor(box).T  # [2, 3]: low, high
        self.angle_ranges = tensor([cfg.target_roll, cfg.target_pitch, cfg.target_yaw]).T  # [2, 3]
        cols = lambda suffix: torch.tensor([self.sensors[f"{j}{suffix}"].start for j in arm.joint_names],  # noqa: E731
                                           device=device)
        self.pos_cols, self.vel_cols = cols("_pos"), cols("_vel")
        n_all, noise = arm.num_joints, cfg.obs_noise
        policy = (ObsTerm("joint_pos_rel", n_all, noise=0.01 * noise), ObsTerm("joint_vel", n_all, scale=0.05,
                                                                               noise=0.5 * noise),
                  ObsTerm("pose_command", 9), ObsTerm("last_action", n_arm))
        self.obs_terms: dict[str, tuple[ObsTerm, ...]] = {"policy": policy}
        if cfg.privileged_critic:
            self.obs_terms["critic"] = tuple(ObsTerm(t.name, t.dim, t.scale) for t in policy) + \
                (ObsTerm("ee_pose_error", 6),)
        self.obs_dims = {g: sum(t.dim for t in terms) for g, terms in self.obs_terms.items()}
        ends = torch.tensor([0] + [t.dim for t in policy]).cumsum(0).tolist()
        self._noise_slices = {t.name: slice(a, b) for t, a, b in zip(policy, ends, ends[1:], strict=False)}
        zeros = lambda *shape: torch.zeros(*shape, device=device)  # noqa: E731
        self.target = torch.cat([ee_pos, self.ee_quat0]).expand(num_envs, 7).clone()
        """``[N, 7]``: each env's target, position and quaternion (w, x, y, z) in the base frame."""
        self.last_action, self._action = zeros(num_envs, n_arm), zeros(num_envs, n_arm)
        self.held = torch.zeros(num_envs, dtype=torch.long, device=device)
        """Consecutive steps the end effector has been within the success tolerance of its target."""
        self.active_rewards = [k for k, w in cfg.rewards.items() if w != 0.0]
        self.out_of_bounds = torch.zeros(num_envs, dtype=torch.bool, device=device)
        self.metrics: dict[str, torch.Tensor] = {}
        self.episode_metrics: dict[str, torch.Tensor] = {}
        self.post_step_signals: dict[str, torch.Tensor] | None = None

    @classmethod
    def build_model(cls, cfg: ReachConfig, robot: None, visuals: bool = False) -> tuple[mujoco.MjModel, ArmLayout]:
        """The arm of ``cfg.arm`` on its table (``ctrl_rl.robots.arm.build_arm_model``)."""
        arm = load_arm(cfg.arm)
        model, sensors = build_arm_model(arm, visuals=visuals)
        return model, ArmLayout(arm, sensors)

    def render_model(self) -> mujoco.MjModel:
        """The training model with the arm's visual meshes."""
        return type(self).build_model(self.cfg, None, visuals=True)[0]

    # -- draws ---------------------------------------------------------------------------------
    def _uniform(self, gen: torch.Generator, low: torch.Tensor, high: torch.Tensor) -> torch.Tensor:
        """``[N, len(low)]`` uniform between ``low`` and ``high``."""
        u = torch.rand(self.num_envs, low.shape[-1], generator=gen, device=self.device)
        return low + (high - low) * u

    def sample_targets(self, gen: torch.Generator) -> torch.Tensor:
        """``[N, 7]`` targets: a position uniform in the workspace box; the default pose's orientation turned
        about the end effector's own x, y and z axes by angles uniform in their ranges."""
        position = self._uniform(gen, *self.workspace)
        angles = self._uniform(gen, *self.angle_ranges)
        q = self.ee_quat0.expand(self.num_envs, 4)
        for axis in range(3):
            q = quat_mul(q, axis_quat(angles[:, axis], axis))
        return torch.cat([position, q], -1)

    def signals(self, physics: Any) -> dict[str, torch.Tensor]:
        """The named signals of the observation terms (``ctrl_rl.robots.terms``), from one sensor snapshot."""
        sd = physics.sensordata.to(torch.float32, copy=True)
        return {"joint_pos": sd[:, self.pos_cols], "joint_vel": sd[:, self.vel_cols], "default_pose": self.default_pose,
                "pose_command": self.target, "last_action": self.last_action,
                "ee_pos": sd[:, self.sensors["ee_pos"]], "ee_quat": sd[:, self.sensors["ee_quat"]]}

    # -- hooks called by MjVecEnv ----------------------------------------------------------------
    def randomize_model(self, physics: Any, gen: torch.Generator) -> None:
        """Every arm the same (the target and the start are what vary)."""

    def begin_reset(self, physics: Any, rows: torch.Tensor, gen: torch.Generator) -> None:
        """No curriculum."""

    def sample_initial_state(self, physics: Any, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """The default pose, each arm joint offset by up to ``init_joint_noise`` inside its range, at rest."""
        qpos = self.rest_qpos.expand(self.num_envs, -1).clone()
        noise = torch.rand(self.num_envs, self.action_dim, generator=gen, device=self.device) * 2 - 1
        start = qpos[:, self.arm_qadr] + self.cfg.init_joint_noise * noise
        qpos[:, self.arm_qadr] = torch.minimum(torch.maximum(start, self.arm_limits[0]), self.arm_limits[1])
        return qpos, torch.zeros(self.num_envs, physics.model.nv, device=self.device)

    def reset_rows(self, rows: torch.Tensor, gen: torch.Generator) -> None:
        """A fresh target, no last action and no held steps for ``rows``."""
        self.target = torch.where(rows[:, None], self.sample_targets(gen), self.target)
        self.last_action = self.last_action.masked_fill(rows[:, None], 0.0)
        self.held = self.held.masked_fill(rows, 0)

    def sample_obs_noise(self, gen: torch.Generator) -> torch.Tensor | None:
        """Uniform [-1, 1] noise for one step's policy observation, shared by ``final_obs`` and ``obs``."""
        if self.cfg.obs_noise <= 0:
            return None
        return torch.rand(self.num_envs, self.obs_dims["policy"], generator=gen, device=self.device) * 2 - 1

    def joint_targets(self, actions: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        """Clipped actions, scaled, as offsets of the arm joints' targets from the default pose; the gripper
        holds its default."""
        self._action = actions.clamp(-self.cfg.clip_actions, self.cfg.clip_actions)
        offsets = torch.nn.functional.pad(self.action_scale * self._action, (0, self.arm.num_joints - self.action_dim))
        return self.default_pose + offsets

    def evaluate(self, physics: Any, episode_length: torch.Tensor,
                 gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """Rewards and the success state for this step's pose; then the last action moves on and the rows
        whose timer is due get a new target."""
        c, s = self.cfg, self.signals(physics)
        distance = (s["ee_pos"] - self.target[:, :3]).norm(dim=-1)
        angle = quat_angle(s["ee_quat"], self.target[:, 3:])
        self.held = held_steps(self.held, (distance < c.success_distance) & (angle < c.success_angle))
        terms = reach_terms(distance, angle, self._action, self.last_action, s["joint_vel"][:, :self.action_dim],
                            c.position_std, c.position_fine_std, c.orientation_std)
        reward, log = weighted_sum(terms, c.rewards, self.active_rewards, self.step_dt, self.num_envs, self.device)
        self.metrics = {"position_error": distance, "orientation_error": angle}
        self.episode_metrics = {"success_rate": (self.held >= c.success_hold_steps).float()}
        log.update({f"Metrics/{k}": v.mean() for k, v in self.metrics.items()})
        self.last_action = self._action
        if self.resample_every > 0:
            due = episode_length % self.resample_every == 0
            self.target = torch.where(due[:, None], self.sample_targets(gen), self.target)
            self.held = self.held.masked_fill(due, 0)
        s["pose_command"], s["last_action"] = self.target, self.last_action
        self.post_step_signals = s
        return reward, torch.zeros(self.num_envs, dtype=torch.bool, device=self.device), log

    def observe(self, physics: Any, noise: torch.Tensor | None,
                signals: dict[str, torch.Tensor] | None = None) -> dict[str, torch.Tensor]:
        """The observation groups; ``signals``: this state's, already read."""
        s = self.signals(physics) if signals is None else signals
        draw = None if noise is None else (lambda term: noise[:, self._noise_slices[term.name]])
        return {g: compute_obs(terms, s, draw if g == "policy" else None) for g, terms in self.obs_terms.items()}

    def perturb(self, physics: Any, episode_length: torch.Tensor, gen: torch.Generator) -> bool:
        return False  # nothing pushes an arm

    def check_simulation(self) -> None:
        """A fixed base cannot fall through the world."""

    _BUFFERS = ("target", "last_action", "held")

    def get_state(self, physics: Any) -> dict[str, Any]:
        return {k: getattr(self, k).clone() for k in self._BUFFERS}

    def set_state(self, state: dict[str, Any], physics: Any) -> None:
        for k in self._BUFFERS:
            setattr(self, k, state[k].to(self.device).clone())

    def mirror(self) -> None:
        return None  # an arm declares no left/right mirror

    def deploy_metadata(self) -> dict[str, Any]:
        """The bundle's observation layout and action mapping: joint position targets for every actuated
        joint (the gripper's held at its default), and the pose command's frame and workspace."""
        arm = self.arm
        return {
            "robot": arm.name,
            "arm_config": arm.bundle_dict(),
            "obs_terms": [t.to_dict() for t in self.obs_terms["policy"]],
            "joint_names": list(arm.joint_names),
            "default_pose": list(arm.default_pose),
            "action_scale": list(arm.action_scales),
            "action_joints": list(arm.arm_joints),
            "action_clip": self.cfg.clip_actions,
            "kp": list(arm.kp), "kd": list(arm.kd), "torque_limits": list(arm.torque_limits),
            "joint_limits": self.joint_limits.tolist(),
            "control_dt": self.step_dt, "decimation": self.decimation,
            "pose_command": {"frame": arm.base_body, "ee_site": arm.ee_site,
                             "workspace": self.workspace.T.tolist()},
        }


register_task("reach", config=ReachConfig, task=ReachTask)
