"""Per-env ring replay ``[C, N, ...]`` for off-policy learners (SAC, PQL), n-step returns at sample time."""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

# Leave this much of the free memory to everything else (networks, the simulator, optimizer state).
MEMORY_HEADROOM = 0.9


@dataclass
class ReplayBatch:
    """``B`` sampled n-step transitions; the TD target is ``rewards + discount * Q'(next_obs, a')``."""

    actor_obs: torch.Tensor  # [B, actor_dim]   s_t
    critic_obs: torch.Tensor  # [B, critic_dim]  s_t as the critic sees it (asymmetric actor-critic)
    actions: torch.Tensor  # [B, action_dim]
    rewards: torch.Tensor  # [B]  sum_{k<m} gamma^k r_{t+k}
    next_actor_obs: torch.Tensor  # [B, actor_dim]  s_{t+m}: the true final obs where the window ended an episode
    next_critic_obs: torch.Tensor  # [B, critic_dim]
    discount: torch.Tensor  # [B]  gamma^m * (1 - terminated_{t+m-1})


def available_memory(device: torch.device) -> int | None:
    """Free bytes on ``device`` (None where we cannot tell, e.g. MPS)."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device if device.index is not None else None)[0]
    if device.type != "cpu":
        return None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


class ReplayBuffer:
    """One ring of ``capacity // num_envs`` steps per env, all rings advancing together.

    Layout ``[capacity_per_env, num_envs, dim]``: one ``add`` writes one row, so all envs share
    one write pointer and each env's column is its own chronological history. The next obs is
    stored per step (not read from row ``t + 1``) because where an episode ended, row ``t + 1``
    holds the next episode's first obs while the bootstrap needs the true ``final_obs``.

    Nothing stored depends on ``n_step`` or ``gamma``: windows are cut and discounted in
    :meth:`gather`, so a buffer saved with one ``n_step`` loads into a learner with another.

    Newest-steps rule: the newest ``n_step - 1`` steps of every env are never sampled as a window
    start, even where an episode end would close the window early. They become sampleable as soon
    as the following steps are written, so nothing is lost, and every env keeps the same number of
    valid starts, which keeps sampling one ``randint`` (uniform, no host sync).
    """

    def __init__(
        self,
        num_envs: int,
        capacity: int,
        actor_dim: int,
        critic_dim: int,
        action_dim: int,
        device: torch.device | str,
        n_step: int = 1,
        gamma: float = 0.99,
        share_critic_obs: bool = False,
    ):
        if n_step < 1:
            raise ValueError(f"n_step must be >= 1, got {n_step}")
        per_env = capacity // num_envs
        if per_env < n_step + 1:
            raise ValueError(
                f"replay capacity {capacity:,} over {num_envs:,} envs leaves {per_env:,} steps per env, fewer than "
                f"n_step + 1 = {n_step + 1}: raise algo.buffer_size (to at least {(n_step + 1) * num_envs:,}) "
                f"or lower env.num_envs"
            )
        if share_critic_obs and critic_dim != actor_dim:
            raise ValueError(
                f"share_critic_obs=True stores the critic obs as the actor obs, but critic_dim={critic_dim} "
                f"!= actor_dim={actor_dim}: the critic has privileged obs, so turn share_critic_obs off"
            )
        C, N = per_env, num_envs
        self.num_envs, self.capacity_per_env, self.device = N, C, torch.device(device)
        self.actor_dim, self.critic_dim, self.action_dim = actor_dim, critic_dim, action_dim
        self.n_step, self.gamma, self.share_critic_obs = n_step, gamma, share_critic_obs

        obs_floats = 2 * actor_dim + (0 if share_critic_obs else 2 * critic_dim)
        self.bytes_per_transition = 4 * (obs_floats + action_dim + 1) + 2  # float32 obs/actions/reward, 2 bools
        self._check_memory(C * N * self.bytes_per_transition)

        def z(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
            return torch.zeros(*shape, dtype=dtype, device=self.device)

        self.actor_obs = z(C, N, actor_dim)
        self.next_actor_obs = z(C, N, actor_dim)
        self.critic_obs = self.actor_obs if share_critic_obs else z(C, N, critic_dim)
        self.next_critic_obs = self.next_actor_obs if share_critic_obs else z(C, N, critic_dim)
        self.actions = z(C, N, action_dim)
        self.rewards = z(C, N)
        self.terminated = z(C, N, dtype=torch.bool)
        self.done = z(C, N, dtype=torch.bool)  # terminated | truncated: where an n-step window stops
        self.ptr = 0  # next row to write
        self.size = 0  # rows written per env, <= capacity_per_env
        # gamma^k for the reward sum (k < n) and gamma^m for the bootstrap (m <= n)
        self._gamma_pow = (gamma ** torch.arange(n_step + 1, dtype=torch.float64)).float().to(self.device)
        self._k = torch.arange(n_step, device=self.device)

    def _check_memory(self, needed: int) -> None:
        free = available_memory(self.device)
        if free is None or needed <= MEMORY_HEADROOM * free:
            return
        fits = int(MEMORY_HEADROOM * free) // self.bytes_per_transition // self.num_envs * self.num_envs
        raise MemoryError(
            f"replay needs {needed / 1e6:,.1f} MB on {self.device} for {self.capacity_per_env * self.num_envs:,} "
            f"transitions but only {free / 1e6:,.1f} MB is available ({MEMORY_HEADROOM:.0%} usable): "
            f"lower algo.buffer_size (e.g. algo.buffer_size={fits})"
        )

    def add(
        self,
        actor_obs: torch.Tensor,
        critic_obs: torch.Tensor | None,
        actions: torch.Tensor,
        rewards: torch.Tensor,
        terminated: torch.Tensor,
        truncated: torch.Tensor,
        next_actor_obs: torch.Tensor,
        next_critic_obs: torch.Tensor | None,
    ) -> None:
        """Record one env step of all envs; ``next_*`` hold ``final_obs`` rows where an episode ended.

        With ``share_critic_obs`` the critic arguments are ignored (pass None).
        """
        p, N = self.ptr, self.num_envs
        self.actor_obs[p] = actor_obs
        self.next_actor_obs[p] = next_actor_obs
        if not self.share_critic_obs:
            self.critic_obs[p] = critic_obs
            self.next_critic_obs[p] = next_critic_obs
        self.actions[p] = actions
        self.rewards[p] = rewards.reshape(N)
        term = terminated.reshape(N).bool()
        self.terminated[p] = term
        self.done[p] = term | truncated.reshape(N).bool()
        self.ptr = (p + 1) % self.capacity_per_env
        self.size = min(self.size + 1, self.capacity_per_env)

    def __len__(self) -> int:
        return self.size * self.num_envs

    @property
    def num_sampleable(self) -> int:
        """Transitions :meth:`sample` draws from: all but each env's newest ``n_step - 1``."""
        return max(0, self.size - self.n_step + 1) * self.num_envs

    def sample(self, batch_size: int, generator: torch.Generator | None = None) -> ReplayBatch:
        """``batch_size`` transitions uniform over every env and every valid start (with replacement)."""
        valid = self.size - self.n_step + 1  # window starts per env, same for all envs
        if valid < 1:
            raise RuntimeError(
                f"replay holds {self.size} steps per env, sampling {self.n_step}-step windows needs {self.n_step}: "
                f"collect more steps before the first update (raise algo.learning_starts)"
            )
        dev = generator.device if generator is not None else self.device
        flat = torch.randint(valid * self.num_envs, (batch_size,), generator=generator, device=dev).to(self.device)
        return self.gather(flat % self.num_envs, flat // self.num_envs)

    def gather(self, env_idx: torch.Tensor, time_idx: torch.Tensor) -> ReplayBatch:
        """The n-step transitions starting at ``time_idx`` (0 = oldest stored step) in env ``env_idx``.

        Caller's contract: ``0 <= time_idx <= size - n_step`` so the window lies in written data;
        counting from the oldest step keeps every window on the chronological side of the write pointer.
        The window stops after its first done step ``m``: reward ``sum_{k<m} gamma^k r_{t+k}``, next obs
        stored at ``t+m-1`` (the true final obs there), discount ``gamma^m`` or 0 where that step terminated.
        """
        C, N, n = self.capacity_per_env, self.num_envs, self.n_step
        env_idx, time_idx = env_idx.to(self.device).long(), time_idx.to(self.device).long()
        oldest = (self.ptr - self.size) % C
        rows = (oldest + time_idx[:, None] + self._k) % C  # [B, n] physical rows of the window
        cells = rows * N + env_idx[:, None]  # [B, n] into the flattened [C * N] layout
        done = self.done.view(-1)[cells]
        # step k counts while no earlier step of the window ended an episode
        alive = torch.ones_like(done)
        alive[:, 1:] = torch.cumprod(~done[:, :-1], dim=1).bool()
        m = alive.sum(1)  # window length, 1..n
        rewards = (self.rewards.view(-1)[cells] * alive * self._gamma_pow[:n]).sum(1)
        first, last = cells[:, 0].contiguous(), cells.gather(1, (m - 1)[:, None]).squeeze(1)
        discount = self._gamma_pow[m] * (~self.terminated.view(-1)[last])

        def rows_of(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
            return x.view(C * N, -1).index_select(0, idx)  # several times faster than x[idx] on CPU

        actor_obs, next_actor_obs = rows_of(self.actor_obs, first), rows_of(self.next_actor_obs, last)
        if self.share_critic_obs:
            critic_obs, next_critic_obs = actor_obs, next_actor_obs
        else:
            critic_obs, next_critic_obs = rows_of(self.critic_obs, first), rows_of(self.next_critic_obs, last)
        return ReplayBatch(
            actor_obs=actor_obs,
            critic_obs=critic_obs,
            actions=rows_of(self.actions, first),
            rewards=rewards,
            next_actor_obs=next_actor_obs,
            next_critic_obs=next_critic_obs,
            discount=discount,
        )

    @property
    def nbytes(self) -> int:
        """Bytes held by the storage tensors (shared critic obs counted once)."""
        return self.capacity_per_env * self.num_envs * self.bytes_per_transition

    def describe(self) -> str:
        C, N = self.capacity_per_env, self.num_envs
        mb = self.nbytes / 1e6
        return f"replay: {C * N:,} transitions ({C:,} per env x {N:,} envs), {mb:.1f} MB on {self.device}"

    def _tensors(self) -> dict[str, torch.Tensor]:
        names = ["actor_obs", "next_actor_obs", "actions", "rewards", "terminated", "done"]
        if not self.share_critic_obs:
            names += ["critic_obs", "next_critic_obs"]
        return {k: getattr(self, k) for k in names}

    def state_dict(self) -> dict:
        """Contents and pointers for exact resume; only the written rows (before the first wrap, rows ``[0, size)``)."""
        rows = self.size
        full = rows == self.capacity_per_env
        return {
            "num_envs": self.num_envs,
            "capacity_per_env": self.capacity_per_env,
            "share_critic_obs": self.share_critic_obs,
            "ptr": self.ptr,
            "size": self.size,
            # torch.save writes a view's whole storage, so partial buffers are cloned to stay small
            **{k: v if full else v[:rows].clone() for k, v in self._tensors().items()},
        }

    def load_state_dict(self, d: dict) -> None:
        mine = (self.num_envs, self.capacity_per_env, self.share_critic_obs)
        theirs = (d["num_envs"], d["capacity_per_env"], d["share_critic_obs"])
        if mine != theirs:
            raise ValueError(
                f"replay checkpoint has (num_envs, capacity_per_env, share_critic_obs)={theirs}, this buffer {mine}: "
                f"resume with the same env.num_envs, algo.buffer_size and critic obs, or start a fresh buffer"
            )
        for k, v in self._tensors().items():
            if d[k].shape[1:] != v.shape[1:]:
                raise ValueError(f"replay checkpoint {k} has shape {tuple(d[k].shape)}, this buffer {tuple(v.shape)}")
            v[: d["size"]].copy_(d[k])
        self.ptr, self.size = d["ptr"], d["size"]
