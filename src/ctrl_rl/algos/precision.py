"""The update's arithmetic: ``algo.tf32`` (TF32 matrix products, CUDA) and ``algo.autocast`` (bf16, CUDA
and CPUs with bfloat16 instructions).

Replaying the update as a CUDA graph (``algo.cudagraphs``) is ``ctrl_rl.utils.cuda_graphs.CapturedStep``,
shared with the env step; a graph-safe update has no host reads (``float(t)``, ``.item()``,
data-dependent Python branches), a tensor learning rate and a capturable optimizer.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn

from ctrl_rl.algos.heads import GaussianHead

log = logging.getLogger(__name__)


def bf16_native(device: torch.device | str) -> bool:
    """Whether ``device`` multiplies bfloat16 in hardware: a CUDA GPU with bfloat16 (Ampere and later), or a
    CPU with AVX512-BF16 or AMX (Zen 4, Sapphire Rapids); elsewhere bfloat16 is emulated, slower than float32."""
    device = torch.device(device)
    if device.type == "cuda":
        return bool(torch.cuda.is_bf16_supported())
    return device.type == "cpu" and bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


@functools.cache
def _auto_bf16(device_type: str) -> bool:
    """``algo.autocast=auto``: bfloat16 where the device has it in hardware, float32 elsewhere; said once."""
    native = bf16_native(device_type)
    log.info("algo.autocast=auto: the update runs in %s on %s (%s)", "bfloat16" if native else "float32",
             device_type, "bfloat16 in hardware" if native else "no bfloat16 instructions")
    return native


@functools.cache
def _warn_slow_bf16_cpu() -> None:
    """Once per process: bfloat16 on a CPU without bfloat16 instructions is emulated, and slow."""
    if not bf16_native("cpu"):
        log.warning("algo.autocast=bf16 on a CPU without bfloat16 instructions (AVX512-BF16 or AMX): the update "
                    "runs emulated, slower than float32; set algo.autocast=auto (or none)")


def uses_bf16(cfg: Any, device: torch.device | str) -> bool:
    """Whether the update runs under bfloat16 autocast: ``algo.autocast=bf16``, or ``auto`` on a device with
    bfloat16 in hardware (``bf16_native``)."""
    mode = getattr(cfg, "autocast", "none")
    return mode == "bf16" or (mode == "auto" and _auto_bf16(torch.device(device).type))


@contextlib.contextmanager
def update_precision(cfg: Any, device: torch.device | str) -> Iterator[None]:
    """The arithmetic of an update per ``algo.tf32`` and ``algo.autocast`` (``AcceleratedConfig``):
    on CUDA, float32 matrix products on TF32 tensor cores (``torch.backends.cuda.matmul.allow_tf32``,
    restored after); under bfloat16 (``uses_bf16``), ``torch.autocast`` in bfloat16 on the
    device. Collection and everything outside the block keep full float32."""
    device = torch.device(device)
    if device.type == "cpu" and getattr(cfg, "autocast", "none") == "bf16":
        _warn_slow_bf16_cpu()
    matmul = torch.backends.cuda.matmul
    previous = matmul.allow_tf32
    if device.type == "cuda":  # never touched on CPU: a reset of the generic precision changes CPU kernels
        matmul.allow_tf32 = bool(getattr(cfg, "tf32", False))
    cast = (torch.autocast(device.type, dtype=torch.bfloat16) if uses_bf16(cfg, device)
            else contextlib.nullcontext())
    try:
        with cast:
            yield
    finally:
        if device.type == "cuda":
            matmul.allow_tf32 = previous


@torch.no_grad()
def rebase_in_update_precision(batch: dict[str, torch.Tensor], actor: nn.Module,
                               values: Callable[[torch.Tensor], torch.Tensor], cfg: Any,
                               device: torch.device | str) -> None:
    """Under bfloat16 (``uses_bf16``), what the update compares against, recomputed in its own arithmetic: the
    pre-update policy (``old_mean``, ``old_std``, ``old_log_prob``: the ratio and the KL) and values
    (``old_values``: the value clip), in place of the rollout's float32 ones. Otherwise bfloat16's rounding
    alone moves the ratio before any step: ctrl_dog's walking policy at the polish's std 0.1, on
    observations drawn at its normalizer's scale, has mean |ratio - 1| 0.09 and 10 % of the samples outside
    PPO's clip (docs/experiments/threads.md). LLM RL recomputes the old log-probabilities in the training
    engine for the same reason. Advantages and returns keep the rollout's float32 values. ``actor``: a
    Gaussian, feed-forward actor (its ``distribution`` of ``batch["actor_obs"]``); ``values``: ``critic_obs``
    to denormalized values."""
    with update_precision(cfg, device):
        GaussianHead.as_old_policy(actor, batch)
        batch["old_values"] = values(batch["critic_obs"]).float()
