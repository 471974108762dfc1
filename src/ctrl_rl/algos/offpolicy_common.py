"""What the off-policy learners (SAC, PQL) share: construction, replay, critic readout, checkpoints.

Both keep an actor-critic model over observation groups, an n-step replay of per-env rings, a C51
support for the distributional critics and the last step's inputs until the env answers; their
checkpoints share the model, both optimizers and the step count. The learner-specific parts
(temperature, roles, random streams) stay in ``sac.py`` and ``pql.py``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

import torch
from torch import nn

from ctrl_rl import distributed
from ctrl_rl.algos.base import Learner
from ctrl_rl.algos.offpolicy_losses import categorical_mean, categorical_support
from ctrl_rl.env import Obs
from ctrl_rl.nets.groups import GroupedModel
from ctrl_rl.storage.replay import ReplayBuffer

if TYPE_CHECKING:
    from ctrl_rl.config_offpolicy import OffPolicyConfig

log = logging.getLogger(__name__)

ConfigT = TypeVar("ConfigT", bound="OffPolicyConfig")
ModelT = TypeVar("ModelT", bound=GroupedModel)


class OffPolicyLearner(Learner, Generic[ConfigT, ModelT]):
    """Base of the off-policy learners.

    A subclass names its ``model_class`` (built as ``model_class(obs_dims, action_dim, cfg,
    action_bounds)``), creates ``actor_optimizer``, ``critic_optimizer``, its random streams and,
    unless ``inference_only``, its buffers in :meth:`_setup`, and extends the checkpoint methods with
    its own state (calling these first).
    """

    model_class: ClassVar[type[GroupedModel]]
    cfg: ConfigT
    model: ModelT
    actor_optimizer: torch.optim.Optimizer
    critic_optimizer: torch.optim.Optimizer

    def __init__(self, cfg: ConfigT, obs_dims: dict[str, int], action_dim: int, num_envs: int,
                 device: torch.device | str, seed: int = 0, action_bounds: tuple[float, float] | None = (-1.0, 1.0),
                 inference_only: bool = False):
        self.cfg = cfg
        self.device = torch.device(device)
        self.num_envs, self.action_dim = num_envs, action_dim
        self.model = self.model_class(obs_dims, action_dim, cfg, action_bounds).to(self.device)
        self.support = categorical_support(cfg.v_min, cfg.v_max, cfg.num_atoms, device=self.device)
        self.env_steps = 0
        self.replay: ReplayBuffer | None = None
        self._last: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None
        """``(actor_in, critic_in, action)`` of the last :meth:`act`, until :meth:`process_step` stores it."""
        self._setup(seed, inference_only)

    def _setup(self, seed: int, inference_only: bool) -> None:
        """Optimizers, random streams and (unless ``inference_only``) buffers of the subclass."""
        raise NotImplementedError

    def _new_replay(self) -> ReplayBuffer:
        """An n-step replay sized for the model's inputs (one copy of the obs where both nets read the same)."""
        cfg, m = self.cfg, self.model
        return ReplayBuffer(self.num_envs, cfg.buffer_size, m.actor_dim, m.critic_dim, self.action_dim, self.device,
                            n_step=cfg.n_step, gamma=cfg.gamma, share_critic_obs=m.shares_obs)

    def _observe(self, obs: Obs) -> tuple[torch.Tensor, torch.Tensor]:
        """The actor's and the critic's inputs for ``obs``, after folding them into the normalizers."""
        actor_in, critic_in = self.model.actor_input(obs), self.model.critic_input(obs)
        self.model.update_normalizers(actor_in, critic_in)
        return actor_in, critic_in

    def _uniform_actions(self, num: int, generator: torch.Generator) -> torch.Tensor:
        """``[num, action_dim]`` actions uniform in [-1, 1]: the warm-up before ``learning_starts``."""
        return torch.rand(num, self.action_dim, generator=generator, device=self.device) * 2 - 1

    def _next_inputs(self, next_obs: Obs, info: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
        """The inputs a transition bootstraps from: ``final_obs`` where an episode ended, never the
        next episode's first observation."""
        final = info.get("final_obs", next_obs)
        return self.model.actor_input(final), self.model.critic_input(final)

    def _q_values(self, out: torch.Tensor) -> torch.Tensor:
        """``[E, B]`` expected values of the critics' outputs."""
        return categorical_mean(out.softmax(-1), self.support) if self.cfg.distributional else out.squeeze(-1)

    def _step(self, optimizer: torch.optim.Optimizer, loss: torch.Tensor, module: nn.Module | None) -> None:
        """One optimizer step on ``loss``. Backpropagates into this optimizer's parameters only: the
        actor's loss runs through the critics, whose weight gradients it would otherwise compute
        (two of the ensemble's batched matmuls per layer) only for the next critic step to drop."""
        params = [p for g in optimizer.param_groups for p in g["params"]]
        optimizer.zero_grad(set_to_none=True)
        loss.backward(inputs=params)
        distributed.all_reduce_grads(params)
        if module is not None and self.cfg.max_grad_norm > 0:
            nn.utils.clip_grad_norm_(module.parameters(), self.cfg.max_grad_norm)
        optimizer.step()

    # ------------------------------------------------------------------ inference / io
    def inference_policy(self) -> nn.Module:
        """The deterministic actor (its normalizer inside, actions in env units): what export runs."""
        return self.model.actor

    def state_dict(self) -> dict[str, Any]:
        return {
            "model": self.model.state_dict(),
            "actor_optimizer": self.actor_optimizer.state_dict(),
            "critic_optimizer": self.critic_optimizer.state_dict(),
            "env_steps": self.env_steps,
        }

    def load_state_dict(self, state: dict[str, Any], restore_rng: bool = True) -> None:
        """Restore a checkpoint; ``restore_rng=False`` for inference (eval/export on any device)."""
        self.model.load_state_dict(state["model"])
        self.env_steps = state["env_steps"]
        if restore_rng:
            self.actor_optimizer.load_state_dict(state["actor_optimizer"])
            self.critic_optimizer.load_state_dict(state["critic_optimizer"])

    def _load_generators(self, generators: Mapping[str, torch.Generator], states: Mapping[str, Any]) -> None:
        """Restore saved generator states; states from another device type (CPU and CUDA layouts
        differ) leave the generators as seeded, with a warning."""
        try:
            for name, g in generators.items():
                g.set_state(states[name])
        except RuntimeError:
            log.warning("%s RNG state comes from another device type: reseeded", type(self).__name__)

    keeps_replay = True

    def replay_state_dict(self) -> dict[str, Any]:
        """The replay buffer (saved beside the checkpoint by the runner, see ``Runner.save``)."""
        assert self.replay is not None
        return {"buffer": self.replay.state_dict(), "last": self._last}

    def load_replay_state_dict(self, state: dict[str, Any]) -> None:
        assert self.replay is not None
        self.replay.load_state_dict(state["buffer"])
        last = state.get("last")
        self._last = None if last is None else tuple(t.to(self.device) for t in last)
