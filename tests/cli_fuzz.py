"""Generated bad command lines against ``ctrl-rl``: each must end in one clear line, never a traceback
and never silent acceptance.

    python tests/cli_fuzz.py [--log-root DIR]

For every field of the learner, env and runner schemas: a value of the wrong type, and an out-of-range
one (NaN for floats, -1 for integers, an unknown choice for strings with choices, a scalar for a
list); plus unknown keys and groups, bad task parameters, bad paths for every command that takes one.
Lines run in this process through ``ctrl_rl.app.cli.main`` (config errors stop before any env is built;
``--cfg`` is added where a line only tests the config). Prints ``case | outcome`` for any line that
is not one clear line, and ends with ``RESULT tried=… one_line=… tracebacks=… silent=…``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import sys
import tempfile
import traceback
import typing
from pathlib import Path

ACCEPTS_NEGATIVE = {"v_min", "seed_offset"}
"""Integer or float fields where -1 is a legitimate value (none of the ints today; kept for review)."""


def field_cases(schema: type, prefix: str, base: list[str]) -> list[list[str]]:
    """Wrong-type and out-of-range lines for every field of ``schema`` (``--cfg``: config only)."""
    hints = typing.get_type_hints(schema)
    out = []
    for f in dataclasses.fields(schema):
        if f.name == "name" or not f.init:
            continue
        tp, key = hints[f.name], f"{prefix}.{f.name}"
        origin = typing.get_origin(tp)
        args = typing.get_args(tp)
        if origin is typing.Union and type(None) in args:  # Optional[X]
            tp = next(a for a in args if a is not type(None))
            origin = typing.get_origin(tp)
        if tp is bool:
            out.append([*base, f"{key}=maybe"])
        elif tp is int:
            out += [[*base, f"{key}=abc"], [*base, f"{key}=1.5"]]
            if f.name not in ACCEPTS_NEGATIVE:
                out.append([*base, f"{key}=-1"])
        elif tp is float:
            out += [[*base, f"{key}=abc"], [*base, f"{key}=nan"]]
        elif origin in (list, typing.List):  # noqa: UP006
            out.append([*base, f"{key}=64"])
        elif tp is str and f.name in ("schedule", "activation", "std_type", "critic_aggregation", "online_critic",
                                      "ratio_mode", "cfm_target", "cfm_time", "backend"):
            out.append([*base, f"{key}=nonsense"])
    return [[*c, "--cfg"] for c in out]


def cases(tmp: Path) -> list[list[str]]:
    from ctrl_rl import config as c
    from ctrl_rl.algos.registry import learner

    out: list[list[str]] = []
    for algo in ("ppo", "sac", "pql", "bc"):
        out += field_cases(learner(algo).config, "algo", ["train", f"algo={algo}", "task=pendulum"])
    out += field_cases(c.EnvConfig, "env", ["train", "task=pendulum"])
    out += field_cases(c.RunnerConfig, "runner", ["train", "task=pendulum"])
    root = f"runner.log_root={tmp / 'logs'}"
    tiny = ["runner.max_iterations=1", "env.num_envs=4", "algo.num_steps_per_env=4", "algo.num_minibatches=1",
            "runner.progress=false", root]
    out += [
        ["train", "foo.bar=1", "--cfg"], ["train", "algo.nope=1", "--cfg"], ["train", "task=pendulumm", "--cfg"],
        ["train", "algo=nope", "--cfg"], ["train", "sim=nope", "--cfg"], ["train", "seed=-3", "--cfg"],
        ["train", "device=tpu", "--cfg"], ["train", "task=pendulum", "oops", "--cfg"],
        ["train", "task=pendulum", "--bogus"], ["train", "algo=bc", "task=pendulum", *tiny[:1], root],
        ["train", "task=pendulum", "env.num_envs=100000000000", *tiny[:1], root],
        ["train", "task=pendulum", "+task.kwargs.m=0", *tiny], ["train", "task=pendulum", "+task.kwargs.l=0", *tiny],
        ["train", "task=pendulum", "+task.kwargs.g=abc", *tiny],
        ["train", "task=pendulum", "+task.kwargs.physics_dtype=float16", *tiny],
        ["train", "task=pendulum", "+task.kwargs.nope=1", *tiny],
        ["train", "task=point_mass", "+task.kwargs.mass=-1", *tiny],
        ["train", "task=pendulum", "+task.kwargs.max_episode_length=0", *tiny],
        ["train", "task=pendulum", "--checkpoint", "", *tiny], ["train", "task=pendulum", "--checkpoint",
                                                                str(tmp / "missing.pt"), *tiny],
        ["train", "task=pendulum", "--checkpoint", "latest", root],
        ["train", "algo=bc", "task=pendulum", f"dataset={tmp / 'missing.hdf5'}", *tiny[:-2], root],
        ["eval", str(tmp / "missing")], ["eval", "latest", "--episodes", "0"], ["export", str(tmp / "missing.pt")],
        ["play", str(tmp / "missing.pt")], ["collect", "random", "--output", str(tmp / "x.hdf5")],
        ["collect", "random", "task=pendulum", "--output", str(tmp / "x.csv")],
        ["collect", "random", "task=pendulum", "--output", "/sys/ctrl_rl_denied/x.hdf5", "--steps", "2"],
        ["collect", str(tmp / "missing.pt"), "--output", str(tmp / "y.hdf5")],
        ["collect", "--level", "mixed", "--output", str(tmp / "z.hdf5")],
        ["train", "task=pendulum", "runner.log_root=/sys/ctrl_rl_denied", *tiny[:-2]],
    ]
    return out


def run(argv: list[str]) -> tuple[str, str]:
    """``(outcome, stderr)``: outcome is one_line, traceback, silent or multi_line."""
    from ctrl_rl.app.cli import main

    err = io.StringIO()
    code: object = 0
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            main(argv)
        except SystemExit as e:
            code = e.code
        except BaseException:  # noqa: BLE001 - anything else escaping main is a traceback to a user
            return "traceback", traceback.format_exc(limit=3)
    lines = [ln for ln in err.getvalue().splitlines() if ln.strip() and not ln.startswith(("WARNING", "INFO"))]
    if code in (0, None):
        return "silent", err.getvalue()[-300:]
    if len(lines) == 1 and lines[0].startswith("ctrl-rl: error:"):
        return "one_line", lines[0]
    return "multi_line", "\n".join(lines[-5:])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--show", action="store_true", help="print every line's outcome, not only the bad ones")
    args = ap.parse_args()
    counts = {"one_line": 0, "traceback": 0, "silent": 0, "multi_line": 0}
    with tempfile.TemporaryDirectory() as tmp:
        all_cases = cases(Path(tmp))
        print("| case | outcome |\n|---|---|")
        for argv in all_cases:
            outcome, text = run(argv)
            counts[outcome] += 1
            if outcome != "one_line" or args.show:
                print(f"| `{' '.join(argv)}` | {outcome}: {text.strip().splitlines()[-1] if text.strip() else ''} |",
                      flush=True)
    print(f"RESULT tried={len(all_cases)} one_line={counts['one_line']} tracebacks={counts['traceback']} "
          f"silent={counts['silent']} multi_line={counts['multi_line']}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
