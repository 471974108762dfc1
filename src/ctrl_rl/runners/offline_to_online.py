"""Offline, then online, in one run and on one curve (Uni-O4).

Iterations ``1..algo.offline_iterations`` are offline (``update()`` on the dataset, an evaluation
every ``algo.eval_interval``, no env steps counted); then the hand-over scores the offline
candidates in an evaluation env and the learner continues as PPO for ``runner.max_iterations`` more
iterations. TensorBoard's ``Train/mean_reward`` spans both phases by iteration; ``env_steps``
(metrics.csv, the learning-curve plot, checkpoints) counts only the steps the online phase and
the hand-over's evaluation took. A checkpoint from either phase resumes in that phase.
"""

from __future__ import annotations

import logging
from typing import Any

import torch

from ctrl_rl.nets.actor_critic import concat_groups
from ctrl_rl.runners import LOOPS
from ctrl_rl.runners.episodes import episodes_in_own_env
from ctrl_rl.runners.offline import OfflineRunner
from ctrl_rl.utils.logger import EpisodeStats, TrainLogger

log = logging.getLogger(__name__)


class OfflineToOnlineRunner(OfflineRunner):
    """Drives a learner with ``offline_update``/``start_online`` (``UniO4``) through both phases."""

    def samples_per_iteration(self) -> int:
        return self.env_steps_per_iteration()  # online env steps (the offline phase counts none)

    @property
    def offline_iterations(self) -> int:
        return self.cfg.algo.offline_iterations

    def total_iterations(self) -> int:
        """The offline iterations, then ``runner.max_iterations`` online ones."""
        return self.offline_iterations + self.cfg.runner.max_iterations

    def configure_logger(self, logger: TrainLogger) -> None:
        logger.step_origin = self.offline_iterations
        logger.extra_env_steps = self.alg.selection_env_steps

    def offline_update(self) -> dict[str, float]:
        return self.alg.offline_update()

    def iterate(self, logger: TrainLogger, episodes: EpisodeStats, total: int) -> None:
        if self.alg.phase == "online":
            self.rollout_iteration(logger, episodes)
            return
        super().iterate(logger, episodes, total)
        if self.alg.offline_done:
            self.hand_over()
            logger.extra_env_steps = self.alg.selection_env_steps

    @torch.no_grad()
    def hand_over(self) -> None:
        """Score each candidate by ``algo.select_episodes`` deterministic episodes, all from the same
        starts (one env of their own, seeded apart from training, reset alike for each), and start
        PPO from the best (:func:`best_candidate`). Paired starts matter: episode returns vary with
        the start and command far more than the candidates do."""
        cands, groups = [c.eval() for c in self.alg.candidates()], self.alg.model.actor_obs
        per = self.cfg.algo.select_episodes
        ope = self.alg.offline.best_scores.tolist()
        scores, success = [0.0] * len(cands), []
        if per > 0:
            metrics: list[dict[str, float]] = []
            runs = episodes_in_own_env(self.cfg, per, self.cfg.seed + 20_000,
                                       *[lambda obs, c=c: c(concat_groups(obs, groups)) for c in cands],
                                       episode_metrics=metrics)
            scores = [float(returns.mean()) for returns, _ in runs]
            success = [m["success_rate"] for m in metrics if "success_rate" in m]
            self.alg.selection_env_steps = sum(int(lengths.sum()) for _, lengths in runs)
        best = best_candidate(scores, ope, success or None)
        self.alg.selection_returns, self.alg.selection_success = scores, success
        log.info("offline phase done: candidates' returns %s%s, OPE %s -> member %d starts PPO",
                 [round(s, 2) for s in scores], f", success {[round(s, 3) for s in success]}" if success else "",
                 [round(s, 2) for s in ope], best)
        self.alg.start_online(best)

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        online = max(self.iteration - self.offline_iterations, 0)
        state["env_steps"] = online * self.steps_per_iteration + self.alg.selection_env_steps
        return state


def best_candidate(returns: list[float], ope: list[float], success: list[float] | None = None) -> int:
    """The hand-over's choice: the highest success rate where the task scores one (a manipulation task's
    return pays for approaching as well as for finishing, so the best return need not be the best
    success), then the highest evaluation return, then the highest OPE score (ties, or no evaluation
    episodes: ``returns`` all 0)."""
    key = (lambda i: (success[i], returns[i], ope[i])) if success else (lambda i: (returns[i], ope[i]))
    return max(range(len(returns)), key=key)


LOOPS.register("offline_to_online", OfflineToOnlineRunner)
