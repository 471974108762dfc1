"""The on-policy runner: PPO and its family (PROPS, FPO, residual, the online phase of Uni-O4)."""

from __future__ import annotations

from ctrl_rl.runners.base import Runner


class OnPolicyRunner(Runner):
    """Collect a rollout, let the learner compute returns and advantages over it, update.

    The loop is :meth:`Runner.rollout_iteration`; what is on-policy about it is the learner's
    (its ``prepare_update`` runs GAE over the finished rollout, its update consumes it).
    """
