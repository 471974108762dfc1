"""Headless MuJoCo rendering: GL backend selection and a camera that follows the robot.

``OffscreenRenderer(model)`` wraps :class:`mujoco.Renderer` so a VecEnv can return
``render_frame()`` images without a display. Two things make this harder than it looks:

* MuJoCo picks its GL backend from ``MUJOCO_GL`` when ``mujoco`` is *imported*, and
  PyOpenGL binds its platform (``PYOPENGL_PLATFORM``) when ``OpenGL`` is first imported.
  An env has imported mujoco long before anyone asks for a frame, so :func:`select_gl_backend`
  sets both variables and re-imports MuJoCo's ``gl_context`` module in-process.
* A failed EGL attempt leaves PyOpenGL bound to EGL, so OSMesa could no longer be tried in
  the same process. Candidates are therefore probed in a short subprocess first (once per
  process; the choice is exported in ``MUJOCO_GL`` so child processes skip the probe).

A user-set ``MUJOCO_GL`` is always respected (``egl`` on a GPU machine, ``glfw`` with a display).
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import os
import subprocess
import sys
import weakref
from collections.abc import Iterator

import mujoco
import numpy as np

from ctrl_rl.env import RenderUnavailableError

__all__ = ["DEBIAN_PACKAGES", "OffscreenRenderer", "RenderUnavailableError", "select_gl_backend"]

DEBIAN_PACKAGES = {"egl": "libegl1 libopengl0 libgl1-mesa-dri", "osmesa": "libosmesa6"}
"""Debian 12 packages for each headless backend (``apt-get install --no-install-recommends``).
EGL: the glvnd loader (pulls Mesa's EGL vendor library), the GL dispatch PyOpenGL loads, and
Mesa's DRI drivers (llvmpipe software rasterizer; an NVIDIA driver brings its own EGL vendor).
OSMesa: Mesa's off-screen software GL, a fallback where EGL cannot initialise."""

_CANDIDATES = ("egl", "osmesa")
_OFF = ("disable", "disabled", "off", "false", "0")
_PROBE_CODE = """
import mujoco
m = mujoco.MjModel.from_xml_string('<mujoco><worldbody><geom size="1"/></worldbody></mujoco>')
r = mujoco.Renderer(m, 16, 16)
d = mujoco.MjData(m)
mujoco.mj_forward(m, d)
r.update_scene(d)
r.render()
r.close()
"""
_backend: str | None = None
_live: weakref.WeakSet[OffscreenRenderer] = weakref.WeakSet()
_atexit_registered = False


def _install_hint() -> str:
    return ("install the headless GL libraries: `bash scripts/setup_render.sh` or "
            f"`apt-get install -y --no-install-recommends {DEBIAN_PACKAGES['egl']}` (EGL) "
            f"or `... {DEBIAN_PACKAGES['osmesa']}` (OSMesa); or set MUJOCO_GL yourself")


def _probe(backend: str) -> str | None:
    """``None`` when ``backend`` renders in a fresh interpreter, else the reason it does not."""
    env = {**os.environ, "MUJOCO_GL": backend, "PYOPENGL_PLATFORM": backend,
           "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}  # find mujoco where this process does
    try:
        proc = subprocess.run([sys.executable, "-c", _PROBE_CODE], env=env, capture_output=True,
                              text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return "timed out creating a context"
    if proc.returncode == 0:
        return None
    lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else f"exit code {proc.returncode}"


def _bound_platform() -> str | None:
    """The platform PyOpenGL has already loaded (it cannot change afterwards), or ``None``."""
    platform = getattr(sys.modules.get("OpenGL.platform"), "PLATFORM", None)
    if platform is None:
        return None
    name = type(platform).__name__.lower()
    return next((c for c in _CANDIDATES if c in name), name.removesuffix("platform"))


def _activate(backend: str) -> None:
    """Point MuJoCo (and PyOpenGL, for egl/osmesa) at ``backend`` in this process."""
    os.environ["MUJOCO_GL"] = backend
    if backend in _CANDIDATES and _bound_platform() is None:
        os.environ.setdefault("PYOPENGL_PLATFORM", backend)
    # The module Renderer reads GLContext from (mujoco.rendering.classic.gl_context in 4.x,
    # mujoco.gl_context in 3.x); it chose its class at import time from the old MUJOCO_GL.
    gl_context = sys.modules[mujoco.Renderer.__module__].gl_context
    if getattr(gl_context, "_MUJOCO_GL", backend) != backend:
        gl_context = importlib.reload(gl_context)
        if hasattr(gl_context, "GLContext"):
            mujoco.GLContext = gl_context.GLContext


def select_gl_backend() -> str:
    """The GL backend this process renders with, chosen once: ``MUJOCO_GL`` if set, else egl, else osmesa.

    Raises :class:`RenderUnavailableError` naming the Debian packages when neither works.
    """
    global _backend
    if _backend is not None:
        return _backend
    user = os.environ.get("MUJOCO_GL", "").strip().lower()
    if user in _OFF:
        raise RenderUnavailableError(f"MUJOCO_GL={user} disables rendering; unset it or set MUJOCO_GL=egl")
    if user:
        backend = user
    else:
        platform = _bound_platform() or os.environ.get("PYOPENGL_PLATFORM", "").strip().lower()
        if _bound_platform() not in (None, *_CANDIDATES):
            raise RenderUnavailableError(
                f"PyOpenGL was loaded before rendering was set up, bound to '{platform}'; "
                "start Python with MUJOCO_GL=egl (or osmesa) in the environment")
        candidates = [platform] if platform in _CANDIDATES else list(_CANDIDATES)
        reasons = {}
        for candidate in candidates:
            reason = _probe(candidate)
            if reason is None:
                break
            reasons[candidate] = reason
        else:
            tried = "; ".join(f"{b}: {r}" for b, r in reasons.items())
            raise RenderUnavailableError(f"no headless OpenGL backend works here ({tried}); {_install_hint()}")
        backend = candidate
    try:
        _activate(backend)
    except Exception as exc:  # e.g. an invalid MUJOCO_GL value, rejected by mujoco's gl_context
        raise RenderUnavailableError(f"MUJOCO_GL={backend}: {exc}") from exc
    _backend = backend
    return backend


def _first_free_body(model: mujoco.MjModel) -> int | None:
    """The first body with a free joint (a floating-base robot's root), if any."""
    free = np.flatnonzero(model.jnt_type == int(mujoco.mjtJoint.mjJNT_FREE))
    return int(model.jnt_bodyid[free[0]]) if free.size else None


def _subtree_bodies(model: mujoco.MjModel, body: int) -> np.ndarray:
    """Ids of ``body`` and every body below it."""
    in_subtree = np.zeros(model.nbody, dtype=bool)
    in_subtree[body] = True
    for b in range(body + 1, model.nbody):  # parents come before children
        in_subtree[b] = in_subtree[model.body_parentid[b]]
    return np.flatnonzero(in_subtree)


def _subtree_radius(model: mujoco.MjModel, body: int) -> float:
    """Radius of the body's subtree at ``qpos0``, to frame the whole robot."""
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    in_subtree = np.isin(model.geom_bodyid, _subtree_bodies(model, body))
    geoms = np.flatnonzero(in_subtree & (model.geom_type != int(mujoco.mjtGeom.mjGEOM_PLANE)))
    if not geoms.size:
        return 0.25
    offsets = np.linalg.norm(data.geom_xpos[geoms] - data.subtree_com[body], axis=1)
    return float((offsets + model.geom_rbound[geoms]).max())


@contextlib.contextmanager
def _context_settings(model: mujoco.MjModel, width: int, height: int, multisamples: int | None,
                      shadow_size: int | None) -> Iterator[None]:
    """The model's ``visual`` settings a GL context is made with (MuJoCo reads them only then), restored after."""
    buffer, quality = model.vis.global_, model.vis.quality
    kept = buffer.offwidth, buffer.offheight, quality.offsamples, quality.shadowsize
    buffer.offwidth, buffer.offheight = width, height
    if multisamples is not None:
        quality.offsamples = multisamples
    if shadow_size is not None:
        quality.shadowsize = shadow_size
    try:
        yield
    finally:
        buffer.offwidth, buffer.offheight, quality.offsamples, quality.shadowsize = kept


class OffscreenRenderer:
    """RGB frames of a MuJoCo model without a display.

    ``camera``: ``None`` follows the first free-joint body when there is one (else MuJoCo's
    default free camera), ``"track"`` always follows a body (``track_body`` or the first
    free-joint body), any other string (or an int) names a fixed camera of the model.
    The tracking camera looks at the body's subtree centre of mass from ``distance``
    (default: four times the subtree's radius), ``azimuth`` and ``elevation`` degrees.

    The GL context is made with an offscreen buffer of exactly ``width`` x ``height``, and
    ``multisamples`` and ``shadow_size`` in place of the model's ``visual/quality`` ``offsamples``
    and ``shadowsize`` (``None`` keeps the model's); the model itself is left as it was. The
    defaults are for software GL (Mesa's llvmpipe: every headless machine without a GPU), where
    MuJoCo's 4x multisampling costs each pixel four times and its 4096x4096 shadow map is drawn
    again every frame: ctrl_quad at 640x480 on 2 cores took 105 ms a frame with MuJoCo's defaults
    and 33 ms with these, the same picture but for unsmoothed edges.
    """

    def __init__(self, model: mujoco.MjModel, width: int = 640, height: int = 480,
                 camera: str | int | None = None, *, track_body: str | int | None = None,
                 distance: float | None = None, azimuth: float = 90.0, elevation: float = -20.0,
                 multisamples: int | None = 0, shadow_size: int | None = 1024) -> None:
        if width < 1 or height < 1:
            raise ValueError(f"render size must be positive, got {width}x{height}")
        self.model = model
        self.width, self.height = int(width), int(height)
        self.camera = self._make_camera(camera, track_body, distance, azimuth, elevation)
        self.backend = select_gl_backend()
        try:
            with _context_settings(model, self.width, self.height, multisamples, shadow_size):
                self._renderer: mujoco.Renderer | None = mujoco.Renderer(model, self.height, self.width)
        except Exception as exc:  # missing libraries surface as ImportError/OSError/RuntimeError/GLError
            raise RenderUnavailableError(
                f"cannot create a MuJoCo GL context with MUJOCO_GL={self.backend} ({exc}); {_install_hint()}"
            ) from exc
        self._data = mujoco.MjData(model)
        global _atexit_registered
        if not _atexit_registered:  # after the GL module's own atexit hook (e.g. EGL's eglTerminate): runs before it
            atexit.register(_close_all)
            _atexit_registered = True
        _live.add(self)

    def _make_camera(self, camera: str | int | None, track_body: str | int | None, distance: float | None,
                     azimuth: float, elevation: float) -> mujoco.MjvCamera:
        model, cam = self.model, mujoco.MjvCamera()
        self._subtree: np.ndarray | None = None
        if camera is not None and camera != "track":
            cam_id = camera if isinstance(camera, int) else mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, camera)
            if not 0 <= cam_id < model.ncam:
                names = [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_CAMERA, i) for i in range(model.ncam)]
                raise ValueError(f"no camera {camera!r} in the model; cameras: {names or 'none'} "
                                 "(or camera='track' / None for the tracking camera)")
            cam.type, cam.fixedcamid = mujoco.mjtCamera.mjCAMERA_FIXED, cam_id
            return cam
        if track_body is not None:
            body = track_body if isinstance(track_body, int) else mujoco.mj_name2id(
                model, mujoco.mjtObj.mjOBJ_BODY, track_body)
            if not 0 < body < model.nbody:
                raise ValueError(f"no body {track_body!r} to track in the model")
        else:
            body = _first_free_body(model)
        if body is None:
            if camera == "track":
                raise ValueError("camera='track' needs a body to follow: the model has no free joint; "
                                 "pass track_body=<name>")
            cam.type = mujoco.mjtCamera.mjCAMERA_FREE
            mujoco.mjv_defaultFreeCamera(model, cam)
            return cam
        # A free camera whose look-at point render() moves to the subtree's centre of mass: MuJoCo's
        # tracking camera reads data.subtree_com, which is off when body masses were randomized
        # after compilation (body_subtreemass keeps the compiled masses; metres off far from the origin).
        cam.type, cam.trackbodyid = mujoco.mjtCamera.mjCAMERA_FREE, body
        cam.distance = distance if distance is not None else max(4.0 * _subtree_radius(model, body), 0.5)
        cam.azimuth, cam.elevation = azimuth, elevation
        self._subtree = _subtree_bodies(model, body)
        return cam

    @property
    def tracked_body(self) -> int | None:
        """Id of the body the camera follows, or ``None`` for a fixed or free camera."""
        return None if self._subtree is None else int(self.camera.trackbodyid)

    def render(self, data: mujoco.MjData) -> np.ndarray:
        """``[height, width, 3]`` uint8 image of ``data`` (positions must be current: after mj_step/mj_forward)."""
        if self._renderer is None:
            raise RuntimeError("render() after close()")
        if self._subtree is not None:
            mass = self.model.body_mass[self._subtree]
            self.camera.lookat[:] = (data.xipos[self._subtree] * mass[:, None]).sum(0) / max(mass.sum(), 1e-9)
        self._renderer.update_scene(data, camera=self.camera)
        return self._renderer.render()

    def render_qpos(self, qpos: np.ndarray) -> np.ndarray:
        """Render a configuration alone (e.g. env 0's row of a batched sim): sets qpos, mj_forward, render."""
        qpos = np.asarray(qpos, dtype=np.float64).reshape(-1)
        if qpos.shape[0] != self.model.nq:
            raise ValueError(f"qpos has {qpos.shape[0]} entries; the model has nq={self.model.nq}")
        self._data.qpos[:] = qpos
        mujoco.mj_forward(self.model, self._data)
        return self.render(self._data)

    def close(self) -> None:
        """Free the GL context (also done at exit, before Python tears down PyOpenGL)."""
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None

    def __enter__(self) -> OffscreenRenderer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _close_all() -> None:
    for renderer in list(_live):
        with contextlib.suppress(Exception):  # best effort while the interpreter shuts down
            renderer.close()
