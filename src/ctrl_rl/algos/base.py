"""The learner protocol: what a runner calls, declared once.

Runners never ask a learner what it can do (no ``hasattr``): every capability is a method here,
and a learner without it keeps the do-nothing default. A learner module defines its class and
registers it (``ctrl_rl.algos.registry.register_learner``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from ctrl_rl.env import Obs
from ctrl_rl.mirror import EnvMirror


class Learner:
    """Base of every learner. Subclasses set ``model`` (the modules checkpoints, replicas and guards
    cover) and ``generator`` (the learner's own random stream, saved in checkpoints)."""

    model: nn.Module
    generator: torch.Generator

    # ------------------------------------------------------------------ collection
    def act(self, obs: Obs) -> torch.Tensor:
        """Actions for ``obs`` (recording what the update will need)."""
        raise NotImplementedError(f"{type(self).__name__} does not act in an env")

    def process_step(self, next_obs: Obs, rewards: torch.Tensor, terminated: torch.Tensor,
                     truncated: torch.Tensor, info: dict[str, Any]) -> None:
        """Record the env's answer to the last :meth:`act` (``info["final_obs"]`` at episode ends)."""

    def prepare_update(self) -> None:
        """Between collection and :meth:`update` (on-policy learners compute returns here)."""

    def update(self) -> dict[str, float]:
        """One iteration's learning; returns scalar statistics to log."""
        raise NotImplementedError

    def set_run_length(self, updates: int) -> None:
        """The run's length in updates, for schedules over the whole run (called before the first)."""

    def set_mirror(self, mirror: Callable[[], EnvMirror | None]) -> None:
        """The env's mirror maps, built on demand (``VecEnv.mirror``; called before the first update):
        a learner trained with ``algo.symmetry`` builds them, the others never do."""

    def set_obs_terms(self, obs_terms: Callable[[], dict[str, list[tuple[str, int]]]]) -> None:
        """The env's observation terms per group, ``(name, dim)`` in order (``VecEnv.obs_terms``; called before
        the first update): a learner whose settings name terms (``algo.lipschitz_exclude``) reads them."""

    def observe_logs(self, logs: dict[str, float]) -> None:
        """This iteration's logged means over every rank (reward terms, ``Metrics/<name>``), after the rollout
        and before :meth:`update`: a learner whose schedule follows the task's progress
        (``algo.lipschitz_gate``) reads them."""

    # ------------------------------------------------------------------ inference / io
    def inference_policy(self) -> nn.Module:
        """The deterministic policy on raw actor observations (what eval runs and export writes)."""
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    def load_state_dict(self, state: dict[str, Any], restore_rng: bool = True) -> None:
        raise NotImplementedError

    keeps_replay: bool = False
    """Whether it keeps data across iterations too large for the checkpoint (a replay buffer, kept
    rollouts): the runner then writes :meth:`replay_state_dict` to ``replay_<it>.pt`` beside it."""

    def replay_state_dict(self) -> dict[str, Any]:
        """The data :attr:`keeps_replay` announces."""
        raise RuntimeError(f"{type(self).__name__} keeps no replay data")

    def load_replay_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`replay_state_dict` returned."""
        raise RuntimeError(f"{type(self).__name__} keeps no replay data")


class SupervisedLearner(Learner):
    """A learner whose whole state is its model, one optimizer, its random stream and an update count
    (behavior cloning, distillation); subclasses add what else they keep."""

    optimizer: torch.optim.Optimizer
    num_updates: int

    def state_dict(self) -> dict[str, Any]:
        return {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                "generator": self.generator.get_state(), "num_updates": self.num_updates}

    def load_state_dict(self, state: dict[str, Any], restore_rng: bool = True) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.num_updates = state.get("num_updates", 0)
        if restore_rng:
            self.generator.set_state(state["generator"])
