"""Timing for the deploy loop: per-stage latency percentiles and a fixed-rate timer that counts
deadline misses and records the error of every period, and the control thread's scheduling (numpy only)."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence

import numpy as np

log = logging.getLogger("ctrl_rl.deploy.node")


class Ring:
    """The last ``size`` values of a series (preallocated: no allocation per tick)."""

    def __init__(self, size: int = 4096) -> None:
        self.buf = np.zeros(size)
        self.n = 0

    def add(self, value: float) -> None:
        self.buf[self.n % len(self.buf)] = value
        self.n += 1

    def values(self) -> np.ndarray:
        return self.buf[: min(self.n, len(self.buf))]

    def percentiles(self, qs: Sequence[float] = (50, 99)) -> list[float]:
        v = self.values()
        return [float(x) for x in np.percentile(v, qs)] if len(v) else [float("nan")] * len(qs)


class LatencyStats:
    """Nanosecond durations per named stage; summaries in microseconds."""

    def __init__(self, stages: Sequence[str], size: int = 4096) -> None:
        self.rings = {s: Ring(size) for s in stages}

    def add(self, stage: str, ns: int) -> None:
        self.rings[stage].add(ns)

    def summary(self) -> dict[str, dict[str, float]]:
        out = {}
        for s, r in self.rings.items():
            if r.n:
                p50, p99 = r.percentiles()
                top = float(r.values().max())
                out[s] = {"p50": round(p50 / 1e3, 1), "p99": round(p99 / 1e3, 1), "max": round(top / 1e3, 1)}
        return out


class LoopTimer:
    """Absolute deadlines ``start + k * period``: no drift, and a late tick is counted, not hidden.

    :meth:`wait` sleeps until ``spin`` seconds before the deadline, then spins (a sleeping thread
    wakes late by 50 us on an idle machine, by milliseconds on a busy one); by default
    ``spin = min(1 ms, period / 10)``. A tick whose work ran past its next deadline is a **deadline miss**;
    the loop then skips the missed slots instead of bursting to catch up. The period error
    (actual - nominal time between successive wake-ups) is recorded for the jitter figures.
    """

    def __init__(self, period: float, spin: float | None = None) -> None:
        if period <= 0:
            raise ValueError(f"loop period must be > 0, got {period}")
        self.period = period
        self.spin = min(1e-3, period / 10) if spin is None else spin
        self.ticks = self.misses = 0
        self.errors = Ring(1 << 16)
        self._next = self._last = 0.0

    def start(self) -> None:
        self._last = time.perf_counter()
        self._next = self._last + self.period

    def wait(self) -> None:
        now = time.perf_counter()
        if now > self._next:  # the work overran the slot
            self.misses += 1
            self._next += self.period * (int((now - self._next) / self.period) + 1)
        remaining = self._next - time.perf_counter() - self.spin
        if remaining > 0:
            time.sleep(remaining)
        while time.perf_counter() < self._next:
            pass
        now = time.perf_counter()
        self.errors.add(now - self._last - self.period)
        self._last = now
        self._next += self.period
        self.ticks += 1

    def summary(self) -> dict[str, float]:
        """Period error percentiles in milliseconds (|actual - nominal|)."""
        v = np.abs(self.errors.values())
        if not len(v):
            return {}
        p50, p99 = np.percentile(v, [50, 99])
        ms = lambda x: round(float(x) * 1e3, 4)  # noqa: E731
        return {"p50": ms(p50), "p99": ms(p99), "max": ms(v.max())}


def set_realtime_priority(priority: int) -> bool:
    """SCHED_FIFO for the calling thread (Linux applies it per thread); False, with a warning, if refused."""
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
    except (AttributeError, PermissionError, OSError) as e:
        log.warning("realtime_priority %d refused (%s): running with normal scheduling; "
                    "run as root or raise `ulimit -r`", priority, e)
        return False
    log.info("control thread runs SCHED_FIFO priority %d", priority)
    return True
