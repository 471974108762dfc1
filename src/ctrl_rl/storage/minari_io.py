"""Minari datasets <-> :class:`~ctrl_rl.storage.dataset.Dataset`, through minari's own API.

Minari (Farama, 0.5.x) keeps a dataset ``<namespace>/<name>-v<N>`` in
``$MINARI_DATASETS_PATH/<namespace>/<name>-v<N>/data/`` (``metadata.json`` and ``main_data.hdf5``),
one group per episode: ``observations`` has T+1 rows (the last is the state the episode ended
in), ``actions``, ``rewards``, ``terminations``, ``truncations`` have T. The D4RL-layout rows of
a :class:`Dataset` map onto it episode by episode: ``next_observations`` are ``observations[1:]``,
``terminals``/``timeouts`` are ``terminations``/``truncations``.

Writing goes through ``minari.create_dataset_from_buffers`` with ``env=None`` and Box spaces, so
it needs neither an env nor JAX (minari's ``DataCollector`` does). Minari has no data-path
argument: the datasets root is ``MINARI_DATASETS_PATH`` (``~/.minari/datasets`` when unset), set
here for the duration of a call when ``root`` is given (not thread-safe).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ctrl_rl.storage.dataset import Dataset, DatasetError

log = logging.getLogger(__name__)

ROOT_VARIABLE = "MINARI_DATASETS_PATH"


def datasets_root(root: str | Path | None = None) -> Path:
    """Where minari keeps datasets: ``root``, else ``$MINARI_DATASETS_PATH``, else ``~/.minari/datasets``."""
    if root is not None:
        return Path(root)
    return Path(os.environ.get(ROOT_VARIABLE) or Path.home() / ".minari" / "datasets")


@contextlib.contextmanager
def _root_variable(root: str | Path | None) -> Iterator[None]:
    """``MINARI_DATASETS_PATH=root`` inside the block (minari reads only the variable)."""
    if root is None:
        yield
        return
    old = os.environ.get(ROOT_VARIABLE)
    os.environ[ROOT_VARIABLE] = str(root)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(ROOT_VARIABLE, None)
        else:
            os.environ[ROOT_VARIABLE] = old


def _episodes(data: Dataset) -> list[tuple[int, int]]:
    """``(start, stop)`` row ranges of the episodes, in order."""
    stops = np.flatnonzero(data.episode_ends()) + 1
    return list(zip(np.concatenate([[0], stops[:-1]]).tolist(), stops.tolist(), strict=True))


def _check_single_sequence(data: Dataset) -> None:
    """Minari stores one observation sequence per episode: inside an episode, each row's next
    observation must be the next row's observation."""
    if data.next_observations is None:
        raise DatasetError("Minari needs each episode's last state (T+1 observations): this dataset has no "
                           "'next_observations'")
    inside = ~data.episode_ends()[:-1]
    differs = inside & ~(data.next_observations[:-1] == data.observations[1:]).all(axis=1)
    if differs.any():
        row = int(np.flatnonzero(differs)[0])
        raise DatasetError(f"'next_observations' row {row} differs from 'observations' row {row + 1} inside an "
                           "episode; Minari keeps one observation sequence per episode and cannot store it")


def check_new_dataset(dataset_id: str, root: str | Path | None = None) -> Path:
    """The directory a new dataset ``dataset_id`` would get; an error if the id is malformed or taken."""
    from minari.dataset.minari_dataset import parse_dataset_id

    try:
        parse_dataset_id(dataset_id)
    except ValueError as e:
        raise DatasetError(str(e)) from None
    target = datasets_root(root) / dataset_id
    if target.exists():
        raise DatasetError(f"Minari dataset '{dataset_id}' already exists at {target}; pick another name or "
                           "version (-v1, ...) or delete it")
    return target


def save_minari(data: Dataset, dataset_id: str, root: str | Path | None = None,
                attrs: dict[str, Any] | None = None,
                action_bounds: tuple[float, float] | None = None) -> Path:
    """Write ``data`` as the Minari dataset ``dataset_id`` (``namespace/name-vN``) under ``root``.

    ``attrs`` (provenance) go to ``metadata.json`` under the key ``ctrl_rl``; ``action_bounds``
    become the action Box's limits (unbounded when None). Infos (one row per observation in
    Minari, T+1) get the episode's last row repeated for the final observation, which a
    D4RL-layout row does not carry; :func:`load_minari` drops that row again. Returns the
    dataset's directory. A failed write leaves nothing behind.
    """
    import gymnasium as gym
    import minari
    from minari.data_collector import EpisodeBuffer

    target = check_new_dataset(dataset_id, root)
    _check_single_sequence(data)
    buffers = []
    for i, (a, b) in enumerate(_episodes(data)):
        infos = {k: np.concatenate([v[a:b], v[b - 1:b]]) for k, v in data.infos.items()}
        buffers.append(EpisodeBuffer(
            id=i, observations=np.concatenate([data.observations[a:b], data.next_observations[b - 1:b]]),
            actions=data.actions[a:b], rewards=data.rewards[a:b], terminations=data.terminals[a:b],
            truncations=data.timeouts[a:b], infos=infos or None))
    lo, hi = action_bounds if action_bounds is not None else (-np.inf, np.inf)
    spaces = {"observation_space": gym.spaces.Box(-np.inf, np.inf, (data.obs_dim,), np.float32),
              "action_space": gym.spaces.Box(lo, hi, (data.action_dim,), np.float32)}
    description = (attrs or {}).get("description", "written by ctrl_rl")
    try:
        with _root_variable(root), warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "env_spec is None" etc.: deliberate, no env here
            dataset = minari.create_dataset_from_buffers(dataset_id, buffers, env=None, algorithm_name="ctrl_rl",
                                                         description=str(description), **spaces)
            if attrs:
                dataset.storage.update_metadata({"ctrl_rl": {k: str(v) for k, v in attrs.items()}})
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)
        raise
    return target


def _data_dir(spec: str | Path, root: str | Path | None) -> tuple[Path, str]:
    """``(<dataset>/data, description)`` for a dataset id or a dataset / data directory."""
    path = Path(spec)
    for candidate in (path / "data", path):
        if (candidate / "metadata.json").is_file():
            return candidate, str(path)
    if path.exists():
        raise DatasetError(f"{path}: not a Minari dataset (no data/metadata.json inside)")
    where = datasets_root(root) / str(spec)
    if (where / "data" / "metadata.json").is_file():
        return where / "data", str(spec)
    variable = os.environ.get(ROOT_VARIABLE)
    raise DatasetError(f"Minari dataset '{spec}' not found: looked in {where} ({ROOT_VARIABLE}="
                       f"{variable if variable else 'unset, so ~/.minari/datasets'}); give a dataset id under that "
                       "root, a dataset directory, or write one with `ctrl-rl collect ... --output minari:<id>`")


def _box_dim(space: Any, name: str, source: str) -> int:
    import gymnasium as gym

    if not isinstance(space, gym.spaces.Box):
        raise DatasetError(f"{source}: {name} is {space}; ctrl_rl datasets need Box observations and actions")
    return int(np.prod(space.shape))


def _flat_infos(infos: dict | None, prefix: str = "") -> dict[str, Any]:
    """Nested info dicts as ``a/b`` keys."""
    out: dict[str, Any] = {}
    for k, v in (infos or {}).items():
        if isinstance(v, dict):
            out.update(_flat_infos(v, f"{prefix}{k}/"))
        else:
            out[f"{prefix}{k}"] = np.asarray(v)
    return out


def load_minari(spec: str | Path, root: str | Path | None = None) -> Dataset:
    """Read a Minari dataset (an id under ``root`` / ``MINARI_DATASETS_PATH``, or a dataset
    directory) into D4RL-layout rows, episode by episode, through ``minari.MinariDataset``.

    Infos are kept where every episode has the key as a numeric array of T+1 rows (Minari's
    collector: one per observation; the row of the final observation is dropped) or T rows;
    others are skipped with a warning. ``metadata`` is the dataset's ``metadata.json``.
    """
    import minari

    data_dir, source = _data_dir(spec, root)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            dataset = minari.MinariDataset(data_dir)
        obs_dim = _box_dim(dataset.observation_space, "the observation space", source)
        action_dim = _box_dim(dataset.action_space, "the action space", source)
        cols: dict[str, list[np.ndarray]] = {k: [] for k in ("obs", "next", "act", "rew", "term", "trunc")}
        infos: dict[str, list[np.ndarray]] = {}
        skipped: set[str] = set()
        for n, ep in enumerate(dataset.iterate_episodes()):
            t = len(ep.rewards)
            obs = np.asarray(ep.observations, dtype=np.float32).reshape(-1, obs_dim)
            if len(obs) != t + 1:
                raise DatasetError(f"{source}: episode {ep.id} has {len(obs)} observations for {t} steps "
                                   "(Minari needs T+1)")
            for key, v in (("obs", obs[:-1]), ("next", obs[1:]), ("rew", ep.rewards),
                           ("act", np.asarray(ep.actions, dtype=np.float32).reshape(-1, action_dim)),
                           ("term", ep.terminations), ("trunc", ep.truncations)):
                cols[key].append(np.asarray(v))
            episode_infos = _flat_infos(ep.infos)
            for k, v in episode_infos.items():
                ok = v.dtype.kind in "biuf" and v.ndim in (1, 2) and len(v) in (t, t + 1)
                if ok and (k in infos or n == 0):
                    infos.setdefault(k, []).append(v[:t])
                else:
                    skipped.add(k)
            skipped |= set(infos) - set(episode_infos)
        metadata = json.loads((data_dir / "metadata.json").read_text())
    except DatasetError:
        raise
    except Exception as e:  # minari/h5py on a broken dataset: KeyError, OSError, AssertionError, ...
        raise DatasetError(f"{source}: not a readable Minari dataset ({type(e).__name__}: {e})") from None
    if not cols["obs"]:
        raise DatasetError(f"{source}: no episodes")
    if skipped:
        log.warning("%s: infos %s skipped (not numeric, not in every episode, or not T/T+1 rows)",
                    source, sorted(skipped))
    arrays = {k: np.concatenate(v) for k, v in cols.items()}
    try:
        return Dataset(observations=arrays["obs"], actions=arrays["act"], rewards=arrays["rew"],
                       terminals=arrays["term"], timeouts=arrays["trunc"], next_observations=arrays["next"],
                       infos={k: np.concatenate(v) for k, v in infos.items() if k not in skipped},
                       metadata=metadata)
    except DatasetError as e:
        raise DatasetError(str(e).replace("dataset:", f"{source}:", 1)) from None
