"""``profile=true``: each iteration's time split by stage, in metrics, TensorBoard and a final table."""

from __future__ import annotations

import dataclasses
import time

import pytest

from ctrl_rl.app.configure import load_train_config
from ctrl_rl.app.session import build_env
from ctrl_rl.runners import make_runner
from ctrl_rl.utils.profiling import STAGES, StageTimer


def test_stage_timer_splits_wall_time_and_is_free_when_off():
    off = StageTimer("cpu", enabled=False)
    with off.stage("sim"):
        time.sleep(0.01)
    assert off.end_iteration()["sim"] == 0.0
    timer = StageTimer("cpu", enabled=True)
    t0 = time.perf_counter()
    with timer.stage("sim"):
        time.sleep(0.03)
    with timer.stage("update"):
        time.sleep(0.02)
    time.sleep(0.01)  # outside every stage: "other"
    split = timer.end_iteration()
    wall = time.perf_counter() - t0
    assert split["sim"] == pytest.approx(0.03, abs=0.01) and split["update"] == pytest.approx(0.02, abs=0.01)
    assert split["other"] >= 0.009 and sum(split.values()) == pytest.approx(wall, abs=0.005)
    assert "| sim |" in timer.table() and "1 iteration(s)" in timer.table()


@pytest.mark.parametrize("algo", ["ppo", "sac"])
def test_profiled_run_logs_every_stage(tmp_path, capsys, algo):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    cfg = load_train_config([f"algo={algo}", "task=pendulum", "env.num_envs=16", "runner.progress=false"])
    cfg = dataclasses.replace(cfg, profile=True)
    runner = make_runner(build_env(cfg), cfg, log_dir=tmp_path)
    history = runner.learn(3)
    for row in history:
        assert {f"time_{k}" for k in STAGES} <= row.keys()
        assert row["time_sim"] > 0 and row["time_inference"] > 0 and row["time_storage"] > 0
        assert row["time_update"] > 0 and row["time_logging"] > 0
        # the stages add up to the iteration: collection + update as the runner measures them
        assert row["time_sim"] + row["time_inference"] + row["time_storage"] <= row["collection_time"] * 1.05
    out = capsys.readouterr().out
    assert "profile over 3 iteration(s)" in out and "| update |" in out
    tags = EventAccumulator(str(tmp_path)).Reload().Tags()["scalars"]
    assert {f"Perf/time_{k}" for k in STAGES} <= set(tags)


def test_profile_refuses_pql_by_name():
    from ctrl_rl.config import ConfigError

    cfg = dataclasses.replace(load_train_config(["algo=pql", "task=pendulum", "env.num_envs=16"]), profile=True)
    with pytest.raises(ConfigError, match="Drop profile=true for algo=pql"):
        make_runner(build_env(cfg), cfg)
