"""MuJoCo stepping throughput: our CPU backend next to gymnasium's vector envs and the hardware limit.

Every row steps the *same* model, the ``ctrl_quad`` quadruped (``--task humanoid_velocity_flat``:
the ``ctrl_humanoid`` humanoid) compiled by
``ctrl_rl.robots.robot.build_model``, with the task's decimation (4 physics steps of 5 ms per
control step) and the same PD targets: ``default_pose + action_scale * a`` with ``a`` drawn
once, uniform in [-1, 1], per (control step, env). Work is cut into episodes of ``--episode``
control steps (default 50 = 1 s) that all start from the standing default pose; resets happen
outside the timer, so every row simulates the same mix of standing and stumbling robots (the
contact count, hence the cost of a step, depends on it).

Rows, per env count (all timed as best of ``--repeats`` interleaved rounds of ``--seconds``:
on a shared machine the slower rounds measure the neighbours):

* ``limit``: single-thread ``mj_step`` rate on one ``MjData`` (continuous, warm-started) x
  ``--cores``: what perfect scaling of plain MuJoCo would give; no implementation beats it.
  (Our backend starts each control step's solver cold; on this model that costs nothing:
  2.82 vs 2.86 Newton iterations per step, cold vs warm.)
* ``python loop over MjData``: one thread, a Python loop over N ``MjData``, ``mj_step(nstep=4)``;
* ``rollout nstep=4 x1`` / ``rollout nstep=1 x4``: a ``mujoco.rollout.Rollout`` pool of
  ``--cores`` threads over the batch state array, one call per control step vs one call per
  physics step (the latter pays the pool hand-off and the state copies four times);
* ``ours: CpuPhysics.step``: the shipped backend's physics alone (torch targets in, torch views
  out); ``+ per-env models`` is the same with one ``MjModel`` copy per env, which is what domain
  randomization (``set_model_field``) turns it into;
* ``ours: mujoco VecEnv.step``: ``make_env("mujoco", "quadruped_velocity_flat", N)``, task
  included (action delay, observations, rewards, terminations and their same-step resets,
  per-env randomized models); its periodic full reset is untimed like every row's;
* ``+ policy``: the same with the actor PPO trains on the task (ctrl_quad: 256-128-64 ELU) run
  on every step's observation first, as collection does (its output discarded: same physics);
* ``gymnasium SyncVectorEnv`` / ``AsyncVectorEnv``: a minimal ``gymnasium.Env`` written here
  (``MjData`` + ``mj_step(nstep=4)``, observation = qpos and qvel, no reward logic) in
  ``SyncVectorEnv`` (N sub-envs, one process) and ``AsyncVectorEnv`` (``shared_memory=True``,
  one worker process per core, each stepping N / cores ``MjData`` in a loop: the only sane way
  to put 1024 envs on a few cores with gymnasium); up to ``--async-per-env-max`` envs also
  gymnasium's usual ``AsyncVectorEnv`` with one worker process per env.

Rough terrain (``--no-terrain`` skips it), at the largest ``--envs``: the flat and the rough task's
``VecEnv.step`` (rough: the default 10 x 10 grid, limb colliders, the critic's 187-ray height
scan, curriculum), the rough task without limb colliders, and the height scan alone, by the
terrain lookup the CPU backend uses and by ``mj_ray`` per ray (at 16 envs). RESULT adds
``rough_sps``, ``rough_vs_flat``, ``scan_us`` (µs per env-step) and ``scan_frac`` (of the rough step).

``--variants`` adds rollout rows with other ``chunk_size`` / ``nthread`` settings. If sim
``mjwarp`` is registered, MuJoCo Warp runs at ``--warp-worlds`` on ``--device`` (building the
env, which compiles or loads the kernels, and the first step are timed separately, excluded).

env-steps/s = control steps x envs / timed seconds; physics steps/s = that x decimation. The
``RESULT`` line is taken at the largest ``--envs``: ``ours_sps`` is ``CpuPhysics.step`` (physics
only, like the gymnasium env it is compared with), ``frac_of_limit = ours_sps / limit_sps``,
``vs_async = ours_sps / async_sps`` (the batched-worker AsyncVectorEnv); ``vecenv_sps``,
``sync_sps``, ``policy_sps`` (the VecEnv with the policy in the loop) and
``policy_frac_of_limit = policy_sps / limit_sps`` follow, then ``async1_*``: gymnasium's usual one-process-per-env
``AsyncVectorEnv``, at the largest ``--envs`` up to ``--async-per-env-max`` (64: each worker
process costs ~80 MB), with ``vs_async1`` = ours at that size ÷ it.

Usage::

    python benchmarks/sim_throughput.py --envs 64 256 1024 --seconds 3
    python benchmarks/sim_throughput.py --device cuda --warp-worlds 4096,16384
"""

from __future__ import annotations

import argparse
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


# ---- driver --------------------------------------------------------------------------------
def cpu_rows(s: Setup, n: int, cores: int, variants: bool, async_per_env_max: int) -> list[Callable[[], Row]]:
    """Factories of the rows at ``n`` envs, in table order (built one at a time)."""
    dec = s.decimation
    rows: list[Callable[[], Row]] = [
        lambda: PythonLoop(s, n),
        lambda: RolloutRow(s, n, cores, dec),
        lambda: RolloutRow(s, n, cores, 1),
    ]
    if variants:
        for chunk in (1, 4, 16, max(1, n // cores)):
            rows.append(lambda chunk=chunk: RolloutRow(s, n, cores, dec, chunk_size=chunk))
        rows.append(lambda: RolloutRow(s, n, cores + 1, dec))
        rows.append(lambda: RolloutRow(s, n, 1, dec))
    rows += [
        lambda: OursPhysics(s, n, cores),
        lambda: OursPhysics(s, n, cores, model_copies=True),
        lambda: OursVecEnv(s, n, workers=os.cpu_count() or 1),  # make_env's CpuPhysics: all cores
        lambda: OursVecEnvPolicy(s, n, workers=os.cpu_count() or 1),
        lambda: GymVector(s, n, None),
        lambda: GymVector(s, n, cores),
    ]
    if n <= async_per_env_max:  # gymnasium's usual layout; ~80 MB per worker process
        rows.append(lambda: GymVector(s, n, n))
    return rows


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


def terrain_section(s: Setup, n: int, seconds: float, episode: int, repeats: int, ray_envs: int) -> dict[str, str]:
    """Rough terrain vs flat ground through the whole VecEnv on ``sim=mujoco``, and the scan's cost."""
    print()
    print(f"Rough terrain on sim=mujoco at {n} envs (default grid: 10 x 10 sub-terrains of 8 m, 0.1 m heightfield; "
          "random actions, so robots stumble and reset as in early training)")
    print()
    print("| row | envs | env-steps/s | µs per env-step | vs flat |")
    print("|---|---:|---:|---:|---:|")
    rows: list[Row] = []
    try:
        rows = [TerrainVecEnv(s, n, TASK, "flat task VecEnv.step"),
                TerrainVecEnv(s, n, "quadruped_velocity_rough", "rough task VecEnv.step"),
                TerrainVecEnv(s, n, "quadruped_velocity_rough", "rough task, no limb colliders",
                              limb_collisions=False),
                ScanRow(n, "lookup"), ScanRow(ray_envs, "ray")]
        sizes = [n, n, n, n, ray_envs]
        best = [0.0] * len(rows)
        for _ in range(repeats):
            for i, (row, size) in enumerate(zip(rows, sizes, strict=True)):
                best[i] = max(best[i], measure(row, size, seconds, episode))
    finally:
        for row in rows:
            row.close()
    for row, size, sps in zip(rows, sizes, best, strict=True):
        print(f"| {row.name} | {size} | {sps:,.0f} | {1e6 / sps:.2f} | {sps / best[0]:.2f}x |", flush=True)
    scan_us, rough_us = 1e6 / best[3], 1e6 / best[1]
    print(f"\nheight scan (187 rays, lookup) = {scan_us:.2f} µs per env-step = {100 * scan_us / rough_us:.1f}% of the "
          f"rough step; mj_ray per ray from Python = {1e6 / best[4]:.0f} µs per env-step")
    return {"rough_envs": str(n), "flat_vecenv_sps": f"{best[0]:.0f}", "rough_sps": f"{best[1]:.0f}",
            "rough_vs_flat": f"{best[1] / best[0]:.2f}", "scan_us": f"{scan_us:.2f}",
            "scan_frac": f"{scan_us / rough_us:.3f}", "ray_scan_us": f"{1e6 / best[4]:.0f}"}


def warp_section(s: Setup, worlds: list[int], device: str, seconds: float, episode: int) -> None:
    """MuJoCo Warp through our ``mjwarp`` sim: build and compile times, then steady state."""
    from ctrl_rl.sims import SIMS

    print()
    if "mjwarp" not in SIMS:
        print("mjwarp: sim 'mjwarp' is not registered in ctrl_rl.sims.SIMS; MuJoCo Warp rows skipped")
        return
    print(f"MuJoCo Warp on {device}: build = make_env (loads, or on first use compiles, every kernel; warp "
          "caches them on disk), first step = graph capture; both excluded from env-steps/s")
    print()
    print("| row | worlds | build s | first step s | env-steps/s | physics steps/s |")
    print("|---|---:|---:|---:|---:|---:|")
    for n in worlds:
        for name, make in (("ours: mjwarp physics.step", lambda n=n: WarpPhysicsRow(s, n, device)),
                           ("ours: mjwarp VecEnv.step", lambda n=n: OursVecEnv(s, n, "mjwarp", device))):
            try:  # a backend failure costs its rows, not the CPU table's RESULT line
                row = make()
                start = time.perf_counter()
                row.step(0)
                row.sync()
                first_s = time.perf_counter() - start
                sps = measure(row, n, seconds, episode)
                row.close()
            except Exception as exc:  # noqa: BLE001 - reported in the table
                print(f"| {name} | {n} | failed: {type(exc).__name__}: {str(exc)[:200]} | | | |", flush=True)
                continue
            print(f"| {name} | {n} | {row.build_s:.2f} | {first_s:.2f} | {sps:,.0f} | "
                  f"{sps * s.decimation:,.0f} |", flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", type=int, nargs="+", default=[64, 256, 1024])
    parser.add_argument("--seconds", type=float, default=2.0, help="timed seconds per row and round")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved rounds; each row reports its best")
    parser.add_argument("--episode", type=int, default=50, help="control steps between (untimed) resets")
    parser.add_argument("--cores", type=int, default=os.cpu_count() or 1,
                        help="limit multiplier, rollout threads, async workers (default: os.cpu_count())")
    parser.add_argument("--variants", action="store_true", help="add rollout chunk_size / nthread rows")
    parser.add_argument("--async-per-env-max", type=int, default=64,
                        help="run AsyncVectorEnv with one process per env up to this many envs (memory)")
    parser.add_argument("--device", default="cpu", help="MuJoCo Warp device (cpu or cuda)")
    parser.add_argument("--warp-worlds", default=None,
                        help="comma list (default 4,16,64 on cpu, 4 with --quick; 4096,16384 on cuda)")
    parser.add_argument("--no-terrain", action="store_true", help="skip the rough-terrain rows")
    parser.add_argument("--task", default=TASK, help="the flat task whose robot every row steps (e.g. "
                        "humanoid_velocity_flat); the rough-terrain rows run for the quadruped only")
    parser.add_argument("--quick", action="store_true", help="0.2 s per row, short episodes (smoke test)")
    args = parser.parse_args(argv)
    if args.quick:
        args.seconds, args.repeats, args.episode = 0.2, 1, min(args.episode, 10)
    sizes = sorted(args.envs)
    cpu_worlds = "4" if args.quick else "4,16,64"
    worlds_arg = args.warp_worlds or ("4096,16384" if args.device.startswith("cuda") else cpu_worlds)
    worlds = [int(w) for w in worlds_arg.split(",")]
    s = make_setup(max(sizes + worlds), args.episode, task=args.task)

    import torch

    print(f"mujoco={mujoco.__version__} gymnasium={gymnasium.__version__} torch={torch.__version__} "
          f"task={args.task} cores={args.cores} torch_threads={torch.get_num_threads()} decimation={s.decimation} "
          f"timestep={s.model.opt.timestep} episode={args.episode} seconds/row={args.seconds} "
          f"repeats={args.repeats} (best of, interleaved)")
    print()
    print("| row | envs | threads/procs | env-steps/s | physics steps/s | ms per control step "
          "| % of limit | ours ÷ this |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    result: dict[str, str] = {}
    async1: dict[str, str] = {}
    for n in sizes:
        rows: list[Row] = [SingleThreadLimit(s)]
        try:
            for make in cpu_rows(s, n, args.cores, args.variants, args.async_per_env_max):
                rows.append(make())
            best = [0.0] * len(rows)
            for _ in range(args.repeats):  # interleaved rounds, best of: neighbours only slow a row down
                for i, row in enumerate(rows):
                    best[i] = max(best[i], measure(row, 1 if i == 0 else n, args.seconds, args.episode))
        finally:
            for row in rows:
                row.close()
        limit_sps = best[0] * args.cores  # one env on one core -> x cores
        by_name = {row.name: sps for row, sps in zip(rows[1:], best[1:], strict=True)}
        ours = by_name["ours: CpuPhysics.step"]
        cells = [(f"limit: 1-thread mj_step ({1e6 / (best[0] * s.decimation):.1f} µs) x cores", args.cores,
                  limit_sps)]
        cells += [(row.name, row.workers, sps) for row, sps in zip(rows[1:], best[1:], strict=True)]
        for name, workers, sps in cells:
            print(f"| {name} | {n} | {workers} | {sps:,.0f} | {sps * s.decimation:,.0f} | {n / sps * 1e3:.2f} "
                  f"| {100 * sps / limit_sps:.0f}% | {ours / sps:.2f}x |", flush=True)
        async_sps = next(sps for name, sps in by_name.items() if name.startswith("gymnasium Async")
                         and "per env" not in name)
        per_env = by_name.get("gymnasium AsyncVectorEnv (1 proc per env)")
        if per_env is not None:
            async1 = {"async1_envs": str(n), "async1_sps": f"{per_env:.0f}", "vs_async1": f"{ours / per_env:.2f}"}
        result = {"envs": str(n), "ours_sps": f"{ours:.0f}", "async_sps": f"{async_sps:.0f}",
                  "limit_sps": f"{limit_sps:.0f}", "frac_of_limit": f"{ours / limit_sps:.3f}",
                  "vs_async": f"{ours / async_sps:.2f}",
                  "vecenv_sps": f"{by_name['ours: mujoco VecEnv.step']:.0f}",
                  "policy_sps": f"{by_name['ours: mujoco VecEnv.step + policy']:.0f}",
                  "policy_frac_of_limit": f"{by_name['ours: mujoco VecEnv.step + policy'] / limit_sps:.3f}",
                  "sync_sps": f"{by_name['gymnasium SyncVectorEnv']:.0f}"}
    result.update(async1)
    if not args.no_terrain and args.task == TASK:
        result.update(terrain_section(s, sizes[-1], args.seconds, args.episode, args.repeats,
                                      ray_envs=4 if args.quick else 16))
    warp_section(s, worlds, args.device, args.seconds, args.episode)
    print()
    print("RESULT " + " ".join(f"{k}={v}" for k, v in result.items()))


if __name__ == "__main__":
    main()
