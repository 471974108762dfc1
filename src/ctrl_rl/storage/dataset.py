"""Offline transition datasets in D4RL's HDF5 layout: what behavior cloning and the offline
learners train on, and what ``ctrl-rl collect`` writes.

One row per transition, episodes back to back (D4RL's ``qlearning_dataset`` view)::

    observations [N, obs_dim]   actions [N, action_dim]   rewards [N]
    terminals [N] bool (the episode reached a terminal state at this step)
    timeouts  [N] bool (the episode was cut by a time limit at this step)
    next_observations [N, obs_dim] (optional; the true last observation where an episode ended)
    infos/<key> [N] or [N, d] (optional, any numeric dtype; D4RL's per-row extras, e.g. infos/qpos)
    metadata/<key> (optional; free-form scalars/strings/arrays, D4RL's metadata group)

Provenance (task, policy, noise) is written as root attributes (:func:`read_attrs`). An episode
ends at a row whose ``terminals | timeouts`` is set; the last row of a file also ends one (a
partial episode, as D4RL's tail). Arrays are float32/bool in memory; a dataset of N transitions
takes ``4 N (2 obs_dim + action_dim + 1) + 2 N`` bytes (without infos).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ctrl_rl.utils.files import atomic_write

REQUIRED = ("observations", "actions", "rewards", "terminals")
ARRAYS = (*REQUIRED, "timeouts", "next_observations")
"""The per-transition arrays of the D4RL layout, in file order (``infos`` come after them)."""


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
    infos: dict[str, np.ndarray] = field(default_factory=dict)
    """Extra per-row arrays (``[N]`` or ``[N, d]``), kept with their dtype; nested HDF5 groups as ``a/b`` keys."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """D4RL's ``metadata/*`` (read from and written to HDF5), or a Minari dataset's ``metadata.json``."""

    def __post_init__(self) -> None:
        self._check_kinds()
        self.observations = np.asarray(self.observations, dtype=np.float32)
        self.actions = np.asarray(self.actions, dtype=np.float32)
        self.rewards = np.asarray(self.rewards, dtype=np.float32).reshape(-1)
        self.terminals = np.asarray(self.terminals, dtype=bool).reshape(-1)
        self.timeouts = np.asarray(self.timeouts, dtype=bool).reshape(-1)
        if self.next_observations is not None:
            self.next_observations = np.asarray(self.next_observations, dtype=np.float32)
        self.infos = {str(k): np.asarray(v) for k, v in (self.infos or {}).items()}
        self.metadata = dict(self.metadata or {})
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
        columns = [(name, getattr(self, name)) for name in ARRAYS] + [(f"infos/{k}", v) for k, v in self.infos.items()]
        for name, a in columns:
            if a is None:
                continue
            if name.startswith("infos/") and (a.dtype.kind not in "biuf" or a.ndim not in (1, 2)):
                raise DatasetError(f"{source}: '{name}' must be a numeric [N] or [N, d] array, got dtype "
                                   f"{a.dtype} and shape {a.shape}")
            if len(a) != n:
                raise DatasetError(f"{source}: '{name}' has {len(a)} rows, 'observations' has {n}")
            if a.dtype.kind == "f":
                bad = ~np.isfinite(a.reshape(n, -1)).all(axis=1)
                if bad.any():
                    rows = np.flatnonzero(bad)
                    raise DatasetError(f"{source}: '{name}' has {len(rows)} non-finite row(s), first at row "
                                       f"{rows[0]}; drop or repair them")

    def _check_kinds(self) -> None:
        """Numbers where numbers belong, flags that are flags: ``np.asarray(["False"], bool)`` is
        ``[True]``, so a string column would silently end every episode."""
        for name in ARRAYS:
            raw = getattr(self, name)
            if raw is None:
                continue
            a = np.asarray(raw)
            if a.dtype.kind not in "biuf":
                raise DatasetError(f"'{name}' must be numeric, got dtype {a.dtype} "
                                   f"(first value {a.reshape(-1)[:1]!r}); "
                                   "store it as float (observations, actions, rewards) or bool/0-1 (terminals, "
                                   "timeouts)")
            if name in ("terminals", "timeouts") and a.dtype.kind != "b" and a.size:
                values = np.unique(a)
                if not np.isin(values, (0, 1)).all():
                    raise DatasetError(f"'{name}' must hold 0/1 or booleans, got values {values[:5].tolist()}")

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

    def concatenate(self, other: Dataset) -> Dataset:
        """``self`` then ``other`` (e.g. D4RL's medium-expert); infos kept where both have the key,
        next_observations only if both have them, metadata of ``self``."""
        if other.obs_dim != self.obs_dim or other.action_dim != self.action_dim:
            raise DatasetError(f"cannot concatenate datasets of observations/actions {self.obs_dim}/{self.action_dim} "
                               f"and {other.obs_dim}/{other.action_dim}")
        both = self.next_observations is not None and other.next_observations is not None
        cat = {name: np.concatenate([getattr(self, name), getattr(other, name)]) for name in ARRAYS[:5]}
        if both:
            cat["next_observations"] = np.concatenate([self.next_observations, other.next_observations])
        infos = {k: np.concatenate([v, other.infos[k]]) for k, v in self.infos.items() if k in other.infos}
        return Dataset(**cat, infos=infos, metadata=dict(self.metadata))

    # ------------------------------------------------------------------ files
    def save_hdf5(self, path: str | Path, attrs: dict[str, str] | None = None) -> Path:
        """Write a D4RL-layout HDF5 file atomically (temp file + rename); ``attrs`` go to the root
        as string attributes (task, policy, noise: where the data came from), ``infos`` to the
        ``infos`` group and ``metadata`` to the ``metadata`` group."""
        import h5py

        path = Path(path)
        with atomic_write(path) as tmp, h5py.File(tmp, "w") as f:
            columns = [(name, getattr(self, name)) for name in ARRAYS]
            for name, a in columns + [(f"infos/{k}", v) for k, v in self.infos.items()]:
                if a is not None:
                    f.create_dataset(name, data=a, compression="gzip", compression_opts=1)
            for k, v in self.metadata.items():
                f.create_dataset(f"metadata/{k}", data=_hdf5_value(v))
            for k, v in (attrs or {}).items():
                f.attrs[k] = str(v)
        return path

    @classmethod
    def load_hdf5(cls, path: str | Path) -> Dataset:
        """Read a D4RL-layout HDF5 file (``timeouts`` optional: all False when absent)."""
        path = Path(path)
        with open_hdf5(path, "dataset file not found: {path} (write one with `ctrl-rl collect`)") as f:
            missing = [k for k in REQUIRED if k not in f]
            if missing:
                raise DatasetError(f"{path}: missing key(s) {missing}; a D4RL-layout file has "
                                   f"{', '.join(REQUIRED)} (+ timeouts, next_observations); found {sorted(f.keys())}")
            arrays = {k: f[k][()] for k in REQUIRED}
            arrays["timeouts"] = f["timeouts"][()] if "timeouts" in f else np.zeros(len(arrays["rewards"]), bool)
            arrays["next_observations"] = f["next_observations"][()] if "next_observations" in f else None
            arrays["infos"] = _read_group(f, "infos")
            arrays["metadata"] = {k: _python_value(v) for k, v in _read_group(f, "metadata").items()}
        try:
            return cls(**arrays)
        except DatasetError as e:
            raise DatasetError(str(e).replace("dataset:", f"{path}:", 1)) from None


def _read_group(f, name: str) -> dict[str, Any]:
    """Every dataset under group ``name``, keyed by its path below it (``a/b`` for nested groups)."""
    import h5py

    out: dict[str, Any] = {}
    if isinstance(f.get(name), h5py.Group):
        f[name].visititems(lambda key, obj: out.__setitem__(key, obj[()]) if isinstance(obj, h5py.Dataset) else None)
    return out


def _hdf5_value(v: Any) -> Any:
    """Scalars, strings and arrays as they are; anything else (dicts, lists of strings) as JSON text."""
    if isinstance(v, (str, bool, int, float, np.generic, np.ndarray)):
        return v
    return json.dumps(v, default=str)


def _python_value(v: Any) -> Any:
    """HDF5 scalars and strings as plain Python values (arrays stay arrays)."""
    if isinstance(v, bytes):
        return v.decode()
    if isinstance(v, np.generic):
        return v.item()
    return v


def open_hdf5(path: Path, not_found: str):
    """``h5py.File(path, "r")``, or a :class:`DatasetError`: ``not_found`` (formatted with ``path``)
    for a missing file, "not a readable HDF5 file" for anything else h5py cannot open."""
    import h5py

    if not path.is_file():
        raise DatasetError(not_found.format(path=path))
    try:
        return h5py.File(path, "r")
    except OSError as e:
        raise DatasetError(f"{path}: not a readable HDF5 file ({e})") from None


def read_attrs(path: str | Path) -> dict[str, str]:
    """The root attributes a dataset file was written with (its provenance)."""
    import h5py

    with h5py.File(path, "r") as f:
        return {k: str(v) for k, v in f.attrs.items()}
