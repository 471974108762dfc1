"""The offline loop: gradient steps on a dataset, with the env used only to evaluate.

An iteration is the learner's ``update()`` (``updates_per_iteration`` minibatch steps); a run
is ``algo.num_passes`` passes over the dataset (or ``runner.max_iterations`` iterations); every
``algo.eval_interval`` iterations (and after the last) the deterministic policy runs one episode
in each of ``env.num_envs`` envs (at most ``algo.eval_episodes``) and the mean return is logged
as ``Train/mean_reward``, so an offline run's curve reads like an online one. Checkpoints are the
online runners': ``ctrl-rl eval``, ``export`` and ``--checkpoint`` resume work unchanged (the
dataset is reloaded from ``dataset=``; resume is exact).
"""

from __future__ import annotations

import math
import time

from ctrl_rl.nets.actor_critic import concat_groups
from ctrl_rl.runners import LOOPS
from ctrl_rl.runners.base import Runner
from ctrl_rl.runners.episodes import episodes_in_own_env, run_episodes
from ctrl_rl.storage.formats import load_dataset
from ctrl_rl.utils.logger import EpisodeStats, TrainLogger


class OfflineRunner(Runner):
    """Behavior cloning (and later the offline phase of offline-to-online learners)."""

    def __init__(self, env, cfg, log_dir=None):
        super().__init__(env, cfg, log_dir)
        self.dataset = load_dataset(cfg.dataset)  # D4RL HDF5, Minari (minari:<id> or a directory), robot logs
        self.alg.set_dataset(self.dataset)

    def samples_per_iteration(self) -> int:
        return self.cfg.algo.batch_size * self.cfg.algo.updates_per_iteration

    def total_iterations(self) -> int:
        """``algo.num_passes`` passes over the dataset (``runner.max_iterations`` when it is 0)."""
        passes = self.cfg.algo.num_passes
        if passes <= 0:
            return self.cfg.runner.max_iterations
        return max(1, math.ceil(passes * len(self.dataset) / self.samples_per_iteration()))

    def evaluate(self) -> tuple[float, float, dict[str, float]]:
        """Mean return, mean length and the task's episode metrics (a success rate) of one deterministic episode
        per env: the training env's, or, when ``algo.eval_episodes`` asks for fewer, an env of that many built for
        this evaluation (a 4096-env task would otherwise run 4096 episodes each time)."""
        actor, groups = self.alg.inference_policy(), self.alg.model.actor_obs
        seed, n = self.cfg.seed + 10_000 + self.iteration, self.cfg.algo.eval_episodes

        def policy(obs):
            return actor(concat_groups(obs, groups))

        metrics: list[dict[str, float]] = []
        if 0 < n < self.env.num_envs:
            [(returns, lengths)] = episodes_in_own_env(self.cfg, n, seed, policy, episode_metrics=metrics)
        else:
            metrics.append({})
            returns, lengths = run_episodes(self.env, policy, seed=seed, episode_metrics=metrics[0])
        return float(returns.mean()), float(lengths.double().mean()), metrics[0]

    def offline_update(self) -> dict[str, float]:
        """One iteration's gradient steps on the dataset (BC: its ``update``)."""
        return self.alg.update()

    def iterate(self, logger: TrainLogger, episodes: EpisodeStats, total: int) -> None:
        """``update()`` on the dataset; every ``eval_interval`` iterations (and the last) an evaluation."""
        t0 = time.perf_counter()
        with self.profiler.stage("update"):
            stats = self.offline_update()
        self.iteration += 1
        t1 = time.perf_counter()
        interval = self.cfg.algo.eval_interval
        if self.iteration == total or (interval and self.iteration % interval == 0):
            mean_return, mean_length, metrics = self.evaluate()
            episodes.add_summary(mean_return, mean_length, metrics=metrics)
        logger.log_iteration(self.iteration, stats, episodes, time.perf_counter() - t1, t1 - t0)


LOOPS.register("offline", OfflineRunner)
