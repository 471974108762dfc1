"""Isaac Lab API adapter (``sims/isaaclab.py``): real mjlab envs in ``.venv-mjlab``, and
Isaac Lab's step order on small stand-ins here (Isaac Lab itself cannot run on these machines).

mjlab pins mujoco 3.11, so its checks run in ``.venv-mjlab/bin/python`` (``tests/mjlab_checks.py``)
through a subprocess; a missing venv fails, naming ``scripts/setup_mjlab_env.sh``.
"""

from __future__ import annotations

import csv
import logging
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from vecenv_conformance import Transition, check_action_clipping, check_rollout, check_seeding

from ctrl_rl.app.configure import load_train_config
from ctrl_rl.sims import list_tasks, make_env
from ctrl_rl.sims.isaaclab import IsaacLabVecEnv, apply_cfg_overrides

ROOT = Path(__file__).resolve().parents[1]
MJLAB_PYTHON = ROOT / ".venv-mjlab" / "bin" / "python"


# ---- mjlab, for real ----------------------------------------------------------------------
def _mjlab(tool: str, *args: str, timeout: float = 600, cwd: Path = ROOT) -> str:
    """Run ``.venv-mjlab/bin/<tool> args`` (one thread: CI has 2 cores) and return its output."""
    if not MJLAB_PYTHON.exists():
        pytest.fail(f"{MJLAB_PYTHON} is missing: run `bash scripts/setup_mjlab_env.sh` "
                    "(scripts/test.sh does it before pytest)")
    cmd = [str(MJLAB_PYTHON.parent / tool), *args]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{' '.join(cmd)} exited {proc.returncode}:\n{out[-6000:]}"
    return out


CHECKS = str(ROOT / "tests" / "mjlab_checks.py")


def test_mjlab_conformance() -> None:
    """Contract 1 on Mjlab-Cartpole-Balance (8 envs) and Mjlab-Velocity-Flat-Unitree-Go1 (6 envs):
    shapes, devices, same-step reset to initial states, episode stats, terminated vs truncated,
    final_obs layout, unbounded actions staying finite, seeding."""
    assert "CHECK conformance passed" in _mjlab("python", CHECKS, "conformance")


def test_mjlab_final_obs_is_the_true_last_observation() -> None:
    """Time-outs (cartpole, Go1) and falls (Go1): final_obs equals, bit for bit, the observation
    of a twin env that is not reset; the reset path equals mjlab's own auto-reset. And staggered episodes
    (``runner.stagger_episodes``) time out apart, by mjlab's own time-out term; and mjlab's lift success
    reaches ``episode_metrics`` (``success_rate``) at each episode's end."""
    out = _mjlab("python", CHECKS, "final_obs", "stagger", "lift_success")
    assert all(f"CHECK {c} passed" in out for c in ("final_obs", "stagger", "lift_success")), out[-3000:]
    assert out.count("== untruncated twin's obs") == 2 and "fallen robots" in out


def _train(tmp_path: Path, *overrides: str) -> Path:
    out = _mjlab("ctrl-rl", "train", "sim=mjlab", "device=cpu", f"runner.log_root={tmp_path}",
                 "runner.progress=false", *overrides, cwd=tmp_path)
    runs = sorted(tmp_path.glob("ppo/*/*/params/config.yaml"))
    assert len(runs) == 1, out[-3000:]
    return runs[0].parent.parent


@pytest.mark.slow
def test_train_mjlab_cartpole_through_the_cli(tmp_path: Path) -> None:
    run = _train(tmp_path, "task=Mjlab-Cartpole-Balance", "env.num_envs=16", "runner.max_iterations=4",
                 "runner.save_interval=2", "+task.kwargs.episode_length_s=2.0")
    assert {p.name for p in run.glob("model_*.pt")} == {"model_2.pt", "model_4.pt"}
    assert list(run.glob("events.out.tfevents.*"))
    rows = list(csv.DictReader((run / "metrics.csv").open()))
    assert len(rows) == 4
    assert any(r.get("mean_reward") for r in rows), "no episode finished (40-step episodes, 96 steps)"
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    tags = EventAccumulator(str(run)).Reload().Tags()["scalars"]
    assert "Train/mean_reward" in tags, tags
    assert any(t.endswith("Episode_Reward/smooth_reward") for t in tags), f"extras['log'] not logged: {tags}"
    _mjlab("ctrl-rl", "export", str(run), cwd=tmp_path)
    assert (run / "exported" / "policy.onnx").exists()


@pytest.mark.slow
def test_train_mjlab_go1_with_critic_group(tmp_path: Path) -> None:
    run = _train(tmp_path, "task=Mjlab-Velocity-Flat-Unitree-Go1", "env.num_envs=8", "runner.max_iterations=2",
                 "+task.kwargs.episode_length_s=0.5")
    assert (run / "model_2.pt").exists() and list(run.glob("events.out.tfevents.*"))
    rows = list(csv.DictReader((run / "metrics.csv").open()))
    assert len(rows) == 2 and rows[-1].get("mean_reward")
    ckpt = torch.load(run / "model_2.pt", map_location="cpu", weights_only=False)
    assert ckpt["obs_dims"] == {"policy": 48, "critic": 72}
    model = ckpt["algo"]["model"]  # asymmetric actor-critic: the critic reads mjlab's critic group
    assert model["actor.net.0.weight"].shape[1] == 48 and model["critic.net.0.weight"].shape[1] == 72


# ---- configuration and registry (main venv) ------------------------------------------------
def test_sims_are_listed_and_routed() -> None:
    tasks = list_tasks()
    assert "Mjlab-Velocity-Flat-Unitree-Go1" in tasks["mjlab"] and "Isaac-Cartpole" in tasks["isaaclab"]
    listed = subprocess.run([sys.executable, "-m", "ctrl_rl", "list"], capture_output=True, text=True)
    flowing = " ".join(listed.stdout.split())  # the list is a table wrapped at 100 columns
    # each sim's tasks follow its name (and, where it cannot run here, what it needs: `(unavailable: ...)`)
    assert re.search(r"sim=mjlab (\(unavailable: [^)]*\) )?Mjlab-Cartpole-Balance", flowing), flowing
    assert re.search(r"sim=isaaclab (\(unavailable: .*?\)\) )?Isaac-Ant, Isaac-Cartpole", flowing), flowing
    cfg = load_train_config(["sim=mjlab", "task=Mjlab-Velocity-Flat-Unitree-Go1", "+task.kwargs.episode_length_s=5",
                             "+task.kwargs.rewards.upright.weight=2.0"])
    assert (cfg.sim.name, cfg.task.name, cfg.device, cfg.env.num_envs) == (
        "mjlab", "Mjlab-Velocity-Flat-Unitree-Go1", "cuda:0", 4096)
    assert cfg.task.kwargs == {"episode_length_s": 5, "rewards": {"upright": {"weight": 2.0}}}
    cfg = load_train_config(["sim=isaaclab", "task=Isaac-Velocity-Flat-AnymalD", "device=cpu"])
    assert (cfg.sim.name, cfg.task.name, cfg.device) == ("isaaclab", "Isaac-Velocity-Flat-AnymalD", "cpu")


@pytest.mark.parametrize(("sim", "hint"), [("mjlab", "scripts/setup_mjlab_env.sh"), ("isaaclab", "pip install")])
def test_missing_simulator_names_the_install(sim: str, hint: str) -> None:
    with pytest.raises(ValueError, match=hint):
        make_env(sim, "Any-Task", 2)


@dataclass
class _Ranges:
    lin_vel_x: tuple[float, float] = (-1.0, 1.0)


@dataclass
class _Cfg:
    episode_length_s: float = 20.0
    rewards: dict[str, Any] = field(default_factory=lambda: {"upright": SimpleNamespace(weight=1.0)})
    ranges: _Ranges = field(default_factory=_Ranges)


def test_cfg_overrides_set_nested_fields() -> None:
    cfg = _Cfg()
    apply_cfg_overrides(cfg, {"episode_length_s": 5, "rewards": {"upright": {"weight": 2.0}},
                              "ranges": {"lin_vel_x": [-2, 2]}})
    assert (cfg.episode_length_s, cfg.rewards["upright"].weight, cfg.ranges.lin_vel_x) == (5, 2.0, (-2, 2))
    with pytest.raises(ValueError, match=r"task.kwargs.rewards.uprite: .*fields: upright"):
        apply_cfg_overrides(cfg, {"rewards": {"uprite": {"weight": 1}}})
    with pytest.raises(ValueError, match=r"task.kwargs.episode_len: .*episode_length_s, rewards, ranges"):
        apply_cfg_overrides(cfg, {"episode_len": 1})


# ---- Isaac Lab's step order, on a stand-in -------------------------------------------------
class _IsaacLabObservationManager:
    """Claims Isaac Lab's module, as the hook checks it (mjlab's compute() returns a cache)."""

    __module__ = "isaaclab.managers.observation_manager"

    def __init__(self, env: _FakeIsaacLabEnv) -> None:
        self.env = env

    def compute(self) -> dict[str, Any]:
        return self.env.observations()


class _FakeIsaacLabEnv:
    """Isaac Lab's ``ManagerBasedRLEnv.step`` order on a 2-D random walk: physics, terminations
    (|x| > 1.2) and time-outs (``episode_length_buf`` reaching ``max_len``), ``extras["final_obs"]`` when
    ``compute_final_obs``, ``_reset_idx`` (which alone writes ``extras["log"]``), then the observation. Groups:
    ``policy`` and a non-concatenated ``critic`` (x and the episode clock). Buffers are reused, as Isaac Lab's."""

    def __init__(self, kind: str, num_envs: int = 4, seed: int = 0, max_len: int = 8, finite: bool = False) -> None:
        self.kind, self.num_envs, self.max_len = kind, num_envs, max_len
        self.device, self.step_dt, self.max_episode_length = "cpu", 0.02, max_len
        self.single_action_space = SimpleNamespace(shape=(2,))
        self.cfg = SimpleNamespace(is_finite_horizon=finite)
        if kind == "native":
            self.cfg.compute_final_obs = False
        if kind == "manager_hook":
            self.observation_manager = _IsaacLabObservationManager(self)
        self.gen = torch.Generator().manual_seed(seed)
        self.x = torch.zeros(num_envs, 2)
        self.episode_length_buf = torch.zeros(num_envs, dtype=torch.long)
        self.reward_buf = torch.zeros(num_envs)
        self.extras: dict[str, Any] = {}
        self.closed = False

    @property
    def unwrapped(self) -> _FakeIsaacLabEnv:
        return self

    def observations(self) -> dict[str, Any]:
        clock = (self.episode_length_buf / self.max_len)[:, None]
        return {"policy": self.x.clone(), "critic": {"x": self.x.clone(), "clock": clock}}

    def __getattr__(self, name: str) -> Any:
        if name == "_get_observations" and self.kind == "direct_hook":
            return self.observations
        raise AttributeError(name)

    def reset(self, seed: int | None = None, options: Any = None) -> tuple[dict[str, Any], dict[str, Any]]:
        if seed is not None:
            self.gen.manual_seed(seed)
        self._reset_idx(torch.arange(self.num_envs))
        return self.observations(), self.extras

    def _reset_idx(self, env_ids: torch.Tensor) -> None:
        self.extras["log"] = {"Episode_Termination/fell": (self.x[env_ids].norm(dim=1) > 1.2).float().mean(),
                              "not_a_scalar": torch.zeros(3)}
        self.x[env_ids] = torch.rand(len(env_ids), 2, generator=self.gen) - 0.5
        self.episode_length_buf[env_ids] = 0

    def step(self, action: torch.Tensor) -> tuple:
        self.x += 0.4 * torch.tanh(action)
        self.episode_length_buf += 1
        terminated, time_outs = self.x.norm(dim=1) > 1.2, self.episode_length_buf >= self.max_len
        self.reward_buf[:] = -self.x.norm(dim=1)
        ids = (terminated | time_outs).nonzero().squeeze(-1)
        if len(ids) > 0:
            if getattr(self.cfg, "compute_final_obs", False):
                self.extras["final_obs"] = self.observations()
            self._reset_idx(ids)
        return self.observations(), self.reward_buf, terminated, time_outs, self.extras

    def close(self) -> None:
        self.closed = True


KINDS = ["native", "manager_hook", "direct_hook"]


@pytest.mark.parametrize("kind", KINDS)
def test_isaaclab_step_order_conformance(kind: str) -> None:
    """Every exact hook gives the pre-reset observation: the clock reads max_len/max_len on
    time-outs and |x| > 1.2 on falls, and both kinds of ending happen."""
    seen = {"terminated": 0, "truncated": 0, "both": 0}

    def exact(tr: Transition) -> None:
        final = tr.info["final_obs"]["critic"]
        clock, norm = final[:, 2], final[:, :2].norm(dim=1)
        assert torch.equal(final[:, :2], tr.info["final_obs"]["policy"])
        assert (clock[tr.truncated] == 1.0).all() and (norm[tr.terminated] > 1.2).all()
        assert (tr.obs["critic"][tr.done][:, 2] == 0).all()
        seen["terminated"] += int(tr.terminated.sum())
        seen["truncated"] += int(tr.truncated.sum())
        seen["both"] += int((tr.terminated & (clock == 1.0)).sum())

    def make(n: int, seed: int | None) -> IsaacLabVecEnv:
        env = IsaacLabVecEnv(_FakeIsaacLabEnv(kind, n, seed or 0), seed=seed)
        assert env.final_obs_source == ("native" if kind == "native" else "hook")
        return env

    check_rollout(make, num_envs=16, num_steps=60, seed=3, check_transition=exact,
                  is_initial_obs=lambda o: o["critic"][:, 2] == 0)
    assert seen["terminated"] and seen["truncated"] and seen["both"], seen
    check_seeding(make, num_envs=4, num_steps=20)
    check_action_clipping(make, num_envs=4, num_steps=10)


def test_stagger_moves_the_envs_own_step_counter() -> None:
    """``runner.stagger_episodes`` on an Isaac Lab env: its ``episode_length_buf`` (what its time-outs read) and
    the adapter's episode lengths start at one random step each, from the adapter's seeded generator, so the
    first time-outs come apart; reset together they come together."""
    def first_time_outs(stagger: bool, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
        fake = _FakeIsaacLabEnv("native", num_envs=32, max_len=50)
        env = IsaacLabVecEnv(fake, seed=seed)
        assert env.supports_stagger
        if stagger:
            env.stagger_episodes()
            assert torch.equal(fake.episode_length_buf, env._episode_length)
        ends, lengths = torch.zeros(32, dtype=torch.long), torch.zeros(32, dtype=torch.long)
        for t in range(1, 51):
            _, _, terminated, truncated, info = env.step(torch.zeros(32, 2))  # no push: nobody falls
            assert not terminated.any()
            first = truncated & (ends == 0)
            ends, lengths = torch.where(first, t, ends), torch.where(first, info["episode"]["length"], lengths)
        return ends, lengths

    assert first_time_outs(False, 0)[0].unique().tolist() == [50]
    ends, lengths = first_time_outs(True, 0)
    assert bool((ends >= 1).all()) and len(ends.unique()) >= 15 and torch.equal(lengths, torch.full((32,), 50))
    assert torch.equal(first_time_outs(True, 0)[0], ends) and not torch.equal(first_time_outs(True, 1)[0], ends)
    env = IsaacLabVecEnv(_FakeIsaacLabEnv("native"), seed=0)
    env.env.episode_length_buf = None  # an env of one's own that keeps no such counter
    assert not env.supports_stagger
    with pytest.raises(NotImplementedError, match="no episode_length_buf .* runner.stagger_episodes=false"):
        env.stagger_episodes()


def test_groups_logs_and_horizon(caplog: pytest.LogCaptureFixture) -> None:
    fake = _FakeIsaacLabEnv("native", num_envs=3, max_len=2)
    env = IsaacLabVecEnv(SimpleNamespace(unwrapped=fake, close=fake.close), seed=0)
    assert env.obs_dims == {"policy": 2, "critic": 3} and env.action_bounds is None
    assert fake.cfg.compute_final_obs, "the adapter turns Isaac Lab's own capture on"
    logs = [env.step(torch.zeros(3, 2))[4]["log"] for _ in range(4)]
    assert [bool(entry) for entry in logs] == [False, True, False, True], "a stale extras['log'] was repeated"
    assert set(logs[1]) == {"Episode_Termination/fell"}, "non-scalar log entries must be dropped"
    env.close()
    assert fake.closed

    finite = IsaacLabVecEnv(_FakeIsaacLabEnv("native", num_envs=3, max_len=1, finite=True), seed=0)
    _, _, terminated, truncated, _ = finite.step(torch.zeros(3, 2))
    assert terminated.all() and not truncated.any(), "is_finite_horizon: time-outs are terminal"

    bare = _FakeIsaacLabEnv("bare", num_envs=3, max_len=1)
    with caplog.at_level(logging.WARNING):
        approx = IsaacLabVecEnv(bare, seed=0)
    assert approx.final_obs_source == "approximate" and "approximately" in caplog.text
    obs, _, _, truncated, info = approx.step(torch.zeros(3, 2))
    assert truncated.all() and torch.equal(info["final_obs"]["policy"], obs["policy"])

    mjlab_like = _FakeIsaacLabEnv("bare", num_envs=2)
    mjlab_like.cfg.auto_reset = True
    mjlab_like.reset = lambda seed=None, env_ids=None: _FakeIsaacLabEnv.reset(mjlab_like, seed)
    assert IsaacLabVecEnv(mjlab_like).final_obs_source == "manual_reset" and not mjlab_like.cfg.auto_reset

    actor = _FakeIsaacLabEnv("bare", num_envs=2)
    actor.observations = lambda: {"actor": actor.x.clone()}
    assert IsaacLabVecEnv(actor).obs_dims == {"policy": 2}
    tensor_obs = _FakeIsaacLabEnv("bare", num_envs=2)
    tensor_obs.observations = lambda: tensor_obs.x.clone()
    assert IsaacLabVecEnv(tensor_obs).obs_dims == {"policy": 2}
    with pytest.raises(ValueError, match="actions must have shape"):
        IsaacLabVecEnv(_FakeIsaacLabEnv("native")).step(torch.zeros(4, 3))
