"""Running mean/variance normalization, saved with the model and exported with it."""

from __future__ import annotations

import torch
from torch import nn

from ctrl_rl import distributed


class EmpiricalNormalizer(nn.Module):
    """Normalizes inputs by running statistics: ``clamp((x - mean) / (std + eps), ±clip)``.

    Statistics are buffers, so they travel in ``state_dict`` (checkpoints) and are baked
    into the exported ONNX graph. Updates use Chan et al.'s parallel mean/variance merge,
    which is exact for any batch split. ``until`` freezes statistics after that many
    samples (rsl_rl semantics); ``None`` never freezes. Under torchrun every update merges
    all ranks' batches, so replicas normalize alike.
    """

    def __init__(self, dim: int, eps: float = 1e-2, clip: float | None = 5.0, until: int | None = None):
        super().__init__()
        self.eps = eps
        self.clip = clip
        self.until = until
        self.register_buffer("mean", torch.zeros(dim))
        self.register_buffer("var", torch.ones(dim))
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))

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
        """Merge the statistics of ``x[batch, dim]`` into the running ones."""
        if self.until is not None and self.count >= self.until:
            return
        x = x.reshape(-1, self.mean.shape[0])
        if x.shape[0] == 0 and not distributed.enabled():  # (ranks must join the collective regardless)
            return
        n_b, mean_b, var_b = distributed.batch_moments(x)  # every rank's batch under torchrun
        n_a = self.count.to(x.dtype)
        n_b = n_b.to(x.dtype)
        n = n_a + n_b
        delta = mean_b - self.mean
        self.mean += delta * (n_b / n)
        # M2 merge: var = (n_a var_a + n_b var_b + delta^2 n_a n_b / n) / n
        self.var.copy_((n_a * self.var + n_b * var_b + delta.square() * (n_a * n_b / n)) / n)
        self.count += n_b
