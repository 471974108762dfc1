"""Training survives what users do to it: torn files, kills at every write point, Ctrl-C and SIGTERM,
divergence, wrong runs, bad input and full disks. Each case checks the exit code, a one-line message
naming the file or key, and that no good file changed."""

from __future__ import annotations

import hashlib
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from ctrl_rl.app.train import train
from ctrl_rl.utils.checkpoint_files import is_intact
from ctrl_rl.utils.guards import NonFiniteError

HERE = Path(__file__).parent
PPO = ["task=pendulum", "env.num_envs=16", "algo.num_steps_per_env=8", "algo.actor_hidden=[16]",
       "algo.critic_hidden=[16]", "algo.num_minibatches=2", "runner.progress=false"]
SAC = ["algo=sac", "task=pendulum", "env.num_envs=8", "algo.learning_starts=16", "algo.batch_size=32",
       "algo.num_updates=2", "algo.actor_hidden=[16]", "algo.critic_hidden=[16]", "algo.buffer_size=4096",
       "runner.progress=false"]
PQL = ["algo=pql", "task=pendulum", "env.num_envs=8", "algo.batch_size=32", "algo.learning_starts=64",
       "algo.buffer_size=4096", "algo.state_buffer_size=4096", "algo.actor_hidden=[16]", "algo.critic_hidden=[16]",
       "algo.concurrent=false", "runner.progress=false"]


def cli(*args: str, env: dict | None = None, timeout: float = 300, **popen) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ctrl_rl", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})}, **popen)


def one_line(proc: subprocess.CompletedProcess, pattern: str, code: int = 2) -> str:
    """The run failed with ``code`` and exactly one stderr line (logging aside) matching ``pattern``."""
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip() and not ln.startswith(("INFO", "WARNING", "W1"))]
    assert proc.returncode == code, (proc.returncode, proc.stderr[-3000:])
    assert "Traceback" not in proc.stderr and len(lines) == 1, proc.stderr[-3000:]
    assert re.search(pattern, lines[0]), lines[0]
    return lines[0]


def digest(d: Path) -> dict[str, str]:
    """Content hash of every checkpoint-like file (to show nothing good was changed)."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(d.glob("*.pt"))}


@pytest.fixture(scope="module")
def ppo_run(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("ppo")
    return train(PPO + ["runner.max_iterations=2", "runner.save_interval=1", f"runner.log_root={root}"])


def torn_copy(run: Path, dst: Path, kind: str, name: str = "model_2.pt") -> Path:
    shutil.copytree(run, dst)
    f = dst / name
    data = f.read_bytes()
    f.write_bytes({"truncated": data[: len(data) // 2], "empty": b"",
                   "random": np.random.default_rng(0).bytes(len(data))}[kind])
    return f


# -- 1. torn checkpoints ----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["truncated", "empty", "random"])
def test_a_torn_checkpoint_is_one_line_naming_it(ppo_run, tmp_path, kind):
    bad = torn_copy(ppo_run, tmp_path / "run", kind)
    before = digest(bad.parent)
    line = one_line(cli("eval", str(bad), "--episodes", "2"), rf"checkpoint {re.escape(str(bad))} \(\d+ bytes\) "
                                                                r"cannot be read .*model_1\.pt")
    assert "use an earlier checkpoint" in line
    assert digest(bad.parent) == before


@pytest.mark.slow
@pytest.mark.parametrize("command", ["export", "play", "collect", "resume", "residual"])
def test_every_command_names_a_torn_checkpoint(ppo_run, tmp_path, command):
    bad = torn_copy(ppo_run, tmp_path / "run", "truncated")
    args = {"export": ["export", str(bad)], "play": ["play", str(bad), "--episodes", "1"],
            "collect": ["collect", str(bad), "--output", str(tmp_path / "d.hdf5"), "--steps", "2"],
            "resume": ["train", "--checkpoint", str(bad)],
            "residual": ["train", "algo=residual", f"algo.base={bad}", "task=pendulum", "--cfg"]}[command]
    if command == "residual":
        args = args[:-1] + ["runner.max_iterations=1", f"runner.log_root={tmp_path / 'logs'}"]
    one_line(cli(*args), rf"{re.escape(str(bad))} \(\d+ bytes\) cannot be read")


def test_latest_skips_a_torn_newest_checkpoint_with_a_warning(ppo_run, tmp_path):
    bad = torn_copy(ppo_run, tmp_path / "run", "truncated")
    proc = cli("eval", str(bad.parent), "--episodes", "2")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"skipping {bad}" in proc.stderr and "model_1.pt" in proc.stdout


@pytest.mark.slow
def test_a_torn_replay_is_one_line_naming_it(tmp_path):
    run = train(SAC + ["runner.max_iterations=2", "runner.save_interval=1", f"runner.log_root={tmp_path}"])
    replay = run / "replay_2.pt"
    replay.write_bytes(replay.read_bytes()[:100])
    one_line(cli("train", "--checkpoint", str(run), "runner.max_iterations=3"),
             rf"replay buffer {re.escape(str(replay))} \(100 bytes\) cannot be read")


# -- 2. a kill at every write point resumes exactly -------------------------------------------------

POINTS = {"ppo": ["model:written", "model:renamed"],
          "sac": ["replay:written", "replay:renamed", "model:written", "model:renamed"],
          "pql": ["replay:written", "replay:renamed", "model:written", "model:renamed"]}
CONFIGS = {"ppo": PPO, "sac": SAC, "pql": PQL}
TOTAL = 4


@pytest.fixture(scope="module")
def straight_runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("straight")
    return {algo: train(cfg + [f"runner.max_iterations={TOTAL}", "runner.save_interval=1", f"runner.log_root={root}"])
            for algo, cfg in CONFIGS.items()}


@pytest.mark.slow
@pytest.mark.parametrize("algo, point", [(a, p) for a, ps in POINTS.items() for p in ps])
def test_kill_at_every_write_point_then_resume_is_exact(straight_runs, tmp_path, algo, point):
    """SIGKILL (fault injection in the writer) during the 2nd checkpoint, resume, compare with a run
    that was never interrupted: parameters equal to the bit, no temp file left, files 0644."""
    root = tmp_path / "logs"
    proc = cli("train", *CONFIGS[algo], f"runner.max_iterations={TOTAL}", "runner.save_interval=1",
               f"runner.log_root={root}", env={"CTRL_RL_FAULT_POINT": f"{point}@2"})
    assert proc.returncode == -signal.SIGKILL, (proc.returncode, proc.stderr[-2000:])
    run = next(root.glob(f"{algo}/pendulum/*"))
    resumed = train([f"runner.max_iterations={TOTAL}", f"runner.log_root={root}"], checkpoint=str(run))
    assert resumed == run
    a = torch.load(straight_runs[algo] / f"model_{TOTAL}.pt", weights_only=False)["algo"]["model"]
    b = torch.load(run / f"model_{TOTAL}.pt", weights_only=False)["algo"]["model"]
    diff = max(float((a[k].double() - b[k].double()).abs().max()) for k in a)
    assert diff == 0.0, f"max parameter difference {diff} after a kill at {point}"
    assert not list(run.glob(".*.tmp")), "temp files of the interrupted write were left"
    replays = sorted(p.name for p in run.glob("replay*.pt"))
    assert replays == ([] if algo == "ppo" else [f"replay_{TOTAL}.pt"])
    mask = os.umask(0)
    os.umask(mask)
    assert {oct(p.stat().st_mode & 0o777) for p in run.glob("*.pt")} == {oct(0o666 & ~mask)}


# -- 3. Ctrl-C and SIGTERM --------------------------------------------------------------------------


def start_training(args: list[str], root: Path) -> tuple[subprocess.Popen, Path]:
    proc = subprocess.Popen([sys.executable, "-m", "ctrl_rl", "train", *args, "runner.max_iterations=100000",
                             "runner.save_interval=100000", f"runner.log_root={root}"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while not list(root.glob("*/*/*/events.out.tfevents.*")):
        assert proc.poll() is None and time.time() < deadline, proc.stderr.read() if proc.poll() is not None else ""
        time.sleep(0.05)
    time.sleep(2.0)  # some iterations in
    return proc, next(root.glob("*/*/*"))


@pytest.mark.slow
@pytest.mark.parametrize("algo, sig, code", [("ppo", signal.SIGTERM, 143), ("ppo", signal.SIGINT, 130),
                                             ("sac", signal.SIGINT, 130), ("sac", signal.SIGTERM, 143)])
def test_a_signal_finishes_the_iteration_and_saves(tmp_path, algo, sig, code):
    import csv

    proc, run = start_training(CONFIGS[algo], tmp_path)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == code, err[-2000:]
    saved = sorted(run.glob("model_*.pt"), key=lambda p: int(p.stem.split("_")[1]))
    assert saved and is_intact(saved[-1]), err[-2000:]
    k = int(saved[-1].stem.split("_")[1])
    assert f"stopped after iteration {k}; checkpoint {saved[-1]}" in err and f"--checkpoint {run}" in err
    with open(run / "metrics.csv") as f:
        assert int(list(csv.DictReader(f))[-1]["iteration"]) == k  # no rows past the checkpoint
    resumed = train([f"runner.max_iterations={k + 2}", f"runner.log_root={tmp_path}"], checkpoint=str(run))
    assert (resumed / f"model_{k + 2}.pt").is_file()


@pytest.mark.slow
def test_a_second_signal_exits_at_once(tmp_path):
    proc, _ = start_training(PPO + ["env.num_envs=512"], tmp_path)
    proc.send_signal(signal.SIGINT)
    proc.send_signal(signal.SIGINT)
    t0 = time.monotonic()
    proc.communicate(timeout=60)
    assert proc.returncode == 130 and time.monotonic() - t0 < 10


@pytest.mark.slow
def test_pql_concurrent_stops_every_role_and_saves_on_sigterm(tmp_path):
    proc, run = start_training([a for a in PQL if a != "algo.concurrent=false"] + ["algo.concurrent=true"], tmp_path)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err[-2000:]
    assert list(run.glob("model_*.pt")) and "stopped after iteration" in err


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_a_test_suite_in_the_middle_of_in_process_training(tmp_path, sig):
    """``scripts/test.sh`` execs pytest; Ctrl-C or SIGTERM there stops the suite within seconds, even
    while a test trains in-process (training's graceful stop is for the training command, not for pytest)."""
    (tmp_path / "test_long.py").write_text(
        "from ctrl_rl.app.train import train\n\n"
        "def test_trains_for_long(tmp_path):\n"
        "    train(['task=pendulum', 'env.num_envs=64', 'runner.max_iterations=100000', 'runner.progress=false',\n"
        "           f'runner.log_root={tmp_path}'])\n\n"
        "def test_after():\n"
        "    pass\n")
    # as from a terminal: an xdist worker ignores SIGINT, and an ignored signal stays ignored across exec
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--basetemp",
                             str(tmp_path / "t"), str(tmp_path / "test_long.py")],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.time() + 120
        while not list((tmp_path / "t").glob("*/ppo/pendulum/*/events.out.tfevents.*")):
            assert proc.poll() is None and time.time() < deadline, proc.stdout.read() if proc.poll() is not None else ""
            time.sleep(0.05)
        time.sleep(1.0)
        proc.send_signal(sig)
        t0 = time.monotonic()
        out, _ = proc.communicate(timeout=60)
        assert time.monotonic() - t0 < 5, out[-2000:]
        assert proc.returncode != 0 and "1 passed" not in out, out[-2000:]  # test_after never ran
    finally:
        proc.kill()  # never left training when the test fails


# -- 4. divergence is caught in the iteration it appears -------------------------------------------


def poison_env(monkeypatch, what: str, at_step: int) -> None:
    """The env returns NaN in observations or rewards of env 3 from step ``at_step`` on."""
    import ctrl_rl.app.train as commands

    real = commands.build_env

    def build(cfg, *a, **kw):
        env = real(cfg, *a, **kw)
        step, count = env.step, [0]

        def bad_step(actions):
            obs, rew, term, trunc, info = step(actions)
            count[0] += 1
            if count[0] >= at_step:
                if what == "observations":
                    obs = {k: v.clone() for k, v in obs.items()}
                    obs["policy"][3, 0] = float("nan")
                else:
                    rew = rew.clone()
                    rew[3] = float("inf")
            return obs, rew, term, trunc, info

        env.step = bad_step
        return env

    monkeypatch.setattr(commands, "build_env", build)


def poison_params(monkeypatch, at_iteration: int, runner: type | None = None) -> None:
    """A parameter becomes NaN in the update of ``at_iteration`` (as at a learning rate of 1e4)."""
    from ctrl_rl.runners.base import Runner

    runner = runner or Runner
    real = runner.iterate

    def iterate(self, *a, **kw):
        real(self, *a, **kw)
        if self.iteration == at_iteration:
            with torch.no_grad():
                next(self.alg.model.parameters()).view(-1)[0] = float("nan")

    monkeypatch.setattr(runner, "iterate", iterate)


@pytest.mark.parametrize("algo", ["ppo", "sac"])
@pytest.mark.parametrize("what", ["observations", "rewards", "parameters"])
def test_a_non_finite_value_stops_the_run_in_its_iteration_and_no_checkpoint_holds_it(
        monkeypatch, tmp_path, algo, what):
    cfg = CONFIGS[algo]
    steps = 8 if algo == "ppo" else 1  # env steps per iteration
    if what == "parameters":
        poison_params(monkeypatch, 3)
    else:
        poison_env(monkeypatch, what, 2 * steps + 1)  # the first step of iteration 3
    with pytest.raises(NonFiniteError) as e:
        train(cfg + ["runner.max_iterations=6", "runner.save_interval=1", f"runner.log_root={tmp_path}"])
    msg = str(e.value)
    assert "iteration 3" in msg, msg
    assert {"observations": "observation group 'policy'", "rewards": "its reward",
            "parameters": "model."}[what] in msg
    if what != "parameters":
        assert "envs [3]" in msg
    run = next(tmp_path.glob(f"{algo}/pendulum/*"))
    assert sorted(p.name for p in run.glob("model_*.pt")) == ["model_1.pt", "model_2.pt"]
    state = torch.load(run / "model_2.pt", weights_only=False)
    assert all(torch.isfinite(t).all() for t in state["algo"]["model"].values())
    monkeypatch.undo()
    resumed = train(["runner.max_iterations=3", f"runner.log_root={tmp_path}"], checkpoint=str(run))
    assert (resumed / "model_3.pt").is_file()


def test_offline_learner_stops_on_non_finite_parameters(monkeypatch, tmp_path):
    from ctrl_rl.runners.episodes import collect_dataset, random_policy
    from ctrl_rl.sims import make_env

    env = make_env("torch", "pendulum", 4, "cpu", seed=0)
    from ctrl_rl.runners.offline import OfflineRunner

    data = collect_dataset(env, random_policy(env, 0), 50, seed=0).save_hdf5(tmp_path / "d.hdf5")
    poison_params(monkeypatch, 2, OfflineRunner)
    with pytest.raises(NonFiniteError, match="iteration 2"):
        train(["algo=bc", "task=pendulum", f"dataset={data}", "algo.num_passes=0", "runner.max_iterations=4",
               "runner.save_interval=1",
               "env.num_envs=4", "runner.progress=false", f"runner.log_root={tmp_path}"])
    assert [p.name for p in tmp_path.glob("bc/pendulum/*/model_*.pt")] == ["model_1.pt"]


def test_a_loss_explosion_is_reported():
    from ctrl_rl.utils.logger import LossWatch

    watch = LossWatch()
    for it in range(1, 6):
        assert watch.check(it, {"value": 0.5 + 0.01 * it, "learning_rate": 3e-4}) == []
    warned = watch.check(6, {"value": 3.2e12})
    assert len(warned) == 1 and "Loss/value exploded at iteration 6: 3.2e+12" in warned[0]
    assert watch.check(7, {"value": 4e12}) == []  # once per onset
    assert watch.check(8, {"value": 0.6}) == []


# -- 5. resume takes the run the user means ---------------------------------------------------------


def test_latest_refuses_when_the_newest_run_has_no_checkpoint(ppo_run, tmp_path):
    root = tmp_path / "logs"
    old = root / "ppo/pendulum/2026-01-01_00-00-00"
    shutil.copytree(ppo_run, old)
    (root / "ppo/pendulum/2026-01-02_00-00-00/params").mkdir(parents=True)  # killed before its first one
    before = digest(old)
    one_line(cli("train", "task=pendulum", f"runner.log_root={root}", "--checkpoint", "latest"),
             rf"the newest run .*2026-01-02_00-00-00 has no readable checkpoint .*--checkpoint {re.escape(str(old))}")
    one_line(cli("train", "task=pendulum", f"runner.log_root={root}", "--checkpoint", ""), r"--checkpoint is empty")
    assert digest(old) == before


# -- 6-8. input checks and datasets ------------------------------------------------------------------


@pytest.mark.slow
def test_generated_bad_command_lines_each_get_one_line():
    proc = subprocess.run([sys.executable, str(HERE / "cli_fuzz.py")], capture_output=True, text=True, timeout=1200)
    result = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT")]
    assert proc.returncode == 0 and result, proc.stdout[-3000:] + proc.stderr[-3000:]
    fields = dict(kv.split("=") for kv in result[0].split()[1:])
    assert int(fields["tried"]) >= 100 and fields["tracebacks"] == "0" and fields["silent"] == "0", proc.stdout
    assert fields["one_line"] == fields["tried"], proc.stdout


def test_dataset_columns_of_the_wrong_kind_are_refused(tmp_path):
    import h5py

    from ctrl_rl.storage.dataset import DatasetError
    from ctrl_rl.storage.formats import load_dataset

    f = tmp_path / "d.hdf5"
    with h5py.File(f, "w") as h:
        h["observations"] = np.zeros((4, 3), np.float32)
        h["actions"] = np.zeros((4, 1), np.float32)
        h["rewards"] = np.zeros(4, np.float32)
        h["terminals"] = np.array([b"False"] * 4)
    with pytest.raises(DatasetError, match=r"'terminals' must be numeric, got dtype \|S5"):
        load_dataset(f)
    broken = tmp_path / "minari_ds"
    (broken / "data").mkdir(parents=True)
    (broken / "data" / "main_data.hdf5").write_bytes(b"")
    with pytest.raises(DatasetError, match="is a broken Minari dataset: .*metadata.json is missing"):
        load_dataset(broken)


# -- 9. disks ------------------------------------------------------------------------------------------


def test_an_unwritable_log_root_is_one_line(tmp_path):
    one_line(cli("train", *PPO, "runner.max_iterations=1", "runner.log_root=/sys/ctrl_rl_denied"),
             r"'/sys/ctrl_rl_denied[^']*': Operation not permitted \(creating the run directory; set runner.log_root=")


@pytest.mark.slow
def test_a_full_disk_names_the_checkpoint_and_keeps_the_old_one(ppo_run, tmp_path):
    """RLIMIT_FSIZE stands in for a full disk: writes past the limit fail with EFBIG."""
    run = tmp_path / "run"
    shutil.copytree(ppo_run, run)
    before = digest(run)
    limit = (run / "model_2.pt").stat().st_size // 2

    def small_files() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    proc = cli("train", "--checkpoint", str(run), "runner.max_iterations=3", preexec_fn=small_files)
    one_line(proc, rf"'{re.escape(str(run / 'model_3.pt'))}': write failed: the disk may be full")
    assert digest(run) == before and not list(run.glob(".*.tmp"))


@pytest.mark.parametrize("command", ["collect", "export"])
def test_an_unwritable_output_names_the_users_path(ppo_run, command):
    out = "/sys/ctrl_rl_denied/out." + ("hdf5" if command == "collect" else "onnx")
    args = (["collect", "random", "task=pendulum", "--steps", "2", "--envs", "2"] if command == "collect"
            else ["export", str(ppo_run)])
    one_line(cli(*args, "--output", out), rf"'{re.escape(out)}': (Operation not permitted|No such file)")


def test_sentinel_buffers_are_not_divergence_but_statistics_are():
    """Uni-O4 keeps -inf as 'no OPE score yet'; a normalizer's var at inf is a divergence."""
    from ctrl_rl.nets.normalizer import EmpiricalNormalizer
    from ctrl_rl.utils.guards import check_learner_finite

    class Scores(torch.nn.Module):
        sentinel_buffers = ("best",)

        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("best", torch.full((2,), -torch.inf))

    class Learner:
        def __init__(self) -> None:
            self.offline = Scores()
            self.obs_normalizer = EmpiricalNormalizer(3)

    alg = Learner()
    check_learner_finite(alg, 1)  # the sentinel alone is fine
    alg.obs_normalizer.var.fill_(3e38)  # finite, though its sum overflows (the check's fast path)
    check_learner_finite(alg, 1)
    alg.obs_normalizer.var.fill_(1.0)
    alg.obs_normalizer.var[1] = float("inf")
    with pytest.raises(NonFiniteError, match=r"obs_normalizer.var \(statistics\) became NaN/inf in iteration 2"):
        check_learner_finite(alg, 2)
