"""MuJoCo on CPU cores: N worlds stepped by ``mujoco.rollout``'s native thread pool.

Why rollout: one call steps every world for a whole control step (``nstep`` = decimation)
in C++ threads that release the GIL, from a state array in to a state array out. Python
threads around ``mj_step`` did not pay on this machine, and a Python loop over worlds is
about half as fast (BENCHMARKS.md, ``benchmarks/sim_throughput.py``).

The batch lives in one float64 array ``state[N, nstate]`` (``mjSTATE_FULLPHYSICS``); torch
sees ``qpos``/``qvel``/``sensordata`` as zero-copy views. The solver warm start is not part
of that state, so each control step starts the solver cold: results differ from continuous
``mj_step`` by ~1e-10 and are exactly reproducible (same inputs, same bits, whatever the
thread scheduling), which is what checkpoint/resume needs.
"""

from __future__ import annotations

import copy

import mujoco
import numpy as np
import torch
from mujoco import rollout

from ctrl_rl.robots.terrain import TERRAIN_GEOM_GROUP
from ctrl_rl.utils import threads

from .mujoco_env import Physics

_SPEC = mujoco.mjtState.mjSTATE_FULLPHYSICS


def _state_offset(model: mujoco.MjModel, bit: int) -> int:
    """Offset of component ``bit`` inside a FULLPHYSICS state vector."""
    below = _SPEC & (bit - 1)
    return mujoco.mj_stateSize(model, below)


class CpuPhysics(Physics):
    """The MuJoCo CPU backend's physics: a persistent ``rollout.Rollout`` thread pool."""

    def __init__(self, model: mujoco.MjModel, num_envs: int, nthread: int | None = None) -> None:
        super().__init__(model, num_envs, torch.device("cpu"))
        self.nthread = int(nthread or threads.current().physics_threads)
        self.nstate = mujoco.mj_stateSize(model, _SPEC)
        self.state = np.zeros((num_envs, self.nstate))
        self.sensor = np.zeros((num_envs, model.nsensordata))
        qpos0 = _state_offset(model, mujoco.mjtState.mjSTATE_QPOS)
        qvel0 = _state_offset(model, mujoco.mjtState.mjSTATE_QVEL)
        state_t = torch.from_numpy(self.state)
        self._qpos = state_t[:, qpos0:qpos0 + model.nq]
        self._qvel = state_t[:, qvel0:qvel0 + model.nv]
        self._sensordata = torch.from_numpy(self.sensor)
        self.ctrl = np.zeros((num_envs, model.nu))  # last control: actuator and touch sensors of written rows
        self.models: list[mujoco.MjModel] = [model] * num_envs
        self._datas = [mujoco.MjData(model) for _ in range(self.nthread)]
        self._scratch = mujoco.MjData(model)
        self._ray_data: mujoco.MjData | None = None
        self._pool = rollout.Rollout(nthread=self.nthread)
        self._bufs: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        data = mujoco.MjData(model)
        mujoco.mj_forward(model, data)
        mujoco.mj_getState(model, data, self.state[0], _SPEC)
        self.state[:] = self.state[0]
        self.sensor[:] = data.sensordata

    # -- views ------------------------------------------------------------------------------
    @property
    def qpos(self) -> torch.Tensor:
        return self._qpos

    @property
    def qvel(self) -> torch.Tensor:
        return self._qvel

    @property
    def sensordata(self) -> torch.Tensor:
        return self._sensordata

    # -- stepping ---------------------------------------------------------------------------
    def _buffers(self, nstep: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if nstep not in self._bufs:
            n, m = self.num_envs, self.model
            self._bufs[nstep] = (np.zeros((n, nstep, m.nu)), np.zeros((n, nstep, self.nstate)),
                                 np.zeros((n, nstep, m.nsensordata)))
        return self._bufs[nstep]

    def step(self, ctrl: torch.Tensor, nstep: int) -> None:
        control, state_out, sensor_out = self._buffers(nstep)
        self.ctrl[:] = ctrl.detach().to("cpu", torch.float64).numpy()
        control[:] = self.ctrl[:, None, :]
        self._pool.rollout(self.models, self._datas, self.state, control, nstep=nstep, skip_checks=True,
                           state=state_out, sensordata=sensor_out)
        self.state[:] = state_out[:, -1]
        self.sensor[:] = sensor_out[:, -1]

    def write_rows(self, rows: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        idx = rows.nonzero().flatten().tolist()
        if not idx:
            return
        qpos_np = qpos.detach().to("cpu", torch.float64).numpy()
        qvel_np = qvel.detach().to("cpu", torch.float64).numpy()
        d = self._scratch
        for i in idx:
            m = self.models[i]
            mujoco.mj_setState(m, d, self.state[i], _SPEC)
            d.qpos[:] = qpos_np[i]
            d.qvel[:] = qvel_np[i]
            d.ctrl[:] = self.ctrl[i]
            mujoco.mj_forward(m, d)  # sensors of the new state, for the observation
            mujoco.mj_getState(m, d, self.state[i], _SPEC)
            self.sensor[i] = d.sensordata

    # -- per-env model parameters (domain randomization) -------------------------------------
    def set_model_field(self, name: str, values: torch.Tensor) -> None:
        if self.models[0] is self.model and self.num_envs > 1:
            self.models = [copy.deepcopy(self.model) for _ in range(self.num_envs)]
        vals = values.detach().to("cpu", torch.float64).numpy()
        for m, v in zip(self.models, vals, strict=True):
            getattr(m, name)[:] = v

    def set_contact(self, cone: int, impratio: float) -> None:
        """Every world's friction cone and impratio from the next step on (``tasks/locomotion/polish_contact.py``);
        MuJoCo sizes each step's constraint rows from the model, so a switch between steps is exact."""
        for m in {id(m): m for m in [self.model, *self.models]}.values():
            m.opt.cone, m.opt.impratio = cone, float(impratio)

    def model_field(self, name: str) -> torch.Tensor:
        return torch.from_numpy(np.stack([getattr(m, name) for m in self.models])).clone()

    # -- checkpointing ----------------------------------------------------------------------
    def get_state(self) -> dict[str, torch.Tensor]:
        return {"state": torch.from_numpy(self.state.copy()), "sensor": torch.from_numpy(self.sensor.copy()),
                "ctrl": torch.from_numpy(self.ctrl.copy())}

    def set_state(self, state: dict[str, torch.Tensor]) -> None:
        self.state[:] = state["state"].numpy()
        self.sensor[:] = state["sensor"].numpy()
        self.ctrl[:] = state["ctrl"].numpy()

    def env_data(self, env_idx: int) -> mujoco.MjData:
        """A fresh ``MjData`` holding env ``env_idx``'s state (for rendering)."""
        d = mujoco.MjData(self.models[env_idx])
        mujoco.mj_setState(self.models[env_idx], d, self.state[env_idx], _SPEC)
        d.ctrl[:] = self.ctrl[env_idx]
        mujoco.mj_forward(self.models[env_idx], d)
        return d

    def cast_down(self, start: torch.Tensor) -> torch.Tensor:
        """``mj_ray`` per ray (~5 us each): MuJoCo's batched ``mj_multiRay`` starts every ray at one point."""
        if self._ray_data is None:
            self._ray_data = mujoco.MjData(self.model)
            mujoco.mj_kinematics(self.model, self._ray_data)  # static geoms' poses; robots are excluded below
        group = np.zeros(6, np.uint8)
        group[TERRAIN_GEOM_GROUP] = 1
        down, geom = np.array([0.0, 0.0, -1.0]), np.zeros(1, np.int32)
        pts = start.detach().to("cpu", torch.float64).numpy()
        dist = np.empty(pts.shape[:2])
        for i, j in np.ndindex(*dist.shape):
            dist[i, j] = mujoco.mj_ray(self.model, self._ray_data, pts[i, j], down, group, 1, -1, geom)
        return torch.from_numpy(dist).to(start.dtype)

    def close(self) -> None:
        self._pool.close()
