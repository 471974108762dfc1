"""Replay storage: hand-computed n-step windows, per-env isolation, ring wrap, uniform sampling, resume, guards."""

import io

import pytest
import torch

from ctrl_rl.storage import replay as replay_mod
from ctrl_rl.storage.replay import ReplayBuffer

G = 0.5  # gamma: powers of two keep the hand arithmetic exact
R = [[1, 2, 4, 8, 16, 32, 64], [10, 20, 30, 40, 50, 60, 70]]  # rewards[env][t]
TERMINATED = {(0, 1), (1, 6)}  # (env, t)
TRUNCATED = {(0, 3)}


def critic(x: torch.Tensor) -> torch.Tensor:
    """Asymmetric critic obs [x, 1000 + x]: a different dim, traceable back to the actor obs."""
    return torch.stack([x, 1000 + x], dim=-1)


def episode_buffer(n_step: int, device: str = "cpu", **kw) -> ReplayBuffer:
    """2 envs x 7 steps. Obs at step t is t (env 0) / 100 + t (env 1); the next obs is obs + 1, or the
    true final obs obs + 0.5 where the step ended an episode (the reset obs at t + 1 is then obs + 1)."""
    buf = ReplayBuffer(2, 16, actor_dim=1, critic_dim=2, action_dim=1, device=device, n_step=n_step, gamma=G, **kw)
    for t in range(7):
        x = torch.tensor([t, 100.0 + t])
        term = torch.tensor([(e, t) in TERMINATED for e in range(2)])
        trunc = torch.tensor([(e, t) in TRUNCATED for e in range(2)])
        nxt = torch.where(term | trunc, x + 0.5, x + 1)
        rew = torch.tensor([R[0][t], R[1][t]], dtype=torch.float32)
        buf.add(x[:, None], critic(x), (x + 0.25)[:, None], rew, term, trunc, nxt[:, None], critic(nxt))
    return buf


def window(buf: ReplayBuffer, env: int, times: list[int]):
    b = buf.gather(torch.full((len(times),), env), torch.tensor(times))
    return b, b.rewards.tolist(), b.next_actor_obs[:, 0].tolist(), b.discount.tolist()


def test_three_step_env0_terminations_and_truncations():
    buf = episode_buffer(3)
    b, rew, nxt, disc = window(buf, 0, [0, 1, 2, 3, 4])
    # t=0: r0 + .5 r1 = 1 + 1 = 2, step 1 terminated -> m=2, next = final obs 1.5, no bootstrap
    # t=1: m=1, r1 = 2, terminated -> discount 0
    # t=2: 4 + .5*8 = 8, step 3 truncated -> m=2, bootstrap from final obs 3.5 with .5^2
    # t=3: m=1, 8, truncated -> .5^1
    # t=4: 16 + .5*32 + .25*64 = 48, full window -> next = obs after step 6 = 7, .5^3
    assert rew == [2.0, 2.0, 8.0, 8.0, 48.0]
    assert nxt == [1.5, 1.5, 3.5, 3.5, 7.0]
    assert disc == [0.0, 0.0, 0.25, 0.5, 0.125]
    assert b.actor_obs[:, 0].tolist() == [0, 1, 2, 3, 4]
    assert b.actions[:, 0].tolist() == [0.25, 1.25, 2.25, 3.25, 4.25]
    assert b.critic_obs.tolist() == critic(torch.tensor([0.0, 1, 2, 3, 4])).tolist()
    assert b.next_critic_obs.tolist() == critic(torch.tensor([1.5, 1.5, 3.5, 3.5, 7.0])).tolist()


def test_three_step_env1_is_isolated_from_env0():
    buf = episode_buffer(3)
    _, rew, nxt, disc = window(buf, 1, [0, 1, 2, 3, 4])
    # env 0's episode ends at t=1 and t=3 do not cut env 1's windows; only env 1's rewards appear
    # t=0: 10 + .5*20 + .25*30 = 27.5   t=1: 20 + 15 + 10 = 45   t=2: 30 + 20 + 12.5 = 62.5
    # t=3: 40 + 25 + 15 = 80            t=4: 50 + 30 + 17.5 = 97.5, step 6 terminates -> m=3, discount 0
    assert rew == [27.5, 45.0, 62.5, 80.0, 97.5]
    assert nxt == [103.0, 104.0, 105.0, 106.0, 106.5]
    assert disc == [0.125, 0.125, 0.125, 0.125, 0.0]


def test_one_step_is_plain_td():
    buf = episode_buffer(1)
    _, rew, nxt, disc = window(buf, 0, list(range(7)))
    assert rew == [1, 2, 4, 8, 16, 32, 64]
    assert nxt == [1.0, 1.5, 3.0, 3.5, 5.0, 6.0, 7.0]
    assert disc == [0.5, 0.0, 0.5, 0.5, 0.5, 0.5, 0.5]  # terminated at t=1 only; truncated t=3 bootstraps
    _, rew, nxt, disc = window(buf, 1, list(range(7)))
    assert rew == [10, 20, 30, 40, 50, 60, 70]
    assert nxt == [101.0, 102.0, 103.0, 104.0, 105.0, 106.0, 106.5]
    assert disc == [0.5] * 6 + [0.0]


def test_n_step_changes_nothing_stored():
    one = episode_buffer(1)
    one.load_state_dict(episode_buffer(3).state_dict())
    _, rew, _, disc = window(one, 0, list(range(7)))
    assert rew == [1, 2, 4, 8, 16, 32, 64]
    assert disc == [0.5, 0.0, 0.5, 0.5, 0.5, 0.5, 0.5]


def test_newest_steps_are_never_window_starts():
    buf = episode_buffer(3)
    assert len(buf) == 14 and buf.num_sampleable == 10  # 7 steps x 2 envs stored, starts 0..4 per env
    b = buf.sample(2000, torch.Generator().manual_seed(0))
    starts = b.actor_obs[:, 0] % 100
    # steps 5 and 6 have no full 3-step window yet (step 6's own episode end would close its window,
    # but the rule excludes the newest n-1 steps always)
    assert set(starts.tolist()) == {0.0, 1.0, 2.0, 3.0, 4.0}


def test_sample_needs_a_full_window():
    buf = ReplayBuffer(2, 16, 1, 1, 1, "cpu", n_step=3)
    z = torch.zeros(2, 1)
    f = torch.zeros(2, dtype=torch.bool)
    for _ in range(2):
        buf.add(z, z, z, torch.zeros(2), f, f, z, z)
    with pytest.raises(RuntimeError, match="learning_starts"):
        buf.sample(4)
    buf.add(z, z, z, torch.zeros(2), f, f, z, z)
    assert buf.sample(4).rewards.shape == (4,)


def wrapped_buffer() -> ReplayBuffer:
    """2 envs, 4 steps per env, 6 steps written: steps 4, 5 overwrote rows 0, 1 (steps 0, 1)."""
    buf = ReplayBuffer(2, 8, 1, 1, 1, "cpu", n_step=2, gamma=G)
    f = torch.zeros(2, dtype=torch.bool)
    for t in range(6):
        x = torch.tensor([[t], [100.0 + t]])
        rew = torch.tensor([t + 1.0, 10.0 * (t + 1)])
        buf.add(x, x, x, rew, f, f, x + 1, x + 1)
    return buf


def test_ring_wraps_and_windows_stop_at_the_write_pointer():
    buf = wrapped_buffer()
    assert (buf.ptr, buf.size, len(buf), buf.num_sampleable) == (2, 4, 8, 6)
    _, rew, nxt, disc = window(buf, 0, [0, 1, 2])  # oldest stored = step 2
    # step 2: 3 + .5*4 = 5   step 3: 4 + .5*5 = 6.5   step 4 (rows 0 -> 1 across the wrap): 5 + .5*6 = 8
    assert rew == [5.0, 6.5, 8.0]
    assert nxt == [4.0, 5.0, 6.0]
    assert disc == [0.25, 0.25, 0.25]
    _, rew, _, _ = window(buf, 1, [2])
    assert rew == [50.0 + 0.5 * 60.0]
    # step 5 would read row 2 (step 2, older data) as its next step: never a start
    b = buf.sample(1000, torch.Generator().manual_seed(1))
    assert set(b.actor_obs[:, 0].tolist()) == {2.0, 3.0, 4.0, 102.0, 103.0, 104.0}
    steps = b.actor_obs[:, 0] % 100
    assert torch.equal(b.rewards, torch.where(b.actor_obs[:, 0] < 100, 1, 10) * (steps + 1 + 0.5 * (steps + 2)))


def test_sampling_is_uniform_over_envs_and_times():
    N, T = 3, 10
    buf = ReplayBuffer(N, N * T, 1, 1, 1, "cpu", n_step=3)
    f = torch.zeros(N, dtype=torch.bool)
    for t in range(T):
        x = (100 * torch.arange(N) + t).float()[:, None]
        buf.add(x, x, x, torch.zeros(N), f, f, x, x)
    b = buf.sample(24_000, torch.Generator().manual_seed(2))
    counts = torch.bincount(b.actor_obs[:, 0].long(), minlength=300).reshape(N, 100)[:, :T]
    # 3 envs x 8 valid starts = 24 cells, 1000 expected each (std ~31); starts 8, 9 never drawn
    assert counts[:, 8:].sum() == 0
    assert counts[:, :8].min() > 850 and counts[:, :8].max() < 1150


def test_state_dict_round_trip_resumes_exactly():
    for make in (lambda: episode_buffer(3), wrapped_buffer):
        src = make()
        blob = io.BytesIO()
        torch.save(src.state_dict(), blob)
        blob.seek(0)
        dst = ReplayBuffer(src.num_envs, src.capacity_per_env * src.num_envs, 1, src.critic_dim, 1, "cpu",
                           n_step=src.n_step, gamma=G)
        dst.load_state_dict(torch.load(blob))
        assert (dst.ptr, dst.size) == (src.ptr, src.size)
        a, b = src.sample(64, torch.Generator().manual_seed(3)), dst.sample(64, torch.Generator().manual_seed(3))
        for k in a.__dataclass_fields__:
            assert torch.equal(getattr(a, k), getattr(b, k)), k
        # the write pointer resumes too: one more step lands in the same row of both
        for buf in (src, dst):
            x = torch.full((2, 1), 7.0)
            buf.add(x, x.expand(2, src.critic_dim), x, torch.ones(2), torch.zeros(2), torch.zeros(2), x,
                    x.expand(2, src.critic_dim))
        assert torch.equal(src.actor_obs, dst.actor_obs) and src.ptr == dst.ptr


def test_load_rejects_a_different_layout():
    d = episode_buffer(3).state_dict()
    other = ReplayBuffer(2, 32, 1, 2, 1, "cpu")
    with pytest.raises(ValueError, match="algo.buffer_size"):
        other.load_state_dict(d)


def test_memory_error_names_sizes_and_fix(monkeypatch):
    monkeypatch.setattr(replay_mod, "available_memory", lambda device: 10_000_000)
    # 4*(2*8 + 2*8 + 2 + 1) + 2 = 142 bytes/transition; 100,000 x 142 = 14.2 MB > 90% of 10 MB
    # largest that fits: 9,000,000 // 142 = 63,380 (a multiple of 4 envs)
    with pytest.raises(MemoryError) as err:
        ReplayBuffer(4, 100_000, actor_dim=8, critic_dim=8, action_dim=2, device="cpu")
    msg = str(err.value)
    assert "14.2 MB" in msg and "10.0 MB" in msg and "algo.buffer_size=63380" in msg


def test_capacity_error_names_fix():
    with pytest.raises(ValueError) as err:
        ReplayBuffer(64, 100, 4, 4, 2, "cpu", n_step=3)  # 1 step per env < n_step + 1 = 4
    msg = str(err.value)
    assert "algo.buffer_size" in msg and "env.num_envs" in msg and "256" in msg


def test_share_critic_obs_stores_one_copy():
    shared = ReplayBuffer(2, 16, 3, 3, 1, "cpu", share_critic_obs=True)
    separate = ReplayBuffer(2, 16, 3, 3, 1, "cpu")
    # 4*(2*3 + 1 + 1) + 2 = 34 vs 4*(4*3 + 1 + 1) + 2 = 58 bytes per transition, 16 transitions
    assert (shared.nbytes, separate.nbytes) == (16 * 34, 16 * 58)
    assert shared.critic_obs is shared.actor_obs
    f = torch.zeros(2, dtype=torch.bool)
    for t in range(3):
        x = torch.full((2, 3), float(t))
        shared.add(x, None, x[:, :1], torch.ones(2), f, f, x + 1, None)
    b = shared.gather(torch.tensor([0, 1]), torch.tensor([1, 2]))
    assert torch.equal(b.critic_obs, b.actor_obs) and torch.equal(b.next_critic_obs, b.next_actor_obs)
    assert b.actor_obs[:, 0].tolist() == [1.0, 2.0] and b.next_critic_obs[:, 0].tolist() == [2.0, 3.0]
    assert "critic_obs" not in shared.state_dict()
    with pytest.raises(ValueError, match="share_critic_obs"):
        ReplayBuffer(2, 16, 3, 5, 1, "cpu", share_critic_obs=True)


def test_describe():
    # meta tensors: the layout of a 1M buffer without allocating it (and no memory check)
    buf = ReplayBuffer(64, 1_000_000, actor_dim=48, critic_dim=48, action_dim=12, device="meta", n_step=3)
    # 4*(2*48 + 2*48 + 12 + 1) + 2 = 822 bytes per transition
    assert buf.describe() == "replay: 1,000,000 transitions (15,625 per env x 64 envs), 822.0 MB on meta"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_matches_cpu_and_samples_without_host_sync():
    cpu, gpu = episode_buffer(3), episode_buffer(3, device="cuda")
    env, t = torch.tensor([0, 0, 1, 1]), torch.tensor([0, 2, 3, 4])
    a, b = cpu.gather(env, t), gpu.gather(env.cuda(), t.cuda())
    for k in a.__dataclass_fields__:
        assert torch.equal(getattr(a, k), getattr(b, k).cpu()), k
    g = torch.Generator(device="cuda").manual_seed(0)
    gpu.sample(8, g)  # warm up lazy CUDA init outside the check
    torch.cuda.set_sync_debug_mode("error")
    try:
        batch = gpu.sample(256, g)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert batch.rewards.is_cuda
