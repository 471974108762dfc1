"""What every arm task does the same way, written once: :class:`ArmTask`, the base of ``ReachTask``,
``LiftTask`` and ``InsertTask``.

An arm task (the task contract, ``ctrl_rl.task``) loads its arm (``ctrl_rl.robots.arm``) and, where it has
one, its scene (a lift task's cube, an insert task's peg and socket) into one model; starts each episode from
the default pose with random joint offsets; turns clipped actions into joint position targets (offsets from
the default pose, the joints it does not move held at their rest targets); observes the terms of
``ctrl_rl.robots.terms`` with uniform noise on the policy's group; draws an object's friction and mass per
world (:meth:`ArmTask.randomize_object`); ends each step the same way (:meth:`ArmTask.finish_step`: weighted
rewards, metrics, the success hold); refuses an object below the table (:func:`check_object`); and keeps its
buffers (and randomized model fields) for a checkpoint. A task adds its draws, its signals, its rewards and
its success rule.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, NamedTuple

import mujoco
import numpy as np
import torch

from ctrl_rl.env import SimulationError
from ctrl_rl.robots.arm import ArmRobot, arm_indices, build_arm_model, load_arm, rest_qpos, settled_qpos
from ctrl_rl.robots.robot import SensorLayout
from ctrl_rl.robots.terms import ObsTerm, compute_obs, point_jacobian, quat_conjugate, quat_rotate_inverse
from ctrl_rl.tasks.rewards import weighted_sum

from .arm_config import ArmTaskConfig
from .rewards import held_steps


def check_object(task: str, what: str, pos: torch.Tensor, lowest: float) -> None:
    """A ``SimulationError`` naming the envs where ``pos [N, 3]`` (an object's point, base frame) is not finite
    or lies below ``lowest`` (m; the table is at 0): it fell through the table, which cannot be right."""
    pos = pos.cpu()
    fix = "lower task.kwargs.physics_dt or raise task.kwargs.solver_iterations"
    if not bool(torch.isfinite(pos).all()):
        raise SimulationError(f"{task}: the {what}'s position is not finite in env(s) "
                              f"{(~torch.isfinite(pos).all(-1)).nonzero().flatten().tolist()[:8]}; {fix}")
    fallen = pos[:, 2] < lowest
    if bool(fallen.any()):
        raise SimulationError(f"{task}: the {what} fell through the table in env(s) "
                              f"{fallen.nonzero().flatten().tolist()[:8]} (at {float(pos[:, 2].min()):.3f} m); {fix}")


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
    _RANDOMIZED: ClassVar[tuple[str, ...]] = ()
    """The model fields the task draws per world (:meth:`randomize_object`), saved with the state."""

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
        self._model = model
        self._start_qpos: torch.Tensor | None = None
        self.arm_qadr = torch.as_tensor(arm_indices(model, arm.arm_joints)[0], device=device)
        self.default_pose = self.tensor(arm.default_pose)
        self.rest_targets = self.default_pose.clone()
        """Joint targets at zero action: the default pose (a task may hold its gripper elsewhere)."""
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
        self._nominal: dict[str, torch.Tensor] = {}
        self._joint_frames = self._frame_layout(model) if f"{arm.arm_joints[0]}_frame_pos" in self.sensors else None

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

    def _frame_layout(self, model: mujoco.MjModel) -> tuple[torch.Tensor, ...]:
        """The sensor columns of each arm joint's body frame and the joint's anchor, axis and type in it."""
        ids = [model.joint(j).id for j in self.arm.arm_joints]
        bodies = [int(model.jnt_bodyid[i]) for i in ids]
        if len(set(bodies)) < len(bodies):
            raise ValueError(f"arm {self.arm.name}: point_jacobian reads one joint per body; "
                             f"{[model.joint(i).name for i in ids]} share a body")
        cols = lambda suffix: torch.tensor([list(range(self.sensors[f"{j}_frame_{suffix}"].start,  # noqa: E731
                                                       self.sensors[f"{j}_frame_{suffix}"].stop))
                                            for j in self.arm.arm_joints], device=self.device)
        hinge = model.jnt_type[ids] == mujoco.mjtJoint.mjJNT_HINGE
        return cols("pos"), cols("quat"), self.tensor(model.jnt_pos[ids]), self.tensor(model.jnt_axis[ids]), \
            self.tensor(hinge)

    def point_jacobian(self, sd: torch.Tensor, point: torch.Tensor) -> torch.Tensor:
        """``[N, 3, n_arm]``: how ``point [N, 3]`` (base frame; a point the end effector's body carries, such as a
        held tool's tip) moves per radian of each arm joint, from the joints' body frames in the sensor snapshot
        ``sd`` (:func:`~ctrl_rl.robots.arm.add_joint_frame_sensors`, which the task's scene adds) and
        :func:`~ctrl_rl.robots.terms.point_jacobian`."""
        if self._joint_frames is None:
            raise ValueError(f"{type(self).__name__}: point_jacobian needs the joints' frame sensors; add them in "
                             "the task's scene with ctrl_rl.robots.arm.add_joint_frame_sensors")
        pos_cols, quat_cols, anchor, axis, hinge = self._joint_frames
        pos, quat = sd[:, pos_cols], sd[:, quat_cols]  # [N, n, 3], [N, n, 4]
        inverse = quat_conjugate(quat)  # rotating by q is rotating by the inverse of its conjugate
        return point_jacobian(pos + quat_rotate_inverse(inverse, anchor.expand_as(pos)),
                              quat_rotate_inverse(inverse, axis.expand_as(pos)), hinge, point)

    # -- hooks called by MjVecEnv ----------------------------------------------------------------
    def randomize_model(self, physics: Any, gen: torch.Generator) -> None:
        """Every arm the same."""

    def randomize_object(self, physics: Any, gen: torch.Generator, body: int, geom: int) -> None:
        """Each world's sliding friction of ``geom`` and mass of ``body`` (its inertia scaled with it), uniform in
        ``task.kwargs.object_friction`` and ``object_mass`` (:class:`~.arm_config.ObjectTaskConfig`):
        ``_RANDOMIZED`` must name the three fields."""
        friction, mass = self.cfg.object_friction, self.cfg.object_mass
        if not self._nominal:
            self._nominal = {k: physics.model_field(k).to(self.device) for k in self._RANDOMIZED}
        new = {k: self._nominal[k].clone() for k in ("geom_friction", "body_mass", "body_inertia")}
        drawn = self.uniform(gen, *self.tensor([friction, mass]).T)  # [N, 2]
        new["geom_friction"][:, geom, 0] = drawn[:, 0].to(new["geom_friction"].dtype)
        ratio = drawn[:, 1].to(new["body_mass"].dtype) / new["body_mass"][:, body]
        new["body_mass"][:, body] *= ratio
        new["body_inertia"][:, body] *= ratio[:, None]
        for name, value in new.items():
            physics.set_model_field(name, value)

    def begin_reset(self, physics: Any, rows: torch.Tensor, gen: torch.Generator) -> None:
        """No curriculum."""

    def sample_initial_state(self, physics: Any, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """The default pose, each arm joint offset by up to ``init_joint_noise`` inside its range, at rest."""
        qpos = self.start_qpos().expand(self.num_envs, -1).clone()
        n_arm = len(self.arm.arm_joints)
        noise = torch.rand(self.num_envs, n_arm, generator=gen, device=self.device) * 2 - 1
        start = qpos[:, self.arm_qadr] + self.cfg.init_joint_noise * noise
        qpos[:, self.arm_qadr] = torch.minimum(torch.maximum(start, self.arm_limits[0]), self.arm_limits[1])
        return qpos, torch.zeros(self.num_envs, physics.model.nv, device=self.device)

    def start_qpos(self) -> torch.Tensor:
        """``qpos`` an episode starts from before its joint noise: the default pose, settled for
        ``task.kwargs.settle_s`` under the arm's PD with the rest targets (``ctrl_rl.robots.arm.settled_qpos``;
        computed once, on the first reset, after a subclass has set its rest targets)."""
        if self._start_qpos is None:
            seconds = float(getattr(self.cfg, "settle_s", 0.0))
            qpos = self.rest_qpos.cpu().double().numpy()
            if seconds > 0:
                qpos = settled_qpos(self._model, self.arm, qpos, self.rest_targets.cpu().double().numpy(), seconds)
            self._start_qpos = self.tensor(qpos)
        return self._start_qpos

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
        joints (the gripper, when the policy does not move it) hold their rest targets (the default pose unless
        the task sets ``rest_targets``)."""
        self._action = actions.clamp(-self.cfg.clip_actions, self.cfg.clip_actions)
        offsets = torch.nn.functional.pad(self.action_scale * self._action, (0, self.arm.num_joints - self.action_dim))
        return self.rest_targets + offsets

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

    def finish_step(self, terms: dict[str, torch.Tensor], metrics: dict[str, torch.Tensor], success: torch.Tensor,
                    s: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """The end of ``evaluate``: the weighted ``terms`` (``Reward/<name>``), ``metrics`` (``Metrics/<name>``),
        the success hold (``success [N]``: this step's condition; the episode metric ``success_rate`` needs it
        held ``success_hold_steps``), the last action moved on and ``s`` kept as the post-step signals.
        Returns ``evaluate``'s reward, terminations (none) and log."""
        c, self.metrics = self.cfg, metrics
        self.held = held_steps(self.held, success)
        self.episode_metrics = {"success_rate": (self.held >= c.success_hold_steps).float()}
        weighted, log = weighted_sum(terms, c.rewards, self.active_rewards, self.step_dt, self.num_envs, self.device)
        log.update({f"Metrics/{k}": v.mean() for k, v in metrics.items()})
        self.last_action = s["last_action"] = self._action
        self.post_step_signals = s
        return weighted, torch.zeros_like(self.held, dtype=torch.bool), log

    def check_simulation(self) -> None:
        """A fixed base cannot fall through the world."""

    def get_state(self, physics: Any) -> dict[str, Any]:
        state = {k: getattr(self, k).clone() for k in self._BUFFERS}
        if self._RANDOMIZED:
            state["model"] = {k: physics.model_field(k) for k in self._RANDOMIZED}
        return state

    def set_state(self, state: dict[str, Any], physics: Any) -> None:
        for k in self._BUFFERS:
            setattr(self, k, state[k].to(self.device).clone())
        for k, v in state.get("model", {}).items():
            physics.set_model_field(k, v)

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
            "rest_targets": [*arm.default_pose[:self.action_dim],  # float64, inside the limits the node clamps to
                             *np.clip(self.rest_targets[self.action_dim:].cpu().double().numpy(),
                                      *self.joint_limits[self.action_dim:].T).tolist()],
            "action_scale": list(arm.action_scales),
            "action_joints": list(arm.joint_names[:self.action_dim]),
            "action_clip": self.cfg.clip_actions,
            "kp": list(arm.kp), "kd": list(arm.kd), "torque_limits": list(arm.torque_limits),
            "joint_limits": self.joint_limits.tolist(),
            "control_dt": self.step_dt, "decimation": self.decimation,
        }
