"""Running mean/variance normalization, saved with the model and exported with it."""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn

from ctrl_rl import distributed


class EmpiricalNormalizer(nn.Module):
    """Normalizes inputs by running statistics: ``clamp((x - mean) / (std + eps), ±clip)``.

    Statistics are buffers, so they travel in ``state_dict`` (checkpoints) and are baked
    into the exported ONNX graph. Updates use Chan et al.'s parallel mean/variance merge,
    which is exact for any batch split. ``until`` freezes statistics after that many
    samples (rsl_rl semantics); ``None`` never freezes. Under torchrun :meth:`update` merges
    every rank's batch; observation normalizers fed by :func:`observe` gather a rollout's
    batches locally and merge all ranks' once per iteration (:func:`sync_pending`).
    """

    def __init__(self, dim: int, eps: float = 1e-2, clip: float | None = 5.0, until: int | None = None):
        super().__init__()
        self.eps = eps
        self.clip = clip
        self.until = until
        self.register_buffer("mean", torch.zeros(dim))
        self.register_buffer("var", torch.ones(dim))
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))
        self.pending: torch.Tensor | None = None
        """Under torchrun: this rank's ``[n, sum x, sum x^2]`` (float64) since the last sync."""

    @property
    def std(self) -> torch.Tensor:
        return self.var.sqrt()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = (x - self.mean) / (self.std + self.eps)
        return y.clamp(-self.clip, self.clip) if self.clip is not None else y

    def denormalize(self, y: torch.Tensor) -> torch.Tensor:
        return y * (self.std + self.eps) + self.mean

    @torch.no_grad()
    def update(self, x: torch.Tensor) -> None:
        """Merge the statistics of ``x[batch, dim]`` (of every rank's, under torchrun) into the running ones."""
        if self.frozen:
            return
        x = x.reshape(-1, self.mean.shape[0])
        if x.shape[0] == 0 and not distributed.enabled():  # (ranks must join the collective regardless)
            return
        self._merge(*distributed.batch_moments(x))

    @property
    def frozen(self) -> bool:
        return self.until is not None and bool(self.count >= self.until)

    @torch.no_grad()
    def accumulate(self, x: torch.Tensor) -> None:
        """Keep ``x``'s sums in :attr:`pending` (no collective; merged by :func:`sync_pending`)."""
        x = x.reshape(-1, self.mean.shape[0]).double()
        n = torch.full((1,), float(x.shape[0]), dtype=torch.float64, device=x.device)  # a fill, no host copy
        sums = torch.cat([n, x.sum(0), x.square().sum(0)])
        self.pending = sums if self.pending is None else self.pending + sums

    def _merge(self, n_b: float | torch.Tensor, mean_b: torch.Tensor, var_b: torch.Tensor) -> None:
        """Chan et al.'s merge of a batch's ``(count, mean, biased var)`` into the running statistics."""
        n_a = self.count.to(mean_b.dtype)
        if isinstance(n_b, torch.Tensor):  # a count summed over ranks
            n_b = n_b.to(mean_b.dtype)
        n = n_a + n_b
        delta = mean_b - self.mean
        self.mean += delta * (n_b / n)
        # M2 merge: var = (n_a var_a + n_b var_b + delta^2 n_a n_b / n) / n
        self.var.copy_((n_a * self.var + n_b * var_b + delta.square() * (n_a * n_b / n)) / n)
        self.count += n_b


def observe(pairs: Iterable[tuple[nn.Module, torch.Tensor]]) -> None:
    """Fold one step's observations into the normalizers among ``pairs`` (other modules are skipped).

    One process: at once (:meth:`EmpiricalNormalizer.update`). Under torchrun each rank keeps its
    batches pending and :func:`sync_pending` merges all ranks' after the rollout: the statistics
    stay equal on every rank while they act, at one collective per iteration instead of one per step.
    """
    for module, x in pairs:
        if isinstance(module, EmpiricalNormalizer):
            if distributed.enabled():
                module.accumulate(x)
            else:
                module.update(x)


@torch.no_grad()
def sync_pending(module: nn.Module) -> None:
    """Merge every rank's pending observations into each normalizer of ``module`` (one collective)."""
    norms = [m for m in module.modules() if isinstance(m, EmpiricalNormalizer) and m.pending is not None]
    if not norms:
        return
    sums = distributed.sum_tensor(torch.cat([m.pending for m in norms]))
    offset = 0
    for m in norms:
        d = m.mean.shape[0]
        n, total, squares = sums[offset], sums[offset + 1 : offset + 1 + d], sums[offset + 1 + d : offset + 1 + 2 * d]
        offset += 1 + 2 * d
        m.pending = None
        if m.frozen or n == 0:
            continue
        mean = total / n
        var = (squares / n - mean.square()).clamp(min=0.0)  # float64: no cancellation at observation scales
        m._merge(n, mean.to(m.mean.dtype), var.to(m.var.dtype))
