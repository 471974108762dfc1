"""PQL: ratio controller, tear-free weight hand-off, shutdown, exact resume, export and learning.

Everything runs on 2 CPU cores; the concurrent paths use plain threads here (the CUDA stream
paths are exercised only on a GPU machine).
"""

from __future__ import annotations

import _thread
import csv
import logging
import threading
import time

import pytest
import torch
from torch import nn

from ctrl_rl.algos.pql import ROLES, StateBuffer, WeightBox
from ctrl_rl.app.configure import load_train_config
from ctrl_rl.app.evaluate import evaluate
from ctrl_rl.app.export import export
from ctrl_rl.app.session import build_env
from ctrl_rl.app.train import train
from ctrl_rl.runners.pql import PQLRunner, RatioController

log = logging.getLogger(__name__)

TINY = ["algo=pql", "task=pendulum", "env.num_envs=8", "algo.batch_size=32", "algo.learning_starts=64",
        "algo.buffer_size=4096", "algo.state_buffer_size=4096", "algo.actor_hidden=[16]",
        "algo.critic_hidden=[16]", "runner.progress=false"]


def pql_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("pql-")]


# ---------------------------------------------------------------- ratio controller
def test_sequential_schedule_interleaves_at_exact_ratios():
    counts = dict.fromkeys(ROLES, 0)
    ctrl = RatioController(8, 2, counts)
    assert ctrl.next_role() == "actor"  # warm-up: only the actor, nothing counted
    ctrl.begin("actor")
    ctrl.end("actor")
    assert counts == {"actor": 0, "critic": 0, "policy": 0}
    ctrl.start()
    order = []
    for _ in range(3 * 13):  # 3 cycles of 1 actor step + 8 critic + 4 policy updates
        role = ctrl.next_role()
        assert ctrl.begin(role)
        ctrl.end(role)
        order.append(role[0])
    # progress in critic updates: actor 8/step, policy 2/update; the least advanced goes, ties a < c < p
    assert "".join(order[:13]) == "acpccpccpccpc"
    assert counts == {"actor": 3, "critic": 24, "policy": 12}
    assert ctrl.measured() == {"beta_actor_critic": 8.0, "beta_policy_critic": 2.0}


@pytest.mark.parametrize("costs", [(0.0002, 0.001, 0.0001), (0.004, 0.0001, 0.0005), (0.0005, 0.0003, 0.002)])
def test_concurrent_roles_hold_the_configured_ratios(costs):
    """Roles of very different speeds in threads: the faster ones wait, the ratios hold."""
    counts = dict.fromkeys(ROLES, 0)
    ctrl = RatioController(8, 2, counts)
    ctrl.start()
    cost = dict(zip(ROLES, costs, strict=True))

    def role_loop(role: str, limit: int | None) -> None:
        n = 0
        while (limit is None or n < limit) and ctrl.begin(role):
            time.sleep(cost[role])
            ctrl.end(role)
            n += 1
        ctrl.stop()

    threads = [threading.Thread(target=role_loop, args=(r, 60 if r == "actor" else None)) for r in ROLES]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not any(t.is_alive() for t in threads)
    measured = ctrl.measured()
    log.info("costs %s: counts %s, measured %s, waited %s", costs, counts, measured, ctrl.waited)
    assert measured["beta_actor_critic"] == pytest.approx(8.0, rel=0.2)
    assert measured["beta_policy_critic"] == pytest.approx(2.0, rel=0.2)
    # never further apart than the slack (8 critic updates)
    assert abs(counts["actor"] * 8 - counts["critic"]) <= 8 and abs(counts["policy"] * 2 - counts["critic"]) <= 8


def _run_then_stop(threads: list[threading.Thread], seconds: float, stop, join_timeout: float) -> None:
    """Start ``threads``, let them run ``seconds``, call ``stop()``, join them."""
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop()
    for t in threads:
        t.join(timeout=join_timeout)


def test_stop_wakes_every_waiting_role():
    ctrl = RatioController(8, 2, dict.fromkeys(ROLES, 0))  # not started: the learners wait
    results: list[bool] = []
    threads = [threading.Thread(target=lambda r=r: results.append(ctrl.begin(r))) for r in ("critic", "policy")]
    _run_then_stop(threads, 0.05, ctrl.stop, join_timeout=5)
    assert results == [False, False]


# ---------------------------------------------------------------- weight hand-off
def test_weight_box_readers_never_see_a_torn_or_older_version():
    """A writer publishes versions 1, 2, ... (every element = the version) as fast as it can; each
    reader holds its lease a while and checks the copy is one version, unchanged, never older."""
    src = nn.Sequential(nn.Linear(256, 256), nn.Linear(256, 256))
    with torch.no_grad():
        for p in src.parameters():
            p.zero_()  # version 0
    box = WeightBox(src, torch.device("cpu"))
    stop = threading.Event()
    failures: list[str] = []
    reads = [0, 0]

    def writer() -> None:
        v = 0
        while not stop.is_set():
            v += 1
            with torch.no_grad():
                for p in src.parameters():
                    p.fill_(v)  # a real learner's step, element by element
            box.publish(src)

    def reader(i: int) -> None:
        last = -1.0
        while not stop.is_set():
            with box.read() as net:
                values = torch.cat([p.flatten() for p in net.parameters()])
                lo, hi = float(values.min()), float(values.max())
                time.sleep(0.0005)  # hold the lease while the writer keeps publishing
                again = torch.cat([p.flatten() for p in net.parameters()])
            if lo != hi:
                failures.append(f"torn read: versions {lo}..{hi}")
            if not torch.equal(values, again):
                failures.append("slot written while leased")
            if lo < last:
                failures.append(f"went back from version {last} to {lo}")
            last = lo
            reads[i] += 1

    threads = [threading.Thread(target=writer)] + [threading.Thread(target=reader, args=(i,)) for i in range(2)]
    _run_then_stop(threads, 1.5, stop.set, join_timeout=10)
    assert not failures, failures[:5]
    assert box.version > 50 and min(reads) > 50, (box.version, reads)
    assert box.num_slots <= 2 + 2  # two readers: at most readers + 2 slots


def test_weight_box_copies_buffers_and_isolates_the_writer():
    src = nn.BatchNorm1d(3)
    box = WeightBox(src, torch.device("cpu"))
    with torch.no_grad():
        src.running_mean.fill_(2.0)
    with box.read() as copy:
        assert float(copy.running_mean[0]) == 0.0  # not published yet
    box.publish(src)
    with box.read() as copy:
        assert float(copy.running_mean[0]) == 2.0
        assert not any(p.requires_grad for p in copy.parameters())


def test_state_buffer_ring_wraps_and_samples_written_rows_only():
    buf = StateBuffer(10, 4, 2, 2, torch.device("cpu"), share_critic_obs=False)
    assert buf.capacity == 8  # whole env steps only
    for step in range(3):  # the third step overwrites the first
        buf.add(torch.full((4, 2), float(step)), torch.full((4, 2), 10.0 + step))
    assert len(buf) == 8 and buf.ptr == 4
    g = torch.Generator().manual_seed(0)
    actor_obs, critic_obs = buf.sample(256, g)
    assert set(actor_obs[:, 0].tolist()) == {1.0, 2.0}
    assert torch.equal(critic_obs - 10.0, actor_obs)  # rows stay paired


# ---------------------------------------------------------------- runner
def test_concurrent_run_logs_ratios_and_checkpoints(tmp_path):
    run = train(TINY + ["runner.max_iterations=60", "runner.save_interval=30", f"runner.log_root={tmp_path}"])
    assert (run / "model_30.pt").exists() and (run / "model_60.pt").exists()
    with open(run / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    last = rows[-1]
    log.info("measured ratios: beta_actor_critic=%s beta_policy_critic=%s", last["beta_actor_critic"],
             last["beta_policy_critic"])
    assert float(last["beta_actor_critic"]) == pytest.approx(8.0, rel=0.2)
    assert float(last["beta_policy_critic"]) == pytest.approx(2.0, rel=0.2)
    # an iteration in which a learner happened not to finish an update logs no loss for it
    assert any(r["critic"] for r in rows[-5:]) and any(r["actor"] for r in rows[-5:])
    assert not pql_threads()
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run)).Reload()
    assert {"Perf/beta_actor_critic", "Perf/beta_policy_critic", "Loss/critic", "Loss/actor"} <= set(
        events.Tags()["scalars"])


def _runner(tmp_path, extra: list[str]) -> PQLRunner:
    cfg = load_train_config(TINY + extra)
    return PQLRunner(build_env(cfg), cfg, tmp_path)


def test_exception_in_a_role_stops_every_thread_and_writes_a_checkpoint(tmp_path):
    runner = _runner(tmp_path, ["runner.max_iterations=100000", "runner.save_interval=100000"])
    update = runner.alg.update_critic
    calls = [0]

    def failing_update() -> None:
        calls[0] += 1
        if calls[0] == 40:
            raise RuntimeError("injected V-learner failure")
        update()

    runner.alg.update_critic = failing_update
    t0 = time.perf_counter()
    with pytest.raises(RuntimeError, match="injected V-learner failure"):
        runner.learn()
    assert time.perf_counter() - t0 < 30
    assert not pql_threads(), "a role thread is still running"
    saved = list(tmp_path.glob("model_*.pt"))
    assert len(saved) == 1
    state = torch.load(saved[0], weights_only=False)
    assert state["iteration"] == runner.iteration > 0 and state["algo"]["counts"]["critic"] == 39


def test_keyboard_interrupt_stops_every_thread_and_writes_a_checkpoint(tmp_path):
    runner = _runner(tmp_path, ["runner.max_iterations=100000", "runner.save_interval=100000"])
    timer = threading.Timer(3.0, _thread.interrupt_main)  # Ctrl-C arrives in the main thread
    timer.start()
    t0 = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        runner.learn()
    timer.join()
    assert time.perf_counter() - t0 < 30
    assert not pql_threads()
    assert list(tmp_path.glob("model_*.pt"))


def test_sequential_resume_is_exact(tmp_path):
    seq = TINY + ["algo.concurrent=false", "runner.save_interval=12"]
    straight = train(seq + ["runner.max_iterations=24", f"runner.log_root={tmp_path / 'a'}"])
    first = train(seq + ["runner.max_iterations=12", f"runner.log_root={tmp_path / 'b'}"])
    resumed = train(["runner.max_iterations=24", f"runner.log_root={tmp_path / 'b'}"], checkpoint=str(first))
    assert resumed == first
    a = torch.load(straight / "model_24.pt", weights_only=False)["algo"]
    b = torch.load(resumed / "model_24.pt", weights_only=False)["algo"]
    assert a["counts"] == b["counts"] and a["counts"]["critic"] > 0
    for k in a["model"]:
        assert torch.equal(a["model"][k], b["model"][k]), f"{k} differs after resume"
    replay_a = torch.load(straight / "replay_24.pt", weights_only=False)["replay"]
    replay_b = torch.load(resumed / "replay_24.pt", weights_only=False)["replay"]
    for k in ("actor_obs", "actions", "rewards"):
        assert torch.equal(replay_a["buffer"][k], replay_b["buffer"][k]), k
    assert torch.equal(replay_a["states"]["actor_obs"], replay_b["states"]["actor_obs"])


def test_distributional_critic_trains(tmp_path):
    run = train(TINY + ["algo.concurrent=false", "algo.distributional=true", "algo.v_min=-100", "algo.v_max=0",
                        "runner.max_iterations=12", f"runner.log_root={tmp_path}"])
    with open(run / "metrics.csv") as f:
        last = list(csv.DictReader(f))[-1]
    assert -100.0 <= float(last["q_mean"]) <= 0.0 and float(last["critic"]) > 0.0  # a cross-entropy, on the support


def test_eval_and_export_run_the_deterministic_actor(tmp_path):
    run = train(TINY + ["runner.max_iterations=30", f"runner.log_root={tmp_path}"])
    result = evaluate(str(run), [], episodes=4, seed=3)
    assert result["mean_length"] == 200.0
    path = export(str(run), [])
    assert path.exists()  # export refuses to write unless onnxruntime matches torch within 1e-5


def test_config_validation_names_the_key():
    from ctrl_rl.config import ConfigError

    with pytest.raises(ConfigError, match="algo.noise_std_min"):
        load_train_config(["algo=pql", "algo.noise_std_min=0.9", "algo.noise_std_max=0.1"])
    with pytest.raises(ConfigError, match="algo.state_buffer_size"):
        load_train_config(["algo=pql", "env.num_envs=64", "algo.state_buffer_size=10"])


# ---------------------------------------------------------------- learning (2 CPU cores)
def train_and_evaluate(task: str, tmp_path, max_env_steps: int, seed: int) -> dict[str, float]:
    """Train ``task`` with its tuned config (checked to fit ``max_env_steps``), then evaluate."""
    overrides = ["algo=pql", f"task={task}", f"runner.log_root={tmp_path}", "runner.progress=false", f"seed={seed}"]
    cfg = load_train_config(overrides)
    assert cfg.env.num_envs * cfg.algo.num_steps_per_env * cfg.runner.max_iterations <= max_env_steps
    t0 = time.perf_counter()
    run = train(overrides)
    result = evaluate(str(run), [], episodes=100, seed=2024)
    with open(run / "metrics.csv") as f:
        last = list(csv.DictReader(f))[-1]
    log.info("PQL %s seed %d: %s in %.0f s; measured beta_actor_critic=%s beta_policy_critic=%s", task, seed,
             result, time.perf_counter() - t0, last["beta_actor_critic"], last["beta_policy_critic"])
    return result


@pytest.mark.slow
def test_pql_pendulum_swingup_reaches_minus_200_within_300k_steps(tmp_path):
    result = train_and_evaluate("pendulum", tmp_path, 300_000, seed=42)
    assert result["mean_return"] >= -200.0, result


@pytest.mark.slow
def test_pql_cartpole_balance_reaches_max_return(tmp_path):
    result = train_and_evaluate("cartpole_balance", tmp_path, 300_000, seed=42)
    assert result["min_return"] == pytest.approx(500.0), result  # every episode survives 500 steps
