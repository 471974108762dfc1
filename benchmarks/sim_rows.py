"""The workload and the rows of ``benchmarks/sim_throughput.py`` (and of ``gpu_sections/throughput.py``).

One :class:`Setup` (the task's model, its standing start state and one seeded sequence of PD targets) is
stepped by every :class:`Row`: plain MuJoCo (one ``MjData``, a Python loop, ``mujoco.rollout``), our
backends (``CpuPhysics.step``, the ``mujoco`` and ``mjwarp`` ``VecEnv.step``, with the policy in the loop,
the rough task and its height scan alone) and gymnasium's vector envs around a minimal MuJoCo env.
:func:`measure` times a row: control steps x envs per timed second, resets untimed.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium
import mujoco
import numpy as np
from mujoco import rollout

SPEC = mujoco.mjtState.mjSTATE_FULLPHYSICS
TASK = "quadruped_velocity_flat"


@dataclass
class Setup:
    """The shared workload: model, start state and the PD-target sequence of every row."""

    model: mujoco.MjModel
    decimation: int
    task: str
    """The task whose robot (and, in the VecEnv rows, logic) is stepped."""
    s0: np.ndarray
    """FULLPHYSICS state of the standing default pose, ``[nstate]``."""
    actions: np.ndarray
    """Policy-scale actions in [-1, 1], ``[episode, max_envs, nu]``."""
    targets: np.ndarray
    """PD targets ``default_pose + action_scale * actions`` (float64), same shape."""


def make_setup(max_envs: int, episode: int, seed: int = 0, task: str = TASK) -> Setup:
    """The task's model and decimation, its standing start state, one seeded action sequence."""
    from ctrl_rl.robots.robot import build_model, load_robot
    from ctrl_rl.tasks import task_entry

    cfg = task_entry(task).make_config()
    robot = load_robot(cfg.robot)
    model = cfg.apply_physics(build_model(robot)[0], robot)  # the task's physics profile, as training steps it
    data = mujoco.MjData(model)
    ids = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, j) for j in robot.joint_names]
    data.qpos[2] = robot.init_height
    data.qpos[3:7] = [1.0, 0.0, 0.0, 0.0]
    data.qpos[[model.jnt_qposadr[i] for i in ids]] = robot.default_pose
    mujoco.mj_forward(model, data)
    s0 = np.zeros(mujoco.mj_stateSize(model, SPEC))
    mujoco.mj_getState(model, data, s0, SPEC)
    actions = np.random.default_rng(seed).uniform(-1.0, 1.0, (episode, max_envs, model.nu))
    targets = np.asarray(robot.default_pose) + np.asarray(robot.action_scales) * actions
    return Setup(model, int(cfg.decimation), task, s0, actions, targets)


class Row:
    """One benchmark subject: ``reset`` (untimed) to the start state, ``step(k)`` one control step."""

    name = ""
    workers = 1
    """Threads or processes it steps on (for the table)."""

    def reset(self) -> None:
        raise NotImplementedError

    def step(self, k: int) -> None:
        raise NotImplementedError

    def sync(self) -> None:
        """Wait for asynchronous device work (GPU rows)."""

    def close(self) -> None:
        """Release threads / processes."""


def measure(row: Row, n: int, seconds: float, episode: int, warmup: int = 2, min_steps: int = 3) -> float:
    """Control steps x envs per timed second; episodes of ``episode`` steps, resets untimed."""
    row.reset()
    for k in range(warmup):
        row.step(k)
    row.sync()
    row.reset()
    timed, steps, k = 0.0, 0, 0
    while timed < seconds or steps < min_steps:
        if k == episode:
            row.reset()
            k = 0
        start = time.perf_counter()
        row.step(k)
        row.sync()
        timed += time.perf_counter() - start
        steps += 1
        k += 1
    return steps * n / timed


# ---- rows on plain MuJoCo ----------------------------------------------------------------
class SingleThreadLimit(Row):
    """One ``MjData`` stepped continuously: the single-core physics rate on this workload."""

    name = "mj_step, 1 MjData"

    def __init__(self, s: Setup) -> None:
        self.s, self.d = s, mujoco.MjData(s.model)

    def reset(self) -> None:
        mujoco.mj_setState(self.s.model, self.d, self.s.s0, SPEC)

    def step(self, k: int) -> None:
        self.d.ctrl[:] = self.s.targets[k, 0]
        mujoco.mj_step(self.s.model, self.d, nstep=self.s.decimation)


class PythonLoop(Row):
    name = "python loop over MjData"

    def __init__(self, s: Setup, n: int) -> None:
        self.s, self.datas = s, [mujoco.MjData(s.model) for _ in range(n)]

    def reset(self) -> None:
        for d in self.datas:
            mujoco.mj_setState(self.s.model, d, self.s.s0, SPEC)

    def step(self, k: int) -> None:
        m, dec, tgt = self.s.model, self.s.decimation, self.s.targets[k]
        for i, d in enumerate(self.datas):
            d.ctrl[:] = tgt[i]
            mujoco.mj_step(m, d, nstep=dec)


class RolloutRow(Row):
    """``rollout.Rollout`` over the batch state, ``nstep_per_call`` physics steps per call.

    Mirrors ``CpuPhysics.step`` (persistent pool, ``skip_checks``, final state copied back into
    the batch array) without torch, so the variants differ only in how rollout is called.
    """

    def __init__(self, s: Setup, n: int, nthread: int, nstep_per_call: int, chunk_size: int | None = None) -> None:
        self.s, self.n, self.nstep, self.chunk = s, n, nstep_per_call, chunk_size
        self.workers = nthread
        chunk = "default" if chunk_size is None else str(chunk_size)
        self.name = f"rollout nstep={nstep_per_call} x{s.decimation // nstep_per_call}, chunk={chunk}"
        m = s.model
        self.models = [m] * n
        self.datas = [mujoco.MjData(m) for _ in range(max(nthread, 1))]
        self.pool = rollout.Rollout(nthread=nthread)
        self.state = np.zeros((n, s.s0.size))
        self.control = np.zeros((n, nstep_per_call, m.nu))
        self.state_out = np.zeros((n, nstep_per_call, s.s0.size))
        self.sensor_out = np.zeros((n, nstep_per_call, m.nsensordata))
        self.sensor = np.zeros((n, m.nsensordata))

    def reset(self) -> None:
        self.state[:] = self.s.s0

    def step(self, k: int) -> None:
        self.control[:] = self.s.targets[k, :self.n, None, :]
        for _ in range(self.s.decimation // self.nstep):
            self.pool.rollout(self.models, self.datas, self.state, self.control, nstep=self.nstep,
                              skip_checks=True, state=self.state_out, sensordata=self.sensor_out,
                              chunk_size=self.chunk)
            self.state[:] = self.state_out[:, -1]
            self.sensor[:] = self.sensor_out[:, -1]

    def close(self) -> None:
        self.pool.close()


# ---- our backend ---------------------------------------------------------------------------
class OursPhysics(Row):
    """``CpuPhysics.step`` alone, as the VecEnv calls it (float32 torch targets)."""

    def __init__(self, s: Setup, n: int, nthread: int, model_copies: bool = False) -> None:
        import torch

        from ctrl_rl.sims.mujoco_cpu import CpuPhysics

        self.s, self.n, self.workers = s, n, nthread
        self.name = "ours: CpuPhysics.step" + (" + per-env models" if model_copies else "")
        self.physics = CpuPhysics(s.model, n, nthread=nthread)
        if model_copies:  # what the task's domain randomization does to it
            self.physics.set_model_field("geom_friction", self.physics.model_field("geom_friction"))
        self.ctrl = torch.from_numpy(s.targets[:, :n]).float()
        state = torch.from_numpy(np.tile(s.s0, (n, 1)))
        qpos0 = mujoco.mj_stateSize(s.model, SPEC & (mujoco.mjtState.mjSTATE_QPOS - 1))
        qvel0 = mujoco.mj_stateSize(s.model, SPEC & (mujoco.mjtState.mjSTATE_QVEL - 1))
        self.qpos, self.qvel = state[:, qpos0:qpos0 + s.model.nq], state[:, qvel0:qvel0 + s.model.nv]
        self.all_rows = torch.ones(n, dtype=torch.bool)

    def reset(self) -> None:
        self.physics.write_rows(self.all_rows, self.qpos, self.qvel)

    def step(self, k: int) -> None:
        self.physics.step(self.ctrl[k], self.s.decimation)

    def close(self) -> None:
        self.physics.close()


class OursVecEnv(Row):
    """The full ``MjVecEnv.step`` of a sim backend (task logic and auto-resets included)."""

    def __init__(self, s: Setup, n: int, sim: str = "mujoco", device: str = "cpu", workers: int = 1) -> None:
        import torch

        from ctrl_rl.sims import make_env

        self.name, self.n, self.workers, self.device = f"ours: {sim} VecEnv.step", n, workers, torch.device(device)
        start = time.perf_counter()
        self.env = make_env(sim, s.task, n, device=device, seed=0)
        self.build_s = time.perf_counter() - start
        self.actions = torch.from_numpy(s.actions[:, :n]).float().to(self.device)

    def reset(self) -> None:
        self.env.reset(seed=0)

    def step(self, k: int) -> None:
        self.env.step(self.actions[k])

    def sync(self) -> None:
        if self.device.type == "cuda":
            import torch

            torch.cuda.synchronize(self.device)

    def close(self) -> None:
        self.env.close()


class OursVecEnvPolicy(OursVecEnv):
    """``MjVecEnv.step`` with the policy in the loop: every control step first runs the actor that
    ``ctrl-rl train algo=ppo task=<task>`` builds (its tuned ``actor_hidden``, ``activation`` and
    ``actor_obs``; float32, inference mode) on that step's observation, as collection does. Its
    output is discarded and the row steps the shared action sequence, so the physics workload is
    the other rows'."""

    def __init__(self, s: Setup, n: int, workers: int = 1) -> None:
        from ctrl_rl.app.configure import load_train_config
        from ctrl_rl.nets.groups import concat_groups
        from ctrl_rl.nets.mlp import mlp

        super().__init__(s, n, workers=workers)
        self.name = "ours: mujoco VecEnv.step + policy"
        algo = load_train_config(["algo=ppo", f"task={s.task}"]).algo
        self.groups, self.concat = list(algo.actor_obs), concat_groups
        obs_dim = sum(self.env.obs_dims[g] for g in self.groups)
        self.policy = mlp(obs_dim, algo.actor_hidden, self.env.action_dim, algo.activation).eval()
        self.obs: Any = None

    def reset(self) -> None:
        self.obs = self.env.reset(seed=0)

    def step(self, k: int) -> None:
        import torch

        with torch.inference_mode():
            self.policy(self.concat(self.obs, self.groups))
        self.obs = self.env.step(self.actions[k])[0]


class WarpPhysicsRow(OursVecEnv):
    """The ``mjwarp`` backend's ``physics.step`` alone (physics taken from its VecEnv)."""

    def __init__(self, s: Setup, n: int, device: str) -> None:
        import torch

        super().__init__(s, n, "mjwarp", device)
        self.name = "ours: mjwarp physics.step"
        self.ctrl = torch.from_numpy(s.targets[:, :n]).float().to(self.device)

    def step(self, k: int) -> None:
        self.env.physics.step(self.ctrl[k], self.env.task.decimation)


# ---- gymnasium ------------------------------------------------------------------------------
class MjBatchEnv(gymnasium.Env):
    """``k`` MuJoCo quadrupeds in one ``gymnasium.Env``: set ctrl, ``mj_step(nstep=decimation)``.

    Deliberately minimal (observation = qpos and qvel, reward 0, never done): the vector-env
    machinery around it is what is measured. ``k > 1`` lets one async worker hold many envs.
    """

    def __init__(self, model: mujoco.MjModel, s0: np.ndarray, k: int, decimation: int) -> None:
        self.model, self.s0, self.decimation = model, s0, decimation
        self.datas = [mujoco.MjData(model) for _ in range(k)]
        dim = model.nq + model.nv
        self.observation_space = gymnasium.spaces.Box(-np.inf, np.inf, (k, dim), np.float64)
        low, high = model.actuator_ctrlrange[:, 0], model.actuator_ctrlrange[:, 1]
        self.action_space = gymnasium.spaces.Box(np.tile(low, (k, 1)), np.tile(high, (k, 1)), dtype=np.float64)
        self._obs = np.zeros((k, dim))

    def _observe(self) -> np.ndarray:
        nq = self.model.nq
        for i, d in enumerate(self.datas):
            self._obs[i, :nq] = d.qpos
            self._obs[i, nq:] = d.qvel
        return self._obs

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        for d in self.datas:
            mujoco.mj_setState(self.model, d, self.s0, SPEC)
        return self._observe(), {}

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict]:
        for d, a in zip(self.datas, action, strict=True):
            d.ctrl[:] = a
            mujoco.mj_step(self.model, d, nstep=self.decimation)
        return self._observe(), 0.0, False, False, {}


def _env_factory(model: mujoco.MjModel, s0: np.ndarray, k: int, decimation: int) -> Callable[[], MjBatchEnv]:
    return lambda: MjBatchEnv(model, s0, k, decimation)


class GymVector(Row):
    """``SyncVectorEnv`` of N single envs, or ``AsyncVectorEnv`` of ``workers`` batch envs."""

    def __init__(self, s: Setup, n: int, workers: int | None) -> None:
        self.s, self.n = s, n
        if workers is None:
            self.name, self.k, self.workers = "gymnasium SyncVectorEnv", 1, 1
            self.vec: Any = gymnasium.vector.SyncVectorEnv([_env_factory(s.model, s.s0, 1, s.decimation)] * n)
        else:
            self.workers = max(w for w in range(1, min(workers, n) + 1) if n % w == 0)
            self.k = n // self.workers
            self.name = (f"gymnasium AsyncVectorEnv ({self.workers} procs x {self.k} envs)" if self.k > 1 else
                         "gymnasium AsyncVectorEnv (1 proc per env)")
            fns = [_env_factory(s.model, s.s0, self.k, s.decimation)] * self.workers
            self.vec = gymnasium.vector.AsyncVectorEnv(fns, shared_memory=True, context="spawn")
        self.actions = s.targets[:, :n].reshape(len(s.targets), n // self.k, self.k, s.model.nu)

    def reset(self) -> None:
        self.vec.reset(seed=0)

    def step(self, k: int) -> None:
        self.vec.step(self.actions[k])

    def close(self) -> None:
        self.vec.close()


class TerrainVecEnv(OursVecEnv):
    """``MjVecEnv.step`` of the flat or the rough task (terrain grid, limb colliders, height scan)."""

    def __init__(self, s: Setup, n: int, task: str, label: str, **kwargs: Any) -> None:
        import torch

        from ctrl_rl.sims import make_env

        self.name, self.n, self.workers, self.device = label, n, os.cpu_count() or 1, torch.device("cpu")
        self.env = make_env("mujoco", task, n, seed=0, **kwargs)
        self.actions = torch.from_numpy(s.actions[:, :n]).float()


class ScanRow(Row):
    """The rough task's height scan alone (``HeightScanner.scan`` on the current base poses)."""

    def __init__(self, n: int, method: str) -> None:
        from ctrl_rl.sims import make_env

        self.name, self.workers = f"height scan alone ({method})", 1
        self.env = make_env("mujoco", "quadruped_velocity_rough", n, seed=0, height_scan={"method": method})
        self.signals = self.env.task.signals(self.env.physics)
        self.scanner = self.env.task.scanner

    def reset(self) -> None:
        pass

    def step(self, k: int) -> None:
        self.scanner.scan(self.signals["_base_pos"], self.signals["imu_quat"], 0.3)

    def close(self) -> None:
        self.env.close()
