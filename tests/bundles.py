"""Real exported bundles for the deploy tests (short training runs, parity-checked exports), and sim2sim run as a
user runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROS_PY = Path(__file__).parent.parent / ".venv-ros" / "bin" / "python"


def run_sim2sim(bundle: Path, cwd: Path, transport: str, seconds: float, namespace: str,
                *options: str) -> subprocess.CompletedProcess:
    """``ctrl-rl deploy sim2sim <bundle>`` over ``transport`` (rclpy: in .venv-ros, on a domain of its own)."""
    python, env = sys.executable, {}
    if transport == "rclpy":
        python, env = str(ROS_PY), {"ROS_AUTOMATIC_DISCOVERY_RANGE": "SUBNET",
                                    "ROS_DOMAIN_ID": str(1 + (os.getpid() + len(namespace)) % 100)}
    return subprocess.run([python, "-m", "ctrl_rl", "deploy", "sim2sim", str(bundle), "--duration", str(seconds),
                           "--transport", transport, "--namespace", f"{namespace}{os.getpid()}", *options],
                          capture_output=True, text=True, timeout=120, cwd=cwd, env={**os.environ, **env})


def quadruped_bundle(root: Path) -> str:
    """Train ctrl_quad for 2 iterations of 64 envs x 8 steps under ``root`` and export it."""
    from ctrl_rl.app.export import export
    from ctrl_rl.app.train import train

    run = train(["task=quadruped_velocity_flat", "env.num_envs=64", "algo.num_steps_per_env=8",
                 "runner.max_iterations=2", "runner.progress=false", f"runner.log_root={root}"])
    return str(export(str(run), []))


def scan_bundle(root: Path) -> str:
    """A rough-terrain bundle whose actor observes the height scan (1 iteration of 16 envs x 8 steps on a
    small 2 x 7 grid): the deploy node must be given a height map for it."""
    from ctrl_rl.app.export import export
    from ctrl_rl.app.train import train

    run = train(["task=quadruped_velocity_rough", "env.num_envs=16", "algo.num_steps_per_env=8",
                 "runner.max_iterations=1", "runner.progress=false", f"runner.log_root={root}",
                 "task.kwargs.actor_height_scan=true", "task.kwargs.terrain.num_rows=2",
                 "task.kwargs.terrain.num_cols=7"])
    return str(export(str(run), []))


def humanoid_bundle(root: Path) -> str:
    """ctrl_humanoid (21 joints, all of them G1 motors) after 1 iteration of 16 envs x 8 steps, exported."""
    from ctrl_rl.app.export import export
    from ctrl_rl.app.train import train

    run = train(["task=humanoid_velocity_flat", "env.num_envs=16", "algo.num_steps_per_env=8",
                 "runner.max_iterations=1", "runner.progress=false", f"runner.log_root={root}"])
    return str(export(str(run), []))


def crafted_bundle(src: str | Path, dst: str | Path, factor: float) -> str:
    """``src`` with its action output multiplied by ``factor`` (NaN, inf, 1e6: a policy gone bad),
    metadata kept: the deploy node must fault or clamp, never pass it on."""
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load(str(src))
    graph = model.graph
    out = graph.output[0]
    scaled = f"{out.name}_unscaled"
    for node in graph.node:  # the producer of the output now writes the unscaled value
        node.output[:] = [scaled if o == out.name else o for o in node.output]
    import numpy as np

    graph.initializer.append(numpy_helper.from_array(np.array(factor, dtype=np.float32), "fuzz_factor"))
    graph.node.append(helper.make_node("Mul", [scaled, "fuzz_factor"], [out.name]))
    onnx.save(model, str(dst))
    return str(dst)


def insert_bundle(root: Path, episode_s: float = 5.0, task: str = "insert") -> str:
    """i2rt's YAM on the insert task (episodes of ``episode_s``) after 1 iteration of 8 envs x 8 steps, exported:
    an arm bundle whose policy observes an object (the socket's pose): the deploy node must be given one.
    ``task="lift"``: the lift task's (the cube's pose, and a target height the node must be given too)."""
    from ctrl_rl.app.export import export
    from ctrl_rl.app.train import train

    run = train([f"task={task}", f"+task.kwargs.episode_length_s={episode_s}", "env.num_envs=8",
                 "algo.num_steps_per_env=8", "runner.max_iterations=1", "runner.progress=false",
                 f"runner.log_root={root}"])
    return str(export(str(run), []))


def arm_bundle(root: Path) -> str:
    """i2rt's YAM on the reach task (mjlab's wheel) after 1 iteration of 16 envs x 8 steps, exported: an arm
    bundle (its kinematic chain, the workspace box, the gripper among its joints)."""
    from ctrl_rl.app.export import export
    from ctrl_rl.app.train import train

    run = train(["task=reach", "env.num_envs=16", "algo.num_steps_per_env=8", "runner.max_iterations=1",
                 "runner.progress=false", f"runner.log_root={root}"])
    return str(export(str(run), []))
