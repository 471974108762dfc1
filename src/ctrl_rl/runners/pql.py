"""PQL's loop: the actor, V-learner and P-learner run concurrently at fixed speed ratios.

``algo.concurrent=true``: three threads (on CUDA each with its own stream), held at
β(actor:V) and β(P:V) by a :class:`RatioController`; the main thread only supervises, so an
exception in any role or a KeyboardInterrupt stops all of them, writes a checkpoint and
re-raises. ``algo.concurrent=false``: one thread interleaves the same units in the order the
controller would allow, deterministic given the seed (exact resume).

An iteration is ``num_steps_per_env`` actor steps; the actor thread logs it and, at save
points, parks the learners while it writes ``model_<it>.pt``. Besides the usual tags it logs the
measured ratios as ``Perf/beta_actor_critic`` and ``Perf/beta_policy_critic``; ``Perf/learning_time``
is the actor's time waiting for the learners (concurrent) or the learners' compute (sequential).
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import torch

from ctrl_rl.algos.pql import PQL, ROLES
from ctrl_rl.config import ConfigError
from ctrl_rl.runners import LOOPS
from ctrl_rl.runners.base import Runner
from ctrl_rl.utils.guards import check_learner_finite
from ctrl_rl.utils.interrupts import GracefulStop, Interrupted, stop_requested
from ctrl_rl.utils.logger import EpisodeStats, TrainLogger, close_quietly

log = logging.getLogger(__name__)

JOIN_TIMEOUT_S = 30.0
"""How long shutdown waits for each role thread to finish its current unit."""


class RatioController:
    """Keeps the roles' speeds at PQL's ratios by making whichever is ahead wait (PQL §3.4).

    Each role's progress is measured in V-learner updates: ``actor_steps * β_av``,
    ``critic_updates``, ``policy_updates * β_pv``. A role may start a unit only if its progress
    after the unit stays within ``slack`` of the slowest other role; with ``slack`` at least the
    largest per-unit weight the slowest role can always go, so nothing deadlocks, and the measured
    ratios stay within ``slack`` updates of the targets at every moment.

    Before :meth:`start` (the warm-up) only the actor runs and nothing is counted. ``counts`` is
    the algorithm's dict, so it is checkpointed with it and a resumed run continues the schedule.
    """

    def __init__(self, beta_actor_critic: float, beta_policy_critic: float, counts: dict[str, int],
                 slack: float = 0.0):
        self.weight = {"actor": float(beta_actor_critic), "critic": 1.0, "policy": float(beta_policy_critic)}
        self.slack = max(float(slack), *self.weight.values())
        self.counts = counts
        self.started = False
        self.stopped = False
        self.waited = dict.fromkeys(ROLES, 0.0)
        """Seconds each role spent blocked in :meth:`begin` (how much the ratios cost it)."""
        self._paused = False
        self._busy: set[str] = set()
        self._cond = threading.Condition()

    def progress(self, role: str) -> float:
        return self.counts[role] * self.weight[role]

    def _may_begin(self, role: str) -> bool:
        if not self.started:
            return role == "actor"
        if role != "actor" and self._paused:
            return False
        slowest = min(self.progress(r) for r in ROLES if r != role)
        return self.progress(role) + self.weight[role] <= slowest + self.slack + 1e-9

    def begin(self, role: str) -> bool:
        """Block until ``role`` may do one unit; ``False`` once stopped (the role should return)."""
        t0 = time.perf_counter()
        with self._cond:
            self._cond.wait_for(lambda: self.stopped or self._may_begin(role))
            if self.stopped:
                return False
            self._busy.add(role)
        self.waited[role] += time.perf_counter() - t0
        return True

    def end(self, role: str) -> None:
        """``role`` finished a unit (the actor's warm-up steps are not counted)."""
        with self._cond:
            if self.started:
                self.counts[role] += 1
            self._busy.discard(role)
            self._cond.notify_all()

    def start(self) -> None:
        """Warm-up done: the learners may run and every unit counts from now on."""
        with self._cond:
            self.started = True
            self._cond.notify_all()

    def stop(self) -> None:
        """Wake every waiting role and refuse further units (shutdown)."""
        with self._cond:
            self.stopped = True
            self._cond.notify_all()

    @contextmanager
    def learners_parked(self) -> Iterator[None]:
        """Hold the learners between units (for a consistent checkpoint); the caller is the actor."""
        with self._cond:
            self._paused = True
            self._cond.wait_for(lambda: self.stopped or not (self._busy - {"actor"}))
        try:
            yield
        finally:
            with self._cond:
                self._paused = False
                self._cond.notify_all()

    def next_role(self) -> str:
        """Single-thread schedule: the role with the least progress (ties: actor, critic, policy)."""
        if not self.started:
            return "actor"
        return min(ROLES, key=lambda r: (self.progress(r), ROLES.index(r)))

    def measured(self) -> dict[str, float]:
        """Measured β(actor:V) and β(P:V) since learning started (``nan`` before)."""
        a, v, p = (self.counts[r] for r in ROLES)
        return {"beta_actor_critic": v / a if a else float("nan"), "beta_policy_critic": v / p if p else float("nan")}


class PQLRunner(Runner):
    """The PQL loop; checkpoints, resume and logging as every runner (``model_<it>.pt``, rsl_rl tags)."""

    alg: PQL

    def __init__(self, env, cfg, log_dir: Path | None = None):
        if cfg.profile:
            raise ConfigError("profile: PQL's three concurrent roles are not one loop to split; its Perf/* "
                              "tags report each role's rate. Drop profile=true for algo=pql")
        if cfg.runner.keep_best:
            raise ConfigError("runner.keep_best: PQL's loop writes only its model_<it>.pt (the roles would be "
                              "parked every iteration to judge a best); drop runner.keep_best for algo=pql")
        super().__init__(env, cfg, log_dir)

    def learn(self, max_iterations: int | None = None) -> list[dict[str, float]]:
        """Train until ``max_iterations`` completed iterations (a total, not a count to add)."""
        total = max_iterations or self.cfg.runner.max_iterations
        cfg = self.cfg.algo
        if self.obs is None:
            self.obs = self.fresh_episodes(self.cfg.seed)
        self.controller = RatioController(cfg.beta_actor_critic, cfg.beta_policy_critic, self.alg.counts,
                                          cfg.ratio_slack)
        if self.alg.learning_started:
            self.controller.start()
        self._logger = TrainLogger(self.log_dir, total, self.steps_per_iteration, self.iteration, self.history,
                                   progress=self.cfg.runner.progress)
        self._episodes = EpisodeStats(self.env.device)
        self._timer = {"collect": 0.0, "learn": 0.0}
        self._steps_in_iteration = 0
        try:
            (self._learn_concurrent if cfg.concurrent else self._learn_sequential)(total)
        except BaseException:
            close_quietly(self._logger)  # a failing close must not hide why the run stopped
            raise
        self._logger.close()
        return self.history

    # ------------------------------------------------------------------ roles
    def _actor_step(self) -> None:
        """One env step of every env with the latest policy (the actor role's unit)."""
        actions = self.alg.act(self.obs)
        obs, rewards, terminated, truncated, info = self.env.step(actions)
        self.finite_watch.add(obs, rewards)
        self.alg.process_step(obs, rewards, terminated, truncated, info)
        self._episodes.add(terminated, truncated, info)
        self.obs = obs

    def _actor_unit(self, total: int, parked: Callable[[], contextlib.AbstractContextManager]) -> bool:
        """One actor step when the controller allows it; logs (and saves) at the end of an iteration.
        ``False`` once the controller has stopped."""
        ctrl = self.controller
        t0 = time.perf_counter()
        if not ctrl.begin("actor"):
            return False
        t1 = time.perf_counter()
        self._actor_step()
        ctrl.end("actor")
        if not ctrl.started and self.alg.learning_started:
            ctrl.start()
        self._timer["learn"] += t1 - t0  # concurrent: time spent waiting for the learners
        self._timer["collect"] += time.perf_counter() - t1
        self._steps_in_iteration += 1
        if self._steps_in_iteration == self.cfg.algo.num_steps_per_env:
            self._steps_in_iteration = 0
            self._end_iteration(total, parked)
        return True

    def _end_iteration(self, total: int, parked: Callable[[], contextlib.AbstractContextManager]) -> None:
        self.iteration += 1
        self.finite_watch.check(self.iteration)
        if not self.cfg.algo.concurrent:  # concurrent: at each checkpoint, learners parked (save checks)
            check_learner_finite(self.alg, self.iteration)
        stats = self.alg.pop_stats()
        logger = self._logger
        logger.log_iteration(self.iteration, stats, self._episodes, self._timer["collect"], self._timer["learn"])
        self._timer = {"collect": 0.0, "learn": 0.0}
        self._episodes.reset()
        measured = self.controller.measured()
        if self.controller.started:
            logger.history[-1].update(measured)
            if logger.writer is not None:
                for k, v in measured.items():
                    logger.writer.add_scalar(f"Perf/{k}", v, self.iteration)
        self.history = logger.history
        if self.log_dir is not None and (self.iteration % self.cfg.runner.save_interval == 0
                                         or self.iteration == total):
            with parked():
                logger.flush()
                self._sync_device()
                self.save(self.log_dir / f"model_{self.iteration}.pt")
        if not self.cfg.algo.concurrent:  # concurrent: the supervising thread stops the roles first
            self.stop_if_requested(logger)

    def _run_learner(self, role: str) -> None:
        unit = self.alg.update_critic if role == "critic" else self.alg.update_policy
        while self.controller.begin(role):
            unit()
            self.controller.end(role)

    # ------------------------------------------------------------------ schedules
    def _learn_sequential(self, total: int) -> None:
        """One thread, the roles in the controller's order: exactly β_av critic updates per actor step
        and one policy update per β_pv critic updates, deterministic given the seed."""
        ctrl = self.controller
        units = {"critic": self.alg.update_critic, "policy": self.alg.update_policy}
        try:
            while self.iteration < total:
                role = ctrl.next_role()
                if role == "actor":
                    self._actor_unit(total, contextlib.nullcontext)
                    continue
                t0 = time.perf_counter()
                ctrl.begin(role)
                units[role]()
                ctrl.end(role)
                self._timer["learn"] += time.perf_counter() - t0
        except Interrupted:  # its checkpoint is written
            raise
        except BaseException:
            self._save_after_failure()
            raise

    def _learn_concurrent(self, total: int) -> None:
        """Three role threads; the calling thread supervises, stops them all on the first error or a
        KeyboardInterrupt, writes a checkpoint and re-raises."""
        ctrl, device = self.controller, self.env.device
        errors: list[BaseException] = []
        self._sync_device()  # work queued on the default stream (init, load) before the role streams start

        def run(role: str, body: Callable[[], None]) -> None:
            try:
                stream = torch.cuda.Stream(device) if device.type == "cuda" else None
                with torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext():
                    body()
                if stream is not None:
                    stream.synchronize()
            except BaseException as exc:
                errors.append(exc)
                log.error("PQL %s role failed: %r; stopping every role", role, exc)
            finally:
                ctrl.stop()  # the actor ending normally also ends the learners

        def actor() -> None:
            while self.iteration < total and self._actor_unit(total, ctrl.learners_parked):
                pass

        bodies = {"actor": actor,
                  "critic": lambda: self._run_learner("critic"), "policy": lambda: self._run_learner("policy")}
        threads = [threading.Thread(target=run, args=(r, bodies[r]), name=f"pql-{r}", daemon=True) for r in ROLES]
        interrupted: BaseException | None = None
        # Ctrl-C sets a flag instead of raising: a KeyboardInterrupt raised inside threading's own
        # lock handling (Thread.join, Condition.wait) can leave a lock held and hang the shutdown.
        # (`ctrl-rl train` installs GracefulStop, which also takes SIGTERM; this is for direct calls)
        sigint = [False]
        previous = None
        if threading.current_thread() is threading.main_thread() and GracefulStop.active is None:
            previous = signal.signal(signal.SIGINT, lambda signum, frame: sigint.__setitem__(0, True))
        try:
            for t in threads:
                t.start()
            while (any(t.is_alive() for t in threads) and not ctrl.stopped and not sigint[0]
                   and not stop_requested()):
                threads[0].join(timeout=0.05)
        except KeyboardInterrupt as exc:  # not the main thread, or a handler installed by the caller
            interrupted = exc
        finally:
            if previous is not None:
                signal.signal(signal.SIGINT, previous)
        if sigint[0]:
            interrupted = KeyboardInterrupt()
        signum = stop_requested()
        if signum is not None and interrupted is None:
            interrupted = Interrupted(signum, self.iteration, None)
        if interrupted is not None:
            log.warning("interrupted: stopping the PQL roles")
        ctrl.stop()
        for t in threads:
            t.join(timeout=JOIN_TIMEOUT_S)
            if t.is_alive():
                log.error("%s did not stop within %.0f s (stuck in the env or a kernel?); abandoning it",
                          t.name, JOIN_TIMEOUT_S)
        failure = errors[0] if errors else interrupted
        if failure is not None:
            path = self._save_after_failure()
            if isinstance(failure, Interrupted):  # roles stopped mid-iteration: saved, not bit-exact
                raise Interrupted(failure.signum, self.iteration, str(path) if path else None)
            raise failure

    # ------------------------------------------------------------------ helpers
    def _sync_device(self) -> None:
        if self.env.device.type == "cuda":
            torch.cuda.synchronize(self.env.device)

    def _save_after_failure(self) -> Path | None:
        """Keep the progress of a run that failed or was interrupted (resume is then not bit-exact)."""
        if self.log_dir is None:
            return None
        path = self.log_dir / f"model_{self.iteration}.pt"
        try:
            self._logger.flush()
            self._sync_device()
            self.save(path)
            log.warning("run stopped early: state written to %s", path)
        except Exception as exc:  # never mask the original error
            log.error("could not write a checkpoint after the failure: %r", exc)
            return None
        return path


LOOPS.register("pql", PQLRunner)
