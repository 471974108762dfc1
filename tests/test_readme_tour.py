"""README's "Five minutes with it", replayed command by command on tiny runs.

The commands are read from README.md, so the tour and this test cannot drift apart. What changes
for a test budget, and only that:

- every ``train`` runs 2 iterations of 16 envs (the resume's ``--more`` trains 2 more, to 4);
- ``eval`` runs 4 episodes, ``play`` 20 steps, ``deploy sim2sim`` 6 s with a 1 s stand-up;
- the GPU presets are composed (``--cfg``) and not run where CUDA is absent;
- ``tensorboard --logdir logs`` is checked by reading the event file with TensorBoard's reader;
- the shell lines (activate, pip install) are checked by importing what the extras install.
"""

from __future__ import annotations

import importlib
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
TINY = {"runner.max_iterations": "2", "env.num_envs": "16"}


def tour() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = text.split("## Five minutes with it", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    return [line.split("  #", 1)[0].strip() for line in block.strip().splitlines()]


def run(argv: list[str], cwd: Path, timeout: int = 600) -> str:
    proc = subprocess.run([sys.executable, "-m", "ctrl_rl", *argv], capture_output=True, text=True, cwd=cwd,
                          timeout=timeout)
    assert proc.returncode == 0, f"ctrl-rl {' '.join(argv)}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


def tiny(args: list[str], **values: str) -> list[str]:
    """``args`` with the TINY values (and ``values``) instead of any the command gave."""
    values = {**TINY, **values}
    return [a for a in args if a.split("=", 1)[0] not in values] + [f"{k}={v}" for k, v in values.items()]


def newest_run(cwd: Path, task: str) -> Path:
    return max((cwd / "logs" / "ppo" / task).iterdir(), key=lambda p: p.name)


def with_more(args: list[str], n: int) -> list[str]:
    """``args`` with ``--more <n>`` instead of the count it gives."""
    i = args.index("--more")
    return [*args[:i + 1], str(n), *args[i + 2:]]


def test_the_readmes_resume_example_trains_the_iterations_it_names(tmp_path):
    """The tour's resume line says how many more iterations it trains, and does: a 3-iteration run, then
    that line (with 2 for its count) ends at iteration 5; the same line without ``--more`` is refused,
    naming the checkpoint's iteration and ``--more``."""
    [line] = [line for line in (ROOT / "README.md").read_text().split("## Five minutes with it", 1)[1]
              .split("```bash", 1)[1].split("```", 1)[0].splitlines() if "--checkpoint" in line]
    command, comment = line.split("  #", 1)
    args = shlex.split(command)[1:]
    count = int(args[args.index("--more") + 1])
    assert f"train {count} more iterations" in comment and "runner.max_iterations" not in command
    run(["train", "task=pendulum", "runner.max_iterations=3", "env.num_envs=16", "algo.num_steps_per_env=8",
         "algo.num_minibatches=2", "runner.progress=false"], tmp_path)
    run_dir = newest_run(tmp_path, "pendulum")
    out = run(with_more(args, 2), tmp_path)
    assert "at iteration 3 -> 5" in out and f"done: {run_dir.relative_to(tmp_path)}" in out
    state = torch.load(run_dir / "model_5.pt", weights_only=False)
    assert state["iteration"] == 5 and state["config"]["runner"]["max_iterations"] == 5
    i = args.index("--more")
    proc = subprocess.run([sys.executable, "-m", "ctrl_rl", *args[:i], *args[i + 2:]], capture_output=True,
                          text=True, cwd=tmp_path, timeout=300)
    lines = [ln for ln in proc.stderr.splitlines() if not ln.startswith(("INFO", "WARNING"))]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0].startswith("ctrl-rl: error: model_5.pt is at iteration 5 and the run ends at iteration 5") \
        and "add --more N" in lines[0], lines[0]
    assert not (run_dir / "model_6.pt").exists()


@pytest.mark.slow
def test_the_readme_tour_runs_on_tiny_runs(tmp_path):
    lines = tour()
    assert len(lines) >= 12 and all(line for line in lines)
    seen = []
    for line in lines:
        words = shlex.split(line)
        if words[0] == ".":  # activate
            continue
        if words[:2] == ["pip", "install"]:
            extras = re.search(r"\[(.*)\]", line).group(1).split(",")
            modules = {"mujoco": "mujoco", "video": "av", "deploy": "cyclonedds"}
            for extra in extras:
                importlib.import_module(modules[extra])
            seen.append("pip")
            continue
        if words[0] == "tensorboard":
            from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

            events = EventAccumulator(str(newest_run(tmp_path, "pendulum"))).Reload()
            assert {"Loss/value", "Perf/total_fps"} <= set(events.Tags()["scalars"])  # rsl_rl v5 tags
            seen.append("tensorboard")
            continue
        assert words[0] == "ctrl-rl", line
        args = words[1:]
        command = args[0]
        if command == "train" and "--help" in args:
            assert "algo.gamma=" in run(args, tmp_path)
        elif command == "train" and any(a.startswith("tune=") and a.endswith("_gpu") for a in args) \
                and not torch.cuda.is_available():
            assert "device: cuda" in run(args + ["--cfg"], tmp_path)  # composes; not run without a GPU
        elif command == "train" and "--checkpoint" in args:
            run_dir = newest_run(tmp_path, "pendulum")
            out = run(with_more(args, 2), tmp_path)
            resumed = run_dir.relative_to(tmp_path) / "model_2.pt"
            assert f"resuming {resumed}" in out and "at iteration 2 -> 4" in out and (run_dir / "model_4.pt").is_file()
        elif command == "train":
            out = run(tiny(args), tmp_path)
            assert "threads: 1 torch" in out and "done:" in out
        elif command == "eval":
            out = run(["eval", "latest", "--episodes", "4"], tmp_path)
            assert out.splitlines()[-1].startswith("RESULT mean_return=")
        elif command == "play":
            video = tmp_path / args[args.index("--video") + 1]
            run(["play", "latest", "--video", str(video), "--steps", "20"], tmp_path)
            assert video.stat().st_size > 1000
        elif command == "export":
            run(args, tmp_path)
            assert (newest_run(tmp_path, "quadruped_velocity_flat") / "exported" / "policy.onnx").is_file()
        elif command == "deploy":
            bundle = newest_run(tmp_path, "quadruped_velocity_flat") / "exported" / "policy.onnx"
            args = [str(bundle) if "<run>" in a else a for a in args]
            args[args.index("--duration") + 1] = "6"
            out = run(args + ["--set", "safety.stand_up_time=1.0"], tmp_path, timeout=180)
            assert "RESULT sim2sim" in out and f"summary: {tmp_path / 'logs' / 'deploy' / 'sim2sim_'}" in out
        elif command == "list":
            out = run(args, tmp_path)
            assert "sim=mujoco" in out and "quadruped_velocity_flat" in out
        else:
            raise AssertionError(f"the tour has a command this test does not know: {line}")
        seen.append(command)
    assert {"list", "train", "eval", "play", "export", "deploy", "tensorboard", "pip"} <= set(seen)
