"""Hand-off primitives for learners whose roles run in separate threads (and CUDA streams).

PQL's actor, V-learner and P-learner train different networks concurrently. Nothing is shared
mutably between them: the role that trains a network is its only writer, and the others read a
snapshot through a :class:`WeightBox` (never half an update); buffers two roles touch are guarded
by a :class:`StreamLock`; statistics go through a :class:`StatsSink` without a host sync per update.
On CPU these are plain locks; on CUDA, events also order the kernels each role queued.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn


def current_stream(device: torch.device) -> torch.cuda.Stream | None:
    """The calling thread's current CUDA stream on ``device``; ``None`` on CPU."""
    return torch.cuda.current_stream(device) if device.type == "cuda" else None


class StreamLock:
    """A mutex that also orders GPU work: entering makes the caller's CUDA stream wait for the
    kernels the previous holder queued inside the lock, and exiting marks where its own end.

    A plain lock is not enough on CUDA: kernels run after the Python code that queued them, so
    without the event a sampler on one stream could read replay rows the actor's stream is still
    writing. On CPU it is a plain lock.
    """

    def __init__(self, device: torch.device):
        self.device = device
        self._lock = threading.Lock()
        self._event = torch.cuda.Event() if device.type == "cuda" else None

    def __enter__(self) -> StreamLock:
        self._lock.acquire()
        if self._event is not None:
            current_stream(self.device).wait_event(self._event)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._event is not None:
            self._event.record(current_stream(self.device))
        self._lock.release()


class WeightBox:
    """Tear-free hand-off of one network from the role that trains it to the roles that read it.

    The box holds frozen copies ("slots") of the module. :meth:`publish` copies the writer's
    fresh weights into a spare slot nobody is reading, then swaps the ``current`` reference under
    a lock; :meth:`read` leases the current slot for the duration of a ``with`` block. A slot is
    never written while leased, so a reader sees one version from start to end. Two slots suffice
    while readers release quickly; a third is made only when a reader still holds the spare (at
    most ``readers + 2`` ever exist). On CUDA, events order the copy after the readers' kernels
    and the readers' kernels after the copy.
    """

    def __init__(self, module: nn.Module, device: torch.device):
        self.device = torch.device(device)
        self._lock = threading.Lock()
        self._slots: list[nn.Module] = [self._frozen_copy(module)]
        self._leases = [0]
        self._ready: list[Any] = [None]  # CUDA event: the slot's copy finished
        self._released: list[list[Any]] = [[]]  # CUDA events: readers' last use of the slot
        self._current = 0
        self.version = 0
        """Number of publishes so far (diagnostics and tests)."""

    @staticmethod
    def _frozen_copy(module: nn.Module) -> nn.Module:
        return copy.deepcopy(module).requires_grad_(False)

    @staticmethod
    def _tensors(module: nn.Module) -> list[torch.Tensor]:
        return [*module.parameters(), *module.buffers()]

    @property
    def num_slots(self) -> int:
        return len(self._slots)

    @torch.no_grad()
    def publish(self, module: nn.Module) -> None:
        """Make ``module``'s current weights what readers get from now on (call from the writer only)."""
        with self._lock:
            spare = next((i for i in range(len(self._slots)) if i != self._current and self._leases[i] == 0), None)
            if spare is None:  # every other slot is leased: grow rather than wait for a reader
                self._slots.append(self._frozen_copy(module))
                self._leases.append(0)
                self._ready.append(None)
                self._released.append([])
                spare = len(self._slots) - 1
            released, self._released[spare] = self._released[spare], []
        # Outside the lock: readers only lease the current slot, so nobody can start reading the spare.
        stream = current_stream(self.device)
        for event in released:
            stream.wait_event(event)
        torch._foreach_copy_(self._tensors(self._slots[spare]), self._tensors(module))
        if stream is not None:
            self._ready[spare] = torch.cuda.Event()
            self._ready[spare].record(stream)
        with self._lock:
            self._current = spare
            self.version += 1

    @contextmanager
    def read(self) -> Iterator[nn.Module]:
        """Lease the newest published copy; do not keep references to it past the block."""
        with self._lock:
            slot = self._current
            self._leases[slot] += 1
            ready = self._ready[slot]
        stream = current_stream(self.device)
        try:
            if ready is not None:
                stream.wait_event(ready)
            yield self._slots[slot]
        finally:
            event = None
            if stream is not None:
                event = torch.cuda.Event()
                event.record(stream)
            with self._lock:
                self._leases[slot] -= 1
                if event is not None:
                    self._released[slot].append(event)


class StatsSink:
    """Per-update statistics summed on each learner's stream, read by the logging thread.

    Stays on the device (no host sync per update); on CUDA an event per learner lets the reader
    wait for exactly the kernels that produced the sums it takes.
    """

    def __init__(self, device: torch.device):
        self.device = device
        self._lock = threading.Lock()
        self._sums: dict[str, torch.Tensor] = {}
        self._counts: dict[str, int] = {}
        self._events: dict[str, Any] = {}

    def add(self, role: str, stats: dict[str, torch.Tensor]) -> None:
        with self._lock:
            for k, v in stats.items():
                self._sums[k] = self._sums[k] + v if k in self._sums else v.clone()
                self._counts[k] = self._counts.get(k, 0) + 1
            if self.device.type == "cuda":
                self._events[role] = torch.cuda.Event()
                self._events[role].record(current_stream(self.device))

    def pop(self) -> dict[str, float]:
        """Means since the last pop (empty before the learners start)."""
        with self._lock:
            sums, counts, events = self._sums, self._counts, self._events
            self._sums, self._counts, self._events = {}, {}, {}
        for event in events.values():
            event.synchronize()
        return {k: float(v) / counts[k] for k, v in sums.items()}
