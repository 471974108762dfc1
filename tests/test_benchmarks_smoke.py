"""Smoke test of ``benchmarks/ppo_throughput.py``: tiny sizes, all three frameworks run."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "ppo_throughput.py"
MISSING = [m for m in ("rsl_rl", "stable_baselines3", "tensordict")
           if importlib.util.find_spec(m) is None]


@pytest.mark.skipif(bool(MISSING), reason="needs the bench extra (pip install -e '.[bench]'): "
                                          f"missing {', '.join(MISSING)}")
def test_ppo_throughput_runs_all_frameworks() -> None:
    # --threads 1: two OpenMP threads on a busy 2-core CI box make these tiny updates ~100x slower
    cmd = [sys.executable, str(SCRIPT), "--num-envs", "64", "--steps", "8", "--iterations", "1",
           "--hidden", "32", "32", "--threads", "1", "--timeout", "120"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.strip().splitlines()
    last = lines[-1]
    assert re.match(r"^RESULT ours_sps=\d", last), proc.stdout
    for key in ("rsl_rl_sps", "sb3_sps", "vs_rsl_rl", "vs_sb3"):
        assert re.search(rf"\b{key}=\d", last), f"{key} missing or nan:\n{proc.stdout}"
    assert "failed" not in proc.stdout, proc.stdout
    assert sum(line.startswith(("| ours ", "| rsl_rl ", "| sb3 ")) for line in lines) == 3
