"""Velocity tracking on generated rough terrain with a curriculum (``quadruped_velocity_rough``).

The flat task (``locomotion.py``) on the terrain grid of ``ctrl_rl.robots.terrain`` (slopes, stairs,
rough ground, blocks), plus what rough ground needs, in the legged_gym / Isaac Lab tradition:

* spawns on the platform of the env's sub-terrain, with a random heading; the curriculum
  (``curriculum.py``) picks the row at every reset from how far the last episode went;
* a height scan around the base (``height_scan.py``) in the critic; the actor is blind by
  default (``actor_height_scan=true`` gives it a noisy scan, which a robot must then supply);
* base height measured over the ground below the base, not over z = 0;
* legs collide with the terrain (on flat ground only feet and trunk need to), so a policy
  cannot walk its shins through a stair edge;
* leaving the grid is a time-out (truncation, bootstrapped), as Isaac Lab's
  ``terrain_out_of_bounds``: the robot did nothing wrong.

On ctrl_quad by default (docs/terrain.md); runs on sim=mujoco (CPU threads, its default) or sim=mjwarp;
tuned settings per learner: ``tune/<algo>_quadruped_velocity_rough.yaml``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

import mujoco
import numpy as np
import torch

from ctrl_rl.mirror import SignedPerm, pair_points
from ctrl_rl.robots.robot import RobotConfig, SensorLayout, build_model
from ctrl_rl.robots.terms import ObsTerm
from ctrl_rl.robots.terrain import Terrain, TerrainConfig, add_limb_colliders, add_to_spec, generate
from ctrl_rl.tasks import register_task

from .curriculum import TerrainCurriculum
from .height_scan import HeightScanConfig, HeightScanner
from .locomotion import DEFAULT_REWARDS, GAIT_RECIPE_TERMS, VelocityTask, VelocityTaskConfig

ROUGH_REWARDS = {**DEFAULT_REWARDS, "orientation": -1.0, "feet_air_time": 0.125,
                 **dict.fromkeys(GAIT_RECIPE_TERMS, 0.0)}
"""The flat weights with Isaac Lab's rough-terrain changes: slopes tilt the base, so its orientation
penalty is mild, and air time matters less than footing. Without the flat recipe's gait terms, as
measured (BENCHMARKS.md): its base height and foot clearance read heights above the world's z = 0,
not above the terrain under the robot."""


@dataclass
class RoughVelocityTaskConfig(VelocityTaskConfig):
    """The flat task's parameters plus the terrain, the curriculum and the height scan."""

    reward_defaults: ClassVar[dict[str, float]] = ROUGH_REWARDS
    rewards: dict[str, float] = field(default_factory=lambda: dict(ROUGH_REWARDS))
    """Reward term -> weight per second (0 disables a term)."""
    heading_stiffness: float = 0.0
    """Heading hold (1/s); off on rough terrain, whose preset was trained and measured with a plain yaw-rate
    command (the flat recipe's hold is not yet measured there)."""
    terrain: TerrainConfig = field(default_factory=TerrainConfig)
    """The terrain grid (``task.kwargs.terrain.<name>``; see ``ctrl_rl.robots.terrain.TerrainConfig``)."""
    curriculum: bool = True
    """Move envs between difficulty rows by how far they walk (off: every env on a random row, fixed)."""
    max_init_level: int = 5
    """Curriculum: envs start on rows 0..this."""
    spawn_radius: float = 0.5
    """Spawn within +-this (m) of the platform's centre, in x and y."""
    height_scan: HeightScanConfig = field(default_factory=HeightScanConfig)
    """The scan grid (``task.kwargs.height_scan.<name>``; see ``ctrl_rl.tasks.locomotion.height_scan``)."""
    actor_height_scan: bool = False
    """Give the actor the (noisy) scan too; the deploy node then needs a height-map source."""
    limb_collisions: bool = True
    """Every robot geom collides with the terrain (not only feet and trunk)."""
    bounds_margin: float = 1.0
    """An episode is truncated when the base comes this close (m) to the edge of the terrain."""

    def __post_init__(self) -> None:
        if isinstance(self.terrain, Mapping):
            self.terrain = TerrainConfig.from_dict(dict(self.terrain))
        if isinstance(self.height_scan, Mapping):
            self.height_scan = HeightScanConfig.from_dict(dict(self.height_scan))
        super().__post_init__()
        if self.spawn_radius < 0 or self.spawn_radius > self.terrain.platform / 2:
            raise ValueError(f"task.kwargs.spawn_radius must be in [0, terrain.platform / 2 = "
                             f"{self.terrain.platform / 2}], got {self.spawn_radius}")


class RoughVelocityTask(VelocityTask):
    """:class:`VelocityTask` on the terrain grid, with the curriculum and the height scan."""

    cfg: RoughVelocityTaskConfig
    graph_safe = False  # the height scan casts rays through the physics inside observe; the curriculum reads the host

    @classmethod
    def build_model(cls, cfg: VelocityTaskConfig, robot: RobotConfig,
                    visuals: bool = False) -> tuple[mujoco.MjModel, SensorLayout]:
        assert isinstance(cfg, RoughVelocityTaskConfig)
        terrain = generate(cfg.terrain)

        def scene(spec: mujoco.MjSpec) -> None:
            add_to_spec(spec, terrain)
            if cfg.limb_collisions:
                add_limb_colliders(spec)

        return build_model(robot, scene, visuals=visuals)

    def __init__(self, cfg: RoughVelocityTaskConfig, robot: RobotConfig, model: mujoco.MjModel,
                 layout: SensorLayout, num_envs: int, device: torch.device) -> None:
        self.terrain: Terrain = generate(cfg.terrain)
        self.scan_offset = robot.init_height if cfg.height_scan.offset is None else float(cfg.height_scan.offset)
        self.cfg = cfg
        super().__init__(cfg, robot, model, layout, num_envs, device)
        t = self.terrain
        self.curriculum = TerrainCurriculum(num_envs, cfg.terrain.num_rows, cfg.terrain.num_cols,
                                            cfg.max_init_level, cfg.curriculum, device)
        self.origins = torch.as_tensor(t.origins, dtype=torch.float32, device=device)
        self.spawn_xy = torch.zeros(num_envs, 2, device=device)
        (x0, y0), h = t.corner, t.cfg.horizontal_scale
        m = cfg.bounds_margin
        self.bounds = (x0 + m, y0 + m, x0 + (t.heights.shape[0] - 1) * h - m, y0 + (t.heights.shape[1] - 1) * h - m)
        self.scanner: HeightScanner | None = None  # needs the physics: built on first use
        self._fresh = True

    # -- observation --------------------------------------------------------------------------
    def _scan_term(self, noise: float) -> ObsTerm:
        sc = self.cfg.height_scan
        return ObsTerm("height_scan", sc.num_rays, scale=sc.scale, clip=sc.clip * sc.scale, noise=noise)

    def extra_policy_terms(self) -> tuple[ObsTerm, ...]:
        scan = (self._scan_term(self.cfg.height_scan.noise * self.cfg.obs_noise),) if self.cfg.actor_height_scan \
            else ()
        return super().extra_policy_terms() + scan

    def extra_critic_terms(self) -> tuple[ObsTerm, ...]:
        return super().extra_critic_terms() + (self._scan_term(0.0),)

    def mirror_parts(self) -> dict[str, SignedPerm]:
        grid = self.cfg.height_scan.grid()
        return {**super().mirror_parts(), "scan": SignedPerm(pair_points(grid), np.ones(len(grid)))}

    def _scanner(self, physics: Any) -> HeightScanner:
        if self.scanner is None:
            method = self.cfg.height_scan.method
            if method == "auto":
                method = "ray" if physics.batched_rays else "lookup"
            self.scanner = HeightScanner(self.cfg.height_scan, self.terrain, physics, method)
        return self.scanner

    def signals(self, physics: Any) -> dict[str, torch.Tensor]:
        s = super().signals(physics)
        pos = s["_base_pos"]
        ground = self.terrain.height_at(pos[:, 0], pos[:, 1])
        s["base_height"] = (pos[:, 2] - ground)[:, None]
        s["height_scan"] = self._scanner(physics).scan(pos, s["imu_quat"], self.scan_offset)
        return s

    # -- resets -------------------------------------------------------------------------------
    def randomize_model(self, physics: Any, gen: torch.Generator) -> None:
        super().randomize_model(physics, gen)
        self._fresh = True  # a full reset: the curriculum starts over at the next begin_reset

    def begin_reset(self, physics: Any, rows: torch.Tensor, gen: torch.Generator) -> None:
        """Promote or demote the finishing envs (distance from their spawn point), or start afresh."""
        if self._fresh:
            self.curriculum.start(gen)
            self._fresh = False
            return
        pos = physics.sensordata[:, self.layout["base_pos"]].float()
        walked = (pos[:, :2] - self.spawn_xy).norm(dim=-1)
        commanded = self.commands[:, :2].norm(dim=-1) * self.cfg.episode_length_s
        self.curriculum.update(rows, walked, commanded, self.cfg.terrain.size, gen)

    def sample_initial_state(self, physics: Any, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """The flat task's pose, moved onto the env's sub-terrain platform with a random heading."""
        qpos, qvel = super().sample_initial_state(physics, gen)
        n, r = self.num_envs, self.cfg.spawn_radius
        origin = self.origins[self.curriculum.levels, self.curriculum.types]
        xy = origin[:, :2] + self._uniform(gen, -r, r, n, 2)
        yaw = self._uniform(gen, -math.pi, math.pi, n)
        qpos[:, 0:2] = xy
        qpos[:, 2] = self.terrain.height_at(xy[:, 0], xy[:, 1]) + self.robot.init_height
        qpos[:, 3:7] = torch.stack([torch.cos(yaw / 2), torch.zeros_like(yaw), torch.zeros_like(yaw),
                                    torch.sin(yaw / 2)], -1)
        self._spawn_candidates = xy
        return qpos, qvel

    def reset_rows(self, rows: torch.Tensor, gen: torch.Generator) -> None:
        super().reset_rows(rows, gen)
        self.spawn_xy = torch.where(rows[:, None], self._spawn_candidates, self.spawn_xy)

    # -- step ---------------------------------------------------------------------------------
    def evaluate(self, physics: Any, episode_length: torch.Tensor,
                 gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, dict]:
        reward, terminated, log = super().evaluate(physics, episode_length, gen)
        pos = self.post_step_signals["_base_pos"]
        x0, y0, x1, y1 = self.bounds
        self.out_of_bounds = (pos[:, 0] < x0) | (pos[:, 0] > x1) | (pos[:, 1] < y0) | (pos[:, 1] > y1)
        log.update(self.curriculum.log(self.terrain.types))
        return reward, terminated, log

    def deploy_metadata(self) -> dict[str, Any]:
        """The flat task's bundle data, plus the terrain (the sim2sim bridge rebuilds it) and the scan grid."""
        meta = super().deploy_metadata()
        meta["terrain"] = asdict(self.cfg.terrain)
        meta["limb_collisions"] = self.cfg.limb_collisions
        if self.cfg.actor_height_scan:
            sc = self.cfg.height_scan
            meta["height_scan"] = {"points": sc.grid().tolist(), "offset": self.scan_offset, "frame": "yaw"}
        return meta

    # -- state --------------------------------------------------------------------------------
    def get_state(self, physics: Any) -> dict[str, Any]:
        state = super().get_state(physics)
        state["curriculum"] = self.curriculum.state_dict()
        state["spawn_xy"] = self.spawn_xy.clone()
        state["fresh"] = self._fresh
        return state

    def set_state(self, state: dict[str, Any], physics: Any) -> None:
        super().set_state(state, physics)
        self.curriculum.load_state_dict(state["curriculum"])
        self.spawn_xy = state["spawn_xy"].to(self.device).clone()
        self._fresh = bool(state["fresh"])


register_task("quadruped_velocity_rough", config=RoughVelocityTaskConfig, task=RoughVelocityTask)
