"""Height scan: the terrain under a grid of points around the base, as vertical rays see it.

The grid is yaw-aligned (it turns with the robot's heading, not with its roll and pitch),
Isaac Lab's ``GridPattern`` with ``ray_alignment="yaw"``. Each reading is
``base_z - ground_z - offset``: the base's clearance over that point, minus the standing
height so flat ground reads ~0; then noise, clipping and scale as any observation term.

Two ways to find ``ground_z``, chosen by :attr:`HeightScanConfig.method`:

* ``ray``: the backend casts the rays against the terrain geoms. On ``sim=mjwarp`` this is
  ``mujoco_warp.rays`` (one kernel for every env and ray); on ``sim=mujoco`` it is
  ``mj_ray`` per ray from Python (MuJoCo's batched ``mj_multiRay`` casts from one origin
  only, not a grid of parallel rays), ~5 us per ray: fine for a bridge with a few robots,
  far too slow for training thousands.
* ``lookup``: the generated terrain's own surface (``Terrain.height_at``, MuJoCo's
  triangulation of the heightfield, vectorized in torch); equal to the rays to ~1e-7 m on
  heightfield terrain (``tests/test_terrain.py``).

``auto`` (default) takes ``ray`` on mjwarp and ``lookup`` on the CPU backend.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ctrl_rl.robots.terrain import Terrain, checked_keys


@dataclass
class HeightScanConfig:
    """The scan grid and its observation term (``task.kwargs.height_scan.<name>=...``)."""

    size: tuple[float, float] = (1.6, 1.0)
    """Length (along the heading) and width of the grid (m)."""
    resolution: float = 0.1
    """Spacing of the rays (m): the default grid is 17 x 11 = 187 rays."""
    offset: float | None = None
    """Subtracted from the clearance so standing on flat ground reads 0 (None: the robot's init_height)."""
    clip: float = 1.0
    """Readings are clipped to +-this (m) after the offset."""
    noise: float = 0.1
    """Uniform training noise on the policy's scan (m), Isaac Lab's default."""
    scale: float = 1.0
    """Multiplier of the clipped reading."""
    method: str = "auto"
    """``auto`` | ``ray`` | ``lookup`` (see the module docstring)."""

    def __post_init__(self) -> None:
        self.size = tuple(float(v) for v in self.size)
        if len(self.size) != 2 or min(self.size) < 0 or self.resolution <= 0:
            raise ValueError("task.kwargs.height_scan.size must be [length, width] >= 0 and resolution > 0")
        if self.method not in ("auto", "ray", "lookup"):
            raise ValueError(f"task.kwargs.height_scan.method must be auto, ray or lookup, got {self.method!r}")

    @classmethod
    def from_dict(cls, values: dict[str, Any] | None) -> HeightScanConfig:
        return cls(**checked_keys(cls, values, "task.kwargs.height_scan"))

    def grid(self) -> np.ndarray:
        """``[R, 2]`` ray positions (x forward, y left) in the yaw frame, x-major like the terrain."""
        nx = int(round(self.size[0] / self.resolution)) + 1
        ny = int(round(self.size[1] / self.resolution)) + 1
        xs = np.linspace(-self.size[0] / 2, self.size[0] / 2, nx)
        ys = np.linspace(-self.size[1] / 2, self.size[1] / 2, ny)
        return np.stack(np.meshgrid(xs, ys, indexing="ij"), -1).reshape(-1, 2)

    @property
    def num_rays(self) -> int:
        return len(self.grid())


def yaw_of(quat: torch.Tensor) -> torch.Tensor:
    """Heading (rad) of unit quaternions ``[..., 4]`` (w, x, y, z)."""
    w, x, y, z = quat.unbind(-1)
    return torch.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))


class HeightScanner:
    """Scan points in the world and the ground height under them, for one batch of envs."""

    def __init__(self, cfg: HeightScanConfig, terrain: Terrain, physics: Any, method: str) -> None:
        self.cfg, self.terrain, self.physics = cfg, terrain, physics
        self.method = method
        self.local = torch.as_tensor(cfg.grid(), dtype=torch.float32, device=physics.device)
        self.ray_start = float(terrain.heights.max()) + 1.0
        """World height the rays start from, above every terrain point."""

    def points(self, base_pos: torch.Tensor, base_quat: torch.Tensor) -> torch.Tensor:
        """``[N, R, 2]`` world xy of the rays: the grid turned by each base's yaw, centred on it."""
        yaw = yaw_of(base_quat)
        c, s = torch.cos(yaw)[:, None], torch.sin(yaw)[:, None]
        lx, ly = self.local[:, 0], self.local[:, 1]
        return torch.stack([base_pos[:, 0:1] + c * lx - s * ly, base_pos[:, 1:2] + s * lx + c * ly], -1)

    def ground(self, xy: torch.Tensor) -> torch.Tensor:
        """``[N, R]`` terrain height under the points ``[N, R, 2]``."""
        if self.method == "lookup":
            return self.terrain.height_at(xy[..., 0], xy[..., 1])
        start = torch.cat([xy, torch.full_like(xy[..., :1], self.ray_start)], -1)
        dist = self.physics.cast_down(start)
        if bool((dist < 0).any()):  # off the grid: the nearest edge's height, like the lookup
            off = dist < 0
            dist = torch.where(off, self.ray_start - self.terrain.height_at(xy[..., 0], xy[..., 1]), dist)
        return self.ray_start - dist

    def scan(self, base_pos: torch.Tensor, base_quat: torch.Tensor, offset: float) -> torch.Tensor:
        """``[N, R]`` clearances ``base_z - ground - offset`` (before noise, clip and scale)."""
        ground = self.ground(self.points(base_pos, base_quat))
        return base_pos[:, 2:3] - ground - offset
