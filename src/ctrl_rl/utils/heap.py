"""Keep freed memory in the process heap, so large CPU tensors do not page-fault on every use.

glibc's ``malloc`` serves each block above its mmap threshold (at most 32 MiB) with a fresh
``mmap`` and hands it back to the kernel on ``free``. A CPU training step allocates such blocks
over and over (a 24,576 x 512 float32 activation is 48 MiB), and every page of a fresh mapping
faults on first touch: elementwise kernels then run at page-fault speed, not memory speed
(BENCHMARKS.md measures the effect on the PPO update). With mmap off for ``malloc`` and a high trim
threshold, freed blocks stay in the heap and the next step reuses them. The price is that the
process keeps its peak footprint until it exits, which a training process reaches every
iteration anyway. Threads' own arenas still map what does not fit a heap, so no allocation fails.
"""

from __future__ import annotations

import ctypes
import logging
import platform
import sys

log = logging.getLogger(__name__)

_M_TRIM_THRESHOLD = -1
_M_MMAP_MAX = -4
TRIM_THRESHOLD = 1 << 30
"""Free memory at the top of the heap kept before any is returned to the kernel (bytes)."""

_kept = False


def keep_freed_memory() -> bool:
    """Turn the above on for this process (glibc only; idempotent). Returns whether it is on."""
    global _kept
    if _kept:
        return True
    if not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc":
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        _kept = libc.mallopt(_M_MMAP_MAX, 0) == 1 and libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
    except (OSError, AttributeError):
        _kept = False
    if not _kept:
        log.debug("mallopt refused: freed memory goes back to the kernel as usual")
    return _kept
