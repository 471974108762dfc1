"""Robot logs: one HDF5 file per real-robot episode, rewards computed afterwards.

Uni-O4 (Lei et al., 2024) fine-tunes on Go1 data stored as per-episode ``states`` and
``actions`` and labels rewards offline; the deploy node writes the same kind of file
(``record_dir``), and :func:`load_robot_logs` turns a directory of them into the D4RL-layout
:class:`~ctrl_rl.storage.dataset.Dataset` the offline learners train on. One file::

    states     [T+1, state_dim] float32  the observation the policy consumed at each step, plus
                                         the one after the last action (the episode's final state)
    actions    [T, action_dim]  float32  the policy's raw actions (before clipping and scaling)
    timestamps [T+1]            float64  optional: seconds since the episode started
    signals/<name> [T+1, ...]   float32  optional raw signals, row t measured with states[t]
                                         (joint_pos, joint_vel, imu_gyro, projected_gravity, command, ...)
    root attrs: format, version, end (``fault:<msg>`` | ``stopped`` | ``estop``), terminal (bool),
                and whatever the recorder knows (bundle, task, rate_hz, joint_names, ...)

A reward function ``reward_fn(states, actions, next_states, signals) -> [T]`` gets one episode:
``states = states[:-1]``, ``next_states = states[1:]`` and the full ``[T+1]`` signal arrays
(row t + 1 is what the robot measured after action t). Reward functions are named by import
string, ``module:function`` (e.g. ``ctrl_rl.robots.log_rewards:proprioceptive``).

Numpy only at import (h5py when reading or writing): the deploy node records on a robot
computer that has no torch.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import numpy as np

from ctrl_rl.utils.files import atomic_write

from .dataset import Dataset, DatasetError, open_hdf5

FORMAT = "ctrl_rl.robot_log"
VERSION = 1
SUFFIXES = (".hdf5", ".h5")
"""File names :func:`load_robot_logs` reads from a directory."""
SPEC_PREFIX = "robotlogs:"
"""``dataset=robotlogs:<dir or file>?reward=module:function[&terminal=attr|never]``."""
TERMINAL_FROM = ("attr", "never")

RewardFn = Callable[[np.ndarray, np.ndarray, np.ndarray, Mapping[str, np.ndarray]], Any]
TerminalFrom = str | Callable[[Mapping[str, Any]], bool]


class _Column:
    """Rows appended into preallocated blocks: no allocation per step, none reallocated."""

    def __init__(self, row_shape: tuple[int, ...], dtype: Any, block_rows: int) -> None:
        self.row_shape, self.dtype, self.block_rows = row_shape, np.dtype(dtype), block_rows
        self.blocks: list[np.ndarray] = []
        self.n = 0

    def add(self, value: Any) -> None:
        i = self.n % self.block_rows
        if i == 0:
            self.blocks.append(np.empty((self.block_rows, *self.row_shape), self.dtype))
        self.blocks[-1][i] = value
        self.n += 1

    def chunks(self) -> Iterator[np.ndarray]:
        """The rows, block by block (views; the last block trimmed)."""
        for k, b in enumerate(self.blocks):
            yield b[: min(self.block_rows, self.n - k * self.block_rows)]

    def array(self) -> np.ndarray:
        parts = list(self.chunks())
        return np.concatenate(parts) if parts else np.empty((0, *self.row_shape), self.dtype)


def _check_end(end: str) -> None:
    if end not in ("stopped", "estop") and not end.startswith("fault:"):
        raise ValueError(f"end must be 'stopped', 'estop' or 'fault:<message>', got {end!r}")


class RobotLogWriter:
    """One episode kept in memory step by step; :meth:`write` saves it atomically once ended.

    Memory: ``4 (state_dim + action_dim + sum of signal sizes) + 8`` bytes per step, in blocks of
    ``block_rows`` rows (ctrl_quad with the deploy node's signals: 388 B, 70 MB per hour at 50 Hz).
    The first step fixes every shape; later steps must match (a mismatch raises ``ValueError``).
    """

    def __init__(self, attrs: Mapping[str, Any] | None = None, block_rows: int = 1024) -> None:
        self.attrs: dict[str, Any] = dict(attrs or {})
        """Root attributes (lists and dicts are stored as JSON strings)."""
        self.block_rows = block_rows
        """Rows per preallocated block (a new block every ``block_rows`` steps)."""
        self._cols: dict[str, _Column] = {}
        self.ended = False

    @property
    def steps(self) -> int:
        """Actions recorded so far (T)."""
        return self._cols["actions"].n if self._cols else 0

    def _column(self, key: str, value: np.ndarray, dtype: Any) -> _Column:
        col = self._cols.get(key)
        if col is None:
            col = self._cols[key] = _Column(value.shape, dtype, self.block_rows)
        elif value.shape != col.row_shape:
            raise ValueError(f"'{key}' has shape {value.shape} at step {self.steps}, {col.row_shape} before")
        return col

    def _add_row(self, state: Any, timestamp: float | None, signals: Mapping[str, Any] | None) -> None:
        rows = {"states": (np.asarray(state, np.float32), np.float32)}
        if timestamp is not None:
            rows["timestamps"] = (np.asarray(timestamp, np.float64), np.float64)
        for name, v in (signals or {}).items():
            rows[f"signals/{name}"] = (np.asarray(v, np.float32), np.float32)
        expected = {k for k in self._cols if k != "actions"}
        if expected and set(rows) != expected:
            raise ValueError(f"step {self.steps} carries {sorted(rows)}, earlier steps {sorted(expected)}")
        cols = [(self._column(k, v, dt), v) for k, (v, dt) in rows.items()]  # check all before adding any
        for col, v in cols:
            col.add(v)

    def add_step(self, state: Any, action: Any, timestamp: float | None = None,
                 signals: Mapping[str, Any] | None = None) -> None:
        """One step: the observation the policy consumed, its raw action, when, and the raw signals."""
        if self.ended:
            raise ValueError("this episode has ended; start a new RobotLogWriter")
        a = np.asarray(action, np.float32)
        acol = self._column("actions", a, np.float32)
        self._add_row(state, timestamp, signals)
        acol.add(a)  # last: an interrupted step leaves one state too many, which end() refuses

    def end(self, final_state: Any, end: str, terminal: bool, timestamp: float | None = None,
            signals: Mapping[str, Any] | None = None) -> None:
        """Close the episode with the observation after the last action and why it ended
        (``fault:<msg>`` and a fall are terminal; ``stopped`` by the operator is a timeout)."""
        _check_end(end)
        if self.ended or not self.steps:
            raise ValueError("end() needs at least one step and may be called once")
        if self._cols["states"].n != self.steps:
            raise ValueError("a step was interrupted halfway: states and actions disagree")
        self._add_row(final_state, timestamp, signals)
        self.attrs.update(end=end, terminal=bool(terminal))
        self.ended = True

    def write(self, path: str | Path) -> Path:
        """Write the ended episode to ``path`` atomically (temp file + rename), block by block and
        uncompressed (h5py releases the GIL inside each dataset write, and gzip would take a core for
        about a second per hour of data), so a control thread beside it keeps its rate."""
        import h5py

        if not self.ended:
            raise ValueError("call end() before write()")
        path = Path(path)
        with atomic_write(path) as tmp, h5py.File(tmp, "w") as f:
            for key, col in self._cols.items():
                ds = f.create_dataset(key, shape=(col.n, *col.row_shape), dtype=col.dtype)
                i = 0
                for chunk in col.chunks():
                    ds[i: i + len(chunk)] = chunk
                    i += len(chunk)
            f.attrs.update(_encode_attrs({"format": FORMAT, "version": VERSION, **self.attrs}))
        return path


def _encode_attrs(attrs: Mapping[str, Any]) -> dict[str, Any]:
    out = {}
    for k, v in attrs.items():
        if isinstance(v, (list, tuple, dict)):
            v = json.dumps(v)
        elif v is None:
            v = ""
        out[k] = v
    return out


def _decode_attr(v: Any) -> Any:
    if isinstance(v, bytes):
        v = v.decode()
    if isinstance(v, str) and v.startswith(("[", "{")):
        try:
            return json.loads(v)
        except json.JSONDecodeError:
            return v
    return v.item() if isinstance(v, np.generic) else v


@dataclass
class RobotLog:
    """One episode read back (see the module docstring for the layout)."""

    path: Path
    states: np.ndarray
    actions: np.ndarray
    timestamps: np.ndarray | None = None
    signals: dict[str, np.ndarray] = field(default_factory=dict)
    attrs: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.actions)


def _first_bad_row(a: np.ndarray) -> int | None:
    bad = ~np.isfinite(a.reshape(len(a), -1)).all(axis=1)
    return int(np.flatnonzero(bad)[0]) if bad.any() else None


def read_robot_log(path: str | Path) -> RobotLog:
    """Read and check one episode file; :class:`DatasetError` names the file, key and row."""
    path = Path(path)
    with open_hdf5(path, "robot log not found: {path}") as f:
        missing = [k for k in ("states", "actions") if k not in f]
        if missing:
            raise DatasetError(f"{path}: missing {missing}; a robot log has 'states' [T+1, state_dim] and "
                               f"'actions' [T, action_dim] (+ timestamps, signals/*); found {sorted(f.keys())}")
        log = RobotLog(path, f["states"][()], f["actions"][()],
                       f["timestamps"][()] if "timestamps" in f else None,
                       {k: v[()] for k, v in f["signals"].items()} if "signals" in f else {},
                       {k: _decode_attr(v) for k, v in f.attrs.items()})
    _validate(log)
    return log


def _validate(log: RobotLog) -> None:
    p, s, a = log.path, log.states, log.actions
    if s.ndim != 2 or a.ndim != 2:
        raise DatasetError(f"{p}: 'states' and 'actions' must be 2-D, got shapes {s.shape} and {a.shape}")
    if len(s) != len(a) + 1:
        raise DatasetError(f"{p}: {len(s)} states and {len(a)} actions; a robot log has one state more than "
                           "actions (the observation after the last action)")
    if len(a) == 0:
        raise DatasetError(f"{p}: an episode without actions")
    arrays = {"states": s, "actions": a, **({} if log.timestamps is None else {"timestamps": log.timestamps}),
              **{f"signals/{k}": v for k, v in log.signals.items()}}
    for key, v in arrays.items():
        if key not in ("states", "actions") and len(v) != len(s):
            raise DatasetError(f"{p}: '{key}' has {len(v)} rows; it must have one per state ({len(s)})")
        row = _first_bad_row(v)
        if row is not None:
            raise DatasetError(f"{p}: '{key}' row {row} is non-finite (NaN/inf); drop or repair the episode")


def resolve_reward_fn(spec: str | RewardFn | None) -> RewardFn:
    """A callable, or a ``module:function`` import string (``module:Class.attr`` works too)."""
    if callable(spec):
        return spec
    if spec is None:
        raise ValueError("robot logs hold no rewards: name a reward function, "
                         "e.g. ctrl_rl.robots.log_rewards:proprioceptive")
    module, sep, attr = str(spec).partition(":")
    if not sep or not module or not attr:
        raise ValueError(f"reward function must be 'module:function' "
                         f"(e.g. ctrl_rl.robots.log_rewards:proprioceptive), got {spec!r}")
    try:
        obj: Any = importlib.import_module(module)
    except ImportError as e:
        raise ValueError(f"reward function {spec!r}: cannot import module {module!r} ({e})") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"reward function {spec!r}: {module!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ValueError(f"reward function {spec!r} is not callable")
    return obj


def _fn_name(fn: Any) -> str:
    return fn if isinstance(fn, str) else f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', fn)}"


def episode_rewards(log: RobotLog, reward_fn: RewardFn, name: str = "reward_fn") -> np.ndarray:
    """``[T]`` rewards of one episode, checked (shape, finite) with the file in every error."""
    try:
        r = reward_fn(log.states[:-1], log.actions, log.states[1:], log.signals)
    except (KeyError, ValueError, IndexError) as e:
        raise DatasetError(f"{log.path}: {name} failed: {e}") from e
    r = np.asarray(r, dtype=np.float64)
    if r.shape != (len(log),):
        raise DatasetError(f"{log.path}: {name} returned shape {r.shape}; it must return one reward per "
                           f"action, shape ({len(log)},)")
    row = _first_bad_row(r)
    if row is not None:
        raise DatasetError(f"{log.path}: {name} returned a non-finite reward at row {row}")
    return r


def _is_terminal(log: RobotLog, terminal_from: TerminalFrom) -> bool:
    if callable(terminal_from):
        return bool(terminal_from(log.attrs))
    if terminal_from == "never":
        return False
    if terminal_from != "attr":
        raise ValueError(f"terminal_from must be one of {TERMINAL_FROM} or a callable of the file's attrs, "
                         f"got {terminal_from!r}")
    if "terminal" not in log.attrs:
        raise DatasetError(f"{log.path}: no 'terminal' attribute (not written by RobotLogWriter?); "
                           "pass terminal_from='never' to end every episode with a timeout")
    return bool(log.attrs["terminal"])


def robot_log_files(source: str | Path) -> list[Path]:
    """One file, or every ``*.hdf5``/``*.h5`` of a directory in name order (the recorder's names
    start with the episode's start time, so that is chronological)."""
    source = Path(source)
    if source.is_file():
        return [source]
    if not source.is_dir():
        raise DatasetError(f"robot logs not found: {source} (a directory of episode files, or one file)")
    files = sorted(p for p in source.iterdir() if p.suffix in SUFFIXES and p.is_file())
    if not files:
        raise DatasetError(f"{source}: no robot logs (*.hdf5, *.h5) in this directory")
    return files


def load_robot_logs(source: str | Path, reward_fn: str | RewardFn | None,
                    terminal_from: TerminalFrom = "attr") -> Dataset:
    """Episode files -> one D4RL-layout :class:`Dataset`, rewards from ``reward_fn``.

    ``source``: one file or a directory (every ``*.hdf5``/``*.h5``, sorted by name).
    ``reward_fn``: ``reward_fn(states, actions, next_states, signals) -> [T]`` or its
    ``module:function`` name. ``terminal_from``: ``"attr"`` (the file's ``terminal``: faults and
    falls are terminal, a stop is a timeout), ``"never"`` (every end a timeout), or a callable of
    the file's root attributes (e.g. only tilt faults: ``lambda a: "tilt" in a["end"]``). The last
    row of each episode is terminal or a timeout; ``next_observations`` is ``states[1:]``.
    """
    name = _fn_name(reward_fn)
    fn = resolve_reward_fn(reward_fn)
    parts: dict[str, list[np.ndarray]] = {k: [] for k in ("obs", "act", "rew", "term", "time", "next")}
    dims: tuple[int, int] | None = None
    first: Path | None = None
    for path in robot_log_files(source):
        log = read_robot_log(path)
        if dims is None:
            dims, first = (log.states.shape[1], log.actions.shape[1]), path
        elif (log.states.shape[1], log.actions.shape[1]) != dims:
            raise DatasetError(f"{path}: state/action dims {log.states.shape[1]}/{log.actions.shape[1]} differ "
                               f"from {first}'s {dims[0]}/{dims[1]}: logs of different policies in one dataset")
        n = len(log)
        end = np.zeros(n, bool)
        end[-1] = True
        terminal = _is_terminal(log, terminal_from)
        parts["obs"].append(log.states[:-1])
        parts["next"].append(log.states[1:])
        parts["act"].append(log.actions)
        parts["rew"].append(episode_rewards(log, fn, name))
        parts["term"].append(end & terminal)
        parts["time"].append(end & (not terminal))
    cat = {k: np.concatenate(v) for k, v in parts.items()}
    return Dataset(observations=cat["obs"], actions=cat["act"], rewards=cat["rew"], terminals=cat["term"],
                   timeouts=cat["time"], next_observations=cat["next"])


@dataclass(frozen=True)
class RobotLogSpec:
    """A dataset argument naming robot logs: ``robotlogs:<path>?reward=module:fn[&terminal=never]``."""

    path: str
    """A directory of episode files, or one file."""
    reward: str
    """``module:function`` reward function."""
    terminal_from: str = "attr"
    """``attr`` (the file's ``terminal``) or ``never`` (every episode end is a timeout)."""

    def load(self) -> Dataset:
        return load_robot_logs(self.path, self.reward, self.terminal_from)


def is_robot_log_spec(spec: str) -> bool:
    return str(spec).startswith(SPEC_PREFIX)


def parse_robot_log_spec(spec: str) -> RobotLogSpec:
    """``robotlogs:logs/robot?reward=ctrl_rl.robots.log_rewards:proprioceptive&terminal=never``."""
    if not is_robot_log_spec(spec):
        raise ValueError(f"a robot log dataset starts with '{SPEC_PREFIX}', got {spec!r}")
    path, _, query = spec[len(SPEC_PREFIX):].partition("?")
    args = parse_qs(query, keep_blank_values=True)
    unknown = sorted(set(args) - {"reward", "terminal"})
    if unknown:
        raise ValueError(f"{spec!r}: unknown option(s) {unknown}; options: reward=module:function, "
                         f"terminal={'|'.join(TERMINAL_FROM)}")
    if not path:
        raise ValueError(f"{spec!r}: no path; expected {SPEC_PREFIX}<dir or file>?reward=module:function")
    reward = (args.get("reward") or [""])[-1]
    if not reward:
        raise ValueError(f"{spec!r}: robot logs hold no rewards; name a reward function: "
                         f"{SPEC_PREFIX}{path}?reward=ctrl_rl.robots.log_rewards:proprioceptive")
    terminal = (args.get("terminal") or ["attr"])[-1]
    if terminal not in TERMINAL_FROM:
        raise ValueError(f"{spec!r}: terminal must be one of {TERMINAL_FROM}, got {terminal!r}")
    return RobotLogSpec(path, reward, terminal)


def convert_robot_logs(src: str | Path, reward_fn_spec: str, output_hdf5: str | Path,
                       terminal_from: str = "attr") -> Path:
    """Robot logs -> a D4RL-layout HDF5 (``ctrl-rl train algo=bc dataset=<output_hdf5>``), with
    the source, reward function and episode count as provenance attributes."""
    files = robot_log_files(src)
    out = Path(output_hdf5)
    if out.suffix in SUFFIXES and Path(src).is_dir() and out.resolve().parent == Path(src).resolve():
        raise ValueError(f"{out} would land among the robot logs it is made from (and be read as one "
                         "next time); write it elsewhere")
    data = load_robot_logs(src, reward_fn_spec, terminal_from)
    first = read_robot_log(files[0]).attrs
    attrs = {"source": "robot_logs", "robot_logs": str(src), "reward_fn": reward_fn_spec,
             "terminal_from": terminal_from, "episodes": len(files),
             **{k: first[k] for k in ("task", "robot", "bundle", "rate_hz") if k in first}}
    return data.save_hdf5(out, attrs=attrs)
