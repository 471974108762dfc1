"""mjlab (Isaac Lab's RL API on MuJoCo Warp) as a backend: its task ids and its factory, run through the
Isaac Lab API adapter (``sims/isaaclab.py: IsaacLabVecEnv``). mjlab pins its own MuJoCo, so it lives
in ``.venv-mjlab`` and is imported only inside :func:`make_mjlab_env`."""

from __future__ import annotations

from typing import Any

import torch

from ctrl_rl.registry import UnknownNameError

from .isaaclab import IsaacLabVecEnv, apply_cfg_overrides, device_str

MJLAB_TASKS = [
    "Mjlab-Cartpole-Balance", "Mjlab-Cartpole-Swingup", "Mjlab-Velocity-Flat-Unitree-Go1",
    "Mjlab-Velocity-Rough-Unitree-Go1", "Mjlab-Velocity-Flat-Unitree-G1", "Mjlab-Velocity-Rough-Unitree-G1",
]
"""Listed for ``sim=mjlab`` (mjlab 1.6.0); any id in mjlab's registry works."""

MJLAB_INSTALL = ("sim=mjlab needs mjlab, which pins mujoco 3.11 and so lives in its own venv: "
                 "run `bash scripts/setup_mjlab_env.sh`, then use `.venv-mjlab/bin/ctrl-rl`")


def make_mjlab_env(task: str, num_envs: int, device: str | torch.device = "cpu",
                   seed: int | None = None, **cfg_overrides: Any) -> IsaacLabVecEnv:
    """An mjlab task from mjlab's own registry (``load_env_cfg``), as a :class:`IsaacLabVecEnv`."""
    try:
        import mjlab.tasks  # noqa: F401 - registers mjlab's task ids
        from mjlab.envs import ManagerBasedRlEnv
        from mjlab.tasks.registry import list_tasks, load_env_cfg
    except ImportError as exc:
        raise ValueError(f"{MJLAB_INSTALL} ({exc})") from None
    if task not in list_tasks():
        raise UnknownNameError.of("task", task, list_tasks(), context=" for sim 'mjlab'")
    cfg = load_env_cfg(task)
    cfg.scene.num_envs = num_envs
    if seed is not None:
        cfg.seed = seed
    apply_cfg_overrides(cfg, cfg_overrides)
    return IsaacLabVecEnv(ManagerBasedRlEnv(cfg, device=device_str(device)), seed=seed)
