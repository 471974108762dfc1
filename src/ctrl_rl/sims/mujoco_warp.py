"""MuJoCo Warp: N worlds of one model stepped by warp kernels, on a GPU or on CPU cores.

Why warp: one kernel launch steps every world, so thousands of worlds cost about as much as
one on a GPU. The worlds live in a batched ``mujoco_warp.Data``; torch sees ``qpos``,
``qvel``, ``sensordata`` and ``ctrl`` as zero-copy views (``wp.to_torch``), so a control step
is "copy ``ctrl`` into the view, launch a graph": no host round trip on the GPU.

* The control step (``nstep`` calls of ``mujoco_warp.step``) is captured once per ``nstep``
  in a graph: a CUDA graph on the GPU, an API-capture replay on the CPU (warp >= 1.19; 2-25x
  faster than launching ~200 kernels from Python per substep, most at few worlds). Where
  capture fails it runs eagerly and logs a warning. Sensors are computed in the last substep
  only (the others' are never read; ctrl_quad: 113 instead of 139 kernels per substep, the
  same bits: ``tests/test_mujoco_warp.py``).
* Per-world model parameters (domain randomization) are model arrays with a world
  dimension: the randomized fields get one at ``put_model`` time, so updates are in-place
  copies into memory the graph already points at (no recapture).
* ``write_rows`` only writes ``qpos``/``qvel``; the sensors of the written worlds are
  recomputed lazily (one batched ``forward`` when ``sensordata`` is next read), because the
  env writes rows twice per control step (resets, pushes) and reads sensors once.
* Memory: ``nconmax`` contacts and ``njmax`` constraint rows per world, sized from the model
  (``ctrl_rl.sims.warp_alloc``); every ``overflow_check_every`` steps the per-world overflow bits
  are read (one small device-to-host copy) and a dropped contact or row stops the run with an error
  naming ``sim.nconmax`` / ``sim.njmax``.
* Precision: float32 (mujoco_warp's), so trajectories match the float64 CPU backend only
  approximately (see ``tests/test_mujoco_warp.py``). Warp's CPU kernels run serially and give the
  same bits for the same inputs. On GPUs that takes ``deterministic=True`` (``sim.deterministic``):
  contacts and constraint rows sorted and order-invariant atomics, which costs speed (BENCHMARKS.md,
  "GPU"), so it is opt-in; without it a GPU run is reproducible to float32 rounding only.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import logging
import time
from collections.abc import Iterator
from typing import Any

import mujoco
import torch

from ctrl_rl.robots.terrain import TERRAIN_GEOM_GROUP

from .mujoco_env import Physics
from .warp_alloc import allocation, overflow_error

log = logging.getLogger(__name__)

RANDOMIZED_FIELDS = ("geom_friction", "body_mass", "actuator_gainprm", "actuator_biasprm")
"""Model fields given a world dimension up front (the quadruped task randomizes these)."""

STATE_FIELDS = ("time", "qpos", "qvel", "act", "history", "plastic", "qacc_warmstart", "ctrl",
                "qfrc_applied", "xfrc_applied", "eq_active", "mocap_pos", "mocap_quat", "userdata",
                "tree_asleep", "sensordata")
"""``Data`` arrays that carry over from one step to the next (plus the sensors the task reads):
everything else is recomputed by the next ``step``, so these restore a run bit-exactly."""

_HINTS = (  # substring of mujoco_warp's message -> how to fix the model
    ("mjsol_pgs", "set <option solver=\"Newton\"/> (or \"CG\") in the MJCF: MuJoCo Warp has no PGS solver"),
    ("plugin", "remove the <plugin> elements: MuJoCo Warp cannot run MuJoCo C plugins"),
    ("noslip", "set <option noslip_iterations=\"0\"/> or another integrator (e.g. integrator=\"implicitfast\")"),
    ("dense is unsupported", "set <option jacobian=\"sparse\"/>"),
    ("flex", "simplify the flex as the message says (MuJoCo Warp supports part of flex)"),
)

_announced: set[tuple[Any, ...]] = set()


class UnsupportedModelError(ValueError):
    """The model uses a MuJoCo feature MuJoCo Warp does not implement (raised before compiling)."""


def explain_unsupported(model: mujoco.MjModel, exc: Exception) -> UnsupportedModelError:
    """A ``ValueError`` naming the unsupported feature and the fix, for ``exc`` from mujoco_warp."""
    msg = str(exc).rstrip(".")
    fix = next((hint for key, hint in _HINTS if key in msg.lower()), None)
    if fix is None and model.opt.solver == mujoco.mjtSolver.mjSOL_PGS:
        fix = _HINTS[0][1]
    name = bytes(model.names).split(b"\0", 1)[0].decode() or "<unnamed>"
    text = f"MuJoCo Warp cannot run model '{name}': {msg}"
    text += f"; fix: {fix}" if fix else ""
    return UnsupportedModelError(text + ". Or use sim=mujoco (MuJoCo on CPU threads), which runs every feature.")


@contextlib.contextmanager
def _quiet_warp() -> Iterator[None]:
    """Warp logs every kernel module it loads (hundreds of lines); keep only its warnings."""
    import warp as wp

    level = wp.config.log_level
    wp.config.log_level = max(level, wp.LOG_WARNING)
    try:
        yield
    finally:
        wp.config.log_level = level


def warp_device(device: torch.device) -> str:
    """The warp device alias of a torch device (``cuda`` -> ``cuda:<current>``, ``cpu``)."""
    if device.type == "cpu":
        return "cpu"
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device {device}: torch sees no CUDA GPU here; use device=cpu")
        index = torch.cuda.current_device() if device.index is None else device.index
        return f"cuda:{index}"
    raise ValueError(f"sim 'mjwarp' runs on cpu or cuda devices, not {device}")


class WarpPhysics(Physics):
    """``num_envs`` worlds of ``model`` in one ``mujoco_warp.Data`` on ``device`` (cpu or cuda)."""

    batched_rays = True

    def __init__(self, model: mujoco.MjModel, num_envs: int, device: torch.device | str = "cpu", *,
                 graph: bool = True, deterministic: bool = False, nconmax: int | None = None,
                 njmax: int | None = None, batched_fields: tuple[str, ...] = RANDOMIZED_FIELDS,
                 overflow_check_every: int = 50) -> None:
        """``deterministic`` sorts contacts and constraint rows and avoids order-dependent
        atomics, so the same state and controls give the same bits on a GPU (bit-exact resume
        there); warp's CPU kernels run serially and are deterministic without it.
        ``nconmax``/``njmax``: contacts and constraint rows per world (default: sized from the
        model, :func:`ctrl_rl.sims.warp_alloc.allocation`). ``overflow_check_every``: control
        steps between reads of the overflow bits (1: every step)."""
        import mujoco_warp as mjw
        import warp as wp

        device = torch.device(device)
        if device.type == "cuda" and device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        super().__init__(model, num_envs, device)
        self._mjw, self._wp = mjw, wp
        with _quiet_warp():
            wp.init()
            alias = warp_device(device)
            if alias.startswith("cuda") and not wp.is_cuda_available():
                raise ValueError(f"device {device}: warp finds no CUDA GPU here; use device=cpu")
            self._wp_device = wp.get_device(alias)
            with wp.ScopedDevice(self._wp_device):
                batch = {name: num_envs for name in batched_fields if getattr(model, name).size}
                try:  # put_model checks the model's features before anything compiles
                    self.m = mjw.put_model(model, batch_sizes=batch)
                except (NotImplementedError, ValueError) as exc:
                    raise explain_unsupported(model, exc) from exc
                self.m.opt.deterministic = bool(deterministic)
                self.m.opt.warn_overflow = 0  # per-world kernel prints; overflows are raised here instead
                self.nconmax, self.njmax, self.allocation_source = allocation(model, nconmax, njmax)
                self.d = mjw.make_data(model, nworld=num_envs, nconmax=self.nconmax, njmax=self.njmax)
                log.info("MuJoCo Warp: %d worlds on %s, nconmax %d and njmax %d per world (%s), deterministic %s",
                         num_envs, alias, self.nconmax, self.njmax, self.allocation_source, bool(deterministic))
            self._views = {name: wp.to_torch(getattr(self.d, name)) for name in STATE_FIELDS
                           if getattr(self.d, name, None) is not None}
            self._pending = torch.zeros(num_envs, dtype=torch.bool, device=device)
            self._dirty = False
            self._graphs: dict[Any, Any] = {}
            self._use_graph = graph
            self._host_model: mujoco.MjModel | None = None
            self._batched = set(batch)
            self._streams: dict[int, Any] = {}
            self._rays: dict[str, Any] | None = None
            self._overflow = wp.to_torch(self.d.overflow)
            self._check_every, self._steps_unchecked = max(int(overflow_check_every), 1), 0
            self._compile()

    # -- setup --------------------------------------------------------------------------------
    def _compile(self) -> None:
        """Load (compile on first use, minutes on CPU) every kernel of step and forward."""
        m = self.model
        key = (self._wp_device.alias, m.nq, m.nv, m.nu, m.ngeom, m.nbody, m.nsensor, m.opt.integrator)
        first = key not in _announced
        if first:
            _announced.add(key)
            log.info("MuJoCo Warp: loading kernels on %s; the first run of a model compiles them "
                     "(9-75 s on CPU, longer on small GPUs; cached in %s)", self._wp_device.alias,
                     self._wp.config.kernel_cache_dir)
        start = time.perf_counter()
        saved = {k: v.clone() for k, v in self._views.items()}  # make_data's initial state
        with self._launch_scope():
            try:
                self._mjw.step(self.m, self.d)  # runs forward's kernels too
                self._mjw.forward(self.m, self.d)
            except NotImplementedError as exc:
                raise explain_unsupported(m, exc) from exc
        for k, v in saved.items():
            self._views[k].copy_(v)
        self._pending.fill_(True)
        self._dirty = True
        self._refresh()  # sensors of the initial state
        if first:
            log.info("MuJoCo Warp: kernels ready in %.1f s", time.perf_counter() - start)

    @contextlib.contextmanager
    def _launch_scope(self) -> Iterator[None]:
        """Warp work on this device, ordered after torch's pending work (torch's current stream)."""
        stream = self._torch_stream()
        with self._wp.ScopedDevice(self._wp_device), (
                self._wp.ScopedStream(stream) if stream is not None else contextlib.nullcontext()):
            yield

    def _torch_stream(self) -> Any:
        if self.device.type != "cuda":
            return None
        ts = torch.cuda.current_stream(self.device)
        if ts.cuda_stream not in self._streams:
            self._streams[ts.cuda_stream] = self._wp.stream_from_torch(ts)
        return self._streams[ts.cuda_stream]

    def _run(self, key: Any, fn: Any) -> None:
        """Run ``fn()`` (warp launches only) through a graph captured on first use, or eagerly."""
        if self._use_graph and key not in self._graphs:
            self._graphs[key] = self._capture(fn)
        graph = self._graphs.get(key)
        if graph is None:
            with self._launch_scope():
                fn()
        else:
            self._wp.capture_launch(graph, stream=self._torch_stream())

    def _capture(self, fn: Any) -> Any:
        wp = self._wp
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)  # capture runs on warp's stream; rare, so a sync is fine
        try:
            with wp.ScopedDevice(self._wp_device), wp.ScopedCapture(device=self._wp_device) as capture:
                fn()
            return capture.graph
        except Exception as exc:  # noqa: BLE001 - any capture failure means: run eagerly
            log.warning("MuJoCo Warp: graph capture is unavailable on %s (%s: %s); stepping eagerly, "
                        "several times slower", self._wp_device.alias, type(exc).__name__, exc)
            self._use_graph = False
            return None

    # -- views --------------------------------------------------------------------------------
    @property
    def qpos(self) -> torch.Tensor:
        return self._views["qpos"]

    @property
    def qvel(self) -> torch.Tensor:
        return self._views["qvel"]

    @property
    def ctrl(self) -> torch.Tensor:
        """``[N, nu]`` view of the controls the next step holds."""
        return self._views["ctrl"]

    @property
    def sensordata(self) -> torch.Tensor:
        if self._dirty:
            self._refresh()
        return self._views["sensordata"]

    # -- stepping -----------------------------------------------------------------------------
    def step(self, ctrl: torch.Tensor, nstep: int) -> None:
        self._views["ctrl"].copy_(ctrl)
        if self._dirty:  # the step recomputes every sensor; pending rows need no forward
            self._pending.zero_()
            self._dirty = False
        m, d, mjw = self.m, self.d, self._mjw

        def substeps() -> None:
            flags = m.opt.disableflags  # sensors of the substeps before the last are never read: skipped
            m.opt.disableflags = flags | int(mjw.DisableBit.SENSOR)
            try:
                for _ in range(nstep - 1):
                    mjw.step(m, d)
            finally:
                m.opt.disableflags = flags
            mjw.step(m, d)

        self._run(("step", int(nstep)), substeps)
        self._steps_unchecked += 1
        if self._steps_unchecked >= self._check_every:
            self.check_overflow()

    def check_overflow(self) -> None:
        """Raise :class:`~ctrl_rl.sims.warp_alloc.PhysicsOverflowError` if any world dropped a
        contact or constraint row since construction (MuJoCo Warp's bits are sticky)."""
        self._steps_unchecked = 0
        if not bool(self._overflow.any()):  # the one host read
            return
        error = overflow_error(self._overflow.tolist(), self.num_envs, self.nconmax, self.njmax)
        if error is not None:
            raise error

    def usage(self) -> dict[str, float]:
        """Buffer use of the current state: most contacts and constraint rows in one world, the
        solver's iterations (mean, max) and the fraction of worlds that hit the iteration limit
        (host reads: for measuring, never in a training loop)."""
        from mujoco_warp import OverflowType

        wp = self._wp
        nacon = int(wp.to_torch(self.d.nacon)[0])
        worlds = wp.to_torch(self.d.contact.worldid)[:min(nacon, self.d.naconmax)].long()
        per_world = torch.bincount(worlds, minlength=self.num_envs) if nacon else torch.zeros(1)
        niter = wp.to_torch(self.d.solver_niter).float()
        limit = (self._overflow & int(OverflowType.ITERATIONS)) != 0
        return {"contacts_max": float(per_world.max()), "contacts_mean": float(per_world.float().mean()),
                "rows_max": float(wp.to_torch(self.d.nefc).max()), "solver_iter_mean": float(niter.mean()),
                "solver_iter_max": float(niter.max()), "iter_limit_frac": float(limit.float().mean())}

    def write_rows(self, rows: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        rows = rows.to(self.device)
        for name, new in (("qpos", qpos), ("qvel", qvel)):
            view = self._views[name]
            view.copy_(torch.where(rows[:, None], new.to(view), view))
        self._pending |= rows
        self._dirty = True

    def forward_written_rows(self) -> None:
        """Sensors of the rows written since the last step, now: what reading ``sensordata`` does,
        for a caller whose ``write_rows`` ran inside a replayed CUDA graph (``sim.cuda_graph``), where
        this object saw no call. Every row may have been written (the pending mask is on the device)."""
        self._dirty = True
        self._refresh()

    def _refresh(self) -> None:
        """Sensors of the rows written since the last step: one batched forward, other rows kept.

        ``forward`` changes no state a step reads (qacc_warmstart is set by integration only),
        so running it on every world is harmless; their sensors are restored because after a
        step they describe the state before its last integration, as on the CPU backend.
        """
        sensors = self._views["sensordata"]
        if self.device.type == "cpu" and not bool(self._pending.any()):  # free check on CPU only
            self._dirty = False
            return
        keep = sensors.clone()
        m, d, mjw = self.m, self.d, self._mjw
        self._run("forward", lambda: mjw.forward(m, d))
        sensors.copy_(torch.where(self._pending[:, None], sensors, keep))
        self._pending.zero_()
        self._dirty = False

    # -- per-world model parameters -----------------------------------------------------------
    def _field(self, name: str) -> Any:
        arr = getattr(self.m, name, None)
        spec = next((f.type for f in dataclasses.fields(self._mjw.Model) if f.name == name), None)
        if arr is None or getattr(spec, "shape", ("",))[0] != "*":
            raise ValueError(f"'{name}' is not a per-world MuJoCo Warp model field; "
                             f"randomizable fields are mujoco_warp.Model arrays typed (*, ...), e.g. "
                             f"{', '.join(RANDOMIZED_FIELDS)}")
        return arr

    def set_model_field(self, name: str, values: torch.Tensor) -> None:
        arr = self._field(name)
        if arr.shape[0] != self.num_envs:  # first write: give the field a world dimension
            wp = self._wp
            shared = wp.to_torch(arr)
            arr = wp.empty((self.num_envs, *arr.shape[1:]), dtype=arr.dtype, device=self._wp_device)
            wp.to_torch(arr).copy_(shared.expand(self.num_envs, *shared.shape[1:]))
            arr._is_batched = True  # as mujoco_warp.put_model marks its batched arrays
            setattr(self.m, name, arr)
            self._batched.add(name)
            self._graphs.clear()  # graphs hold the old array's address
        view = self._wp.to_torch(arr)
        values = values.to(device=self.device, dtype=view.dtype)
        if values.shape != view.shape:
            raise ValueError(f"{name}: expected values of shape {tuple(view.shape)}, got {tuple(values.shape)}")
        view.copy_(values)

    def model_field(self, name: str) -> torch.Tensor:
        view = self._wp.to_torch(self._field(name))
        return view.expand(self.num_envs, *view.shape[1:]).clone()

    # -- checkpointing ------------------------------------------------------------------------
    def get_state(self) -> dict[str, torch.Tensor]:
        self.sensordata  # noqa: B018 - bring pending sensors up to date before saving them
        return {k: v.clone() for k, v in self._views.items()}

    def set_state(self, state: dict[str, torch.Tensor]) -> None:
        missing = sorted(set(self._views) - set(state))
        if missing:
            raise ValueError(f"state lacks {missing}: it was not saved by sim 'mjwarp' (WarpPhysics)")
        n = int(state["qpos"].shape[0])
        if n != self.num_envs:
            raise ValueError(f"state is for {n} envs, this env has {self.num_envs}")
        for k, v in self._views.items():
            v.copy_(state[k])
        self._pending.zero_()
        self._dirty = False

    def env_data(self, env_idx: int) -> mujoco.MjData:
        """A host ``MjData`` of world ``env_idx``: its state on its own model parameters, forwarded."""
        if self._host_model is None:
            self._host_model = copy.deepcopy(self.model)
        hm = self._host_model
        for name in self._batched:
            host = getattr(hm, name)
            host[...] = self._wp.to_torch(getattr(self.m, name))[env_idx].cpu().double().numpy().reshape(host.shape)
        data = mujoco.MjData(hm)
        data.time = float(self._views["time"][env_idx])
        for name in ("qpos", "qvel", "act", "ctrl", "qacc_warmstart", "mocap_pos", "mocap_quat"):
            target = getattr(data, name)
            if target.size:
                target[...] = self._views[name][env_idx].cpu().double().numpy().reshape(target.shape)
        mujoco.mj_forward(hm, data)
        return data

    def cast_down(self, start: torch.Tensor) -> torch.Tensor:
        """``mujoco_warp.rays``: every world's rays in one kernel launch, on the physics device."""
        wp, n, r = self._wp, start.shape[0], start.shape[1]
        if self._rays is None or self._rays["pnt"].shape[1] != r:
            with wp.ScopedDevice(self._wp_device):
                self._rays = {"pnt": wp.zeros((n, r), dtype=wp.vec3f), "vec": wp.zeros((n, r), dtype=wp.vec3f),
                              "dist": wp.zeros((n, r), dtype=wp.float32), "geomid": wp.zeros((n, r), dtype=wp.int32),
                              "normal": wp.zeros((n, r), dtype=wp.vec3f),
                              "exclude": wp.full(r, -1, dtype=wp.int32),
                              "group": wp.types.vector(length=6, dtype=float)(
                                  *[1.0 if g == TERRAIN_GEOM_GROUP else 0.0 for g in range(6)])}
            wp.to_torch(self._rays["vec"])[..., 2] = -1.0
        rays = self._rays
        wp.to_torch(rays["pnt"]).copy_(start.to(self.device, torch.float32))
        with self._launch_scope():
            self._mjw.rays(self.m, self.d, rays["pnt"], rays["vec"], rays["group"], True, rays["exclude"],
                           rays["dist"], rays["geomid"], rays["normal"])
        return wp.to_torch(rays["dist"]).clone()

    def close(self) -> None:
        self._graphs.clear()
        self._views.clear()
        self.m = self.d = None

