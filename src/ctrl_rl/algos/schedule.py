"""The learning-rate object of PPO's family: one place for the schedules and the device-tensor form."""

from __future__ import annotations

from typing import Any

import torch

from ctrl_rl.algos.losses import adaptive_kl_learning_rate


class LearningRate:
    """The step size of the optimizer groups a schedule steers.

    ``fixed``; ``linear`` (CleanRL's anneal_lr: ``lr (1 - k / K)`` at update k of K); ``adaptive``
    (rsl_rl's rule: scale by 1.5 to keep the minibatch KL near ``desired_kl``, within bounds). With
    ``on_device`` the value is one device tensor the steered groups share and :meth:`adapt` updates
    in place, so a compiled or graph-captured update never reads it back to the host.
    """

    def __init__(self, cfg: Any, optimizer: torch.optim.Optimizer, num_groups: int, device: torch.device,
                 on_device: bool):
        """Steers the first ``num_groups`` groups of ``optimizer`` (the others keep their own step size)."""
        self.cfg, self.optimizer, self.num_groups = cfg, optimizer, num_groups
        self.tensor = torch.tensor(float(cfg.learning_rate), device=device) if on_device else None
        self.value = float(cfg.learning_rate)
        """The last value read on the host (logged; the tensor form is read once per update)."""
        self.bind()

    def bind(self) -> None:
        """Point the steered groups at this value again (after an optimizer's ``load_state_dict``)."""
        for g in self.optimizer.param_groups[:self.num_groups]:  # new dicts after a load_state_dict
            g["lr"] = self.tensor if self.tensor is not None else self.value

    def set(self, value: float) -> None:
        self.value = float(value)
        if self.tensor is not None:
            self.tensor.fill_(self.value)
        self.bind()

    def anneal(self, update: int, total: int | None) -> None:
        """At the start of update ``update`` of ``total`` (``schedule=linear`` only; never below 0)."""
        if self.cfg.schedule != "linear":
            return
        if not total:
            raise RuntimeError("schedule=linear needs the run's length: the runner calls set_run_length first")
        self.set(self.cfg.learning_rate * max(1.0 - update / total, 0.0))

    def adapt(self, kl: torch.Tensor) -> None:
        """rsl_rl's adaptive step from a minibatch's KL (every rank's mean)."""
        cfg = self.cfg
        if self.tensor is not None:
            self.tensor.copy_(adaptive_kl_learning_rate(self.tensor, kl, cfg.desired_kl, 1.5, cfg.min_learning_rate,
                                                        cfg.max_learning_rate))
            return
        self.set(adaptive_kl_learning_rate(self.value, float(kl), cfg.desired_kl, 1.5, cfg.min_learning_rate,
                                           cfg.max_learning_rate))

    def read(self) -> float:
        """The current value on the host (one sync in the tensor form)."""
        if self.tensor is not None:
            self.value = float(self.tensor)
        return self.value


SMOOTHNESS_WEIGHT_BOUNDS = (1e-4, 100.0)
"""The range :func:`adapt_weight` keeps a penalty's weight in."""


def adapt_weight(weight: float, measured: float, target: float,
                 bounds: tuple[float, float] = SMOOTHNESS_WEIGHT_BOUNDS) -> float:
    """A penalty weight steered to hold ``measured`` near ``target``: the adaptive-KL rule on its inverse, a
    step size (x1.5 when ``measured`` is above 2 x ``target``, /1.5 when it is in (0, ``target`` / 2),
    unchanged otherwise); within ``bounds``."""
    step = adaptive_kl_learning_rate(1.0 / weight, measured, target, 1.5, 1.0 / bounds[1], 1.0 / bounds[0])
    return 1.0 / float(step)


def ramp_weight(weight: float, update: int, start: int, ramp: int) -> float:
    """A penalty's weight at ``update``: 0 before ``start``, then rising linearly to ``weight`` over ``ramp``
    updates (at once with ``ramp`` 0). The first ramped update trains with ``weight / ramp``."""
    if update < start:
        return 0.0
    return weight * min(1.0, (update - start + 1) / ramp) if ramp > 0 else weight


def gated_ramp(fraction: float, update: int, start: int, ramp: int, passed: bool) -> float:
    """A gated ramp's fraction of its full weight after ``update``: 0 before ``start``; from then on it
    rises by ``1 / ramp`` where the gate ``passed`` and falls by as much where it did not, within [0, 1]
    (``ramp`` 0: all or nothing). With the gate always passed it is :func:`ramp_weight`'s fraction."""
    if update < start:
        return 0.0
    step = 1.0 / ramp if ramp > 0 else 1.0
    return min(1.0, fraction + step) if passed else max(0.0, fraction - step)
