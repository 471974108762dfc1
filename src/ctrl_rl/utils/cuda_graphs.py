"""Replaying a step function as a CUDA graph: the update (``algo.cudagraphs``) and the env step
(``sim.cuda_graph``) share this.

Small-network RL and batched simulation spend most of a step launching kernels, not running them;
LeanRL measured 2.7-6.8x from ``torch.compile`` plus CUDA graphs. :class:`CapturedStep` takes a
step function ``fn(inputs) -> outputs`` whose inputs and outputs are tensors (or dicts /
dataclasses of them), runs its first ``warmup`` calls for each input shape eagerly on a side stream
(real calls: they allocate gradients, optimizer state, buffers), captures the next call, and from
then on copies each new input into the captured buffers and replays. Every call does real work, so
the results are those of the eager function.

The function must be graph-safe: no host reads (``float(t)``, ``.item()``, data-dependent Python
branches), no host-side state changes that a replay would skip, a tensor learning rate, a
capturable optimizer. Objects whose tensor attributes ``fn`` *rebinds* (``self.x = f(self.x)``,
the natural way to write a task) are passed as ``owners``: the capture ends by copying each rebound
attribute into the tensor it replaced and binding that one again, so the next replay reads what this
one wrote. On a CPU device nothing is captured and ``fn`` simply runs, which is how graph-safe
steps are tested against eager ones.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import fields, is_dataclass, replace
from typing import Any

import torch

log = logging.getLogger(__name__)

Inputs = Any
"""A tensor, or a dict / dataclass of tensors (dicts inside dataclasses included)."""


def tensors_of(x: Inputs) -> list[torch.Tensor]:
    """Every tensor in ``x``, in a fixed order."""
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, dict):
        return [t for k in sorted(x) for t in tensors_of(x[k])]
    if is_dataclass(x):
        return [t for f in fields(x) for t in tensors_of(getattr(x, f.name))]
    return []


def clone_tensors(x: Inputs) -> Inputs:
    """``x`` with every tensor cloned (other leaves kept)."""
    if isinstance(x, torch.Tensor):
        return x.clone()
    if isinstance(x, dict):
        return {k: clone_tensors(v) for k, v in x.items()}
    if is_dataclass(x):
        return replace(x, **{f.name: clone_tensors(getattr(x, f.name)) for f in fields(x)})
    if isinstance(x, tuple):
        return tuple(clone_tensors(v) for v in x)
    return x


def tensor_attributes(owners: Iterable[object]) -> dict[tuple[int, str], torch.Tensor]:
    """``(id(owner), name) -> tensor`` for every tensor attribute of ``owners``."""
    return {(id(o), k): v for o in owners for k, v in vars(o).items() if isinstance(v, torch.Tensor)}


def separate_aliases(owners: Iterable[object]) -> list[str]:
    """Give each tensor attribute of ``owners`` its own memory (a clone where two name one tensor,
    e.g. after ``self.last = self.current``): :func:`rebind_in_place` writes into these tensors, and a
    write into one must not change another. Returns the names cloned."""
    seen: set[int] = set()
    names = []
    for o in owners:
        for k, v in list(vars(o).items()):
            if not isinstance(v, torch.Tensor):
                continue
            if v.data_ptr() in seen and v.numel():
                setattr(o, k, v.clone())
                names.append(f"{type(o).__name__}.{k}")
            seen.add(v.data_ptr())
    return names


def rebind_in_place(owners: Iterable[object], before: dict[tuple[int, str], torch.Tensor]) -> list[str]:
    """Copy each tensor attribute of ``owners`` rebound since ``before`` into the tensor it replaced,
    and bind that tensor again: afterwards every attribute is the same tensor object as before,
    holding the new values. Returns the names rebound (raises if a shape or dtype changed)."""
    rebound = []
    for o in owners:
        for k, v in list(vars(o).items()):
            old = before.get((id(o), k))
            if old is None or v is old or not isinstance(v, torch.Tensor):
                continue
            if v.shape != old.shape or v.dtype != old.dtype:
                raise ValueError(f"{type(o).__name__}.{k} changed from {tuple(old.shape)} {old.dtype} to "
                                 f"{tuple(v.shape)} {v.dtype} in a captured step; a graph replays fixed shapes")
            rebound.append((o, k, old, v))
    olds = {t.data_ptr() for t in before.values()}
    # a new value that is another attribute's old tensor (``self.last = self.current``) is read
    # before any copy overwrites it
    rebound = [(o, k, old, v.clone() if v.data_ptr() in olds else v) for o, k, old, v in rebound]
    for o, k, old, v in rebound:
        old.copy_(v)
        setattr(o, k, old)
    return [f"{type(o).__name__}.{k}" for o, k, _, _ in rebound]


@contextlib.contextmanager
def keep_bindings(owners: Iterable[object]) -> Iterator[None]:
    """Eager work on objects a captured graph reads (a reset, a restored state): the tensor attributes
    it rebinds are copied back into the tensors the graph holds (:func:`rebind_in_place`)."""
    owners = list(owners)
    before = tensor_attributes(owners)
    yield
    rebind_in_place(owners, before)


class CapturedStep:
    """``step(inputs)`` = ``fn(inputs)``, replayed from a CUDA graph after ``warmup`` eager calls."""

    def __init__(self, fn: Callable[[Inputs], Any], device: torch.device | str, warmup: int = 3,
                 generators: list[torch.Generator] | None = None, owners: Iterable[object] = (),
                 fallback: bool = False, name: str = "step"):
        """``generators``: non-default generators ``fn`` draws from (their state advances on every
        replay). ``owners``: objects whose tensor attributes ``fn`` rebinds (module docstring).
        ``fallback``: if capture fails, log a warning and run eagerly from then on (else raise)."""
        self.fn = fn
        self.generators = generators or []
        self.owners = list(owners)
        self.enabled = torch.device(device).type == "cuda"
        self.warmup, self.fallback, self.name = warmup, fallback, name
        self._calls: dict[tuple, int] = {}
        self._graphs: dict[tuple, tuple[torch.cuda.CUDAGraph, Inputs, Any]] = {}

    @property
    def captured(self) -> bool:
        """Whether a graph has been captured (and is replayed for its input shapes)."""
        return bool(self._graphs)

    def __call__(self, inputs: Inputs) -> Any:
        if not self.enabled:
            return self.fn(inputs)
        key = tuple(tuple(t.shape) for t in tensors_of(inputs))
        if key in self._graphs:
            graph, static_in, static_out = self._graphs[key]
            for dst, src in zip(tensors_of(static_in), tensors_of(inputs), strict=True):
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
        try:
            return self._capture(key, inputs)
        except Exception as exc:  # noqa: BLE001 - with fallback, any capture failure means: run eagerly
            if not self.fallback:
                raise
            log.warning("CUDA graph capture of %s failed (%s: %s); it runs eagerly from now on",
                        self.name, type(exc).__name__, exc)
            self.enabled = False
            return self.fn(inputs)

    def _capture(self, key: tuple, inputs: Inputs) -> Any:
        static_in = clone_tensors(inputs)
        graph = torch.cuda.CUDAGraph()
        for g in self.generators:
            if g.device.type == "cuda":
                graph.register_generator_state(g)
        separate_aliases(self.owners)
        before = tensor_attributes(self.owners)
        try:
            with torch.cuda.graph(graph):
                static_out = self.fn(static_in)
                rebind_in_place(self.owners, before)
        except BaseException:
            owners = {id(o): o for o in self.owners}  # a capture runs nothing: the old tensors are current
            for (oid, k), old in before.items():
                setattr(owners[oid], k, old)
            raise
        self._graphs[key] = (graph, static_in, static_out)
        graph.replay()  # capture records without running: this call's work happens here
        return static_out
