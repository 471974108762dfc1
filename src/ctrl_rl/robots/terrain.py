"""Generated rough terrain: a grid of sub-terrains in one MuJoCo heightfield.

The legged_gym / Isaac Lab layout: rows are difficulty levels (row 0 easiest), columns are
terrain types in configured proportions; every sub-terrain is a square with a flat platform
at its centre where robots spawn. Everything is a pure function of :class:`TerrainConfig`
(numpy, seeded), so the same config gives the same heights on every backend and in the
deploy bridge, and a terrain can be rebuilt from the few numbers a run records.

Geometry: a height ``H[ix, iy]`` (metres) sits at world ``(x0 + ix * h, y0 + iy * h)`` with
``h = horizontal_scale`` and ``(x0, y0) = (-border, -border)``, so sub-terrain ``(row, col)``
spans ``[row * size, (row + 1) * size) x [col * size, (col + 1) * size)``. MuJoCo draws a
heightfield as two triangles per grid cell; :meth:`Terrain.height_at` evaluates exactly that
surface (tests check it against ``mj_ray`` to 1 mm). Stair edges are therefore ramps one
cell wide (10 cm at the default scale), as in any heightfield terrain.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from .terms import namespace

TERRAIN_TYPES = ("flat", "rough", "slope_up", "slope_down", "stairs_up", "stairs_down", "obstacles")
"""Sub-terrain types, in the column order a grid lays them out."""

TERRAIN_GEOM_GROUP = 2
"""Geom group of the terrain: height scans cast rays at this group only (never at robots)."""


@dataclass
class TerrainConfig:
    """The terrain grid (``task.kwargs.terrain.<name>=...``); difficulty ``d`` runs 0 -> 1 over the rows."""

    size: float = 8.0
    """Side of one square sub-terrain (m)."""
    num_rows: int = 10
    """Difficulty levels (rows); row ``i`` has difficulty ``lerp(difficulty, i / (num_rows - 1))``."""
    num_cols: int = 10
    """Columns, shared among the types by ``proportions``."""
    proportions: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_PROPORTIONS))
    """Type -> share of the columns (normalized; types absent or 0 get no column)."""
    difficulty: tuple[float, float] = (0.0, 1.0)
    """Difficulty of the first and the last row (equal values: every row alike, for evaluation)."""
    horizontal_scale: float = 0.1
    """Grid spacing of the heightfield (m); stair edges are ramps this wide."""
    border: float = 4.0
    """Flat margin around the grid (m)."""
    platform: float = 2.0
    """Side of the flat square at each sub-terrain's centre, where robots spawn (m)."""
    slope: tuple[float, float] = (0.0, 0.4)
    """Pyramid slope gradient (rise over run) at difficulty 0 and 1: 0.4 is 21.8 degrees."""
    step_height: tuple[float, float] = (0.03, 0.15)
    """Stair rise at difficulty 0 and 1 (m)."""
    step_width: float = 0.3
    """Stair run (m); a multiple of horizontal_scale keeps every step the same width."""
    roughness: tuple[float, float] = (0.01, 0.06)
    """Rough type: heights uniform in +-this (m) at difficulty 0 and 1."""
    roughness_cell: float = 0.2
    """Rough type: the noise is drawn on a grid this coarse and interpolated (m)."""
    obstacle_height: tuple[float, float] = (0.03, 0.15)
    """Obstacles type: block height at difficulty 0 and 1 (m); blocks rise or sink by it or half of it."""
    obstacle_size: tuple[float, float] = (0.4, 1.2)
    """Obstacles type: block side range (m)."""
    num_obstacles: int = 25
    """Obstacles type: blocks per sub-terrain."""
    seed: int = 0
    """Seed of the random types (rough, obstacles): the same seed gives the same terrain."""

    def __post_init__(self) -> None:
        for name in ("difficulty", "slope", "step_height", "roughness", "obstacle_height", "obstacle_size"):
            lo_hi = tuple(float(v) for v in getattr(self, name))
            if len(lo_hi) != 2 or lo_hi[0] > lo_hi[1] or lo_hi[0] < 0:
                raise ValueError(f"task.kwargs.terrain.{name} must be [low, high] with 0 <= low <= high, "
                                 f"got {list(getattr(self, name))}")
            setattr(self, name, lo_hi)
        unknown = sorted(set(self.proportions) - set(TERRAIN_TYPES))
        if unknown:
            raise ValueError(f"task.kwargs.terrain.proportions: unknown type(s) {unknown}; "
                             f"types: {', '.join(TERRAIN_TYPES)}")
        if any(v < 0 for v in self.proportions.values()) or sum(self.proportions.values()) <= 0:
            raise ValueError("task.kwargs.terrain.proportions must be >= 0 and not all 0, "
                             f"got {self.proportions}")
        if self.num_rows < 1 or self.num_cols < 1:
            raise ValueError("task.kwargs.terrain.num_rows and num_cols must be >= 1")
        if self.horizontal_scale <= 0 or self.size < 4 * self.horizontal_scale:
            raise ValueError("task.kwargs.terrain.horizontal_scale must be > 0 and size >= 4 of it")
        if not 0 <= self.platform < self.size:
            raise ValueError(f"task.kwargs.terrain.platform must be in [0, size={self.size}), got {self.platform}")
        if self.step_width < self.horizontal_scale:
            raise ValueError("task.kwargs.terrain.step_width must be >= horizontal_scale")
        if self.border < 0:
            raise ValueError("task.kwargs.terrain.border must be >= 0")

    @classmethod
    def from_dict(cls, values: dict[str, Any] | None) -> TerrainConfig:
        values = checked_keys(cls, values, "task.kwargs.terrain")
        if "proportions" in values:  # given types replace the defaults: name every type you want
            values["proportions"] = {str(k): float(v) for k, v in dict(values["proportions"]).items()}
        return cls(**values)

    def column_types(self) -> list[str]:
        """Type of each column: largest-remainder shares of ``proportions``, in TERRAIN_TYPES order."""
        weights = np.array([float(self.proportions.get(t, 0.0)) for t in TERRAIN_TYPES])
        share = weights / weights.sum() * self.num_cols
        counts = np.floor(share).astype(int)
        for i in np.argsort(-(share - counts), kind="stable")[: self.num_cols - counts.sum()]:
            counts[i] += 1
        return [t for t, c in zip(TERRAIN_TYPES, counts, strict=True) for _ in range(c)]

    def row_difficulty(self, row: int) -> float:
        lo, hi = self.difficulty
        return lo if self.num_rows == 1 else lo + (hi - lo) * row / (self.num_rows - 1)


def checked_keys(cls: type, values: dict[str, Any] | None, where: str) -> dict[str, Any]:
    """``values`` for dataclass ``cls``: unknown keys refused (naming ``where`` and the valid ones),
    lists turned into tuples (hydra gives lists)."""
    values = dict(values or {})
    valid = {f.name for f in fields(cls)}
    unknown = sorted(set(values) - valid)
    if unknown:
        raise ValueError(f"{where} has no parameter(s) {unknown}; valid: {', '.join(sorted(valid))}")
    return {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}


DEFAULT_PROPORTIONS = {"flat": 0.1, "rough": 0.1, "slope_up": 0.15, "slope_down": 0.15,
                       "stairs_up": 0.2, "stairs_down": 0.2, "obstacles": 0.1}
"""legged_gym's mix in spirit: mostly slopes and stairs, some rough ground and blocks."""


def _lerp(lo_hi: tuple[float, float], d: float) -> float:
    return lo_hi[0] + (lo_hi[1] - lo_hi[0]) * d


def _edge_distance(n: int, h: float) -> np.ndarray:
    """``[n, n]`` distance (m) of each sample to the nearest sub-terrain edge (Chebyshev rings)."""
    x = np.arange(n) * h + h / 2  # samples sit at cell centres of the sub-terrain's own grid
    d = np.minimum(x, n * h - x)
    return np.minimum(d[:, None], d[None, :])


def _flat(cfg: TerrainConfig, d: float, n: int, rng: np.random.Generator) -> np.ndarray:
    return np.zeros((n, n))


def _rough(cfg: TerrainConfig, d: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """Uniform noise in +-roughness on a coarse grid, bilinearly interpolated; flat platform."""
    amp = _lerp(cfg.roughness, d)
    step = max(1, round(cfg.roughness_cell / cfg.horizontal_scale))
    m = n // step + 2
    coarse = rng.uniform(-amp, amp, size=(m, m))
    u = np.arange(n) / step
    i0 = np.floor(u).astype(int)
    f = u - i0
    rows = coarse[i0] * (1 - f)[:, None] + coarse[i0 + 1] * f[:, None]
    heights = rows[:, i0] * (1 - f)[None, :] + rows[:, i0 + 1] * f[None, :]
    return _with_platform(cfg, heights, 0.0)


def _with_platform(cfg: TerrainConfig, heights: np.ndarray, level: float) -> np.ndarray:
    n = heights.shape[0]
    inner = _edge_distance(n, cfg.horizontal_scale) >= (cfg.size - cfg.platform) / 2
    heights[inner] = level
    return heights


def _slope(cfg: TerrainConfig, d: float, n: int, sign: float) -> np.ndarray:
    """A pyramid: height = sign * slope * distance from the edge, flat on the central platform."""
    grade = _lerp(cfg.slope, d)
    run = (cfg.size - cfg.platform) / 2
    return sign * grade * np.minimum(_edge_distance(n, cfg.horizontal_scale), run)


def _stairs(cfg: TerrainConfig, d: float, n: int, sign: float) -> np.ndarray:
    """Concentric square steps (rise ``step_height``, run ``step_width``) up (or down) to the platform."""
    rise = _lerp(cfg.step_height, d)
    run = (cfg.size - cfg.platform) / 2
    steps = int(run // cfg.step_width)
    dist = _edge_distance(n, cfg.horizontal_scale)
    level = np.minimum(np.floor(dist / cfg.step_width), steps)
    return sign * rise * level


def _obstacles(cfg: TerrainConfig, d: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """Random rectangular blocks rising or sinking by +-height or +-height/2; flat platform."""
    height = _lerp(cfg.obstacle_height, d)
    heights = np.zeros((n, n))
    h = cfg.horizontal_scale
    for _ in range(cfg.num_obstacles):
        w, l_ = (int(round(rng.uniform(*cfg.obstacle_size) / h)) for _ in range(2))
        x, y = rng.integers(0, max(1, n - w)), rng.integers(0, max(1, n - l_))
        heights[x:x + w, y:y + l_] = rng.choice([-height, -height / 2, height / 2, height])
    return _with_platform(cfg, heights, 0.0)


SUBTERRAINS: dict[str, Callable[[TerrainConfig, float, int, np.random.Generator], np.ndarray]] = {
    "flat": _flat,
    "rough": _rough,
    "slope_up": lambda c, d, n, r: _slope(c, d, n, 1.0),
    "slope_down": lambda c, d, n, r: _slope(c, d, n, -1.0),
    "stairs_up": lambda c, d, n, r: _stairs(c, d, n, 1.0),
    "stairs_down": lambda c, d, n, r: _stairs(c, d, n, -1.0),
    "obstacles": _obstacles,
}
"""Type -> ``f(cfg, difficulty, samples_per_side, rng) -> heights[n, n]`` (m)."""


@dataclass
class Terrain:
    """A generated grid: heights, the spawn origin and type of every sub-terrain."""

    cfg: TerrainConfig
    heights: np.ndarray
    """``[nx, ny]`` float64 heights (m), x-major; sample ``(i, j)`` is at ``origin + (i, j) * h``."""
    origins: np.ndarray
    """``[num_rows, num_cols, 3]`` centre of each sub-terrain's platform (world x, y, ground z)."""
    types: list[str]
    """Type of each column."""
    _torch_grids: dict[Any, Any] = field(default_factory=dict, repr=False, compare=False)
    """``heights`` as torch tensors, per (device, dtype), made on first use."""

    @property
    def corner(self) -> tuple[float, float]:
        """World (x, y) of sample ``(0, 0)``."""
        return (-self.cfg.border, -self.cfg.border)

    def height_at(self, x: Any, y: Any) -> Any:
        """Ground height under world points (numpy or torch, any shape), on MuJoCo's triangulated surface.

        A cell with corners ``z00 z01 z10 z11`` (row offset = y, column offset = x, as MuJoCo
        stores a heightfield) is split along its ``z00 -> z11`` diagonal into two planes.
        Points outside the grid take the height of its nearest edge.
        """
        xp = namespace(x)
        h, (x0, y0) = self.cfg.horizontal_scale, self.corner
        grid = self._grid_for(x)
        nx, ny = self.heights.shape
        u = xp.clip((x - x0) / h, 0, nx - 1)
        v = xp.clip((y - y0) / h, 0, ny - 1)
        c = xp.clip(xp.floor(u), 0, nx - 2)
        r = xp.clip(xp.floor(v), 0, ny - 2)
        fu, fv = u - c, v - r
        c, r = c.astype(np.int64) if xp is np else c.long(), r.astype(np.int64) if xp is np else r.long()
        z00, z01 = grid[c, r], grid[c + 1, r]
        z10, z11 = grid[c, r + 1], grid[c + 1, r + 1]
        lower = z00 + fu * (z01 - z00) + fv * (z11 - z01)  # triangle (z00, z01, z11): fu >= fv
        upper = z00 + fv * (z10 - z00) + fu * (z11 - z10)  # triangle (z00, z11, z10): fv > fu
        return xp.where(fu >= fv, lower, upper)

    def _grid_for(self, x: Any) -> Any:
        """The heights as the array type (and torch device/dtype) of ``x``, cached per device."""
        if isinstance(x, np.ndarray) or np.isscalar(x):
            return self.heights
        key = (x.device, x.dtype)
        if key not in self._torch_grids:
            import torch

            self._torch_grids[key] = torch.as_tensor(self.heights, dtype=x.dtype, device=x.device)
        return self._torch_grids[key]

    def sub_terrain(self, row: int, col: int) -> np.ndarray:
        """Heights of one sub-terrain ``[n, n]`` (a view)."""
        n, b = self.samples_per_side, self.border_samples
        return self.heights[b + row * n: b + (row + 1) * n, b + col * n: b + (col + 1) * n]

    @property
    def samples_per_side(self) -> int:
        return int(round(self.cfg.size / self.cfg.horizontal_scale))

    @property
    def border_samples(self) -> int:
        return int(round(self.cfg.border / self.cfg.horizontal_scale))


def generate(cfg: TerrainConfig) -> Terrain:
    """Build the grid of ``cfg`` (deterministic: one seeded stream per sub-terrain)."""
    n = int(round(cfg.size / cfg.horizontal_scale))
    b = int(round(cfg.border / cfg.horizontal_scale))
    types = cfg.column_types()
    heights = np.zeros((2 * b + cfg.num_rows * n, 2 * b + cfg.num_cols * n))
    origins = np.zeros((cfg.num_rows, cfg.num_cols, 3))
    seeds = np.random.SeedSequence(cfg.seed).spawn(cfg.num_rows * cfg.num_cols)
    h = cfg.horizontal_scale
    for row in range(cfg.num_rows):
        for col, kind in enumerate(types):
            rng = np.random.default_rng(seeds[row * cfg.num_cols + col])
            sub = SUBTERRAINS[kind](cfg, cfg.row_difficulty(row), n, rng)
            heights[b + row * n: b + (row + 1) * n, b + col * n: b + (col + 1) * n] = sub
            centre = sub[n // 2 - 1: n // 2 + 1, n // 2 - 1: n // 2 + 1]
            origins[row, col] = ((row + 0.5) * cfg.size - h / 2, (col + 0.5) * cfg.size - h / 2, centre.mean())
    return Terrain(cfg, heights, origins, types)


def add_to_spec(spec: Any, terrain: Terrain, *, name: str = "terrain", base_depth: float = 1.0) -> None:
    """Put ``terrain`` into a ``mujoco.MjSpec`` as one heightfield geom, replacing any ground plane.

    The geom collides with every robot geom that has ``contype`` set (``conaffinity=1``) and is
    in :data:`TERRAIN_GEOM_GROUP`, which is what height scans cast rays at.
    """
    import mujoco

    for geom in list(spec.worldbody.geoms):
        if geom.type == mujoco.mjtGeom.mjGEOM_PLANE:
            spec.delete(geom)
    H = terrain.heights
    lo, hi = float(H.min()), float(H.max())
    elevation = max(hi - lo, 1e-6)
    nx, ny = H.shape
    h = terrain.cfg.horizontal_scale
    rx, ry = (nx - 1) * h / 2, (ny - 1) * h / 2
    hfield = spec.add_hfield(name=name, size=[rx, ry, elevation, base_depth], nrow=ny, ncol=nx)
    hfield.userdata = ((H - lo) / elevation).T.astype(np.float32).ravel().tolist()  # row = y, col = x
    x0, y0 = terrain.corner
    material = "grid" if any(m.name == "grid" for m in spec.materials) else ""
    # MuJoCo's near clipping plane is relative to the model's extent, which the grid makes tens of
    # metres: keep it a few centimetres, or a camera following the robot clips the robot away
    extent = math.hypot(nx * h, ny * h) / 2
    spec.visual.map.znear = min(spec.visual.map.znear, 0.02 / extent)
    spec.worldbody.add_geom(name=name, type=mujoco.mjtGeom.mjGEOM_HFIELD, hfieldname=name,
                            pos=[x0 + rx, y0 + ry, lo], contype=1, conaffinity=1, group=TERRAIN_GEOM_GROUP,
                            material=material, rgba=[0.55, 0.6, 0.65, 1.0])


LIMB_COLLIDER_GROUP = 3
"""Geom group of the limb colliders (hidden in renders: the limbs' own geoms show them)."""


def add_limb_colliders(spec: Any) -> int:
    """Chains of touching spheres along every non-colliding capsule of the robot (its limbs).

    Why spheres: MuJoCo Warp 4.0's capsule-heightfield contacts are wrong (a calf 6 cm above flat
    heightfield ground got a 13 cm deep contact and tipped the robot; the CPU backend saw none),
    while sphere-heightfield contacts agree between the backends. Spheres collide with the terrain
    only (``contype`` 1, ``conaffinity`` 0), never with each other. Returns how many were added.
    """
    import mujoco

    from .robot import FOOT_ZONE_MARGIN  # optional extra: mujoco (robot.py); generating terrain is numpy-only

    added = 0
    for body in spec.bodies[1:]:
        feet = [(np.asarray(g.pos), float(g.size[0])) for g in body.geoms
                if g.type == mujoco.mjtGeom.mjGEOM_SPHERE and g.contype != 0]
        on_body = 0  # numbered per body: a body may hold several capsules (the Go1's thighs do)
        for geom in list(body.geoms):
            if geom.type != mujoco.mjtGeom.mjGEOM_CAPSULE or geom.contype != 0 or np.isnan(geom.fromto[0]):
                continue
            a, b, r = np.asarray(geom.fromto[:3]), np.asarray(geom.fromto[3:]), float(geom.size[0])
            count = max(2, int(np.ceil(np.linalg.norm(b - a) / (2 * r))) + 1)
            centres = [a + t * (b - a) for t in np.linspace(0.0, 1.0, count)]
            # keep clear of a foot sphere on the same body: its contact sensor must see the foot alone
            centres = [c for c in centres
                       if all(np.linalg.norm(c - p) >= fr + 2 * r + FOOT_ZONE_MARGIN for p, fr in feet)]
            for centre in centres:
                body.add_geom(name=f"{body.name}_collider_{on_body}", type=mujoco.mjtGeom.mjGEOM_SPHERE,
                              size=[r, 0, 0], pos=centre.tolist(), contype=1, conaffinity=0, condim=3,
                              group=LIMB_COLLIDER_GROUP, mass=0.0, density=0.0, friction=list(geom.friction))
                on_body += 1
                added += 1
    return added


def slope_angle_deg(grade: float) -> float:
    """The angle of a slope given as rise over run."""
    return math.degrees(math.atan(grade))
