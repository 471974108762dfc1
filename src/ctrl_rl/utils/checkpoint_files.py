"""A run's checkpoint files: atomic writes, integrity, RNG capture, and finding the checkpoint a user
means (reading one into a learner: ``ctrl_rl.algos.checkpoints``).

A checkpoint is ``model_<it>.pt``; learners with a replay (SAC, PROPS) also write
``replay_<it>.pt`` (``replay_rank<r>_<it>.pt`` per extra torchrun rank) *before* it. The model
file is the manifest: a replay counts only once the model of its iteration exists, and older
replays are removed only after it does, so a kill at any point leaves a matching pair.
"""

from __future__ import annotations

import logging
import os
import random
import re
import signal
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ctrl_rl.utils.files import atomic_write

log = logging.getLogger(__name__)

_MODEL_RE = re.compile(r"model_(\d+)\.pt$")
_TEMP_RE = re.compile(r"^\.(model_\d+|replay(_rank\d+)?(_\d+)?)\.pt\..*\.tmp$")
"""Temp files :func:`save_atomic` leaves when killed mid-write (removed by :func:`remove_leftovers`)."""


class CheckpointError(ValueError):
    """A checkpoint or replay file that cannot be read; the message names it and what to do."""


# -- fault injection (tests only) -------------------------------------------------------------------
_FAULT = os.environ.get("CTRL_RL_FAULT_POINT", "")
"""``<point>@<n>``: SIGKILL this process at the n-th time (1-based) it passes ``<point>``
(:func:`fault_point`). tests/test_faults.py kills a run at every write point of a checkpoint
this way; unset (always, outside those tests) it costs one string comparison per point."""
_fault_counts: dict[str, int] = {}


def fault_point(name: str) -> None:
    """A place where a kill must leave a resumable run (see ``CTRL_RL_FAULT_POINT``)."""
    if not _FAULT:
        return
    point, _, n = _FAULT.partition("@")
    if point != name:
        return
    _fault_counts[name] = _fault_counts.get(name, 0) + 1
    if _fault_counts[name] == int(n or 1):
        os.kill(os.getpid(), signal.SIGKILL)


def save_atomic(obj: Any, path: str | Path) -> Path:
    """``torch.save`` through :func:`~ctrl_rl.utils.files.atomic_write`: a crash (even SIGKILL)
    mid-write leaves the previous file intact, a full disk or an unwritable directory is an
    ``OSError`` naming ``path``, and the file gets the run's usual mode (0644 under the usual umask)."""
    path = Path(path)
    kind = path.stem.split("_")[0]
    with atomic_write(path) as tmp:
        torch.save(obj, tmp)
        fault_point(f"{kind}:written")
    fault_point(f"{kind}:renamed")
    return path


def load_file(path: str | Path, what: str = "checkpoint") -> dict[str, Any]:
    """``torch.load`` on CPU; a torn, empty or foreign file is a :class:`CheckpointError` that names it."""
    path = Path(path)
    try:
        state = torch.load(path, map_location="cpu", weights_only=False)
    except FileNotFoundError:
        raise
    except Exception as e:  # zip reader, unpickler, EOF, OS errors: all mean "this file is not usable"
        size = path.stat().st_size if path.exists() else 0
        others = sorted((p.name for p in path.parent.glob("model_*.pt") if p != path and is_intact(p)),
                        key=lambda n: checkpoint_iteration(Path(n)))
        fix = (f"use an earlier checkpoint of the run ({', '.join(others[-3:])})" if others
               else "this run has no other readable checkpoint: train again")
        reason = (str(e).strip().splitlines() or [type(e).__name__])[0][:120]
        raise CheckpointError(f"{what} {path} ({size} bytes) cannot be read ({reason}): it is truncated or "
                              f"not a ctrl_rl checkpoint; {fix}") from None
    if not isinstance(state, dict):
        raise CheckpointError(f"{what} {path} holds a {type(state).__name__}, not a ctrl_rl checkpoint")
    return state


def is_intact(path: Path) -> bool:
    """Whether ``path`` is a complete torch zip file (its central directory is readable): cheap,
    reads the end of the file; a torn or foreign file fails."""
    try:
        with zipfile.ZipFile(path) as z:
            return len(z.namelist()) > 0
    except (zipfile.BadZipFile, OSError, ValueError):
        return False


def replay_file(iteration: int, rank: int = 0) -> str:
    """The replay that belongs to ``model_<iteration>.pt`` (rank 0, or another torchrun rank)."""
    return f"replay_{iteration}.pt" if rank == 0 else f"replay_rank{rank}_{iteration}.pt"


def remove_stale_replays(run_dir: Path, keep_iteration: int) -> None:
    """Replays of other iterations (older ones, or one a kill left without its model)."""
    for p in run_dir.glob("replay*_*.pt"):
        m = re.search(r"_(\d+)\.pt$", p.name)
        if m and int(m.group(1)) != keep_iteration:
            p.unlink(missing_ok=True)


def remove_leftovers(run_dir: Path) -> int:
    """Delete the temp files of writes a kill interrupted; returns how many."""
    n = 0
    for p in run_dir.glob(".*.tmp"):
        if _TEMP_RE.match(p.name):
            p.unlink(missing_ok=True)
            n += 1
    if n:
        log.info("removed %d temp file(s) of interrupted checkpoint writes in %s", n, run_dir)
    return n


def rng_state() -> dict[str, Any]:
    """Global RNG states of python, numpy and torch (CPU and every CUDA device)."""
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


BEST_MODEL = "model_best.pt"
"""``runner.keep_best``'s checkpoint, beside the ``model_<it>.pt`` files (which it never counts among)."""


def new_best(values: list[float], window: int) -> float | None:
    """The mean of the last ``window`` of ``values`` when it beats every earlier window's mean (the first full
    window is a best), else None: ``runner.keep_best``'s rule, a pure function of the run's history."""
    if len(values) < window:
        return None
    means = [sum(values[i - window:i]) / window for i in range(window, len(values) + 1)]
    return means[-1] if all(means[-1] > m for m in means[:-1]) else None


def checkpoint_iteration(path: Path) -> int:
    m = _MODEL_RE.search(path.name)
    return int(m.group(1)) if m else -1


def latest_model_in(run_dir: Path) -> Path | None:
    """The readable ``model_<it>.pt`` with the highest iteration in ``run_dir`` (or ``None``); a torn
    newer one (a disk that filled up, a copy cut short) is skipped with a warning that names it."""
    models = sorted((p for p in run_dir.glob("model_*.pt") if _MODEL_RE.search(p.name)),
                    key=checkpoint_iteration, reverse=True)
    for p in models:
        if is_intact(p):
            return p
        log.warning("skipping %s: it is truncated or not a checkpoint (%d bytes)", p, p.stat().st_size)
    return None


def resolve_checkpoint(spec: str, search_root: Path | None = None) -> Path:
    """Turn ``latest``, a run directory or a ``.pt`` file into a checkpoint path.

    ``latest`` takes the newest run directory under ``search_root`` (e.g. ``logs/ppo/pendulum``),
    says which, and refuses when that run has no checkpoint (it was stopped before its first one:
    an older run with other settings would be a silent surprise) instead of reaching further back.
    """
    if not spec.strip():
        raise ValueError("--checkpoint is empty: give 'latest', a run directory or a model_<it>.pt "
                         "(or leave the option out to start a new run)")
    if spec == "latest":
        if search_root is None or not search_root.is_dir():
            raise FileNotFoundError(f"no runs found under '{search_root}' to resume from; train first or pass a path")
        runs = sorted((d for d in search_root.iterdir() if d.is_dir() and (d / "params").is_dir()),
                      key=lambda d: d.name)
        if not runs:
            raise FileNotFoundError(f"no run under '{search_root}' to resume from; train first or pass a path")
        newest = latest_model_in(runs[-1])
        if newest is None:
            older = [d for d in runs[:-1] if latest_model_in(d)]
            hint = f"; to resume an older run, pass it: --checkpoint {older[-1]}" if older else ""
            raise FileNotFoundError(f"the newest run {runs[-1]} has no readable checkpoint (stopped before its "
                                    f"first one?){hint}")
        log.info("latest: %s (the newest run under %s)", newest, search_root)
        return newest
    path = Path(spec).expanduser()
    if path.is_dir():
        found = latest_model_in(path)
        if found is not None:
            return found
        runs = sorted(d.name for d in path.iterdir() if d.is_dir() and (d / "params").is_dir())
        if runs:  # logs/<algo>/<task>: a folder of runs, not a run
            raise FileNotFoundError(f"'{path}' is a task folder holding {len(runs)} run(s), not a run directory; pass "
                                    f"one run (newest: {path / runs[-1]}) or 'latest'")
        raise FileNotFoundError(f"run directory '{path}' holds no readable model_<it>.pt")
    if not path.is_file():
        held = _checkpoints_in(path.parent)
        if held:
            raise FileNotFoundError(f"checkpoint '{spec}' not found; {path.parent} holds: {', '.join(held)}")
        raise FileNotFoundError(f"checkpoint '{spec}' not found (give 'latest', a run directory or a model_<it>.pt)")
    return path


def _checkpoints_in(folder: Path) -> list[str]:
    """The ``model_<it>.pt`` names in ``folder``, by iteration (empty when it is not a folder)."""
    if not folder.is_dir():
        return []
    models = [p.name for p in folder.glob("model_*.pt") if p.stem.removeprefix("model_").isdigit()]
    return sorted(models, key=lambda name: int(name[6:-3]))
