"""The update's arithmetic on CUDA: ``algo.tf32`` (TF32 matrix products) and ``algo.autocast`` (bf16).

Replaying the update as a CUDA graph (``algo.cudagraphs``) is ``ctrl_rl.utils.cuda_graphs.CapturedStep``,
shared with the env step; a graph-safe update has no host reads (``float(t)``, ``.item()``,
data-dependent Python branches), a tensor learning rate and a capturable optimizer.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch


@contextlib.contextmanager
def update_precision(cfg: Any, device: torch.device | str) -> Iterator[None]:
    """The arithmetic of an update per ``algo.tf32`` and ``algo.autocast`` (``AcceleratedConfig``):
    on CUDA, float32 matrix products on TF32 tensor cores (``torch.backends.cuda.matmul.allow_tf32``,
    restored after); with ``autocast=bf16``, ``torch.autocast`` in bfloat16 on the
    device. Collection and everything outside the block keep full float32."""
    device = torch.device(device)
    matmul = torch.backends.cuda.matmul
    previous = matmul.allow_tf32
    if device.type == "cuda":  # never touched on CPU: a reset of the generic precision changes CPU kernels
        matmul.allow_tf32 = bool(getattr(cfg, "tf32", False))
    cast = (torch.autocast(device.type, dtype=torch.bfloat16) if getattr(cfg, "autocast", "none") == "bf16"
            else contextlib.nullcontext())
    try:
        with cast:
            yield
    finally:
        if device.type == "cuda":
            matmul.allow_tf32 = previous
