"""Multi-process training on torch.distributed, launched by ``torchrun``.

One process per GPU (or per CPU slot), each owning its own envs: ``torchrun --nproc_per_node=K
-m ctrl_rl train ...``. torchrun sets ``RANK``, ``LOCAL_RANK`` and ``WORLD_SIZE``;
:func:`setup` joins the process group (NCCL on GPUs, gloo on CPU) and gives each rank its device.
Learners then stay replicas of one another because every rank applies the same update:

- gradients are averaged over ranks before clipping (:func:`all_reduce_grads`),
- observation-normalizer statistics merge every rank's rollout once per iteration
  (``nets/normalizer.py``: ``observe``, ``sync_pending``; rsl_rl keeps them per rank, so its
  replicas normalize differently),
- quantities that steer the update are agreed on: PPO's KL (adaptive learning rate) rides in
  the gradient buffer, its advantage statistics use :func:`batch_moments`, PROPS's early-stop
  KL uses :func:`mean`.

Every function is a no-op (or the local value) when the run is a single process, so learners
call them unconditionally.
"""

from __future__ import annotations

import gc
import logging
import os
from collections.abc import Iterable
from typing import Any

import torch
import torch.distributed as dist

log = logging.getLogger(__name__)

RANK_SEED_STRIDE = 100_000
"""Rank ``r`` seeds its envs and action noise with ``seed + r * RANK_SEED_STRIDE`` (distinct episodes)."""


def launched() -> bool:
    """True in a process that ``torchrun`` started as one of several."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def enabled() -> bool:
    """True once :func:`setup` joined a process group of more than one rank."""
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def rank() -> int:
    return dist.get_rank() if enabled() else 0


def world_size() -> int:
    return dist.get_world_size() if enabled() else 1


def is_main() -> bool:
    """Rank 0: the one that logs, checkpoints and prints."""
    return rank() == 0


def rank_seed(seed: int) -> int:
    """This rank's seed for its envs and action noise (rank 0 keeps ``seed``)."""
    return seed + rank() * RANK_SEED_STRIDE


def setup(device: str) -> str:
    """Join torchrun's process group if launched by it; returns this rank's device.

    On CUDA each rank takes ``cuda:<LOCAL_RANK>`` (NCCL); on CPU all ranks share the host (gloo).
    """
    if not launched():
        return device
    backend = "gloo"
    if device.startswith("cuda"):
        device = f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}"
        torch.cuda.set_device(device)
        backend = "nccl"
    if enabled():  # already joined (a second command in the same process)
        return device
    dist.init_process_group(backend)
    log.info("rank %d of %d on %s (%s)", rank(), world_size(), device, backend)
    return device


def shutdown() -> None:
    """Leave the process group, and free what still holds it while the interpreter is fully alive:
    gloo's threads released at interpreter teardown can abort the process after a finished run
    ("terminate called without an active exception", seen once in CI after the barrier was added)."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
        gc.collect()


# ---------------------------------------------------------------------------------- collectives
def _sum_(t: torch.Tensor) -> torch.Tensor:
    dist.all_reduce(t, op=dist.ReduceOp.SUM)  # gloo has no AVG: sum, then divide
    return t


def mean(t: torch.Tensor) -> torch.Tensor:
    """The mean of ``t`` over ranks (``t`` itself in a single process)."""
    return _sum_(t.detach().clone()) / world_size() if enabled() else t


def sum_tensor(t: torch.Tensor) -> torch.Tensor:
    """The element-wise sum of ``t`` over ranks (a copy; ``t`` itself in a single process)."""
    return _sum_(t.detach().clone()) if enabled() else t


def all_reduce_grads(params: Iterable[torch.nn.Parameter], extra: torch.Tensor | None = None) -> torch.Tensor | None:
    """Average the gradients of ``params`` over ranks in one flat buffer (one collective).

    ``extra``, a scalar the update needs agreed on (PPO's KL for its learning rate), rides in the
    same buffer; its mean over ranks is returned (``extra`` itself in a single process).
    """
    if not enabled():
        return extra
    grads = [p.grad for p in params if p.grad is not None]
    parts = [g.reshape(-1) for g in grads]
    if extra is not None:
        parts.append(extra.detach().reshape(1).to(grads[0].dtype))
    flat = _sum_(torch.cat(parts))
    flat /= world_size()
    offset = 0
    for g in grads:
        g.copy_(flat[offset : offset + g.numel()].view_as(g))
        offset += g.numel()
    return flat[-1] if extra is not None else None


def batch_moments(x: torch.Tensor) -> tuple[float | torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(count, mean, biased var)`` of the rows of ``x[B, D]`` (``B > 0`` in a single process)
    over every rank's batch.

    A single process returns the count as a number (no tensor made per env step); under torchrun
    one collective of ``[n, sum x, sum x^2]`` in float64 (enough to avoid the cancellation of
    ``E[x^2] - mean^2`` at observation and return scales).
    """
    if not enabled():
        return float(x.shape[0]), x.mean(0), x.var(0, unbiased=False)
    xd = x.double()
    n = torch.full((1,), float(x.shape[0]), dtype=torch.float64, device=x.device)
    sums = _sum_(torch.cat([n, xd.sum(0), xd.square().sum(0)]))
    total, d = sums[0], x.shape[1]
    mean = sums[1 : 1 + d] / total.clamp(min=1)
    var = (sums[1 + d :] / total.clamp(min=1) - mean.square()).clamp(min=0.0)
    return total, mean.to(x.dtype), var.to(x.dtype)


def sum_floats(values: list[float]) -> list[float]:
    """Element-wise sums over ranks of a list of numbers (one collective)."""
    if not enabled():
        return list(values)
    return _sum_(torch.tensor(values, dtype=torch.float64, device=_collective_device())).tolist()


def mean_stats(stats: dict[str, float]) -> dict[str, float]:
    """A learner's logged numbers averaged over ranks (keys are the same on every rank)."""
    if not enabled() or not stats:
        return stats
    keys = sorted(stats)
    return {k: v / world_size() for k, v in zip(keys, sum_floats([float(stats[k]) for k in keys]), strict=True)}


def broadcast_module_(module: torch.nn.Module, src: int = 0) -> None:
    """Copy rank ``src``'s parameters and buffers into every rank's ``module``."""
    if enabled():
        for t in module.state_dict().values():
            dist.broadcast(t, src)


def replica_divergence(module: torch.nn.Module) -> float:
    """Largest element-wise difference of ``module``'s parameters and buffers between ranks (0 = replicas).

    Element-wise max and min over ranks, so it is exact, not a checksum.
    """
    if not enabled():
        return 0.0
    tensors = [t.detach().reshape(-1).double() for t in module.state_dict().values() if t.is_floating_point()]
    flat = torch.cat(tensors)
    hi, lo = flat.clone(), flat.clone()
    dist.all_reduce(hi, op=dist.ReduceOp.MAX)
    dist.all_reduce(lo, op=dist.ReduceOp.MIN)
    return float((hi - lo).max()) if flat.numel() else 0.0


def gather_objects(obj: Any) -> list[Any] | None:
    """Every rank's ``obj`` on rank 0 (``None`` elsewhere); ``[obj]`` in a single process."""
    if not enabled():
        return [obj]
    out = [None] * world_size() if is_main() else None
    dist.gather_object(obj, out, dst=0)
    return out


def broadcast_object(obj: Any) -> Any:
    """Rank 0's ``obj`` on every rank."""
    if not enabled():
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def barrier() -> None:
    if enabled():
        dist.barrier()


def _collective_device() -> torch.device:
    """Where small bookkeeping tensors go: NCCL only moves CUDA tensors."""
    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")
