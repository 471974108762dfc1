"""Replaying a whole gradient step as a CUDA graph (``algo.cudagraphs=true``).

Small-network RL spends most of its update launching kernels, not running them; LeanRL measured
2.7-6.8x from ``torch.compile`` plus CUDA graphs. :class:`CapturedStep` takes a step function
``fn(inputs) -> stats`` whose inputs and outputs are tensors, runs its first ``warmup`` calls for
each input shape eagerly on a side stream (real updates: they allocate gradients and optimizer
state), captures the next call, and from then on copies each new input into the captured
buffers and replays. Every call is a real update, so training is the same as without graphs.

The step must be graph-safe: no host reads (``float(t)``, ``.item()``, data-dependent Python
branches), a tensor learning rate, and a capturable optimizer. On a CPU device nothing is
captured and ``fn`` simply runs, which is how the graph-safe step is tested against the eager one.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import fields, is_dataclass, replace
from typing import Any

import torch

Inputs = Any
"""A tensor, or a dict / dataclass of tensors (dicts inside dataclasses included)."""


def _tensors(x: Inputs) -> list[torch.Tensor]:
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, dict):
        return [t for k in sorted(x) for t in _tensors(x[k])]
    if is_dataclass(x):
        return [t for f in fields(x) for t in _tensors(getattr(x, f.name))]
    return []


def _clone(x: Inputs) -> Inputs:
    if isinstance(x, torch.Tensor):
        return x.clone()
    if isinstance(x, dict):
        return {k: _clone(v) for k, v in x.items()}
    if is_dataclass(x):
        return replace(x, **{f.name: _clone(getattr(x, f.name)) for f in fields(x)})
    return x


class CapturedStep:
    """``step(inputs)`` = ``fn(inputs)``, replayed from a CUDA graph after ``warmup`` eager calls."""

    def __init__(self, fn: Callable[[Inputs], dict[str, torch.Tensor]], device: torch.device, warmup: int = 3,
                 generators: list[torch.Generator] | None = None):
        self.fn = fn
        self.generators = generators or []
        """Non-default generators ``fn`` draws from (their state must advance on every replay)."""
        self.enabled = torch.device(device).type == "cuda"
        self.warmup = warmup
        self._calls: dict[tuple, int] = {}
        self._graphs: dict[tuple, tuple[torch.cuda.CUDAGraph, Inputs, dict[str, torch.Tensor]]] = {}

    def __call__(self, inputs: Inputs) -> dict[str, torch.Tensor]:
        if not self.enabled:
            return self.fn(inputs)
        key = tuple(tuple(t.shape) for t in _tensors(inputs))
        if key in self._graphs:
            graph, static_in, static_out = self._graphs[key]
            for dst, src in zip(_tensors(static_in), _tensors(inputs), strict=True):
                dst.copy_(src)
            graph.replay()
            return static_out
        calls = self._calls.get(key, 0)
        self._calls[key] = calls + 1
        if calls < self.warmup:  # eager, on a side stream as capture requires
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                out = self.fn(inputs)
            torch.cuda.current_stream().wait_stream(side)
            return out
        static_in = _clone(inputs)
        graph = torch.cuda.CUDAGraph()
        for g in self.generators:
            if g.device.type == "cuda":
                graph.register_generator_state(g)
        with torch.cuda.graph(graph):
            static_out = self.fn(static_in)
        self._graphs[key] = (graph, static_in, static_out)
        graph.replay()  # capture records without running: this call's update happens here
        return static_out


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
