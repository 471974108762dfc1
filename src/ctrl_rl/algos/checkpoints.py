"""Checkpoints written by ``ctrl-rl train``: find one, read its config and state, rebuild its learner.

The commands that read a run (eval, play, export, collect, resume) and the learners that start
from another policy (residual's base, distillation's teacher) all load through here, below the
application layer. A checkpoint holds its config as a plain dict (``dataclasses.asdict``), so a
file stays loadable when modules move.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any

import torch

from ctrl_rl.algos import make_algorithm
from ctrl_rl.algos.registry import DEFAULT_LEARNER, learner
from ctrl_rl.config import TrainConfig
from ctrl_rl.utils.checkpoint_files import CheckpointError, load_file, resolve_checkpoint

log = logging.getLogger(__name__)


def config_from_dict(d: dict[str, Any]) -> TrainConfig:
    """Rebuild a validated TrainConfig from ``dataclasses.asdict`` output (checkpoints)."""
    from omegaconf import OmegaConf

    schema = learner(d.get("algo", {}).get("name", DEFAULT_LEARNER)).config()
    return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(TrainConfig(algo=schema)), d))  # type: ignore


def task_root(cfg: TrainConfig) -> Path:
    """``<log_root>/<algo>/<task>``: where this algorithm's runs of this task live."""
    return Path(cfg.runner.log_root) / cfg.algo.name / cfg.task.name.replace("/", "_")


def find_checkpoint(spec: str, cfg: TrainConfig | None = None, log_root: str = "logs") -> Path:
    """``spec`` is a file, a run directory or ``latest``; ``latest`` searches this algo/task's runs
    when ``cfg`` is given, else every run under ``log_root``."""
    if spec != "latest" or cfg is not None:
        return resolve_checkpoint(spec, task_root(cfg) if cfg is not None else None)
    candidates = [p for p in Path(log_root).glob("*/*/*/model_*.pt")]
    if not candidates:
        raise FileNotFoundError(f"no checkpoints under '{log_root}/'; train first (ctrl-rl train)")
    newest_run = max(candidates, key=lambda p: p.stat().st_mtime).parent
    return resolve_checkpoint(str(newest_run))


def load_checkpoint(path: Path) -> tuple[TrainConfig, dict[str, Any]]:
    """The config and state of a checkpoint; a torn or foreign file is one error naming it."""
    state = load_file(path)
    if "config" not in state or "algo" not in state:
        raise CheckpointError(f"checkpoint {path} has no config/learner state: it was not written by ctrl-rl train")
    return config_from_dict(state["config"]), state


def on_this_machine(cfg: TrainConfig) -> TrainConfig:
    """``cfg`` with ``device=cpu`` when it was trained on CUDA and this machine has none."""
    if cfg.device.startswith("cuda") and not torch.cuda.is_available():
        log.info("checkpoint was trained on %s; running on cpu here", cfg.device)
        return dataclasses.replace(cfg, device="cpu")
    return cfg


def inference_learner(cfg: TrainConfig, state: dict[str, Any], device: str | torch.device | None = None) -> Any:
    """The checkpoint's learner without training-only state, weights loaded, on ``device`` (default: the config's)."""
    alg = make_algorithm(cfg.algo, state["obs_dims"], state["action_dim"], 1, device or cfg.device,
                         action_bounds=state.get("action_bounds", (-1.0, 1.0)), inference_only=True)
    alg.load_state_dict(state["algo"], restore_rng=False)
    return alg


def load_learner(spec: str, device: str | torch.device | None = None) -> tuple[TrainConfig, Path, Any, dict[str, Any]]:
    """``(cfg, path, learner, state)`` of checkpoint ``spec`` for inference (on ``device``, else the
    config's, falling back to the CPU where CUDA is absent)."""
    path = find_checkpoint(spec)
    cfg, state = load_checkpoint(path)
    cfg = on_this_machine(cfg)
    return cfg, path, inference_learner(cfg, state, device), state
