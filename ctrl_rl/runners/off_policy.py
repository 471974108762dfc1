"""The off-policy runner: SAC (PQL's runner extends it with three concurrent roles)."""

from __future__ import annotations

from ctrl_rl.runners.base import Runner


class OffPolicyRunner(Runner):
    """Transitions go to the learner's replay buffer as they come; ``update`` samples from it. The
    buffer is written beside each checkpoint (``replay_<it>.pt``) and restored on resume."""
