"""Dataset formats and ``ctrl-rl collect``: D4RL HDF5 with infos/metadata and Minari round trips
(identical arrays), a Minari dataset made by minari's own API, one loader for every format, clear
errors for malformed data, and collection from random actions, mixtures, a run's checkpoints
(medium-replay) and an exported ONNX bundle."""

from __future__ import annotations

import json
import subprocess
import sys
import types

import gymnasium as gym
import h5py
import minari
import numpy as np
import pytest
import torch
from minari.data_collector import EpisodeBuffer

from ctrl_rl.app.collect import collect
from ctrl_rl.app.export import export
from ctrl_rl.app.session import load_policy, policy_fn
from ctrl_rl.app.train import train
from ctrl_rl.config import ConfigError
from ctrl_rl.deploy.runtime import OnnxPolicy
from ctrl_rl.storage.dataset import ARRAYS, Dataset, DatasetError, read_attrs
from ctrl_rl.storage.formats import load_dataset, output_format
from ctrl_rl.storage.minari_io import load_minari, save_minari

# minari warns about every metadata field left out (author, env spec, ...) when datasets are made by hand
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning:minari.*")


@pytest.fixture(autouse=True)
def _no_home_minari(tmp_path, monkeypatch):
    """Every Minari write goes to tmp_path: never the user's ~/.minari."""
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


def _episodic(lengths=(3, 2, 4), ends=("terminal", "timeout", None), obs_dim=3, infos=True) -> Dataset:
    """Episodes of the given lengths whose next observations continue each episode's sequence
    (what Minari can hold); the last may end with neither flag (a partial tail)."""
    rng = np.random.default_rng(0)
    cols = {k: [] for k in ("obs", "next", "term", "trunc")}
    for t, end in zip(lengths, ends, strict=True):
        seq = rng.normal(size=(t + 1, obs_dim)).astype(np.float32)
        cols["obs"].append(seq[:-1])
        cols["next"].append(seq[1:])
        cols["term"].append(np.arange(t) == t - 1 if end == "terminal" else np.zeros(t, bool))
        cols["trunc"].append(np.arange(t) == t - 1 if end == "timeout" else np.zeros(t, bool))
    n = sum(lengths)
    extra = {"qpos": rng.normal(size=(n, 2)), "contact/count": np.arange(n, dtype=np.int64)} if infos else {}
    return Dataset(observations=np.concatenate(cols["obs"]), actions=rng.normal(size=(n, 2)),
                   rewards=rng.normal(size=n), terminals=np.concatenate(cols["term"]),
                   timeouts=np.concatenate(cols["trunc"]), next_observations=np.concatenate(cols["next"]),
                   infos=extra)


def _assert_same(a: Dataset, b: Dataset) -> None:
    for name in ARRAYS:
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and np.array_equal(x, y), name
    assert a.infos.keys() == b.infos.keys()
    for k in a.infos:
        assert a.infos[k].dtype == b.infos[k].dtype and np.array_equal(a.infos[k], b.infos[k]), k


# --------------------------------------------------------------------------- D4RL HDF5
def test_hdf5_round_trip_keeps_infos_and_metadata(tmp_path):
    data = _episodic()
    data.metadata = {"algorithm": "ppo", "iteration": 50, "bounds": np.array([-1.0, 1.0]), "tags": ["a", "b"]}
    path = data.save_hdf5(tmp_path / "d.hdf5", attrs={"task": "pendulum"})
    with h5py.File(path) as f:  # D4RL's layout: infos/* and metadata/* groups, nested keys as subgroups
        assert set(f["infos"]) == {"qpos", "contact"} and "count" in f["infos/contact"]
        assert set(f["metadata"]) == {"algorithm", "iteration", "bounds", "tags"}
    back = load_dataset(path)
    _assert_same(data, back)
    assert back.metadata["algorithm"] == "ppo" and back.metadata["iteration"] == 50
    np.testing.assert_array_equal(back.metadata["bounds"], [-1.0, 1.0])
    assert json.loads(back.metadata["tags"]) == ["a", "b"]  # not an HDF5 type: stored as JSON text
    assert read_attrs(path) == {"task": "pendulum"}
    old_style = Dataset(*(getattr(data, k) for k in ARRAYS))  # files without infos/metadata still load
    assert Dataset.load_hdf5(old_style.save_hdf5(tmp_path / "old.h5")).infos == {}


def test_malformed_infos_are_named(tmp_path):
    data = _episodic()  # 9 rows
    with pytest.raises(DatasetError, match="'infos/qpos' has 3 rows, 'observations' has 9"):
        Dataset(*(getattr(data, k) for k in ARRAYS), infos={"qpos": np.zeros((3, 2))})
    with pytest.raises(DatasetError, match="'infos/names' must be a numeric"):
        Dataset(*(getattr(data, k) for k in ARRAYS), infos={"names": np.array(["x"] * 9)})
    bad = np.zeros(9)
    bad[4] = np.inf
    path = tmp_path / "bad.hdf5"
    data.save_hdf5(path)
    with h5py.File(path, "a") as f:
        f["infos/qpos"][4, 1] = np.nan
    with pytest.raises(DatasetError, match=r"bad.hdf5: 'infos/qpos' has 1 non-finite row\(s\), first at row 4"):
        load_dataset(path)


# --------------------------------------------------------------------------- Minari
def test_minari_round_trip_gives_identical_arrays(tmp_path):
    data = _episodic()
    where = save_minari(data, "ctrl_rl/test/episodic-v0", attrs={"task": "pendulum"}, action_bounds=(-1.0, 1.0))
    assert where == tmp_path / "minari" / "ctrl_rl/test/episodic-v0"
    assert (where / "data" / "main_data.hdf5").is_file() and (where / "data" / "metadata.json").is_file()
    assert not (tmp_path / "home" / ".minari").exists()
    for spec in ("minari:ctrl_rl/test/episodic-v0", str(where), str(where / "data")):
        _assert_same(data, load_dataset(spec))
    back = load_minari("ctrl_rl/test/episodic-v0")
    assert back.metadata["ctrl_rl"] == {"task": "pendulum"} and back.metadata["total_episodes"] == 3
    # minari itself sees 3 episodes of T+1 observations, the last one neither terminated nor truncated
    episodes = list(minari.load_dataset("ctrl_rl/test/episodic-v0").iterate_episodes())
    assert [len(e.observations) for e in episodes] == [4, 3, 5]
    assert [(e.terminations[-1], e.truncations[-1]) for e in episodes] == [(True, False), (False, True),
                                                                            (False, False)]
    # an explicit root instead of the variable
    save_minari(data, "elsewhere-v1", root=tmp_path / "other")
    _assert_same(data, load_minari("elsewhere-v1", root=tmp_path / "other"))


def test_minari_dataset_written_by_minari_api_loads(tmp_path):
    """Two hand-made episodes: 3 steps ending terminated, 2 steps ending truncated; infos of T+1 rows."""
    obs = [np.arange(4 * 2, dtype=np.float64).reshape(4, 2), 10 + np.arange(3 * 2, dtype=np.float64).reshape(3, 2)]
    buffers = [EpisodeBuffer(id=0, observations=obs[0], actions=np.full((3, 1), 0.5), rewards=[1.0, 2.0, 3.0],
                             terminations=[False, False, True], truncations=[False, False, False],
                             infos={"step": np.arange(4)}),
               EpisodeBuffer(id=1, observations=obs[1], actions=np.full((2, 1), -0.5), rewards=[4.0, 5.0],
                             terminations=[False, False], truncations=[False, True], infos={"step": np.arange(3)})]
    minari.create_dataset_from_buffers("hand/made-v0", buffers, env=None, algorithm_name="hand",
                                       observation_space=gym.spaces.Box(-np.inf, np.inf, (2,), np.float64),
                                       action_space=gym.spaces.Box(-1, 1, (1,), np.float32))
    data = load_dataset("minari:hand/made-v0")
    assert len(data) == 5 and data.observations.dtype == np.float32
    np.testing.assert_array_equal(data.observations, np.concatenate([obs[0][:3], obs[1][:2]]))
    np.testing.assert_array_equal(data.next_observations, np.concatenate([obs[0][1:], obs[1][1:]]))
    assert data.terminals.tolist() == [False, False, True, False, False]
    assert data.timeouts.tolist() == [False, False, False, False, True]
    np.testing.assert_array_equal(data.rewards, [1, 2, 3, 4, 5])
    np.testing.assert_array_equal(data.infos["step"], [0, 1, 2, 0, 1])  # the final observation's row dropped
    np.testing.assert_allclose(data.episode_returns(), [6.0, 9.0])


def _minari_by_api(dataset_id, observations, actions, obs_space=None, act_space=None):
    t = len(actions)
    buf = EpisodeBuffer(id=0, observations=observations, actions=actions, rewards=np.zeros(t),
                        terminations=np.zeros(t, bool), truncations=np.arange(t) == t - 1)
    minari.create_dataset_from_buffers(dataset_id, [buf], env=None,
                                       observation_space=obs_space or gym.spaces.Box(-9, 9, (2,), np.float32),
                                       action_space=act_space or gym.spaces.Box(-1, 1, (1,), np.float32))


def test_malformed_minari_datasets_give_clear_errors(tmp_path):
    with pytest.raises(DatasetError, match=r"'nope/missing-v0' not found: looked in .*minari/nope/missing-v0 "
                                           r"\(MINARI_DATASETS_PATH=.*minari\)"):
        load_dataset("minari:nope/missing-v0")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DatasetError, match="not a Minari dataset"):
        load_minari(tmp_path / "empty")
    nan_obs = np.zeros((4, 2), np.float32)
    nan_obs[1, 0] = np.nan
    _minari_by_api("bad/nan-v0", nan_obs, np.zeros((3, 1), np.float32))
    with pytest.raises(DatasetError, match=r"bad/nan-v0: 'observations' has 1 non-finite row\(s\), first at row 1"):
        load_dataset("minari:bad/nan-v0")
    _minari_by_api("bad/short-v0", np.zeros((3, 2), np.float32), np.zeros((3, 1), np.float32))
    with pytest.raises(DatasetError, match="episode 0 has 3 observations for 3 steps"):
        load_dataset("minari:bad/short-v0")
    _minari_by_api("bad/discrete-v0", np.zeros((4, 2), np.float32), np.zeros(3, np.int64),
                   act_space=gym.spaces.Discrete(3))
    with pytest.raises(DatasetError, match="the action space is Discrete.*need Box"):
        load_dataset("minari:bad/discrete-v0")
    data = _episodic()
    save_minari(data, "ok/data-v0")
    with pytest.raises(DatasetError, match="already exists"):
        save_minari(data, "ok/data-v0")
    with pytest.raises(DatasetError, match="Malformed dataset ID"):
        save_minari(data, "no version")
    data.next_observations[0] += 1.0  # no longer the next row's observation
    with pytest.raises(DatasetError, match="'next_observations' row 0 differs from 'observations' row 1"):
        save_minari(data, "ok/other-v0")
    assert not (tmp_path / "minari" / "ok" / "other-v0").exists()


# --------------------------------------------------------------------------- one loader
def test_load_dataset_dispatch_and_robot_log_hook(tmp_path, monkeypatch):
    with pytest.raises(DatasetError, match="not found.*ctrl-rl collect"):
        load_dataset(tmp_path / "missing.hdf5")
    with pytest.raises(DatasetError, match="dataset not found: .*nothing"):
        load_dataset(tmp_path / "nothing")
    logs = tmp_path / "robot_logs"
    logs.mkdir()
    monkeypatch.setitem(sys.modules, "ctrl_rl.storage.robot_log", None)  # module unavailable
    with pytest.raises(DatasetError, match="neither a D4RL HDF5 file .* robot-log loading"):
        load_dataset(logs)
    calls = []
    fake = types.SimpleNamespace(
        load_robot_logs=lambda path, reward_fn: calls.append((path, reward_fn)) or "from dir",
        parse_robot_log_spec=lambda spec: types.SimpleNamespace(load=lambda: calls.append(spec) or "from spec"))
    monkeypatch.setitem(sys.modules, "ctrl_rl.storage.robot_log", fake)
    reward = object()
    assert load_dataset(logs, reward_fn=reward) == "from dir" and calls == [(logs, reward)]
    assert load_dataset("robotlogs:x?reward=a:b") == "from spec" and calls[-1] == "robotlogs:x?reward=a:b"
    assert [output_format(o) for o in ("a.hdf5", "b.H5", "minari:x/y-v0")] == ["hdf5", "hdf5", "minari"]
    assert output_format("x/y-v0", "minari") == "minari"
    with pytest.raises(DatasetError, match="cannot tell the format of --output data.npz"):
        output_format("data.npz")


# --------------------------------------------------------------------------- ctrl-rl collect
@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """A 2-iteration PPO run on pendulum with model_1.pt, model_2.pt and an exported bundle (~10 s)."""
    root = tmp_path_factory.mktemp("logs")
    run = train(["task=pendulum", "env.num_envs=8", "algo.num_steps_per_env=8", "algo.actor_hidden=[8]",
                 "algo.critic_hidden=[8]", "runner.max_iterations=2", "runner.save_interval=1",
                 "runner.progress=false", f"runner.log_root={root}"])
    return run, export(str(run), [])


def test_collect_random_to_minari_needs_no_policy(tmp_path, capsys):
    out = collect(None, ["task=pendulum"], "minari:ctrl_rl/pendulum/random-v0", steps=30, envs=4, level="random")
    assert out == str(tmp_path / "minari" / "ctrl_rl/pendulum/random-v0")
    assert "RESULT path=" in capsys.readouterr().out
    data = load_dataset("minari:ctrl_rl/pendulum/random-v0")
    assert len(data) == 120 and data.obs_dim == 3 and data.action_dim == 1
    assert data.actions.min() < -0.8 and data.actions.max() > 0.8 and np.abs(data.actions).max() <= 1.0
    assert data.metadata["ctrl_rl"]["level"] == "random" and data.metadata["ctrl_rl"]["task"] == "pendulum"
    assert data.timeouts.sum() == 4  # each env's cut episode
    with pytest.raises(ValueError, match="collect needs a policy"):
        collect(None, ["task=pendulum"], "x.hdf5")
    with pytest.raises(DatasetError, match="'ctrl_rl/pendulum/random-v0' already exists"):  # before rolling
        collect("random", ["task=pendulum"], "minari:ctrl_rl/pendulum/random-v0")


def test_collect_cli_random_with_the_task_as_an_override(tmp_path):
    r = subprocess.run([sys.executable, "-m", "ctrl_rl", "collect", "--level", "random", "task=pendulum",
                        "--output", "minari:cli/random-v0", "--steps", "10", "--envs", "2"],
                       capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1].startswith(f"RESULT path={tmp_path / 'minari' / 'cli/random-v0'} "
                                                        "format=minari level=random transitions=20")
    bad = subprocess.run([sys.executable, "-m", "ctrl_rl", "collect", "--level", "mixed", "--output", "x.hdf5"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert bad.returncode == 2 and "--level mixed needs --mix" in bad.stderr and "Traceback" not in bad.stderr


def test_collect_mix_concatenates_segments_by_fraction(tmp_path, tiny_run):
    run, _ = tiny_run
    ckpt = run / "model_2.pt"
    out = collect(None, [], str(tmp_path / "mix.hdf5"), steps=20, envs=2, mix=f"random=0.25,expert:{ckpt}=0.75")
    data, attrs = load_dataset(out), read_attrs(out)
    segments = json.loads(attrs["segments"])
    assert attrs["level"] == "mixed" and attrs["task"] == "pendulum"
    assert [(s["level"], s["policy"], s["steps_per_env"], s["rows"]) for s in segments] == [
        ("random", "random", 5, [0, 10]), ("expert", str(ckpt), 15, [10, 40])]
    assert len(data) == 40 and data.timeouts.sum() == 4  # both envs' cut episode in each segment
    _, _, alg, _ = load_policy(str(ckpt), [])
    with torch.no_grad():  # the expert rows are the checkpoint's deterministic actions (noise 0)
        expected = policy_fn(alg)({"policy": torch.as_tensor(data.observations[10:])}).numpy()
    np.testing.assert_allclose(data.actions[10:], np.clip(expected, -1, 1), atol=1e-6)
    with pytest.raises(ValueError, match="fractions must sum to 1, got 0.9"):
        collect(None, [], str(tmp_path / "x.hdf5"), mix=f"random=0.2,{ckpt}=0.7")


def test_collect_medium_replay_uses_every_checkpoint_in_order(tmp_path, tiny_run):
    run, _ = tiny_run
    out = collect(str(run), [], str(tmp_path / "replay.hdf5"), steps=8, envs=2, level="medium-replay", noise=0.1)
    segments = json.loads(read_attrs(out)["segments"])
    assert [(s["policy"], s["steps_per_env"]) for s in segments] == [(str(run / "model_1.pt"), 4),
                                                                     (str(run / "model_2.pt"), 4)]
    assert read_attrs(out)["level"] == "medium-replay" and len(load_dataset(out)) == 16


def test_collect_from_an_exported_onnx_bundle(tmp_path, tiny_run):
    _, bundle_path = tiny_run
    out = collect(str(bundle_path), [], str(tmp_path / "bundle.h5"), steps=25, envs=3, level="expert")
    data, attrs = load_dataset(out), read_attrs(out)
    assert attrs["task"] == "pendulum" and attrs["policy"] == str(bundle_path) and attrs["level"] == "expert"
    assert len(data) == 75
    np.testing.assert_allclose(data.actions, OnnxPolicy(bundle_path)(data.observations), atol=1e-6)
    with pytest.raises(ConfigError, match="task=cartpole_balance conflicts with the bundle"):
        collect(str(bundle_path), ["task=cartpole_balance"], str(tmp_path / "x.hdf5"), steps=5, envs=1)


def test_bc_trains_from_a_minari_dataset(tmp_path):
    """``dataset=minari:<id>`` goes through the offline runner's loader (hydra keeps the colon)."""
    collect(None, ["task=point_mass"], "minari:pm/random-v0", steps=50, envs=2, level="random")
    run = train(["algo=bc", "task=point_mass", "dataset=minari:pm/random-v0", "env.num_envs=2", "algo.num_passes=0",
                 "runner.max_iterations=1", "algo.updates_per_iteration=2", "runner.progress=false",
                 f"runner.log_root={tmp_path / 'logs'}"])
    assert (run / "model_1.pt").is_file()
