"""D4RL-layout datasets: HDF5 round trip, validation errors, chunk targets and returns by hand,
and collection from a vectorized env (episode layout, timeouts, true final observations)."""

from __future__ import annotations

import h5py
import numpy as np
import pytest
import torch
from ctrl_rl.sims import make_env

from ctrl_rl.evaluate import collect_dataset
from ctrl_rl.storage.dataset import Dataset, DatasetError, read_attrs


def _small(n: int = 7) -> Dataset:
    rng = np.random.default_rng(0)
    return Dataset(observations=rng.normal(size=(n, 3)), actions=rng.normal(size=(n, 2)),
                   rewards=np.arange(n, dtype=np.float32), terminals=[0, 0, 1, 0, 0, 0, 0][:n],
                   timeouts=[0, 0, 0, 0, 1, 0, 0][:n], next_observations=rng.normal(size=(n, 3)))


def test_hdf5_round_trip_gives_identical_arrays_and_provenance(tmp_path):
    data = _small()
    path = data.save_hdf5(tmp_path / "d.hdf5", attrs={"task": "pendulum", "noise_std": 0.1})
    back = Dataset.load_hdf5(path)
    for name in ("observations", "actions", "rewards", "terminals", "timeouts", "next_observations"):
        a, b = getattr(data, name), getattr(back, name)
        assert a.dtype == b.dtype and np.array_equal(a, b), name
    assert read_attrs(path) == {"task": "pendulum", "noise_std": "0.1"}
    assert [p.name for p in tmp_path.iterdir()] == ["d.hdf5"]  # no temp file left behind


def test_episodes_returns_and_chunks_by_hand():
    data = _small()  # episodes: rows 0-2 (terminal), 3-4 (timeout), 5-6 (the file's tail)
    assert data.episode_ends().tolist() == [False, False, True, False, True, False, True]
    np.testing.assert_allclose(data.episode_returns(), [0 + 1 + 2, 3 + 4, 5 + 6])
    chunks = data.action_chunks(3)
    a = data.actions
    np.testing.assert_array_equal(chunks[0], a[[0, 1, 2]])
    np.testing.assert_array_equal(chunks[1], a[[1, 2, 2]])  # padded with its episode's last action
    np.testing.assert_array_equal(chunks[3], a[[3, 4, 4]])  # never crosses into the next episode
    np.testing.assert_array_equal(chunks[6], a[[6, 6, 6]])


def _write(path, **arrays):
    with h5py.File(path, "w") as f:
        for k, v in arrays.items():
            f.create_dataset(k, data=v)
    return path


def test_malformed_files_give_clear_errors(tmp_path):
    ok = {"observations": np.zeros((4, 3)), "actions": np.zeros((4, 1)), "rewards": np.zeros(4),
          "terminals": np.zeros(4, bool)}
    with pytest.raises(DatasetError, match=r"missing key\(s\) \['actions'\]"):
        Dataset.load_hdf5(_write(tmp_path / "a.hdf5", **{k: v for k, v in ok.items() if k != "actions"}))
    with pytest.raises(DatasetError, match="'rewards' has 3 rows, 'observations' has 4"):
        Dataset.load_hdf5(_write(tmp_path / "b.hdf5", **{**ok, "rewards": np.zeros(3)}))
    obs = np.zeros((4, 3))
    obs[2, 1] = np.nan
    with pytest.raises(DatasetError, match="'observations' has 1 non-finite row\\(s\\), first at row 2"):
        Dataset.load_hdf5(_write(tmp_path / "c.hdf5", **{**ok, "observations": obs}))
    (tmp_path / "d.hdf5").write_text("not hdf5")
    with pytest.raises(DatasetError, match="not a readable HDF5 file"):
        Dataset.load_hdf5(tmp_path / "d.hdf5")
    with pytest.raises(DatasetError, match="not found.*ctrl-rl collect"):
        Dataset.load_hdf5(tmp_path / "missing.hdf5")
    assert len(Dataset.load_hdf5(_write(tmp_path / "e.hdf5", **ok))) == 4  # timeouts optional


def test_collect_groups_episodes_by_env_and_keeps_true_final_observations():
    """point_mass truncates at 200 steps; 250 steps per env give one full episode and a cut one each."""
    env = make_env("torch", "point_mass", 3, "cpu", seed=0)
    data = collect_dataset(env, lambda obs: -obs["policy"][:, :2], 250, seed=1, noise_std=0.2)
    assert len(data) == 750 and data.obs_dim == 4 and data.action_dim == 2
    assert data.terminals.sum() == 0
    assert np.flatnonzero(data.timeouts).tolist() == [199, 249, 449, 499, 699, 749]
    within = ~data.episode_ends()[:-1]  # next_observations[t] is observations[t+1] inside an episode
    np.testing.assert_array_equal(data.next_observations[:-1][within], data.observations[1:][within])
    # at the time limit it is the true last state (the env already shows the next episode's first)
    assert not np.allclose(data.next_observations[199], data.observations[200])
    assert np.abs(data.actions).max() <= 1.0  # noise clipped to the env's bounds
    # returns recomputed from rewards match what the env reported for the full episodes
    env2 = make_env("torch", "point_mass", 3, "cpu", seed=0)
    obs, total = env2.reset(seed=1), torch.zeros(3)
    acts = torch.as_tensor(data.actions).reshape(3, 250, 2)
    for t in range(200):
        obs, r, *_ = env2.step(acts[:, t])
        total += r
    np.testing.assert_allclose(data.episode_returns()[[0, 2, 4]], total.numpy(), rtol=1e-5)
