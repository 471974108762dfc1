"""The deploy node's recorder: one robot log (``ctrl_rl.storage.robot_log``) per policy episode.

An episode is the node's time in policy mode: it starts on the first policy tick and ends when
the node leaves policy mode (a fault: terminal; an e-stop or a stop: not terminal). Each tick
costs a few row copies into preallocated blocks (no allocation, no I/O); an ended episode is
handed to one background thread that writes it, because the node keeps running after an
episode (damping holds the robot, then a start message begins the next one): writing inside
the loop would miss deadlines, and holding every episode until the loop stops would keep a
whole session in memory and lose it in a crash. The writer thread has normal priority (a
``realtime_priority`` control thread preempts it) and h5py releases the GIL while it writes.

Numpy + h5py; no torch.
"""

from __future__ import annotations

import logging
import queue
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ctrl_rl.storage.robot_log import RobotLogWriter

from .safety import OPERATOR_STOPS

log = logging.getLogger("ctrl_rl.deploy.recorder")


def episode_end(fault: str | None) -> tuple[str, bool]:
    """``(end, terminal)`` of an episode the safety state machine ended with ``fault``: an e-stop
    is the operator's call, not the robot's state (a timeout), and so are a lifecycle deactivate
    and a stop; any other fault is terminal."""
    fault = fault or "unknown"
    if fault.startswith("e-stop"):
        return "estop", False
    if fault.startswith(OPERATOR_STOPS):
        return "stopped", False
    return f"fault:{fault}", True


class EpisodeRecorder:
    """Policy-mode ticks -> episode files in ``directory``, written off the control thread."""

    def __init__(self, directory: str | Path, attrs: Mapping[str, Any] | None = None,
                 block_rows: int = 1024) -> None:
        try:
            import h5py  # noqa: F401  (fail at start-up, not at the first episode's end)
        except ImportError:
            raise ValueError("record_dir needs h5py: pip install h5py (or ctrl-rl[deploy] >= this version)") from None
        self.directory = Path(directory)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            tempfile.TemporaryFile(dir=self.directory).close()
        except OSError as e:
            raise ValueError(f"record_dir {self.directory} is not writable: {e}") from None
        self.attrs = dict(attrs or {})
        """Root attributes of every file (bundle, task, rate, joint names)."""
        self.block_rows = block_rows
        """Rows per preallocated block of the in-memory episode."""
        self.episodes = self.steps = self.errors = 0
        """Episodes and steps written to disk; write (or recording) errors."""
        self.last_error = ""
        self.last_file = ""
        self._writer: RobotLogWriter | None = None
        self._path = Path()
        self._t0 = 0.0
        self._index = 0
        self._queue: queue.Queue[tuple[RobotLogWriter, Path]] = queue.Queue()
        threading.Thread(target=self._drain, name="ctrl_rl_recorder", daemon=True).start()

    @property
    def active(self) -> bool:
        """An episode is being recorded."""
        return self._writer is not None

    def step(self, obs: np.ndarray, action: np.ndarray, t: float, signals: Mapping[str, Any]) -> None:
        """One policy tick at monotonic time ``t``; starts an episode if none is open. Never raises:
        a recording problem drops the episode and is counted, the robot keeps its controller."""
        try:
            if self._writer is None:
                wall = time.time()
                stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(wall)) + f".{int(wall * 1e3) % 1000:03d}Z"
                self._path = self.directory / f"episode_{stamp}_{self._index:04d}.hdf5"
                self._index += 1
                self._t0 = t
                self._writer = RobotLogWriter({**self.attrs, "start_time": wall}, self.block_rows)
            self._writer.add_step(obs, action, t - self._t0, signals)
        except Exception as e:  # the control loop must survive any recording bug
            self._fail(e)

    def end(self, final_obs: np.ndarray, end: str, terminal: bool, t: float, signals: Mapping[str, Any]) -> None:
        """Close the open episode with the observation after its last action; queue the write."""
        w, self._writer = self._writer, None
        if w is None:
            return
        try:
            w.end(final_obs, end, terminal, t - self._t0, signals)
        except Exception as e:
            self._fail(e)
            return
        self._queue.put((w, self._path))

    def flush(self) -> None:
        """Wait until every ended episode is on disk."""
        self._queue.join()

    def status(self) -> dict[str, Any]:
        return {"dir": str(self.directory), "episodes": self.episodes, "steps": self.steps,
                "pending": self._queue.unfinished_tasks, "open_steps": self._writer.steps if self._writer else 0,
                "errors": self.errors, "last_error": self.last_error, "last_file": self.last_file}

    def _fail(self, e: Exception) -> None:
        self._writer = None
        self.errors += 1
        self.last_error = f"{type(e).__name__}: {e}"
        log.error("recording: episode dropped (%s)", self.last_error)

    def _drain(self) -> None:
        while True:
            w, path = self._queue.get()
            try:
                w.write(path)
                self.episodes += 1
                self.steps += w.steps
                self.last_file = str(path)
                log.info("recorded %s: %d steps, end %s", path.name, w.steps, w.attrs.get("end"))
            except Exception as e:  # a full disk must not end the node
                self.errors += 1
                self.last_error = f"{path.name}: {type(e).__name__}: {e}"
                log.error("recording: %s not written (%s)", path, e)
            finally:
                self._queue.task_done()
