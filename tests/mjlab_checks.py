"""Checks of ``sims/isaaclab.py`` against real mjlab envs, run inside ``.venv-mjlab``.

``tests/test_isaaclab_adapter.py`` (main venv) runs ``.venv-mjlab/bin/python tests/mjlab_checks.py
<check>``: mjlab pins mujoco 3.11 and cannot be imported next to the main venv's mujoco 4.
Everything runs on CPU (MuJoCo Warp's CPU backend). mjlab draws from process-global RNGs, so
envs compared for determinism run one after the other, never interleaved.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from vecenv_conformance import Transition, check_action_clipping, check_rollout, default_actions  # noqa: E402

from ctrl_rl.env import Obs  # noqa: E402
from ctrl_rl.sims import make_env  # noqa: E402

CARTPOLE = "Mjlab-Cartpole-Balance"
GO1 = "Mjlab-Velocity-Flat-Unitree-Go1"
STEP_DT = {CARTPOLE: 0.05, GO1: 0.02}


def make(task: str, n: int, seed: int | None, steps: int, **kw: object):
    """The adapter on ``task`` with a time limit of ``steps`` control steps."""
    return make_env("mjlab", task, n, "cpu", seed=seed, episode_length_s=steps * STEP_DT[task], **kw)


def cartpole_initial(obs: Obs) -> torch.Tensor:
    """Balance reset: slider in +-0.1, hinge in +-0.034 rad, both speeds in +-0.01."""
    x, cos, sin, v, w = obs["policy"].unbind(1)
    eps = 1e-4
    return ((x.abs() <= 0.1 + eps) & (cos >= torch.cos(torch.tensor(0.034)) - eps)
            & (sin.abs() <= torch.sin(torch.tensor(0.034)) + eps) & (v.abs() <= 0.01 + eps) & (w.abs() <= 0.01 + eps))


def _actions(task: str, n: int, dim: int, steps: int, seed: int = 7) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    scale = 1.0 if task == CARTPOLE else 0.3  # Go1: joint offsets small enough to keep standing
    return [(torch.rand(n, dim, generator=gen) * 2 - 1) * scale for _ in range(steps)]


def _raw_env(task: str, n: int, seed: int, episode_length_s: float, only_time_out: bool = False):
    """mjlab's own env, built the way the adapter's factory builds it, without the adapter."""
    import mjlab.tasks  # noqa: F401
    from mjlab.envs import ManagerBasedRlEnv
    from mjlab.tasks.registry import load_env_cfg

    cfg = load_env_cfg(task)
    cfg.scene.num_envs, cfg.seed, cfg.episode_length_s = n, seed, episode_length_s
    if only_time_out:  # a twin that never falls over
        cfg.terminations = {k: v for k, v in cfg.terminations.items() if k == "time_out"}
    env = ManagerBasedRlEnv(cfg, device="cpu")
    env.reset(seed=seed)
    return env


def _policy(raw: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {("policy" if k == "actor" else k): v.clone() for k, v in raw.items()}


# ---- (a) contract 1 conformance -------------------------------------------------------------
def conformance() -> None:
    """The generic checks that apply to an env without get_state, on cartpole and Go1."""
    short_cartpole = lambda n, seed: make(CARTPOLE, n, seed, steps=20)  # noqa: E731
    check_rollout(short_cartpole, num_envs=8, seed=0, is_initial_obs=cartpole_initial)
    check_action_clipping(short_cartpole, num_envs=8, num_steps=25)  # unbounded: 1e6 stays finite
    # Go1: policy 48 / critic 72 dims, velocity commands, observation noise, and with wild
    # actions (x8) falls (terminated) as well as time-outs (truncated).
    seen = {"terminated": 0, "truncated": 0}

    def count(tr: Transition) -> None:
        seen["terminated"] += int(tr.terminated.sum())
        seen["truncated"] += int(tr.truncated.sum())

    check_rollout(lambda n, seed: make(GO1, n, seed, steps=25), num_envs=6, num_steps=40, seed=1,
                  sample_actions=_wild, check_transition=count)
    assert seen["terminated"] > 0 and seen["truncated"] > 0, seen
    seeding()


def _wild(gen: torch.Generator, n: int, dim: int) -> torch.Tensor:
    return default_actions(gen, n, dim) * 8.0


def seeding() -> None:
    """Same seed and actions: identical outputs through resets; another seed: another start.

    One env at a time (the RNGs are the process's), unlike check_seeding's interleaving."""
    def run(task: str, seed: int, steps: int) -> list[torch.Tensor]:
        env = make(task, 4, seed, steps=10)
        out = list(env.reset(seed=seed).values())
        for a in _actions(task, 4, env.action_dim, steps):
            obs, rew, term, trunc, info = env.step(a)
            out += [*obs.values(), rew, term, trunc, *info["final_obs"].values(), info["episode"]["return"]]
        env.close()
        return out

    for task in (CARTPOLE, GO1):
        first, second = run(task, 3, 25), run(task, 3, 25)
        for i, (x, y) in enumerate(zip(first, second, strict=True)):
            assert torch.equal(x, y), f"{task}: same seed, output #{i} differs"
        assert not torch.equal(run(task, 4, 0)[0], first[0]), f"{task}: seeds 3 and 4 gave the same reset obs"


# ---- (b) final_obs is the true last observation ---------------------------------------------
def final_obs() -> None:
    for task in (CARTPOLE, GO1):
        _final_obs_equals_untruncated_twin(task)
    _terminal_final_obs_equals_twin()
    _reset_path_reproduces_mjlab_autoreset()


def _final_obs_equals_untruncated_twin(task: str, n: int = 4, steps: int = 20, seed: int = 5) -> None:
    """Every env times out at ``steps``; a twin without time limit (same seed, same actions)
    shows at that step the observation the env would have had: final_obs must equal it."""
    env = make(task, n, seed, steps=steps)
    assert env.final_obs_source == "manual_reset" and env.max_episode_length == steps
    actions = _actions(task, n, env.action_dim, steps)
    env.reset(seed=seed)
    for t, a in enumerate(actions, 1):
        obs, _, terminated, truncated, info = env.step(a)
        assert not terminated.any(), f"{task}: an env fell at step {t}; the twin comparison needs none"
        assert bool(truncated.all()) == (t == steps)
    final = info["final_obs"]
    env.close()

    twin = _raw_env(task, n, seed, episode_length_s=1e4)
    for a in actions:
        raw, _, _, twin_trunc, _ = twin.step(a)
    assert not twin_trunc.any()
    expected = _policy(raw)
    for group, value in expected.items():
        assert torch.equal(final[group], value), f"{task}: final_obs[{group!r}] is not the twin's obs at step {steps}"
        assert (obs[group] != final[group]).any(dim=1).all(), f"{task}: obs[{group!r}] was not reset"
    if task == CARTPOLE:  # and it is the physical state: cart position, pole speed
        robot = twin.scene["cartpole"].data
        assert torch.equal(final["policy"][:, 0], robot.joint_pos[:, 0])
        assert torch.equal(final["policy"][:, 4], robot.joint_vel[:, 1])
        assert cartpole_initial(obs).all() and not cartpole_initial(final).any()
    twin.close()
    print(f"{task}: final_obs == untruncated twin's obs at step {steps} for all {n} envs")


def _terminal_final_obs_equals_twin(n: int = 8, seed: int = 6) -> None:
    """Go1 with wild actions: at the first step where robots fall, their final_obs equals the
    observation of a twin whose robots may lie on the ground (no fall termination)."""
    env = make(GO1, n, seed, steps=1000)
    env.reset(seed=seed)
    gen = torch.Generator().manual_seed(11)
    actions: list[torch.Tensor] = []
    while True:
        actions.append(_wild(gen, n, env.action_dim))
        obs, _, terminated, truncated, info = env.step(actions[-1])
        assert not truncated.any() and len(actions) < 200
        if terminated.any():
            break
    env.close()
    twin = _raw_env(GO1, n, seed, episode_length_s=1e4, only_time_out=True)
    for a in actions:
        raw, _, twin_term, _, _ = twin.step(a)
    twin.close()
    assert not twin_term.any()
    rows = terminated
    for group, value in _policy(raw).items():
        assert torch.equal(info["final_obs"][group][rows], value[rows]), f"final_obs[{group!r}] of fallen robots"
        assert torch.equal(obs[group][~rows], value[~rows]), f"obs[{group!r}] of standing robots"
        assert (obs[group][rows] != value[rows]).any(dim=1).all(), f"fallen robots' obs[{group!r}] not reset"
    print(f"{GO1}: final_obs of {int(rows.sum())} fallen robots (step {len(actions)}) == twin's obs")


def _reset_path_reproduces_mjlab_autoreset(n: int = 6, steps: int = 50, seed: int = 2) -> None:
    """Our reset(env_ids) after step == mjlab's own same-step auto-reset, bit for bit
    (cartpole draws random numbers only in its reset events, so the streams stay aligned)."""
    env = make(CARTPOLE, n, seed, steps=20)
    actions = _actions(CARTPOLE, n, env.action_dim, steps)
    ours = [env.reset(seed=seed)] + [env.step(a) for a in actions]
    env.close()
    raw = _raw_env(CARTPOLE, n, seed, episode_length_s=20 * STEP_DT[CARTPOLE])
    assert raw.cfg.auto_reset
    theirs = [_policy(raw.reset(seed=seed)[0])]
    for a in actions:
        o, r, te, tr, _ = raw.step(a)
        theirs.append((_policy(o), r.clone(), te.clone(), tr.clone()))
    resets = 0
    for t in range(1, steps + 1):
        (obs, rew, term, trunc, _), (o, r, te, tr) = ours[t], theirs[t]
        assert all(torch.equal(obs[k], o[k]) for k in o), f"obs differ at step {t}"
        assert torch.equal(rew, r) and torch.equal(term, te) and torch.equal(trunc, tr), f"step {t}"
        resets += int(trunc.sum())
    assert resets == n * (steps // 20)
    print(f"adapter == mjlab auto-reset for {steps} steps through {resets} resets")


def stagger(n: int = 16, steps: int = 20, seed: int = 4) -> None:
    """``stagger_episodes`` sets mjlab's ``episode_length_buf``: its own time-out term then ends the first
    episodes on different steps, each reported with its full length."""
    env = make(CARTPOLE, n, seed, steps=steps)
    env.reset(seed=seed)
    assert env.supports_stagger
    env.stagger_episodes()
    assert torch.equal(env.env.episode_length_buf.cpu(), env._episode_length.cpu())
    ends = torch.zeros(n, dtype=torch.long)
    for t in range(1, steps + 1):
        _, _, terminated, truncated, info = env.step(torch.zeros(n, env.action_dim))
        assert not terminated.any(), f"a pole fell at step {t} without a push"
        assert (info["episode"]["length"][truncated] == steps).all()
        ends = torch.where(truncated & (ends == 0), t, ends)
    env.close()
    assert bool((ends >= 1).all()) and len(ends.unique()) >= 6, ends.tolist()
    print(f"staggered: first time-outs on {len(ends.unique())} different steps of {steps}")


def lift_success(n: int = 4, steps: int = 25) -> None:
    """Mjlab-Lift-Cube-Yam: mjlab's own success (its lift command's ``episode_success``, latched once the cube
    was within ``success_threshold`` of the target) reaches ``info["episode_metrics"]["success_rate"]`` at each
    episode's end, read before the adapter resets the row. Targets put on the resting cubes of the first half
    (reached at once) and 1 m above the rest (never reached) give 1 and 0."""
    env = make_env("mjlab", "Mjlab-Lift-Cube-Yam", n, "cpu", seed=0, episode_length_s=steps * 0.02)
    env.reset(seed=0)
    term = env.env.command_manager.get_term("lift_height")
    cube = env.env.scene["cube"].data.root_link_pos_w
    term.target_pos[:] = cube + torch.tensor([0.0, 0.0, 1.0])
    term.target_pos[: n // 2] = cube[: n // 2]
    for t in range(1, steps + 1):
        _, _, terminated, truncated, info = env.step(torch.zeros(n, env.action_dim))
        done = terminated | truncated
        assert ("episode_metrics" in info) == bool(done.any()), t
    assert bool(done.all()), "every episode ends at its time limit"
    success = info["episode_metrics"]["success_rate"].cpu()
    env.close()
    assert success.tolist() == [1.0] * (n // 2) + [0.0] * (n - n // 2), success.tolist()
    print(f"lift: success_rate {success.tolist()} at the episodes' end (targets on the cube, 1 m above it)")


# ---- helpers for (c): timing the CLI is done by the caller --------------------------------
CHECKS: dict[str, Callable[[], None]] = {"conformance": conformance, "final_obs": final_obs, "stagger": stagger,
                                         "lift_success": lift_success}

if __name__ == "__main__":
    torch.set_num_threads(1)
    for name in sys.argv[1:]:
        t0 = time.perf_counter()
        CHECKS[name]()
        print(f"CHECK {name} passed in {time.perf_counter() - t0:.1f}s", flush=True)
