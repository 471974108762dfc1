"""D4RL-layout datasets: HDF5 round trip, validation errors, chunk targets and returns by hand,
collection from a vectorized env (episode layout, timeouts, true final observations), and
uniform minibatches on a device (resident or streamed from the host)."""

from __future__ import annotations

import h5py
import numpy as np
import pytest
import torch

from ctrl_rl.runners.episodes import collect_dataset
from ctrl_rl.sims import make_env
from ctrl_rl.storage.dataset import Dataset, DatasetError, read_attrs
from ctrl_rl.storage.sampler import DeviceSampler, device_bytes


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


def _indexed(n: int = 50, next_obs: bool = True) -> Dataset:
    """Row i holds i in every column, so a sampled row names itself."""
    i = np.arange(n, dtype=np.float32)
    return Dataset(observations=np.stack([i, -i], 1), actions=i[:, None], rewards=i, terminals=i % 7 == 0,
                   timeouts=i % 5 == 0, next_observations=np.stack([i + 0.5, -i], 1) if next_obs else None)


def test_device_bytes_is_the_documented_formula():
    data = _indexed(50)  # obs_dim 2, action_dim 1: 4 * 50 * (2*2 + 1 + 1) + 2 * 50
    assert device_bytes(data) == 4 * 50 * (2 * 2 + 1 + 1) + 2 * 50 == 1300
    assert device_bytes(_indexed(50, next_obs=False)) == 1300 - 4 * 50 * 2


def test_sampler_batches_are_rows_of_the_dataset_and_the_same_resident_or_streaming():
    data = _indexed()
    resident = DeviceSampler(data, "cpu", generator=torch.Generator().manual_seed(3))
    streaming = DeviceSampler(data, "cpu", max_device_bytes=1299, generator=torch.Generator().manual_seed(3))
    assert resident.resident and not streaming.resident and not streaming.pinned
    assert DeviceSampler(data, "cpu", max_device_bytes=1300).resident  # exactly fits
    for a, b in zip(resident.batches(16, 5), streaming.batches(16, 5), strict=True):
        assert a.keys() == b.keys() == {"observations", "actions", "rewards", "terminals", "timeouts",
                                        "next_observations"}
        for k in a:
            assert torch.equal(a[k], b[k]), k
        rows = a["rewards"].long()
        torch.testing.assert_close(a["observations"], torch.stack([rows.float(), -rows.float()], 1))
        torch.testing.assert_close(a["actions"][:, 0], rows.float())
        torch.testing.assert_close(a["next_observations"][:, 0], rows.float() + 0.5)
        assert torch.equal(a["terminals"], rows % 7 == 0) and torch.equal(a["timeouts"], rows % 5 == 0)
    other = DeviceSampler(data, "cpu", generator=torch.Generator().manual_seed(4)).sample(16)
    assert not torch.equal(other["rewards"], DeviceSampler(data, "cpu", generator=torch.Generator().manual_seed(3))
                           .sample(16)["rewards"])
    assert "next_observations" not in DeviceSampler(_indexed(next_obs=False), "cpu", max_device_bytes=0).sample(4)


def test_sampler_draws_rows_uniformly():
    """20,000 draws over 50 rows: 400 expected each, sd 19.8; every count within 5 sd."""
    sampler = DeviceSampler(_indexed(), "cpu", max_device_bytes=0)
    counts = torch.bincount(torch.cat([b["rewards"].long() for b in sampler.batches(1000, 20)]), minlength=50)
    assert (counts - 400).abs().max() < 5 * 19.8, counts


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_sampler_streams_through_pinned_memory_on_cuda():
    data = _indexed(1000)
    resident = DeviceSampler(data, "cuda", generator=torch.Generator().manual_seed(0))
    streaming = DeviceSampler(data, "cuda", max_device_bytes=0, generator=torch.Generator().manual_seed(0))
    assert resident.resident and streaming.pinned
    batches = list(streaming.batches(64, 10))  # more than the two staging buffers: reuse waits for the copy
    for a, b in zip(resident.batches(64, 10), batches, strict=True):
        assert b["observations"].is_cuda
        for k in a:
            assert torch.equal(a[k], b[k]), k
