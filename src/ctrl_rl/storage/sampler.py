"""Uniform minibatches of an offline dataset on the training device, whatever the dataset's size."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import torch

from ctrl_rl.storage.dataset import ARRAYS, Dataset

Batch = dict[str, torch.Tensor]
"""Keyed like the dataset's arrays: ``observations``, ``actions``, ``rewards``, ``terminals``,
``timeouts`` and (when the dataset has them) ``next_observations``; ``infos`` are not sampled."""


def device_bytes(data: Dataset) -> int:
    """Bytes the sampled arrays take: ``4 N (2 obs_dim + action_dim + 1) + 2 N`` with next observations
    (float32 observations, next observations, actions, rewards; bool terminals and timeouts)."""
    return sum(getattr(data, k).nbytes for k in ARRAYS if getattr(data, k) is not None)


class DeviceSampler:
    """Draws minibatches uniformly (with replacement) from ``data`` as tensors on ``device``.

    When the dataset fits in ``max_device_bytes`` (:func:`device_bytes`: ``4 N (2 obs_dim +
    action_dim + 1) + 2 N`` bytes, e.g. 1M pendulum rows (obs 3, action 1) = 34 MB) it is copied to the device once
    and batches are gathered there. Otherwise it stays in host memory and each batch is gathered on
    the host and copied over (through two alternating pinned buffers on CUDA, so the copy of one
    batch overlaps the gathering of the next): datasets larger than GPU memory train, at the price
    of one ``batch_size`` transfer per step.

    Indices are always drawn on the host from ``generator`` (a CPU ``torch.Generator``, seed 0 if
    not given), so a seed gives the same batches in either mode and on any device; the index copy
    is ``8 * batch_size`` bytes.

    ``max_device_bytes``: the device memory the dataset may take. None: half the free memory of a
    CUDA device, unlimited elsewhere (on the CPU the arrays are used in place, without a copy);
    0 forces streaming.
    """

    def __init__(self, data: Dataset, device: str | torch.device = "cpu", max_device_bytes: int | None = None,
                 generator: torch.Generator | None = None) -> None:
        self.device = torch.device(device)
        self.size = len(data)
        self.generator = generator if generator is not None else torch.Generator().manual_seed(0)
        host = {k: torch.from_numpy(np.ascontiguousarray(getattr(data, k))) for k in ARRAYS
                if getattr(data, k) is not None}
        self.nbytes = device_bytes(data)
        if max_device_bytes is None and self.device.type == "cuda":
            max_device_bytes = torch.cuda.mem_get_info(self.device)[0] // 2
        self.resident = max_device_bytes is None or self.nbytes <= max_device_bytes
        self.arrays = {k: v.to(self.device) for k, v in host.items()} if self.resident else host
        self.pinned = not self.resident and self.device.type == "cuda"
        self._slots: list[tuple[Batch, torch.cuda.Event | None]] = []
        self._turn = 0

    def sample(self, batch_size: int) -> Batch:
        """One minibatch of ``batch_size`` rows drawn uniformly with replacement."""
        idx = torch.randint(self.size, (batch_size,), generator=self.generator)
        if self.resident:
            idx = idx.to(self.device, non_blocking=True)
            return {k: v.index_select(0, idx) for k, v in self.arrays.items()}
        if not self.pinned:
            return {k: v.index_select(0, idx).to(self.device) for k, v in self.arrays.items()}
        return self._copy_pinned(idx)

    def _copy_pinned(self, idx: torch.Tensor) -> Batch:
        """Gather into the next pinned staging buffer (waiting for its previous copy) and send it."""
        if not self._slots or len(next(iter(self._slots[0][0].values()))) != len(idx):
            self._slots = [({k: torch.empty((len(idx), *v.shape[1:]), dtype=v.dtype, pin_memory=True)
                             for k, v in self.arrays.items()}, None) for _ in range(2)]
        stage, done = self._slots[self._turn]
        if done is not None:
            done.synchronize()  # the device may still be reading this buffer
        for k, v in self.arrays.items():
            torch.index_select(v, 0, idx, out=stage[k])
        batch = {k: s.to(self.device, non_blocking=True) for k, s in stage.items()}
        event = torch.cuda.Event()
        event.record(torch.cuda.current_stream(self.device))
        self._slots[self._turn] = (stage, event)
        self._turn ^= 1
        return batch

    def batches(self, batch_size: int, num_batches: int | None = None) -> Iterator[Batch]:
        """``num_batches`` minibatches (endless when None)."""
        count = 0
        while num_batches is None or count < num_batches:
            yield self.sample(batch_size)
            count += 1
