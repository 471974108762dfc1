"""Where an iteration's time goes (``ctrl-rl train ... profile=true``).

The runner wraps each part of its loop in :meth:`StageTimer.stage`: the simulator step, policy
inference, storing the step, the update (returns + gradient steps), and logging (TensorBoard,
progress, checkpoints). Whatever an iteration spends outside those is ``other``. On a GPU the
timer synchronizes the device at every boundary, so each stage owns the kernels it launched; that
makes a profiled run slightly slower than a normal one, which times nothing.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

import torch

STAGES = ("sim", "inference", "storage", "update", "logging", "other")
"""Reported stages, in loop order (``other``: the rest of the iteration's wall time)."""

_OFF = contextlib.nullcontext()


class StageTimer:
    """Accumulates wall time per stage; :meth:`end_iteration` closes one iteration's split."""

    def __init__(self, device: torch.device | str, enabled: bool):
        self.enabled = enabled
        device = torch.device(device)
        self._sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)
        self.current = dict.fromkeys(STAGES, 0.0)
        self.totals = dict.fromkeys(STAGES, 0.0)
        self.iterations = 0
        self._start = time.perf_counter()

    def stage(self, name: str) -> contextlib.AbstractContextManager:
        """``with timer.stage("sim"): ...``; free (a shared null context) when profiling is off."""
        return self._timed(name) if self.enabled else _OFF

    @contextlib.contextmanager
    def _timed(self, name: str) -> Iterator[None]:
        self._sync()
        t = time.perf_counter()
        try:
            yield
        finally:
            self._sync()
            self.current[name] += time.perf_counter() - t

    def end_iteration(self) -> dict[str, float]:
        """The finished iteration's seconds per stage (``other`` = wall time not in a stage)."""
        now = time.perf_counter()
        split = dict(self.current)
        split["other"] = max(0.0, now - self._start - sum(v for k, v in split.items() if k != "other"))
        for k, v in split.items():
            self.totals[k] += v
        self.iterations += 1
        self.current = dict.fromkeys(STAGES, 0.0)
        self._start = now
        return split

    def table(self) -> str:
        """The whole run's split: seconds, share and milliseconds per iteration for each stage."""
        total = sum(self.totals.values()) or 1e-12
        n = max(self.iterations, 1)
        lines = [f"profile over {self.iterations} iteration(s):", "| stage | total s | share | ms / iteration |",
                 "|---|---:|---:|---:|"]
        for k in STAGES:
            v = self.totals[k]
            lines.append(f"| {k} | {v:.2f} | {100 * v / total:.1f}% | {1e3 * v / n:.1f} |")
        return "\n".join(lines)


def split_text(split: dict[str, float]) -> str:
    """``sim 41% | inference 22% | ...`` for the progress line."""
    total = sum(split.values()) or 1e-12
    return " | ".join(f"{k} {100 * v / total:.0f}%" for k, v in split.items())
