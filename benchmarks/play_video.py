"""``ctrl-rl play <run> --video out.mp4 --steps N``, timed from start to exit, with the file checked.

Trains nothing: it films a checkpoint (``--run``), or a tiny untrained quadruped run it makes in a
temp dir (``ctrl-rl train task=quadruped_velocity_flat runner.max_iterations=1 env.num_envs=8``),
so it runs anywhere. Each repeat is a fresh ``python -m ctrl_rl play`` subprocess (imports, model
building, the GL context and the encoder included, as a user waits for them); the MP4 is read back
with PyAV for its frame count, frame rate and size. The machine's load average is printed with
the result: on a 2-core machine, rendering shares the cores with whatever else runs.

``--pythonpath DIR`` runs another copy of the package (e.g. an older commit's ``src/``, from
``git archive <commit> src | tar -x -C DIR``) for a before/after on the same machine;
``--profile`` adds the main thread's top functions by own time (``python -m cProfile``).

Usage::

    python benchmarks/play_video.py                                  # 500 steps of a tiny quadruped run
    python benchmarks/play_video.py --run logs/ppo/quadruped_velocity_flat/<run> --repeats 3
    python benchmarks/play_video.py --pythonpath /tmp/old/src        # the same, with another source tree
    python benchmarks/play_video.py --steps 5                        # smoke test

Ends with ``RESULT seconds=… frames=… fps=… wall_s_per_frame=… video_s=… width=… height=… load=…``.
"""

from __future__ import annotations

import argparse
import os
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TASK = "quadruped_velocity_flat"


def make_run(root: Path) -> Path:
    """A one-iteration quadruped run under ``root/logs`` (an untrained policy: it stands and sways)."""
    proc = subprocess.run([sys.executable, "-m", "ctrl_rl", "train", f"task={TASK}", "runner.max_iterations=1",
                           "env.num_envs=8", "runner.progress=false"], cwd=root, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"making the run failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return next((root / "logs" / "ppo" / TASK).iterdir())


def film(run: Path, steps: int, out: Path, pythonpath: str | None, profile: Path | None) -> tuple[float, str]:
    """``(wall seconds, stdout)`` of one ``ctrl-rl play`` subprocess."""
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (pythonpath, env.get("PYTHONPATH")) if p)
    prefix = ["-m", "cProfile", "-o", str(profile)] if profile else []
    cmd = [sys.executable, *prefix, "-m", "ctrl_rl", "play", str(run), "--video", str(out), "--steps", str(steps)]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=out.parent, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"play failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return seconds, proc.stdout


def read_back(path: Path) -> dict[str, float]:
    """Frames, frame rate, duration and size of the MP4, as a player sees them."""
    import av

    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        frames = stream.frames or sum(1 for _ in container.decode(stream))
        fps = float(stream.average_rate)
        return {"frames": frames, "fps": fps, "video_s": frames / fps, "width": stream.width,
                "height": stream.height}


def print_profile(path: Path, top: int = 8) -> None:
    stats = pstats.Stats(str(path))
    total = sum(row[2] for row in stats.stats.values())
    rows = sorted(stats.stats.items(), key=lambda kv: kv[1][2], reverse=True)[:top]
    print(f"\nmain thread, own time ({total:.1f} s profiled):\n")
    print("| function | calls | s | share |\n|---|---:|---:|---:|")
    for (file, line, name), (_, calls, own, *_rest) in rows:
        where = name if file == "~" else f"{Path(file).name}:{line}({name})"
        print(f"| `{where}` | {calls} | {own:.2f} | {100 * own / total:.0f}% |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--run", type=Path, default=None, help="a run dir or model_<it>.pt (default: make a tiny one)")
    parser.add_argument("--steps", type=int, default=500, help="control steps to film (500 = 10 s at 50 Hz)")
    parser.add_argument("--repeats", type=int, default=1, help="fresh subprocesses; the table reports the fastest")
    parser.add_argument("--pythonpath", default=None, help="run the package from this source tree instead")
    parser.add_argument("--profile", action="store_true", help="profile the last repeat (cProfile, main thread)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="play_video_") as tmp:
        root = Path(tmp)
        run = args.run.resolve() if args.run else make_run(root)
        out, profile = root / "out.mp4", root / "play.prof"
        load_before = os.getloadavg()[0]
        times = []
        for i in range(args.repeats):
            last = i == args.repeats - 1
            seconds, stdout = film(run, args.steps, out, args.pythonpath, profile if args.profile and last else None)
            times.append(seconds)
        load_after = os.getloadavg()[0]
        video = read_back(out)
        if args.profile:
            print_profile(profile)
    best = min(times)
    video_line = next((line for line in stdout.splitlines() if line.startswith("video:")), "")
    print(f"\nctrl-rl play {run} --video out.mp4 --steps {args.steps} ({os.cpu_count()} cores, "
          f"{'PYTHONPATH=' + args.pythonpath if args.pythonpath else 'this checkout'})")
    print(f"  {video_line}\n")
    print("| measure | value |\n|---|---:|")
    rows = [(f"wall s (fastest of {len(times)})", f"{best:.2f}"),
            ("every repeat, s", " ".join(f"{t:.1f}" for t in times)),
            ("frames in the file", f"{video['frames']}"), ("fps of the file", f"{video['fps']:g}"),
            ("video s", f"{video['video_s']:.2f}"), ("size", f"{video['width']}x{video['height']}"),
            ("wall s per frame", f"{best / max(video['frames'], 1):.4f}"),
            ("load average (1 min) before / after", f"{load_before:.2f} / {load_after:.2f}")]
    for name, value in rows:
        print(f"| {name} | {value} |")
    print(f"RESULT seconds={best:.2f} frames={video['frames']} fps={video['fps']:g} "
          f"wall_s_per_frame={best / max(video['frames'], 1):.4f} video_s={video['video_s']:.2f} "
          f"width={video['width']} height={video['height']} load={load_before:.2f}")


if __name__ == "__main__":
    main()
