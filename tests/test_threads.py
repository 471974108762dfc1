"""The process's CPU thread plan (``utils/threads.py``) and the honest ETA (``utils/logger.py``)."""

from __future__ import annotations

import pytest
import torch

from ctrl_rl.utils import threads
from ctrl_rl.utils.logger import eta_seconds


@pytest.fixture
def restore_threads():
    before, plan = torch.get_num_threads(), threads._PLAN
    yield
    torch.set_num_threads(before)
    threads._PLAN = plan


def test_the_plan_gives_torch_one_thread_and_mujoco_every_core_unless_asked(monkeypatch):
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    assert threads.plan_threads(cores=8) == threads.ThreadPlan(cores=8, torch_threads=1, physics_threads=8)
    assert threads.plan_threads(3, cores=8) == threads.ThreadPlan(8, 3, 3, requested=3)
    assert threads.plan_threads(cores=8).describe() == "1 torch, 8 physics of 8 cores (auto; threads=N to change)"
    assert threads.plan_threads(cores=8, processes=2).physics_threads == 4  # torchrun: the cores are shared
    assert threads.plan_threads(cores=2, processes=4).physics_threads == 1
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ValueError, match="threads: must be a positive integer or null"):
            threads.plan_threads(bad, cores=2)  # type: ignore[arg-type]


def test_configure_applies_torch_threads_and_mujoco_reads_the_plan(restore_threads):
    import mujoco

    from ctrl_rl.sims.mujoco_cpu import CpuPhysics

    model = mujoco.MjModel.from_xml_string("<mujoco><worldbody><body><freejoint/><geom size='.1'/></body>"
                                           "</worldbody></mujoco>")
    threads.configure(None)
    assert torch.get_num_threads() == 1
    assert CpuPhysics(model, 4).nthread == threads.available_cores()
    threads.configure(2)
    assert torch.get_num_threads() == 2 and CpuPhysics(model, 4).nthread == 2


def test_threads_key_is_checked_and_printed_in_the_run_header(tmp_path, capsys, restore_threads):
    from ctrl_rl.app.configure import load_train_config
    from ctrl_rl.app.train import train
    from ctrl_rl.config import ConfigError

    with pytest.raises(ConfigError, match="threads: must be a positive integer or null, got 0"):
        load_train_config(["threads=0"])
    train(["task=pendulum", "env.num_envs=8", "algo.num_steps_per_env=8", "runner.max_iterations=1",
           "runner.progress=false", f"runner.log_root={tmp_path}", "threads=1"])
    assert "threads: 1 torch, 1 physics of" in capsys.readouterr().out
    assert torch.get_num_threads() == 1


def test_the_update_runs_on_its_own_threads_and_gives_them_back(restore_threads):
    from ctrl_rl.app.configure import load_train_config
    from ctrl_rl.config import ConfigError

    threads.configure(None, update=2)
    assert threads.current().describe().endswith("2 torch in the update (auto; threads=N to change)")
    assert torch.get_num_threads() == 1
    with threads.for_update():
        assert torch.get_num_threads() == 2
    assert torch.get_num_threads() == 1
    threads.configure(None)
    with threads.for_update():
        assert torch.get_num_threads() == 1
    with pytest.raises(ConfigError, match="update_threads: must be a positive integer or null, got 0"):
        load_train_config(["update_threads=0"])
    assert load_train_config(["update_threads=2"]).update_threads == 2


def test_eta_uses_the_median_of_recent_iterations_without_the_warm_up():
    assert eta_seconds([], 10) is None
    assert eta_seconds([30.0], 10) == 300.0  # nothing else known yet
    assert eta_seconds([30.0, 1.0], 10) == 10.0  # the warm-up iteration is left out
    assert eta_seconds([30.0, 1.0, 5.0, 1.0], 4) == 4.0  # the median ignores the odd slow one
    assert eta_seconds([30.0, 1.0, 2.0], 3) == 4.5  # an even count: the middle two's mean
    assert eta_seconds([9.0] + [1.0] * 10 + [2.0] * 10, 1, window=10) == 2.0  # only the recent window
    assert eta_seconds([1.0, 1.0], 0) == 0.0
