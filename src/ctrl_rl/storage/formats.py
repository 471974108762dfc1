"""One entry point for every offline dataset format: ``dataset=<spec>`` and ``ctrl-rl collect --output``.

=============================================  =========================================
spec                                           format
=============================================  =========================================
``data.hdf5``, ``data.h5``                     D4RL-layout HDF5 (:mod:`.dataset`)
``minari:<namespace>/<name>-vN``               Minari, under ``$MINARI_DATASETS_PATH``
a directory holding ``data/metadata.json``     Minari, by path (:mod:`.minari_io`)
``robotlogs:<dir>?reward=module:function``     robot logs (``ctrl_rl.storage.robot_log``)
any other existing file or directory           robot logs, rewards from ``reward_fn``
=============================================  =========================================
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ctrl_rl.storage.dataset import Dataset, DatasetError
from ctrl_rl.storage.minari_io import check_new_dataset, load_minari, save_minari

HDF5_SUFFIXES = (".hdf5", ".h5")
MINARI_PREFIX = "minari:"
ROBOT_LOG_PREFIX = "robotlogs:"
FORMATS = ("hdf5", "minari")
"""What ``save_dataset`` writes (robot logs are read-only)."""


def is_minari_dir(path: Path) -> bool:
    """A Minari dataset directory (``<id>/``, holding ``data/metadata.json``) or its ``data/`` folder."""
    return path.is_dir() and ((path / "data" / "metadata.json").is_file() or (path / "metadata.json").is_file())


def load_dataset(spec: str | Path, reward_fn: Callable[..., Any] | None = None) -> Dataset:
    """The dataset ``spec`` names, in whichever format (table above).

    ``reward_fn`` is for robot logs, which record states and actions but not rewards.
    """
    spec = str(spec)
    if spec.startswith(ROBOT_LOG_PREFIX):
        return _robot_log_module(spec).parse_robot_log_spec(spec).load()
    if spec.startswith(MINARI_PREFIX):
        return load_minari(spec[len(MINARI_PREFIX):])
    path = Path(spec)
    if path.suffix.lower() in HDF5_SUFFIXES:
        return Dataset.load_hdf5(path)  # a missing file gets its "not found" message there
    if is_minari_dir(path):
        return load_minari(path)
    for data in (path / "data", path):
        if (data / "main_data.hdf5").is_file():  # Minari's data file without its metadata
            raise DatasetError(f"{path} is a broken Minari dataset: {data / 'main_data.hdf5'} is there but "
                               f"{data / 'metadata.json'} is missing; restore it or collect the dataset again")
    if not path.exists():
        raise DatasetError(f"dataset not found: {spec} (give a .hdf5/.h5 file, minari:<id>, a Minari dataset "
                           "directory or a robot log; write one with `ctrl-rl collect`)")
    return _load_robot_logs(path, reward_fn)


def _robot_log_module(spec: str | Path) -> Any:
    """``ctrl_rl.storage.robot_log``, imported only when robot logs are asked for."""
    try:
        return importlib.import_module("ctrl_rl.storage.robot_log")
    except ImportError:
        raise DatasetError(f"{spec}: neither a D4RL HDF5 file (.hdf5/.h5) nor a Minari dataset "
                           "(minari:<id> or a directory with data/metadata.json), and robot-log loading "
                           "(ctrl_rl.storage.robot_log) is not available") from None


def _load_robot_logs(path: Path, reward_fn: Callable[..., Any] | None) -> Dataset:
    return _robot_log_module(path).load_robot_logs(path, reward_fn)


def output_format(output: str, fmt: str | None = None) -> str:
    """``hdf5`` or ``minari`` for ``--output`` (``--format`` wins; else from the name)."""
    if fmt is not None:
        if fmt not in FORMATS:
            raise DatasetError(f"--format must be one of {', '.join(FORMATS)}, got '{fmt}'")
        if fmt == "hdf5" and output.startswith(MINARI_PREFIX):
            raise DatasetError(f"--format hdf5 with --output {output}: name a .hdf5/.h5 file")
        return fmt
    if output.startswith(MINARI_PREFIX):
        return "minari"
    if Path(output).suffix.lower() in HDF5_SUFFIXES:
        return "hdf5"
    raise DatasetError(f"cannot tell the format of --output {output}: name a .hdf5/.h5 file or "
                       "minari:<namespace>/<name>-vN, or pass --format hdf5|minari")


def check_output(output: str, fmt: str | None = None) -> str:
    """The format ``output`` will be written in, refusing (before any work) a Minari id that is taken."""
    fmt = output_format(output, fmt)
    if fmt == "minari":
        check_new_dataset(_minari_id(output))
    return fmt


def _minari_id(output: str) -> str:
    return output[len(MINARI_PREFIX):] if output.startswith(MINARI_PREFIX) else output


def save_dataset(data: Dataset, output: str, attrs: dict[str, Any], fmt: str | None = None,
                 action_bounds: tuple[float, float] | None = None) -> tuple[str, str]:
    """Write ``data`` to ``output`` as ``fmt`` (default from the name); ``(format, where)``.

    Minari datasets go under ``$MINARI_DATASETS_PATH`` (``~/.minari/datasets`` when unset).
    """
    fmt = output_format(output, fmt)
    if fmt == "minari":
        return fmt, str(save_minari(data, _minari_id(output), attrs=attrs, action_bounds=action_bounds))
    return fmt, str(data.save_hdf5(output, attrs={k: str(v) for k, v in attrs.items()}))
