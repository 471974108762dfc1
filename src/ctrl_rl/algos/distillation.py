"""Teacher-student distillation (``algo=distillation``): DAgger with a frozen teacher.

A teacher trained with privileged observations (terrain, true velocities: ``algo.actor_obs=[critic]``)
cannot run on a robot; a student on the deployable groups (an MLP, an observation history or a
recurrent core) can. Each step the student acts (with probability ``teacher_mix``, falling to 0,
the teacher's action is executed instead), the teacher labels the state with its own action, and
the update regresses the student onto the labels (``ctrl_rl.algos.losses.distillation_loss``):
the student learns on the states it visits itself, not only the teacher's (Ross et al. 2011). As
rsl_rl's ``Distillation``, with the teacher mixing schedule added. The student exports and deploys
like any policy; the teacher stays out of the checkpoint's model (its path is in the config).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
from torch import nn

from ctrl_rl import distributed
from ctrl_rl.algos.base import SupervisedLearner
from ctrl_rl.algos.checkpoints import load_learner
from ctrl_rl.algos.losses import distillation_loss, teacher_mix
from ctrl_rl.algos.registry import register_learner
from ctrl_rl.config_onpolicy import DistillationConfig
from ctrl_rl.env import Obs
from ctrl_rl.nets.actor_critic import GaussianActor
from ctrl_rl.nets.groups import GroupedModel, concat_groups
from ctrl_rl.nets.memory import Memory, MemoryStates, RecurrentPolicy, through_memory
from ctrl_rl.nets.normalizer import observe
from ctrl_rl.storage.rollout import Minibatch, RolloutStorage, env_minibatches, minibatches


class Student(GroupedModel):
    """The student: a Gaussian actor on ``algo.actor_obs``, behind a memory with ``algo.rnn_type``."""

    def __init__(self, obs_dims: dict[str, int], action_dim: int, cfg: DistillationConfig):
        super().__init__(obs_dims, cfg.actor_obs, cfg.actor_obs)
        rnn = cfg.rnn_type != "none"
        self.actor_memory = Memory(self.actor_dim, cfg.rnn_type, cfg.rnn_hidden_size, cfg.rnn_num_layers,
                                   cfg.normalize_obs) if rnn else None
        self.critic_memory = None  # no critic: MemoryStates tracks the actor's memory only
        self.actor = GaussianActor(cfg.rnn_hidden_size if rnn else self.actor_dim, action_dim, cfg.actor_hidden,
                                   cfg.activation, cfg.init_std, cfg.std_type, cfg.min_std, cfg.max_std,
                                   cfg.normalize_obs and not rnn)

    @property
    def actor_normalizer(self) -> nn.Module:
        return self.actor_memory.normalizer if self.actor_memory is not None else self.actor.normalizer

    @property
    def critic_normalizer(self) -> nn.Module:
        return nn.Identity()


def load_teacher(spec: str, obs_dims: dict[str, int], action_dim: int,
                 device: torch.device) -> tuple[GaussianActor, list[str]]:
    """The frozen Gaussian actor of checkpoint ``spec`` and the groups it reads, checked against this env."""
    _, path, alg, state = load_learner(spec)
    model = alg.model
    actor = getattr(model, "actor", None)
    if not isinstance(actor, GaussianActor) or getattr(model, "actor_memory", None) is not None:
        raise ValueError(f"teacher {path}: distillation needs a feed-forward Gaussian policy (algo=ppo or props "
                         "without algo.rnn_type); an observation history is fine")
    groups = list(model.actor_obs)
    wanted = {g: state["obs_dims"][g] for g in groups}
    if wanted != {g: obs_dims.get(g) for g in groups} or state["action_dim"] != action_dim:
        raise ValueError(f"teacher {path} reads {wanted} and outputs {state['action_dim']} action(s); this env has "
                         f"{obs_dims} and {action_dim}: train the teacher on this task with the same task.kwargs "
                         "for its groups")
    return actor.to(device).eval().requires_grad_(False), groups


class Distillation(SupervisedLearner):
    """Owns the student, its optimizer, the frozen teacher and the rollout of (student input, teacher label)."""

    def __init__(self, cfg: DistillationConfig, obs_dims: dict[str, int], action_dim: int, num_envs: int,
                 device: torch.device | str, seed: int = 0, action_bounds: tuple[float, float] | None = None,
                 inference_only: bool = False):
        self.cfg, self.device = cfg, torch.device(device)
        self.model = Student(obs_dims, action_dim, cfg).to(self.device)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=cfg.learning_rate)
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(seed)
        self.num_updates = 0
        self.memory = MemoryStates(self.model, num_envs, self.device) if self.model.actor_memory is not None else None
        self.teacher: GaussianActor | None = None
        self.teacher_groups: list[str] = []
        if inference_only:  # eval and export run the student alone
            return
        self.teacher, self.teacher_groups = load_teacher(cfg.teacher, obs_dims, action_dim, self.device)
        labels = {"teacher_mean": (action_dim,), "teacher_std": (action_dim,)}
        # the storage's critic slot is unused (width 1): the labels are taken while collecting
        self.storage = RolloutStorage(cfg.num_steps_per_env, num_envs, self.model.actor_dim, 1, action_dim,
                                      self.device, extra_shapes=labels)
        self._no_critic = torch.zeros(num_envs, 1, device=self.device)
        self._zeros = torch.zeros(num_envs, device=self.device)

    @property
    def mix(self) -> float:
        """This iteration's probability that an env executes the teacher's action."""
        return teacher_mix(self.num_updates, self.cfg.teacher_mix, self.cfg.teacher_mix_iterations)

    # ------------------------------------------------------------------ rollout
    @torch.no_grad()
    def act(self, obs: Obs) -> torch.Tensor:
        """The student's action (the teacher's with probability :attr:`mix`); records the teacher's label."""
        student_in = self.model.actor_input(obs)
        observe([(self.model.actor_normalizer, student_in)])
        features = student_in if self.memory is None else self.memory.actor_features(student_in,
                                                                                     self.storage.step == 0)
        mean, std = self.model.actor.distribution(features)
        t_mean, t_std = self.teacher.distribution(concat_groups(obs, self.teacher_groups))
        use_teacher = torch.rand(mean.shape[0], 1, generator=self.generator, device=self.device) < self.mix
        actions = torch.where(use_teacher, t_mean, mean)
        self.storage.add(student_in, self._no_critic, actions, self._zeros, mean, std, teacher_mean=t_mean,
                         teacher_std=t_std)
        return actions

    @torch.no_grad()
    def process_step(self, next_obs: Obs, rewards: torch.Tensor, terminated: torch.Tensor,
                     truncated: torch.Tensor, info: dict[str, Any]) -> None:
        self.storage.add_outcome(rewards, terminated, truncated, self._no_critic, self._no_critic)
        if self.memory is not None:
            self.memory.episodes_ended(terminated | truncated)

    # ------------------------------------------------------------------ update
    def _minibatches(self, flat: dict[str, torch.Tensor]) -> Iterator[Minibatch]:
        if self.memory is None:
            return minibatches(flat, self.cfg.num_minibatches, self.generator)
        s = self.storage
        return env_minibatches(flat, s.num_steps, s.dones, self.memory.start, self.cfg.num_minibatches, self.generator)

    def update(self) -> dict[str, float]:
        """Epochs of minibatch regression of the student onto the teacher's labels."""
        cfg, params = self.cfg, list(self.model.parameters())
        flat = self.storage.flat()
        total, n = torch.zeros((), device=self.device), 0
        for _ in range(cfg.num_learning_epochs):
            for mb in self._minibatches(flat):
                mb = through_memory(self.model, mb)
                mean, std = self.model.actor.distribution(mb.actor_obs)
                loss = distillation_loss(mean, mb.extra["teacher_mean"], cfg.loss, std, mb.extra["teacher_std"])
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                distributed.all_reduce_grads(params)
                nn.utils.clip_grad_norm_(params, cfg.max_grad_norm)
                self.optimizer.step()
                total += loss.detach()
                n += 1
        mix = self.mix
        self.storage.clear()
        self.num_updates += 1
        return {"distillation": float(total) / n, "teacher_mix": mix, "learning_rate": cfg.learning_rate,
                "mean_std": float(flat["old_std"].mean())}

    # ------------------------------------------------------------------ inference / io
    def inference_policy(self) -> nn.Module:
        actor = self.model.actor
        return actor if self.model.actor_memory is None else RecurrentPolicy(self.model.actor_memory, actor)

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(),
                "memory_states": self.memory.state_dict() if self.memory is not None else None}

    def load_state_dict(self, state: dict[str, Any], restore_rng: bool = True) -> None:
        super().load_state_dict(state, restore_rng)
        if restore_rng and self.memory is not None:
            self.memory.load_state_dict(state["memory_states"])


register_learner("distillation", config=DistillationConfig, build=Distillation, loop="online", torchrun=True)
