"""The parameters of the velocity-tracking tasks (``task.kwargs``), with legged_gym's reward weights."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, ClassVar

import mujoco

from ctrl_rl.robots.action_filter import check_action_filters, check_lowpass
from ctrl_rl.robots.physics import CONES, PhysicsProfile, set_physics
from ctrl_rl.robots.terms import ObsTerm

if TYPE_CHECKING:
    from ctrl_rl.robots.robot import RobotConfig

DEFAULT_REWARDS = {
    "track_lin_vel_xy": 1.0, "track_ang_vel_z": 0.5, "lin_vel_z": -2.0, "ang_vel_xy": -0.05,
    "orientation": -5.0, "torques": -2e-4, "joint_acc": -2.5e-7, "action_rate": -0.01,
    "feet_air_time": 0.25, "joint_pos_limits": -10.0, "base_height": 0.0, "termination": 0.0,
    "track_lin_vel_xy_fine": 0.5, "joint_pose": -0.5, "base_height_ratio": -10.0, "feet_slide": -0.25,
    "feet_clearance": -0.25, "torque_limits": -2.0, "power": -0.01, "action_smoothness": 0.0,
    "gait_contact": 0.0, "feet_swing_height": 0.0,
}
"""legged_gym's Go1 weights, with Isaac Lab's flat-terrain orientation (-5) and air-time (0.25)
weights (why: docs/experiments/quadruped_rewards.md), and the gait terms an owner judges a walk by
(``tasks/locomotion/gait_rewards.py``: posture, foot slip and clearance, torque peaks and power), each
dimensionless, scaled by the robot's standing height, torque limits and mass, so one set of
weights serves every quadruped (docs/experiments/gait_recipe.md)."""
GAIT_RECIPE_TERMS = ("track_lin_vel_xy_fine", "joint_pose", "base_height_ratio", "feet_slide", "feet_clearance",
                     "torque_limits", "power", "action_smoothness")
"""The terms the gait recipe adds to legged_gym's set (``tasks/locomotion/gait_rewards.py``)."""
TRACKING_SIGMA = 0.25  # exp(-err^2 / sigma) tracking kernels, legged_gym's value
FINE_TRACKING_SIGMA = 0.02
"""``track_lin_vel_xy_fine``'s kernel: legged_gym's is flat near zero error (0.05 m/s off costs 1 %), so a
policy keeps a sideways bias that walks it 1.5 m off course per 10 m; this one charges 12 % for it."""


@dataclass
class VelocityTaskConfig:
    """Task parameters (``task.kwargs.<name>=...`` on the command line)."""

    reward_defaults: ClassVar[dict[str, float]] = DEFAULT_REWARDS
    """The reward terms of this task and their default weights (a variant declares its own)."""

    robot: str = "ctrl_quad"
    """Shipped robot name or a robot YAML path (see robots/ctrl_quad.yaml)."""
    episode_length_s: float = 20.0
    """Episode time limit in seconds (truncation)."""
    physics_dt: float = 0.005
    """Physics step (s), replacing the MJCF's ``<option timestep>`` (a different one is reported)."""
    decimation: int = 4
    """Physics steps per control step (5 ms physics -> 50 Hz control)."""
    lin_vel_x: tuple[float, float] = (-1.0, 1.0)
    """Forward velocity command range (m/s), sampled uniformly."""
    lin_vel_y: tuple[float, float] = (-0.5, 0.5)
    """Lateral velocity command range (m/s)."""
    ang_vel_yaw: tuple[float, float] = (-1.0, 1.0)
    """Yaw rate command range (rad/s)."""
    standing_fraction: float = 0.1
    """Fraction of commands that are exactly zero (learn to stand still)."""
    fixed_command: tuple[float, float, float] | None = None
    """Evaluation: every env gets this (vx, vy, yaw rate) command for the whole episode."""
    command_resample_s: float = 10.0
    """Commands are drawn at each reset and again every this many seconds (0: per episode)."""
    clip_actions: float = 10.0
    """Actions are clipped to +-this before scaling (exported with the policy)."""
    action_filter: float = 0.0
    """Low-pass filter on the clipped actions, in [0, 1): the action applied is ``(1 - f) a_t + f a_(t-1)``
    with ``a_(t-1)`` the last applied one (what the ``last_action`` term observes, so the filter's state
    is in the observation). At 50 Hz, 0.5 passes a 2.5 Hz gait at 0.91 of its amplitude and a tick-to-tick
    flip at 1/3. Exported with the policy: the deploy node filters as training did. 0: off."""
    action_lowpass_hz: float = 0.0
    """Second-order Butterworth low-pass on the clipped actions at this cutoff (Hz), instead of
    ``action_filter``: flat over the gait's band, zero at the Nyquist rate (``robots/action_filter.py``). At
    50 Hz, 8 passes a 3 Hz trot at 0.99 and removes a tick-to-tick flip. Exported with the policy. 0: off."""
    friction: tuple[float, float] = (0.5, 1.25)
    """Per-env ground friction coefficient range (randomization; equal bounds: fixed)."""
    added_base_mass: tuple[float, float] = (-1.0, 2.0)
    """Per-env mass added to the base (kg)."""
    kp_scale: tuple[float, float] = (0.9, 1.1)
    """Per-env multiplier of the PD stiffness."""
    kd_scale: tuple[float, float] = (0.9, 1.1)
    """Per-env multiplier of the PD damping."""
    motor_strength: tuple[float, float] = (0.9, 1.1)
    """Per-env multiplier of the motors' output (stiffness and damping together)."""
    push_interval_s: float = 8.0
    """Every this many seconds of an episode the base gets a random velocity kick (0: off)."""
    push_velocity: float = 0.5
    """Maximum xy velocity change of a push (m/s)."""
    max_action_delay: int = 1
    """Per-env action latency drawn from 0..this many control steps at each reset."""
    obs_noise: float = 1.0
    """Multiplier of the per-term observation noise levels (0: no noise)."""
    init_joint_noise: float = 0.1
    """Reset joint angles: default pose +- this (rad)."""
    init_base_vel: float = 0.3
    """Reset base linear/angular velocity: uniform +- this."""
    max_tilt_deg: float = 60.0
    """Terminate when the base tilts more than this from upright."""
    privileged_critic: bool = True
    """Give the critic base velocity, height and foot contacts (asymmetric actor-critic)."""
    only_positive_rewards: bool = True
    """Clip each step's total reward at zero (legged_gym): early falls cannot pay."""
    rewards: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_REWARDS))
    """Reward term -> weight per second (0 disables a term)."""
    policy_terms: tuple[str, ...] | None = None
    """The actor's observation terms, a subset of the default six in their order (None: all six). E.g.
    without ``base_ang_vel``: a proprioceptive policy that needs memory (a history or a recurrent core)."""
    heading_stiffness: float = 1.0
    """Heading hold (1/s): the policy's yaw-rate command is the operator's plus this times the error to
    a heading that the operator's rate advances (``robots/terms.py: heading_hold``), so "straight"
    stays straight; the deploy node runs the same loop on the IMU's yaw. 0: a plain yaw-rate command."""
    pose_tolerance: tuple[float, ...] = (0.15, 0.6)
    """``joint_pose`` tolerances (rad): joints whose mirror flips sign (abduction, roll, yaw: they splay
    the legs), then the others (pitch: they step). A robot without a mirror map gets the second."""
    foot_clearance: float = 0.25
    """``feet_clearance`` swing height target as a fraction of the robot's standing height."""
    torque_soft_limit: float = 0.8
    """``torque_limits`` penalizes torque above this fraction of each motor's limit."""
    joint_limit_margin: float = 0.075
    """``joint_pos_limits`` pays from at least this far (rad) inside each joint stop (or 10 % of the joint's
    half range, if more: ``gait_rewards.py: soft_joint_limits``); the gait report's bar is 0.05 rad."""
    gait_terms_ramp_steps: int = 2400
    """Control steps (of every env) over which the gait recipe's terms grow from 0 to their weights:
    100 iterations of 24 steps. Early actions are random, the recipe's penalties then outweigh every
    positive term, and with ``only_positive_rewards`` a stiff robot (ctrl_quad) got no signal at all
    and learned to fall. A fresh env (``ctrl-rl eval``) starts the ramp again. 0: full weights at once."""
    polish_rewards: dict[str, float] = field(default_factory=dict)
    """Reward term -> weight that replaces ``rewards``' from control step ``polish_start`` on (Isaac Lab's
    ``modify_reward_weight`` curriculum term): the gait recipe's late polish, ``{action_smoothness: -0.3}``
    beside ``algo.polish_max_std`` (a penalty on the applied actions' jerk sees the mean only once the
    exploration noise is small: docs/experiments/gait_recipe.md). Empty: no polish."""
    polish_action_filter: float = 0.0
    """The first-order action filter's weight from ``polish_start`` on (replacing ``action_filter``; 0: none). A
    policy that learned to walk unfiltered adapts to the filter under the polish's low noise, where trained with it
    from the start ctrl_dog did not walk. Evaluation, export and the node run a checkpoint from after
    ``polish_start`` with it (``app/session.py: as_polished``)."""
    polish_start: int = 0
    """Control steps (of every env) before ``polish_rewards`` and ``polish_action_filter`` apply:
    ``algo.polish_start`` iterations times ``algo.num_steps_per_env`` (derived from them when left at 0, checked
    when given, so the two halves start together)."""
    polish_contact: str = ""
    """The contact model from ``polish_start`` on: empty, the task's (``cone``, ``impratio``) throughout; ``mjcf``,
    the robot MJCF's own friction cone and impratio (capped at ``polish_impratio_max``), the model sim2sim and
    the robot are judged on. Nothing changes for an MJCF that asks for the task's (ctrl_quad's, the Go1's
    pyramidal cone at impratio 1); on ctrl_dog (elliptic, impratio 100) the elliptic polish walked 0.05 m/s
    faster in sim2sim than the pyramidal one from the same base, three times of three, for ~0.6 min more on 2
    cores (docs/experiments/gait_recipe.md, runs 63-69). CPU MuJoCo only: MuJoCo Warp compiles the cone into its
    kernels (there, set ``cone`` and ``impratio`` from the start)."""
    polish_impratio_max: float = 10.0
    """``polish_contact: mjcf``'s cap on the MJCF's impratio (mjlab's value for its elliptic-cone tasks; a
    Menagerie quadruped's 100 costs ~25 % more per step than 10 on the elliptic cone, measured on ctrl_dog)."""
    gait_period: float = 0.0
    """Seconds per cycle of a gait clock the policy observes, with the ``gait_contact`` and
    ``feet_swing_height`` terms following it (``tasks/locomotion/gait_clock.py``: a quadruped trots, a
    biped alternates). 0: no clock (then those terms' weights must be 0)."""
    stance_fraction: float = 0.5
    """Each foot's share of the clock's period in stance."""
    swing_height: float = 0.08
    """``feet_swing_height`` target: a swinging foot this high above its standing height (m)."""
    settled_start_fraction: float = 0.0
    """Fraction of resets that start where the robot's own PD gains settle it at the default pose (2.5 s,
    a deploy node's stand-up and hold): a soft robot sags there (the Go1 to half its standing height),
    and that is where the policy takes over on the robot. 0: every reset at the standing height."""
    solver_iterations: int = 10
    """Newton solver iterations per physics step at most (MuJoCo's ``<option iterations>``, replacing
    the MJCF's). ctrl_quad needs 2.7 on average (p99 6), the humanoid 2.3; the solver stops at
    convergence, so the cap only bounds the rare hard step. On a GPU every world waits for the
    slowest, so the MJCF default of 100 is what a batched step can cost (mjlab: 10)."""
    ls_iterations: int = 20
    """Line-search iterations per solver iteration at most (``<option ls_iterations>``; mjlab: 20)."""
    solver_tolerance: float = 1e-8
    """Solver stops when the relative cost improvement is below this (``<option tolerance>``)."""
    cone: str = "pyramidal"
    """Friction cone (``pyramidal``, mjlab's and MuJoCo's default, or ``elliptic``), replacing the MJCF's."""
    impratio: float = 1.0
    """Frictional-to-normal impedance ratio, replacing the MJCF's (above 1 makes friction stiffer, on either
    cone: Menagerie's quadrupeds set 100). ``cone=elliptic impratio=100`` trains on such an MJCF's
    contact model with the task's solver budget, where ``physics: mjcf`` in the robot YAML would keep all of
    its options (docs/robots.md)."""

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.type == "tuple[float, float]" and (len(value) != 2 or float(value[0]) > float(value[1])):
                raise ValueError(f"task.kwargs.{f.name} must be [low, high] with low <= high, got {list(value)}")
        check_action_filters(self.action_filter, self.action_lowpass_hz)
        if self.fixed_command is not None and len(self.fixed_command) != 3:
            raise ValueError(f"task.kwargs.fixed_command must be [vx, vy, yaw_rate], got {list(self.fixed_command)}")
        if self.policy_terms is not None:
            names = [t.name for t in policy_terms(0.0)]
            unknown = [n for n in self.policy_terms if n not in names]
            if unknown or not self.policy_terms:
                raise ValueError(f"task.kwargs.policy_terms must name some of {names}, got {list(self.policy_terms)}")
        if self.gait_terms_ramp_steps < 0:
            raise ValueError(f"task.kwargs.gait_terms_ramp_steps must be >= 0 (e.g. 2400), got "
                             f"{self.gait_terms_ramp_steps}")
        if self.polish_start < 0 or (self.polish_start > 0 and not self.polish_rewards
                                     and not self.polish_action_filter and not self.polish_contact):
            raise ValueError(f"task.kwargs.polish_start must be >= 0 and needs task.kwargs.polish_rewards (e.g. "
                             f"{{action_smoothness: -0.3}}), polish_action_filter or polish_contact, got "
                             f"{self.polish_start}")
        if (self.polish_contact or "") not in ("", "mjcf") or not self.polish_impratio_max > 0:
            raise ValueError(f"task.kwargs.polish_contact must be '' (the task's contact model throughout) or mjcf "
                             f"(the MJCF's from polish_start on), and polish_impratio_max > 0 (e.g. 10), got "
                             f"{self.polish_contact!r}, {self.polish_impratio_max}")
        check_action_filters(self.polish_action_filter, self.action_lowpass_hz, "task.kwargs (polish)")
        if not 0 <= self.settled_start_fraction <= 1:
            raise ValueError(f"task.kwargs.settled_start_fraction must be in [0, 1] (e.g. 0.25), got "
                             f"{self.settled_start_fraction}")
        if self.heading_stiffness < 0 or not 0 < self.foot_clearance <= 1 or not 0 < self.torque_soft_limit <= 1 \
                or len(self.pose_tolerance) != 2 or not all(t > 0 for t in self.pose_tolerance) \
                or not self.joint_limit_margin >= 0:
            raise ValueError("task.kwargs.heading_stiffness must be >= 0 (e.g. 1.0), foot_clearance and "
                             "torque_soft_limit in (0, 1] (e.g. 0.25, 0.8), pose_tolerance > 0 (e.g. [0.15, 0.6]), "
                             "joint_limit_margin >= 0 (e.g. 0.075)")
        if self.decimation < 1 or self.episode_length_s <= 0 or not self.physics_dt > 0:
            raise ValueError("task.kwargs.decimation must be >= 1, episode_length_s and physics_dt > 0")
        check_lowpass(self.action_lowpass_hz, self.physics_dt * self.decimation)
        if self.gait_period < 0 or not 0.0 < self.stance_fraction < 1.0 or self.swing_height < 0:
            raise ValueError("task.kwargs.gait_period must be >= 0 (0: no clock; e.g. 0.5), stance_fraction in "
                             "(0, 1) and swing_height >= 0")
        clocked = [k for k in ("gait_contact", "feet_swing_height") if self.rewards.get(k, 0.0) != 0.0]
        if self.gait_period == 0 and clocked:
            raise ValueError(f"reward term(s) {clocked} follow the gait clock, which task.kwargs.gait_period=0 "
                             "turns off; set their weights to 0 (task.kwargs.rewards.<term>=0) or a period "
                             "(e.g. task.kwargs.gait_period=0.5)")
        if self.cone not in CONES or not self.impratio > 0:
            raise ValueError(f"task.kwargs.cone must be one of {sorted(CONES)} and impratio > 0 (e.g. elliptic, "
                             f"100), got {self.cone!r}, {self.impratio}")
        if self.solver_iterations < 1 or self.ls_iterations < 1 or not self.solver_tolerance >= 0:
            raise ValueError("task.kwargs.solver_iterations and ls_iterations must be >= 1 and solver_tolerance "
                             f">= 0 (e.g. 10, 20, 1e-8), got {self.solver_iterations}, {self.ls_iterations}, "
                             f"{self.solver_tolerance}")

    def apply_physics(self, model: mujoco.MjModel, robot: RobotConfig) -> mujoco.MjModel:
        """The task's physics profile on the compiled ``model`` (every backend steps it): the physics step,
        the solver budget, and the friction cone and impratio (pyramidal, 1 by default) unless the robot's YAML says
        ``physics: mjcf`` (``robots/physics.py``)."""
        set_physics(model, PhysicsProfile(self.physics_dt, self.decimation, self.solver_iterations,
                                          self.ls_iterations, self.solver_tolerance, self.cone, self.impratio), robot)
        return model

    @classmethod
    def from_kwargs(cls, **kwargs: Any) -> VelocityTaskConfig:
        valid = {f.name for f in fields(cls)}
        for key in kwargs:
            if key not in valid:
                raise ValueError(f"this task has no parameter {key!r} (task.kwargs); "
                                 f"valid: {', '.join(sorted(valid))}")
        kw = dict(kwargs)
        for key in ("rewards", "polish_rewards"):
            unknown = set(kw.get(key) or {}) - set(cls.reward_defaults)
            if unknown:
                raise ValueError(f"task.kwargs.{key}: unknown reward term(s) {sorted(unknown)}; terms: "
                                 f"{', '.join(cls.reward_defaults)}")
            if key in kw:
                kw[key] = {k: float(v) for k, v in (kw[key] or {}).items()}
        if "rewards" in kw:
            kw["rewards"] = {**cls.reward_defaults, **kw["rewards"]}
        for key, value in kw.items():
            if isinstance(value, list):
                kw[key] = tuple(value)
        return cls(**kw)


def policy_terms(noise: float) -> tuple[ObsTerm, ...]:
    """The actor's observation: all measurable on the robot (legged_gym scales and noise)."""
    return (
        ObsTerm("base_ang_vel", 3, scale=0.25, clip=100.0, noise=0.2 * noise),
        ObsTerm("projected_gravity", 3, clip=100.0, noise=0.05 * noise),
        ObsTerm("velocity_commands", 3, scale=(2.0, 2.0, 0.25), clip=100.0),
        ObsTerm("joint_pos_rel", 0, clip=100.0, noise=0.01 * noise),
        ObsTerm("joint_vel", 0, scale=0.05, clip=100.0, noise=1.5 * noise),
        ObsTerm("last_action", 0, clip=100.0),
    )
