"""The training loop every runner shares: collect, prepare, update, log, checkpoint, resume.

rsl_rl's runner / algorithm split: the runner owns the loop, the env and the files; the learner
(:class:`~ctrl_rl.algos.base.Learner`) owns the learning, and the runner calls only what that
protocol declares. An iteration of :meth:`Runner.rollout_iteration` collects
``num_steps_per_env`` steps from every env, lets the learner prepare (PPO computes GAE over the
rollout), then calls ``update()``: the ``online`` loop, which drives the PPO family and SAC alike
(what is on- or off-policy is the learner's). The offline, offline-to-online and PQL loops extend
it in their own modules; ``ctrl_rl.runners.LOOPS`` names them all.
"""

from __future__ import annotations

import dataclasses
import logging
import signal
import time
from pathlib import Path
from typing import Any

import torch

import ctrl_rl
from ctrl_rl import distributed
from ctrl_rl.algos import make_algorithm
from ctrl_rl.config import ConfigError, TrainConfig
from ctrl_rl.env import Obs, VecEnv
from ctrl_rl.nets.normalizer import sync_pending
from ctrl_rl.runners import LOOPS
from ctrl_rl.utils import threads
from ctrl_rl.utils.checkpoint_files import (
    BEST_MODEL,
    load_file,
    new_best,
    remove_leftovers,
    remove_stale_replays,
    replay_file,
    rng_state,
    save_atomic,
    set_rng_state,
)
from ctrl_rl.utils.guards import FiniteWatch, check_learner_finite
from ctrl_rl.utils.heap import keep_freed_memory
from ctrl_rl.utils.interrupts import Interrupted, stop_requested
from ctrl_rl.utils.logger import EpisodeStats, TrainLogger, close_quietly
from ctrl_rl.utils.profiling import StageTimer

log = logging.getLogger(__name__)

REPLAY_FILE = "replay.pt"
"""Where runs before ``replay_<it>.pt`` kept their replay (still read on resume)."""


class Runner:
    """Owns the loop; the algorithm owns the learning (rsl_rl's split).

    ``iteration`` counts completed iterations; ``model_<it>.pt`` holds the state after
    ``it`` of them, so resuming from it and training to the same total reproduces an
    uninterrupted run exactly when the env exposes its state.

    Under torchrun every rank runs one Runner over its own envs (seeded ``seed + rank *
    RANK_SEED_STRIDE``, see :mod:`ctrl_rl.distributed`); the learners average gradients, so the
    replicas stay equal. Rank 0 alone writes TensorBoard, progress and checkpoints; a checkpoint
    holds every rank's envs and RNGs, so a resume with the same world size is exact.
    """

    def __init__(self, env: VecEnv, cfg: TrainConfig, log_dir: Path | None = None):
        self.env, self.cfg, self.log_dir = env, cfg, log_dir
        if cfg.runner.stagger_episodes and not env.supports_stagger:
            raise ConfigError(f"runner.stagger_episodes: {type(env).__name__} keeps its episodes' step counter "
                              "inside the simulator and cannot stagger them; set runner.stagger_episodes=false")
        if cfg.runner.keep_heap and torch.device(env.device).type == "cpu":
            keep_freed_memory()
        self.rank, self.world_size = distributed.rank(), distributed.world_size()
        self.env_seed = distributed.rank_seed(cfg.seed)
        self.alg = make_algorithm(cfg.algo, env.obs_dims, env.action_dim, env.num_envs, env.device,
                                  seed=self.env_seed, action_bounds=env.action_bounds)
        self.alg.set_mirror(env.mirror)
        self.alg.set_obs_terms(env.obs_terms)
        distributed.broadcast_module_(self.alg.model)  # identical replicas from the first step
        self.iteration = 0
        self.history: list[dict[str, float]] = []
        self.obs = None
        self.steps_per_iteration = self.samples_per_iteration() * self.world_size
        self.replica_divergence = 0.0
        """At the last checkpoint: the largest parameter difference between ranks (0 = replicas)."""
        self.profiler = StageTimer(env.device, False)
        """Times the loop's stages when ``profile=true`` (set up by :meth:`learn`)."""
        self.saved_iteration = -1
        """The iteration of the last :meth:`save` (a stop request saves only if this one is not saved yet)."""
        self.finite_watch = FiniteWatch()
        """NaN/inf in observations and rewards, per env, checked once per iteration."""

    def samples_per_iteration(self) -> int:
        """What one iteration consumes: env steps of all envs (samples of the dataset offline)."""
        return self.env_steps_per_iteration()

    def env_steps_per_iteration(self) -> int:
        """Env steps of one :meth:`rollout_iteration` in this process (every env, ``num_steps_per_env`` each)."""
        return self.env.num_envs * self.cfg.algo.num_steps_per_env

    def learn(self, max_iterations: int | None = None) -> list[dict[str, float]]:
        """Train until ``max_iterations`` completed iterations (a total, not a count to add)."""
        total = max_iterations or self.total_iterations()
        self.alg.set_run_length(self.cfg.runner.max_iterations)  # schedules over the run, however learn() is chunked
        main = distributed.is_main()
        logger = TrainLogger(self.log_dir if main else None, total, self.steps_per_iteration, self.iteration,
                             self.history, progress=self.cfg.runner.progress and main)
        self.configure_logger(logger)
        episodes = EpisodeStats(self.env.device)
        self.profiler = StageTimer(self.env.device, self.cfg.profile)
        try:
            while self.iteration < total:
                self.iterate(logger, episodes, total)
                check_learner_finite(self.alg, self.iteration)  # before anything is written of it
                episodes.reset()
                self.history = logger.history
                with self.profiler.stage("logging"):
                    self.checkpoint_if_due(logger, total)
                if self.profiler.enabled:
                    logger.log_profile(self.iteration, self.profiler.end_iteration())
                self.stop_if_requested(logger)
        except BaseException:
            close_quietly(logger)  # a failing close must not hide why the run stopped
            raise
        else:
            logger.close()
        finally:
            if self.profiler.enabled and main:
                print(self.profiler.table())
        return self.history

    def stop_if_requested(self, logger: TrainLogger) -> None:
        """At an iteration boundary after SIGINT/SIGTERM (agreed by every rank): write the checkpoint
        of this iteration (unless it was just written) and raise :class:`Interrupted`."""
        signum = stop_requested() or 0
        if self.world_size > 1:  # every rank stops at the same iteration, or the collectives hang
            signum = int(max(distributed.sum_floats([float(signum)])[0], 0)) and (signum or int(signal.SIGTERM))
        if not signum:
            return
        path = None
        if self.log_dir is not None:
            path = self.log_dir / f"model_{self.iteration}.pt"
            if self.saved_iteration != self.iteration:  # every rank decides alike (save is collective)
                logger.flush()
                self.save(path)
        raise Interrupted(signum, self.iteration, str(path) if path else None)

    def total_iterations(self) -> int:
        """The run's length in iterations (``runner.max_iterations``)."""
        return self.cfg.runner.max_iterations

    def set_total_iterations(self, total: int) -> None:
        """End the run at iteration ``total`` (``ctrl-rl train --more``) by setting ``runner.max_iterations``
        to the value :meth:`total_iterations` turns into ``total`` (Uni-O4's: ``total`` less its offline
        iterations); before :meth:`learn`, and saved with every checkpoint. ``ConfigError`` when no value
        does: another key sets the length (BC's ``algo.num_passes``), or ``total`` is too short for it."""
        before = self.total_iterations() - self.cfg.runner.max_iterations  # iterations it does not count
        value, least = total - before, self.cfg.algo.min_iterations
        if value < least:
            raise ConfigError(f"the run cannot end at iteration {total}: runner.max_iterations counts only the "
                              f"iterations after the first {before} here, so it ends at iteration {before + least} "
                              f"or later ({before + least - self.iteration} or more past iteration {self.iteration})")
        previous, self.cfg = self.cfg, dataclasses.replace(
            self.cfg, runner=dataclasses.replace(self.cfg.runner, max_iterations=value))
        if self.total_iterations() != total:
            self.cfg, length = previous, self.total_iterations()
            raise ConfigError(f"runner.max_iterations does not set this run's length ({length} iterations): "
                              f"algo={self.cfg.algo.name} takes it from another key (BC: algo.num_passes; add "
                              "algo.num_passes=0 to count iterations)")

    def configure_logger(self, logger: TrainLogger) -> None:
        """Before the first iteration (offline-to-online runners set where env steps start)."""

    def iterate(self, logger: TrainLogger, episodes: EpisodeStats, total: int) -> None:
        """One iteration (learners that act in the env: :meth:`rollout_iteration`)."""
        self.rollout_iteration(logger, episodes)

    def rollout_iteration(self, logger: TrainLogger, episodes: EpisodeStats) -> None:
        """Collect ``num_steps_per_env`` steps in every env, prepare, update, log."""
        if self.obs is None:
            self.obs = self.fresh_episodes(self.env_seed)
        t0 = time.perf_counter()
        obs, stage = self.obs, self.profiler.stage
        for _ in range(self.cfg.algo.num_steps_per_env):
            with stage("inference"):
                actions = self.alg.act(obs)
            with stage("sim"):
                obs, rewards, terminated, truncated, info = self.env.step(actions)
            self.finite_watch.add(obs, rewards)
            with stage("storage"):
                self.alg.process_step(obs, rewards, terminated, truncated, info)
                episodes.add(terminated, truncated, info)
        self.obs = obs
        self.finite_watch.check(self.iteration + 1)
        with stage("update"):
            sync_pending(self.alg.model)  # under torchrun: every rank's rollout into the obs normalizers
            self.alg.prepare_update()
            self.alg.observe_logs(episodes.read()[2])
        t1 = time.perf_counter()
        with stage("update"), threads.for_update():
            stats = distributed.mean_stats(self.alg.update())
        t2 = time.perf_counter()
        self.iteration += 1
        with stage("logging"):
            logger.log_iteration(self.iteration, stats, episodes, t1 - t0, t2 - t1)

    def fresh_episodes(self, seed: int) -> Obs:
        """Reset every env (``seed``), staggered with ``runner.stagger_episodes``; the first observation."""
        obs = self.env.reset(seed=seed)
        if self.cfg.runner.stagger_episodes:
            self.env.stagger_episodes()
        return obs

    def checkpoint_if_due(self, logger: TrainLogger, total: int) -> None:
        """``model_<it>.pt`` every ``save_interval`` iterations and at the last (TensorBoard flushed first)."""
        due = self.iteration % self.cfg.runner.save_interval == 0 or self.iteration == total
        if self.log_dir is not None and due:
            logger.flush()
            self.save(self.log_dir / f"model_{self.iteration}.pt")
        if self.log_dir is not None and self.cfg.runner.keep_best:
            self.keep_best()

    def keep_best(self) -> None:
        """``model_best.pt`` when this iteration's value of ``runner.keep_best`` makes its windowed mean the
        highest yet (``checkpoint_files.new_best``; rank 0 writes it, without an off-policy replay)."""
        key, rows = self.cfg.runner.keep_best, self.history
        values = [float(r[key]) for r in rows if key in r]
        if not values and rows and "mean_reward" in rows[-1]:  # an episode ended and did not log it
            logged = sorted(k for k in rows[-1] if "/" in k)
            raise ConfigError(f"runner.keep_best: this run logs no {key!r}; it logs {logged}")
        score = new_best(values, self.cfg.runner.best_window) if rows and key in rows[-1] else None
        if score is not None and distributed.is_main():
            save_atomic(self.state_dict(), self.log_dir / BEST_MODEL)
            log.info("%s: %s %.4g (mean of the last %d) at iteration %d", BEST_MODEL, key, score,
                     self.cfg.runner.best_window, self.iteration)

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        return {
            "ctrl_rl_version": ctrl_rl.__version__,
            "iteration": self.iteration,
            "env_steps": self.iteration * self.steps_per_iteration,
            "algo": self.alg.state_dict(),
            **self.episode_state(),
            "history": self.history,
            "config": dataclasses.asdict(self.cfg),
            "obs_dims": dict(self.env.obs_dims),
            "action_dim": self.env.action_dim,
            "action_bounds": self.env.action_bounds,
        }

    def episode_state(self) -> dict[str, Any]:
        """The episodes in flight and the global random streams (a checkpoint's per-process part)."""
        return {"env_state": self.env.get_state() if self.env.supports_state else None, "obs": self.obs,
                "rng": rng_state()}

    def rank_state(self) -> dict[str, Any]:
        """What differs between ranks: :meth:`episode_state` and the learner's own generator."""
        return {**self.episode_state(), "generator": self.alg.generator.get_state()}

    def save(self, path: Path) -> Path:
        """``model_<it>.pt``, after an off-policy learner's replay buffer went to ``replay_<it>.pt``
        beside it (a 1M-transition buffer is hundreds of MB: only the newest pair is kept; the
        model file, written last, is what makes a replay count: see ``utils/checkpoint_files.py``).

        Under torchrun every rank calls this: rank ``r > 0`` writes its own replay and hands its
        :meth:`rank_state` to rank 0, which writes the checkpoint after checking that the replicas
        are equal (and re-synchronizing them from rank 0 if not). Nothing non-finite is written.
        """
        check_learner_finite(self.alg, self.iteration)
        self.saved_iteration = self.iteration
        if self.alg.keeps_replay:
            save_atomic({"iteration": self.iteration, "replay": self.alg.replay_state_dict()},
                        Path(path).parent / replay_file(self.iteration, self.rank))
        ranks = distributed.gather_objects(self.rank_state()) if self.world_size > 1 else None
        self.replica_divergence = distributed.replica_divergence(self.alg.model)
        if self.replica_divergence > 0:
            log.warning("replicas differ by up to %.3g between ranks at iteration %d: re-synchronized from rank 0",
                        self.replica_divergence, self.iteration)
            distributed.broadcast_module_(self.alg.model)
        if not distributed.is_main():
            return Path(path)
        state = self.state_dict()
        if ranks is not None:
            state.update(world_size=self.world_size, rank_states=ranks[1:], replica_divergence=self.replica_divergence)
        save_atomic(state, path)
        if self.alg.keeps_replay:
            remove_stale_replays(Path(path).parent, self.iteration)
        return Path(path)

    def _load_replay(self, path: Path) -> None:
        run_dir = Path(path).parent
        f = run_dir / replay_file(self.iteration, self.rank)
        legacy = run_dir / (REPLAY_FILE if self.rank == 0 else f"replay_rank{self.rank}.pt")
        if not f.is_file() and legacy.is_file():  # a run written before replays carried their iteration
            f = legacy
        saved = load_file(f, "replay buffer") if f.is_file() else None
        if saved is not None and saved["iteration"] == self.iteration:
            self.alg.load_replay_state_dict(saved["replay"])
            return
        found = f"no {f.name}" if saved is None else f"{f.name} is from iteration {saved['iteration']}"
        log.warning("replay buffer not restored (%s, checkpoint is iteration %d): learning continues from an "
                    "empty buffer, so this resume is not exact", found, self.iteration)

    def load(self, path: Path, load_env_state: bool = True) -> None:
        """Restore everything a checkpoint holds; the loop then continues from its iteration."""
        # CPU first: RNG states must stay CPU byte tensors; modules copy onto their device
        state = load_file(path)
        if distributed.is_main():
            remove_leftovers(Path(path).parent)
        self.alg.load_state_dict(state["algo"])
        self.iteration = state["iteration"]
        if self.alg.keeps_replay:
            self._load_replay(path)
        self.history = list(state.get("history", []))
        mine = self._own_rank_state(state)
        if mine is None:  # this rank did not exist in the saved run
            self.obs = self.fresh_episodes(self.env_seed + self.iteration)
            return
        set_rng_state(mine["rng"])
        if self.rank > 0:
            self.alg.generator.set_state(mine["generator"])
        if mine.get("obs") is None:  # an offline learner: no episode in flight
            self.obs = None
        elif load_env_state and mine.get("env_state") is not None and self.env.supports_state:
            self.env.set_state(mine["env_state"])
            self.obs = {k: v.to(self.env.device) for k, v in mine["obs"].items()}
        else:  # env state not restorable: continue from fresh episodes (not bit-exact)
            log.warning("env state not restored from %s: resuming from freshly reset envs", path)
            self.obs = self.fresh_episodes(self.env_seed + self.iteration)

    def _own_rank_state(self, state: dict[str, Any]) -> dict[str, Any] | None:
        """This rank's part of a checkpoint: rank 0's is the top level (so single-process tools read
        any checkpoint); ``None`` when the saved run had fewer ranks."""
        saved_world = state.get("world_size", 1)
        if saved_world != self.world_size and distributed.is_main():
            log.warning("checkpoint was written by %d process(es), resuming with %d: the shared learner "
                        "state is restored, ranks beyond the saved ones start from fresh episodes (not exact)",
                        saved_world, self.world_size)
        if self.rank == 0:
            return state
        ranks = state.get("rank_states", [])
        return ranks[self.rank - 1] if self.rank - 1 < len(ranks) else None


LOOPS.register("online", Runner)
