"""Ctrl-C and SIGTERM during training: finish the iteration, write a checkpoint, exit with a code.

Schedulers and ``timeout`` send SIGTERM, people press Ctrl-C; both should cost at most the
iteration in flight. :class:`GracefulStop` turns the first SIGINT/SIGTERM into a flag the runners
read at their iteration boundary (a checkpoint there is exact: no rollout half collected); a
second signal exits at once, as users expect of a second Ctrl-C.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType

EXIT_CODES = {signal.SIGINT: 130, signal.SIGTERM: 143}
"""Exit code after a signal-initiated stop with its checkpoint written (128 + the signal, as a shell
reports a process ended by it), distinct from success (0), errors (2) and non-finite values (3)."""


class Interrupted(Exception):
    """Training stopped on a signal after writing its checkpoint (``path``)."""

    def __init__(self, signum: int, iteration: int, path: str | None) -> None:
        self.signum, self.iteration, self.path = signum, iteration, path
        name = signal.Signals(signum).name
        saved = f"checkpoint {path}" if path else "no checkpoint (no log directory)"
        super().__init__(f"{name}: stopped after iteration {iteration}; {saved}")

    @property
    def exit_code(self) -> int:
        return EXIT_CODES.get(signal.Signals(self.signum), 128 + self.signum)


class GracefulStop:
    """While active: SIGINT/SIGTERM set :attr:`signum` (and call :attr:`on_signal`); a second one
    exits the process at once. Training polls :attr:`signum`; the deploy node sets ``on_signal`` to
    stop its loop.

    Only the main thread can install signal handlers; elsewhere this does nothing (and
    :attr:`signum` stays ``None``). Nor does it inside a pytest process (``pytest`` imported; its child
    processes install theirs): there a Ctrl-C must stop the whole suite, not end one in-process
    training run gracefully while the next test starts.
    """

    active: GracefulStop | None = None
    """The stop request of the current training call (runners read it; ``None``: no handler)."""

    def __init__(self, doing: str = "finishing this iteration and writing a checkpoint") -> None:
        self.signum: int | None = None
        self.doing = doing
        """What the first signal starts, for the message."""
        self.on_signal: Callable[[int], None] | None = None
        self._previous: dict[int, object] = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is not None:  # the second signal: no more waiting
            print(f"\n{signal.Signals(signum).name} again: exiting now", file=sys.stderr, flush=True)
            os._exit(EXIT_CODES.get(signal.Signals(signum), 128 + signum))
        self.signum = signum
        print(f"\n{signal.Signals(signum).name}: {self.doing} (send it again to exit at once)",
              file=sys.stderr, flush=True)
        if self.on_signal is not None:
            self.on_signal(signum)

    def __enter__(self) -> GracefulStop:
        if threading.current_thread() is threading.main_thread() and "pytest" not in sys.modules:
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._previous[sig] = signal.signal(sig, self._handle)
            GracefulStop.active = self
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]
        if GracefulStop.active is self:
            GracefulStop.active = None


def stop_requested() -> int | None:
    """The signal that asked the current training to stop, or ``None``."""
    stop = GracefulStop.active
    return None if stop is None else stop.signum
