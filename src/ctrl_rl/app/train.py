"""``ctrl-rl train``: a new run or a resumed one, until its last iteration or a stop signal."""

from __future__ import annotations

import dataclasses
import datetime as dt
import random
from pathlib import Path

import numpy as np
import torch

from ctrl_rl import distributed
from ctrl_rl.algos.checkpoints import task_root
from ctrl_rl.app.configure import compose_run_config, config_yaml, load_train_config
from ctrl_rl.app.session import require_device
from ctrl_rl.config import ConfigError, TrainConfig
from ctrl_rl.runners import make_runner
from ctrl_rl.sims.build import build_env
from ctrl_rl.utils import threads
from ctrl_rl.utils.interrupts import GracefulStop


def seed_everything(seed: int) -> None:
    """Seed python's, numpy's and torch's global generators (the envs take their own seed)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def new_run_dir(cfg: TrainConfig) -> Path:
    stamp = dt.datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
    name = f"{stamp}_{cfg.runner.run_name}" if cfg.runner.run_name else stamp
    run = task_root(cfg) / name
    suffix = 1
    while run.exists():  # two runs started in the same second
        run = task_root(cfg) / f"{name}_{suffix}"
        suffix += 1
    try:
        (run / "params").mkdir(parents=True)
    except OSError as e:  # read-only or full log root: one line naming where, and the key to change
        raise OSError(e.errno, f"{e.strerror} (creating the run directory; set runner.log_root=<a writable "
                               "directory>)", e.filename) from None
    return run


def write_params(run_dir: Path, cfg: TrainConfig, overrides: list[str], prefix: str = "") -> None:
    """``params/<prefix>config.yaml`` and ``<prefix>overrides.yaml`` (a resume adds its own pair)."""
    params = run_dir / "params"
    params.mkdir(parents=True, exist_ok=True)
    (params / f"{prefix}config.yaml").write_text(config_yaml(cfg))
    (params / f"{prefix}overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides) or "[]\n")


def check_run_length(runner, path: Path) -> None:
    """Refuse a resume with nothing left to train: the run's total at or below the checkpoint's iteration."""
    total, value = runner.total_iterations(), runner.cfg.runner.max_iterations
    if total <= runner.iteration:
        raise ConfigError(f"{path.name} is at iteration {runner.iteration} and the run ends at iteration {total} "
                          f"(runner.max_iterations={value} is a total, not a count to add): to train N more, add "
                          f"--more N (e.g. --more {value or 100})")


def train(overrides: list[str], checkpoint: str | None = None, print_cfg: bool = False,
          more: int | None = None) -> Path:
    """Train (or resume) and return the run directory, in four steps: compose the config
    (``configure.compose_run_config``: a resume's comes from its checkpoint), build the env
    (``sims/build.py``), build the learner and its runner (``runners``), run. It trains up to the
    run's total (``runner.max_iterations``), or ``more`` iterations past the checkpoint's.
    """
    if checkpoint is not None and not checkpoint.strip():
        raise ValueError("--checkpoint is empty: give 'latest', a run directory or a model_<it>.pt "
                         "(or leave the option out to start a new run)")
    if print_cfg:  # without the sim or dataset=
        print(config_yaml(load_train_config(overrides, for_run=False)), end="")
        return Path()
    cfg, path = compose_run_config(overrides, checkpoint, more)
    device = distributed.setup(cfg.device)  # under torchrun: join the group, cuda:<LOCAL_RANK> per rank
    if device != cfg.device:
        cfg = dataclasses.replace(cfg, device=device)
    require_device(cfg.device)
    seed_everything(cfg.seed)  # the same on every rank: identical initial networks
    env = build_env(cfg, seed=distributed.rank_seed(cfg.seed))  # each rank: its own episodes
    runner = make_runner(env, cfg)  # env and learner first: config errors stop before any file is written
    main = distributed.is_main()
    if path is not None:
        run_dir = path.parent
        runner.load(path)
        if more is not None:
            try:
                runner.set_total_iterations(runner.iteration + more)
            except ConfigError as exc:
                raise ConfigError(f"--more {more}: {exc}") from None
            cfg = runner.cfg
        check_run_length(runner, path)
        if main:
            print(f"resuming {path} (run {run_dir.name}, seed {cfg.seed}; threads: {threads.current().describe()}) "
                  f"at iteration {runner.iteration} -> {runner.total_iterations()}")
            write_params(run_dir, cfg, overrides, prefix=f"resume_{runner.iteration}_")
    else:
        run_dir = new_run_dir(cfg) if main else None
        run_dir = distributed.broadcast_object(run_dir)  # every rank writes its replay file there
        if main:
            ranks = f" x {distributed.world_size()} processes" if distributed.enabled() else ""
            print(f"training {cfg.algo.name} on {cfg.task.name} ({cfg.sim.name}, {cfg.env.num_envs} envs{ranks}, "
                  f"{cfg.device}; threads: {threads.current().describe()}) -> {run_dir}")
            write_params(run_dir, cfg, overrides)
    runner.log_dir = run_dir
    with GracefulStop():  # Ctrl-C / SIGTERM: finish the iteration, write its checkpoint, exit 130 / 143
        runner.learn()
    # every rank waits for rank 0's last checkpoint: a rank leaving the group while another still
    # writes made gloo abort at exit ("terminate called without an active exception"), 1 run in ~5
    distributed.barrier()
    if main:
        print(f"done: {run_dir} (learning_curve.png, metrics.csv, model_{runner.iteration}.pt)")
    return run_dir
