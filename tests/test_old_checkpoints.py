"""Checkpoints written before the src layout (2026-11-26, commit aef9d5e: modules at their old
import paths, learners registered with runner classes) still evaluate, export and resume."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures" / "checkpoints_2026_11_26"


@pytest.mark.parametrize("algo", ["ppo", "sac"])
def test_an_old_checkpoint_evaluates_and_exports(algo, tmp_path):
    from ctrl_rl.app.evaluate import evaluate
    from ctrl_rl.app.export import export

    run = tmp_path / algo
    shutil.copytree(FIXTURES / algo, run)
    result = evaluate(str(run / "model_2.pt"), [], episodes=2, seed=0)
    assert result["episodes"] == 2 and result["mean_length"] == 200, result
    out = export(str(run / "model_2.pt"), [], output=str(tmp_path / f"{algo}.onnx"))
    assert Path(out).stat().st_size > 0


def test_an_old_checkpoint_resumes(tmp_path):
    import csv

    from ctrl_rl.app.train import train

    run = tmp_path / "logs" / "ppo" / "pendulum" / "old"
    shutil.copytree(FIXTURES / "ppo", run)
    out = train(["runner.max_iterations=3", "runner.progress=false"], checkpoint=str(run / "model_2.pt"))
    assert (out / "model_3.pt").is_file()
    with open(out / "metrics.csv") as f:
        assert [int(r["iteration"]) for r in csv.DictReader(f)][-1] == 3
