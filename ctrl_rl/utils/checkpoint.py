"""Atomic checkpoints, RNG capture, and finding the checkpoint a user means."""

from __future__ import annotations

import os
import random
import re
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

_MODEL_RE = re.compile(r"model_(\d+)\.pt$")


def save_atomic(obj: Any, path: str | Path) -> Path:
    """``torch.save`` to a temp file in the same directory, fsync, then rename over ``path``.

    A crash (even SIGKILL) mid-write leaves the previous file intact: readers see either
    the old or the new checkpoint, never a torn one.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


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


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def checkpoint_iteration(path: Path) -> int:
    m = _MODEL_RE.search(path.name)
    return int(m.group(1)) if m else -1


def latest_model_in(run_dir: Path) -> Path | None:
    """The ``model_<it>.pt`` with the highest iteration in ``run_dir`` (or ``None``)."""
    models = [p for p in run_dir.glob("model_*.pt") if _MODEL_RE.search(p.name)]
    return max(models, key=checkpoint_iteration) if models else None


def resolve_checkpoint(spec: str, search_root: Path | None = None) -> Path:
    """Turn ``latest``, a run directory or a ``.pt`` file into a checkpoint path.

    ``latest`` picks the newest run directory under ``search_root`` (e.g.
    ``logs/ppo/pendulum``) that holds a checkpoint, and its highest iteration.
    """
    if spec == "latest":
        if search_root is None or not search_root.is_dir():
            raise FileNotFoundError(f"no runs found under '{search_root}' to resume from; train first or pass a path")
        runs = sorted((d for d in search_root.iterdir() if d.is_dir() and latest_model_in(d)), key=lambda d: d.name)
        if not runs:
            raise FileNotFoundError(f"no run under '{search_root}' has a model_<it>.pt checkpoint")
        return latest_model_in(runs[-1])  # type: ignore[return-value]
    path = Path(spec).expanduser()
    if path.is_dir():
        found = latest_model_in(path)
        if found is None:
            raise FileNotFoundError(f"run directory '{path}' holds no model_<it>.pt")
        return found
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint '{spec}' not found (give 'latest', a run directory or a model_<it>.pt)")
    return path
