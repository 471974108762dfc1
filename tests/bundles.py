"""A real exported quadruped bundle for the deploy tests (a short training run, parity-checked export)."""

from __future__ import annotations

from pathlib import Path


def quadruped_bundle(root: Path) -> str:
    """Train ctrl_quad for 2 iterations of 64 envs x 8 steps under ``root`` and export it."""
    from ctrl_rl.commands import export, train

    run = train(["task=quadruped_velocity_flat", "env.num_envs=64", "algo.num_steps_per_env=8",
                 "runner.max_iterations=2", "runner.progress=false", f"runner.log_root={root}"])
    return str(export(str(run), []))
