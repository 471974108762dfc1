"""Uni-O4 (Lei et al., ICLR 2024): one on-policy objective offline and online.

Offline (``UniO4Offline``): ensemble BC, IQL Q/V, a dynamics ensemble, then BPPO steps each
accepted only when offline policy evaluation improves. The hand-over: the runner scores the
accepted policies in the env (deterministic episodes, every candidate from the same starts) and
``start_online`` copies the best one into a plain :class:`~ctrl_rl.algos.ppo.PPO`'s actor and the
offline V into its critic, with the dataset's observation statistics. Online it *is* that PPO,
configured by the schema: two step sizes (``critic_learning_rate``), Uni-O4's conservative clip,
an optional critic warm-up, and the normalizers it keeps or feeds.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ctrl_rl.algos.base import Learner
from ctrl_rl.algos.ppo import PPO
from ctrl_rl.algos.registry import register_learner
from ctrl_rl.algos.uni_o4_offline import UniO4Offline
from ctrl_rl.config_offline import UniO4Config
from ctrl_rl.env import Obs
from ctrl_rl.storage.dataset import Dataset

PHASES = ("offline", "online")


class UniO4(Learner):
    """Uni-O4's offline learner and the PPO it hands over to (``set_dataset`` first)."""

    def __init__(self, cfg: UniO4Config, obs_dims: dict[str, int], action_dim: int, num_envs: int,
                 device: torch.device | str, seed: int = 0, action_bounds: tuple[float, float] | None = (-1.0, 1.0),
                 inference_only: bool = False):
        self.cfg = cfg
        # online statistics only with online_update_normalizer (default: the dataset's, kept); a
        # fresh critic has no dataset statistics and always learns its own
        observe = ("actor", "critic") if cfg.online_update_normalizer else \
            ("critic",) if cfg.online_critic == "fresh" else ()
        self.ppo = PPO(cfg, obs_dims, action_dim, num_envs, device, seed=seed, observe=observe)
        self.model, self.generator, self.device = self.ppo.model, self.ppo.generator, self.ppo.device
        self.offline = UniO4Offline(cfg, self.model.actor_dim, action_dim, self.device, action_bounds, self.generator,
                                    seed=seed)
        self.phase = "offline"
        self.offline_iteration = 0
        self.chosen = 0  # the member handed to the online phase
        self.selection_env_steps = 0  # env steps the hand-over's evaluation took
        self.selection_returns: list[float] = []
        self.selection_success: list[float] = []  # the candidates' success rates, where the task scores one

    # ------------------------------------------------------------------ offline phase
    def set_dataset(self, data: Dataset) -> None:
        if data.obs_dim != self.model.actor_dim or data.action_dim != self.model.actor.action_dim:
            raise ValueError(f"the dataset has {data.obs_dim}-dim observations and {data.action_dim}-dim actions; "
                             f"the policy reads {self.model.actor_dim} (groups {self.model.actor_obs}) and acts in "
                             f"{self.model.actor.action_dim}: collect the dataset on this task")
        self.offline.set_dataset(data, fit_normalizers=self.offline_iteration == 0 and self.phase == "offline")

    @property
    def offline_done(self) -> bool:
        return self.offline_iteration >= self.cfg.offline_iterations

    def offline_update(self) -> dict[str, float]:
        """One offline iteration: ``updates_per_iteration`` pretraining or BPPO steps (then OPE)."""
        cfg, off = self.cfg, self.offline
        k = self.offline_iteration
        totals: dict[str, torch.Tensor] = {}
        improving = k >= cfg.pretrain_iterations
        for s in range(cfg.updates_per_iteration):
            if improving:
                step = (k - cfg.pretrain_iterations) * cfg.updates_per_iteration + s
                stats = off.improve_step(step)
            else:
                stats = off.pretrain_step()
            for key, v in stats.items():
                totals[key] = totals.get(key, 0.0) + v
        out = {key: float(v) / cfg.updates_per_iteration for key, v in totals.items()}
        self.offline_iteration += 1
        if self.offline_iteration == cfg.pretrain_iterations:
            out.update(off.finish_pretraining())
        elif improving:
            accepted, scores = off.accept_improved()
            out["ope_accepted"] = float(accepted)
            out["ope_score"] = float(scores.mean())
        out["ope_best"] = float(off.best_scores.max()) if self.offline_iteration >= cfg.pretrain_iterations else 0.0
        self.chosen = int(off.best_scores.argmax())
        return out

    def candidates(self) -> list[nn.Module]:
        """The accepted policies, one per member (what the hand-over chooses from)."""
        return list(self.offline.accepted)

    def start_online(self, choice: int) -> None:
        """Member ``choice``'s accepted policy becomes PPO's actor and the offline V its critic
        (``online_critic=fresh``: the critic stays as built)."""
        if self.phase == "online":
            raise RuntimeError("the online phase has already started")
        self.chosen = choice
        self.model.actor.load_state_dict(self.offline.accepted[choice].state_dict())
        if self.cfg.online_critic == "offline_v":
            self.model.critic.load_state_dict(self.offline.v.state_dict())
        if self.cfg.online_init_std is not None:
            self.model.actor.reset_std(self.cfg.online_init_std)
        self.phase = "online"

    # ------------------------------------------------------------------ online phase: PPO's
    def act(self, obs: Obs) -> torch.Tensor:
        if self.phase != "online":
            raise RuntimeError("UniO4.act before start_online: the offline phase collects no data")
        return self.ppo.act(obs)

    def process_step(self, next_obs: Obs, rewards: torch.Tensor, terminated: torch.Tensor,
                     truncated: torch.Tensor, info: dict[str, Any]) -> None:
        self.ppo.process_step(next_obs, rewards, terminated, truncated, info)

    def prepare_update(self) -> None:
        self.ppo.prepare_update()

    def update(self) -> dict[str, float]:
        """PPO's update (the offline iterations are :meth:`offline_update`, which the runner calls)."""
        if self.phase != "online":
            raise RuntimeError("UniO4.update before start_online: the runner calls offline_update offline")
        return self.ppo.update()

    def set_run_length(self, updates: int) -> None:
        self.ppo.set_run_length(updates)

    # ------------------------------------------------------------------ inference / io
    def inference_policy(self) -> nn.Module:
        """Online: PPO's actor; offline: the accepted policy with the best OPE score so far (while
        pretraining: the first cloned policy)."""
        if self.phase == "online":
            return self.model.actor
        if self.offline_iteration < self.cfg.pretrain_iterations:
            return self.offline.actors[0]
        return self.offline.accepted[self.chosen]

    def state_dict(self) -> dict[str, Any]:
        return {**self.ppo.state_dict(), "phase": self.phase, "offline_iteration": self.offline_iteration,
                "chosen": self.chosen, "offline": self.offline.state_dict(),
                "selection_env_steps": self.selection_env_steps, "selection_returns": self.selection_returns,
                "selection_success": self.selection_success,
                "offline_optimizers": self.offline.optim_state_dict()}

    def load_state_dict(self, state: dict[str, Any], restore_rng: bool = True) -> None:
        self.ppo.load_state_dict(state, restore_rng)
        self.phase, self.offline_iteration, self.chosen = state["phase"], state["offline_iteration"], state["chosen"]
        self.selection_env_steps, self.selection_returns = state["selection_env_steps"], state["selection_returns"]
        self.selection_success = state.get("selection_success", [])  # checkpoints before 2026-12-02 lack it
        self.offline.load_state_dict(state["offline"])
        self.offline.load_optim_state_dict(state["offline_optimizers"])


register_learner("uni_o4", config=UniO4Config, build=UniO4, loop="offline_to_online")
