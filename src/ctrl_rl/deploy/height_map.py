"""The height map a policy that observes ``height_scan`` needs on a robot: message layout and checks.

A rough-terrain policy trained with ``task.kwargs.actor_height_scan=true`` reads, each control
step, the ground at a fixed grid of points around its base (``ctrl_rl.tasks.locomotion.height_scan``).
On a robot, terrain perception (an elevation map sampled at those points) provides it on one
topic, and the deploy node refuses such a bundle unless that topic is configured.

Message: ``std_msgs/Float64MultiArray`` on ``height_map_topic`` (default ``height_map``).

- ``data``: one value per scan point, the **clearance** of the base over the ground there,
  ``base_z - ground_z`` in metres (positive: ground below the base), in the bundle's point order.
- Points: the bundle's ``height_scan.points`` (metadata), ``[x, y]`` in the **yaw frame** of the
  base (x along the heading, y to the left, centred on the base; the grid turns with the heading,
  not with roll and pitch). For the default 1.6 x 1.0 m grid at 0.1 m: 17 x 11 = 187 points,
  x-major (``x`` varies slowest).
- ``layout``: empty, or the grid as dims ``[("x", 17, 187), ("y", 11, 11)]`` (sizes checked,
  labels not). ``data_offset`` must be 0.
- Unknown cells must be filled by the perception stack (inpainted, as elevation mappers do):
  a NaN makes the whole message malformed.

The node subtracts the bundle's ``height_scan.offset`` (the standing height) as training did.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import messages as m

TERM = "height_scan"
"""The observation term a height map feeds."""


@dataclass(frozen=True)
class HeightMapSpec:
    """The scan a bundle expects: its points, its offset and the grid shape of the message layout."""

    points: np.ndarray
    """``[R, 2]`` scan points (m) in the base's yaw frame, in message order."""
    offset: float
    """Standing height (m) subtracted from each clearance, as in training."""
    shape: tuple[int, int] | None
    """``(nx, ny)`` when the points form an x-major grid (the layout's dims), else None."""

    @classmethod
    def from_metadata(cls, meta: Mapping[str, Any]) -> HeightMapSpec | None:
        """The spec of a bundle whose policy observes ``height_scan``; None for one that does not."""
        terms = [t for t in meta.get("obs_terms", []) if t.get("name") == TERM]
        if not terms:
            return None
        scan = meta.get(TERM)
        if not isinstance(scan, Mapping) or "points" not in scan or "offset" not in scan:
            raise ValueError("the bundle observes height_scan but its metadata lacks height_scan.points/offset: "
                             "re-export it with this ctrl_rl (ctrl-rl export <run>)")
        points = np.asarray(scan["points"], dtype=np.float64).reshape(-1, 2)
        if len(points) != int(terms[0]["dim"]) or not np.all(np.isfinite(points)):
            raise ValueError(f"bundle metadata: height_scan has {len(points)} points for a term of "
                             f"{terms[0]['dim']} values")
        return cls(points, float(scan["offset"]), grid_shape(points))

    @property
    def size(self) -> int:
        return len(self.points)

    def layout(self) -> list[tuple[str, int, int]]:
        """The message layout dims: ``x`` then ``y`` for a grid, one ``point`` dim otherwise."""
        if self.shape is None:
            return [("point", self.size, 1)]
        nx, ny = self.shape
        return [("x", nx, nx * ny), ("y", ny, ny)]

    def message(self, clearance: np.ndarray) -> m.Float64MultiArray:
        """A height-map message from ``[R]`` clearances (what a perception stack publishes)."""
        return m.Float64MultiArray(np.asarray(clearance, dtype=np.float64).copy(), self.layout())

    def parse(self, msg: m.Float64MultiArray, max_abs: float) -> np.ndarray:
        """The policy's ``height_scan`` signal (clearance minus offset) from a message, or a
        ValueError naming what is wrong (size, layout, non-finite, beyond ``max_abs`` metres)."""
        data = np.asarray(msg.data, dtype=np.float64)
        if data.ndim != 1 or data.size != self.size:
            raise ValueError(f"height map has {data.size} values; the bundle's scan has {self.size} points "
                             f"(layout {self.layout()})")
        if msg.data_offset != 0:
            raise ValueError(f"height map has data_offset {msg.data_offset}; it must be 0")
        if msg.dims:
            sizes = [int(d[1]) for d in msg.dims]
            expected = [d[1] for d in self.layout()]
            if sizes != expected and sizes != [self.size]:
                raise ValueError(f"height map layout sizes {sizes} are not the scan grid's {expected}")
        if not np.all(np.isfinite(data)):
            bad = np.flatnonzero(~np.isfinite(data))
            raise ValueError(f"height map has {bad.size} non-finite value(s) (first at point {int(bad[0])}); "
                             "fill unknown cells before publishing")
        worst = float(np.abs(data).max(initial=0.0))
        if worst > max_abs:
            raise ValueError(f"height map clearance {worst:.3g} m exceeds safety.max_height_map {max_abs} m")
        return data - self.offset


def grid_shape(points: np.ndarray) -> tuple[int, int] | None:
    """``(nx, ny)`` if ``points`` is the full x-major grid of its distinct x and y values, else None."""
    xs, ys = np.unique(points[:, 0]), np.unique(points[:, 1])
    if len(xs) * len(ys) != len(points):
        return None
    grid = np.stack(np.meshgrid(xs, ys, indexing="ij"), -1).reshape(-1, 2)
    return (len(xs), len(ys)) if np.allclose(grid, points) else None


def yaw_points(points: np.ndarray, x: float, y: float, yaw: float) -> tuple[np.ndarray, np.ndarray]:
    """World x, y of yaw-frame ``points`` around a base at ``(x, y)`` with heading ``yaw``."""
    c, s = np.cos(yaw), np.sin(yaw)
    return x + c * points[:, 0] - s * points[:, 1], y + s * points[:, 0] + c * points[:, 1]
