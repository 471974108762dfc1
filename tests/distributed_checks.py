"""Collective helpers checked on a real gloo process group (pytest launches this with torchrun).

    python -m torch.distributed.run --standalone --nproc_per_node=2 tests/distributed_checks.py OUT_DIR

Every rank holds a different slice of one dataset; each check compares what the ranks compute
together with what one process computes on the whole dataset. Rank 0 writes ``OUT_DIR/checks.json``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

from ctrl_rl import distributed
from ctrl_rl.nets.normalizer import EmpiricalNormalizer, observe, sync_pending


def main() -> None:
    out = Path(sys.argv[1])
    distributed.setup("cpu")
    rank, world = distributed.rank(), distributed.world_size()
    g = torch.Generator().manual_seed(0)
    sizes = [10 + 7 * r for r in range(world)]  # unequal slices
    bounds = [0, *torch.tensor(sizes).cumsum(0).tolist()]
    data = torch.randn(bounds[-1], 3, generator=g) * torch.tensor([1.0, 10.0, 0.1]) + 5.0
    mine = data[bounds[rank] : bounds[rank + 1]]
    checks: dict[str, float] = {"world_size": world}

    n, mean, var = distributed.batch_moments(mine)
    checks["moments_count"] = float(n)
    checks["moments_mean_err"] = float((mean - data.mean(0)).abs().max())
    checks["moments_var_err"] = float((var - data.var(0, unbiased=False)).abs().max())

    together, alone = EmpiricalNormalizer(3), EmpiricalNormalizer(3)
    for k in range(3):  # three steps of every rank's batch == three steps of the whole batch
        together.update(mine + k)
    distributed_stats = (together.mean.clone(), together.var.clone(), float(together.count))
    checks["normalizer_count"] = distributed_stats[2]
    # the single-process reference (no collective inside: computed on the whole data by hand)
    for k in range(3):
        x = data + k
        n_b, m_b, v_b = x.shape[0], x.mean(0), x.var(0, unbiased=False)
        n_a = alone.count.float()
        tot = n_a + n_b
        delta = m_b - alone.mean
        alone.mean += delta * (n_b / tot)
        alone.var.copy_((n_a * alone.var + n_b * v_b + delta.square() * (n_a * n_b / tot)) / tot)
        alone.count += n_b
    checks["normalizer_mean_err"] = float((distributed_stats[0] - alone.mean).abs().max())
    checks["normalizer_var_err"] = float((distributed_stats[1] - alone.var).abs().max())
    pending = EmpiricalNormalizer(3)  # a rollout's steps held per rank, merged once (what training does)
    for k in range(3):
        observe(((pending, mine + k),))
    checks["pending_untouched_before_sync"] = float(pending.count)
    sync_pending(pending)
    checks["pending_count"] = float(pending.count)
    checks["pending_mean_err"] = float((pending.mean - alone.mean).abs().max())
    checks["pending_var_err"] = float((pending.var - alone.var).abs().max())

    net = torch.nn.Linear(3, 2)
    torch.manual_seed(rank)  # different weights per rank ...
    torch.nn.init.normal_(net.weight)
    checks["divergence_before_broadcast"] = distributed.replica_divergence(net)
    distributed.broadcast_module_(net)  # ... until rank 0's are copied everywhere
    checks["divergence_after_broadcast"] = distributed.replica_divergence(net)
    net.zero_grad()
    net(mine).square().mean().backward()
    grads = [p.grad.clone() for p in net.parameters()]
    distributed.all_reduce_grads(net.parameters())
    per_rank = distributed.gather_objects(grads)
    checks["kl_mean"] = float(distributed.mean(torch.tensor(float(rank))))
    checks["stats_mean"] = distributed.mean_stats({"a": float(rank), "b": 2.0 * rank})["b"]
    checks["broadcast_object"] = distributed.broadcast_object(rank + 100)
    reduced = [p.grad for p in net.parameters()]
    if rank == 0:
        expected = [torch.stack([r[i] for r in per_rank]).mean(0) for i in range(len(grads))]
        checks["grad_mean_err"] = max(float((a - b).abs().max()) for a, b in zip(reduced, expected, strict=True))
    all_reduced = distributed.gather_objects([t.clone() for t in reduced])
    if rank == 0:
        checks["grads_identical_on_ranks"] = float(all(torch.equal(a, b) for r in all_reduced
                                                       for a, b in zip(r, all_reduced[0], strict=True)))
        (out / "checks.json").write_text(json.dumps(checks))
    distributed.shutdown()


if __name__ == "__main__":
    main()
