"""Fixed-size on-policy rollout storage ``[T, N, ...]`` on the env's device."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, fields

import torch

from ctrl_rl.nets.memory import Trajectories, trajectories


@dataclass
class Minibatch:
    """One minibatch of flattened ``[B, ...]`` samples for the PPO update."""

    actor_obs: torch.Tensor
    critic_obs: torch.Tensor
    actions: torch.Tensor
    old_log_prob: torch.Tensor
    old_mean: torch.Tensor
    old_std: torch.Tensor
    old_values: torch.Tensor
    advantages: torch.Tensor
    returns: torch.Tensor
    extra: dict[str, torch.Tensor] = field(default_factory=dict)
    """Learner-specific per-sample tensors (FPO's noise, times and flow-matching losses)."""
    collected: int | None = None
    """With symmetry augmentation: the first ``collected`` samples are the collected ones, the rest their
    mirror images. The adaptive-KL signal and the entropy read the collected ones only (as rsl_rl):
    over the twins, the KL would measure how asymmetric the old policy was, not the step size, and
    pin the learning rate at its floor. None: every sample was collected."""
    sequences: Sequences | None = None
    """For a recurrent model: the samples are ``T`` steps of ``B`` whole envs (time-major ``[T * B]``)
    and this says where their trajectories start and from which memory states."""


@dataclass
class Sequences:
    """The trajectory layout of a minibatch of whole envs (``ctrl_rl.nets.memory``)."""

    num_steps: int
    """T: steps per env (the rollout's length)."""
    trajectories: Trajectories
    """Where the envs' episodes start and end inside the rollout."""
    start_states: dict[str, torch.Tensor]
    """Memory states ``[B, k, hidden]`` of the minibatch's envs at the rollout's first step (``actor``,
    and ``critic`` when the critic has a memory)."""


_MINIBATCH_FIELDS = {f.name for f in fields(Minibatch)} - {"extra", "sequences", "collected"}


class RolloutStorage:
    """Holds one collection phase of ``num_steps`` x ``num_envs`` transitions.

    Observations are stored raw (the networks normalize), so an update always sees them
    through the current normalizer. ``critic_obs`` has ``T + 1`` rows: the last is the
    observation after the final step, for bootstrapping. ``final_critic_obs[t]`` is the
    true last observation where an episode ended at step ``t`` (its value bootstraps a
    truncation), and the next observation elsewhere. ``extra_shapes`` adds learner-specific
    per-step tensors (``name -> per-env shape``), given to :meth:`add` by name.
    """

    def __init__(
        self, num_steps: int, num_envs: int, actor_dim: int, critic_dim: int, action_dim: int, device: torch.device,
        extra_shapes: dict[str, tuple[int, ...]] | None = None,
    ):
        T, N = num_steps, num_envs
        self.num_steps, self.num_envs, self.device = T, N, device

        def z(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
            return torch.zeros(*shape, dtype=dtype, device=device)

        self.actor_obs = z(T, N, actor_dim)
        self.critic_obs = z(T + 1, N, critic_dim)
        self.final_critic_obs = z(T, N, critic_dim)
        self.actions = z(T, N, action_dim)
        self.log_prob = z(T, N)
        self.mean = z(T, N, action_dim)
        self.std = z(T, N, action_dim)
        self.rewards = z(T, N)
        self.terminated = z(T, N, dtype=torch.bool)
        self.dones = z(T, N, dtype=torch.bool)
        # filled by the algorithm after the rollout
        self.values = z(T, N)
        self.advantages = z(T, N)
        self.returns = z(T, N)
        self.extra = {k: z(T, N, *shape) for k, shape in (extra_shapes or {}).items()}
        self.step = 0

    def new_like(self) -> RolloutStorage:
        """An empty storage of the same sizes, extras and device (PROPS's ring of rollouts)."""
        return RolloutStorage(self.num_steps, self.num_envs, self.actor_obs.shape[-1], self.critic_obs.shape[-1],
                              self.actions.shape[-1], self.device,
                              extra_shapes={k: tuple(v.shape[2:]) for k, v in self.extra.items()})

    def add(
        self,
        actor_obs: torch.Tensor,
        critic_obs: torch.Tensor,
        actions: torch.Tensor,
        log_prob: torch.Tensor,
        mean: torch.Tensor,
        std: torch.Tensor,
        **extra: torch.Tensor,
    ) -> None:
        """Record what the policy saw and did at the current step (``extra``: see ``extra_shapes``)."""
        t = self.step
        if t >= self.num_steps:
            raise RuntimeError("RolloutStorage is full: call clear() after the update")
        self.actor_obs[t] = actor_obs
        if t == 0:  # later rows were written by add_outcome as the previous step's next obs
            self.critic_obs[0] = critic_obs
        self.actions[t] = actions
        self.log_prob[t] = log_prob
        self.mean[t] = mean
        self.std[t] = std
        for k, v in extra.items():
            self.extra[k][t] = v

    def add_outcome(
        self,
        rewards: torch.Tensor,
        terminated: torch.Tensor,
        truncated: torch.Tensor,
        next_critic_obs: torch.Tensor,
        final_critic_obs: torch.Tensor,
    ) -> None:
        """Record what the env answered to the current step, then advance."""
        t = self.step
        self.rewards[t] = rewards
        self.terminated[t] = terminated
        self.dones[t] = terminated | truncated
        self.final_critic_obs[t] = final_critic_obs
        self.critic_obs[t + 1] = next_critic_obs
        self.step += 1

    @property
    def full(self) -> bool:
        return self.step == self.num_steps

    def clear(self) -> None:
        self.step = 0

    _FIELDS = ("actor_obs", "critic_obs", "final_critic_obs", "actions", "log_prob", "mean", "std", "rewards",
               "terminated", "dones", "values", "advantages", "returns")

    def state_dict(self) -> dict[str, torch.Tensor | int]:
        """Contents, for learners that keep rollouts across iterations (PROPS)."""
        return {**{k: getattr(self, k) for k in self._FIELDS}, "extra": self.extra, "step": self.step}

    def load_state_dict(self, state: dict) -> None:
        for k in self._FIELDS:
            getattr(self, k).copy_(state[k])
        for k, v in self.extra.items():
            v.copy_(state["extra"][k])
        self.step = int(state["step"])

    def flat(self) -> dict[str, torch.Tensor]:
        """Every sample as ``[T * N, ...]`` views, keyed like :class:`Minibatch`'s fields."""
        total = self.num_steps * self.num_envs
        return {
            "actor_obs": self.actor_obs.reshape(total, -1),
            "critic_obs": self.critic_obs[:-1].reshape(total, -1),
            "actions": self.actions.reshape(total, -1),
            "old_log_prob": self.log_prob.reshape(total),
            "old_mean": self.mean.reshape(total, -1),
            "old_std": self.std.reshape(total, -1),
            "old_values": self.values.reshape(total),
            "advantages": self.advantages.reshape(total),
            "returns": self.returns.reshape(total),
            **{k: v.reshape(total, *v.shape[2:]) for k, v in self.extra.items()},
        }

    def minibatches(
        self, num_minibatches: int, generator: torch.Generator, advantages: torch.Tensor | None = None
    ) -> Iterator[Minibatch]:
        """One epoch of :func:`minibatches` over this rollout; ``advantages`` overrides the stored ones."""
        flat = self.flat()
        if advantages is not None:
            flat["advantages"] = advantages.reshape(-1)
        return minibatches(flat, num_minibatches, generator)


def minibatch_indices(total: int, num_minibatches: int, generator: torch.Generator,
                      device: torch.device) -> Iterator[torch.Tensor]:
    """One epoch: a fresh random partition of ``range(total)`` into ``num_minibatches`` index sets.

    Called once per epoch so every epoch gets its own permutation (rsl_rl reuses one for all
    epochs); a remainder of ``total mod num_minibatches`` samples sits out that epoch.
    """
    size = total // num_minibatches
    perm = torch.randperm(total, generator=generator, device=generator.device).to(device)
    for i in range(num_minibatches):
        yield perm[i * size : (i + 1) * size]


def minibatches(flat: dict[str, torch.Tensor], num_minibatches: int, generator: torch.Generator) -> Iterator[Minibatch]:
    """One epoch of :func:`minibatch_indices` over the ``[B, ...]`` samples in ``flat``."""
    actions = flat["actions"]
    for idx in minibatch_indices(actions.shape[0], num_minibatches, generator, actions.device):
        mb = {k: v[idx] for k, v in flat.items()}
        yield Minibatch(**{k: mb.pop(k) for k in _MINIBATCH_FIELDS}, extra=mb)


def env_minibatches(flat: dict[str, torch.Tensor], num_steps: int, dones: torch.Tensor,
                    start_states: dict[str, torch.Tensor], num_minibatches: int,
                    generator: torch.Generator) -> Iterator[Minibatch]:
    """One epoch over whole envs, for a recurrent model: a fresh random partition of the envs into
    ``num_minibatches`` sets, each minibatch all ``num_steps`` steps of its envs (time-major) with
    their trajectories (cut at ``dones`` ``[T, N]``) and memory ``start_states`` (``[N, k, hidden]``)."""
    T, n = num_steps, dones.shape[1]
    for idx in minibatch_indices(n, num_minibatches, generator, dones.device):
        mb = {k: v.reshape(T, n, *v.shape[1:])[:, idx].reshape(T * len(idx), *v.shape[1:]) for k, v in flat.items()}
        seq = Sequences(T, trajectories(dones[:, idx]), {k: v[idx] for k, v in start_states.items()})
        yield Minibatch(**{k: mb.pop(k) for k in _MINIBATCH_FIELDS}, extra=mb, sequences=seq)
