"""The train path is linear (issue 50, part 6): parse -> compose the config -> build the env -> build the
learner and its runner -> run, each step in one place.

Measured by following the overrides from ``cli.cmd_train``: every call into ``ctrl_rl`` that is
passed them (the override list, or the ``TrainConfig`` composed from it; a method of the config
itself, called on it, is not a call that passes it on) is a stop; a stop in a file the path has
already left is a return. 18 returns on the issue's commit (its own count); by this count 7 for a
new run and 11 for a resume before part 6, 4 and 8 after.
"""

from __future__ import annotations

import argparse
import sys
from types import FrameType
from typing import Any

import pytest

from ctrl_rl.app import cli

MAX_RETURNS = 8
MARK = "runner.run_name=path_probe"


def _holds(value: Any, depth: int = 0) -> bool:
    """Whether an argument is the overrides (or a list holding them) or the config composed from them."""
    if isinstance(value, str):
        return value == MARK
    if isinstance(value, list | tuple) and depth < 2:
        return any(_holds(v, depth + 1) for v in value)
    runner = getattr(value, "runner", None)
    return type(value).__name__ == "TrainConfig" and getattr(runner, "run_name", None) == "path_probe"


def follow_overrides(args: argparse.Namespace, overrides: list[str]) -> list[str]:
    """The files (relative to ``ctrl_rl/``) of each stop of ``cmd_train(args, overrides)``, in call order."""
    stops: list[str] = []

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        code = frame.f_code
        if event != "call" or "/ctrl_rl/" not in code.co_filename:
            return
        n = code.co_argcount + code.co_kwonlyargcount + bool(code.co_flags & 4) + bool(code.co_flags & 8)
        if any(_holds(frame.f_locals.get(name)) for name in code.co_varnames[:n] if name != "self"):
            stops.append(code.co_filename.split("/ctrl_rl/", 1)[1])

    sys.setprofile(profile)
    try:
        cli.cmd_train(args, overrides)
    finally:
        sys.setprofile(None)
    return stops


def returns_to_a_file_left(stops: list[str]) -> list[str]:
    """The stops in a file the path had already left (consecutive stops in one file are one visit)."""
    visits = [f for i, f in enumerate(stops) if i == 0 or stops[i - 1] != f]
    return [f for i, f in enumerate(visits) if f in visits[:i]]


def test_the_counter_sees_a_bounce():
    assert returns_to_a_file_left(["a.py", "a.py", "b.py", "a.py", "c.py", "b.py"]) == ["a.py", "b.py"]


@pytest.mark.parametrize("resume", [False, True], ids=["new run", "resume"])
def test_following_the_overrides_of_train_returns_to_a_file_at_most_8_times(tmp_path, monkeypatch, resume):
    monkeypatch.chdir(tmp_path)
    base = ["task=pendulum", "env.num_envs=4", MARK]
    new = argparse.Namespace(checkpoint=None, cfg=False, more=None)
    stops = follow_overrides(new, [*base, "runner.max_iterations=1"])
    if resume:
        stops = follow_overrides(argparse.Namespace(checkpoint="latest", cfg=False, more=1), base)
    assert stops[:2] == ["app/cli.py", "app/train.py"], stops
    back = returns_to_a_file_left(stops)
    assert len(back) <= MAX_RETURNS, f"{len(back)} returns to {back} along {stops}"
