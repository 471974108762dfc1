"""2-D drawings of the torch tasks for ``ctrl-rl play --video``: numpy only, no OpenGL.

A :class:`Canvas` maps a world rectangle (metres, y up) onto an RGB image and fills shapes by
their distance fields on the pixel grid (a segment is a capsule, a point a disc), each edge
anti-aliased over one pixel. A 320x240 frame with a handful of shapes takes well under a
millisecond per shape, which is all a video of a pendulum needs.
"""

from __future__ import annotations

import numpy as np

BACKGROUND = (245, 245, 240)
INK = (40, 40, 48)
ACCENT = (214, 90, 48)
TARGET = (70, 150, 90)


class Canvas:
    """An RGB image of the world rectangle ``[x0, x1] x [y0, y1]`` (uniform scale, centred)."""

    def __init__(self, x0: float, x1: float, y0: float, y1: float, width: int = 320, height: int = 240) -> None:
        self.scale = min(width / (x1 - x0), height / (y1 - y0))  # pixels per metre
        cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
        cols = (np.arange(width) + 0.5 - width / 2) / self.scale + cx
        rows = (height / 2 - np.arange(height) - 0.5) / self.scale + cy
        self.x, self.y = np.meshgrid(cols, rows)
        self.image = np.empty((height, width, 3), np.float32)
        self.image[:] = BACKGROUND

    def _fill(self, distance: np.ndarray, color: tuple[int, int, int]) -> None:
        """Paint where ``distance`` (metres, <= 0 inside) is inside, blending the one-pixel edge."""
        cover = np.clip(0.5 - distance * self.scale, 0.0, 1.0)[..., None]
        self.image += cover * (np.asarray(color, np.float32) - self.image)

    def segment(self, a: tuple[float, float], b: tuple[float, float], width: float,
                color: tuple[int, int, int] = INK) -> None:
        """A capsule of ``width`` metres from ``a`` to ``b``."""
        ax, ay = a
        dx, dy = b[0] - ax, b[1] - ay
        length2 = max(dx * dx + dy * dy, 1e-12)
        t = np.clip(((self.x - ax) * dx + (self.y - ay) * dy) / length2, 0.0, 1.0)
        self._fill(np.hypot(self.x - ax - t * dx, self.y - ay - t * dy) - width / 2, color)

    def disc(self, center: tuple[float, float], radius: float, color: tuple[int, int, int] = INK) -> None:
        self._fill(np.hypot(self.x - center[0], self.y - center[1]) - radius, color)

    def box(self, center: tuple[float, float], half: tuple[float, float], color: tuple[int, int, int] = INK) -> None:
        """An axis-aligned rectangle of half-sizes ``half``."""
        qx, qy = np.abs(self.x - center[0]) - half[0], np.abs(self.y - center[1]) - half[1]
        outside = np.hypot(np.maximum(qx, 0.0), np.maximum(qy, 0.0))
        self._fill(outside + np.minimum(np.maximum(qx, qy), 0.0), color)

    def outline(self, center: tuple[float, float], half: tuple[float, float], width: float,
                color: tuple[int, int, int] = INK) -> None:
        """The border of an axis-aligned rectangle, ``width`` metres thick."""
        (cx, cy), (hx, hy) = center, half
        corners = [(cx - hx, cy - hy), (cx + hx, cy - hy), (cx + hx, cy + hy), (cx - hx, cy + hy)]
        for a, b in zip(corners, corners[1:] + corners[:1], strict=True):
            self.segment(a, b, width, color)

    def rgb(self) -> np.ndarray:
        """The ``[H, W, 3]`` uint8 frame."""
        return np.round(self.image).astype(np.uint8)
