"""Offline transition datasets in D4RL's HDF5 layout: what behavior cloning and the offline
learners train on, and what ``ctrl-rl collect`` writes.

One row per transition, episodes back to back (D4RL's ``qlearning_dataset`` view)::

    observations [N, obs_dim]   actions [N, action_dim]   rewards [N]
    terminals [N] bool (the episode reached a terminal state at this step)
    timeouts  [N] bool (the episode was cut by a time limit at this step)
    next_observations [N, obs_dim] (optional; the true last observation where an episode ended)

An episode ends at a row whose ``terminals | timeouts`` is set; the last row of a file also
ends one (a partial episode, as D4RL's tail). Arrays are float32/bool in memory; a dataset of
N transitions takes ``4 N (2 obs_dim + action_dim + 1) + 2 N`` bytes.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np

REQUIRED = ("observations", "actions", "rewards", "terminals")


class DatasetError(ValueError):
    """A dataset file or array is malformed; the message says what and where."""


@dataclass
class Dataset:
    observations: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    terminals: np.ndarray
    timeouts: np.ndarray
    next_observations: np.ndarray | None = None

    def __post_init__(self) -> None:
        self.observations = np.asarray(self.observations, dtype=np.float32)
        self.actions = np.asarray(self.actions, dtype=np.float32)
        self.rewards = np.asarray(self.rewards, dtype=np.float32).reshape(-1)
        self.terminals = np.asarray(self.terminals, dtype=bool).reshape(-1)
        self.timeouts = np.asarray(self.timeouts, dtype=bool).reshape(-1)
        if self.next_observations is not None:
            self.next_observations = np.asarray(self.next_observations, dtype=np.float32)
        self.validate()

    def __len__(self) -> int:
        return len(self.observations)

    @property
    def obs_dim(self) -> int:
        return self.observations.shape[1]

    @property
    def action_dim(self) -> int:
        return self.actions.shape[1]

    def validate(self, source: str = "dataset") -> None:
        """Shapes agree, at least one row, no NaN/inf: raises :class:`DatasetError` naming the key."""
        n = len(self.observations)
        if n == 0:
            raise DatasetError(f"{source}: no transitions")
        for name in ("observations", "actions", "next_observations"):
            a = getattr(self, name)
            if a is not None and a.ndim != 2:
                raise DatasetError(f"{source}: '{name}' must be 2-D [N, dim], got shape {a.shape}")
        for f in fields(self):
            a = getattr(self, f.name)
            if a is None:
                continue
            if len(a) != n:
                raise DatasetError(f"{source}: '{f.name}' has {len(a)} rows, 'observations' has {n}")
            if a.dtype != bool:
                bad = ~np.isfinite(a.reshape(n, -1)).all(axis=1)
                if bad.any():
                    rows = np.flatnonzero(bad)
                    raise DatasetError(f"{source}: '{f.name}' has {len(rows)} non-finite row(s), first at row "
                                       f"{rows[0]}; drop or repair them")

    def episode_ends(self) -> np.ndarray:
        """``[N]`` bool: the last row of each episode (terminal, timeout, or the file's last row)."""
        ends = self.terminals | self.timeouts
        ends[-1] = True
        return ends

    def episode_returns(self) -> np.ndarray:
        """Undiscounted return of each episode, in file order (the last one may be partial)."""
        ends = self.episode_ends()
        episode = np.concatenate([[0], np.cumsum(ends)[:-1]])
        return np.bincount(episode, weights=self.rewards.astype(np.float64))

    def action_chunks(self, k: int) -> np.ndarray:
        """``[N, k, action_dim]``: row i holds the actions of rows i..i+k-1 of its episode, the
        episode's last action repeated past its end (the usual padding of chunked BC targets)."""
        n = len(self)
        ends = np.flatnonzero(self.episode_ends())
        last = ends[np.searchsorted(ends, np.arange(n))]  # each row's episode's last row
        idx = np.minimum(np.arange(n)[:, None] + np.arange(k)[None, :], last[:, None])
        return self.actions[idx]

    # ------------------------------------------------------------------ files
    def save_hdf5(self, path: str | Path, attrs: dict[str, str] | None = None) -> Path:
        """Write a D4RL-layout HDF5 file atomically (temp file + rename); ``attrs`` go to the root
        as string attributes (task, policy, noise: where the data came from)."""
        import h5py

        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
        try:
            with h5py.File(tmp, "w") as f:
                for fl in fields(self):
                    a = getattr(self, fl.name)
                    if a is not None:
                        f.create_dataset(fl.name, data=a, compression="gzip", compression_opts=1)
                for k, v in (attrs or {}).items():
                    f.attrs[k] = str(v)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return path

    @classmethod
    def load_hdf5(cls, path: str | Path) -> Dataset:
        """Read a D4RL-layout HDF5 file (``timeouts`` optional: all False when absent)."""
        import h5py

        path = Path(path)
        if not path.is_file():
            raise DatasetError(f"dataset file not found: {path} (write one with `ctrl-rl collect`)")
        try:
            f = h5py.File(path, "r")
        except OSError as e:
            raise DatasetError(f"{path}: not a readable HDF5 file ({e})") from None
        with f:
            missing = [k for k in REQUIRED if k not in f]
            if missing:
                raise DatasetError(f"{path}: missing key(s) {missing}; a D4RL-layout file has "
                                   f"{', '.join(REQUIRED)} (+ timeouts, next_observations); found {sorted(f.keys())}")
            arrays = {k: f[k][()] for k in REQUIRED}
            arrays["timeouts"] = f["timeouts"][()] if "timeouts" in f else np.zeros(len(arrays["rewards"]), bool)
            arrays["next_observations"] = f["next_observations"][()] if "next_observations" in f else None
        try:
            return cls(**arrays)
        except DatasetError as e:
            raise DatasetError(str(e).replace("dataset:", f"{path}:", 1)) from None


def read_attrs(path: str | Path) -> dict[str, str]:
    """The root attributes a dataset file was written with (its provenance)."""
    import h5py

    with h5py.File(path, "r") as f:
        return {k: str(v) for k, v in f.attrs.items()}
