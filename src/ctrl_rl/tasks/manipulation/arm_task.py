"""What every arm task does the same way, written once: :class:`ArmTask`, the base of ``ReachTask`` and
``LiftTask``.

An arm task (the task contract, ``ctrl_rl.task``) loads its arm (``ctrl_rl.robots.arm``) and, where it has
one, its scene (a lift task's cube) into one model; starts each episode from the default pose with random
joint offsets; turns clipped actions into joint position targets (offsets from the default pose, the
joints it does not move held at their defaults); observes the terms of ``ctrl_rl.robots.terms`` with
uniform noise on the policy's group; and keeps its buffers for a checkpoint. A task adds its draws, its
signals, its rewards and its success rule.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, NamedTuple

import mujoco
import torch

from ctrl_rl.robots.arm import ArmRobot, arm_indices, build_arm_model, load_arm, rest_qpos
from ctrl_rl.robots.robot import SensorLayout
from ctrl_rl.robots.terms import ObsTerm, compute_obs

from .arm_config import ArmTaskConfig


class ArmLayout(NamedTuple):
    """What ``build_model`` hands the task: the arm it loaded and its sensors' slices of ``sensordata``."""

    arm: ArmRobot
    sensors: SensorLayout


class ArmTask:
    """The shared part of an arm task; a subclass sets :attr:`obs_terms` with :meth:`set_obs_terms` and
    implements ``evaluate`` (and draws what it samples in ``reset_rows``)."""

    action_bounds = None  # Gaussian actions, clipped at clip_actions inside the task
    graph_safe = True
    """No host reads in the step hooks; the physics only through ``write_rows`` and ``sensordata``."""
    robot = None  # an arm has no legged robot's derived size (the bundle carries ``arm_config``)
    _BUFFERS: ClassVar[tuple[str, ...]] = ("last_action", "held")
    """The buffers a later step reads: what :meth:`get_state` saves."""

    def __init__(self, cfg: ArmTaskConfig, model: mujoco.MjModel, layout: ArmLayout, num_envs: int,
                 device: torch.device, action_dim: int) -> None:
        """``action_dim``: how many of the arm's actuated joints (``arm_joints``, then ``gripper_joints``)
        the policy moves, from the first."""
        self.cfg, self.arm, self.sensors = cfg, layout.arm, layout.sensors
        self.num_envs, self.device, self.action_dim = num_envs, device, action_dim
        arm, n_arm = self.arm, len(self.arm.arm_joints)
        self.decimation = int(cfg.decimation)
        self.step_dt = float(model.opt.timestep) * self.decimation
        self.max_episode_length = int(math.ceil(cfg.episode_length_s / self.step_dt))
        self.rest_qpos = self.tensor(rest_qpos(model, arm))
        self.arm_qadr = torch.as_tensor(arm_indices(model, arm.arm_joints)[0], device=device)
        self.default_pose = self.tensor(arm.default_pose)
        self.action_scale = self.tensor(arm.action_scales[:action_dim])
        self.joint_limits = model.jnt_range[[model.joint(j).id for j in arm.joint_names]]
        self.arm_limits = self.tensor(self.joint_limits[:n_arm]).T  # [2, n_arm]
        cols = lambda suffix: torch.tensor([self.sensors[f"{j}{suffix}"].start for j in arm.joint_names],  # noqa: E731
                                           device=device)
        self.pos_cols, self.vel_cols = cols("_pos"), cols("_vel")
        self.last_action = torch.zeros(num_envs, action_dim, device=device)
        self._action = torch.zeros(num_envs, action_dim, device=device)
        self.held = torch.zeros(num_envs, dtype=torch.long, device=device)
        """Consecutive steps the task's success condition has held."""
        self.active_rewards = [k for k, w in cfg.rewards.items() if w != 0.0]
        self.out_of_bounds = torch.zeros(num_envs, dtype=torch.bool, device=device)
        self.metrics: dict[str, torch.Tensor] = {}
        self.episode_metrics: dict[str, torch.Tensor] = {}
        self.post_step_signals: dict[str, torch.Tensor] | None = None

    def tensor(self, x: Any) -> torch.Tensor:
        """``x`` as float32 on the task's device."""
        return torch.as_tensor(x, dtype=torch.float32, device=self.device)

    def set_obs_terms(self, policy: Sequence[ObsTerm], critic_extra: Sequence[ObsTerm] = ()) -> None:
        """The policy's terms (noisy in training) and, with ``critic_extra``, a critic group of the same terms
        without noise plus those (privileged inputs)."""
        self.obs_terms: dict[str, tuple[ObsTerm, ...]] = {"policy": tuple(policy)}
        if critic_extra:
            self.obs_terms["critic"] = tuple(ObsTerm(t.name, t.dim, t.scale) for t in policy) + tuple(critic_extra)
        self.obs_dims = {g: sum(t.dim for t in terms) for g, terms in self.obs_terms.items()}
        ends = torch.tensor([0] + [t.dim for t in policy]).cumsum(0).tolist()
        self._noise_slices = {t.name: slice(a, b) for t, a, b in zip(policy, ends, ends[1:], strict=False)}

    def joint_terms(self) -> tuple[ObsTerm, ObsTerm]:
        """``joint_pos_rel`` and ``joint_vel`` of every actuated joint (noise 0.01 rad, 0.5 rad/s times
        ``obs_noise``; velocities x 0.05)."""
        n, noise = self.arm.num_joints, self.cfg.obs_noise
        return ObsTerm("joint_pos_rel", n, noise=0.01 * noise), ObsTerm("joint_vel", n, scale=0.05, noise=0.5 * noise)

    @classmethod
    def scene(cls, cfg: Any) -> Callable[[mujoco.MjSpec], None] | None:
        """The task's edit of the arm's spec (its objects and their sensors); None: the arm alone."""
        return None

    @classmethod
    def build_model(cls, cfg: Any, robot: None, visuals: bool = False) -> tuple[mujoco.MjModel, ArmLayout]:
        """The arm of ``cfg.arm`` on its table (``ctrl_rl.robots.arm.build_arm_model``) with the task's scene."""
        arm = load_arm(cfg.arm)
        model, sensors = build_arm_model(arm, visuals=visuals, scene=cls.scene(cfg))
        return model, ArmLayout(arm, sensors)

    def render_model(self) -> mujoco.MjModel:
        """The training model with the arm's visual meshes."""
        return type(self).build_model(self.cfg, None, visuals=True)[0]

    # -- draws and signals -------------------------------------------------------------------------
    def uniform(self, gen: torch.Generator, low: torch.Tensor, high: torch.Tensor) -> torch.Tensor:
        """``[N, len(low)]`` uniform between ``low`` and ``high``."""
        u = torch.rand(self.num_envs, low.shape[-1], generator=gen, device=self.device)
        return low + (high - low) * u

    def snapshot(self, physics: Any) -> torch.Tensor:
        """``[N, nsensordata]`` float32: one copy of the sensors, which every signal of a step is read from."""
        return physics.sensordata.to(torch.float32, copy=True)

    def arm_signals(self, sd: torch.Tensor) -> dict[str, torch.Tensor]:
        """The arm's named signals (``ctrl_rl.robots.terms``) in the sensor snapshot ``sd``."""
        return {"joint_pos": sd[:, self.pos_cols], "joint_vel": sd[:, self.vel_cols], "default_pose": self.default_pose,
                "last_action": self.last_action, "ee_pos": sd[:, self.sensors["ee_pos"]],
                "ee_quat": sd[:, self.sensors["ee_quat"]]}

    # -- hooks called by MjVecEnv ----------------------------------------------------------------
    def randomize_model(self, physics: Any, gen: torch.Generator) -> None:
        """Every arm the same."""

    def begin_reset(self, physics: Any, rows: torch.Tensor, gen: torch.Generator) -> None:
        """No curriculum."""

    def sample_initial_state(self, physics: Any, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """The default pose, each arm joint offset by up to ``init_joint_noise`` inside its range, at rest."""
        qpos = self.rest_qpos.expand(self.num_envs, -1).clone()
        n_arm = len(self.arm.arm_joints)
        noise = torch.rand(self.num_envs, n_arm, generator=gen, device=self.device) * 2 - 1
        start = qpos[:, self.arm_qadr] + self.cfg.init_joint_noise * noise
        qpos[:, self.arm_qadr] = torch.minimum(torch.maximum(start, self.arm_limits[0]), self.arm_limits[1])
        return qpos, torch.zeros(self.num_envs, physics.model.nv, device=self.device)

    def reset_rows(self, rows: torch.Tensor, gen: torch.Generator) -> None:
        """No last action and no held steps for ``rows``."""
        self.last_action = self.last_action.masked_fill(rows[:, None], 0.0)
        self.held = self.held.masked_fill(rows, 0)

    def sample_obs_noise(self, gen: torch.Generator) -> torch.Tensor | None:
        """Uniform [-1, 1] noise for one step's policy observation, shared by ``final_obs`` and ``obs``."""
        if self.cfg.obs_noise <= 0:
            return None
        return torch.rand(self.num_envs, self.obs_dims["policy"], generator=gen, device=self.device) * 2 - 1

    def joint_targets(self, actions: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        """Clipped actions, scaled, as offsets of the moved joints' targets from the default pose; the other
        joints (the gripper, when the policy does not move it) hold their defaults."""
        self._action = actions.clamp(-self.cfg.clip_actions, self.cfg.clip_actions)
        offsets = torch.nn.functional.pad(self.action_scale * self._action, (0, self.arm.num_joints - self.action_dim))
        return self.default_pose + offsets

    def observe(self, physics: Any, noise: torch.Tensor | None,
                signals: dict[str, torch.Tensor] | None = None) -> dict[str, torch.Tensor]:
        """The observation groups; ``signals``: this state's, already read."""
        s = self.signals(physics) if signals is None else signals
        draw = None if noise is None else (lambda term: noise[:, self._noise_slices[term.name]])
        return {g: compute_obs(terms, s, draw if g == "policy" else None) for g, terms in self.obs_terms.items()}

    def signals(self, physics: Any) -> dict[str, torch.Tensor]:
        """Every named signal of the task's terms, from one sensor snapshot (a task adds its own)."""
        return self.arm_signals(self.snapshot(physics))

    def perturb(self, physics: Any, episode_length: torch.Tensor, gen: torch.Generator) -> bool:
        return False  # nothing pushes an arm

    def check_simulation(self) -> None:
        """A fixed base cannot fall through the world."""

    def get_state(self, physics: Any) -> dict[str, Any]:
        return {k: getattr(self, k).clone() for k in self._BUFFERS}

    def set_state(self, state: dict[str, Any], physics: Any) -> None:
        for k in self._BUFFERS:
            setattr(self, k, state[k].to(self.device).clone())

    def mirror(self) -> None:
        return None  # an arm declares no left/right mirror

    def deploy_metadata(self) -> dict[str, Any]:
        """The bundle's observation layout and action mapping: joint position targets for every actuated
        joint (those the policy does not move held at their defaults)."""
        arm = self.arm
        return {
            "robot": arm.name,
            "arm_config": arm.bundle_dict(),
            "obs_terms": [t.to_dict() for t in self.obs_terms["policy"]],
            "joint_names": list(arm.joint_names),
            "default_pose": list(arm.default_pose),
            "action_scale": list(arm.action_scales),
            "action_joints": list(arm.joint_names[:self.action_dim]),
            "action_clip": self.cfg.clip_actions,
            "kp": list(arm.kp), "kd": list(arm.kd), "torque_limits": list(arm.torque_limits),
            "joint_limits": self.joint_limits.tolist(),
            "control_dt": self.step_dt, "decimation": self.decimation,
        }
